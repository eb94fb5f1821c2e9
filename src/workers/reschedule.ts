/**
 * BullMQ job schedulers (sweeps, seat-map refresh, the reconcile backstop, the outbox) live in
 * Redis: when Redis comes back empty they are gone, and with them every sweep and every pending
 * purchase's safety net. Events are armed by ./event-jobs.ts (when stored, and at startup); this
 * wrapper remembers which events it armed and arms them all again as soon as the Redis connection
 * is back (upserts are idempotent, so a reconnect that lost nothing costs a few commands).
 */
import type { Logger } from "../logger.js";
import { onRedisReconnect } from "../redis/availability.js";
import type { RedisClient } from "../redis/scripts.js";

export type ScheduleEvent = (eventId: string, sectionIds: string[]) => Promise<void>;

export interface Rescheduler {
  /** Arms the event's schedules (as `schedule` does) and remembers it for the next reconnect. */
  schedule: ScheduleEvent;
  /** The events armed again on the next reconnect. */
  events(): string[];
  /** Arms every remembered event again now; resolves with how many succeeded. */
  rescheduleAll(): Promise<number>;
  /** Stops listening to the connection. */
  close(): void;
}

/** At most this many events are remembered (the most recently armed). */
export const MAX_REMEMBERED_EVENTS = 1_000;

export function rescheduleOnReconnect(redis: RedisClient, schedule: ScheduleEvent, logger: Logger): Rescheduler {
  const remembered = new Map<string, string[]>();

  const remember = (eventId: string, sectionIds: string[]) => {
    remembered.delete(eventId);
    remembered.set(eventId, sectionIds);
    if (remembered.size > MAX_REMEMBERED_EVENTS) {
      const oldest = remembered.keys().next().value;
      if (oldest !== undefined) remembered.delete(oldest);
    }
  };

  const rescheduleAll = async () => {
    let done = 0;
    // One event at a time: a reconnect is no moment to flood the fresh Redis.
    for (const [eventId, sectionIds] of [...remembered]) {
      try {
        await schedule(eventId, sectionIds);
        done++;
      } catch (err) {
        logger.warn({ err: (err as Error).message, eventId }, "could not schedule the event's jobs again");
      }
    }
    return done;
  };

  const stop = onRedisReconnect(redis, () => {
    if (remembered.size === 0) return;
    void rescheduleAll().then((done) =>
      logger.info({ events: done, of: remembered.size }, "redis reconnected: event job schedules armed again"),
    );
  });

  return {
    async schedule(eventId, sectionIds) {
      remember(eventId, sectionIds);
      await schedule(eventId, sectionIds);
    },
    events: () => [...remembered.keys()],
    rescheduleAll,
    close: stop,
  };
}
