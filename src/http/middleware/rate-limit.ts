/**
 * Per-IP and per-fan token buckets in Redis (lua/rate-limit-1.lua), shared by every gateway
 * instance. When Redis cannot answer, the limiter lets the request through: a claim with a valid
 * access token must still reach DynamoDB while Redis is down, and joins fail on their own.
 */
import type { Logger } from "../../logger.js";
import type { Metrics } from "../../metrics.js";
import { callScript, defineScripts, type RedisClient } from "../../redis/scripts.js";
import { ApiError } from "../errors.js";

export interface RateLimit {
  /** Tokens per second; 0 turns the limit off. */
  perSecond: number;
  /** Bucket size; defaults to twice the rate (at least 1). */
  burst?: number;
}

export interface RateLimiter {
  /** Throws ApiError rate_limited (429, Retry-After) when the subject is over its limit. */
  enforce(limitName: string, subject: string, limit: RateLimit): Promise<void>;
}

export function createRateLimiter(redis: RedisClient, deps: { metrics: Metrics; logger: Logger }): RateLimiter {
  defineScripts(redis, ["rate-limit-1"]);
  return {
    async enforce(limitName, subject, limit) {
      if (limit.perSecond <= 0) return;
      const burst = limit.burst ?? Math.max(1, Math.ceil(limit.perSecond * 2));
      // The subject is hashed into the tag so one bucket is one slot on a cluster.
      const key = `rl:{${limitName}:${subject}}`;
      let result: [number, number];
      try {
        result = await callScript<[number, number]>(redis, "rateLimit", [key], [limit.perSecond, burst, 1]);
        deps.metrics.redisScripts.inc({ script: "rate-limit", outcome: "ok" });
      } catch (err) {
        deps.metrics.redisScripts.inc({ script: "rate-limit", outcome: "error" });
        deps.logger.debug({ err: (err as Error).message, limitName }, "rate limiter unavailable; letting through");
        return;
      }
      const [allowed, retryAfterMs] = result;
      if (allowed === 1) return;
      deps.metrics.rateLimited.inc({ limit: limitName });
      throw new ApiError("rate_limited", "too many requests; slow down", {
        retryAfter: Math.max(1, Math.ceil(retryAfterMs / 1000)),
        details: { limit: limitName },
      });
    },
  };
}
