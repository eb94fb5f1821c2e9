/**
 * `npm run bench:gateways`: what one more gateway process adds. The stack of the many-gateways
 * test (test/foundation/many-gateways.test.ts), as processes: a redis-server and the local
 * DynamoDB of its own, two workers (src/main.ts --role=worker), and three gateways
 * (--role=gateway), of which the load goes to the first 1, then 2, then 3 (the others idle: a
 * few ms of CPU a second), in BENCH_ROUNDS rounds (1, 2, 3, 1, 2, 3: the drift of a shared
 * machine shows as the difference between rounds). For each count, the same offered load (wrk:
 * BENCH_THREADS threads, one gateway per thread in turn, closed loop) on the two hot fan paths:
 *
 *   - the queue status poll (admitted fans' queue tokens; one Redis script per poll);
 *   - hold + release: each fan holds its own seat, and the hold's answer queues its release
 *     (DELETE), so half the requests are holds and half releases, every one a DynamoDB
 *     transaction that succeeds (no contention: the cost of the work itself).
 *
 * Per count and path: requests/s, p50/p99, and CPU microseconds per request of the gateways,
 * the workers, redis-server, the local DynamoDB and wrk (each from /proc/<pid>/stat), and of
 * everything else on the machine (from /proc/stat: the other tenants of a shared box). On a
 * 2-core machine the gateways, Redis, DynamoDB and wrk share two cores: the table shows where
 * the cores go, which is what says whether one more gateway can add anything.
 *
 * Knobs: BENCH_SECONDS (5), BENCH_WARMUP_SECONDS (1), BENCH_CONNECTIONS (48, the poll's),
 * BENCH_HOLD_CONNECTIONS (12: every hold and release is a DynamoDB transaction, and the local
 * DynamoDB, one Node process, queues them; with 48 in flight on a loaded box a hold waited longer
 * than a run), BENCH_THREADS (6: a multiple of 1, 2 and 3, so the connections split evenly over
 * the gateways; at least the connections), BENCH_FANS (1200),
 * BENCH_MAX_GATEWAYS (3), BENCH_ROUNDS (2). Needs wrk (BENCH_CLIENT=node: the Node client instead, which runs out
 * of CPU before the gateways do). Prints a table, then one JSON line.
 */
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { cpus, loadavg, totalmem } from "node:os";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { z } from "zod";
import { spawnLocalDynamoDB } from "../src/local/dynamodb.js";
import { spawnRedis } from "../src/local/redis.js";
import { type MainProcess, startMainProcess } from "../test/support/processes.js";
import { ADMIN, admitAll, call } from "./bench-gateway.js";
import {
  defaultClient,
  type LoadOptions,
  type LoadResult,
  machineCpuMicros,
  processCpuMicros,
  runLoad,
} from "./lib/http-load.js";

const env = z
  .object({
    BENCH_SECONDS: z.coerce.number().positive().default(5),
    BENCH_WARMUP_SECONDS: z.coerce.number().nonnegative().default(1),
    BENCH_CONNECTIONS: z.coerce.number().int().positive().default(48),
    BENCH_HOLD_CONNECTIONS: z.coerce.number().int().positive().default(12),
    BENCH_THREADS: z.coerce.number().int().positive().default(6),
    BENCH_FANS: z.coerce.number().int().positive().default(1_200),
    BENCH_MAX_GATEWAYS: z.coerce.number().int().min(1).max(8).default(3),
    BENCH_ROUNDS: z.coerce.number().int().min(1).default(2),
  })
  .parse(process.env);

const step = (s: string) => process.stderr.write(`bench:gateways: ${s}\n`);
const SEATS_PER_ROW = 50;

interface Row {
  path: string;
  round: number;
  gateways: number;
  result: LoadResult;
  /** CPU µs per request, by process group. */
  cpu: { gateways: number; perGateway: number[]; workers: number; redis: number; dynamodb: number; client: number };
  /** Share of the machine's CPU time busy over the run (all cores), 0..1. */
  machineBusy: number;
  /** CPU µs per request spent by processes that are not the bench's (other tenants). */
  others: number;
}

