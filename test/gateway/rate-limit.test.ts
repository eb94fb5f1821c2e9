/**
 * The rate limiter: shared buckets in Redis, and buckets of the process's own while Redis is
 * away, so a flood or an operator-token brute force stays limited during a Redis outage.
 */
import { Redis } from "ioredis";
import pino from "pino";
import { afterAll, describe, expect, it } from "vitest";
import { ApiError } from "../../src/http/errors.js";
import { createLocalBuckets, createRateLimiter } from "../../src/http/middleware/rate-limit.js";
import { spawnRedis, type SpawnedRedis } from "../../src/local/redis.js";
import { createMetrics } from "../../src/metrics.js";

async function outcomes(enforce: () => Promise<void>, n: number): Promise<{ allowed: number; limited: number }> {
  const results = await Promise.allSettled(Array.from({ length: n }, enforce));
  const limited = results.filter(
    (r) => r.status === "rejected" && r.reason instanceof ApiError && r.reason.code === "rate_limited",
  ).length;
  const other = results.filter((r) => r.status === "rejected").length - limited;
  expect(other).toBe(0);
  return { allowed: n - limited, limited };
}

describe("local token buckets", () => {
  it("admit the burst, then refill at the rate, and forget the least recently used past the cap", () => {
    let t = 0;
    const buckets = createLocalBuckets(3, () => t);
    const take = () => buckets.take("a", 10, 5)[0];
    expect(Array.from({ length: 7 }, take)).toEqual([1, 1, 1, 1, 1, 0, 0]);
    expect(buckets.take("a", 10, 5)[1]).toBe(100);
    t += 250; // 2.5 tokens
    expect(Array.from({ length: 3 }, take)).toEqual([1, 1, 0]);
    for (const k of ["b", "c", "d"]) buckets.take(k, 1, 1);
    expect(buckets.size).toBe(3);
    // "a" was the least recently used: dropped, so it starts again with a full bucket.
    expect(buckets.take("a", 10, 5)[0]).toBe(1);
  });
});

describe("the rate limiter", () => {
  let redis: SpawnedRedis | undefined;
  const clients: Redis[] = [];
  afterAll(async () => {
    for (const c of clients) c.disconnect();
    await redis?.close();
  });

  it("limits in Redis, and keeps limiting in memory while Redis is down", async () => {
    redis = await spawnRedis();
    const client = new Redis(redis.url, { maxRetriesPerRequest: 1, enableOfflineQueue: false });
    client.on("error", () => {});
    clients.push(client);
    await new Promise<void>((resolve) => client.once("ready", () => resolve()));
    const metrics = createMetrics();
    const limiter = createRateLimiter(client, { metrics, logger: pino({ level: "silent" }) });
    const limit = { perSecond: 1, burst: 10 };

    const shared = await outcomes(() => limiter.enforce("ip:admin", "10.0.0.1", limit), 50);
    expect(shared.allowed).toBeGreaterThanOrEqual(10);
    expect(shared.allowed).toBeLessThanOrEqual(12);

    redis.child.kill("SIGKILL");
    await new Promise<void>((resolve) => client.once("close", () => resolve()));
    const down = await outcomes(() => limiter.enforce("ip:admin", "10.0.0.2", limit), 50);
    expect(down.allowed).toBeGreaterThanOrEqual(10);
    expect(down.allowed).toBeLessThanOrEqual(12);
    const text = await metrics.registry.metrics();
    expect(text).toMatch(/gateway_redis_script_calls_total\{script="rate-limit",outcome="unavailable"\} 50/);
  });
});
