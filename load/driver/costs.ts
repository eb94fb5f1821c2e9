/**
 * What a run cost, when the driver runs its own gateway (stack.ts): the CPU the gateway process,
 * each Redis master and the driver itself spent over the run, per request the driver sent, and how
 * the gateway answered the queue status polls (from its line cache or by Redis: the
 * `gateway_queue_polls_total` series). Redis CPU is the server's own (INFO cpu: used_cpu_user +
 * used_cpu_sys), which counts a script's inner calls once, as they cost; commandstats would not.
 */
import type { Cluster, Redis } from "ioredis";
import { connectRedis } from "../../src/redis/connect.js";
import { processCpuMicros } from "./proc.js";
import type { Stack } from "./stack.js";

export interface RunCosts {
  /** Requests the driver sent over the measured window. */
  requests: number;
  /**
   * The gateway's and Redis's CPU a second with no traffic, measured for IDLE_SECONDS before the
   * run (timers, workers, samplers), taken out of the figures per request: what the requests cost.
   */
  idle: { gatewayCpuMicrosPerSecond: number; redisCpuMicrosPerSecond: number };
  gatewayCpuMicrosPerRequest: number;
  /** Every master's CPU over the run, added, per request. */
  redisCpuMicrosPerRequest: number;
  /** Each master's CPU over the run, seconds, by address. */
  redisCpuSecondsByMaster: Record<string, number>;
  /** The driver's own CPU (this process) per request: a generator near a core is measuring itself. */
  driverCpuMicrosPerRequest: number;
  pollsFromCache: number;
  pollsByRedis: number;
}

interface Snapshot {
  gatewayMicros: number;
  redisSeconds: Record<string, number>;
  driverMicros: number;
  polls: { cache: number; redis: number };
}

async function redisCpu(client: Redis | Cluster): Promise<Record<string, number>> {
  const nodes = "nodes" in client && typeof client.nodes === "function" ? client.nodes("master") : [client as Redis];
  const out: Record<string, number> = {};
  for (const node of nodes) {
    const info = await node.info("cpu");
    const field = (name: string) => Number(new RegExp(`^${name}:([\\d.]+)`, "m").exec(info)?.[1] ?? 0);
    out[`${node.options.host}:${node.options.port}`] = field("used_cpu_user") + field("used_cpu_sys");
  }
  return out;
}

/** Queue polls a gateway answered from its line cache and from Redis, from its /metrics. */
export async function pollsAnswered(baseUrl: string): Promise<{ cache: number; redis: number }> {
  const text = await (await fetch(`${baseUrl}/metrics`)).text();
  const count = (answered: string) =>
    Number(new RegExp(`^gateway_queue_polls_total\\{answered="${answered}"\\} (\\d+)`, "m").exec(text)?.[1] ?? 0);
  return { cache: count("cache"), redis: count("redis") };
}

/** The quiet measured before a run, seconds. */
export const IDLE_SECONDS = 3;

/** Starts measuring; `stop(requests)` gives the costs since. */
export async function measureCosts(stack: Stack): Promise<{ stop(requests: number): Promise<RunCosts> }> {
  const redis = connectRedis(stack.redis, "commands", { maxRetriesPerRequest: 1 });
  if ("nodes" in redis) await new Promise<void>((resolve) => redis.once("ready", () => resolve()));
  const pids = stack.gateways.map((g) => g.pid!);
  const snapshot = async (): Promise<Snapshot> => {
    const usage = process.cpuUsage();
    // every gateway's CPU and polls, summed (the driver's own gateways: one or more)
    const polls = await Promise.all(stack.urls.map(pollsAnswered));
    return {
      gatewayMicros: pids.reduce((sum, pid) => sum + (processCpuMicros(pid) ?? Number.NaN), 0),
      redisSeconds: await redisCpu(redis),
      driverMicros: usage.user + usage.system,
      polls: polls.reduce((a, b) => ({ cache: a.cache + b.cache, redis: a.redis + b.redis })),
    };
  };
  const quiet = await snapshot();
  const quietAt = performance.now();
  await new Promise((resolve) => setTimeout(resolve, IDLE_SECONDS * 1000));
  const before = await snapshot();
  const quietSeconds = (performance.now() - quietAt) / 1000;
  const sum = (r: Record<string, number>) => Object.values(r).reduce((a, b) => a + b, 0);
  const idle = {
    gatewayCpuMicrosPerSecond: (before.gatewayMicros - quiet.gatewayMicros) / quietSeconds,
    redisCpuMicrosPerSecond: ((sum(before.redisSeconds) - sum(quiet.redisSeconds)) * 1e6) / quietSeconds,
  };
  const startedAt = performance.now();
  return {
    async stop(requests) {
      try {
        const after = await snapshot();
        const seconds = (performance.now() - startedAt) / 1000;
        const per = (micros: number) => (requests > 0 ? Math.max(0, micros) / requests : 0);
        const bySecond: Record<string, number> = {};
        for (const [node, s] of Object.entries(after.redisSeconds))
          bySecond[node] = s - (before.redisSeconds[node] ?? 0);
        const redisSeconds = Object.values(bySecond).reduce((a, b) => a + b, 0);
        return {
          requests,
          idle,
          gatewayCpuMicrosPerRequest: per(
            after.gatewayMicros - before.gatewayMicros - idle.gatewayCpuMicrosPerSecond * seconds,
          ),
          redisCpuMicrosPerRequest: per(redisSeconds * 1e6 - idle.redisCpuMicrosPerSecond * seconds),
          redisCpuSecondsByMaster: bySecond,
          driverCpuMicrosPerRequest: per(after.driverMicros - before.driverMicros),
          pollsFromCache: after.polls.cache - before.polls.cache,
          pollsByRedis: after.polls.redis - before.polls.redis,
        };
      } finally {
        redis.disconnect();
      }
    },
  };
}

/** The report's lines for a run's costs. */
export function costLines(c: RunCosts, seconds: number): string[] {
  const masters = Object.entries(c.redisCpuSecondsByMaster);
  const total = masters.reduce((n, [, s]) => n + s, 0);
  const busiest = Math.max(0, ...masters.map(([, s]) => s));
  return [
    `costs over ${c.requests} requests (${(c.requests / Math.max(seconds, 1e-9)).toFixed(0)}/s), idle CPU taken out: gateway ${c.gatewayCpuMicrosPerRequest.toFixed(1)} µs/request, Redis ${c.redisCpuMicrosPerRequest.toFixed(1)} µs/request; the driver's own ${c.driverCpuMicrosPerRequest.toFixed(1)} µs/request`,
    `  idle (measured before the run): gateway ${(c.idle.gatewayCpuMicrosPerSecond / 1e4).toFixed(1)}% of a core, Redis ${(c.idle.redisCpuMicrosPerSecond / 1e4).toFixed(1)}%`,
    `  Redis CPU by master (s): ${masters.map(([n, s]) => `${n} ${s.toFixed(2)}`).join(", ")}${masters.length > 1 && total > 0 ? `   busiest ${((busiest / total) * 100).toFixed(0)}%` : ""}`,
    `  status polls answered from the gateway's line cache ${c.pollsFromCache}, by Redis ${c.pollsByRedis}`,
  ];
}
