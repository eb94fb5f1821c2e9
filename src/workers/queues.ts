/**
 * Every BullMQ queue of the gateway, named in one place. The prefix is a hash tag, so all of a
 * queue's keys land in one slot and the same queues run on Redis Cluster. Queues and workers each
 * get their own connections (BullMQ needs a blocking one per worker).
 */
import { Queue } from "bullmq";
import type { Redis } from "ioredis";
import { SWEEP_SHARDS } from "../inventory/index.js";

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

export interface Queues {
  sweep: Queue<SweepJob>;
  seatMapRefresh: Queue<SeatMapRefreshJob>;
  close(): Promise<void>;
}

/** Producers only (no blocking connection): what the gateway needs to schedule work. */
export function createQueues(connection: Redis): Queues {
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
  return {
    sweep,
    seatMapRefresh,
    close: async () => {
      await Promise.all([sweep.close(), seatMapRefresh.close()]);
    },
  };
}

/**
 * Schedules an event's background work: a sweep per GSI2 shard every few seconds and a periodic
 * rebuild of its seat-map cache. Idempotent (job schedulers are upserted by id), so every gateway
 * instance may call it for every event it creates or finds.
 */
export async function scheduleEvent(queues: Queues, eventId: string, sectionIds: string[]): Promise<void> {
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
  ]);
}
