/**
 * Per-IP and per-fan token buckets in Redis (lua/rate-limit-1.lua), shared by every gateway
 * instance. The waiting room's join and poll take theirs inside their own script (one round trip;
 * src/http/client-ip.ts lineLimits), and come here only for the refusal and the fallback. When
 * Redis cannot answer, each gateway falls back to buckets of its own in memory:
 * a claim with a valid access token must still reach DynamoDB while Redis is down, but a flood or
 * an operator-token brute force must not go unlimited. With N gateways the fallback admits up to
 * N times the limit (each counts alone); it is a floor, not the shared limit.
 */
import type { Logger } from "../../logger.js";
import type { Metrics } from "../../metrics.js";
import { redisReady, trackRedis } from "../../redis/availability.js";
import { codeTable, type RedisClient, registerScripts, scriptFamily } from "../../redis/scripts.js";
import { ApiError } from "../errors.js";
import { createLocalBuckets } from "../../local-buckets.js";

export { createLocalBuckets };

export interface RateLimit {
  /** Tokens per second; 0 turns the limit off. */
  perSecond: number;
  /** Bucket size; defaults to twice the rate (at least 1). */
  burst?: number;
}

export interface RateLimiter {
  /** Throws ApiError rate_limited (429, Retry-After) when the subject is over its limit. */
  enforce(limitName: string, subject: string, limit: RateLimit): Promise<void>;
  /** The same on a bucket whose key the caller built (the waiting room's, under an event's tag). */
  enforceKey(limitName: string, key: string, limit: RateLimit): Promise<void>;
  /**
   * The in-memory fallback alone, for a bucket a waiting-room script would have taken when the
   * script could not run (Redis away): throws like `enforce` when the subject is over its limit.
   */
  enforceLocally(limitName: string, key: string, limit: RateLimit): void;
  /** The 429 for a limit a script found empty (counted in the metrics like any other). */
  refusal(limitName: string, retryAfterMs: number): ApiError;
}

const rateLimitScripts = scriptFamily({ name: "rate-limit", files: { rateLimit: "rate-limit-1" } });

/** The first element of lua/rate-limit-1.lua's reply (the in-memory buckets answer the same). */
const RATE_LIMIT_CODES = codeTable("rate-limit", { 1: "allowed", 0: "limited" });

/** A limit's bucket size: the one given, else twice the rate (at least 1). */
export function burstOf(limit: RateLimit): number {
  return limit.burst ?? Math.max(1, Math.ceil(limit.perSecond * 2));
}

export function createRateLimiter(redis: RedisClient, deps: { metrics: Metrics; logger: Logger }): RateLimiter {
  const run = registerScripts(redis, rateLimitScripts);
  trackRedis(redis);
  const local = createLocalBuckets();
  const refusal = (limitName: string, retryAfterMs: number) => {
    deps.metrics.rateLimited.inc({ limit: limitName });
    return new ApiError("rate_limited", "too many requests; slow down", {
      retryAfter: Math.max(1, Math.ceil(retryAfterMs / 1000)),
      details: { limit: limitName },
    });
  };
  const limiter: RateLimiter = {
    // The subject is hashed into the tag so one bucket is one slot on a cluster.
    enforce: (limitName, subject, limit) => limiter.enforceKey(limitName, `lim:{${limitName}:${subject}}`, limit),

    async enforceKey(limitName, key, limit) {
      if (limit.perSecond <= 0) return;
      const burst = burstOf(limit);
      let result: [number, number];
      if (redisReady(redis)) {
        try {
          result = await run<[number, number]>("rateLimit", [key], [limit.perSecond, burst, 1]);
          deps.metrics.redisScripts.inc({ script: "rate-limit", outcome: "ok" });
        } catch (err) {
          deps.metrics.redisScripts.inc({ script: "rate-limit", outcome: "error" });
          deps.logger.debug({ err: (err as Error).message, limitName }, "rate limiter unavailable; counting locally");
          result = local.take(key, limit.perSecond, burst);
        }
      } else {
        deps.metrics.redisScripts.inc({ script: "rate-limit", outcome: "unavailable" });
        result = local.take(key, limit.perSecond, burst);
      }
      const [allowed, retryAfterMs] = result;
      if (RATE_LIMIT_CODES.outcome(allowed) === "allowed") return;
      throw refusal(limitName, retryAfterMs);
    },

    enforceLocally(limitName, key, limit) {
      if (limit.perSecond <= 0) return;
      const [allowed, retryAfterMs] = local.take(key, limit.perSecond, burstOf(limit));
      if (RATE_LIMIT_CODES.outcome(allowed) !== "allowed") throw refusal(limitName, retryAfterMs);
    },

    refusal,
  };
  return limiter;
}
