/**
 * The admission loop's shared measurements on a 3-master Redis Cluster started here: two gateways
 * record claims for events whose keys live on different masters, flush them on their ticks (a
 * pipeline per event: one node each), and the slots' claimers take them and step the loop.
 */
import type { Cluster } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { StatsSample } from "../../src/stats/index.js";
import { statsKeys } from "../../src/stats/keys.js";
import { ADMIN_TOKEN, createTable, eventInput, putEvent, uniqueId } from "../gateway/harness.js";
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

describe("the admission loop on a Redis Cluster", () => {
  it("claims recorded on two gateways for events on three masters reach each event's steps", async () => {
    const tableName = await createTable();
    const target = { kind: "cluster" as const, nodes: redisCluster!.nodes };
    for (let i = 0; i < 2; i++) {
      gateways.push(startCountedGateway(tableName, { sampleIntervalMs: 250, countsIntervalMs: 250 }, target));
    }
    const [a, b] = gateways as [CountedGateway, CountedGateway];
    const owners = new Map<string, string>();
    while (owners.size < 3) {
      const eventId = uniqueId();
      const slot = Number(await client.cluster("KEYSLOT", statsKeys(eventId).loopMeasures));
      const owner = client.slots[slot]?.[0];
      if (owner && ![...owners.values()].includes(owner)) owners.set(eventId, owner);
    }
    const events = [...owners.keys()];
    const input = eventInput({ waitingRoom: { admitPerSecond: 1, maxActive: 100, sessionSeconds: 600 } });
    for (const eventId of events) {
      expect((await putEvent(a, eventId, input)).status).toBe(201);
      const joins = await Promise.all(
        ["w1", "w2", "w3", "w4", "w5"].map((fanId) =>
          b.request(`/v1/events/${eventId}/queue`, { method: "POST", json: { fanId } }),
        ),
      );
      expect(joins.every((r) => r.status === 201)).toBe(true);
      const on = await a.request(`/v1/admin/events/${eventId}/waiting-room`, {
        method: "PATCH",
        token: ADMIN_TOKEN,
        json: { autoAdmit: { enabled: true, minPerSecond: 1, maxPerSecond: 10 } },
      });
      expect(on.status).toBe(200);
      b.deps.stats.sampler.watch(eventId);
    }
    const stored = async (eventId: string) =>
      (await client.zrange(statsKeys(eventId).history, "0", "-1")).map((m) => JSON.parse(m) as StatsSample);
    const stepsWithClaims = async (eventId: string) =>
      (await stored(eventId)).filter((s) => s.loop && (s.claims ?? 0) > 0).length;
    let rounds = 0;
    while ((await Promise.all(events.map(stepsWithClaims))).some((n) => n < 1)) {
      for (const eventId of events) {
        a.deps.stats.claims.record(eventId, 20);
        b.deps.stats.claims.record(eventId, 30);
      }
      await Promise.all([a.deps.stats.sampler.tick(), b.deps.stats.sampler.tick()]);
      if (++rounds > 2_000) throw new Error("no step saw the claims on the cluster");
    }
    for (const eventId of events) {
      const steps = (await stored(eventId)).filter((s) => s.loop);
      for (const s of steps) {
        expect(s.loop!.rate).toBeGreaterThanOrEqual(1);
        expect(s.loop!.rate).toBeLessThanOrEqual(10);
      }
      expect(steps.some((s) => s.claimP99Ms !== null && s.claimP99Ms! <= 50)).toBe(true);
    }
  }, 240_000);
});
