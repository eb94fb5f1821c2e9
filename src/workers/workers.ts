/**
 * The BullMQ workers of the gateway. Every job is idempotent: a worker killed mid-job loses
 * nothing, BullMQ hands the job to another worker once its lock expires, and running it again
 * changes nothing that the first run already changed (conditional writes in DynamoDB, versioned
 * cache updates in Redis).
 */
import { type Job, Worker } from "bullmq";
import type { SeatMapWrites } from "../claims/seat-map-writes.js";
import { type Inventory, SWEEP_SHARDS, type SweepResult } from "../inventory/index.js";
import type { Logger } from "../logger.js";
import type { Metrics } from "../metrics.js";
import type { NotifyBatch, Notifier } from "../notify/service.js";
import type { WaitingRoom } from "../waiting-room/index.js";
import { drawJob } from "./draw.js";
import type { PurchaseSaga } from "../purchases/saga.js";
import { connectRedis, type RedisTarget } from "../redis/connect.js";
import type { RedisClient } from "../redis/scripts.js";
import type { SeatMapCache } from "../seatmap/cache.js";
import { onceEvery } from "../throttle.js";
import { endEventJob } from "./event-end.js";
import { type PublishOutboxDeps, publishOutbox } from "./outbox.js";
import { disconnectOwnConnection, type SupervisedWorker, superviseWorker, type WaitingCounts } from "./watchdog.js";
import {
  createQueues,
  type OutboxJob,
  type QueueName,
  QUEUE_PREFIX,
  queueNames,
  type ReconcileJob,
  type SeatMapRefreshJob,
  type SweepJob,
  scheduleDraw,
} from "./queues.js";

export interface WorkerDeps {
  /** One server or a cluster (src/redis/connect.ts); each worker opens its own blocking connection. */
  redis: RedisTarget;
  inventory: Inventory;
  /** Sections are rebuilt from the store on the refresh job; its held seats are the sweeps' candidates. */
  seatMap: Pick<SeatMapCache, "rebuild" | "heldUntil">;
  /** What a sweep released is told to the seat map. */
  seatMapWrites: Pick<SeatMapWrites, "released">;
  /** The lottery draw job draws through it (./draw.ts); absent: draw jobs find no room. */
  waitingRoom?: Pick<WaitingRoom, "drawDue">;
  /** Seats a sweep gave back are told to the fans who asked (src/notify/); absent: nobody asked. */
  notify?: Pick<Notifier, "enabled" | "seatsReturned" | "deliver" | "redeliverDue">;
  purchases: PurchaseSaga;
  /** A pending purchase younger than this may still have a charge in flight: left alone. */
  paymentTimeoutMs: number;
  logger: Logger;
  /** Job run times (gateway_job_duration_seconds); none in tests that do not read them. */
  metrics?: Pick<Metrics, "jobDuration" | "workerRestarts">;
  /** Jobs of one worker in flight at once. */
  concurrency?: number;
  /** A running job's lock (WORKER_LOCK_MS); a killed worker's job is taken back after it. Default 30 s. */
  lockMs?: number;
  /**
   * A worker that starts no job while jobs wait this long (a free slot, not paused) is replaced
   * (WORKER_STALL_MS; ./watchdog.ts). Default 60 s.
   */
  stallMs?: number;
  /** The publisher's timings (tests shorten them); defaults in ./outbox.ts. */
  outbox?: Pick<PublishOutboxDeps, "checkAfterMs" | "maxCheckAfterMs" | "unsentMarginMs">;
  /** A closed event's end runs (tests shorten them); defaults in ./event-end.ts. */
  ending?: { recheckMs?: number; quietMs?: number };
}

/**
 * Every job is idempotent, so one that was running in several workers killed in a row is run
 * again, not failed for good (BullMQ's default fails it at its second stall): a long sweep of
 * every shard of an event is the likeliest to be in flight at each kill.
 */
export const MAX_STALLED_COUNT = 5;

export interface Workers {
  /** The workers running now (the watchdog replaces a stuck one: read it again, do not keep it). */
  readonly workers: Worker[];
  close(): Promise<void>;
}

