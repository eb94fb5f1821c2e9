/**
 * Every BullMQ queue of the gateway, named in one place. The prefix is a hash tag, so all of a
 * queue's keys land in one slot and the same queues run on Redis Cluster. Queues and workers each
 * get their own connections (BullMQ needs a blocking one per worker).
 *
 * Background work follows the work waiting, not the clock (docs/data-model.md, "The sweeper
 * worker"): a hold adds the sweep of its shard at its expiry, a confirmation adds its booking, and
 * the per-event job schedulers that remain are slow backstops, kept only while the event is live
 * and removed when it ends (./event-jobs.ts).
 */
import { Queue } from "bullmq";
import { type OutboxRecord, SWEEP_SHARDS } from "../inventory/index.js";
import type { Logger } from "../logger.js";
import type { NotifyBatch } from "../notify/service.js";
import { requireRedis, trackRedis } from "../redis/availability.js";
import type { RedisClient } from "../redis/scripts.js";
import { type DrawJob, drawJobId } from "./draw.js";

export const QUEUE_PREFIX = "{onsale}";

export const queueNames = {
  /** Resets expired holds of one event and GSI2 shard (or all): at a hold's expiry, and a backstop. */
  sweep: "hold-sweep",
  /** Applies seat changes to the seat-map cache, or rebuilds a section from DynamoDB. */
  seatMapRefresh: "seatmap-refresh",
  /** Resolves purchases whose payment outcome is unknown. */
  reconcile: "purchase-reconcile",
  /** Publishes confirmed purchases from the outbox. */
  outbox: "outbox-publish",
  /** Where integrators consume `BookingConfirmed`. */
  bookings: "booking-confirmed",
  /** Delivers "seats are back" batches to NOTIFY_WEBHOOK_URL (src/notify/). */
  notify: "seats-back-notify",
} as const;

export type QueueName = (typeof queueNames)[keyof typeof queueNames];

/** Holds expiring within one bucket share one sweep job per shard, at the bucket's end. */
export const SWEEP_BUCKET_MS = 5_000;
/**
 * The slow backstops of a live event, for work whose job was lost (a Redis restarted empty, a
 * process killed between its write and its job): every shard swept, every pending purchase
 * looked at, the seat-map cache rebuilt, the outbox's crash cases published.
 */
export const SWEEP_EVERY_MS = 5 * 60_000;
/**
 * The sweep that reads every section of a live event from DynamoDB (src/inventory/sweep.ts
 * sweepSections): the backstop that does not depend on the seat map in Redis, for a held seat whose
 * write-through Redis missed or lost. About 16 read units per 1,000 seats a run (eventually
 * consistent, the whole section read), none before the on-sale nor for a section sold out: a
 * 10,000-seat event pays about 165 read units every 30 minutes, 0.09 a second (docs/data-model.md,
 * "The sweeper worker"), a sixth of what the seat map's rebuild (REFRESH_EVERY_MS) reads.
 */
export const SECTIONS_SWEEP_EVERY_MS = 30 * 60_000;
export const REFRESH_EVERY_MS = 10 * 60_000;
/**
 * 30 s: money taken and not settled is the one background case a fan waits on (a purchase whose
 * own job ran out of attempts, or was lost); two index Queries of what is pending, per live event.
 */
export const RECONCILE_EVERY_MS = 30_000;
/**
 * 15 s: a booking whose job the saga could not add (Redis away at that moment) is published within
 * 25 s with its 10 s margin; the run costs one empty Query while nothing is waiting.
 */
export const OUTBOX_EVERY_MS = 15_000;

export interface SweepJob {
  eventId: string;
  /** Absent: every shard (a closed event's end run), unless `sections`. */
  shard?: number;
  /** The backstop: every section read from DynamoDB (SECTIONS_SWEEP_EVERY_MS), and no shard. */
  sections?: true;
}

export type SeatMapRefreshJob =
  | { eventId: string; kind: "section"; sectionId: string }
  | { eventId: string; kind: "event"; sectionIds: string[] };