const started = performance.now();
const dataDir = mkdtempSync(join(tmpdir(), "bench-gateways-"));
const redis = await spawnRedis();
const dynamo = await spawnLocalDynamoDB({ port: 0 });
const processes: MainProcess[] = [];
// Whatever is still running when this process goes (even on a crash) is killed, not orphaned.
process.once("exit", () => {
  for (const p of processes) if (p.alive()) p.child.kill("SIGKILL");
});

const processEnv: Record<string, string> = {
  REDIS_URL: redis.url,
  DYNAMODB_ENDPOINT: dynamo.endpoint,
  DYNAMODB_TABLE: `bench_gws_${Date.now()}`,
  ADMIN_TOKEN: ADMIN,
  GATEWAY_SECRET: randomBytes(32).toString("hex"),
  DATA_DIR: dataDir,
  DEMO_EVENT: "false",
  // One host is every client: the per-IP and per-fan limits would measure themselves.
  RATE_LIMIT_PER_IP: "0",
  RATE_LIMIT_PER_FAN: "0",
  AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: "true",
  // info: the readiness line; requests log at debug.
  LOG_LEVEL: "info",
};
const start = async (role: "gateway" | "worker") => {
  const p = await startMainProcess({ role, env: processEnv, timeoutMs: 120_000 });
  processes.push(p);
  return p;
};

