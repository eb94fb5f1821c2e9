/**
 * Gateways on one Redis server and on a spawned 3-master cluster, for the suites that run the same
 * tests on both (fan-shards-line, admitter.timing): each gateway its own connection (so it can die
 * alone) and waiting room. `singleAndCluster()` registers the hooks that spawn the cluster and
 * close everything it opened.
 */
import type { Cluster } from "ioredis";
import { Redis } from "ioredis";
import { afterAll, beforeAll, inject } from "vitest";
import { createWaitingRoom, type WaitingRoom, type WaitingRoomOptions } from "../../src/waiting-room/index.js";
import { clusterClient, type SpawnedRedisCluster, spawnRedisCluster } from "../support/redis-cluster.js";
import { SECRET } from "./helpers.js";

export type Target = "single" | "cluster";

export interface SingleAndCluster {
  /** The test Redis server's connection, for reading what a test wrote. */
  readonly single: Redis;
  /** The cluster's connection (once the suite's beforeAll ran). */
  readonly onCluster: Cluster;
  /** The connection to read `target` with. */
  raw(target: Target): Redis | Cluster;
  /** A gateway process on `target`, with `fanShards` fan shards unless the options say otherwise. */
  gateway(
    target: Target,
    options?: Omit<WaitingRoomOptions, "redis" | "secret">,
  ): { room: WaitingRoom; client: Redis | Cluster };
}

export function singleAndCluster(fanShards: number): SingleAndCluster {
  let cluster: SpawnedRedisCluster | undefined;
  let onCluster: Cluster | undefined;
  const single = new Redis(inject("redisUrl"), { maxRetriesPerRequest: 1 });
  const opened: { room: WaitingRoom; client: Redis | Cluster }[] = [];
  const clusterConnection = () => {
    if (!onCluster) throw new Error("the cluster is spawned in the suite's beforeAll");
    return onCluster;
  };

  beforeAll(async () => {
    cluster = await spawnRedisCluster({ masters: 3 });
    onCluster = await clusterClient(cluster);
  }, 120_000);

  afterAll(async () => {
    for (const { room, client } of opened) {
      await room.close().catch(() => undefined);
      client.disconnect();
    }
    single.disconnect();
    onCluster?.disconnect();
    await cluster?.close();
  });

  return {
    single,
    get onCluster() {
      return clusterConnection();
    },
    raw: (target) => (target === "single" ? single : clusterConnection()),
    gateway(target, options = {}) {
      const client =
        target === "single"
          ? new Redis(inject("redisUrl"), { maxRetriesPerRequest: 1 })
          : (clusterConnection().duplicate() as Cluster);
      const room = createWaitingRoom({ fanShards, ...options, redis: client, secret: SECRET });
      opened.push({ room, client });
      return { room, client };
    },
  };
}
