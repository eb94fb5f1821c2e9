/**
 * Builds the real gateway app in-process (real Redis, real DynamoDB endpoint, a table of its
 * own) and drives the fan journey through HTTP. Tests that need real sockets serve it on a port.
 */
import { randomUUID } from "node:crypto";
import pino from "pino";
import { inject } from "vitest";
import { createDynamoClient } from "../../src/dynamodb/client.js";
import { ensureTable } from "../../src/dynamodb/table.js";
import { derivedWebhookSecret } from "../../src/gateway.js";
import { buildApp } from "../../src/http/app.js";
import type { GatewayLimits } from "../../src/http/context.js";
import { listenApp } from "../../src/http/serve.js";
import type { EventInput } from "../../src/inventory/index.js";
import { createMetrics } from "../../src/metrics.js";
import { signWebhookEvent, WEBHOOK_SIGNATURE_HEADER, type WebhookEvent } from "../../src/payments/webhook.js";
import { buildServices, type Services, type ServicesConfig } from "../../src/services.js";

export const ADMIN_TOKEN = "test-operator-token-0123456789";
export const SECRET = "test-gateway-secret-0123456789-abcdefghijklmnop";

export interface Gateway {
  app: ReturnType<typeof buildApp>;
  /** Every service, the inventory included (tests read the store through it). */
  deps: Services;
  request(path: string, init?: RequestInit & { json?: unknown; token?: string }): Promise<Response>;
  close(): Promise<void>;
}

export function uniqueId(prefix = "e"): string {
  return `${prefix}${randomUUID().replaceAll("-", "").slice(0, 12)}`;
}

export async function createTable(): Promise<string> {
  const tableName = `gw_${uniqueId("t")}`;
  const dynamo = createDynamoClient({ endpoint: inject("dynamoEndpoint"), region: "us-east-1" });
  await ensureTable(dynamo, tableName);
  dynamo.destroy();
  return tableName;
}

export async function startGateway(options: {
  tableName: string;
  limits?: Partial<GatewayLimits>;
  dynamoEndpoint?: string;
  paymentTimeoutMs?: number;
  /** Runs the BullMQ queues and workers (sweeper, reconciler, ...) in this process too. */
  workers?: boolean;
  /** Simulated provider webhooks are delivered to this gateway's webhook route. */
  deliverWebhooks?: boolean;
  /** A Redis of the test's own (one it may kill and restart); default inject("redisUrl"). */
  redisUrl?: string;
  /** Where the simulated provider keeps its ledger (PAYMENT_REDIS_URL); default the gateway's Redis. */
  paymentRedisUrl?: string;
  /** The hot-seat shield's lease; default the DynamoDB request timeout (one attempt). */
  shieldLeaseMs?: number;
  /** The in-memory section pages' knobs (src/seatmap/pages.ts). */
  sectionPages?: ServicesConfig["sectionPages"];
  /** ADMIN_TOKENS: named operator tokens besides ADMIN_TOKEN. */
  operatorTokens?: ServicesConfig["operatorTokens"];
  /** INVITE_SECRET / INVITE_PUBLIC_KEY: what checks invite tokens. */
  invites?: ServicesConfig["invites"];
  /** NOTIFY_*: the seats-back webhook (src/notify/); off by default. */
  notify?: ServicesConfig["notify"];
  /** false: every queue poll asks Redis (src/waiting-room/line-view.ts); default on, as in production. */
  lineCache?: boolean;
}): Promise<Gateway> {
  const requestTimeoutMs = 10_000;
  let app: ReturnType<typeof buildApp> | undefined;
  const services = buildServices({
    ...testServicesConfig({
      tableName: options.tableName,
      redisUrl: options.redisUrl ?? inject("redisUrl"),
      ...(options.dynamoEndpoint ? { dynamoEndpoint: options.dynamoEndpoint } : {}),
      ...(options.paymentTimeoutMs ? { paymentTimeoutMs: options.paymentTimeoutMs } : {}),
    }),
    // As src/main.ts builds it: auto-pipelining on, so the tests run the command path production
    // runs (with the offline queue ioredis defaults to).
    redisOptions: { maxRetriesPerRequest: 1, enableAutoPipelining: true },
    ...(options.paymentRedisUrl ? { paymentRedisUrl: options.paymentRedisUrl } : {}),
    shieldLeaseMs: options.shieldLeaseMs ?? requestTimeoutMs,
    ...(options.sectionPages ? { sectionPages: options.sectionPages } : {}),
    ...(options.operatorTokens ? { operatorTokens: options.operatorTokens } : {}),
    ...(options.invites ? { invites: options.invites } : {}),
    ...(options.notify ? { notify: options.notify } : {}),
    ...(options.lineCache === false ? { lineCache: false } : {}),
    // TEST_FAN_SHARDS=K: the rooms these gateways create keep their heartbeats in K fan shards
    // (WAITING_ROOM_FAN_SHARDS), to run a suite in that mode, as test/waiting-room/helpers.ts does.
    ...(Number(process.env.TEST_FAN_SHARDS ?? 0) > 0 ? { fanShards: Number(process.env.TEST_FAN_SHARDS) } : {}),
    // TEST_LINE_CLAIMS=1: the rooms admit by claims (WAITING_ROOM_CLAIMS); =shards (with
    // TEST_FAN_SHARDS): their records live on the fan shards, as test/waiting-room/helpers.ts
    ...(process.env.TEST_LINE_CLAIMS === "1" ? { claims: true } : {}),
    ...(process.env.TEST_LINE_CLAIMS === "shards" && Number(process.env.TEST_FAN_SHARDS ?? 0) > 0
      ? { claims: "shards" as const }
      : {}),
    limits: { ratePerIp: 0, ratePerFan: 0, ratePerOperatorIp: 0, ...options.limits },
    queues: options.workers ?? false,
    ...(options.deliverWebhooks
      ? {
          onPaymentEvent: async (event: WebhookEvent) => {
            const { body, signature } = signWebhookEvent(derivedWebhookSecret(SECRET), event);
            await app?.request("/v1/payments/webhook", {
              method: "POST",
              headers: { "content-type": "application/json", [WEBHOOK_SIGNATURE_HEADER]: signature },
              body,
            });
          },
        }
      : {}),
  });
  app = buildApp(services);
  if (options.workers) services.startWorkers();
  return gatewayOf(app, services);
}