/**
 * A section the seat map does not have (Redis lost it, or never filled it) is read from DynamoDB
 * by a shard's sweep at most this often per process: the read resets the expired seats of every
 * shard, so the other fifteen shards' sweeps need not read it again.
 */
export const SECTION_READ_EVERY_MS = 60_000;

export type SweepDeps = Pick<WorkerDeps, "inventory" | "seatMapWrites" | "notify"> & {
  /** The held seats' candidates (absent: every section is read from DynamoDB by every sweep). */
  seatMap?: Pick<SeatMapCache, "heldUntil">;
  /** `${eventId}/${sectionId}` -> may a sweep read it from DynamoDB now (onceEvery(SECTION_READ_EVERY_MS)). */
  sectionReadDue?: (key: string) => boolean;
  /** `${eventId}/${sectionId}` of the sections a read found sold out: never read again by this process. */
  soldOut?: Set<string>;
};

/** Past this many sold-out sections remembered, they are forgotten (each costs one more read). */
const MAX_SOLD_OUT = 10_000;

/** One shard of the event, or every shard (a closed event's end runs), or the sections read from DynamoDB. */
export async function sweepJob(deps: SweepDeps, job: SweepJob) {
  const shards =
    job.sections === true
      ? []
      : job.shard === undefined
        ? Array.from({ length: SWEEP_SHARDS }, (_, s) => s)
        : [job.shard];
  const total: SweepResult = {
    examined: 0,
    seatsReleased: 0,
    releasedSeats: [],
    generalAdmissionHoldsExpired: 0,
    generalAdmissionQuantityReturned: 0,
  };
  const { seatMap, sectionReadDue, soldOut } = deps;
  const key = (sectionId: string) => `${job.eventId}/${sectionId}`;
  const passes: (() => Promise<SweepResult>)[] = shards.map(
    (shard) => () =>
      deps.inventory.holds.sweepExpired({
        eventId: job.eventId,
        shard,
        ...(seatMap ? { heldSeats: seatMap } : {}),
        ...(sectionReadDue || soldOut
          ? {
              storeReadDue: (sectionId: string) =>
                !soldOut?.has(key(sectionId)) && (sectionReadDue?.(key(sectionId)) ?? true),
            }
          : {}),
      }),
  );
  if (job.sections === true) {
    passes.push(() =>
      deps.inventory.holds.sweepSections({
        eventId: job.eventId,
        ...(soldOut ? { skip: (sectionId: string) => soldOut.has(key(sectionId)) } : {}),
      }),
    );
  }
  for (const pass of passes) {
    const result = await pass();
    if (soldOut && result.soldOutSections?.length) {
      if (soldOut.size >= MAX_SOLD_OUT) soldOut.clear();
      for (const sectionId of result.soldOutSections) soldOut.add(key(sectionId));
    }
    await deps.seatMapWrites.released(job.eventId, result.releasedSeats);
    // After the seat map: a fan told first would find the seats still shown as held.
    await deps.notify?.seatsReturned(job.eventId, result.seatsReleased + result.generalAdmissionQuantityReturned);
    total.examined += result.examined;
    total.seatsReleased += result.seatsReleased;
    total.releasedSeats.push(...result.releasedSeats);
    total.generalAdmissionHoldsExpired += result.generalAdmissionHoldsExpired;
    total.generalAdmissionQuantityReturned += result.generalAdmissionQuantityReturned;
  }
  // The notifier's backstop rides on shard 0's sweeps (every live event has them, every 5 min and
  // after a reconnect): one Query when nothing is due.
  if (deps.notify?.enabled && job.sections !== true && (job.shard ?? 0) === 0) {
    await deps.notify.redeliverDue(job.eventId).catch(() => 0);
  }
  return total;
}

export async function seatMapRefreshJob(deps: Pick<WorkerDeps, "seatMap">, job: SeatMapRefreshJob) {
  const sectionIds = job.kind === "section" ? [job.sectionId] : job.sectionIds;
  let rebuilt = 0;
  for (const sectionId of sectionIds) if (await deps.seatMap.rebuild(job.eventId, sectionId)) rebuilt++;
  return { rebuilt };
}

export class StillPending extends Error {
  override name = "StillPending";
}

