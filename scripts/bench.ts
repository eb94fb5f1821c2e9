/**
 * `npm run bench`: every benchmark in one process tree, as a table and one JSON line.
 *
 *   - HTTP (bench-gateway's pieces): the bare Hono hello-world ceiling, the section seat map, the
 *     queue status poll, contended holds (with DynamoDB hold writes per granted seat);
 *   - the sell-out of a BENCH_SELLOUT_SEATS-seat event with BENCH_SELLOUT_PLACES standing places
 *     by BENCH_SELLOUT_FANS admitted fans (hold then buy, through the gateway; every fourth fan
 *     asks for one or two standing places), beside the raw conditional-write rate of the same
 *     DynamoDB endpoint; every answer that is not a sale or a fair refusal (taken, sold out) is
 *     counted by status and code;
 *   - the raw Redis EVALSHA rate, beside the waiting-room join through the module;
 *   - memory: gateway RSS with BENCH_SSE open SSE streams; Redis bytes per waiting fan with
 *     BENCH_QUEUED fans queued (INFO memory before/after, joins through the module);
 *   - the DynamoDB units a sold seat costs, background included (scripts/bench-cost.ts).
 * With LOCAL_DYNAMODB_MODE=aws the local DynamoDB throttles and conflicts as DynamoDB does, and the
 * sell-out prints each partition's peak units/s against its limit.
 *
 * Knobs (environment): BENCH_SECONDS (5), BENCH_CONNECTIONS (32), BENCH_FANS (2000),
 * BENCH_SELLOUT_SEATS (10000), BENCH_SELLOUT_PLACES (5000), BENCH_SELLOUT_FANS (20000), BENCH_CONCURRENCY (64),
 * BENCH_ONLY (`sellout`: only the raw write rate and the sell-out),
 * BENCH_RAW_OPS (3000), BENCH_EVALSHA (40000), BENCH_SSE (10000), BENCH_QUEUED (100000).
 * REDIS_URL / DYNAMODB_ENDPOINT: use them instead of spawning (the memory figures then include
 * whatever else lives there).
 */
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { Agent, get } from "node:http";
import { cpus, totalmem } from "node:os";
import { setTimeout as sleep } from "node:timers/promises";
import { DeleteTableCommand } from "@aws-sdk/client-dynamodb";
import { BatchWriteCommand, DynamoDBDocumentClient, UpdateCommand } from "@aws-sdk/lib-dynamodb";
import { Redis } from "ioredis";
import { z } from "zod";
import { createDynamoClient } from "../src/dynamodb/client.js";
import { ensureTable } from "../src/dynamodb/table.js";
import { spawnLocalDynamoDB } from "../src/local/dynamodb.js";
import { fetchLocalDynamoReport, formatPartitionReport } from "../src/local/dynamodb-report.js";
import { spawnRedis } from "../src/local/redis.js";
import { createWaitingRoom } from "../src/waiting-room/index.js";
import { admitAll, benchGateway, putBenchEvent, startServer } from "./bench-gateway.js";
import { timed } from "./lib/in-flight.js";

const env = z
  .object({
    REDIS_URL: z.string().optional(),
    DYNAMODB_ENDPOINT: z.string().optional(),
    BENCH_SECONDS: z.coerce.number().positive().default(5),
    BENCH_CONNECTIONS: z.coerce.number().int().positive().default(32),
    BENCH_FANS: z.coerce.number().int().positive().default(2_000),
    BENCH_SELLOUT_SEATS: z.coerce.number().int().positive().default(10_000),
    BENCH_SELLOUT_FANS: z.coerce.number().int().positive().default(20_000),
    BENCH_SELLOUT_PLACES: z.coerce.number().int().nonnegative().default(5_000),
    BENCH_ONLY: z.enum(["sellout"]).optional(),
    BENCH_CONCURRENCY: z.coerce.number().int().positive().default(64),
    BENCH_RAW_OPS: z.coerce.number().int().positive().default(3_000),
    BENCH_EVALSHA: z.coerce.number().int().positive().default(40_000),
    BENCH_SSE: z.coerce.number().int().nonnegative().default(10_000),
    BENCH_QUEUED: z.coerce.number().int().nonnegative().default(100_000),
  })
  .parse(process.env);

interface Row {
  figure: string;
  value: number;
  unit: string;
  /** What the figure is measured against, and value / that. */
  ceiling?: string;
  ratio?: number;
  note?: string;
}

