/**
 * A BullMQ worker that takes no job while jobs wait is replaced by a new one.
 *
 * After a Redis failover a worker can stay "running", report no error, and take nothing: its
 * blocking connection waits on a master that is gone, or on a socket nobody answers
 * (taskforcesh/bullmq#3088, #3185; BullMQ's maintainers leave reconnection to ioredis and advise
 * closing such a worker and starting a new one). Here that would leave purchases pending (the
 * reconciler), bookings unsent (the outbox) and held seats unswept until someone restarts the
 * process. The watchdog asks the queue, on a connection of its own, how many jobs wait; when jobs
 * have waited for `stallMs` while this worker had a free slot and started none, it closes the
 * worker (without waiting for it past `closeTimeoutMs`: a close can hang on the same dead socket)
 * and starts a new one on a new connection.
 *
 * It never restarts a worker that is paused or closing, one whose every slot is busy (a long job
 * is not a stall), or one that started a job since the jobs were first seen waiting. Several
 * processes share a queue: one stuck among healthy ones shows no waiting jobs (the others take
 * them), so it is replaced only once it matters. Every step is logged; `restarts` counts them.
 */
import type { Worker } from "bullmq";
import type { Logger } from "../logger.js";
import type { RedisClient } from "../redis/scripts.js";

export interface WatchdogOptions {
  /** Jobs waiting for this long, none started by a worker with a free slot: replaced. Default 60 s. */
  stallMs?: number;
  /** How often the queue's counts are read. Default stallMs / 4. */
  checkMs?: number;
  /** How long a stuck worker's close is awaited before the new one starts anyway. Default 5 s. */
  closeTimeoutMs?: number;
  logger: Logger;
  /** Told of each replacement (a metric, a test). */
  onRestart?: (queue: string, worker: Worker) => void;
}

/**
 * The connection a worker was started on (BullMQ keeps the instance given in its options): the
 * `dispose` of a worker that got a connection of its own.
 */
export function disconnectOwnConnection(worker: Worker): RedisClient {
  const connection = worker.opts.connection as RedisClient;
  connection.disconnect();
  return connection;
}

/** What the watchdog reads of the queue: its waiting jobs (BullMQ's Queue.getJobCounts). */
export interface WaitingCounts {
  getJobCounts(...types: string[]): Promise<Record<string, number>>;
}

export interface SupervisedWorker {
  /** The worker now running (a new one after each replacement). */
  readonly current: Worker;
  readonly restarts: number;
  /** Stops the watch and closes the current worker (`force` as Worker.close). */
  close(force?: boolean): Promise<void>;
}

/**
 * Runs `start()`'s worker under the watchdog. `start` is called again for each replacement and
 * must open a new connection (the old one may be the stuck part); `dispose` is given each worker
 * after its close, to drop that connection.
 */
export function superviseWorker(
  start: () => Worker,
  queue: WaitingCounts,
  options: WatchdogOptions & { dispose?: (worker: Worker) => void },
): SupervisedWorker {
  const stallMs = options.stallMs ?? 60_000;
  const checkMs = options.checkMs ?? Math.max(250, Math.floor(stallMs / 4));
  const closeTimeoutMs = options.closeTimeoutMs ?? 5_000;
  let worker: Worker;
  let inFlight = 0;
  let lastStart = Date.now();
  let waitingSince: number | null = null;
  let restarts = 0;
  let closed = false;
  let checking = false;

  const watch = (w: Worker) => {
    inFlight = 0;
    lastStart = Date.now();
    waitingSince = null;
    w.on("active", () => {
      if (w !== worker) return;
      inFlight += 1;
      lastStart = Date.now();
    });
    const done = () => {
      if (w === worker && inFlight > 0) inFlight -= 1;
    };
    w.on("completed", done);
    w.on("failed", (job) => {
      // "failed" also fires for a job that never started (a lock lost before the processor ran).
      if (job?.processedOn) done();
    });
    return w;
  };
  worker = watch(start());

  const replace = async (waiting: number) => {
    const old = worker;
    const queueName = old.name;
    options.logger.warn(
      { queue: queueName, waiting, stalledMs: Date.now() - (waitingSince ?? Date.now()) },
      "worker took no job while jobs waited: replacing it",
    );
    restarts += 1;
    worker = watch(start());
    options.onRestart?.(queueName, worker);
    // Closed after the new one started: a close waits for the old one's blocking call, which may
    // never return (then it is dropped with its connection once closeTimeoutMs has passed).
    const closing = old.close(true).catch(() => {});
    await Promise.race([closing, new Promise((resolve) => setTimeout(resolve, closeTimeoutMs).unref())]);
    options.dispose?.(old);
  };

  const check = async () => {
    if (closed || checking) return;
    checking = true;
    try {
      const w = worker;
      if (!w.isRunning() || w.isPaused() || w.closing) {
        waitingSince = null;
        return;
      }
      const counts = await queue.getJobCounts("wait", "prioritized");
      const waiting = (counts.wait ?? 0) + (counts.prioritized ?? 0);
      const concurrency = w.opts.concurrency ?? 1;
      const now = Date.now();
      if (waiting === 0 || inFlight >= concurrency) {
        waitingSince = null;
      } else if (waitingSince === null || lastStart >= waitingSince) {
        // Seen waiting now (or the worker started a job since it was last seen): the clock restarts.
        waitingSince = now;
      } else if (now - waitingSince >= stallMs && !closed) {
        await replace(waiting);
      }
    } catch {
      // The counts could not be read (Redis away): that is an outage, not a stuck worker.
      waitingSince = null;
    } finally {
      checking = false;
    }
  };
  const timer = setInterval(() => void check(), checkMs);
  timer.unref();

  return {
    get current() {
      return worker;
    },
    get restarts() {
      return restarts;
    },
    async close(force = false) {
      closed = true;
      clearInterval(timer);
      await worker.close(force);
      options.dispose?.(worker);
    },
  };
}
