/**
 * An event's background jobs, armed and ended in one place.
 *
 * While an event is live (stored, not closed) it has slow backstops only (./queues.ts
 * scheduleEvent: every shard swept, pending purchases and the outbox looked at, the seat-map cache
 * rebuilt, each every few minutes), for work whose own job was lost; the work itself brings its
 * jobs (a hold its sweep, a purchase its reconcile job, a confirmation its booking). BullMQ keeps
 * them in Redis, so an event is armed:
 *  - when it is stored (the event service, after a PUT or the demo's creation);
 *  - at startup, for the latest stored events that have not ended (a Redis that came back empty
 *    while no process that had armed them was running has none; BullMQ runs a new scheduler's
 *    first job at once);
 *  - again on every Redis reconnect, for every event this process armed (./reschedule.ts), each
 *    backstop run once at once as well (changes made while Redis was away missed the cache).
 *
 * An event ends when the operator closes it (POST /v1/admin/events/{eventId}/close): holds are
 * refused from then on, its backstops are removed, and one end run is delayed until its last hold
 * can have expired (the close, plus another gateway's cache of the on-sale event, plus the request
 * budget, plus holdSeconds). The end runs (./event-end.ts) finish the remaining work and then
 * remove every job of the event and mark it `jobsEndedAt`: nothing arms it again.
 * Arms are idempotent: every process may arm every event, as often as it likes.
 */
import { DEFAULT_REQUEST_BUDGET_MS, EVENT_CACHE_MS, type EventDefinition, type Inventory } from "../inventory/index.js";
import type { Logger } from "../logger.js";
import {
  type Queues,
  SWEEP_BUCKET_MS,
  scheduleDraw,
  scheduleEvent,
  scheduleEventEnd,
  unscheduleEvent,
} from "./queues.js";
import { type ArmOutcome, MAX_REMEMBERED_EVENTS, rescheduleOnReconnect } from "./reschedule.js";

/** How long after the close a hold may still be made: another gateway's cached event, then the write. */
export const CLOSE_GRACE_MS = EVENT_CACHE_MS + DEFAULT_REQUEST_BUDGET_MS;

export type ArmableEvent = Pick<
  EventDefinition,
  "eventId" | "sections" | "holdSeconds" | "closedAt" | "jobsEndedAt" | "onSaleAt"
>;

/** A draw is armed for an on-sale up to this long past (a process started late still draws). */
export const DRAW_ARM_WINDOW_MS = 3_600_000;

export interface EventJobs {
  /**
   * Arms the event's jobs as it is (live: its backstops; closed: its end; ended: nothing) now,
   * throwing when Redis cannot take them, and on every reconnect after.
   */
  arm(event: ArmableEvent): Promise<ArmOutcome>;
  /** Arms the jobs of the latest stored events; resolves with how many were armed. Never throws. */
  armStored(): Promise<number>;
  /** The events this process arms again on a reconnect. */
  remembered(): string[];
  /** Stops following the Redis connection. */
  close(): void;
}

/** When a closed event's first end run is due: once its last hold can have expired. */
export function endRunAt(event: ArmableEvent, closeGraceMs = CLOSE_GRACE_MS): number {
  const closedAt = Date.parse(event.closedAt ?? new Date().toISOString());
  const lastExpiry = closedAt + closeGraceMs + event.holdSeconds * 1_000;
  return Math.ceil(lastExpiry / SWEEP_BUCKET_MS) * SWEEP_BUCKET_MS;
}

export function createEventJobs(options: {
  /** Their connection's reconnects arm the remembered events again (the schedules live in BullMQ's keys). */
  queues: Queues;
  inventory: Pick<Inventory, "events">;
  logger: Logger;
  /** Default CLOSE_GRACE_MS (tests shorten it, with the event cache it stands for). */
  closeGraceMs?: number;
}): EventJobs {
  const { queues, inventory, logger } = options;

  const armNow = async (event: ArmableEvent, kick: boolean): Promise<ArmOutcome> => {
    if (event.jobsEndedAt !== undefined) return "ended";
    if (event.closedAt !== undefined) {
      await unscheduleEvent(queues, event.eventId);
      // The same first run id from every gateway: one chain of end runs.
      await scheduleEventEnd(
        queues,
        { eventId: event.eventId, run: 0 },
        endRunAt(event, options.closeGraceMs) - Date.now(),
      );
      return "ending";
    }
    await scheduleEvent(
      queues,
      event.eventId,
      event.sections.map((s) => s.id),
      { kick },
    );
    // The draw at onSaleAt, whether or not anyone polls then (./draw.ts); one chain per on-sale time.
    const onSaleAt = Date.parse(event.onSaleAt);
    if (Number.isFinite(onSaleAt) && onSaleAt > Date.now() - DRAW_ARM_WINDOW_MS) {
      await scheduleDraw(queues, { kind: "draw", eventId: event.eventId, onSaleAt, run: 0 }, onSaleAt - Date.now());
    }
    return "live";
  };

  const rescheduler = rescheduleOnReconnect(
    options.queues.connection,
    async (eventId) => {
      const event = await inventory.events.get({ eventId });
      return event ? armNow(event, true) : "missing";
    },
    logger,
  );

  const arm = async (event: ArmableEvent) => {
    if (event.jobsEndedAt !== undefined) {
      rescheduler.forget(event.eventId);
      return "ended" as const;
    }
    // Remembered first: one that Redis cannot take now is armed on the next reconnect.
    rescheduler.remember(event.eventId);
    return armNow(event, false);
  };

  return {
    arm,
    async armStored() {
      let armed = 0;
      try {
        // One at a time, as on a reconnect: startup is no moment to flood Redis either.
        for (const event of await inventory.events.list({ limit: MAX_REMEMBERED_EVENTS })) {
          if (event.jobsEndedAt !== undefined) continue;
          try {
            rescheduler.remember(event.eventId);
            // No run at once: a Redis that lost the schedulers runs each new one at once anyway.
            await armNow(event, false);
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
    remembered: rescheduler.events,
    close: rescheduler.close,
  };
}
