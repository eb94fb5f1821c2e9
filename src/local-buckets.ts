/**
 * A token bucket per key in this process's memory: the same bucket as lua/rate-limit-1.lua (and
 * lua/includes/token-bucket.lua), for limits counted without Redis. The rate limiter falls back to
 * it while Redis is away (src/http/middleware/rate-limit.ts); the waiting room takes a poll's
 * limits in it when the poll is answered from the line's cache (src/waiting-room/line-view.ts).
 */
/** Buckets kept in memory while Redis is away; the oldest are dropped past this many. */
const LOCAL_BUCKETS = 100_000;

/** The same token bucket as lua/rate-limit-1.lua, in this process: [allowed, retryAfterMs]. */
export function createLocalBuckets(maxBuckets = LOCAL_BUCKETS, now: () => number = Date.now) {
  const buckets = new Map<string, { tokens: number; at: number }>();
  return {
    take(key: string, perSecond: number, burst: number): [number, number] {
      const t = now();
      const bucket = buckets.get(key) ?? { tokens: burst, at: t };
      bucket.tokens = Math.min(burst, bucket.tokens + ((t - bucket.at) / 1000) * perSecond);
      bucket.at = t;
      // Re-insert so the Map's order is least recently used first.
      buckets.delete(key);
      buckets.set(key, bucket);
      if (buckets.size > maxBuckets) buckets.delete(buckets.keys().next().value as string);
      if (bucket.tokens >= 1) {
        bucket.tokens -= 1;
        return [1, 0];
      }
      return [0, Math.ceil(((1 - bucket.tokens) / perSecond) * 1000)];
    },
    get size() {
      return buckets.size;
    },
  };
}
