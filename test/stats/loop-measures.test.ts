/**
 * The admission loop's shared measurements (src/stats/loop.ts): the p99 of merged latency buckets,
 * and, on the real Redis, several processes flushing their counts at once into one event's hash,
 * which the slot's claimer takes exactly once.
 */
import { Redis } from "ioredis";
import pino from "pino";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { createMetrics } from "../../src/metrics.js";
import { bucketOf, CLAIM_BUCKETS_MS, createLoopMeasures, createLoopRunner, p99Of } from "../../src/stats/loop.js";
import { uniqueId } from "../gateway/harness.js";

describe("p99 of latency buckets", () => {
  it("reads the bucket holding the 99th percentile, interpolated, and null with nothing counted", () => {
    const counts = new Array<number>(CLAIM_BUCKETS_MS.length + 1).fill(0);
    expect(p99Of(counts)).toBeNull();
    counts[bucketOf(20)] = 99; // (10, 25]
    counts[bucketOf(900)] = 1; // (750, 1000]
    expect(p99Of(counts)).toBe(25);
    counts[bucketOf(900)] = 50;
    const p99 = p99Of(counts)!;
    expect(p99).toBeGreaterThan(750);
    expect(p99).toBeLessThanOrEqual(1_000);
    expect(bucketOf(5)).toBe(0);
    expect(bucketOf(6)).toBe(1);
    expect(bucketOf(60_000)).toBe(CLAIM_BUCKETS_MS.length);
  });
});

describe("claim figures across processes (real Redis)", () => {
  let redis: Redis;
  beforeAll(() => {
    redis = new Redis(inject("redisUrl"));
  });
  afterAll(() => redis.disconnect());

  it("three processes flush at once; the claimer takes the merged counts and throttles once", async () => {
    const eventId = uniqueId("lm");
    const metrics = [createMetrics(), createMetrics(), createMetrics()];
    const processes = metrics.map((m) => createLoopMeasures({ redis, metrics: m, intervalMs: 5_000 }));
    // The first flush reads each process's throttle counter as its baseline.
    await Promise.all(processes.map((p) => p.flush()));
    processes.forEach((p, i) => {
      for (let n = 0; n < 100; n++) p.record(eventId, i === 2 && n === 0 ? 2_000 : 15);
      metrics[i]!.dynamoAttemptErrors.inc({ command: "TransactWriteItems", error: "ThrottlingException" }, i + 1);
      metrics[i]!.dynamoAttemptErrors.inc({ command: "TransactWriteItems", error: "ConditionalCheckFailedException" });
    });
    await Promise.all(processes.map((p) => p.flush()));
    const runner = createLoopRunner({
      redis,
      waitingRoom: { updateSettings: async () => ({ ok: false, reason: "not_found" }) },
      intervalMs: 5_000,
      windowMs: 60_000,
      logger: pino({ level: "silent" }),
    });
    const [first, second] = await Promise.all([
      runner.run(eventId, Date.now(), undefined),
      runner.run(eventId, Date.now(), undefined),
    ]);
    const taken = [first.claims, second.claims].sort((a, b) => b.claims - a.claims);
    // One took everything (300 claims, 1 + 2 + 3 throttles); the other found the hash gone.
    expect(taken[0]).toEqual({ claims: 300, throttles: 6, claimP99Ms: 25 });
    expect(taken[1]).toEqual({ claims: 0, throttles: 0, claimP99Ms: null });
  });
});
