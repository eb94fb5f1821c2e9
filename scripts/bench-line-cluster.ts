/**
 * One event's line on a Redis Cluster of 1, 3 and 6 masters (issue 28, goal 3): where the line's
 * Redis CPU goes, master by master, while thousands of fans of ONE event join and poll.
 *
 *   npm run bench:line-cluster
 *   BENCH_MASTERS=3 BENCH_FANS=10000 npm run bench:line-cluster
 *
 * For each cluster size it starts a private cluster (src/local/redis.ts spawnRedisCluster, the
 * project's starter), and drives one event through the real WaitingRoom API as BENCH_GATEWAYS
 * gateway processes would (one WaitingRoom and one Cluster client each, built by the gateway's own
 * connectRedis, so join batching, the cached line view and its heartbeats are the production ones).
 * A fan always goes to the same gateway (a kept-alive connection behind the balancer), or with
 * BENCH_SPREAD_POLLS=1 each of its polls to the next gateway (a balancer that spreads requests:
 * every poll reaches a gateway that did not answer the fan's last one).
 *   1. joins: BENCH_FANS fans join, BENCH_CONCURRENCY in flight;
 *   2. polls: for BENCH_POLL_SECONDS every fan polls (statusOf) once per BENCH_POLL_INTERVAL_MS
 *      (a compressed pollAfterMs), spread evenly, as many in flight as Redis keeps waiting; a fan
 *      admitted stops. The room admits BENCH_ADMIT_PER_SECOND meanwhile, so the fans near the head
 *      poll Redis (status-10.lua) and the others are answered from each gateway's cached view,
 *      whose refreshes carry their heartbeats.
 *   3. leaves: admission paused, every fan still waiting stops polling at once (a mass of closed
 *      tabs); from 0.3 s before the first place can be lost (BENCH_ABANDON_SECONDS after a fan's
 *      last poll, which were spread over the last poll interval) until every one is given up, by the line's own means: the tick's sweep of `seen` in each line script (no fan
 *      shards), or the fan shards' sweep handed to a gateway once a second (fan-sweep.ts).
 *
 * Redis cost is each redis-server's CPU (INFO cpu, used_cpu_user + used_cpu_sys) over the phase,
 * less what that server spends idle (its cron and the cluster bus, measured for
 * BENCH_IDLE_SECONDS before the run and scaled to the phase's length): the line's share per master.
 * Not commandstats: a script's inner calls are counted there as well as the script. commandstats
 * is read only for the breakdown of the busiest master (which commands and scripts ran there; its
 * usec is wall time inside the command, so on a machine this small it includes preemption too).
 *
 * joins/s and polls/s are what this one process drove (on a small machine, bound by this process's
 * CPU, not Redis'); "ceiling/s" is the operations one second of the busiest master's CPU serves:
 * the rate at which one event's line saturates the cluster. That is the figure that should grow
 * with masters. Prints a table per size, then one JSON line.
 *
 * BENCH_FAN_SHARDS=12 creates the room with twelve fan shards (WAITING_ROOM_FAN_SHARDS): its
 * heartbeats, the joins' among them, and their sweeps go to the shards' masters.
 * BENCH_CLAIMS=shards (with BENCH_FAN_SHARDS) creates the room with its fans' records on the fan
 * shards too (issue 28 steps 2 and 3, docs/redis-cluster.md "Steps 2 and 3, call by call": a join is
 * a range on the event's slot and the records on the shards; not yet selectable in the gateway).
 * BENCH_CLAIMS=1 creates the room admitting by claims (WAITING_ROOM_CLAIMS): no fifo, the tick
 * offers places by count and the fans claim them.
 * BENCH_FUNCTIONS=0 runs the scripts through EVALSHA instead of as Redis Functions (the default).
 * BENCH_JOIN_IPS=1 gives each join an address of its own under a per-IP join limit (a crowd: each
 * join takes a bucket of its own; with shards the buckets are on the shards).
 * BENCH_AIM_SHARD=1 (with shards) joins only fan ids whose shard by the public hash (FNV-1a, which
 * placed fans before rooms had a shard key) is 0, as an attacker who chooses fan ids would
 * (docs/redis-cluster.md "Fans aimed at one shard"): a room's own key spreads them over its shards
 * all the same.
 */
