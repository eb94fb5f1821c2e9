/**
 * The consumer side of the bookings queue, for integrators: a BullMQ Worker that runs their
 * handler on each `BookingConfirmed` and then acknowledges the outbox record in DynamoDB, which
 * is what takes the record out of the publisher's checks (./outbox.ts).
 *
 * Delivery is at least once, and the purchase id is the stable id to deduplicate by. A booking
 * comes twice when the handler finished but its acknowledgment did not land before Redis lost
 * the job (the publisher then adds it again), or when the handler finished and the process died
 * before BullMQ recorded the completion (BullMQ hands the job out again). This helper skips a job
 * whose record is already acknowledged, so only those narrow windows reach the handler twice;
 * the handler must still treat a purchase id it has seen as done.
 */
import { type Job, Worker } from "bullmq";
import type { Inventory } from "../inventory/index.js";
import type { Logger } from "../logger.js";
import type { RedisClient } from "../redis/scripts.js";
import type { BookingConfirmedJob } from "./outbox.js";
import { QUEUE_PREFIX, queueNames } from "./queues.js";
import { disconnectOwnConnection, type SupervisedWorker, superviseWorker, type WaitingCounts } from "./watchdog.js";

export interface BookingsConsumerOptions {
  /** A connection of its own with `maxRetriesPerRequest: null` (a BullMQ Worker blocks on it). */
  connection: RedisClient;
  inventory: Pick<Inventory, "outbox">;
  /** The integrator's work. A rejection fails the attempt; BullMQ retries it with backoff. */
  handle(booking: BookingConfirmedJob, job: Job<BookingConfirmedJob>): Promise<void>;
  logger: Logger;
  prefix?: string;
  /** Bookings handled at once (default 1). */
  concurrency?: number;
}

/** What the job returns (its BullMQ return value). */
export interface BookingDelivery {
  /** False when the record was already acknowledged: the handler did not run. */
  delivered: boolean;
  /** True when this delivery acknowledged the record (exactly one delivery does). */
  acknowledged: boolean;
}

export function processBooking(
  options: Pick<BookingsConsumerOptions, "inventory" | "handle" | "logger">,
): (job: Job<BookingConfirmedJob>) => Promise<BookingDelivery> {
  return async (job) => {
    const { eventId, purchaseId } = job.data;
    const log = options.logger.child({ job: "booking", eventId, purchaseId });
    // Read first: a store that cannot answer fails the attempt before the handler runs, so an
    // outage of DynamoDB does not turn into duplicate deliveries.
    const record = await options.inventory.outbox.get({ eventId, purchaseId });
    if (record?.state === "acknowledged") {
      log.debug("booking already acknowledged: skipped");
      return { delivered: false, acknowledged: false };
    }
    await options.handle(job.data, job);
    try {
      return { delivered: true, acknowledged: await options.inventory.outbox.acknowledge({ eventId, purchaseId }) };
    } catch (err) {
      // Failing the job now would run the handler again. Completed, it is acknowledged by the
      // publisher's next check of the record, which finds the job completed.
      log.warn({ err: (err as Error).message }, "booking handled, acknowledgment left to the publisher");
      return { delivered: true, acknowledged: false };
    }
  };
}

/** Starts consuming the bookings queue; close the returned worker to stop. */
export function consumeBookings(options: BookingsConsumerOptions): Worker<BookingConfirmedJob, BookingDelivery> {
  const worker = new Worker<BookingConfirmedJob, BookingDelivery>(queueNames.bookings, processBooking(options), {
    connection: options.connection,
    prefix: options.prefix ?? QUEUE_PREFIX,
    concurrency: options.concurrency ?? 1,
  });
  // Connection errors while Redis is away: without a listener BullMQ prints each one to stderr.
  worker.on("error", (err: Error) => options.logger.debug({ queue: worker.name, err: err.message }, "worker error"));
  worker.on("failed", (job, err) =>
    options.logger.warn({ purchaseId: job?.data.purchaseId, err: err.message }, "booking handler failed"),
  );
  return worker;
}

/**
 * consumeBookings under the watchdog (./watchdog.ts): a consumer that takes no booking while
 * bookings wait for `stallMs` (default 60 s; a blocking connection stuck after a failover) is
 * closed and replaced by a new one on a new connection from `connect`. `queue` is read for the
 * waiting count (the bookings Queue, or any Queue of that name, on a connection of its own);
 * `onStart` sees each consumer started, to attach listeners.
 */
export function superviseBookings(
  options: Omit<BookingsConsumerOptions, "connection"> & {
    connect: () => RedisClient;
    queue: WaitingCounts;
    stallMs?: number;
    onStart?: (worker: Worker<BookingConfirmedJob, BookingDelivery>) => void;
  },
): SupervisedWorker {
  const { connect, queue, stallMs, onStart, ...consumer } = options;
  const start = () => {
    const worker = consumeBookings({ ...consumer, connection: connect() });
    onStart?.(worker);
    return worker as unknown as Worker;
  };
  return superviseWorker(start, queue, {
    logger: options.logger,
    ...(stallMs ? { stallMs } : {}),
    dispose: disconnectOwnConnection,
  });
}
