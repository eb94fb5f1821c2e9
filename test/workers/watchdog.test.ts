/**
 * The workers' watchdog (src/workers/watchdog.ts) against a real redis-server: a BullMQ worker
 * whose connections froze (open sockets, nothing passing: no error, no close, `isRunning()` true)
 * takes no job while jobs wait, and is replaced by one on a new connection, which runs them. A
 * worker busy in every slot, or one that keeps taking jobs, is left alone.
 */
import { Queue, Worker } from "bullmq";
import { Redis } from "ioredis";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { createLogger } from "../../src/logger.js";
import { type SpawnedRedis, spawnRedis } from "../../src/local/redis.js";
import { type SupervisedWorker, superviseWorker } from "../../src/workers/watchdog.js";
import { type FreezingProxy, freezingProxy } from "../support/freezing-proxy.js";
import { pollUntil } from "../support/worker-process.js";

let redis: SpawnedRedis;
let proxy: FreezingProxy;
let direct: Redis;
const logger = createLogger({ level: "silent" });
const cleanups: (() => Promise<void>)[] = [];

beforeAll(async () => {
  redis = await spawnRedis();
  proxy = await freezingProxy({ host: "127.0.0.1", port: redis.port });
  direct = new Redis(redis.url, { maxRetriesPerRequest: null });
}, 60_000);

afterEach(async () => {
  while (cleanups.length) await cleanups.pop()?.();
});

afterAll(async () => {
  direct?.disconnect();
  await proxy?.close();
  await redis?.close();
});

let queueNo = 0;

/** A queue (on a direct connection) and a supervised worker reaching Redis through the proxy. */
function setUp(options: { concurrency: number; stallMs: number; jobMs?: number }) {
  const name = `watched-${++queueNo}`;
  const queue = new Queue(name, { connection: direct });
  const ran: string[] = [];
  const connections: Redis[] = [];
  const started: Worker[] = [];
  const supervised: SupervisedWorker = superviseWorker(
    () => {
      const connection = new Redis(proxy.url, { maxRetriesPerRequest: null });
      connection.on("error", () => {});
      connections.push(connection);
      const worker = new Worker(
        name,
        async (job) => {
          if (options.jobMs) await new Promise((resolve) => setTimeout(resolve, options.jobMs));
          ran.push(String(job.id));
        },
        { connection, concurrency: options.concurrency, drainDelay: 1 },
      );
      worker.on("error", () => {});
      started.push(worker);
      return worker;
    },
    queue,
    { logger, stallMs: options.stallMs, checkMs: 200, closeTimeoutMs: 500 },
  );
  cleanups.push(async () => {
    await supervised.close(true).catch(() => {});
    await queue.obliterate({ force: true }).catch(() => {});
    await queue.close();
    for (const c of connections) c.disconnect();
  });
  return { queue, ran, supervised, started };
}

describe("workers' watchdog", () => {
  it("a worker whose connections froze takes nothing; it is replaced and the waiting jobs run", async () => {
    const { queue, ran, supervised, started } = setUp({ concurrency: 2, stallMs: 1_500 });
    await queue.addBulk([1, 2, 3].map((i) => ({ name: "j", data: {}, opts: { jobId: `before-${i}` } })));
    await pollUntil(
      "the first jobs run",
      async () => ran.length,
      (n) => n === 3,
      { timeoutMs: 15_000 },
    );

    proxy.freeze();
    expect(proxy.frozen()).toBeGreaterThan(0);
    await queue.addBulk([1, 2, 3, 4, 5].map((i) => ({ name: "j", data: {}, opts: { jobId: `after-${i}` } })));
    // The frozen worker says it runs, reports nothing, and takes none of them.
    await new Promise((resolve) => setTimeout(resolve, 700));
    expect(started[0]!.isRunning()).toBe(true);
    expect(supervised.restarts).toBe(0);
    expect((await queue.getJobCounts("wait")).wait).toBe(5);

    await pollUntil(
      "the jobs that waited run",
      async () => ran.filter((id) => id.startsWith("after-")).length,
      (n) => n === 5,
      { timeoutMs: 20_000 },
    );
    expect(supervised.restarts).toBe(1);
    expect(started).toHaveLength(2);
    expect(supervised.current).toBe(started[1]);
    expect(ran.filter((id) => id.startsWith("after-")).sort()).toEqual([1, 2, 3, 4, 5].map((i) => `after-${i}`));
  }, 60_000);

  it("a worker busy in every slot while jobs wait is not a stall: left alone", async () => {
    const { queue, ran, supervised } = setUp({ concurrency: 1, stallMs: 500, jobMs: 2_500 });
    await queue.addBulk([1, 2].map((i) => ({ name: "j", data: {}, opts: { jobId: `long-${i}` } })));
    await pollUntil(
      "both long jobs run, one after the other",
      async () => ran.length,
      (n) => n === 2,
      { timeoutMs: 20_000 },
    );
    expect(supervised.restarts).toBe(0);
  }, 60_000);

  it("a worker that keeps taking jobs as they come is left alone, and an idle one too", async () => {
    const { queue, ran, supervised } = setUp({ concurrency: 2, stallMs: 500 });
    for (let i = 0; i < 12; i++) {
      await queue.add("j", {}, { jobId: `steady-${i}` });
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
    await pollUntil(
      "every job runs",
      async () => ran.length,
      (n) => n === 12,
      { timeoutMs: 15_000 },
    );
    // Idle, nothing waiting, for several stall times.
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    expect(supervised.restarts).toBe(0);
  }, 60_000);
});
