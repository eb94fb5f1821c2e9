/**
 * Gateway throughput: the section seat map, the queue status poll and contended holds, each
 * beside a bare Hono hello-world measured by the same client with the same connections in the
 * same run. Server and client run in separate processes (one core each on a 2-core machine).
 *
 *   npm run bench:gateway                 # spawns its own redis-server and local DynamoDB
 *   BENCH_SECONDS=10 BENCH_CONNECTIONS=64 npm run bench:gateway
 *   BENCH_GATEWAY_NODE_FLAGS="--cpu-prof --cpu-prof-dir=/tmp/prof" npm run bench:gateway  # a profile
 *   BENCH_ONLY=join npm run bench:gateway   # only the rows whose names match (and the ceiling)
 *   BENCH_WARMUP_SECONDS=0 npm run bench:gateway   # no warm-up run before each row (from cold)
 *   BENCH_GATEWAY_BUILD=dist npm run bench:gateway  # the gateway as the image runs it (tsc's dist/,
 *                                                   # built first), not through tsx as `npm start`
 *
 * Prints a table, then one JSON line.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { get } from "node:http";
import { createInterface } from "node:readline";
import { pathToFileURL } from "node:url";
import { z } from "zod";
import { spawnLocalDynamoDB } from "../src/local/dynamodb.js";
import { spawnRedis } from "../src/local/redis.js";
import { pollsAnswered } from "../load/driver/costs.js";
import { type LoadOptions, type LoadResult, processCpuMicros, runLoad } from "./lib/http-load.js";

export const ADMIN = "bench-operator-token-000";

/** Starts scripts/bench-server.ts in a child process; resolves with its URL once it listens. */
export async function startServer(
  mode: "hello" | "gateway",
  extra: Record<string, string>,
): Promise<{ url: string; child: ChildProcess }> {
  if (mode === "gateway" && process.env.BENCH_GATEWAY_BUILD === "dist") await buildDistOnce();
  // BENCH_GATEWAY_NODE_FLAGS (e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof") goes to the gateway's
  // node only, for a profile of exactly what the table measures.
  const flags = mode === "gateway" ? (process.env.BENCH_GATEWAY_NODE_FLAGS ?? "").split(/\s+/).filter(Boolean) : [];
  const child = spawn(process.execPath, [...flags, "--import", "tsx", "scripts/bench-server.ts"], {
    env: {
      ...process.env,
      MODE: mode,
      ADMIN_TOKEN: ADMIN,
      AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: "true",
      ...extra,
    },
    stdio: ["ignore", "pipe", "inherit"],
  });
  const port = await new Promise<number>((resolve, reject) => {
    createInterface({ input: child.stdout! }).on("line", (line) => {
      try {
        const p = (JSON.parse(line) as { listening?: number }).listening;
        if (p) resolve(p);
      } catch {}
    });
    child.once("exit", (code) => reject(new Error(`${mode} server exited with ${code}`)));
  });
  return { url: `http://127.0.0.1:${port}`, child };
}

let built: Promise<void> | undefined;
/** tsc's build of src/ into dist/ (as the image's `npm run build`), once per bench run. */
function buildDistOnce(): Promise<void> {
  built ??= new Promise((resolve, reject) => {
    const tsc = spawn(process.execPath, ["node_modules/typescript/bin/tsc", "-p", "tsconfig.build.json"], {
      stdio: "inherit",
    });
    tsc.once("error", reject);
    tsc.once("exit", (code) => (code === 0 ? resolve() : reject(new Error(`tsc exited with ${code}`))));
  });
  return built;
}

export async function call<T>(
  url: string,
  init: RequestInit & { json?: unknown } = {},
): Promise<{ status: number; body: T }> {
  const { json, ...rest } = init;
  const res = await fetch(url, {
    ...rest,
    headers: {
      ...(json !== undefined ? { "content-type": "application/json" } : {}),
      ...(rest.headers as Record<string, string>),
    },
    ...(json !== undefined ? { body: JSON.stringify(json) } : {}),
  });
  const text = await res.text();
  return { status: res.status, body: (text ? JSON.parse(text) : null) as T };
}