/**
 * Resolves pending purchases from the provider's answer (lookup): confirms if charged and the
 * hold is still good, refunds if charged and the seats are lost, fails if never charged. A
 * purchase still pending afterwards (too young, provider down) makes the job fail, so BullMQ
 * retries it with backoff; the event's backstop likewise while any is left.
 */
export async function reconcileJob(
  deps: Pick<WorkerDeps, "inventory" | "purchases" | "paymentTimeoutMs">,
  job: Exclude<ReconcileJob, { kind: "end" } | { kind: "draw" }>,
) {
  const minAgeMs = deps.paymentTimeoutMs;
  if (job.kind === "purchase") {
    const outcome = await deps.purchases.resolve(job.eventId, job.purchaseId, {
      minAgeMs,
      ...(job.sessionId ? { sessionId: job.sessionId } : {}),
    });
    if (outcome?.kind === "pending") throw new StillPending(`purchase ${job.purchaseId} is still pending`);
    return { purchaseId: job.purchaseId, outcome: outcome?.kind ?? "not_found" };
  }
  // Work left (a purchase too young, a provider down): the job fails and BullMQ tries it again
  // with backoff, until none is left; the next backstop is minutes away.
  const outcomes = await reconcileEvent(deps, job.eventId);
  if ((outcomes.pending ?? 0) > 0 || (outcomes.error ?? 0) > 0)
    throw new StillPending(`event ${job.eventId}: ${JSON.stringify(outcomes)}`);
  return outcomes;
}

/** The backstop: every pending (or refund-due) purchase of the event; outcomes counted by kind. */
export async function reconcileEvent(
  deps: Pick<WorkerDeps, "inventory" | "purchases" | "paymentTimeoutMs">,
  eventId: string,
): Promise<Record<string, number>> {
  const minAgeMs = deps.paymentTimeoutMs;
  const outcomes: Record<string, number> = {};
  // Pending purchases, and failed ones whose refund was decided but not finished (refund_due: a
  // crash or a provider error between the decision and the refund; they sort apart, so this reads
  // none of the declines).
  for (const filter of [{ status: "pending" as const }, { refundDue: true }]) {
    let cursor: string | undefined;
    do {
      const page = await deps.inventory.purchases.list({
        eventId,
        ...filter,
        ...(cursor ? { cursor } : {}),
      });
      for (const p of page.purchases) {
        const outcome = await deps.purchases.resolve(eventId, p.purchaseId, { minAgeMs }).catch(() => null);
        const kind = outcome?.kind ?? "error";
        outcomes[kind] = (outcomes[kind] ?? 0) + 1;
      }
      cursor = page.nextCursor;
    } while (cursor);
  }
  return outcomes;
}