import { randomBytes } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { Redis } from "ioredis";
import { z } from "zod";
import { spawnRedisCluster, type SpawnedRedisCluster } from "../src/local/redis.js";
import { connectRedis } from "../src/redis/connect.js";
import { type RedisClient, useRedisFunctions } from "../src/redis/scripts.js";
import { fanShardOf } from "../src/waiting-room/fan-shards.js";
import { createWaitingRoom, waitingRoomKeys, type WaitingRoom } from "../src/waiting-room/index.js";
import { forEachIndex } from "./lib/in-flight.js";
import { redisCpuMicros } from "./lib/measure-scripts.js";

const env = z
  .object({
    BENCH_MASTERS: z
      .string()
      .default("1,3,6")
      .transform((s) => s.split(",").map((x) => Number(x.trim())))
      .pipe(z.array(z.number().int().min(1).max(16)).min(1)),
    BENCH_FANS: z.coerce.number().int().min(1).default(6_000),
    BENCH_GATEWAYS: z.coerce.number().int().min(1).default(3),
    BENCH_CONCURRENCY: z.coerce.number().int().positive().default(256),
    BENCH_POLL_INTERVAL_MS: z.coerce.number().int().positive().default(1_000),
    BENCH_POLL_SECONDS: z.coerce.number().positive().default(5),
    BENCH_IDLE_SECONDS: z.coerce.number().positive().default(2),
    BENCH_ADMIT_PER_SECOND: z.coerce.number().nonnegative().default(50),
    /** The room's abandonSeconds: how long after the polls stop the leaves phase begins. */
    BENCH_ABANDON_SECONDS: z.coerce.number().int().min(3).max(14).default(6),
    /** Fan shards of the room (WAITING_ROOM_FAN_SHARDS): 0 keeps the heartbeats on the event's slot. */
    BENCH_FAN_SHARDS: z.coerce.number().int().min(0).max(256).default(0),
    /** 1: the room admits by claims (WAITING_ROOM_CLAIMS: no fifo, the tick offers, the fans claim). */
    BENCH_CLAIMS: z.enum(["0", "1", "shards"]).default("0"),
    /** 1: every fan id on shard 0 (an attacker's choice of ids); needs BENCH_FAN_SHARDS. */
    BENCH_AIM_SHARD: z.enum(["0", "1"]).default("0"),
    /** 1: each of a fan's polls goes to the next gateway, not always to the one it joined through. */
    BENCH_SPREAD_POLLS: z.enum(["0", "1"]).default("0"),
    /**
     * 1: each join comes from an address of its own under the gateway's default per-IP join limit
     * (RATE_LIMIT_PER_IP 50/s, burst 100), as a crowd does: each join takes a bucket of its own.
     */
    BENCH_JOIN_IPS: z.enum(["0", "1"]).default("0"),
    /** 1 (default): the scripts as Redis Functions, as a gateway on Redis 7 runs them; 0: EVALSHA. */
    BENCH_FUNCTIONS: z.enum(["0", "1"]).default("1"),
  })
  .parse(process.env);
useRedisFunctions(env.BENCH_FUNCTIONS === "1");

/** The run's fan ids: `fan-<n>`, or with BENCH_AIM_SHARD=1 only those the public hash puts on shard 0. */
function fanIdsFor(count: number): string[] {
  const aimed = env.BENCH_AIM_SHARD === "1" && env.BENCH_FAN_SHARDS > 0;
  const ids: string[] = [];
  for (let n = 0; ids.length < count; n++) {
    const fanId = `fan-${n}`;
    if (!aimed || fanShardOf(fanId, env.BENCH_FAN_SHARDS) === 0) ids.push(fanId);
  }
  return ids;
}

/** The poll scheduler's step. */
const TICK_MS = 10;

