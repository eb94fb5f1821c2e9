/**
 * The outbox publisher: turns the unsent `BookingConfirmed` outbox records of an event (written
 * in the same transaction as the confirmation, docs/data-model.md) into jobs on the bookings
 * queue, where integrators consume them, and sees each through to its acknowledgment.
 *
 * A job added to BullMQ lives in Redis, and Redis can come back empty. So an added job only makes
 * a record `published`; the record leaves the outbox's indexes when it is `acknowledged`, by the
 * consumer helper (./bookings-consumer.ts) once the integrator's handler finished, or by this
 * publisher when it finds the job completed. Each run also re-checks the published records whose
 * check is due (first `checkAfterMs` after publication, then less and less often): a completed
 * job is acknowledged, a job that is gone is added again under the same job id, anything else is
 * left to its consumer. Delivery is therefore at least once, with a stable id: a booking the
 * consumer finished but whose acknowledgment did not land before Redis lost the job is delivered
 * again after the loss, and consumers deduplicate by purchase id.
 *
 * One job per record while Redis keeps its data, however often and however concurrently this
 * runs: each record is added under a job id derived from its purchase id, THEN marked published.
 * A crash between the two leaves the record unsent; the next run adds the same job id again, and
 * BullMQ ignores an add whose job id already exists (addStandardJob: `EXISTS jobKey` ->
 * "duplicated"). The jobs are kept for `BOOKING_RETENTION_SECONDS` after they complete or fail,
 * far longer than the longest gap between two checks of a record, so a check finds a finished
 * job still there.
 */
import type { Queue } from "bullmq";
import type { Inventory, OutboxRecord, Purchase } from "../inventory/index.js";
import type { Logger } from "../logger.js";
import { requireRedis } from "../redis/availability.js";
import {
  addBookingJob as addJob,
  BOOKING_CONFIRMED,
  BOOKING_RETENTION_SECONDS,
  type BookingConfirmedJob,
  bookingJobId,
  createBookingsQueue,
  type OutboxJob,
  type Queues,
} from "./queues.js";

export { BOOKING_CONFIRMED, BOOKING_RETENTION_SECONDS, type BookingConfirmedJob, bookingJobId, createBookingsQueue };

/**
 * The publisher leaves an unsent record alone until it is this old: the saga adds its job right
 * after the confirmation, and the consumer's acknowledgment takes it out of the unsent index, so
 * an unsent record older than this is a crash (or a Redis away) between the two.
 */
export const OUTBOX_UNSENT_MARGIN_MS = 10_000;

/** The first check of a published record comes this long after it was published. */
export const OUTBOX_CHECK_AFTER_MS = 30_000;
/**
 * Each check that finds the job still waiting doubles the wait, up to this: a consumer that is
 * down for hours with thousands of bookings waiting costs a few checks a second, not thousands.
 * It is also how late, at worst, a long-waiting job lost with Redis is added again.
 */
export const OUTBOX_MAX_CHECK_AFTER_MS = 10 * 60_000;

export interface PublishOutboxDeps {
  inventory: Pick<Inventory, "outbox">;
  bookings: Queue<BookingConfirmedJob>;
  logger: Logger;
  /** Records read per page (default 100). */
  pageSize?: number;
  /** Pages of unsent records per run at most (default 50); the rest waits for the next run. */
  maxPages?: number;
  /** Pages of due published records checked per run at most (default 1). */
  maxCheckPages?: number;
  /** Default OUTBOX_CHECK_AFTER_MS. */
  checkAfterMs?: number;
  /** Default OUTBOX_MAX_CHECK_AFTER_MS. */
  maxCheckAfterMs?: number;
  /** Default OUTBOX_UNSENT_MARGIN_MS (0: every unsent record). */
  unsentMarginMs?: number;
}

