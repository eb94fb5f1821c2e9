/**
 * The stats scripts and keys on a 3-master Redis Cluster started here: two gateways' samplers
 * ticking together write one sample per slot, the counts snapshot is shared, and the routes answer
 * from the cluster, for events on different masters (every key of an event carries its hash tag;
 * the list of events to sample is a key of its own).
 */
import type { Cluster } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { StatsSample } from "../../src/stats/index.js";
import { statsKeys } from "../../src/stats/keys.js";
import { ADMIN_TOKEN, createTable, putEvent, uniqueId } from "../gateway/harness.js";
import { clusterClient, type SpawnedRedisCluster, spawnRedisCluster } from "../support/redis-cluster.js";
import { type CountedGateway, startCountedGateway } from "./support.js";

let redisCluster: SpawnedRedisCluster | undefined;
let client: Cluster;
const gateways: CountedGateway[] = [];

beforeAll(async () => {
  redisCluster = await spawnRedisCluster({ masters: 3 });
  client = await clusterClient(redisCluster);
}, 60_000);

afterAll(async () => {
  for (const gw of gateways) await gw.close();
  client?.disconnect();
  await redisCluster?.close();
});

describe("the stats sampler on a Redis Cluster", () => {
  it("two gateways write one sample per slot of events on different masters, and the routes answer", async () => {
    const tableName = await createTable();
    const target = { kind: "cluster" as const, nodes: redisCluster!.nodes };
    const intervalMs = 250;
    for (let i = 0; i < 2; i++) {
      gateways.push(
        startCountedGateway(tableName, { sampleIntervalMs: intervalMs, countsIntervalMs: intervalMs }, target),
      );
    }
    const [a, b] = gateways as [CountedGateway, CountedGateway];
    // Events whose keys live on three different masters.
    const owners = new Map<string, string>();
    while (owners.size < 3) {
      const eventId = uniqueId();
      const slot = Number(await client.cluster("KEYSLOT", statsKeys(eventId).history));
      const owner = client.slots[slot]?.[0];
      if (owner && ![...owners.values()].includes(owner)) owners.set(eventId, owner);
    }
    const events = [...owners.keys()];
    for (const eventId of events) {
      expect((await putEvent(a, eventId)).status).toBe(201);
      const stats = await b.request(`/v1/admin/events/${eventId}/stats`, { token: ADMIN_TOKEN });
      expect(stats.status).toBe(200);
      expect(((await stats.json()) as { counts: { source: string } }).counts.source).toBe("computed");
    }
    const stored = async (eventId: string) =>
      (await client.zrange(statsKeys(eventId).history, "0", "-1")).map((m) => JSON.parse(m) as StatsSample);
    let rounds = 0;
    let recorded = 0;
    while ((await Promise.all(events.map(stored))).some((samples) => samples.length < 3)) {
      const [x, y] = await Promise.all([a.deps.stats.sampler.tick(), b.deps.stats.sampler.tick()]);
      recorded += (x ?? 0) + (y ?? 0);
      if (++rounds > 2_000) throw new Error("the samplers recorded nothing on the cluster");
    }
    // One claimer per slot, whichever gateway: every sample recorded is stored, each in a slot of
    // its own. (Not "at most one per round": a round can outlast a slot on a loaded machine; CI saw 4.)
    expect((await Promise.all(events.map(stored))).reduce((n, samples) => n + samples.length, 0)).toBe(recorded);
    for (const eventId of events) {
      const slots = (await stored(eventId)).map((s) => Math.floor(s.at / intervalMs));
      expect(new Set(slots).size).toBe(slots.length);
      const res = await a.request(`/v1/admin/events/${eventId}/stats/history`, { token: ADMIN_TOKEN });
      expect(res.status).toBe(200);
      const body = (await res.json()) as { samples: StatsSample[] };
      expect(body.samples.map((s) => s.at)).toEqual((await stored(eventId)).map((s) => s.at));
      expect(body.samples[0]).toMatchObject({ available: 170, sold: 0, waiting: 0 });
    }
  }, 120_000);
});
