/**
 * Deduplication of the payment provider's webhook deliveries: a delivery is processed once, a
 * repeat (the provider retries until it hears 200) is answered without processing it again. One
 * Redis key per event id, kept a week (longer than any provider retries); without Redis a delivery
 * cannot be told from a repeat: `unknown`, and the webhook answers 503 so the provider delivers
 * again later. Processing is idempotent anyway (the saga's resolve): this only saves the work.
 */
import type { Logger } from "../logger.js";
import { redisReady, requireRedis } from "../redis/availability.js";
import type { RedisClient } from "../redis/scripts.js";

const SEEN_SECONDS = 7 * 86_400;
const seenKey = (id: string) => `webhook:{pay}:seen:${id}`;

export interface WebhookDeduplication {
  /** `first` the first time an event id is seen (and remembered); `unknown` while Redis cannot say. */
  firstDelivery(eventId: string): Promise<"first" | "duplicate" | "unknown">;
  /** Forgets an event id whose processing failed, so a redelivery is processed. */
  forget(eventId: string): Promise<void>;
}

export function createWebhookDeduplication(redis: RedisClient, logger: Logger): WebhookDeduplication {
  return {
    async firstDelivery(id) {
      try {
        requireRedis(redis, "webhook deduplication");
        return (await redis.set(seenKey(id), "1", "EX", SEEN_SECONDS, "NX")) === "OK" ? "first" : "duplicate";
      } catch (err) {
        logger.debug({ err: (err as Error).message }, "webhook deduplication unavailable");
        return "unknown";
      }
    },
    async forget(id) {
      // Best effort: a record that cannot be deleted now was most likely lost with Redis anyway.
      if (redisReady(redis)) await redis.del(seenKey(id)).catch(() => 0);
    },
  };
}