export async function inBatches<T, R>(items: T[], size: number, fn: (item: T) => Promise<R>): Promise<R[]> {
  const out: R[] = [];
  for (let i = 0; i < items.length; i += size) out.push(...(await Promise.all(items.slice(i, i + size).map(fn))));
  return out;
}

/** PUTs an on-sale that opened a second ago, with a waiting room that admits at `admitPerSecond`. */
export async function putBenchEvent(
  gatewayUrl: string,
  eventId: string,
  event: {
    name: string;
    sections: unknown[];
    admitPerSecond: number;
    generalAdmission?: unknown[];
    maxActive?: number;
  },
): Promise<void> {
  const put = await call(`${gatewayUrl}/v1/admin/events/${eventId}`, {
    method: "PUT",
    headers: { authorization: `Bearer ${ADMIN}` },
    json: {
      name: event.name,
      onSaleAt: new Date(Date.now() - 1000).toISOString(),
      holdSeconds: 600,
      maxSeatsPerFan: 4,
      sections: event.sections,
      generalAdmission: event.generalAdmission ?? [],
      waitingRoom: {
        admitPerSecond: event.admitPerSecond,
        maxActive: event.maxActive ?? 1_000_000,
        sessionSeconds: 3600,
      },
    },
  });
  if (put.status !== 201) throw new Error(`event ${eventId} not created: ${put.status} ${JSON.stringify(put.body)}`);
}

/** Every fan joins the queue, then polls (`batch` requests in flight) until admitted. */
export async function admitAll(
  gatewayUrl: string,
  eventId: string,
  fanIds: string[],
  batch: number,
): Promise<{ queueTokens: string[]; accessTokens: string[] }> {
  const queueTokens = await inBatches(fanIds, batch, async (fanId) => {
    const r = await call<{ queueToken: string }>(`${gatewayUrl}/v1/events/${eventId}/queue`, {
      method: "POST",
      json: { fanId },
    });
    return r.body.queueToken;
  });
  const accessTokens: string[] = [];
  let pending = queueTokens;
  while (pending.length > 0) {
    const polled = await inBatches(pending, batch, async (token) => {
      const r = await call<{ accessToken?: string }>(`${gatewayUrl}/v1/events/${eventId}/queue/status`, {
        headers: { authorization: `Bearer ${token}` },
      });
      return { token, access: r.body.accessToken };
    });
    for (const p of polled) if (p.access) accessTokens.push(p.access);
    pending = polled.filter((p) => !p.access).map((p) => p.token);
  }
  return { queueTokens, accessTokens };
}

export type GatewayBenchRow = LoadResult & {
  ceilingRatio?: number;
  /**
   * The hello-world's req/s beside this row: the mean of its runs just before and just after the
   * row (ceilingRatio divides by it). On a shared machine whose speed drifts by a third within a
   * minute, a ceiling measured once at the start made the last rows' ratios a measure of the drift.
   */
  ceilingBeside?: number;
  extra?: Record<string, number>;
  /** The Redis server's CPU over the run per request (when the bench spawned it): it shares these cores. */
  redisCpuMicrosPerRequest?: number;
};

export interface GatewayBenchOptions {
  redisUrl: string;
  dynamoEndpoint: string;
  seconds: number;
  connections: number;
  fans: number;
  /** The Redis server's pid, when it runs on this machine: its CPU per request is reported too. */
  redisPid?: number;
  /** Only the rows whose names match (BENCH_ONLY), beside the ceiling. */
  only?: RegExp;
  /**
   * Seconds of the same load before each measured run, its figures dropped (BENCH_WARMUP_SECONDS,
   * default 2; 0 measures from cold as before). Without it a row counted the JIT's first
   * compilations (TurboFan took ~19% of a cold poll run's samples in perf) and the gateway, with
   * more code to optimise than the hello-world, paid more of it: an on-sale lasts minutes.
   */
  warmupSeconds?: number;
}