export interface PublishOutboxResult {
  /** Unsent records handed to the queue (a repeat of a job id already there adds nothing). */
  published: number;
  /** Records this run moved unsent -> published. */
  marked: number;
  /** Records another run published (or a consumer acknowledged) first, or the index lagged. */
  alreadyPublished: number;
  /** Published records whose check was due, looked at by this run. */
  checked: number;
  /** Of those, found completed and acknowledged by this run. */
  acknowledged: number;
  /** Of those, whose job was gone from Redis and was added again. */
  republished: number;
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

async function addBookingJob(bookings: Queue<BookingConfirmedJob>, record: OutboxRecord): Promise<void> {
  await addJob(bookings, bookingJobOf(record));
}

/**
 * A confirmed purchase's booking, as the publisher would build it from the outbox record the
 * confirmation wrote (same transaction, same `confirmedAt`, same payload).
 */
export function bookingOfPurchase(purchase: Purchase & { confirmedAt: string }): BookingConfirmedJob {
  const { purchaseId, holdId, fanId, seats, generalAdmission, amount, confirmedAt } = purchase;
  return {
    type: BOOKING_CONFIRMED,
    eventId: purchase.eventId,
    outboxId: `${BOOKING_CONFIRMED}#${purchaseId}`,
    purchaseId,
    createdAt: confirmedAt,
    payload: {
      purchaseId,
      holdId,
      fanId,
      seats,
      ...(generalAdmission ? { generalAdmission } : {}),
      amount,
      confirmedAt,
    },
  };
}

/**
 * The saga's side of the outbox's common path: the booking's job added right after the
 * confirmation commits, under the id the publisher would use, so the record is acknowledged from
 * `unsent` by its consumer and never marked `published` (one write per purchase, not two). A
 * crash or a Redis away in between leaves the record unsent: the publisher's backstop adds it.
 */
export function bookingPublisher(queues: Pick<Queues, "bookings" | "connection">) {
  return {
    async confirmed(purchase: Purchase): Promise<void> {
      if (!purchase.confirmedAt) return;
      requireRedis(queues.connection, "queue the booking");
      await addJob(queues.bookings, bookingOfPurchase({ ...purchase, confirmedAt: purchase.confirmedAt }));
    },
  };
}

function checkDelay(deps: Pick<PublishOutboxDeps, "checkAfterMs" | "maxCheckAfterMs">, checks: number): number {
  const first = deps.checkAfterMs ?? OUTBOX_CHECK_AFTER_MS;
  return Math.min(deps.maxCheckAfterMs ?? OUTBOX_MAX_CHECK_AFTER_MS, first * 2 ** Math.min(checks, 30));
}

/** Adds the record's job, then marks the record published. Exported for tests of a crash in between. */
export async function publishRecord(deps: Omit<PublishOutboxDeps, "logger">, record: OutboxRecord): Promise<boolean> {
  await addBookingJob(deps.bookings, record);
  return deps.inventory.outbox.markPublished({
    eventId: record.eventId,
    purchaseId: record.purchaseId,
    checkAfterMs: checkDelay(deps, 0),
    ...(record.legacyIndex ? { legacy: true } : {}),
  });
}

export type CheckOutcome = "acknowledged" | "republished" | "waiting" | "failed" | "settled";

/**
 * One due published record: what its job's state in Redis says about it. Exported for tests.
 * `settled`: another publisher or the consumer acknowledged it meanwhile.
 */
export async function checkPublishedRecord(
  deps: Omit<PublishOutboxDeps, "logger">,
  record: OutboxRecord,
): Promise<CheckOutcome> {
  const { eventId, purchaseId } = record;
  const state = await deps.bookings.getJobState(bookingJobId(purchaseId));
  if (state === "completed") {
    return (await deps.inventory.outbox.acknowledge({ eventId, purchaseId })) ? "acknowledged" : "settled";
  }
  if (state === "unknown") {
    // Gone from Redis: lost with its data (or kept past the retention). The index is eventually
    // consistent and may still list a record acknowledged a moment ago; a consistent read keeps
    // that booking from being delivered again.
    const current = await deps.inventory.outbox.get({ eventId, purchaseId });
    if (current?.state !== "published") return "settled";
    await addBookingJob(deps.bookings, current);
    // The new job starts the checks over, so a second loss is noticed as soon as the first.
    const deferred = await deps.inventory.outbox.deferCheck({
      eventId,
      purchaseId,
      checkAfterMs: checkDelay(deps, 0),
      republished: true,
      ...(current.legacyIndex ? { legacy: true } : {}),
    });
    return deferred ? "republished" : "settled";
  }
  // Waiting, active, delayed, or failed for good (the integrator's handler gave up): its consumer's
  // business. Checked again later, less often each time.
  const deferred = await deps.inventory.outbox.deferCheck({
    eventId,
    purchaseId,
    checkAfterMs: checkDelay(deps, record.checks + 1),
    republished: false,
    ...(record.legacyIndex ? { legacy: true } : {}),
  });
  if (!deferred) return "settled";
  return state === "failed" ? "failed" : "waiting";
}

/**
 * Publishes every unsent outbox record of one event older than the margin (the saga added the
 * younger ones' jobs itself), then checks the published ones that are
 * due. Idempotent and safe to run from many workers at once; a store or Redis failure rejects
 * (BullMQ retries the job), and whatever was not marked is picked up by the next run under the
 * same job ids.
 */
export async function publishOutbox(deps: PublishOutboxDeps, job: OutboxJob): Promise<PublishOutboxResult> {
  const pageSize = deps.pageSize ?? 100;
  const maxPages = deps.maxPages ?? 50;
  const maxCheckPages = deps.maxCheckPages ?? 1;
  // After a reconnect no record is too young: its job may have gone with the Redis it was added to.
  const margin = job.afterReconnect ? 0 : (deps.unsentMarginMs ?? OUTBOX_UNSENT_MARGIN_MS);
  const log = deps.logger.child({ job: "outbox", eventId: job.eventId });
  const result: PublishOutboxResult = {
    published: 0,
    marked: 0,
    alreadyPublished: 0,
    checked: 0,
    acknowledged: 0,
    republished: 0,
  };

  for (let page = 0; page < maxPages; page++) {
    const records = await deps.inventory.outbox.listUnsent({
      eventId: job.eventId,
      limit: pageSize,
      ...(margin > 0 ? { olderThanMs: margin } : {}),
    });
    let marked = 0;
    for (const record of records) {
      const first = await publishRecord(deps, record);
      result.published++;
      if (first) marked++;
      else result.alreadyPublished++;
    }
    result.marked += marked;
    // A short page was the last one. A page that marked nothing was taken by another run or
    // is the index lagging behind our own marks: either way the next run picks up the rest.
    if (records.length < pageSize || marked === 0) break;
  }

  // The key condition reads only the records due now: one Query returning nothing in the usual
  // case, where the consumer acknowledged each booking long before its first check.
  let failed = 0;
  for (let page = 0; page < maxCheckPages; page++) {
    const due = await deps.inventory.outbox.listDue({ eventId: job.eventId, limit: pageSize });
    let moved = 0;
    for (const record of due) {
      const outcome = await checkPublishedRecord(deps, record);
      result.checked++;
      if (outcome === "acknowledged") result.acknowledged++;
      if (outcome === "republished") result.republished++;
      if (outcome === "failed") failed++;
      if (outcome !== "settled") moved++;
    }
    // As above: a page that changed nothing is another run's or the index lagging.
    if (due.length < pageSize || moved === 0) break;
  }

  if (result.republished > 0) log.warn(result, "booking jobs gone from Redis were published again");
  else if (result.published > 0 || result.acknowledged > 0) log.info(result, "booking confirmations published");
  if (failed > 0) log.warn({ failed }, "booking jobs failed for good, still unacknowledged");
  return result;
}