/** What every test gateway shares: a table, the harness's secrets, a silent logger, one attempt per DynamoDB call. */
export function testServicesConfig(options: {
  tableName: string;
  redisUrl: string;
  dynamoEndpoint?: string;
  paymentTimeoutMs?: number;
}): ServicesConfig {
  return {
    redisUrl: options.redisUrl,
    dynamodb: {
      endpoint: options.dynamoEndpoint ?? inject("dynamoEndpoint"),
      region: "us-east-1",
      table: options.tableName,
      timeoutMs: 10_000,
      maxAttempts: 1,
    },
    logger: pino({ level: process.env.TEST_LOG_LEVEL ?? "silent" }),
    metrics: createMetrics(),
    adminToken: ADMIN_TOKEN,
    gatewaySecret: SECRET,
    limits: { ratePerIp: 0, ratePerFan: 0, ratePerOperatorIp: 0 },
    paymentTimeoutMs: options.paymentTimeoutMs ?? 3_000,
  };
}

/** The app and its services as a test drives them: requests in-process, `close()` stops it all. */
export function gatewayOf(app: ReturnType<typeof buildApp>, services: Services): Gateway {
  return {
    app,
    deps: services,
    request: (path, init = {}) => {
      const { json, token, headers, ...rest } = init;
      const h = new Headers(headers);
      if (json !== undefined) h.set("content-type", "application/json");
      if (token) h.set("authorization", `Bearer ${token}`);
      return Promise.resolve(
        app.request(path, { ...rest, headers: h, ...(json !== undefined ? { body: JSON.stringify(json) } : {}) }),
      );
    },
    close: () => services.close(),
  };
}