interface CommandStat {
  calls: number;
  usec: number;
}

interface MasterCost {
  port: number;
  /** This master serves the event's slot ({evt:E}). */
  eventSlot: boolean;
  /** CPU over the phase, all of it (ms). */
  rawMs: number;
  /** Its idle CPU over the same time (ms), from the baseline. */
  idleMs: number;
  /** rawMs less idleMs, at least 0: the line's CPU on this master. */
  lineMs: number;
  share: number;
  /** commandstats over the phase (calls, usec), by command. */
  commands: Map<string, CommandStat>;
}

interface Phase {
  name: "joins" | "polls" | "leaves";
  ops: number;
  seconds: number;
  perSecond: number;
  masters: MasterCost[];
  busiestShare: number;
  /** Operations per second of the busiest master's CPU: the line's ceiling on this cluster. */
  ceilingPerSecond: number;
  /** Redis CPU per operation over all masters (µs). */
  usPerOp: number;
  notes: string;
}

async function commandStats(redis: Redis): Promise<Map<string, CommandStat>> {
  const info = await redis.info("commandstats");
  const out = new Map<string, CommandStat>();
  for (const m of info.matchAll(/^cmdstat_([^:]+):calls=(\d+),usec=(\d+)/gm)) {
    out.set(m[1] as string, { calls: Number(m[2]), usec: Number(m[3]) });
  }
  return out;
}

function diffStats(after: Map<string, CommandStat>, before: Map<string, CommandStat>): Map<string, CommandStat> {
  const out = new Map<string, CommandStat>();
  for (const [name, a] of after) {
    const b = before.get(name) ?? { calls: 0, usec: 0 };
    if (a.calls > b.calls) out.set(name, { calls: a.calls - b.calls, usec: a.usec - b.usec });
  }
  return out;
}

async function ready(client: RedisClient): Promise<void> {
  if (client.status === "ready") return;
  await new Promise<void>((resolve, reject) => {
    client.once("ready", () => resolve());
    client.once("error", reject);
  });
}

function ok<T extends { ok: boolean }>(result: T, what: string): T {
  if (!result.ok) throw new Error(`${what} failed: ${JSON.stringify(result)}`);
  return result;
}

/** Runs `work` and returns its wall seconds and each master's CPU and commands over it. */
async function costed(
  admins: Redis[],
  idleUsPerSecond: number[],
  eventPort: number,
  work: () => Promise<number>,
): Promise<{ ops: number; seconds: number; masters: MasterCost[] }> {
  const cpuBefore = await Promise.all(admins.map(redisCpuMicros));
  const statsBefore = await Promise.all(admins.map(commandStats));
  const started = performance.now();
  const ops = await work();
  const seconds = (performance.now() - started) / 1000;
  const cpuAfter = await Promise.all(admins.map(redisCpuMicros));
  const statsAfter = await Promise.all(admins.map(commandStats));
  const masters = admins.map((admin, i) => {
    const rawMs = ((cpuAfter[i] as number) - (cpuBefore[i] as number)) / 1000;
    const idleMs = ((idleUsPerSecond[i] as number) * seconds) / 1000;
    return {
      port: Number(admin.options.port),
      eventSlot: Number(admin.options.port) === eventPort,
      rawMs,
      idleMs,
      lineMs: Math.max(0, rawMs - idleMs),
      share: 0,
      commands: diffStats(statsAfter[i] as Map<string, CommandStat>, statsBefore[i] as Map<string, CommandStat>),
    };
  });
  const total = masters.reduce((s, m) => s + m.lineMs, 0);
  for (const m of masters) m.share = total > 0 ? m.lineMs / total : 0;
  return { ops, seconds, masters };
}

