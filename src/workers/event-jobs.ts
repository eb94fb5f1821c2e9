/**
 * An event's background jobs (sweeps per shard, the seat-map refresh, the reconcile backstop, the
 * outbox publisher) armed in one place. BullMQ keeps job schedulers in Redis, so they are armed:
 *  - when an event is stored (the event service, after a PUT or the demo's creation);
 *  - at startup, for the latest stored events (a Redis that came back empty while no process that
 *    had armed them was running has none);
 *  - again on every Redis reconnect, for every event this process armed (./reschedule.ts): a Redis
 *    restarted empty loses them all.
 * Upserts are idempotent: every process may arm every event, as often as it likes. No read of an
 * event arms anything any more (a cached read that scheduled jobs was a side effect nobody saw).
 */
import type { EventDefinition, Inventory } from "../inventory/index.js";
import type { Logger } from "../logger.js";
import type { RedisClient } from "../redis/scripts.js";
import { type Queues, scheduleEvent } from "./queues.js";
import { MAX_REMEMBERED_EVENTS, rescheduleOnReconnect } from "./reschedule.js";

export interface EventJobs {
  /** Arms the event's jobs now (throws when Redis cannot take them) and on every reconnect after. */
  arm(event: Pick<EventDefinition, "eventId" | "sections">): Promise<void>;
  /** Arms the jobs of the latest stored events; resolves with how many were armed. Never throws. */
  armStored(): Promise<number>;
  /** Stops following the Redis connection. */
  close(): void;
}

export function createEventJobs(options: {
  queues: Queues;
  redis: RedisClient;
  inventory: Pick<Inventory, "events">;
  logger: Logger;
}): EventJobs {
  const { queues, inventory, logger } = options;
  const rescheduler = rescheduleOnReconnect(
    options.redis,
    (eventId, sectionIds) => scheduleEvent(queues, eventId, sectionIds),
    logger,
  );
  const arm = (event: Pick<EventDefinition, "eventId" | "sections">) =>
    rescheduler.schedule(
      event.eventId,
      event.sections.map((s) => s.id),
    );
  return {
    arm,
    async armStored() {
      let armed = 0;
      try {
        // One at a time, as on a reconnect: startup is no moment to flood Redis either.
        for (const event of await inventory.events.list({ limit: MAX_REMEMBERED_EVENTS })) {
          try {
            await arm(event);
            armed++;
          } catch (err) {
            // Remembered all the same: the next reconnect arms it.
            logger.warn({ err: (err as Error).message, eventId: event.eventId }, "event jobs not armed yet");
          }
        }
      } catch (err) {
        logger.warn(
          { err: (err as Error).message },
          "stored events not listed; their jobs are armed on their next PUT",
        );
      }
      return armed;
    },
    close: rescheduler.close,
  };
}