const rows: Row[] = [];
try {
  if (defaultClient() !== "wrk")
    step("wrk not found (apt-get install -y wrk): the Node client's figures are its own ceiling");
  step(`redis-server, local DynamoDB, 2 workers and ${env.BENCH_MAX_GATEWAYS} gateways`);
  await Promise.all([
    ...Array.from({ length: env.BENCH_MAX_GATEWAYS }, () => start("gateway")),
    start("worker"),
    start("worker"),
  ]);
  const gateways = processes.filter((p) => p.url !== undefined);
  const workers = processes.filter((p) => p.url === undefined);
  const first = gateways[0];

  const eventId = `gws${Date.now()}`;
  // A section of its own for each hold run (warm-ups included): the holds a run leaves behind
  // (in flight, or their release not sent when wrk stopped) are never in the next run's way.
  const holdRuns = env.BENCH_ROUNDS * env.BENCH_MAX_GATEWAYS * (env.BENCH_WARMUP_SECONDS > 0 ? 2 : 1);
  const rowsOfSeats = Math.ceil(env.BENCH_FANS / SEATS_PER_ROW);
  const put = await call(`${first!.url}/v1/admin/events/${eventId}`, {
    method: "PUT",
    headers: { authorization: `Bearer ${ADMIN}` },
    json: {
      name: "Many gateways",
      onSaleAt: new Date(Date.now() - 1_000).toISOString(),
      holdSeconds: 600,
      // One seat per fan and run, and at most one left behind per run.
      maxSeatsPerFan: holdRuns + 2,
      sections: Array.from({ length: holdRuns }, (_, r) => ({
        id: `R${r}`,
        tier: "Floor",
        price: 5_000,
        rows: rowsOfSeats,
        seatsPerRow: SEATS_PER_ROW,
      })),
      generalAdmission: [],
      waitingRoom: { admitPerSecond: 100_000, maxActive: 1_000_000, sessionSeconds: 3_600 },
    },
  });
  if (put.status !== 201) throw new Error(`event not created: ${put.status} ${JSON.stringify(put.body)}`);
  let holdRun = 0;
  step(`admitting ${env.BENCH_FANS} fans`);
  const fanIds = Array.from({ length: env.BENCH_FANS }, (_, i) => `fan${i}`);
  const { queueTokens, accessTokens } = await admitAll(first!.url!, eventId, fanIds, 200);
  if (accessTokens.length !== env.BENCH_FANS) throw new Error(`only ${accessTokens.length} fans admitted`);
  // Access token f holds seat f (in the Lua below): one seat a fan, within maxSeatsPerFan.

  const ev = `/v1/events/${eventId}`;
  const luaList = (items: readonly string[]) => `{${items.map((s) => JSON.stringify(s)).join(",")}}`;
  const paths: Array<{ name: string; load: (urls: string[]) => Omit<LoadOptions, "seconds" | "name"> }> = [
    {
      name: "queue status poll",
      load: (urls) => ({
        baseUrl: urls[0]!,
        baseUrls: urls,
        connections: env.BENCH_CONNECTIONS,
        threads: env.BENCH_THREADS,
        distinct: Math.min(queueTokens.length, 2_000),
        next: (i) => ({
          path: `${ev}/queue/status`,
          headers: { authorization: `Bearer ${queueTokens[i % queueTokens.length]}` },
        }),
      }),
    },
    {
      name: "hold + release (one seat, no contention)",
      load: (urls) => ({
        baseUrl: urls[0]!,
        baseUrls: urls,
        connections: env.BENCH_HOLD_CONNECTIONS,
        threads: env.BENCH_THREADS,
        next: () => ({ path: "/" }),
        // Fan f holds seat f of this run's section.
        // Each thread owns the fans f = id, id + threads, ...; fan f holds seat f. A hold's answer
        // queues its release; the next request of the thread sends it, else the next fan's hold.
        // A fan comes round again only after all its thread's other fans: its release is done.
        wrkInit: `tok = ${luaList(accessTokens)}; seat = {}; mine = {}; seatFan = {}; releases = {}; nextFan = 0
          for f = 1, #tok do  seat[f] = "R${holdRun++}-" .. (math.floor((f - 1) / ${SEATS_PER_ROW}) + 1) .. "-" .. ((f - 1) % ${SEATS_PER_ROW} + 1) end
          for f = id + 1, #tok, ${env.BENCH_THREADS} do mine[#mine + 1] = f; seatFan[seat[f]] = f end`,
        wrkRequest: `if #releases > 0 then
            local r = table.remove(releases)
            return wrk.format("DELETE", "${ev}/holds/" .. r[1], {["host"]="gw", ["authorization"]="Bearer " .. tok[r[2]]})
          end
          nextFan = nextFan % #mine + 1
          local f = mine[nextFan]
          return wrk.format("POST", "${ev}/holds", {["host"]="gw", ["content-type"]="application/json", ["authorization"]="Bearer " .. tok[f]}, '{"seats":["' .. seat[f] .. '"]}')`,
        wrkResponse: `if status == 201 then
            local h = string.match(body, '"holdId":"([^"]+)"')
            local s = string.match(body, '"seats":%["([^"]+)"')
            if h and s and seatFan[s] then releases[#releases + 1] = {h, seatFan[s]} end
          end`,
      }),
    },
  ];

  for (let round = 1; round <= env.BENCH_ROUNDS; round++) {
    for (let n = 1; n <= env.BENCH_MAX_GATEWAYS; n++) {
      const urls = gateways.slice(0, n).map((g) => g.url!);
      for (const path of paths) {
        if (env.BENCH_WARMUP_SECONDS > 0) {
          await runLoad({ ...path.load(urls), name: `${path.name} (warm-up)`, seconds: env.BENCH_WARMUP_SECONDS });
        }
        const options = path.load(urls);
        step(`round ${round}, ${n} gateway${n > 1 ? "s" : ""}: ${path.name}, ${env.BENCH_SECONDS} s`);
        const pids = {
          gateways: gateways.map((g) => g.pid),
          workers: workers.map((w) => w.pid),
          redis: redis.child.pid!,
          dynamodb: dynamo.child.pid!,
        };
        const cpuOf = (pid: number) => processCpuMicros(pid) ?? Number.NaN;
        const snapshot = () => ({
          gateways: pids.gateways.map(cpuOf),
          workers: pids.workers.map(cpuOf),
          redis: cpuOf(pids.redis),
          dynamodb: cpuOf(pids.dynamodb),
          machine: machineCpuMicros(),
        });
        const before = snapshot();
        const result = await runLoad({ ...options, name: path.name, seconds: env.BENCH_SECONDS });
        const after = snapshot();
        const perRequest = (micros: number) => micros / Math.max(1, result.requests);
        const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);
        const perGateway = after.gateways.map((a, i) => perRequest(a - before.gateways[i]!));
        const workersCpu = perRequest(sum(after.workers) - sum(before.workers));
        const redisCpu = perRequest(after.redis - before.redis);
        const dynamoCpu = perRequest(after.dynamodb - before.dynamodb);
        const client = result.clientCpuMicrosPerRequest ?? 0;
        const ours = sum(perGateway) + workersCpu + redisCpu + dynamoCpu + client;
        const busy = (after.machine?.busy ?? 0) - (before.machine?.busy ?? 0);
        const total = (after.machine?.total ?? 0) - (before.machine?.total ?? 0);
        rows.push({
          path: path.name,
          round,
          gateways: n,
          result,
          cpu: {
            gateways: sum(perGateway),
            perGateway,
            workers: workersCpu,
            redis: redisCpu,
            dynamodb: dynamoCpu,
            client,
          },
          machineBusy: total > 0 ? busy / total : Number.NaN,
          others: Math.max(0, perRequest(busy) - ours),
        });
      }
    }
  }
} finally {
  await Promise.allSettled(processes.map((p) => p.stop("SIGTERM")));
  await redis.close();
  await dynamo.close();
  rmSync(dataDir, { recursive: true, force: true });
}