export function startWorkers(deps: WorkerDeps): Workers {
  const connections: RedisClient[] = [];
  const connection = () => {
    // BullMQ's blocking commands need retries without limit on their own connection.
    const c = connectRedis(deps.redis, "blocking");
    c.on("error", (err) => deps.logger.warn({ err: err.message }, "worker redis connection error"));
    connections.push(c);
    return c;
  };
  const common = (name: string) => ({
    connection: connection(),
    prefix: QUEUE_PREFIX,
    concurrency: deps.concurrency ?? 4,
    // A killed worker's job is taken over after this long.
    lockDuration: deps.lockMs ?? 30_000,
    maxStalledCount: MAX_STALLED_COUNT,
    name,
  });

  const loggedJob =
    <T>(queue: string, run: (job: Job<T>) => Promise<unknown>) =>
    async (job: Job<T>) => {
      const log = deps.logger.child({ queue, jobId: job.id });
      const started = performance.now();
      const timed = (outcome: "ok" | "error") =>
        deps.metrics?.jobDuration.observe({ queue, outcome }, (performance.now() - started) / 1000);
      try {
        const result = await run(job);
        timed("ok");
        log.debug({ result }, "job done");
        return result;
      } catch (err) {
        timed("error");
        throw err;
      }
    };
  const logged = <T>(queue: string, run: (data: T) => Promise<unknown>) => loggedJob<T>(queue, (job) => run(job.data));

  // Producers: the bookings the publisher adds, and the end runs' next runs and removals.
  const queues = createQueues(connection(), deps.logger);
  const bookings = queues.bookings;
  const publish = (eventId: string) =>
    publishOutbox({ inventory: deps.inventory, bookings, logger: deps.logger, ...deps.outbox }, { eventId });
  const reconcileOrEnd = (job: Job<ReconcileJob>) => {
    const data = job.data;
    if (data.kind === "draw") {
      const waitingRoom = deps.waitingRoom;
      if (!waitingRoom) return Promise.resolve({ outcome: "no_room" });
      return drawJob(
        { waitingRoom, next: (next, delayMs) => scheduleDraw(queues, next, delayMs), logger: deps.logger },
        data,
      );
    }
    if (data.kind !== "end") return reconcileJob(deps, data);
    return endEventJob(
      {
        inventory: deps.inventory,
        queues,
        logger: deps.logger,
        sweepAll: async (eventId, run) => {
          await sweepJob(sweepDeps, { eventId });
          if (run === 0) await sweepJob(sweepDeps, { eventId, sections: true });
        },
        reconcile: (eventId) => reconcileEvent(deps, eventId),
        publish,
        ...deps.ending,
      },
      data,
      job.id,
    );
  };
  const sweepDeps: SweepDeps = { ...deps, sectionReadDue: onceEvery(SECTION_READ_EVERY_MS), soldOut: new Set() };
  // Each worker runs under the watchdog (./watchdog.ts): one that takes nothing while jobs wait
  // (a blocking connection stuck after a failover) is replaced by a new one on a new connection.
  const supervised: SupervisedWorker[] = [];
  const run = <T>(
    name: QueueName,
    workerName: string,
    processor: (job: Job<T>) => Promise<unknown>,
    queue: WaitingCounts,
    options: { concurrency?: number } = {},
  ) => {
    const start = () => {
      const w = new Worker<T>(name, processor, { ...common(workerName), ...options }) as unknown as Worker;
      w.on("failed", (job, err) => {
        const level = err instanceof StillPending || err.name === "StillPending" ? "debug" : "warn";
        deps.logger[level](
          { queue: w.name, jobId: job?.id, attempt: job?.attemptsMade, err: err.message },
          "job failed",
        );
      });
      w.on("error", (err) => deps.logger.warn({ queue: w.name, err: err.message }, "worker error"));
      return w;
    };
    const dispose = (w: Worker) => {
      const at = connections.indexOf(disconnectOwnConnection(w));
      if (at >= 0) connections.splice(at, 1);
    };
    supervised.push(
      superviseWorker(start, queue, {
        logger: deps.logger,
        stallMs: deps.stallMs,
        dispose,
        onRestart: (queueName) => deps.metrics?.workerRestarts.inc({ queue: queueName }),
      }),
    );
  };
  run(
    queueNames.sweep,
    "sweeper",
    logged(queueNames.sweep, (d: SweepJob) => sweepJob(sweepDeps, d)),
    queues.sweep,
  );
  run(
    queueNames.seatMapRefresh,
    "seatmap-refresh",
    logged(queueNames.seatMapRefresh, (d: SeatMapRefreshJob) => seatMapRefreshJob(deps, d)),
    queues.seatMapRefresh,
  );
  run(queueNames.reconcile, "reconciler", loggedJob(queueNames.reconcile, reconcileOrEnd), queues.reconcile);
  // One publisher run per event at a time is plenty; the job ids make repeats harmless anyway.
  run(
    queueNames.outbox,
    "outbox",
    logged(queueNames.outbox, (d: OutboxJob) => publish(d.eventId)),
    queues.outbox,
    { concurrency: 1 },
  );
  const notify = deps.notify;
  // Only a process that can deliver takes the batches (one without the URL would drop them).
  if (notify?.enabled) {
    run(
      queueNames.notify,
      "notify",
      logged(queueNames.notify, (batch: NotifyBatch) => notify.deliver(batch)),
      queues.notify,
    );
  }
  return {
    get workers() {
      return supervised.map((w) => w.current);
    },
    close: async () => {
      await Promise.all(supervised.map((w) => w.close()));
      await queues.close();
      for (const c of connections) c.disconnect();
    },
  };
}