export type ReconcileJob =
  /** One purchase whose payment outcome was unknown (or whose saga may have been cut short). */
  | { kind: "purchase"; eventId: string; purchaseId: string; sessionId?: string }
  /** Every pending purchase of an event older than the payment timeout (the backstop). */
  | { kind: "event"; eventId: string }
  /**
   * A closed event whose last hold has expired: its remaining work finished, then every job of it
   * removed (./event-end.ts). `run` numbers the chain; `quietSince`: since when no run found work.
   */
  | { kind: "end"; eventId: string; run: number; quietSince?: number }
  /** The lottery draw at the event's onSaleAt (./draw.ts). */
  | DrawJob;

export interface OutboxJob {
  eventId: string;
  /**
   * Run after a reconnect: the Redis may have come back empty, so the jobs the saga added for the
   * youngest unsent records may be gone too; every unsent record is published, whatever its age.
   */
  afterReconnect?: boolean;
}

export const BOOKING_CONFIRMED = "BookingConfirmed";

/** How long a booking job is kept after it completes or fails: the window of duplicate detection. */
export const BOOKING_RETENTION_SECONDS = 7 * 24 * 3600;

/** The job integrators receive on the bookings queue. */
export interface BookingConfirmedJob {
  type: typeof BOOKING_CONFIRMED;
  eventId: string;
  outboxId: string;
  purchaseId: string;
  /** When the purchase was confirmed (the outbox record's creation, same transaction). */
  createdAt: string;
  payload: OutboxRecord["payload"];
}

/**
 * BullMQ refuses a custom id that is an integer or contains `:` (Job.validateOptions), so the
 * separator is `-`; a purchase id matches `^[A-Za-z0-9_-]{1,128}$`, and starts with its event id.
 */
export function bookingJobId(purchaseId: string): string {
  return `${BOOKING_CONFIRMED}-${purchaseId}`;
}

/** The producer side of the bookings queue (no blocking connection). */
export function createBookingsQueue(
  connection: RedisClient,
  options: { prefix?: string; logger?: Logger } = {},
): Queue<BookingConfirmedJob> {
  const queue = new Queue<BookingConfirmedJob>(queueNames.bookings, {
    connection,
    prefix: options.prefix ?? QUEUE_PREFIX,
    defaultJobOptions: {
      attempts: 10,
      backoff: { type: "exponential", delay: 1_000 },
      removeOnComplete: { age: BOOKING_RETENTION_SECONDS },
      removeOnFail: { age: BOOKING_RETENTION_SECONDS },
    },
  });
  // Connection errors while Redis is away: without a listener BullMQ prints each one to stderr.
  queue.on("error", (err: Error) => options.logger?.debug({ queue: queue.name, err: err.message }, "queue error"));
  return queue;
}

/** Adds a booking's job under its stable id (a repeat while the job exists adds nothing). */
export async function addBookingJob(bookings: Queue<BookingConfirmedJob>, job: BookingConfirmedJob): Promise<void> {
  await bookings.add(BOOKING_CONFIRMED, job, {
    jobId: bookingJobId(job.purchaseId),
    // Per job, so the duplicate window holds whoever built the queue.
    removeOnComplete: { age: BOOKING_RETENTION_SECONDS },
    removeOnFail: { age: BOOKING_RETENTION_SECONDS },
  });
}

export interface Queues {
  /** The producers' connection (its status says whether adding a job can succeed now). */
  connection: RedisClient;
  sweep: Queue<SweepJob>;
  seatMapRefresh: Queue<SeatMapRefreshJob>;
  reconcile: Queue<ReconcileJob>;
  outbox: Queue<OutboxJob>;
  /** Where the saga adds each confirmed purchase's booking (the outbox's common path). */
  bookings: Queue<BookingConfirmedJob>;
  /** "Seats are back" batches on their way to the operator's webhook. */
  notify: Queue<NotifyBatch>;
  close(): Promise<void>;
}

/**
 * Producers only (no blocking connection): what the gateway needs to schedule work. A queue
 * reports its connection's errors (every reconnect attempt while Redis is away) to `logger` at
 * debug level: without a listener BullMQ would print each one to stderr.
 */
