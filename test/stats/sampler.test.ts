/**
 * The stats sampler on the real Redis and the local DynamoDB: several gateways ticking at once
 * write exactly one sample per slot; the history is trimmed to its window and its size; the
 * history route answers the samples oldest first, pages with `since`, and refuses a bad `since`
 * with the JSON error body.
 */
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { statsKeys } from "../../src/stats/keys.js";
import type { StatsSample } from "../../src/stats/index.js";
import { ADMIN_TOKEN, admitFans, createTable, putEvent, uniqueId } from "../gateway/harness.js";
import { type CountedGateway, startCountedGateway } from "./support.js";

let tableName: string;
let redis: Redis;
const gateways: CountedGateway[] = [];

beforeAll(async () => {
  tableName = await createTable();
  redis = new Redis(inject("redisUrl"));
});

afterAll(async () => {
  for (const gw of gateways) await gw.close();
  redis.disconnect();
});

function gateway(stats: Parameters<typeof startCountedGateway>[1], table = tableName): CountedGateway {
  const gw = startCountedGateway(table, stats);
  gateways.push(gw);
  return gw;
}

async function stored(eventId: string): Promise<StatsSample[]> {
  const members = await redis.zrange(statsKeys(eventId).history, "0", "-1");
  return members.map((m) => JSON.parse(m) as StatsSample);
}

const PATIENCE = { timeout: 20_000, interval: 20 };

describe("the stats sampler", () => {
  it("three gateways ticking at once write one sample per slot, in time order", async () => {
    const intervalMs = 250;
    const trio = [0, 1, 2].map(() => gateway({ sampleIntervalMs: intervalMs, countsIntervalMs: intervalMs }));
    const [a, b, c] = trio as [CountedGateway, CountedGateway, CountedGateway];
    const eventId = uniqueId();
    expect((await putEvent(a, eventId)).status).toBe(201);
    await admitFans(a, eventId, ["f1", "f2"]);
    // An operator looks at it on one gateway: listed for all of them.
    b.deps.stats.sampler.watch(eventId);

    // Rounds of ticks from the three at once, all the same moment, until several slots went by.
    let recorded = 0;
    const rounds: number[] = [];
    while ((await stored(eventId)).length < 6) {
      const counts = await Promise.all(
        trio.flatMap((gw) => [gw.deps.stats.sampler.tick(), gw.deps.stats.sampler.tick()]),
      );
      // A sampler's second tick joins its first (one tick at a time per process): count each once.
      const round = (counts[0] ?? 0) + (counts[2] ?? 0) + (counts[4] ?? 0);
      rounds.push(round);
      recorded += round;
      if (rounds.length > 2_000) throw new Error("the samplers recorded nothing");
    }
    // One claimer per slot: every sample any of the three recorded is of a slot of its own. (Not
    // "one per round": on a loaded machine a round of six ticks can outlast a 250 ms slot, and
    // then two slots are each claimed once within it; CI saw that.)
    const samples = await stored(eventId);
    expect(samples).toHaveLength(recorded);
    const slots = samples.map((s) => Math.floor(s.at / intervalMs));
    expect(new Set(slots).size).toBe(slots.length);
    expect([...slots].sort((x, y) => x - y)).toEqual(slots);
    // What a sample says: the line and the store.
    expect(samples.at(-1)).toMatchObject({ admitted: 2, active: 2, waiting: 0, sold: 0, held: 0, available: 170 });
    expect(samples.at(-1)?.admitPerSecond).toBe(10_000);
    expect(c.deps.stats.sampler.intervalMs).toBe(intervalMs);
  }, 60_000);

  it("their timers, running side by side, still write one sample per slot", async () => {
    const intervalMs = 200;
    const pair = [0, 1].map(() => gateway({ sampleIntervalMs: intervalMs, countsIntervalMs: intervalMs }));
    const eventId = uniqueId();
    expect((await putEvent(pair[0]!, eventId)).status).toBe(201);
    pair[1]!.deps.stats.sampler.watch(eventId);
    for (const gw of pair) gw.deps.stats.sampler.start();
    try {
      await expect.poll(async () => (await stored(eventId)).length, PATIENCE).toBeGreaterThanOrEqual(10);
    } finally {
      for (const gw of pair) gw.deps.stats.sampler.stop();
    }
    const slots = (await stored(eventId)).map((s) => Math.floor(s.at / intervalMs));
    expect(new Set(slots).size).toBe(slots.length);
  }, 60_000);

  it("trims samples older than the window, and keeps at most maxSamples", async () => {
    const intervalMs = 100;
    const windowMs = 1_500;
    const gw = gateway({ sampleIntervalMs: intervalMs, countsIntervalMs: intervalMs, windowMs });
    // Its own table: the events to sample are listed per table, and this one must not sample the other's.
    const capped = gateway(
      { sampleIntervalMs: intervalMs, countsIntervalMs: intervalMs, maxSamples: 3 },
      await createTable(),
    );
    const [eventId, cappedId] = [uniqueId(), uniqueId()];
    expect((await putEvent(gw, eventId)).status).toBe(201);
    expect((await putEvent(capped, cappedId)).status).toBe(201);
    gw.deps.stats.sampler.watch(eventId);
    capped.deps.stats.sampler.watch(cappedId);
    gw.deps.stats.sampler.start();
    capped.deps.stats.sampler.start();
    let samples: StatsSample[];
    try {
      await expect.poll(async () => (await stored(eventId))[0]?.at, PATIENCE).toBeDefined();
      const first = (await stored(eventId))[0]!.at;
      // Polled until the first sample has gone (it fell out of the window) while later ones stay.
      // Read while sampled: the key expires one window after its last sample.
      samples = [];
      await expect
        .poll(async () => {
          samples = await stored(eventId);
          return samples.length > 0 && !samples.some((s) => s.at === first);
        }, PATIENCE)
        .toBe(true);
      await expect.poll(async () => (await stored(cappedId)).length, PATIENCE).toBe(3);
    } finally {
      gw.deps.stats.sampler.stop();
      capped.deps.stats.sampler.stop();
    }
    const newest = samples.at(-1)!.at;
    expect(samples.every((s) => s.at >= newest - windowMs)).toBe(true);
    expect(samples.length).toBeLessThanOrEqual(windowMs / intervalMs + 1);
    // The capped one: more were written than kept, the newest kept.
    const kept = await stored(cappedId);
    expect(kept).toHaveLength(3);
    expect(await redis.pttl(statsKeys(cappedId).history)).toBeGreaterThan(0);
  }, 60_000);
});

