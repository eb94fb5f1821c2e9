/**
 * What the worker crash tests stand on:
 *  - `startWorkerProcess`: src/main.ts --role=worker as a real child process (only the BullMQ
 *    workers), ready once it logs "workers running";
 *  - `claimRedisDatabase`: a logical database of the test's Redis that no one else uses. The
 *    queue names and prefix are fixed, so every worker on one database takes every job on it:
 *    another test file's in-process workers would run (and swallow) our jobs, and our child would
 *    swallow theirs. A database of our own keeps the queues, the simulated provider and the
 *    seat-map cache of a crash test to itself;
 *  - `startGatewayOn`: the in-process gateway of test/gateway/harness.ts on that database, with
 *    queues (PUT schedules the event's jobs, a purchase queues its reconcile job) and no workers.
 */
import { setTimeout as sleep } from "node:timers/promises";
import { randomUUID } from "node:crypto";
import { QueueEvents, Worker } from "bullmq";
import { Redis } from "ioredis";
import { inject } from "vitest";
import { buildApp } from "../../src/http/app.js";
import { buildServices } from "../../src/services.js";
import { QUEUE_PREFIX, type QueueName, type Queues } from "../../src/workers/queues.js";
import { MAX_STALLED_COUNT } from "../../src/workers/workers.js";
import { ADMIN_TOKEN, type Gateway, gatewayOf, SECRET, testServicesConfig } from "../gateway/harness.js";
import { type MainProcess, startMainProcess } from "./processes.js";

export type WorkerProcess = MainProcess;

export interface WorkerProcessOptions {
  redisUrl: string;
  tableName: string;
  paymentTimeoutMs?: number;
  timeoutMs?: number;
  /** Default: the endpoint the global setup provides. */
  dynamoEndpoint?: string;
  /** More variables for the child (they win over the ones set here). */
  env?: Record<string, string>;
}

/** src/main.ts --role=worker as a child, with the harness's secrets; ready once it logs "workers running". */
export async function startWorkerProcess(options: WorkerProcessOptions): Promise<WorkerProcess> {
  return startMainProcess({
    role: "worker",
    timeoutMs: options.timeoutMs ?? 30_000,
    env: {
      REDIS_URL: options.redisUrl,
      DYNAMODB_ENDPOINT: options.dynamoEndpoint ?? inject("dynamoEndpoint"),
      DYNAMODB_TABLE: options.tableName,
      ADMIN_TOKEN,
      // With both secrets given, the process keeps nothing in DATA_DIR.
      GATEWAY_SECRET: SECRET,
      PAYMENT_TIMEOUT_MS: String(options.paymentTimeoutMs ?? 3_000),
      DEMO_EVENT: "false",
      ...options.env,
    },
  });
}

export interface ClaimedDatabase {
  url: string;
  /**
   * A Redis data loss on this database alone: FLUSHDB, and the claim written again in the same
   * MULTI, so no other test file can claim the database in between.
   */
  wipe(): Promise<void>;
  /** Deletes everything the test left in it, then the claim. */
  release(): Promise<void>;
}

const CLAIM_KEY = "onsale-test:claimed-by";

/**
 * Claims an empty logical database (15 down to 1) of `baseUrl`'s Redis with SET NX, so that two
 * test files never share one. Standalone Redis only (Cluster has database 0 alone).
 */
export async function claimRedisDatabase(baseUrl: string = inject("redisUrl")): Promise<ClaimedDatabase> {
  const owner = randomUUID();
  for (let db = 15; db >= 1; db--) {
    const url = new URL(baseUrl);
    url.pathname = `/${db}`;
    const client = new Redis(url.toString(), { maxRetriesPerRequest: 1, lazyConnect: true });
    try {
      await client.connect();
      if ((await client.set(CLAIM_KEY, owner, "EX", 900, "NX")) !== "OK") continue;
      if ((await client.dbsize()) !== 1) {
        // Someone's data is here without a claim: leave it alone.
        await client.del(CLAIM_KEY);
        continue;
      }
      return {
        url: url.toString(),
        wipe: async () => {
          const admin = new Redis(url.toString(), { maxRetriesPerRequest: 1 });
          try {
            await admin.multi().flushdb().set(CLAIM_KEY, owner, "EX", 900).exec();
          } finally {
            admin.disconnect();
          }
        },
        release: async () => {
          const admin = new Redis(url.toString(), { maxRetriesPerRequest: 1 });
          try {
            if ((await admin.get(CLAIM_KEY)) === owner) await admin.flushdb();
          } finally {
            admin.disconnect();
          }
        },
      };
    } finally {
      client.disconnect();
    }
  }
  throw new Error(`no free logical database on ${baseUrl} (all of 1..15 hold data or are claimed)`);
}