/** Bytes of a response body on the wire (no decompression), with the given request headers. */
export function wireBytes(
  url: string,
  headers: Record<string, string>,
): Promise<{ status: number; bytes: number; encoding: string }> {
  return new Promise((resolve, reject) => {
    get(url, { headers }, (res) => {
      let bytes = 0;
      res.on("data", (chunk: Buffer) => {
        bytes += chunk.length;
      });
      res.on("end", () =>
        resolve({
          status: res.statusCode ?? 0,
          bytes,
          encoding: String(res.headers["content-encoding"] ?? "identity"),
        }),
      );
    }).on("error", reject);
  });
}

/**
 * The hello-world ceiling, then the gateway's hot paths against a gateway child process on the
 * given stores, each with its ratio to the ceiling and the server's CPU microseconds per request:
 * the section seat map (the client accepting gzip and br), the queue status poll, a join, a hold
 * refused by the hot-seat shield, contended holds (with DynamoDB hold writes per granted seat).
 */
const CEILING = "hello world (ceiling)";

export async function benchGateway(options: GatewayBenchOptions): Promise<GatewayBenchRow[]> {
  const { redisUrl, dynamoEndpoint } = options;
  const load = { connections: options.connections, seconds: options.seconds };
  const warmupSeconds = options.warmupSeconds ?? 2;
  /** One row: `warmup: false` for a run that changes what it measures (the hot seats sell). */
  const measured = async (run: LoadOptions, { warmup = true } = {}): Promise<GatewayBenchRow> => {
    // BENCH_ONLY: the rows whose names it matches (and the ceiling, always); the others are left out.
    if (options.only && !options.only.test(run.name) && run.name !== CEILING) {
      return { name: run.name, requests: 0, seconds: 0, perSecond: 0, p50Ms: 0, p99Ms: 0, statuses: {} };
    }
    if (warmup && warmupSeconds > 0) await runLoad({ ...run, seconds: warmupSeconds });
    const pid = options.redisPid;
    const before = pid ? processCpuMicros(pid) : undefined;
    const result: GatewayBenchRow = await runLoad(run);
    const after = pid ? processCpuMicros(pid) : undefined;
    if (before !== undefined && after !== undefined && result.requests > 0) {
      result.redisCpuMicrosPerRequest = (after - before) / result.requests;
    }
    if (run.name !== CEILING) {
      // The ceiling again, right after the row (the hello-world's process idles while the
      // gateway runs): the row's ratio is to the mean of the runs on either side of it.
      const next = await runLoad(helloRun);
      result.ceilingBeside = (lastCeiling + next.perSecond) / 2;
      lastCeiling = next.perSecond;
    }
    return result;
  };
  const results: GatewayBenchRow[] = [];
  // Up for the whole bench: the ceiling is measured beside every row (ceilingBeside).
  const hello = await startServer("hello", {});
  const helloRun: LoadOptions = {
    ...load,
    name: CEILING,
    baseUrl: hello.url,
    serverPid: hello.child.pid,
    next: () => ({ path: "/hello" }),
  };
  let lastCeiling = 0;
  let ceiling: GatewayBenchRow;
  try {
    ceiling = await measured(helloRun);
  } catch (err) {
    hello.child.kill("SIGTERM");
    throw err;
  }
  lastCeiling = ceiling.perSecond;
  results.push(ceiling);

  const gwTable = `bench_${Date.now()}`;
  const gw = await startServer("gateway", {
    REDIS_URL: redisUrl,
    DYNAMODB_ENDPOINT: dynamoEndpoint,
    DYNAMODB_TABLE: gwTable,
  }).catch((err: unknown) => {
    hello.child.kill("SIGTERM");
    throw err;
  });
  const pid = gw.child.pid;
  try {
    const eventId = `bench${Date.now()}`;
    await putBenchEvent(gw.url, eventId, {
      name: "Bench",
      sections: [
        { id: "A", tier: "Floor", price: 10000, rows: 20, seatsPerRow: 50 },
        { id: "B", tier: "Floor", price: 10000, rows: 40, seatsPerRow: 50 },
        { id: "HOT", tier: "Front", price: 50000, rows: 1, seatsPerRow: 20 },
        { id: "TAKEN", tier: "Front", price: 50000, rows: 1, seatsPerRow: 20 },
      ],
      admitPerSecond: 50_000,
    });
    const fanIds = Array.from({ length: options.fans }, (_, i) => `fan${i}`);
    const { queueTokens, accessTokens } = await admitAll(gw.url, eventId, fanIds, 200);

    const encodings = { "accept-encoding": "gzip, br" };
    const sizes: Record<string, number> = {};
    for (const [section, seats] of [
      ["A", 1000],
      ["B", 2000],
    ] as const) {
      const url = `${gw.url}/v1/events/${eventId}/sections/${section}/seats`;
      sizes[`bytes${seats}Identity`] = (await wireBytes(url, {})).bytes;
      sizes[`bytes${seats}Gzip`] = (await wireBytes(url, { "accept-encoding": "gzip" })).bytes;
      sizes[`bytes${seats}Br`] = (await wireBytes(url, { "accept-encoding": "br" })).bytes;
    }
    results.push({
      ...(await measured({
        ...load,
        name: "section seat map (1,000 seats, gzip/br accepted)",
        baseUrl: gw.url,
        serverPid: pid,
        next: () => ({ path: `/v1/events/${eventId}/sections/A/seats`, headers: encodings }),
      })),
      extra: sizes,
    });
    results.push(
      await measured({
        ...load,
        name: "queue status poll",
        baseUrl: gw.url,
        serverPid: pid,
        next: (i) => ({
          path: `/v1/events/${eventId}/queue/status`,
          headers: { authorization: `Bearer ${queueTokens[i % queueTokens.length]}` },
        }),
      }),
    );
    // A line that does not move (one session, taken): every poll is a fan whose turn has not come.
    const fullEvent = `${eventId}w`;
    await putBenchEvent(gw.url, fullEvent, {
      name: "Bench (room full)",
      sections: [{ id: "A", tier: "Floor", price: 10000, rows: 1, seatsPerRow: 10 }],
      admitPerSecond: 1,
      maxActive: 1,
    });
    const waitingTokens = await inBatches(fanIds, 200, async (fanId) => {
      const r = await call<{ queueToken: string }>(`${gw.url}/v1/events/${fullEvent}/queue`, {
        method: "POST",
        json: { fanId },
      });
      return r.body.queueToken;
    });
    const cacheBefore = await pollsAnswered(gw.url);
    const waitingPoll = await measured({
      ...load,
      name: "queue status poll, fan waiting (room full)",
      baseUrl: gw.url,
      serverPid: pid,
      next: (i) => ({
        path: `/v1/events/${fullEvent}/queue/status`,
        headers: { authorization: `Bearer ${waitingTokens[i % waitingTokens.length]}` },
      }),
    });
    const cacheAfter = await pollsAnswered(gw.url);
    results.push({
      ...waitingPoll,
      extra: {
        answeredFromCache: cacheAfter.cache - cacheBefore.cache,
        answeredByRedis: cacheAfter.redis - cacheBefore.redis,
      },
    });
    // The same polls on a gateway without the line cache (every poll a status-10.lua call), as
    // every poll was before issue 28: the before and after in one run.
    const plain = await startServer("gateway", {
      REDIS_URL: redisUrl,
      DYNAMODB_ENDPOINT: dynamoEndpoint,
      DYNAMODB_TABLE: gwTable,
      LINE_CACHE: "off",
    });
    try {
      results.push(
        await measured({
          ...load,
          name: "queue status poll, fan waiting, line cache off",
          baseUrl: plain.url,
          serverPid: plain.child.pid,
          next: (i) => ({
            path: `/v1/events/${fullEvent}/queue/status`,
            headers: { authorization: `Bearer ${waitingTokens[i % waitingTokens.length]}` },
          }),
        }),
      );
    } finally {
      plain.child.kill("SIGTERM");
    }
    let joined = 0;
    let batches = await joinBatches(gw.url);
    /** A row of joins, a new fan each (`fanPrefix` for this script's, `wrkPrefix` for wrk's), with the batches they made. */
    const joinRow = async (
      name: string,
      event: string,
      fanPrefix: string,
      wrkPrefix: string,
    ): Promise<GatewayBenchRow> => {
      const row = await measured({
        ...load,
        name,
        baseUrl: gw.url,
        serverPid: pid,
        next: () => ({
          method: "POST",
          path: `/v1/events/${event}/queue`,
          body: JSON.stringify({ fanId: `${fanPrefix}-${process.pid}-${joined++}` }),
        }),
        wrkRequest: `return wrk.format("POST", "/v1/events/${event}/queue", {["host"]=host, ["content-type"]="application/json"}, '{"fanId":"${wrkPrefix}' .. run .. '-' .. counter .. '"}')`,
      });
      const now = await joinBatches(gw.url);
      const sent = now.count - batches.count;
      const perBatch = sent > 0 ? (now.sum - batches.sum) / sent : 0;
      batches = now;
      return { ...row, extra: { joinBatches: sent, joinsPerBatch: Number(perBatch.toFixed(1)) } };
    };
    results.push(await joinRow("join (a new fan each)", eventId, "joiner", "w"));
    // The join of an on-sale's crowd: into a line that is waiting (the room full), so no join is
    // also an admission (the row above admits each joiner at once, 50,000/s).
    results.push(await joinRow("join into a waiting line (a new fan each)", fullEvent, "waiter", "x"));
    // A fan joining again (a reload, a second tab, a retry): the place given back, 200.
    results.push(
      await measured({
        ...load,
        name: "repeat join (a fan already in line)",
        baseUrl: gw.url,
        serverPid: pid,
        next: (i) => ({
          method: "POST",
          path: `/v1/events/${fullEvent}/queue`,
          body: JSON.stringify({ fanId: fanIds[i % fanIds.length] }),
        }),
      }),
    );
    // Every TAKEN seat held first (one fan each): the crowd after them is refused by the shield.
    for (let n = 1; n <= 20; n++) {
      const held = await call(`${gw.url}/v1/events/${eventId}/holds`, {
        method: "POST",
        headers: { authorization: `Bearer ${accessTokens[n - 1]}` },
        json: { seats: [`TAKEN-1-${n}`] },
      });
      if (held.status !== 201) throw new Error(`TAKEN-1-${n} not held: ${held.status}`);
    }
    results.push(
      await measured({
        ...load,
        name: "hold refused (seat held: from the seat map in memory)",
        baseUrl: gw.url,
        serverPid: pid,
        next: (i) => ({
          method: "POST",
          path: `/v1/events/${eventId}/holds`,
          headers: { authorization: `Bearer ${accessTokens[20 + (i % (accessTokens.length - 20))]}` },
          body: JSON.stringify({ seats: [`TAKEN-1-${(i % 20) + 1}`] }),
        }),
      }),
    );
    const before = await holdWrites(gw.url);
    const holds = await measured(
      {
        ...load,
        name: "contended holds (20 hot seats)",
        baseUrl: gw.url,
        serverPid: pid,
        next: (i) => ({
          method: "POST",
          path: `/v1/events/${eventId}/holds`,
          headers: { authorization: `Bearer ${accessTokens[i % accessTokens.length]}` },
          body: JSON.stringify({ seats: [`HOT-1-${(i % 20) + 1}`] }),
        }),
      },
      { warmup: false },
    );
    const writes = (await holdWrites(gw.url)) - before;
    const granted = holds.statuses["201"] ?? 0;
    results.push({
      ...holds,
      extra: { granted, dynamoWrites: writes, writesPerGrantedSeat: granted ? writes / granted : 0 },
    });
  } finally {
    gw.child.kill("SIGTERM");
    hello.child.kill("SIGTERM");
  }
  for (const r of results) r.ceilingRatio = r.perSecond / (r.ceilingBeside ?? ceiling.perSecond);
  return results;
}