const seconds = (performance.now() - started) / 1000;
const f0 = (n: number) => (Number.isFinite(n) ? n.toFixed(0) : "n/a");
const header = [
  "path",
  "round",
  "gws",
  "req/s",
  "x 1 gw",
  "p50 ms",
  "p99 ms",
  "gateways µs/req (each)",
  "workers",
  "redis",
  "dynamodb",
  "wrk",
  "others",
  "busy",
  "statuses",
];
// By path, then round, then gateway count.
const paths = [...new Set(rows.map((r) => r.path))];
rows.sort((a, b) => paths.indexOf(a.path) - paths.indexOf(b.path) || a.round - b.round || a.gateways - b.gateways);
const table = rows.map((r) => {
  const one = rows.find((x) => x.path === r.path && x.round === r.round && x.gateways === 1)!;
  return [
    r.path,
    String(r.round),
    String(r.gateways),
    f0(r.result.perSecond),
    (r.result.perSecond / one.result.perSecond).toFixed(2),
    r.result.p50Ms.toFixed(1),
    r.result.p99Ms.toFixed(1),
    `${f0(r.cpu.gateways)} (${r.cpu.perGateway.map(f0).join("+")})`,
    f0(r.cpu.workers),
    f0(r.cpu.redis),
    f0(r.cpu.dynamodb),
    f0(r.cpu.client),
    f0(r.others),
    `${(r.machineBusy * 100).toFixed(0)}%`,
    JSON.stringify(r.result.statuses),
  ];
});
const widths = header.map((h, i) => Math.max(h.length, ...table.map((t) => t[i]!.length)));
const line = (cells: string[]) =>
  cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join("  ");
console.log(
  `npm run bench:gateways: ${cpus().length} cpus, ${(totalmem() / 2 ** 30).toFixed(1)} GiB, node ${process.version}, ` +
    `load average ${loadavg()[0]!.toFixed(1)} at the end, ${seconds.toFixed(0)} s; client ${rows[0]?.result.client ?? "?"} ` +
    `(${env.BENCH_THREADS} threads; ${env.BENCH_CONNECTIONS} connections polling, ${env.BENCH_HOLD_CONNECTIONS} holding; ` +
    `${env.BENCH_SECONDS} s a run), 2 workers`,
);
console.log(line(header));
for (const t of table) console.log(line(t));
console.log(
  JSON.stringify({
    bench: "gateways",
    machine: { cpus: cpus().length, memoryGiB: Number((totalmem() / 2 ** 30).toFixed(1)), node: process.version },
    knobs: env,
    seconds: Math.round(seconds),
    results: rows.map((r) => ({
      path: r.path,
      round: r.round,
      gateways: r.gateways,
      perSecond: Math.round(r.result.perSecond),
      p50Ms: Number(r.result.p50Ms.toFixed(2)),
      p99Ms: Number(r.result.p99Ms.toFixed(2)),
      cpuMicrosPerRequest: {
        gateways: Math.round(r.cpu.gateways),
        perGateway: r.cpu.perGateway.map(Math.round),
        workers: Math.round(r.cpu.workers),
        redis: Math.round(r.cpu.redis),
        dynamodb: Math.round(r.cpu.dynamodb),
        client: Math.round(r.cpu.client),
        others: Math.round(r.others),
      },
      machineBusy: Number(r.machineBusy.toFixed(3)),
      statuses: r.result.statuses,
    })),
  }),
);