export function createQueues(connection: RedisClient, logger?: Logger): Queues {
  trackRedis(connection);
  const options = { connection, prefix: QUEUE_PREFIX };
  const sweep = new Queue<SweepJob>(queueNames.sweep, {
    ...options,
    // A sweep that fails (DynamoDB away) is tried again; the backstop is minutes away.
    defaultJobOptions: {
      removeOnComplete: 100,
      removeOnFail: 500,
      attempts: 5,
      backoff: { type: "exponential", delay: 1_000 },
    },
  });
  const seatMapRefresh = new Queue<SeatMapRefreshJob>(queueNames.seatMapRefresh, {
    ...options,
    defaultJobOptions: {
      removeOnComplete: 100,
      removeOnFail: 500,
      attempts: 5,
      backoff: { type: "exponential", delay: 500 },
    },
  });
  const reconcile = new Queue<ReconcileJob>(queueNames.reconcile, {
    ...options,
    // A lookup that fails (provider down) is retried with backoff; the purchase stays pending.
    defaultJobOptions: {
      removeOnComplete: 1_000,
      removeOnFail: 1_000,
      attempts: 20,
      backoff: { type: "exponential", delay: 1_000 },
    },
  });
  const outbox = new Queue<OutboxJob>(queueNames.outbox, {
    ...options,
    defaultJobOptions: { removeOnComplete: 100, removeOnFail: 500 },
  });
  const bookings = createBookingsQueue(connection, { logger });
  const notify = new Queue<NotifyBatch>(queueNames.notify, {
    ...options,
    // A receiver down is tried again with backoff, about 4 minutes in all; then the backstop.
    defaultJobOptions: {
      removeOnComplete: { age: 24 * 3600 },
      removeOnFail: { age: 24 * 3600 },
      attempts: 8,
      backoff: { type: "exponential", delay: 1_000 },
    },
  });
  for (const queue of [sweep, seatMapRefresh, reconcile, outbox, notify] as Queue[]) {
    queue.on("error", (err: Error) => logger?.debug({ queue: queue.name, err: err.message }, "queue connection error"));
  }
  return {
    connection,
    sweep,
    seatMapRefresh,
    reconcile,
    outbox,
    bookings,
    notify,
    close: async () => {
      await Promise.all([
        sweep.close(),
        seatMapRefresh.close(),
        reconcile.close(),
        outbox.close(),
        bookings.close(),
        notify.close(),
      ]);
    },
  };
}

/** The ids of an event's job schedulers (the slow backstops of a live event). */
/** The states a queue-depth gauge reports. */
export const QUEUE_STATES = ["waiting", "delayed", "active", "failed"] as const;

/** Jobs of every queue by state (a few Redis commands per queue); for /metrics. */
export async function queueJobCounts(queues: Queues): Promise<Record<string, Record<string, number>>> {
  const all = [
    queues.sweep,
    queues.seatMapRefresh,
    queues.reconcile,
    queues.outbox,
    queues.bookings,
    queues.notify,
  ] as Queue[];
  const counts = await Promise.all(all.map((q) => q.getJobCounts(...QUEUE_STATES)));
  return Object.fromEntries(all.map((q, i) => [q.name, counts[i]!]));
}

export function schedulerIds(eventId: string) {
  return {
    /** One per shard, as the hold-driven sweeps, so shards spread over workers. */
    sweeps: Array.from({ length: SWEEP_SHARDS }, (_, shard) => `sweep:${eventId}:${shard}`),
    sections: `sweep-sections:${eventId}`,
    refresh: `refresh:${eventId}`,
    reconcile: `reconcile:${eventId}`,
    outbox: `outbox:${eventId}`,
  };
}

/**
 * Arms a live event's backstops. Idempotent (job schedulers are upserted by id), so every gateway
 * instance may call it for every live event it creates or finds. `kick`: run each of them once
 * now as well (after a reconnect, whose Redis may have missed changes: the seat-map cache rebuilt,
 * pending purchases and the outbox looked at, every shard swept); deduplicated per 5 s across
 * processes by the job id.
 */
