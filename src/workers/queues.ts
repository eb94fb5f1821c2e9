/**
 * Every BullMQ queue of the gateway, named in one place. The prefix is a hash tag, so all of a
 * queue's keys land in one slot and the same queues run on Redis Cluster. Queues and workers each
 * get their own connections (BullMQ needs a blocking one per worker).
 */
import { Queue } from "bullmq";
import { SWEEP_SHARDS } from "../inventory/index.js";
import type { Logger } from "../logger.js";
import { requireRedis, trackRedis } from "../redis/availability.js";
import type { RedisClient } from "../redis/scripts.js";

export const QUEUE_PREFIX = "{onsale}";

export const queueNames = {
  /** Resets expired holds of one event and GSI2 shard. Repeatable, per event and shard. */
  sweep: "hold-sweep",
  /** Applies seat changes to the seat-map cache, or rebuilds a section from DynamoDB. */
  seatMapRefresh: "seatmap-refresh",
  /** Resolves purchases whose payment outcome is unknown. */
  reconcile: "purchase-reconcile",
  /** Publishes confirmed purchases from the outbox. */
  outbox: "outbox-publish",
  /** Where integrators consume `BookingConfirmed`. */
  bookings: "booking-confirmed",
} as const;

export type QueueName = (typeof queueNames)[keyof typeof queueNames];

export const SWEEP_EVERY_MS = 5_000;
export const REFRESH_EVERY_MS = 60_000;

export interface SweepJob {
  eventId: string;
  shard: number;
}

export type SeatMapRefreshJob =
  | { eventId: string; kind: "section"; sectionId: string }
  | { eventId: string; kind: "event"; sectionIds: string[] };

export type ReconcileJob =
  /** One purchase whose payment outcome was unknown (or whose saga may have been cut short). */
  | { kind: "purchase"; eventId: string; purchaseId: string; sessionId?: string }
  /** Every pending purchase of an event older than the payment timeout (the backstop). */
  | { kind: "event"; eventId: string };

export interface OutboxJob {
  eventId: string;
}

export const RECONCILE_EVERY_MS = 15_000;
export const OUTBOX_EVERY_MS = 1_000;

export interface Queues {
  /** The producers' connection (its status says whether adding a job can succeed now). */
  connection: RedisClient;
  sweep: Queue<SweepJob>;
  seatMapRefresh: Queue<SeatMapRefreshJob>;
  reconcile: Queue<ReconcileJob>;
  outbox: Queue<OutboxJob>;
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
    defaultJobOptions: { removeOnComplete: 100, removeOnFail: 500 },
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
  for (const queue of [sweep, seatMapRefresh, reconcile, outbox] as Queue[]) {
    queue.on("error", (err: Error) => logger?.debug({ queue: queue.name, err: err.message }, "queue connection error"));
  }
  return {
    connection,
    sweep,
    seatMapRefresh,
    reconcile,
    outbox,
    close: async () => {
      await Promise.all([sweep.close(), seatMapRefresh.close(), reconcile.close(), outbox.close()]);
    },
  };
}

/**
 * Schedules an event's background work: a sweep per GSI2 shard every few seconds and a periodic
 * rebuild of its seat-map cache. Idempotent (job schedulers are upserted by id), so every gateway
 * instance may call it for every event it creates or finds.
 */
export async function scheduleEvent(queues: Queues, eventId: string, sectionIds: string[]): Promise<void> {
  // While Redis is away BullMQ would wait for it; the caller tries again later instead.
  requireRedis(queues.connection, "schedule event jobs");
  await Promise.all([
    ...Array.from({ length: SWEEP_SHARDS }, (_, shard) =>
      queues.sweep.upsertJobScheduler(
        `sweep:${eventId}:${shard}`,
        { every: SWEEP_EVERY_MS },
        { name: "sweep", data: { eventId, shard } },
      ),
    ),
    queues.seatMapRefresh.upsertJobScheduler(
      `refresh:${eventId}`,
      { every: REFRESH_EVERY_MS },
      { name: "refresh", data: { eventId, kind: "event", sectionIds } },
    ),
    queues.reconcile.upsertJobScheduler(
      `reconcile:${eventId}`,
      { every: RECONCILE_EVERY_MS },
      { name: "reconcile-event", data: { kind: "event", eventId } },
    ),
    queues.outbox.upsertJobScheduler(
      `outbox:${eventId}`,
      { every: OUTBOX_EVERY_MS },
      { name: "outbox", data: { eventId } },
    ),
  ]);
}

/** The saga's reconcile scheduler: one delayed job per purchase, deduplicated by job id. */
export function reconcileScheduler(queues: Queues) {
  return {
    async schedule(eventId: string, purchaseId: string, delayMs: number, sessionId?: string) {
      // Fail at once while Redis is away (the per-event backstop, scheduled again when Redis is
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
