/**
 * What a pipeline costs the gateway's commands connection as src/services.ts wires it (BullMQ's
 * producers on a connection of their own, the gateway's scripts plain EVALSHA/FCALL calls: no
 * script defined on the client) and, for the before, with BullMQ's producers on it. ioredis copies
 * every script defined on a client (defineCommand) onto each pipeline it builds, and
 * auto-pipelining builds one per turn of the event loop that sends a command: BullMQ defines its
 * 64 scripts on the client it is given.
 *
 *   npm run bench:pipeline            # spawns its own redis-server
 *   REDIS_URL=redis://127.0.0.1:6379/9 npm run bench:pipeline
 *
 * Prints, for each wiring: the scripts defined on the commands client, the CPU of one
 * `pipeline()` (a loop of them), and the CPU of one GET awaited alone (one auto-pipelined turn
 * each: the pipeline, the write, the reply), in microseconds; the best of three loops each.
 */
import pino from "pino";
import type { Redis } from "ioredis";
import { z } from "zod";
import { spawnRedis } from "../src/local/redis.js";
import { createMetrics } from "../src/metrics.js";
import { buildServices } from "../src/services.js";
import { createQueues } from "../src/workers/queues.js";

const PIPELINES = 5_000;
const TURNS = 5_000;

function cpuMicros(): number {
  const u = process.cpuUsage();
  return u.user + u.system;
}

async function measure(client: Redis): Promise<{ scripts: number; pipelineMicros: number; turnMicros: number }> {
  const scripts = Object.keys((client as unknown as { scriptsSet: object }).scriptsSet).length;
  const best = async (run: () => Promise<void> | void, n: number) => {
    let min = Number.POSITIVE_INFINITY;
    for (let round = 0; round < 3; round++) {
      const before = cpuMicros();
      await run();
      min = Math.min(min, (cpuMicros() - before) / n);
    }
    return min;
  };
  const pipelineMicros = await best(() => {
    for (let i = 0; i < PIPELINES; i++) client.pipeline();
  }, PIPELINES);
  const turnMicros = await best(async () => {
    for (let i = 0; i < TURNS; i++) await client.get("bench:pipeline");
  }, TURNS);
  return { scripts, pipelineMicros, turnMicros };
}

async function main(): Promise<void> {
  const env = z.object({ REDIS_URL: z.string().optional() }).parse(process.env);
  const spawned = env.REDIS_URL ? undefined : await spawnRedis();
  const services = buildServices({
    redisUrl: env.REDIS_URL ?? spawned!.url,
    redisOptions: { enableAutoPipelining: true },
    queues: true,
    dynamodb: { endpoint: "http://127.0.0.1:1", region: "us-east-1", table: "bench-pipeline" },
    logger: pino({ level: "warn" }),
    metrics: createMetrics(),
    adminToken: "bench-operator-token-000",
    gatewaySecret: "bench-gateway-secret-0123456789abcdef",
  });
  const extra: { close(): Promise<void> }[] = [];
  try {
    await services.queues!.sweep.waitUntilReady();
    const client = services.clients.redis as Redis;
    await client.get("bench:pipeline"); // connected, warm
    const apart = await measure(client);
    // The before: BullMQ's producers given the commands connection itself, as they were.
    const shared = createQueues(client);
    extra.push(shared);
    await shared.sweep.waitUntilReady();
    const together = await measure(client);
    console.table([
      { wiring: "as wired (BullMQ apart, no script defined)", ...round(apart) },
      { wiring: "BullMQ's producers on the commands connection", ...round(together) },
    ]);
    console.log(
      JSON.stringify({
        bench: "pipeline",
        apart,
        together,
        pipelineRatio: together.pipelineMicros / apart.pipelineMicros,
        turnRatio: together.turnMicros / apart.turnMicros,
      }),
    );
  } finally {
    for (const e of extra) await e.close();
    await services.close();
    await spawned?.close();
  }
}

function round(m: { scripts: number; pipelineMicros: number; turnMicros: number }) {
  return {
    "scripts on the client": m.scripts,
    "µs CPU per pipeline()": m.pipelineMicros.toFixed(1),
    "µs CPU per awaited GET": m.turnMicros.toFixed(1),
  };
}

await main();
