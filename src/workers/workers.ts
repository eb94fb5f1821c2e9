/**
 * The BullMQ workers of the gateway. Every job is idempotent: a worker killed mid-job loses
 * nothing, BullMQ hands the job to another worker once its lock expires, and running it again
 * changes nothing that the first run already changed (conditional writes in DynamoDB, versioned
 * cache updates in Redis).
 */
import { type Job, Worker } from "bullmq";
import { Redis } from "ioredis";
import type { Inventory } from "../inventory/index.js";
import type { Logger } from "../logger.js";
import type { SeatMapCache } from "../seatmap/cache.js";
import { QUEUE_PREFIX, queueNames, type SeatMapRefreshJob, type SweepJob } from "./queues.js";

export interface WorkerDeps {
  redisUrl: string;
  inventory: Inventory;
  seatMap: SeatMapCache;
  logger: Logger;
  /** Jobs of one worker in flight at once. */
  concurrency?: number;
}

export interface Workers {
  workers: Worker[];
  close(): Promise<void>;
}

export async function sweepJob(deps: Pick<WorkerDeps, "inventory" | "seatMap">, job: SweepJob) {
  const result = await deps.inventory.sweepExpired(job.eventId, job.shard);
  if (result.releasedSeats.length > 0) {
    await deps.seatMap.apply(
      job.eventId,
      result.releasedSeats.map((id) => ({ id, status: "available" as const })),
    );
  }
  return result;
}

export async function seatMapRefreshJob(deps: Pick<WorkerDeps, "seatMap">, job: SeatMapRefreshJob) {
  const sectionIds = job.kind === "section" ? [job.sectionId] : job.sectionIds;
  let rebuilt = 0;
  for (const sectionId of sectionIds) if (await deps.seatMap.rebuild(job.eventId, sectionId)) rebuilt++;
  return { rebuilt };
}

export function startWorkers(deps: WorkerDeps): Workers {
  const connections: Redis[] = [];
  const connection = () => {
    // BullMQ's blocking commands need retries without limit on their own connection.
    const c = new Redis(deps.redisUrl, { maxRetriesPerRequest: null });
    c.on("error", (err) => deps.logger.warn({ err: err.message }, "worker redis connection error"));
    connections.push(c);
    return c;
  };
  const common = (name: string) => ({
    connection: connection(),
    prefix: QUEUE_PREFIX,
    concurrency: deps.concurrency ?? 4,
    // A killed worker's job is taken over after this long.
    lockDuration: 30_000,
    name,
  });

  const logged =
    <T>(queue: string, run: (data: T) => Promise<unknown>) =>
    async (job: Job<T>) => {
      const log = deps.logger.child({ queue, jobId: job.id });
      const result = await run(job.data);
      log.debug({ result }, "job done");
      return result;
    };

  const workers = [
    new Worker<SweepJob>(
      queueNames.sweep,
      logged(queueNames.sweep, (d: SweepJob) => sweepJob(deps, d)),
      common("sweeper"),
    ),
    new Worker<SeatMapRefreshJob>(
      queueNames.seatMapRefresh,
      logged(queueNames.seatMapRefresh, (d: SeatMapRefreshJob) => seatMapRefreshJob(deps, d)),
      common("seatmap-refresh"),
    ),
  ];
  for (const w of workers) {
    w.on("failed", (job, err) => deps.logger.warn({ queue: w.name, jobId: job?.id, err: err.message }, "job failed"));
    w.on("error", (err) => deps.logger.warn({ queue: w.name, err: err.message }, "worker error"));
  }
  return {
    workers,
    close: async () => {
      await Promise.all(workers.map((w) => w.close()));
      for (const c of connections) c.disconnect();
    },
  };
}