/** The join batches the gateway has sent and the joins in them, from its /metrics (join-batch.ts). */
async function joinBatches(url: string): Promise<{ count: number; sum: number }> {
  const metrics = await (await fetch(`${url}/metrics`)).text();
  const read = (name: string) => Number(new RegExp(`^${name} ([0-9.e+]+)$`, "m").exec(metrics)?.[1] ?? 0);
  return { count: read("gateway_queue_join_batch_size_count"), sum: read("gateway_queue_join_batch_size_sum") };
}

/** DynamoDB hold writes the gateway has made, from its /metrics. */
async function holdWrites(url: string): Promise<number> {
  const metrics = await (await fetch(`${url}/metrics`)).text();
  return [...metrics.matchAll(/^gateway_dynamodb_requests_total\{operation="hold",outcome="[^"]+"\} (\d+)/gm)].reduce(
    (n, m) => n + Number(m[1]),
    0,
  );
}

async function main(): Promise<void> {
  const env = z
    .object({
      REDIS_URL: z.string().optional(),
      DYNAMODB_ENDPOINT: z.string().optional(),
      BENCH_SECONDS: z.coerce.number().positive().default(5),
      BENCH_CONNECTIONS: z.coerce.number().int().positive().default(32),
      BENCH_FANS: z.coerce.number().int().positive().default(2_000),
      BENCH_ONLY: z.string().optional(),
      BENCH_WARMUP_SECONDS: z.coerce.number().min(0).default(2),
    })
    .parse(process.env);
  const redis = env.REDIS_URL ? undefined : await spawnRedis();
  const dynamo = env.DYNAMODB_ENDPOINT ? undefined : await spawnLocalDynamoDB({ port: 0 });
  try {
    const load = { connections: env.BENCH_CONNECTIONS, seconds: env.BENCH_SECONDS };
    const results = await benchGateway({
      redisUrl: env.REDIS_URL ?? redis!.url,
      dynamoEndpoint: env.DYNAMODB_ENDPOINT ?? dynamo!.endpoint,
      fans: env.BENCH_FANS,
      warmupSeconds: env.BENCH_WARMUP_SECONDS,
      ...(env.BENCH_ONLY ? { only: new RegExp(env.BENCH_ONLY, "i") } : {}),
      ...(redis?.child.pid ? { redisPid: redis.child.pid } : {}),
      ...load,
    });
    const rows = results
      .filter((r) => r.requests > 0)
      .map((r) => ({
        scenario: r.name,
        "req/s": Math.round(r.perSecond),
        "p50 ms": r.p50Ms.toFixed(2),
        "p99 ms": r.p99Ms.toFixed(2),
        "x ceiling": (r.ceilingRatio ?? 1).toFixed(3),
        "ceiling req/s": Math.round(r.ceilingBeside ?? r.perSecond),
        "CPU µs/req": r.cpuMicrosPerRequest === undefined ? "" : r.cpuMicrosPerRequest.toFixed(0),
        "Redis µs/req": r.redisCpuMicrosPerRequest === undefined ? "" : r.redisCpuMicrosPerRequest.toFixed(0),
        "bytes/resp": r.bytesPerRequest === undefined ? "" : Math.round(r.bytesPerRequest),
        statuses: JSON.stringify(r.statuses),
      }));
    console.log(
      `client: ${results[0]?.client ?? "?"} (1 thread, ${load.connections} connections, ${load.seconds} s per path)`,
    );
    console.table(rows);
    const sizes = results[1]?.extra;
    if (sizes) console.log(`section bodies on the wire (bytes): ${JSON.stringify(sizes)}`);
    const waiting = results.find((r) => r.name.startsWith("queue status poll, fan waiting"))?.extra;
    if (waiting) {
      console.log(
        `waiting fans' polls: ${waiting.answeredFromCache} answered from the line cache, ${waiting.answeredByRedis} by Redis`,
      );
    }
    for (const r of results.filter((row) => row.extra?.joinsPerBatch !== undefined && row.requests > 0)) {
      console.log(`${r.name}: ${r.extra?.joinBatches} join batches, ${r.extra?.joinsPerBatch} joins per batch`);
    }
    const holdExtra = results.at(-1)?.extra;
    if (holdExtra) {
      console.log(
        `contended holds: ${holdExtra.granted} granted, ${holdExtra.dynamoWrites} DynamoDB hold writes (${(holdExtra.writesPerGrantedSeat ?? 0).toFixed(2)} per granted seat)`,
      );
    }
    console.log(JSON.stringify({ bench: "gateway", connections: load.connections, seconds: load.seconds, results }));
  } finally {
    await redis?.close();
    await dynamo?.close();
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) await main();