function phaseOf(
  name: Phase["name"],
  run: { ops: number; seconds: number; masters: MasterCost[] },
  notes: string,
): Phase {
  const busiest = run.masters.reduce((a, b) => (b.lineMs > a.lineMs ? b : a));
  const totalMs = run.masters.reduce((s, m) => s + m.lineMs, 0);
  return {
    name,
    ops: run.ops,
    seconds: run.seconds,
    perSecond: run.ops / run.seconds,
    masters: run.masters,
    busiestShare: busiest.share,
    ceilingPerSecond: busiest.lineMs > 0 ? run.ops / (busiest.lineMs / 1000) : Number.POSITIVE_INFINITY,
    usPerOp: (totalMs * 1000) / run.ops,
    notes,
  };
}

/**
 * Goal 3's figure (issue 28): the busiest master's share of the joins' and the polls' Redis CPU
 * together, each master's line ms of both phases summed.
 */
function joinsAndPollsShare(phases: readonly Phase[]): number {
  const byMaster = new Map<number, number>();
  for (const p of phases.filter((ph) => ph.name === "joins" || ph.name === "polls")) {
    for (const m of p.masters) byMaster.set(m.port, (byMaster.get(m.port) ?? 0) + m.lineMs);
  }
  const total = [...byMaster.values()].reduce((a, b) => a + b, 0);
  return total > 0 ? Math.max(...byMaster.values()) / total : 0;
}

