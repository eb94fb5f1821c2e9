/**
 * What the seat-map cache's fill journal costs: write-through updates (`apply`) of one section
 * with no fill open, then while a fill is open (each update is also appended to the section's
 * journal), in one run on one Redis, as a ratio. Then the time of a fill (miss) and of a rebuild
 * with updates arriving during it, and the journal's size in Redis afterwards.
 *
 *   npm run bench:seatmap                      # spawns a redis-server of its own
 *   REDIS_URL=redis://127.0.0.1:6379 npm run bench:seatmap
 *
 * Knobs (environment): BENCH_APPLIES (20000), BENCH_SEATS (1000, one section),
 * BENCH_CONCURRENCY (64), BENCH_CONNECTIONS (4). Prints a table, then one JSON line.
 */
import { randomBytes } from "node:crypto";
import { Redis } from "ioredis";
import pino from "pino";
import { z } from "zod";
import { spawnRedis, type SpawnedRedis } from "../src/local/redis.js";
import { createMetrics } from "../src/metrics.js";
import { createSeatMapCache, type SeatRow, type SeatStatus, seatMapKeys } from "../src/seatmap/cache.js";
import { measure } from "./lib/measure-scripts.js";

const env = z
  .object({
    REDIS_URL: z.string().url().optional(),
    BENCH_APPLIES: z.coerce.number().int().positive().default(20_000),
    BENCH_SEATS: z.coerce.number().int().positive().default(1_000),
    BENCH_CONCURRENCY: z.coerce.number().int().positive().default(64),
    BENCH_CONNECTIONS: z.coerce.number().int().positive().default(4),
  })
  .parse(process.env);

const perRow = 50;
const rows: SeatRow[] = Array.from({ length: env.BENCH_SEATS }, (_, i) => ({
  id: `A-${Math.floor(i / perRow) + 1}-${(i % perRow) + 1}`,
  status: "available",
}));
const STATUSES: SeatStatus[] = ["held", "available"];

async function main(): Promise<void> {
  const spawned: SpawnedRedis | undefined = env.REDIS_URL ? undefined : await spawnRedis();
  const url = env.REDIS_URL ?? spawned?.url ?? "";
  const clients = Array.from({ length: env.BENCH_CONNECTIONS }, () => new Redis(url));
  // A store whose reads can be held open, so a fill stays open for as long as a measurement runs.
  let gate: Promise<void> = Promise.resolve();
  const source = {
    loadSection: async () => {
      const snapshot = rows.map((r) => ({ ...r }));
      await gate;
      return snapshot;
    },
  };
  const deps = { source, metrics: createMetrics(), logger: pino({ level: "silent" }) };
  const caches = clients.map((redis) => createSeatMapCache({ redis, ...deps }));
  const cache = (i: number) => caches[i % caches.length]!;
  const eventId = `bench_${randomBytes(6).toString("hex")}`;
  const change = (i: number): SeatRow[] => [
    { id: rows[(i * 7_919) % rows.length]!.id, status: STATUSES[i % 2]!, holdExpiresAt: Date.now() + 60_000 },
  ];
  const applies = (name: string) =>
    measure(clients[0]!, name, env.BENCH_APPLIES, env.BENCH_CONCURRENCY, (i) => cache(i).apply(eventId, change(i)));

  try {
    let t = performance.now();
    await cache(0).getSection(eventId, "A");
    const fillMs = performance.now() - t;

    const closed = await applies("apply, no fill open");
    // A rebuild whose read of the store waits until the measurement is over: the fill is open.
    let release!: () => void;
    gate = new Promise<void>((r) => {
      release = r;
    });
    const rebuild = cache(1).rebuild(eventId, "A");
    const open = await applies("apply, a fill open");
    t = performance.now();
    release();
    const rebuilt = await rebuild;
    const replayMs = performance.now() - t;
    const journal = seatMapKeys.section(eventId, "A").journal;
    const entries = await clients[0]!.xlen(journal);
    const bytes = Number(await clients[0]!.call("MEMORY", "USAGE", journal, "SAMPLES", "0"));

    const pad = (s: string, n: number) => s.padEnd(n);
    const num = (x: number, d = 0) => x.toFixed(d).padStart(10);
    const lines = [
      `seat-map benchmark: one ${env.BENCH_SEATS}-seat section, ${env.BENCH_CONNECTIONS} connections, ${env.BENCH_CONCURRENCY} calls in flight, redis ${spawned ? "spawned" : url}`,
      `${pad("operation", 22)}${"ops".padStart(10)}${"ops/s".padStart(10)}${"p50 ms".padStart(10)}${"p99 ms".padStart(10)}${"redis us/call".padStart(15)}`,
      ...[closed, open].map(
        (r) =>
          `${pad(r.name, 22)}${num(r.ops)}${num(r.perSecond)}${num(r.p50Ms, 2)}${num(r.p99Ms, 2)}${r.redisUsPerCall.toFixed(1).padStart(15)}`,
      ),
      `apply with a fill open / without: ${(open.perSecond / closed.perSecond).toFixed(2)} (throughput), ${(open.redisUsPerCall / closed.redisUsPerCall).toFixed(2)} (Redis time per call)`,
      `fill on a miss: ${fillMs.toFixed(1)} ms; the rebuild replayed ${entries} journal entries (${(bytes / 1024 / 1024).toFixed(1)} MiB in Redis) in ${replayMs.toFixed(1)} ms (${rebuilt ? "cached" : "not cached"})`,
    ];
    process.stdout.write(`${lines.join("\n")}\n`);
    process.stdout.write(
      `${JSON.stringify({
        bench: "seatmap",
        seats: env.BENCH_SEATS,
        appliesPerSecond: Math.round(closed.perSecond),
        appliesPerSecondFillOpen: Math.round(open.perSecond),
        throughputRatio: Number((open.perSecond / closed.perSecond).toFixed(3)),
        redisUsPerApply: Number(closed.redisUsPerCall.toFixed(1)),
        redisUsPerApplyFillOpen: Number(open.redisUsPerCall.toFixed(1)),
        fillMs: Number(fillMs.toFixed(1)),
        replayMs: Number(replayMs.toFixed(1)),
        journalEntries: entries,
        journalBytes: bytes,
      })}\n`,
    );
  } finally {
    const k = seatMapKeys.section(eventId, "A");
    await clients[0]!.del(k.st, k.idx, k.exp, k.meta, k.journal, k.fill, seatMapKeys.availability(eventId));
    for (const c of clients) c.disconnect();
    await spawned?.close();
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`bench-seatmap failed: ${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
});
