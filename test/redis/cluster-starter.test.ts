/**
 * The local cluster starter (src/local/redis.ts spawnRedisCluster) with a single master: the case
 * the line benchmark (npm run bench:line-cluster) measures beside 3 and 6. A lone master never
 * meets a peer, so unless it is told its address it answers CLUSTER SLOTS with an empty host and
 * no client ever becomes ready.
 */
import { afterAll, beforeAll, expect, it } from "vitest";
import { connectRedis } from "../../src/redis/connect.js";
import type { RedisClient } from "../../src/redis/scripts.js";
import { type SpawnedRedisCluster, spawnRedisCluster } from "../support/redis-cluster.js";

let cluster: SpawnedRedisCluster | undefined;
let client: RedisClient | undefined;

beforeAll(async () => {
  cluster = await spawnRedisCluster({ masters: 1 });
}, 30_000);

afterAll(async () => {
  client?.disconnect();
  await cluster?.close();
});

it("a 1-master cluster names a reachable host for all 16,384 slots and serves the gateway's client", async () => {
  client = connectRedis({ kind: "cluster", nodes: cluster!.nodes }, "commands");
  await new Promise<void>((resolve, reject) => {
    client!.once("ready", () => resolve());
    client!.once("error", reject);
  });
  const slots = await client.cluster("SLOTS");
  expect(slots).toHaveLength(1);
  expect(slots[0]?.slice(0, 2)).toEqual([0, 16_383]);
  expect(slots[0]?.[2]?.slice(0, 2)).toEqual(["127.0.0.1", cluster!.masters[0]!.port]);
  await client.set("{evt:starter}:k", "v");
  expect(await client.get("{evt:starter}:k")).toBe("v");
}, 30_000);