/** Serves the app on a real port, for tests that need sockets (SSE, many connections). */
export async function listen(gateway: Gateway): Promise<{ url: string; close(): Promise<void> }> {
  const { server, port } = await listenApp({
    fetch: gateway.app.fetch,
    fastPath: gateway.app.fastPath,
    port: 0,
    host: "127.0.0.1",
  });
  return {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

export function eventInput(overrides: Partial<EventInput> = {}): EventInput {
  return {
    name: "Test Night",
    onSaleAt: new Date(Date.now() - 1_000).toISOString(),
    holdSeconds: 120,
    maxSeatsPerFan: 4,
    sections: [
      { id: "A", tier: "Floor", price: 15000, rows: 5, seatsPerRow: 10 },
      { id: "B", tier: "Upper", price: 5000, rows: 2, seatsPerRow: 10 },
    ],
    generalAdmission: [{ id: "GA", tier: "Standing", price: 6000, capacity: 100 }],
    waitingRoom: { admitPerSecond: 10_000, maxActive: 10_000, sessionSeconds: 600 },
    ...overrides,
  };
}

export async function putEvent(gw: Gateway, eventId: string, input: EventInput = eventInput()): Promise<Response> {
  return gw.request(`/v1/admin/events/${eventId}`, { method: "PUT", json: input, token: ADMIN_TOKEN });
}

/**
 * The event's waiting room keeps a place not polled for an hour (abandonSeconds, at most 3600; 60
 * by default): for fans a test joins through the API and never polls, whose places must outlast a
 * journey that CI load slows past the default.
 */
export async function keepPlaces(gw: Gateway, eventId: string): Promise<void> {
  const res = await gw.request(`/v1/admin/events/${eventId}/waiting-room`, {
    method: "PATCH",
    token: ADMIN_TOKEN,
    json: { abandonSeconds: 3_600 },
  });
  if (res.status !== 200) throw new Error(`PATCH waiting-room: ${res.status} ${await res.text()}`);
}

export interface AdmittedFan {
  fanId: string;
  queueToken: string;
  accessToken: string;
}

/** Joins every fan, then polls until each is admitted; returns their tokens. */
export async function admitFans(gw: Gateway, eventId: string, fanIds: string[]): Promise<AdmittedFan[]> {
  const joined = await Promise.all(
    fanIds.map(async (fanId) => {
      const res = await gw.request(`/v1/events/${eventId}/queue`, { method: "POST", json: { fanId } });
      if (res.status !== 201 && res.status !== 200) throw new Error(`join ${fanId}: ${res.status} ${await res.text()}`);
      const body = (await res.json()) as { queueToken: string };
      return { fanId, queueToken: body.queueToken };
    }),
  );
  const admitted = new Map<string, AdmittedFan>();
  const last = new Map<string, unknown>();
  // Bounded by time, not by rounds, with a pause between rounds: a poll the line view answers takes
  // well under a millisecond, so 200 quick rounds could all fall within one view refresh (~100 ms)
  // and never see the cursor reach a fan its view had not (the view's documented lag).
  const deadline = Date.now() + 30_000;
  for (let round = 0; admitted.size < joined.length; round++) {
    if (round > 0) await new Promise((resolve) => setTimeout(resolve, 10));
    if (Date.now() > deadline) {
      const waiting = [...last].filter(([fanId]) => !admitted.has(fanId)).slice(0, 3);
      throw new Error(
        `only ${admitted.size} of ${joined.length} fans admitted; last polls: ${JSON.stringify(waiting)}`,
      );
    }
    await Promise.all(
      joined
        .filter((f) => !admitted.has(f.fanId))
        .map(async (f) => {
          const res = await gw.request(`/v1/events/${eventId}/queue/status`, { token: f.queueToken });
          const body = (await res.json()) as { status: string; accessToken?: string };
          last.set(f.fanId, body);
          if (body.status === "admitted" && body.accessToken) {
            admitted.set(f.fanId, { ...f, accessToken: body.accessToken });
          }
        }),
    );
  }
  return fanIds.map((id) => admitted.get(id)!);
}

/** Reads one counter's total (summed over labels matching `labels`) from /metrics text. */
export async function metricTotal(gw: Gateway, name: string, labels: Record<string, string> = {}): Promise<number> {
  const text = await (await gw.request("/metrics")).text();
  let total = 0;
  for (const line of text.split("\n")) {
    if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue;
    if (!Object.entries(labels).every(([k, v]) => line.includes(`${k}="${v}"`))) continue;
    total += Number(line.slice(line.lastIndexOf(" ") + 1));
  }
  return total;
}

/** Runs the audit on an event (store + the simulated provider's charges); throws with the failures. */
export async function expectAuditPasses(gw: Gateway, eventId: string, redis: import("ioredis").Redis): Promise<void> {
  const { auditEvent } = await import("../../src/audit/audit.js");
  const { createSimulatedProvider } = await import("../../src/payments/simulated.js");
  const report = await auditEvent(
    { inventory: gw.deps.inventory, payments: createSimulatedProvider({ redis }) },
    eventId,
  );
  const failed = report.checks.filter((c) => c.status === "fail");
  if (!report.ok) throw new Error(`audit of ${eventId} failed:\n${JSON.stringify(failed, null, 2)}`);
}

/**
 * The gateway's app on two servers: one with its fast path (what it answered is pushed to
 * `fastAnswered` as "METHOD url"), one without (the app alone, no Node response handed to it), to
 * compare the fast path's answers with the app's.
 */
export async function serveWithAndWithoutFastPath(
  app: Gateway["app"],
  fastAnswered: string[],
): Promise<{ fastPort: number; appPort: number; close(): Promise<void> }> {
  const { listenApp } = await import("../../src/http/serve.js");
  const withFast = await listenApp({
    fetch: app.fetch,
    fastPath: (incoming, outgoing, appListener) => {
      // A path that reads the body first (the join) may still hand the request to the app.
      let handedBack = false;
      const toApp =
        appListener &&
        ((i: typeof incoming, o: typeof outgoing) => {
          handedBack = true;
          appListener(i, o);
        });
      const answered = app.fastPath(incoming, outgoing, toApp);
      if (answered) {
        outgoing.once("finish", () => {
          if (!handedBack) fastAnswered.push(`${incoming.method} ${incoming.url}`);
        });
      }
      return answered;
    },
    port: 0,
    host: "127.0.0.1",
  });
  // app.fetch itself, so the app sees the socket (the client IP) as the fast server's app does.
  const appOnly = await listenApp({ fetch: app.fetch, port: 0, host: "127.0.0.1" });
  return {
    fastPort: withFast.port,
    appPort: appOnly.port,
    close: async () => {
      for (const s of [withFast, appOnly]) {
        await new Promise<void>((resolve) => {
          s.server.closeAllConnections();
          s.server.close(() => resolve());
        });
      }
    },
  };
}
