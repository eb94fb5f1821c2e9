/**
 * The server side of `npm run bench:gateway`, in its own process so client and server each get
 * a core: `hello` is a bare Hono hello-world (the ceiling); `gateway` is the full gateway with
 * rate limits and seat-map stream caps off. Prints one JSON line with `listening` when ready.
 * TOKEN_ALG=ES256|EdDSA (inherited from `npm run bench:gateway`'s environment) signs tokens with
 * a key generated here, to measure what a key set costs the status poll and the claims.
 */
import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import { serve } from "@hono/node-server";
import { Hono } from "hono";
import pino from "pino";
import { z } from "zod";

const env = z
  .object({
    MODE: z.enum(["hello", "gateway"]),
    REDIS_URL: z.string().optional(),
    DYNAMODB_ENDPOINT: z.string().optional(),
    DYNAMODB_TABLE: z.string().default("bench"),
    ADMIN_TOKEN: z.string().default("bench-operator-token-000"),
    GATEWAY_SECRET: z.string().default("bench-gateway-secret-0123456789abcdef"),
    TOKEN_ALG: z.enum(["HS256", "ES256", "EdDSA"]).default("HS256"),
  })
  .parse(process.env);

let server: Server;
if (env.MODE === "hello") {
  // The ceiling: a bare Hono hello-world on @hono/node-server's own serve().
  const app = new Hono().get("/hello", (c) => c.json({ hello: "world" }));
  server = await new Promise<Server>((resolve) => {
    const s = serve({ fetch: app.fetch, port: 0, hostname: "127.0.0.1" }, () => resolve(s as Server));
  });
} else {
  // BENCH_GATEWAY_BUILD=dist: the gateway as the image runs it (tsc's output in dist/, `node
  // dist/main.js`); otherwise as `npm start` runs it (src/ through tsx, which adds a __name call for
  // every named closure it creates).
  const root = process.env.BENCH_GATEWAY_BUILD === "dist" ? "../dist" : "../src";
  const { ensureTable } = (await import(`${root}/dynamodb/table.js`)) as typeof import("../src/dynamodb/table.js");
  const { buildApp } = (await import(`${root}/http/app.js`)) as typeof import("../src/http/app.js");
  const { listenApp } = (await import(`${root}/http/serve.js`)) as typeof import("../src/http/serve.js");
  const { createMetrics } = (await import(`${root}/metrics.js`)) as typeof import("../src/metrics.js");
  const { buildServices } = (await import(`${root}/services.js`)) as typeof import("../src/services.js");
  const { generateSigningKey } = (await import(
    `${root}/waiting-room/index.js`
  )) as typeof import("../src/waiting-room/index.js");
  // REDIS_FUNCTIONS=false: the scripts through EVALSHA (as src/main.ts reads it), for a before/after.
  const { useRedisFunctions } = (await import(`${root}/redis/scripts.js`)) as typeof import("../src/redis/scripts.js");
  useRedisFunctions(!["false", "0", "no"].includes(process.env.REDIS_FUNCTIONS ?? "true"));
  const services = buildServices({
    redisUrl: env.REDIS_URL!,
    redisOptions: { enableAutoPipelining: true },
    // LINE_CACHE=off: every poll asks Redis (the line before its cache, for a before/after).
    ...(process.env.LINE_CACHE === "off" ? { lineCache: false } : {}),
    // WAITING_ROOM_CLAIMS=1 (or shards, with WAITING_ROOM_FAN_SHARDS=K): the rooms as a gateway with
    // those settings creates them.
    ...(["true", "1", "yes"].includes(process.env.WAITING_ROOM_CLAIMS ?? "") ? { claims: true } : {}),
    ...(process.env.WAITING_ROOM_CLAIMS === "shards" ? { claims: "shards" as const } : {}),
    ...(Number(process.env.WAITING_ROOM_FAN_SHARDS ?? 0) > 0
      ? { fanShards: Number(process.env.WAITING_ROOM_FAN_SHARDS) }
      : {}),
    dynamodb: { endpoint: env.DYNAMODB_ENDPOINT, region: "us-east-1", table: env.DYNAMODB_TABLE },
    logger: pino({ level: "warn" }),
    metrics: createMetrics(),
    adminToken: env.ADMIN_TOKEN,
    gatewaySecret: env.GATEWAY_SECRET,
    ...(env.TOKEN_ALG === "HS256" ? {} : { tokenSigningKeys: [generateSigningKey(env.TOKEN_ALG)] }),
    // One host is every client: the per-IP limits are off, and the stream caps too (the memory
    // figure opens BENCH_SSE streams from 127.0.0.1).
    limits: {
      ratePerIp: 0,
      ratePerFan: 0,
      ratePerOperatorIp: 0,
      maxStreams: Number.MAX_SAFE_INTEGER,
      maxStreamsPerIp: Number.MAX_SAFE_INTEGER,
    },
  });
  await ensureTable(services.clients.dynamo, env.DYNAMODB_TABLE);
  // Served as src/main.ts serves it: listenApp, with the app's fast path.
  const app = buildApp(services);
  server = (await listenApp({ fetch: app.fetch, fastPath: app.fastPath, port: 0, host: "127.0.0.1" })).server;
}
process.stdout.write(`${JSON.stringify({ listening: (server.address() as AddressInfo).port })}\n`);
process.on("SIGTERM", () => server.close(() => process.exit(0)));