describe("GET /v1/admin/events/{eventId}/stats/history", () => {
  it("answers the samples oldest first, a page at a time from `since`", async () => {
    const intervalMs = 150;
    const gw = gateway({ sampleIntervalMs: intervalMs, countsIntervalMs: intervalMs });
    const eventId = uniqueId();
    expect((await putEvent(gw, eventId)).status).toBe(201);
    const empty = await gw.request(`/v1/admin/events/${eventId}/stats/history`, { token: ADMIN_TOKEN });
    expect(empty.status).toBe(200);
    expect(await empty.json()).toEqual({
      eventId,
      intervalSeconds: intervalMs / 1000,
      windowSeconds: 3_600,
      samples: [],
      more: false,
    });
    // Reading the history marks the event watched: the sampler takes it up.
    gw.deps.stats.sampler.start();
    try {
      await expect.poll(async () => (await stored(eventId)).length, PATIENCE).toBeGreaterThanOrEqual(5);
    } finally {
      gw.deps.stats.sampler.stop();
    }
    // A tick the timer began before the stop may still write its sample (CI once read one more
    // sample from the route than from the store just before): tick() answers the one in flight,
    // or makes one; after it no tick runs.
    await gw.deps.stats.sampler.tick();
    const all = await stored(eventId);
    const read = async (query: string) => {
      const res = await gw.request(`/v1/admin/events/${eventId}/stats/history${query}`, { token: ADMIN_TOKEN });
      expect(res.status).toBe(200);
      return (await res.json()) as { samples: StatsSample[]; more: boolean };
    };
    const whole = await read("");
    expect(whole).toMatchObject({ samples: all, more: false });
    const firstTwo = await read("?limit=2");
    expect(firstTwo).toEqual({
      ...whole,
      samples: all.slice(0, 2),
      more: true,
      eventId,
      intervalSeconds: 0.15,
      windowSeconds: 3_600,
    });
    const rest = await read(`?since=${firstTwo.samples[1]!.at}`);
    expect(rest.samples).toEqual(all.slice(2));
    expect((await read(`?since=${all.at(-1)!.at}`)).samples).toEqual([]);
  }, 60_000);

  it("refuses a bad since or limit with a JSON 400, an unknown event with 404, no token with 401", async () => {
    const gw = gateway({});
    const eventId = uniqueId();
    expect((await putEvent(gw, eventId)).status).toBe(201);
    for (const query of ["since=yesterday", "since=-1", "since=1.5", "limit=0", "limit=1001"]) {
      const res = await gw.request(`/v1/admin/events/${eventId}/stats/history?${query}`, { token: ADMIN_TOKEN });
      expect(res.status, query).toBe(400);
      expect(res.headers.get("content-type")).toContain("application/json");
      const body = (await res.json()) as { error: { code: string; details: { issues: { path: string }[] } } };
      expect(body.error.code, query).toBe("invalid_request");
      expect(body.error.details.issues[0]?.path, query).toBe(query.split("=")[0]);
    }
    const unknown = await gw.request(`/v1/admin/events/${uniqueId()}/stats/history`, { token: ADMIN_TOKEN });
    expect(unknown.status).toBe(404);
    expect(((await unknown.json()) as { error: { code: string } }).error.code).toBe("not_found");
    const anonymous = await gw.request(`/v1/admin/events/${eventId}/stats/history`);
    expect(anonymous.status).toBe(401);
  });
});