export async function scheduleEvent(
  queues: Queues,
  eventId: string,
  sectionIds: string[],
  options: { kick?: boolean } = {},
): Promise<void> {
  // While Redis is away BullMQ would wait for it; the caller tries again later instead.
  requireRedis(queues.connection, "schedule event jobs");
  const ids = schedulerIds(eventId);
  const kicks: Promise<unknown>[] = [];
  if (options.kick) {
    const at = Math.floor(Date.now() / SWEEP_BUCKET_MS);
    kicks.push(
      ...ids.sweeps.map((_, shard) =>
        queues.sweep.add("sweep", { eventId, shard }, { jobId: `sweep-${eventId}-${shard}-k${at}` }),
      ),
      // The Redis that came back may have lost the seat map the shards' sweeps read.
      queues.sweep.add("sweep-sections", { eventId, sections: true }, { jobId: `sweep-sections-${eventId}-k${at}` }),
      queues.seatMapRefresh.add(
        "refresh",
        { eventId, kind: "event", sectionIds },
        { jobId: `refresh-${eventId}-${at}` },
      ),
      queues.reconcile.add(
        "reconcile-event",
        { kind: "event", eventId },
        { jobId: `reconcile-event-${eventId}-${at}` },
      ),
      queues.outbox.add("outbox", { eventId, afterReconnect: true }, { jobId: `outbox-${eventId}-${at}` }),
    );
  }
  await Promise.all([
    ...kicks,
    // The ids of the 5 s schedulers before: upserted, they take the new interval.
    ...ids.sweeps.map((id, shard) =>
      queues.sweep.upsertJobScheduler(id, { every: SWEEP_EVERY_MS }, { name: "sweep", data: { eventId, shard } }),
    ),
    queues.sweep.upsertJobScheduler(
      ids.sections,
      { every: SECTIONS_SWEEP_EVERY_MS },
      { name: "sweep-sections", data: { eventId, sections: true } },
    ),
    queues.seatMapRefresh.upsertJobScheduler(
      ids.refresh,
      { every: REFRESH_EVERY_MS },
      { name: "refresh", data: { eventId, kind: "event", sectionIds } },
    ),
    queues.reconcile.upsertJobScheduler(
      ids.reconcile,
      { every: RECONCILE_EVERY_MS },
      { name: "reconcile-event", data: { kind: "event", eventId } },
    ),
    queues.outbox.upsertJobScheduler(ids.outbox, { every: OUTBOX_EVERY_MS }, { name: "outbox", data: { eventId } }),
  ]);
}

/** Removes an event's job schedulers (a closed event: its remaining work has jobs of its own). */
export async function unscheduleEvent(queues: Queues, eventId: string): Promise<void> {
  requireRedis(queues.connection, "remove event job schedulers");
  const ids = schedulerIds(eventId);
  await Promise.all([
    ...ids.sweeps.map((id) => queues.sweep.removeJobScheduler(id)),
    queues.sweep.removeJobScheduler(ids.sections),
    queues.seatMapRefresh.removeJobScheduler(ids.refresh),
    queues.reconcile.removeJobScheduler(ids.reconcile),
    queues.outbox.removeJobScheduler(ids.outbox),
  ]);
}

/** Adds a run of an event's draw chain (./draw.ts) after `delayMs`; the same run again adds nothing. */
export async function scheduleDraw(queues: Queues, job: DrawJob, delayMs: number): Promise<void> {
  requireRedis(queues.connection, "schedule the draw");
  await queues.reconcile.add("draw", job, {
    jobId: drawJobId(job.eventId, job.onSaleAt, job.run),
    delay: Math.max(0, delayMs),
  });
}

/** The job id of a closed event's n-th end run (deterministic: many gateways add one chain). */
export const endJobId = (eventId: string, run: number) => `end-${eventId}-${run}`;

/** Adds a run of a closed event's end (./event-end.ts) after `delayMs`. */
export async function scheduleEventEnd(
  queues: Queues,
  job: { eventId: string; run: number; quietSince?: number },
  delayMs: number,
): Promise<void> {
  requireRedis(queues.connection, "schedule the event's end");
  await queues.reconcile.add(
    "end-event",
    { kind: "end", ...job },
    { jobId: endJobId(job.eventId, job.run), delay: Math.max(0, delayMs) },
  );
}

