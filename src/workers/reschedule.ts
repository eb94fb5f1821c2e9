/**
 * BullMQ job schedulers and delayed jobs (backstops, sweeps, an ended event's end runs) live in
 * Redis: when Redis comes back empty they are gone, and with them every pending purchase's safety
 * net. Events are armed by ./event-jobs.ts (when stored, and at startup); this wrapper remembers
 * which events it armed and arms them all again as soon as the Redis connection is back. The arm
 * reads the event first, so one closed or ended elsewhere meanwhile is armed as it is now (its
 * end, or nothing) and an ended one is forgotten here.
 */
import type { Logger } from "../logger.js";
import { onRedisReconnect } from "../redis/availability.js";
import type { RedisClient } from "../redis/scripts.js";

/** What an arm found the event to be: live (backstops armed), ending (its end), ended or gone. */
export type ArmOutcome = "live" | "ending" | "ended" | "missing";

export interface Rescheduler {
  /** Remembers the event for the next reconnect (after it was armed by the caller). */
  remember(eventId: string): void;
  /** Forgets it: the reconnect no longer arms it. */
  forget(eventId: string): void;
  /** The events armed again on the next reconnect. */
  events(): string[];
  /** Arms every remembered event again now; resolves with how many succeeded. */
  rescheduleAll(): Promise<number>;
  /** Stops listening to the connection. */
  close(): void;
}

/** At most this many events are remembered (the most recently armed). */
export const MAX_REMEMBERED_EVENTS = 1_000;

export function rescheduleOnReconnect(
  redis: RedisClient,
  /** Reads the event and arms it as it is now (a reconnect: run each backstop once too). */
  rearm: (eventId: string) => Promise<ArmOutcome>,
  logger: Logger,
): Rescheduler {
  const remembered = new Set<string>();

  const remember = (eventId: string) => {
    remembered.delete(eventId);
    remembered.add(eventId);
    if (remembered.size > MAX_REMEMBERED_EVENTS) {
      const oldest = remembered.values().next().value;
      if (oldest !== undefined) remembered.delete(oldest);
    }
  };

  const rescheduleAll = async () => {
    let done = 0;
    // One event at a time: a reconnect is no moment to flood the fresh Redis.
    for (const eventId of [...remembered]) {
      try {
        const outcome = await rearm(eventId);
        if (outcome === "ended" || outcome === "missing") remembered.delete(eventId);
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
    remember,
    forget: (eventId) => void remembered.delete(eventId),
    events: () => [...remembered],
    rescheduleAll,
    close: stop,
  };
}