export interface QueuedGateway extends Gateway {
  queues: Queues;
}

/** The harness gateway on `redisUrl`, with queues and without workers: the child does the work. */
export async function startGatewayOn(
  redisUrl: string,
  options: { tableName: string; paymentTimeoutMs?: number },
): Promise<QueuedGateway> {
  const services = buildServices({
    ...testServicesConfig({
      tableName: options.tableName,
      redisUrl,
      ...(options.paymentTimeoutMs ? { paymentTimeoutMs: options.paymentTimeoutMs } : {}),
    }),
    redisOptions: { maxRetriesPerRequest: 1 },
    queues: true,
  });
  if (!services.queues) throw new Error("buildServices made no queues");
  return { ...gatewayOf(buildApp(services), services), queues: services.queues };
}

export interface QueueWatch<R> {
  /** Every completion by job id, with the job's return value, from the start of the queue's stream. */
  completions: Map<string, R[]>;
  /** Jobs BullMQ took back from a dead worker. */
  stalled: Set<string>;
  /** Jobs that failed for good (no attempt left), with the reason. */
  failed: Map<string, string>;
  close(): Promise<void>;
}

/**
 * Follows a queue's events, and runs BullMQ's stalled-job check every `stalledCheckMs`. A worker
 * runs that check every 30 s, and a dead worker's job is taken back only at the second check after
 * its lock (the dead worker's WORKER_LOCK_MS, 30 s by default) has expired: without this a crash
 * test waits a minute or more per kill. This worker processes nothing; the child processes take
 * the job back from the queue. The check fails a job that stalled more than its maxStalledCount
 * times, so it uses the workers' own: a job killed in two workers in a row is run again, as in
 * production, not failed by the test's checker (BullMQ's default of 1).
 */
export async function watchQueue<R>(redisUrl: string, name: QueueName, stalledCheckMs = 250): Promise<QueueWatch<R>> {
  const completions = new Map<string, R[]>();
  const stalled = new Set<string>();
  const failed = new Map<string, string>();
  const events = new QueueEvents(name, {
    connection: new Redis(redisUrl, { maxRetriesPerRequest: null }),
    prefix: QUEUE_PREFIX,
    lastEventId: "0-0",
  });
  events.on("completed", ({ jobId, returnvalue }) => {
    completions.set(jobId, [...(completions.get(jobId) ?? []), returnvalue as R]);
  });
  events.on("stalled", ({ jobId }) => stalled.add(jobId));
  events.on("failed", ({ jobId, failedReason }) => failed.set(jobId, failedReason));
  await events.waitUntilReady();
  const checker = new Worker(name, null, {
    connection: new Redis(redisUrl, { maxRetriesPerRequest: null }),
    prefix: QUEUE_PREFIX,
    autorun: false,
    stalledInterval: stalledCheckMs,
    maxStalledCount: MAX_STALLED_COUNT,
  });
  void checker.startStalledCheckTimer();
  return {
    completions,
    stalled,
    failed,
    close: async () => {
      await checker.close();
      await events.close();
    },
  };
}

export { sleep };

/** Reads until `done` says yes; the error names what it waited for and the last value read. */
export async function pollUntil<T>(
  what: string,
  read: () => Promise<T>,
  done: (value: T) => boolean,
  options: { timeoutMs: number; intervalMs?: number },
): Promise<T> {
  const deadline = Date.now() + options.timeoutMs;
  for (;;) {
    const value = await read();
    if (done(value)) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}: ${JSON.stringify(value)}`);
    await sleep(options.intervalMs ?? 100);
  }
}

export { mapLimit } from "../../src/concurrency.js";