/** How many seats one fan of the sell-out tries before giving up (each try a random seat the map shows). */
const SEAT_TRIES = 6;

const rows: Row[] = [];
const step = (s: string) => process.stderr.write(`bench: ${s}\n`);

function rssOf(pid: number): number {
  const m = /^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return m ? Number(m[1]) * 1024 : Number.NaN;
}

async function usedMemory(redis: Redis): Promise<number> {
  const m = /^used_memory:(\d+)/m.exec(await redis.info("memory"));
  return Number(m?.[1] ?? Number.NaN);
}

const redisSpawned = env.REDIS_URL ? undefined : await spawnRedis();
const dynamoSpawned = env.DYNAMODB_ENDPOINT ? undefined : await spawnLocalDynamoDB({ port: 0 });
const redisUrl = env.REDIS_URL ?? redisSpawned!.url;
const dynamoEndpoint = env.DYNAMODB_ENDPOINT ?? dynamoSpawned!.endpoint;
const totalStarted = performance.now();

try {
  // ---- 1. HTTP: ceiling, seat map, status poll, join, shield refusal, contended holds ----
  step(`gateway HTTP (${env.BENCH_SECONDS} s each, ${env.BENCH_CONNECTIONS} connections)`);
  const http =
    env.BENCH_ONLY === "sellout"
      ? []
      : await benchGateway({
          redisUrl,
          dynamoEndpoint,
          seconds: env.BENCH_SECONDS,
          connections: env.BENCH_CONNECTIONS,
          fans: env.BENCH_FANS,
          ...(redisSpawned?.child.pid ? { redisPid: redisSpawned.child.pid } : {}),
        });
  const ceiling = http[0];
  for (const r of http) {
    rows.push({
      figure: r.name,
      value: Math.round(r.perSecond),
      unit: "req/s",
      ...(r === ceiling ? {} : { ceiling: "hello world", ratio: r.ceilingRatio ?? 0 }),
      note: `p50 ${r.p50Ms.toFixed(1)} ms, p99 ${r.p99Ms.toFixed(1)} ms${
        r.cpuMicrosPerRequest === undefined ? "" : `, ${r.cpuMicrosPerRequest.toFixed(0)} CPU µs/req`
      }${
        r.redisCpuMicrosPerRequest === undefined ? "" : ` (+${r.redisCpuMicrosPerRequest.toFixed(0)} in redis-server)`
      }${
        r.extra?.granted !== undefined
          ? `; ${r.extra.granted} granted, ${(r.extra.writesPerGrantedSeat ?? 0).toFixed(2)} DynamoDB writes per granted seat`
          : r.extra?.bytes1000Br !== undefined
            ? `; 1,000 seats on the wire: ${r.extra.bytes1000Identity} B plain, ${r.extra.bytes1000Gzip} B gzip, ${r.extra.bytes1000Br} B br; 2,000 seats: ${r.extra.bytes2000Gzip} B gzip, ${r.extra.bytes2000Br} B br`
            : ""
      }`,
    });
  }

  // ---- 2. raw conditional-write rate of the DynamoDB endpoint ----
  step(`raw conditional UpdateItem (${env.BENCH_RAW_OPS} ops, ${env.BENCH_CONCURRENCY} in flight)`);
  const dynamo = createDynamoClient({ endpoint: dynamoEndpoint, region: "us-east-1", maxSockets: 256 });
  const doc = DynamoDBDocumentClient.from(dynamo);
  const rawTable = `bench_raw_${Date.now()}`;
  await ensureTable(dynamo, rawTable);
  const rawKeys = Array.from({ length: env.BENCH_RAW_OPS }, (_, i) => ({ PK: `RAW#${i}`, SK: "RAW" }));
  for (let i = 0; i < rawKeys.length; i += 25) {
    await doc.send(
      new BatchWriteCommand({
        RequestItems: {
          [rawTable]: rawKeys.slice(i, i + 25).map((k) => ({ PutRequest: { Item: { ...k, status: "available" } } })),
        },
      }),
    );
  }
  const rawMs = await timed(rawKeys.length, env.BENCH_CONCURRENCY, (i) =>
    doc.send(
      new UpdateCommand({
        TableName: rawTable,
        Key: rawKeys[i]!,
        UpdateExpression: "SET #s = :held, holder = :who",
        ConditionExpression: "attribute_exists(PK) AND #s = :available",
        ExpressionAttributeNames: { "#s": "status" },
        ExpressionAttributeValues: { ":held": "held", ":available": "available", ":who": `f${i}` },
      }),
    ),
  );
  const rawRate = (rawKeys.length / rawMs) * 1000;
  await dynamo.send(new DeleteTableCommand({ TableName: rawTable })).catch(() => undefined);
  rows.push({ figure: "raw conditional UpdateItem (distinct items)", value: Math.round(rawRate), unit: "writes/s" });

  // ---- 3. sell-out through the gateway; then SSE memory on the same gateway ----
  const gw = await startServer("gateway", {
    REDIS_URL: redisUrl,
    DYNAMODB_ENDPOINT: dynamoEndpoint,
    DYNAMODB_TABLE: `bench_sellout_${Date.now()}`,
  });
  try {
    const seats = env.BENCH_SELLOUT_SEATS;
    const perRow = 50;
    const rowsPerSection = 40;
    const sectionCount = Math.ceil(seats / (perRow * rowsPerSection));
    const sections = Array.from({ length: sectionCount }, (_, s) => {
      const inSection = Math.min(perRow * rowsPerSection, seats - s * perRow * rowsPerSection);
      return { id: `S${s}`, tier: "T", price: 5000, rows: Math.ceil(inSection / perRow), seatsPerRow: perRow };
    });
    const seatIds = sections.flatMap((s) =>
      Array.from(
        { length: s.rows * s.seatsPerRow },
        (_, k) => `${s.id}-${Math.floor(k / perRow) + 1}-${(k % perRow) + 1}`,
      ),
    );
    const eventId = `sellout${Date.now()}`;
    step(`sell-out: creating ${seatIds.length} seats`);
    const places = env.BENCH_SELLOUT_PLACES;
    await putBenchEvent(gw.url, eventId, {
      name: "Sell-out",
      sections,
      admitPerSecond: 100_000,
      ...(places > 0 ? { generalAdmission: [{ id: "GA", tier: "Standing", price: 3000, capacity: places }] } : {}),
    });

    step(`sell-out: admitting ${env.BENCH_SELLOUT_FANS} fans`);
    const admitStarted = performance.now();
    const fanIds = Array.from({ length: env.BENCH_SELLOUT_FANS }, (_, i) => `fan${i}`);
    const { accessTokens } = await admitAll(gw.url, eventId, fanIds, 256);
    const admitSeconds = (performance.now() - admitStarted) / 1000;
    rows.push({
      figure: `admit ${accessTokens.length} fans (join + polls)`,
      value: Math.round(accessTokens.length / admitSeconds),
      unit: "fans/s",
      note: `${admitSeconds.toFixed(1)} s`,
    });

    step("sell-out: fans hold one seat each and buy it");
    // The local DynamoDB's per-partition counts start here (aws mode only: LOCAL_DYNAMODB_MODE=aws).
    const partitions = dynamoSpawned ? await fetchLocalDynamoReport(dynamoEndpoint, { reset: true }) : undefined;
    const before = await (await fetch(`${gw.url}/metrics`)).text();
    // The fans' view of the map: what they have seen taken is gone (a perfectly fresh seat map).
    const believed = new Set(seatIds);
    let sold = 0;
    let conflicts = 0;
    let lastSaleAt = 0;
    const agent = new Agent({ keepAlive: true, maxSockets: env.BENCH_CONCURRENCY });
    const post = (path: string, token: string, body: unknown, headers: Record<string, string> = {}) =>
      fetch(`${gw.url}${path}`, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${token}`, ...headers },
        body: JSON.stringify(body),
      }).then(async (r) => ({
        status: r.status,
        body: (await r.json()) as { holdId?: string; error?: { code?: string; message?: string } },
      }));
    const sellStarted = performance.now();
    let placesSold = 0;
    let soldOut = 0;
    // Answers that are neither a sale nor a fair refusal (a seat taken, places sold out), by status
    // and code: a throttled or conflicting DynamoDB the gateway could not ride out shows here.
    const failures = new Map<string, number>();
    // The message too: a 503 `unavailable` is either contention past every retry or DynamoDB
    // (or Redis) out of reach, and only the message says which.
    const failed = (what: string, r: { status: number; body: { error?: { code?: string; message?: string } } }) => {
      const k = `${what} ${r.status} ${r.body.error?.code ?? ""} ${r.body.error?.message?.slice(0, 80) ?? ""}`.trim();
      failures.set(k, (failures.get(k) ?? 0) + 1);
    };
    const buy = async (i: number, token: string, holdId: string) => {
      const p = await post(
        `/v1/events/${eventId}/holds/${holdId}/purchase`,
        token,
        { paymentToken: "tok_ok" },
        { "idempotency-key": `sell-${i}` },
      );
      // 202: accepted, the charge still settling (the saga finishes it): not a failure.
      if (p.status !== 201 && p.status !== 202) failed("purchase", p);
      return p.status === 201;
    };
    await timed(accessTokens.length, env.BENCH_CONCURRENCY, async (i) => {
      const token = accessTokens[i]!;
      if (places > 0 && i % 4 === 3) {
        const quantity = 1 + (i % 8 === 7 ? 1 : 0);
        const h = await post(`/v1/events/${eventId}/holds`, token, { generalAdmission: { id: "GA", quantity } });
        // Sold out: the gateway answers 409 seat_unavailable (or insufficient_quantity) for places.
        const code = h.body.error?.code;
        if (h.status === 409 && (code === "insufficient_quantity" || code === "seat_unavailable")) {
          soldOut++;
          return;
        }
        if (h.status !== 201 || !h.body.holdId) return failed("hold GA", h);
        if (await buy(i, token, h.body.holdId)) {
          placesSold += quantity;
          lastSaleAt = performance.now();
        }
        return;
      }
      // A fan tries again while the map shows seats (up to SEAT_TRIES): with three tries the last
      // fans' all met taken seats and 16 of 10,000 stayed unsold.
      for (let attempt = 0; attempt < SEAT_TRIES && believed.size > 0; attempt++) {
        const pool = [...believed.values()];
        const seat = pool[Math.floor(Math.random() * Math.min(pool.length, 500))]!;
        const h = await post(`/v1/events/${eventId}/holds`, token, { seats: [seat] });
        believed.delete(seat);
        if (h.status === 409 && h.body.error?.code === "seat_unavailable") {
          conflicts++;
          continue;
        }
        if (h.status !== 201 || !h.body.holdId) return failed("hold seat", h);
        if (await buy(i, token, h.body.holdId)) {
          sold++;
          lastSaleAt = performance.now();
        }
        return;
      }
    });
    agent.destroy();
    const sellSeconds = ((lastSaleAt || performance.now()) - sellStarted) / 1000;
    const after = await (await fetch(`${gw.url}/metrics`)).text();
    const sum = (text: string, re: RegExp) => [...text.matchAll(re)].reduce((n, m) => n + Number(m[1]), 0);
    const holdWritesRe = /^gateway_dynamodb_requests_total\{operation="hold"[^}]*\} (\d+)/gm;
    const holdWrites = sum(after, holdWritesRe) - sum(before, holdWritesRe);
    const claimsPerSecond = sold / sellSeconds;
    rows.push({
      figure: `sell-out: ${seatIds.length} seats, ${accessTokens.length} fans`,
      value: Number(sellSeconds.toFixed(2)),
      unit: "s",
      note: `${sold} sold, ${conflicts} conflicts (409), ${(holdWrites / Math.max(1, sold)).toFixed(2)} DynamoDB hold writes per seat sold`,
    });
    if (places > 0) {
      rows.push({
        figure: `sell-out: ${places} standing places`,
        value: placesSold,
        unit: "places sold",
        note: `${soldOut} holds refused as sold out`,
      });
    }
    rows.push({
      figure: "sell-out: requests failed (not a sale, a taken seat or sold out)",
      value: [...failures.values()].reduce((a, b) => a + b, 0),
      unit: "requests",
      note: failures.size > 0 ? [...failures].map(([k, n]) => `${k}: ${n}`).join(", ") : "none",
    });
    if (partitions?.mode === "aws") {
      const report = await fetchLocalDynamoReport(dynamoEndpoint);
      process.stderr.write(
        `\nsell-out, per partition (aws mode), the hottest first:\n${formatPartitionReport(report, { top: 12 })}\n\n`,
      );
      const throttled = report.partitions.reduce((n, p) => n + p.throttledRequests, 0);
      const conflicts = report.partitions.reduce((n, p) => n + p.conflicts, 0);
      rows.push({ figure: "sell-out: DynamoDB requests throttled (aws mode)", value: throttled, unit: "requests" });
      rows.push({ figure: "sell-out: DynamoDB transaction conflicts (aws mode)", value: conflicts, unit: "requests" });
    }
    rows.push({
      figure: "sell-out claims (hold + buy per seat)",
      value: Math.round(claimsPerSecond),
      unit: "seats/s",
      ceiling: "raw conditional UpdateItem",
      ratio: claimsPerSecond / rawRate,
    });

    if (env.BENCH_SSE > 0 && env.BENCH_ONLY !== "sellout") {
      step(`memory: ${env.BENCH_SSE} SSE streams`);
      const pid = gw.child.pid!;
      const rssBefore = rssOf(pid);
      const sseAgent = new Agent({ keepAlive: false, maxSockets: Number.POSITIVE_INFINITY });
      const streams: import("node:http").ClientRequest[] = [];
      // In batches: ten thousand connects at once would overflow the listen backlog.
      const open = () =>
        new Promise<void>((resolve, reject) => {
          const req = get(`${gw.url}/v1/events/${eventId}/seatmap/stream`, { agent: sseAgent }, (res) => {
            res.resume();
            if (res.statusCode === 200) resolve();
            else reject(new Error(`SSE answered ${res.statusCode}`));
          });
          req.on("error", (err) => reject(err));
          streams.push(req);
        });
      for (let opened = 0; opened < env.BENCH_SSE; opened += 500) {
        await Promise.all(Array.from({ length: Math.min(500, env.BENCH_SSE - opened) }, open));
      }
      // A second for the streams to settle (their first event written) before the RSS is read.
      await sleep(1_000);
      const rssWith = rssOf(pid);
      for (const s of streams) s.destroy();
      sseAgent.destroy();
      rows.push({
        figure: `gateway RSS with ${env.BENCH_SSE} open SSE streams`,
        value: Number((rssWith / 2 ** 20).toFixed(1)),
        unit: "MiB",
        note: `${(rssBefore / 2 ** 20).toFixed(1)} MiB before; ${((rssWith - rssBefore) / env.BENCH_SSE / 1024).toFixed(1)} KiB per stream`,
      });
    }
  } finally {
    gw.child.kill("SIGTERM");
    dynamo.destroy();
  }

  if (env.BENCH_ONLY !== "sellout") await redisAndCost();
  async function redisAndCost(): Promise<void> {
    // ---- 4. Redis: raw EVALSHA, module join, bytes per waiting fan ----
    step(`redis: EVALSHA x ${env.BENCH_EVALSHA}, ${env.BENCH_QUEUED} fans queued`);
    // A Redis of its own, so INFO memory counts only the waiting room.
    const memRedis = env.REDIS_URL ? undefined : await spawnRedis();
    const memUrl = memRedis?.url ?? redisUrl;
    const clients = Array.from({ length: 4 }, () => new Redis(memUrl));
    try {
      const c0 = clients[0]!;
      const sha = String(await c0.script("LOAD", "return 1"));
      const evalMs = await timed(env.BENCH_EVALSHA, env.BENCH_CONCURRENCY, (i) =>
        clients[i % clients.length]!.evalsha(sha, 1, "bench:trivial"),
      );
      const evalRate = (env.BENCH_EVALSHA / evalMs) * 1000;
      rows.push({ figure: "raw Redis EVALSHA (return 1)", value: Math.round(evalRate), unit: "calls/s" });

      if (env.BENCH_QUEUED > 0) {
        const rooms = clients.map((redis) => createWaitingRoom({ redis, secret: randomBytes(32).toString("hex") }));
        const eventId = `mem${Date.now()}`;
        const configured = await rooms[0]!.configure(eventId, {
          onSaleAt: Date.now() - 1_000,
          admitPerSecond: 0,
          maxActive: 1,
          sessionSeconds: 900,
        });
        if (!configured.ok) throw new Error(`configure: ${JSON.stringify(configured)}`);
        const memBefore = await usedMemory(c0);
        const joinMs = await timed(env.BENCH_QUEUED, env.BENCH_CONCURRENCY * 4, async (i) => {
          const r = await rooms[i % rooms.length]!.join(eventId, `fan-${i}`);
          if (!r.ok) throw new Error(`join: ${JSON.stringify(r)}`);
        });
        const memAfter = await usedMemory(c0);
        const joinRate = (env.BENCH_QUEUED / joinMs) * 1000;
        rows.push({
          figure: "waiting-room join (module)",
          value: Math.round(joinRate),
          unit: "joins/s",
          ceiling: "raw Redis EVALSHA",
          ratio: joinRate / evalRate,
        });
        rows.push({
          figure: `Redis bytes per waiting fan (${env.BENCH_QUEUED} queued)`,
          value: Math.round((memAfter - memBefore) / env.BENCH_QUEUED),
          unit: "bytes",
          note: `used_memory ${(memBefore / 2 ** 20).toFixed(1)} -> ${(memAfter / 2 ** 20).toFixed(1)} MiB`,
        });
        await rooms[0]!.remove(eventId);
      }
    } finally {
      for (const c of clients) c.disconnect();
      await memRedis?.close();
    }

    // ---- 6. the cost of a sold seat (scripts/bench-cost.ts, its own Redis and DynamoDB) ----
    step("cost: DynamoDB units per sold seat, per operation");
    const cost = await new Promise<string>((resolve, reject) => {
      const child = spawn(process.execPath, ["--import", "tsx", "scripts/bench-cost.ts"], {
        env: { ...process.env, COST_JSON: "1", COST_IDLE_SECONDS: "10" },
        stdio: ["ignore", "pipe", "inherit"],
      });
      let out = "";
      child.stdout.on("data", (b: Buffer) => {
        out += b.toString();
      });
      child.once("exit", (code) => (code === 0 ? resolve(out) : reject(new Error(`bench-cost exited with ${code}`))));
    });
    const costs = JSON.parse(cost.trim().split("\n").pop()!) as {
      writeUnitsPerSeat: number;
      readUnitsPerSeat: number;
      indexWriteUnitsPerSeat: number;
      phases: { phase: string; seconds: number; sold: number; total: { readUnits: number; writeUnits: number } }[];
    };
    const idle = costs.phases.find((p) => p.phase.startsWith("idle"));
    rows.push({
      figure: "cost of a sold seat: write units",
      value: Number(costs.writeUnitsPerSeat.toFixed(2)),
      unit: "WCU",
      note: `${(costs.writeUnitsPerSeat - costs.indexWriteUnitsPerSeat).toFixed(2)} table + ${costs.indexWriteUnitsPerSeat.toFixed(2)} index (npm run bench:cost has the table per operation)`,
    });
    rows.push({
      figure: "cost of a sold seat: read units",
      value: Number(costs.readUnitsPerSeat.toFixed(2)),
      unit: "RCU",
    });
    if (idle) {
      rows.push({
        figure: "background reads of an idle event",
        value: Number((idle.total.readUnits / idle.seconds).toFixed(2)),
        unit: "RCU/s",
        note: `${idle.seconds} s right after its sale, writes ${(idle.total.writeUnits / idle.seconds).toFixed(2)}/s`,
      });
    }
  }

  // ---- print ----
  const statusRow = rows.find((r) => r.figure === "queue status poll");
  const evalRow = rows.find((r) => r.figure.startsWith("raw Redis EVALSHA"));
  if (statusRow && evalRow) statusRow.note += `; ${(statusRow.value / evalRow.value).toFixed(3)} x raw EVALSHA`;
  const totalSeconds = (performance.now() - totalStarted) / 1000;
  const w = Math.max(...rows.map((r) => r.figure.length));
  const lines = [
    `npm run bench: ${cpus().length} cpus, ${(totalmem() / 2 ** 30).toFixed(1)} GiB, node ${process.version}, ${totalSeconds.toFixed(0)} s`,
    `${"figure".padEnd(w)}  ${"value".padStart(10)}  ${"unit".padEnd(9)}  ${"x ceiling".padStart(9)}  note`,
    ...rows.map(
      (r) =>
        `${r.figure.padEnd(w)}  ${String(r.value).padStart(10)}  ${r.unit.padEnd(9)}  ${(r.ratio === undefined ? "" : r.ratio.toFixed(3)).padStart(9)}  ${r.ceiling ? `(vs ${r.ceiling}) ` : ""}${r.note ?? ""}`,
    ),
  ];
  console.log(lines.join("\n"));
  console.log(
    JSON.stringify({
      bench: "all",
      machine: { cpus: cpus().length, memoryGiB: Number((totalmem() / 2 ** 30).toFixed(1)), node: process.version },
      knobs: Object.fromEntries(Object.entries(env).filter(([k]) => k.startsWith("BENCH_"))),
      seconds: Math.round(totalSeconds),
      results: rows.map((r) => ({ ...r, ...(r.ratio === undefined ? {} : { ratio: Number(r.ratio.toFixed(3)) }) })),
    }),
  );
} finally {
  await redisSpawned?.close();
  await dynamoSpawned?.close();
}