/**
 * Removes every job of an event still waiting in Redis (schedulers, delayed and waiting jobs of
 * every queue, its bookings aside: those are the integrators'), except `keepJobId` (the end run
 * doing it, which is active anyway). Reads the queues' waiting and delayed lists in pages: done
 * once per event, when it ends. Resolves with how many jobs were removed.
 */
export async function removeEventJobs(queues: Queues, eventId: string, keepJobId?: string): Promise<number> {
  await unscheduleEvent(queues, eventId);
  let removed = 0;
  for (const queue of [queues.sweep, queues.seatMapRefresh, queues.reconcile, queues.outbox] as Queue[]) {
    // Read every page first: removing while paging would shift the pages.
    const mine = [];
    const page = 500;
    for (let start = 0; ; start += page) {
      const jobs = await queue.getJobs(["delayed", "waiting", "prioritized"], start, start + page - 1, true);
      mine.push(
        ...jobs.filter((j) => j && j.id !== keepJobId && (j.data as { eventId?: string })?.eventId === eventId),
      );
      if (jobs.length < page) break;
    }
    for (const job of mine) {
      // A job that just became active cannot be removed (its lock): it runs once, harmlessly.
      if (
        await job.remove().then(
          () => true,
          () => false,
        )
      )
        removed++;
    }
  }
  return removed;
}

/**
 * The hold service's sweep scheduler: a hold expiring at `expiresAt` adds one delayed sweep per
 * shard it touched, at the end of its 5 s bucket, deduplicated by job id across every gateway
 * (`sweep-<event>-<shard>-<bucket>`): 10,000 holds in one bucket make one job per shard. This
 * process also remembers the ids it added, so those holds cost one Redis call, not 10,000.
 */
export function sweepScheduler(queues: Queues) {
  const added = new Map<string, number>();
  return {
    async expiring(eventId: string, shards: readonly number[], expiresAt: number): Promise<void> {
      requireRedis(queues.connection, "queue the hold's sweep");
      const bucket = Math.ceil(expiresAt / SWEEP_BUCKET_MS) * SWEEP_BUCKET_MS;
      const now = Date.now();
      if (added.size > 10_000) for (const [id, at] of added) if (at < now) added.delete(id);
      await Promise.all(
        [...new Set(shards)].map(async (shard) => {
          const jobId = `sweep-${eventId}-${shard}-${bucket}`;
          if (added.has(jobId)) return;
          added.set(jobId, bucket);
          try {
            await queues.sweep.add("sweep", { eventId, shard }, { jobId, delay: Math.max(0, bucket - now) });
          } catch (err) {
            added.delete(jobId);
            throw err;
          }
        }),
      );
    },
  };
}

/** The saga's reconcile scheduler: one delayed job per purchase, deduplicated by job id. */
export function reconcileScheduler(queues: Queues) {
  return {
    async schedule(eventId: string, purchaseId: string, delayMs: number, sessionId?: string) {
      // Fail at once while Redis is away (the per-event backstop, kicked again when Redis is
      // back, finds the purchase); never hold a purchase up waiting for a reconnect.
      requireRedis(queues.connection, "queue the reconcile job");
      await queues.reconcile.add(
        "reconcile-purchase",
        { kind: "purchase", eventId, purchaseId, ...(sessionId ? { sessionId } : {}) },
        { jobId: `reconcile-${purchaseId}`, delay: delayMs },
      );
    },
  };
}

/**
 * The notifier's dispatch: a batch's job under its batch id (a repeat while it exists adds
 * nothing); the backstop's re-adds under ids of their own, since the first may have failed for good.
 */
export function notifyDispatch(queues: Pick<Queues, "notify" | "connection">) {
  return {
    async add(batch: NotifyBatch, attempt: number): Promise<void> {
      requireRedis(queues.connection, "queue the seats-back notification");
      await queues.notify.add("notify", batch, {
        jobId: attempt === 0 ? `notify-${batch.batchId}` : `notify-${batch.batchId}-r${attempt}`,
      });
    },
  };
}
