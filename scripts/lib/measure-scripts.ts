/**
 * Timing Redis script calls for the benchmarks: `ops` calls with `concurrency` in flight, their
 * rate and latency percentiles, and what Redis itself spent per script call (INFO commandstats).
 */
import type { Redis } from "ioredis";
import { forEachIndex } from "./in-flight.js";

export interface Measure {
  name: string;
  ops: number;
  seconds: number;
  perSecond: number;
  p50Ms: number;
  p99Ms: number;
  /** Redis CPU per script call (INFO commandstats, eval + evalsha), in microseconds. */
  redisUsPerCall: number;
  /**
   * The redis-server's CPU (INFO cpu, user + system) over the run per operation, in microseconds:
   * what one operation costs Redis whatever it does (a batched join is a share of one call; the
   * calls' inner commands and the I/O counted alike). Anything else on that Redis is counted too.
   */
  redisCpuUsPerOp: number;
}

/** The redis-server's CPU so far (INFO cpu, user + system), in microseconds. */
export async function redisCpuMicros(redis: Redis): Promise<number> {
  const info = await redis.info("cpu");
  const field = (name: string) => Number(new RegExp(`^${name}:([0-9.]+)`, "m").exec(info)?.[1] ?? 0);
  return (field("used_cpu_user") + field("used_cpu_sys")) * 1e6;
}

/** Total calls and microseconds Redis has spent in EVAL and EVALSHA so far. */
async function scriptTime(redis: Redis): Promise<{ calls: number; usec: number }> {
  const info = await redis.info("commandstats");
  let calls = 0;
  let usec = 0;
  for (const m of info.matchAll(/^cmdstat_(?:eval|evalsha):calls=(\d+),usec=(\d+)/gm)) {
    calls += Number(m[1]);
    usec += Number(m[2]);
  }
  return { calls, usec };
}

/** `ops` calls of `op(i)`, `concurrency` in flight at a time. */
export async function measure(
  redis: Redis,
  name: string,
  ops: number,
  concurrency: number,
  op: (i: number) => Promise<unknown>,
): Promise<Measure> {
  const before = await scriptTime(redis);
  const cpuBefore = await redisCpuMicros(redis);
  const latencies = new Float64Array(ops);
  const start = performance.now();
  await forEachIndex(ops, concurrency, async (i) => {
    const t = performance.now();
    await op(i);
    latencies[i] = performance.now() - t;
  });
  const seconds = (performance.now() - start) / 1000;
  const after = await scriptTime(redis);
  const redisCpuUsPerOp = ((await redisCpuMicros(redis)) - cpuBefore) / ops;
  latencies.sort();
  const at = (q: number) => latencies[Math.min(ops - 1, Math.floor(q * ops))] ?? 0;
  const redisUsPerCall = (after.usec - before.usec) / Math.max(1, after.calls - before.calls);
  return {
    name,
    ops,
    seconds,
    perSecond: ops / seconds,
    p50Ms: at(0.5),
    p99Ms: at(0.99),
    redisUsPerCall,
    redisCpuUsPerOp,
  };
}
