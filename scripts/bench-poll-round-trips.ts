/**
 * The status poll's Redis work with the rate limits on, two ways in the same run: the limits as
 * calls of their own before the status script (per-IP bucket, per-fan bucket, status: three
 * round trips, as the gateway did), and taken inside the status script (one round trip, as it
 * does now); each on a client with ioredis auto-pipelining off and on (src/main.ts turns it on).
 * Through the modules (rate limiter, waiting room), no HTTP, so the figures are the Redis path.
 *
 *   npx tsx scripts/bench-poll-round-trips.ts          # spawns a redis-server of its own
 *   BENCH_POLLS=40000 BENCH_CONCURRENCY=64 npx tsx scripts/bench-poll-round-trips.ts
 *
 * Prints a table, then one JSON line.
 */
import { randomBytes } from "node:crypto";
import { Redis } from "ioredis";
import pino from "pino";
import { z } from "zod";
import { createRateLimiter } from "../src/http/middleware/rate-limit.js";
import { spawnRedis, type SpawnedRedis } from "../src/local/redis.js";
import { createMetrics } from "../src/metrics.js";
import { createWaitingRoom } from "../src/waiting-room/index.js";
import { type Measure, measure } from "./lib/measure-scripts.js";

const env = z
  .object({
    REDIS_URL: z.string().url().optional(),
    BENCH_FANS: z.coerce.number().int().positive().default(5_000),
    BENCH_POLLS: z.coerce.number().int().positive().default(20_000),
    BENCH_CONCURRENCY: z.coerce.number().int().positive().default(64),
  })
  .parse(process.env);

// High enough that nothing is refused: the figure is the cost of taking the buckets.
const LIMIT = { perSecond: 1_000_000, burst: 2_000_000 };

async function main(): Promise<void> {
  const spawned: SpawnedRedis | undefined = env.REDIS_URL ? undefined : await spawnRedis();
  const url = env.REDIS_URL ?? spawned?.url ?? "";
  const logger = pino({ level: "silent" });
  const eventId = `bench_${randomBytes(6).toString("hex")}`;
  const fanIds = Array.from({ length: env.BENCH_FANS }, (_, i) => `fan-${i}`);
  const rows: (Measure & { pipelining: boolean; roundTrips: number })[] = [];
  const clients: Redis[] = [];
  try {
    for (const pipelining of [false, true]) {
      const redis = new Redis(url, { enableAutoPipelining: pipelining });
      clients.push(redis);
      const room = createWaitingRoom({ redis, secret: randomBytes(32).toString("hex") });
      const limiter = createRateLimiter(redis, { metrics: createMetrics(), logger });
      if (!pipelining) {
        // A line nobody is admitted from (rate 0): every poll is a waiting fan's, with its heartbeat.
        const configured = await room.configure(eventId, {
          onSaleAt: Date.now() - 1_000,
          admitPerSecond: 0,
          maxActive: 10,
          sessionSeconds: 900,
        });
        if (!configured.ok) throw new Error(`configure: ${JSON.stringify(configured)}`);
        for (let i = 0; i < fanIds.length; i += 500) {
          await Promise.all(fanIds.slice(i, i + 500).map((f) => room.join(eventId, f)));
        }
      }
      const fanOf = (i: number) => fanIds[(i * 7_919) % fanIds.length] as string;
      const ipOf = (i: number) => `10.0.${(i >> 8) & 255}.${i & 255}`;
      const expectOk = (r: { ok: boolean }) => {
        if (!r.ok) throw new Error(`poll failed: ${JSON.stringify(r)}`);
      };
      const label = pipelining ? "auto-pipelining on" : "auto-pipelining off";
      const separate = await measure(
        redis,
        `limits apart, ${label}`,
        env.BENCH_POLLS,
        env.BENCH_CONCURRENCY,
        async (i) => {
          await limiter.enforce("ip:status", ipOf(i), LIMIT);
          await limiter.enforce("fan:status", `${eventId}:${fanOf(i)}`, LIMIT);
          expectOk(await room.statusOf(eventId, fanOf(i)));
        },
      );
      rows.push({ ...separate, pipelining, roundTrips: 3 });
      const folded = await measure(
        redis,
        `limits in script, ${label}`,
        env.BENCH_POLLS,
        env.BENCH_CONCURRENCY,
        async (i) =>
          expectOk(
            await room.statusOf(eventId, fanOf(i), {
              limits: {
                ip: { subject: ipOf(i), perSecond: LIMIT.perSecond, burst: LIMIT.burst },
                fan: { subject: fanOf(i), perSecond: LIMIT.perSecond, burst: LIMIT.burst },
              },
            }),
          ),
      );
      rows.push({ ...folded, pipelining, roundTrips: 1 });
    }
    const base = rows[0] as Measure;
    const pad = (s: string, n: number) => s.padEnd(n);
    const num = (x: number, d = 0) => x.toFixed(d).padStart(10);
    const lines = [
      `status poll with limits on: ${env.BENCH_CONCURRENCY} polls in flight, ${env.BENCH_POLLS} polls per row, redis ${spawned ? "spawned" : url}`,
      `${pad("path", 40)}${"polls/s".padStart(10)}${"p50 ms".padStart(10)}${"p99 ms".padStart(10)}${"x first".padStart(10)}${"redis us/script".padStart(17)}`,
      ...rows.map(
        (r) =>
          `${pad(r.name, 40)}${num(r.perSecond)}${num(r.p50Ms, 2)}${num(r.p99Ms, 2)}${(r.perSecond / base.perSecond).toFixed(2).padStart(10)}${r.redisUsPerCall.toFixed(1).padStart(17)}`,
      ),
    ];
    process.stdout.write(`${lines.join("\n")}\n`);
    process.stdout.write(
      `${JSON.stringify({
        bench: "poll-round-trips",
        concurrency: env.BENCH_CONCURRENCY,
        rows: rows.map((r) => ({
          name: r.name,
          pipelining: r.pipelining,
          roundTrips: r.roundTrips,
          perSecond: Math.round(r.perSecond),
          p99Ms: Number(r.p99Ms.toFixed(2)),
          ratioToFirst: Number((r.perSecond / base.perSecond).toFixed(3)),
        })),
      })}\n`,
    );
  } finally {
    if (clients[0]) await createWaitingRoom({ redis: clients[0], secret: randomBytes(32) }).remove(eventId);
    for (const c of clients) c.disconnect();
    await spawned?.close();
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`bench-poll-round-trips failed: ${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
});
