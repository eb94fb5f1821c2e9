/**
 * The outbox publisher: turns the unsent `BookingConfirmed` outbox records of an event (written
 * in the same transaction as the confirmation, docs/data-model.md) into jobs on the bookings
 * queue, where integrators consume them.
 *
 * Exactly one job per confirmed purchase, however often and however concurrently this runs:
 * each record is added under a job id derived from its purchase id, THEN marked sent. A crash
 * between the two leaves the record unsent; the next run adds the same job id again, and BullMQ
 * ignores an add whose job id already exists (addStandardJob: `EXISTS jobKey` -> "duplicated").
 * That only holds while the job is still stored, so the jobs are kept for `BOOKING_RETENTION_SECONDS`
 * after they complete or fail: far longer than the gap between two runs of the publisher.
 */
import { Queue } from "bullmq";
import type { Redis } from "ioredis";
import type { Inventory, OutboxRecord } from "../inventory/index.js";
import type { Logger } from "../logger.js";
import { type OutboxJob, QUEUE_PREFIX, queueNames } from "./queues.js";

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

export interface PublishOutboxDeps {
  inventory: Pick<Inventory, "listUnsentOutbox" | "markOutboxSent">;
  bookings: Queue<BookingConfirmedJob>;
  logger: Logger;
  /** Records read per page (default 100). */
  pageSize?: number;
  /** Pages per run at most (default 50); the rest waits for the next run. */
  maxPages?: number;
}

export interface PublishOutboxResult {
  /** Records handed to the queue (a repeat of a job id already there adds nothing). */
  published: number;
  /** Records this run marked sent. */
  marked: number;
  /** Records another run marked sent first (or the index had not caught up with). */
  alreadySent: number;
}

/**
 * BullMQ refuses a custom id that is an integer or contains `:` (Job.validateOptions), so the
 * separator is `-`; a purchase id matches `^[A-Za-z0-9_-]{1,128}$`, and starts with its event id.
 */
export function bookingJobId(purchaseId: string): string {
  return `${BOOKING_CONFIRMED}-${purchaseId}`;
}

export function bookingJobOf(record: OutboxRecord): BookingConfirmedJob {
  return {
    type: BOOKING_CONFIRMED,
    eventId: record.eventId,
    outboxId: record.outboxId,
    purchaseId: record.purchaseId,
    createdAt: record.createdAt,
    payload: record.payload,
  };
}

/** The producer side of the bookings queue (no blocking connection). */
export function createBookingsQueue(
  connection: Redis,
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

/** Adds the record's job, then marks the record sent. Exported for tests of a crash in between. */
export async function publishRecord(deps: Omit<PublishOutboxDeps, "logger">, record: OutboxRecord): Promise<boolean> {
  await deps.bookings.add(BOOKING_CONFIRMED, bookingJobOf(record), {
    jobId: bookingJobId(record.purchaseId),
    // Per job, so the duplicate window holds whoever built the queue.
    removeOnComplete: { age: BOOKING_RETENTION_SECONDS },
    removeOnFail: { age: BOOKING_RETENTION_SECONDS },
  });
  return deps.inventory.markOutboxSent(record.eventId, record.purchaseId);
}

/**
 * Publishes every unsent outbox record of one event. Idempotent and safe to run from many
 * workers at once; a store or Redis failure rejects (BullMQ retries the job), and whatever was
 * not marked sent is published by the next run under the same job ids.
 */
export async function publishOutbox(deps: PublishOutboxDeps, job: OutboxJob): Promise<PublishOutboxResult> {
  const pageSize = deps.pageSize ?? 100;
  const maxPages = deps.maxPages ?? 50;
  const log = deps.logger.child({ job: "outbox", eventId: job.eventId });
  const result: PublishOutboxResult = { published: 0, marked: 0, alreadySent: 0 };

  for (let page = 0; page < maxPages; page++) {
    const records = await deps.inventory.listUnsentOutbox(job.eventId, pageSize);
    let marked = 0;
    for (const record of records) {
      const first = await publishRecord(deps, record);
      result.published++;
      if (first) marked++;
      else result.alreadySent++;
    }
    result.marked += marked;
    // A short page was the last one. A page that marked nothing was taken by another run or
    // is the index lagging behind our own marks: either way the next run picks up the rest.
    if (records.length < pageSize || marked === 0) break;
  }

  if (result.published > 0) log.info(result, "booking confirmations published");
  return result;
}