async function oneCluster(masterCount: number): Promise<{ masters: number; phases: Phase[] }> {
  const cluster: SpawnedRedisCluster = await spawnRedisCluster({ masters: masterCount });
  const admins = cluster.masters.map((m) => new Redis({ host: "127.0.0.1", port: m.port, maxRetriesPerRequest: 1 }));
  const clients = Array.from({ length: env.BENCH_GATEWAYS }, () =>
    connectRedis({ kind: "cluster", nodes: cluster.nodes }, "commands"),
  );
  const rooms: WaitingRoom[] = clients.map((redis) =>
    createWaitingRoom({
      redis,
      secret: randomBytes(32).toString("hex"),
      fanShards: env.BENCH_FAN_SHARDS,
      ...(env.BENCH_CLAIMS === "1"
        ? { claims: true }
        : env.BENCH_CLAIMS === "shards"
          ? { claims: "shards" as const }
          : {}),
    }),
  );
  const eventId = `bench_${randomBytes(6).toString("hex")}`;
  try {
    await Promise.all(clients.map(ready));
    for (const admin of admins) await admin.config("RESETSTAT");
    const slot = Number(await admins[0]!.cluster("KEYSLOT", waitingRoomKeys(eventId).room));
    const slots = await admins[0]!.cluster("SLOTS");
    const eventPort = Number(slots.find(([from, to]) => slot >= from && slot <= to)?.[2]?.[1]);

    // The idle baseline, before the room exists (no view refreshing yet): every connection is open,
    // nothing is asked.
    const idleBefore = await Promise.all(admins.map(redisCpuMicros));
    const idleStart = performance.now();
    await sleep(env.BENCH_IDLE_SECONDS * 1000);
    const idleAfter = await Promise.all(admins.map(redisCpuMicros));
    const idleSeconds = (performance.now() - idleStart) / 1000;
    const idleUsPerSecond = admins.map((_, i) => ((idleAfter[i] as number) - (idleBefore[i] as number)) / idleSeconds);

    ok(
      await rooms[0]!.configure(eventId, {
        onSaleAt: Date.now() - 1_000,
        admitPerSecond: env.BENCH_ADMIT_PER_SECOND,
        maxActive: 1_000_000,
        sessionSeconds: 900,
        abandonSeconds: env.BENCH_ABANDON_SECONDS,
      }),
      "configure",
    );

    // Warm-up, not measured: every gateway loads its scripts (EVALSHA's NOSCRIPT fallback) and
    // starts its view of the line.
    for (const [g, room] of rooms.entries()) {
      ok(await room.join(eventId, `warm-${g}`), "warm-up join");
      ok(await room.statusOf(eventId, `warm-${g}`), "warm-up poll");
    }

    const fanIds = fanIdsFor(env.BENCH_FANS);
    const gatewayOf = (i: number) => rooms[i % rooms.length] as WaitingRoom;

    const joins = await costed(admins, idleUsPerSecond, eventPort, async () => {
      await forEachIndex(fanIds.length, env.BENCH_CONCURRENCY, async (i) => {
        const limits =
          env.BENCH_JOIN_IPS === "1"
            ? {
                limits: {
                  ip: { subject: `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`, perSecond: 50, burst: 100 },
                },
              }
            : {};
        ok(await gatewayOf(i).join(eventId, fanIds[i] as string, limits), "join");
      });
      return fanIds.length;
    });
    const batches = rooms.map((r) => r.joinBatchCounters());
    const batched = batches.reduce((s, c) => s + c.batches, 0);

    const countersBefore = rooms.map((r) => r.lineCacheCounters());
    let cachedPolls = 0;
    let maxInFlight = 0;
    // Every fan polls once per BENCH_POLL_INTERVAL_MS (a compressed pollAfterMs), the fans spread
    // evenly over the interval: started on a 10 ms timer, never awaited one by one, so as many are
    // in flight as Redis keeps waiting.
    const polls = await costed(admins, idleUsPerSecond, eventPort, async () => {
      const admitted = new Set<number>();
      const perTick = (fanIds.length * TICK_MS) / env.BENCH_POLL_INTERVAL_MS;
      const started = performance.now();
      let launched = 0;
      let done = 0;
      let failed: unknown;
      const inFlight = new Set<Promise<void>>();
      const pollOne = async (i: number, round: number) => {
        const gateway = gatewayOf(env.BENCH_SPREAD_POLLS === "1" ? i + round + 1 : i);
        const polled = ok(await gateway.statusOf(eventId, fanIds[i] as string), "poll");
        if ("cached" in polled && polled.cached) cachedPolls += 1;
        // An admitted fan leaves the line for the seat map: it polls no more.
        else if (polled.ok && polled.place.status !== "waiting") admitted.add(i);
        done += 1;
      };
      while (performance.now() - started < env.BENCH_POLL_SECONDS * 1000 && failed === undefined) {
        const due = Math.floor(((performance.now() - started) / TICK_MS) * perTick);
        for (; launched < due; launched++) {
          const i = launched % fanIds.length;
          if (admitted.has(i)) continue;
          const p: Promise<void> = pollOne(i, Math.floor(launched / fanIds.length)).then(
            () => void inFlight.delete(p),
            (err: unknown) => {
              failed = err;
              inFlight.delete(p);
            },
          );
          inFlight.add(p);
          maxInFlight = Math.max(maxInFlight, inFlight.size);
        }
        await sleep(TICK_MS);
      }
      await Promise.all(inFlight);
      if (failed !== undefined) throw failed;
      return done;
    });
    const countersAfter = rooms.map((r) => r.lineCacheCounters());
    const refreshes = countersAfter.reduce((s, c, i) => s + c.refreshes - (countersBefore[i]?.refreshes ?? 0), 0);
    // refreshes that read the view's copy on a shard instead of the event's slot (one admitter per event)
    const fromCopy = countersAfter.reduce((s, c, i) => s + c.fromCopy - (countersBefore[i]?.fromCopy ?? 0), 0);
    const beats = countersAfter.reduce((s, c, i) => s + c.beats - (countersBefore[i]?.beats ?? 0), 0);
    const lookups = countersAfter.reduce((s, c, i) => s + (c.lookups ?? 0) - (countersBefore[i]?.lookups ?? 0), 0);
    const found = countersAfter.reduce((s, c, i) => s + (c.found ?? 0) - (countersBefore[i]?.found ?? 0), 0);
    const pollsEnded = performance.now();
    const statsNow = async () => {
      const s = await rooms[0]!.stats(eventId);
      if (!s.ok) throw new Error(`stats failed: ${JSON.stringify(s)}`);
      return s.stats;
    };
    // Admission paused first, so every fan still waiting is one the line must give up (not admit).
    ok(await rooms[0]!.updateSettings(eventId, { paused: true }), "pause");
    const snapshot = { stats: await statsNow() };
    const admittedTotal = snapshot.stats.admitted;

    // Leaves: nobody polls from now on. A gateway's view keeps refreshing for 15 s after its last
    // poll (line-view.ts VIEW_IDLE_MS), and those refreshes run the tick and hand out the sweeps,
    // as they would while the rest of a real line polls on.
    const leavers = snapshot.stats.waiting;
    const abandonedBefore = snapshot.stats.abandoned;
    // The fans' last polls were spread over the last poll interval: the watch begins 0.3 s before
    // the earliest of them can be lost, so every sweep is inside it.
    const leadMs = env.BENCH_POLL_INTERVAL_MS + 300;
    await sleep(Math.max(0, pollsEnded + env.BENCH_ABANDON_SECONDS * 1000 - leadMs - performance.now()));
    let sweptAt = 0;
    const leaves = await costed(admins, idleUsPerSecond, eventPort, async () => {
      const started = performance.now();
      for (;;) {
        const given = (await statsNow()).abandoned - abandonedBefore;
        if (given >= leavers) {
          sweptAt = performance.now() - started;
          return given;
        }
        if (performance.now() - started > 8_000) throw new Error(`leaves: ${given} of ${leavers} given up in 8 s`);
        await sleep(20);
      }
    });

    return {
      masters: masterCount,
      phases: [
        phaseOf("joins", joins, `${batched} batches (${(fanIds.length / Math.max(1, batched)).toFixed(1)} joins each)`),
        phaseOf(
          "polls",
          polls,
          `${cachedPolls} answered from the cached view, ${polls.ops - cachedPolls} by status-10; ` +
            `${lookups} fans looked up by a view refresh, ${found} found; ` +
            `${refreshes} view refreshes (${fromCopy} from a shard's copy) carrying ${beats} heartbeats; ${admittedTotal} admitted; at most ${maxInFlight} in flight`,
        ),
        phaseOf(
          "leaves",
          leaves,
          `${leavers} fans stopped at once; all given up ${(sweptAt / 1000).toFixed(2)} s after the watch began ` +
            `(the first could be from 0.3 s, the last from ${(leadMs / 1000).toFixed(1)} s)`,
        ),
      ],
    };
  } finally {
    await rooms[0]?.remove(eventId).catch(() => undefined);
    await Promise.all(rooms.map((r) => r.close()));
    for (const c of clients) c.disconnect();
    for (const a of admins) a.disconnect();
    await cluster.close();
  }
}

