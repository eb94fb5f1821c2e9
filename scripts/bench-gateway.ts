/**
 * Gateway throughput: the section seat map, the queue status poll and contended holds, each
 * beside a bare Hono hello-world measured by the same client with the same connections in the
 * same run. Server and client run in separate processes (one core each on a 2-core machine).
 *
 *   npm run bench:gateway                 # spawns its own redis-server and local DynamoDB
 *   BENCH_SECONDS=10 BENCH_CONNECTIONS=64 npm run bench:gateway
 *
 * Prints a table, then one JSON line.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { pathToFileURL } from "node:url";
import { z } from "zod";
import { spawnLocalDynamoDB } from "../src/local/dynamodb.js";
import { spawnRedis } from "../src/local/redis.js";
import { type LoadResult, runLoad } from "./lib/http-load.js";

export const ADMIN = "bench-operator-token-000";

/** Starts scripts/bench-server.ts in a child process; resolves with its URL once it listens. */
export async function startServer(
  mode: "hello" | "gateway",
  extra: Record<string, string>,
): Promise<{ url: string; child: ChildProcess }> {
  const child = spawn(process.execPath, ["--import", "tsx", "scripts/bench-server.ts"], {
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
  event: { name: string; sections: unknown[]; admitPerSecond: number },
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
      generalAdmission: [],
      waitingRoom: { admitPerSecond: event.admitPerSecond, maxActive: 1_000_000, sessionSeconds: 3600 },
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

export type GatewayBenchRow = LoadResult & { ceilingRatio?: number; extra?: Record<string, number> };

export interface GatewayBenchOptions {
  redisUrl: string;
  dynamoEndpoint: string;
  seconds: number;
  connections: number;
  fans: number;
}

/**
 * The hello-world ceiling, then the section seat map, the queue status poll and contended holds
 * against a gateway child process on the given stores. Rows in that order, each with its ratio
 * to the ceiling; the holds row carries DynamoDB writes per granted seat in `extra`.
 */
export async function benchGateway(options: GatewayBenchOptions): Promise<GatewayBenchRow[]> {
  const { redisUrl, dynamoEndpoint } = options;
  const load = { connections: options.connections, seconds: options.seconds };
  const results: GatewayBenchRow[] = [];
  const hello = await startServer("hello", {});
  const ceiling = await runLoad({
    ...load,
    name: "hello world (ceiling)",
    baseUrl: hello.url,
    next: () => ({ path: "/hello" }),
  });
  hello.child.kill("SIGTERM");
  results.push(ceiling);

  const gw = await startServer("gateway", {
    REDIS_URL: redisUrl,
    DYNAMODB_ENDPOINT: dynamoEndpoint,
    DYNAMODB_TABLE: `bench_${Date.now()}`,
  });
  try {
    const eventId = `bench${Date.now()}`;
    await putBenchEvent(gw.url, eventId, {
      name: "Bench",
      sections: [
        { id: "A", tier: "Floor", price: 10000, rows: 20, seatsPerRow: 50 },
        { id: "HOT", tier: "Front", price: 50000, rows: 1, seatsPerRow: 20 },
      ],
      admitPerSecond: 50_000,
    });
    const fanIds = Array.from({ length: options.fans }, (_, i) => `fan${i}`);
    const { queueTokens, accessTokens } = await admitAll(gw.url, eventId, fanIds, 200);

    results.push(
      await runLoad({
        ...load,
        name: "section seat map (1,000 seats)",
        baseUrl: gw.url,
        next: () => ({ path: `/v1/events/${eventId}/sections/A/seats` }),
      }),
    );
    results.push(
      await runLoad({
        ...load,
        name: "queue status poll",
        baseUrl: gw.url,
        next: (i) => ({
          path: `/v1/events/${eventId}/queue/status`,
          headers: { authorization: `Bearer ${queueTokens[i % queueTokens.length]}` },
        }),
      }),
    );
    const holds = await runLoad({
      ...load,
      name: "contended holds (20 hot seats)",
      baseUrl: gw.url,
      next: (i) => ({
        method: "POST",
        path: `/v1/events/${eventId}/holds`,
        headers: { authorization: `Bearer ${accessTokens[i % accessTokens.length]}` },
        body: JSON.stringify({ seats: [`HOT-1-${(i % 20) + 1}`] }),
      }),
    });
    const metrics = await (await fetch(`${gw.url}/metrics`)).text();
    const sum = (re: RegExp) => [...metrics.matchAll(re)].reduce((n, m) => n + Number(m[1]), 0);
    const writes = sum(/^gateway_dynamodb_requests_total\{operation="hold:[^"]+",outcome="[^"]+"\} (\d+)/gm);
    const granted = holds.statuses["201"] ?? 0;
    results.push({
      ...holds,
      extra: { granted, dynamoWrites: writes, writesPerGrantedSeat: granted ? writes / granted : 0 },
    });
  } finally {
    gw.child.kill("SIGTERM");
  }
  for (const r of results) r.ceilingRatio = r.perSecond / ceiling.perSecond;
  return results;
}

async function main(): Promise<void> {
  const env = z
    .object({
      REDIS_URL: z.string().optional(),
      DYNAMODB_ENDPOINT: z.string().optional(),
      BENCH_SECONDS: z.coerce.number().positive().default(5),
      BENCH_CONNECTIONS: z.coerce.number().int().positive().default(32),
      BENCH_FANS: z.coerce.number().int().positive().default(2_000),
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
      ...load,
    });
    const rows = results.map((r) => ({
      scenario: r.name,
      "req/s": Math.round(r.perSecond),
      "p50 ms": r.p50Ms.toFixed(2),
      "p99 ms": r.p99Ms.toFixed(2),
      "x ceiling": (r.ceilingRatio ?? 1).toFixed(3),
      statuses: JSON.stringify(r.statuses),
    }));
    console.table(rows);
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