const ms = (x: number) => x.toFixed(1).padStart(9);
const pct = (x: number) => `${(x * 100).toFixed(1)}%`.padStart(8);
const rate = (x: number) => (Number.isFinite(x) ? Math.round(x).toString() : "inf").padStart(11);

/** The busiest master's commands over a phase, by time (a script's time includes its inner calls). */
function breakdown(m: MasterCost): string {
  const rows = [...m.commands.entries()]
    .filter(([name]) => name !== "info" && name !== "cluster" && name !== "config")
    .sort((a, b) => b[1].usec - a[1].usec)
    .slice(0, 8)
    .map(([name, s]) => `${name} ${s.calls}x ${(s.usec / 1000).toFixed(1)}ms`);
  return rows.join(", ");
}

async function main(): Promise<void> {
  const results: { masters: number; phases: Phase[] }[] = [];
  for (const m of env.BENCH_MASTERS) results.push(await oneCluster(m));

  const lines: string[] = [
    `one event's line on a Redis Cluster: ${env.BENCH_FANS} fans, ${env.BENCH_GATEWAYS} gateways (WaitingRoom + Cluster client each, ` +
      `one process), joins ${env.BENCH_CONCURRENCY} in flight, then each fan polls every ${env.BENCH_POLL_INTERVAL_MS} ms ` +
      `for ${env.BENCH_POLL_SECONDS} s, admitting ${env.BENCH_ADMIT_PER_SECOND}/s; ` +
      `fan shards ${env.BENCH_FAN_SHARDS}${env.BENCH_FAN_SHARDS === 0 ? " (heartbeats on the event's slot)" : ""}` +
      (env.BENCH_AIM_SHARD === "1" && env.BENCH_FAN_SHARDS > 0
        ? ", every fan aimed at shard 0 by the public hash"
        : ""),
    "Redis CPU = INFO cpu (user+sys) over the phase, less each master's idle CPU (cron, cluster bus) over the same time",
  ];
  for (const r of results) {
    lines.push("", `${r.masters} master${r.masters === 1 ? "" : "s"}`);
    for (const p of r.phases) {
      lines.push(
        `  ${p.name}: ${p.ops} in ${p.seconds.toFixed(2)} s = ${Math.round(p.perSecond)}/s driven; ` +
          `${p.usPerOp.toFixed(2)} us of Redis CPU per ${{ joins: "join", polls: "poll", leaves: "place given up" }[p.name]}; ` +
          `busiest master ${pct(p.busiestShare).trim()}; ceiling ${rate(p.ceilingPerSecond).trim()}/s; ${p.notes}`,
      );
      lines.push(
        `    ${"master".padEnd(14)}${"raw ms".padStart(9)}${"idle ms".padStart(9)}${"line ms".padStart(9)}${"share".padStart(8)}`,
      );
      for (const m of p.masters) {
        lines.push(
          `    ${`:${m.port}${m.eventSlot ? " {evt}" : ""}`.padEnd(14)}${ms(m.rawMs)}${ms(m.idleMs)}${ms(m.lineMs)}${pct(m.share)}`,
        );
      }
      const busiest = p.masters.reduce((a, b) => (b.lineMs > a.lineMs ? b : a));
      lines.push(`    busiest :${busiest.port} commandstats: ${breakdown(busiest)}`);
    }
  }
  lines.push(
    "",
    `${"masters".padEnd(9)}${"joins/s".padStart(9)}${"join ceil/s".padStart(13)}${"busiest".padStart(9)}${"polls/s".padStart(9)}${"poll ceil/s".padStart(13)}${"busiest".padStart(9)}${"leave ceil/s".padStart(14)}${"busiest".padStart(9)}${"joins+polls busiest".padStart(21)}`,
    ...results.map((r) => {
      const [j, p, l] = r.phases as [Phase, Phase, Phase];
      return `${String(r.masters).padEnd(9)}${Math.round(j.perSecond).toString().padStart(9)}${rate(j.ceilingPerSecond).padStart(13)}${pct(j.busiestShare).padStart(9)}${Math.round(p.perSecond).toString().padStart(9)}${rate(p.ceilingPerSecond).padStart(13)}${pct(p.busiestShare).padStart(9)}${rate(l.ceilingPerSecond).padStart(14)}${pct(l.busiestShare).padStart(9)}${pct(joinsAndPollsShare(r.phases)).padStart(21)}`;
    }),
  );
  process.stdout.write(`${lines.join("\n")}\n`);
  process.stdout.write(
    `${JSON.stringify({
      bench: "line-cluster",
      fans: env.BENCH_FANS,
      gateways: env.BENCH_GATEWAYS,
      concurrency: env.BENCH_CONCURRENCY,
      fanShards: env.BENCH_FAN_SHARDS,
      runs: results.map((r) => ({
        masters: r.masters,
        joinsAndPollsBusiestShare: Number(joinsAndPollsShare(r.phases).toFixed(3)),
        ...Object.fromEntries(
          r.phases.map((p) => [
            p.name,
            {
              ops: p.ops,
              perSecond: Math.round(p.perSecond),
              ceilingPerSecond: Number.isFinite(p.ceilingPerSecond) ? Math.round(p.ceilingPerSecond) : null,
              busiestShare: Number(p.busiestShare.toFixed(3)),
              redisUsPerOp: Number(p.usPerOp.toFixed(2)),
              lineMsPerMaster: p.masters.map((m) => Number(m.lineMs.toFixed(1))),
            },
          ]),
        ),
      })),
    })}\n`,
  );
}

main().catch((err: unknown) => {
  process.stderr.write(`bench-line-cluster failed: ${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
});
