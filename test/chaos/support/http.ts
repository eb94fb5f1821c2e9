/**
 * What the bad-input, token and abuse scenarios stand on:
 *  - `startChaosGateway`: src/main.ts as a real child process (gateway and workers) on a logical
 *    Redis database of its own (claimRedisDatabase: its queues, waiting room, rate-limit buckets
 *    and simulated provider are its alone; no other test's worker takes its jobs), a DynamoDB
 *    table of its own, explicit ADMIN_TOKEN / GATEWAY_SECRET, and the limits the scenario asks;
 *  - `sendRaw`: one request written byte for byte on its own socket (bad headers, a lying
 *    Content-Length, 1 MB values, bytes no HTTP client library lets through) and the answer parsed;
 *  - `call`: an ordinary JSON request over node:http, one connection per request;
 *  - the figures every scenario reports: the child's RSS, its 5xx count from /metrics, the audit.
 */
import { randomUUID } from "node:crypto";
import { mkdtempSync, readFileSync } from "node:fs";
import { request as httpRequest } from "node:http";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import { expect, inject } from "vitest";
import { type AuditReport, auditEvent } from "../../../src/audit/audit.js";
import { createDynamoClient } from "../../../src/dynamodb/client.js";
import { createInventory, type EventInput } from "../../../src/inventory/index.js";
import { createSimulatedProvider } from "../../../src/payments/simulated.js";
import { ADMIN_TOKEN, eventInput, SECRET } from "../../gateway/harness.js";
import { type GatewayProcess, startGatewayProcess } from "../../support/processes.js";
import { claimRedisDatabase, sleep } from "../../support/worker-process.js";
import { auditFigures } from "./report.js";

export { ADMIN_TOKEN, SECRET };

export interface ChaosGateway {
  process: GatewayProcess;
  url: string;
  host: string;
  port: number;
  pid: number;
  redisUrl: string;
  tableName: string;
  /** Stops the child (SIGTERM, then SIGKILL), and frees the Redis database. */
  stop(): Promise<void>;
}

/** A gateway process (ROLE=all: gateway and workers) on a Redis database and a table of its own. */
export async function startChaosGateway(
  env: Record<string, string> = {},
  nodeArgs: string[] = [],
): Promise<ChaosGateway> {
  const db = await claimRedisDatabase();
  const tableName = `chaos_${randomUUID().replaceAll("-", "").slice(0, 12)}`;
  let gw: GatewayProcess;
  try {
    gw = await startGatewayProcess(
      {
        REDIS_URL: db.url,
        DYNAMODB_ENDPOINT: inject("dynamoEndpoint"),
        DYNAMODB_TABLE: tableName,
        DATA_DIR: mkdtempSync(join(tmpdir(), "chaos-gw-")),
        DEMO_EVENT: "false",
        ADMIN_TOKEN,
        GATEWAY_SECRET: SECRET,
        RATE_LIMIT_PER_IP: "0",
        RATE_LIMIT_PER_FAN: "0",
        ...env,
      },
      90_000,
      nodeArgs,
    );
  } catch (err) {
    await db.release();
    throw err;
  }
  const url = new URL(gw.url);
  return {
    process: gw,
    url: gw.url,
    host: url.hostname,
    port: Number(url.port),
    pid: gw.child.pid ?? 0,
    redisUrl: db.url,
    tableName,
    stop: async () => {
      const exited = gw.stop("SIGTERM");
      const timer = setTimeout(() => gw.child.kill("SIGKILL"), 20_000);
      await exited;
      clearTimeout(timer);
      await db.release();
    },
  };
}

/** The child's resident set size, in bytes (Linux: /proc/<pid>/status). */
export function rssBytes(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const kb = /^VmRSS:\s+(\d+)\s+kB$/m.exec(status)?.[1];
  if (!kb) throw new Error(`no VmRSS for pid ${pid}`);
  return Number(kb) * 1024;
}

/** Answers with a 5xx status the gateway counted, by status, from its /metrics. */
export async function serverErrorsFromMetrics(url: string): Promise<Record<string, number>> {
  const res = await call(url, "GET", "/metrics");
  const counts: Record<string, number> = {};
  for (const line of res.text.split("\n")) {
    if (!line.startsWith("gateway_http_request_duration_seconds_count{")) continue;
    const status = /status="(\d+)"/.exec(line)?.[1];
    if (!status?.startsWith("5")) continue;
    counts[status] = (counts[status] ?? 0) + Number(line.slice(line.lastIndexOf(" ") + 1));
  }
  return counts;
}

/** One unlabelled gauge of the gateway's /metrics (e.g. nodejs_heap_size_used_bytes), or NaN. */
export async function gauge(url: string, name: string): Promise<number> {
  const res = await call(url, "GET", "/metrics");
  const line = res.text.split("\n").find((l) => l.startsWith(`${name} `));
  return line ? Number(line.slice(name.length + 1)) : Number.NaN;
}

// ---------------------------------------------------------------------------------------------
// Ordinary requests

export interface CallResult {
  status: number;
  headers: Record<string, string>;
  text: string;
  /** The body parsed as JSON, or undefined when it is not JSON. */
  body: unknown;
  ms: number;
}

export interface CallOptions {
  token?: string;
  json?: unknown;
  /** Sent as is (the bytes a signature covers); `json` wins when both are given. */
  body?: string | Buffer;
  headers?: Record<string, string>;
  /** Sent as X-Forwarded-For (the gateway trusts it when started with TRUST_PROXY=true). */
  ip?: string;
  timeoutMs?: number;
}

/** One request on a connection of its own (no pool to queue behind: hundreds can be in flight). */
export function call(base: string, method: string, path: string, options: CallOptions = {}): Promise<CallResult> {
  const target = new URL(path, base);
  const headers: Record<string, string> = { ...options.headers };
  let payload: Buffer | undefined;
  if (options.json !== undefined) {
    payload = Buffer.from(JSON.stringify(options.json));
    headers["content-type"] ??= "application/json";
  } else if (options.body !== undefined) {
    payload = Buffer.from(options.body);
  }
  if (payload) headers["content-length"] = String(payload.length);
  if (options.token) headers.authorization = `Bearer ${options.token}`;
  if (options.ip) headers["x-forwarded-for"] = options.ip;
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      {
        host: target.hostname,
        port: target.port,
        method,
        path: `${target.pathname}${target.search}`,
        headers,
        agent: false,
        timeout: options.timeoutMs ?? 60_000,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (d: Buffer) => chunks.push(d));
        res.on("error", reject);
        res.on("end", () => {
          const text = Buffer.concat(chunks).toString("utf8");
          let body: unknown;
          try {
            body = text === "" ? undefined : JSON.parse(text);
          } catch {
            body = undefined;
          }
          const flat: Record<string, string> = {};
          for (const [k, v] of Object.entries(res.headers)) if (v !== undefined) flat[k] = String(v);
          resolve({ status: res.statusCode ?? 0, headers: flat, text, body, ms: performance.now() - started });
        });
      },
    );
    req.on("timeout", () => req.destroy(new Error(`${method} ${path} timed out`)));
    req.on("error", reject);
    req.end(payload);
  });
}

export interface ErrorShape {
  error: { code: string; message: string; requestId: string; details?: Record<string, unknown> };
}

/** The contract's error: this status and code, the JSON body, the request id, no stack trace. */
export function expectApiError(res: CallResult, status: number, code: string): ErrorShape {
  expect({ status: res.status, code: (res.body as ErrorShape | undefined)?.error?.code }).toEqual({ status, code });
  expect(res.headers["content-type"]).toMatch(/^application\/json/);
  const body = res.body as ErrorShape;
  expect(typeof body.error.message).toBe("string");
  expect(body.error.requestId).toBe(res.headers["x-request-id"]);
  expect(leaksInternals(res.text)).toBeNull();
  return body;
}

/** A stack frame, a file path of the server, or Node internals in a body; null when clean. */
export function leaksInternals(text: string): string | null {
  const patterns = [
    /\bat (?:async )?[\w$.<>[\] ]*\(?(?:file:\/\/)?\/[^\s)]*:\d+:\d+\)?/,
    /node:internal/,
    /node_modules\//,
    /\/src\/[\w/-]+\.ts/,
    new RegExp(process.cwd().replace(/[.*+?^${}()|[\]\\]/g, "\\$&")),
  ];
  for (const p of patterns) {
    const m = p.exec(text);
    if (m) return m[0];
  }
  return null;
}

// ---------------------------------------------------------------------------------------------
// Raw requests

export interface RawResponse {
  status: number;
  /** Lower-case names; repeated headers joined with ", ". */
  headers: Record<string, string>;
  body: Buffer;
  ms: number;
}

export type RawOutcome =
  | { kind: "response"; response: RawResponse }
  | { kind: "no_response"; reason: string; received: number; ms: number };

export interface RawRequest {
  method: string;
  /** The request target exactly as sent (already percent-encoded, or not). */
  target: string;
  /** Each value sent as bytes (a string is taken as latin1, one byte per character). */
  headers: [string, string | Buffer][];
  body?: Buffer;
  /** Content-Length header: `auto` (the body's length, when there is a body), a number (a lie), or `none`. */
  contentLength?: "auto" | "none" | number;
}

/** The bytes of an HTTP/1.1 request. */
export function encodeRequest(req: RawRequest): Buffer {
  const parts: Buffer[] = [Buffer.from(`${req.method} ${req.target} HTTP/1.1\r\n`, "latin1")];
  for (const [name, value] of req.headers) {
    parts.push(Buffer.from(`${name}: `, "latin1"), typeof value === "string" ? Buffer.from(value, "latin1") : value);
    parts.push(Buffer.from("\r\n"));
  }
  const cl = req.contentLength ?? "auto";
  if (cl === "auto" && req.body) parts.push(Buffer.from(`Content-Length: ${req.body.length}\r\n`));
  else if (typeof cl === "number") parts.push(Buffer.from(`Content-Length: ${cl}\r\n`));
  parts.push(Buffer.from("\r\n"));
  if (req.body) parts.push(req.body);
  return Buffer.concat(parts);
}

interface Head {
  status: number;
  headers: Record<string, string>;
  bodyStart: number;
}

function parseHead(buf: Buffer): Head | null {
  let start = 0;
  for (;;) {
    const end = buf.indexOf("\r\n\r\n", start);
    if (end === -1) return null;
    const head = parseOneHead(buf.subarray(start, end));
    // An interim answer (100 Continue) comes before the real one.
    if (head.status >= 100 && head.status < 200 && head.status !== 101) {
      start = end + 4;
      continue;
    }
    return { ...head, bodyStart: end + 4 };
  }
}

function parseOneHead(raw: Buffer): Omit<Head, "bodyStart"> {
  const lines = raw.toString("latin1").split("\r\n");
  const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(lines[0] ?? "")?.[1] ?? Number.NaN);
  const headers: Record<string, string> = {};
  for (const line of lines.slice(1)) {
    const colon = line.indexOf(":");
    if (colon === -1) continue;
    const name = line.slice(0, colon).trim().toLowerCase();
    const value = line.slice(colon + 1).trim();
    headers[name] = headers[name] === undefined ? value : `${headers[name]}, ${value}`;
  }
  return { status, headers };
}

/** The body once complete (Content-Length or chunked framing), or null while more is expected. */
function completeBody(buf: Buffer, head: Head, method: string): Buffer | null {
  const rest = buf.subarray(head.bodyStart);
  if (method === "HEAD" || head.status === 204 || head.status === 304 || (head.status >= 100 && head.status < 200)) {
    return Buffer.alloc(0);
  }
  if (/chunked/i.test(head.headers["transfer-encoding"] ?? "")) {
    const out: Buffer[] = [];
    let at = 0;
    for (;;) {
      const lineEnd = rest.indexOf("\r\n", at);
      if (lineEnd === -1) return null;
      const size = Number.parseInt(rest.subarray(at, lineEnd).toString("latin1"), 16);
      if (Number.isNaN(size)) return Buffer.concat(out);
      if (size === 0) return Buffer.concat(out);
      if (rest.length < lineEnd + 2 + size + 2) return null;
      out.push(rest.subarray(lineEnd + 2, lineEnd + 2 + size));
      at = lineEnd + 2 + size + 2;
    }
  }
  const length = head.headers["content-length"];
  if (length !== undefined) {
    const n = Number(length);
    return rest.length >= n ? rest.subarray(0, n) : null;
  }
  return null;
}

/**
 * Writes `bytes` on a new connection and reads one response. An event stream counts as answered
 * once its headers arrive. Never throws: a connection closed without an answer, or no answer
 * within `timeoutMs`, is a `no_response`.
 */
export function sendRaw(
  host: string,
  port: number,
  bytes: Buffer,
  options: { method: string; timeoutMs?: number },
): Promise<RawOutcome> {
  const started = performance.now();
  return new Promise((resolve) => {
    const socket = connect({ host, port });
    let buf = Buffer.alloc(0);
    let settled = false;
    const finish = (outcome: RawOutcome) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      resolve(outcome);
    };
    const noResponse = (reason: string) =>
      finish({ kind: "no_response", reason, received: buf.length, ms: performance.now() - started });
    const tryParse = (closed: boolean) => {
      const head = parseHead(buf);
      if (!head) {
        if (closed) noResponse(buf.length ? "incomplete head" : "closed without a response");
        return;
      }
      const stream = /text\/event-stream/.test(head.headers["content-type"] ?? "");
      const body = stream ? Buffer.alloc(0) : completeBody(buf, head, options.method);
      if (body) {
        finish({
          kind: "response",
          response: { status: head.status, headers: head.headers, body, ms: performance.now() - started },
        });
      } else if (closed) {
        // Read to the close: the body is whatever came.
        finish({
          kind: "response",
          response: {
            status: head.status,
            headers: head.headers,
            body: buf.subarray(head.bodyStart),
            ms: performance.now() - started,
          },
        });
      }
    };
    const timer = setTimeout(() => noResponse("timeout"), options.timeoutMs ?? 10_000);
    socket.on("data", (d: Buffer) => {
      buf = Buffer.concat([buf, d]);
      tryParse(false);
    });
    socket.on("end", () => tryParse(true));
    socket.on("close", () => tryParse(true));
    // EPIPE / ECONNRESET while writing a body the server already refused: the answer may be in.
    socket.on("error", () => tryParse(true));
    socket.write(bytes);
  });
}

// ---------------------------------------------------------------------------------------------
// A sale over HTTP

/** The harness's small on-sale (two sections and a standing area), named for these tests. */
export function smallEvent(overrides: Partial<EventInput> = {}): EventInput {
  return eventInput({ name: "Chaos Night", ...overrides });
}

export async function putEvent(gw: ChaosGateway, eventId: string, input: EventInput = smallEvent()): Promise<void> {
  const res = await call(gw.url, "PUT", `/v1/admin/events/${eventId}`, { json: input, token: ADMIN_TOKEN });
  if (res.status !== 201 && res.status !== 200) throw new Error(`PUT event ${eventId}: ${res.status} ${res.text}`);
}

export interface Fan {
  fanId: string;
  queueToken: string;
  accessToken: string;
}

/** Joins and polls until admitted (patiently through 429s), over HTTP. */
export async function admitFan(
  gw: ChaosGateway,
  eventId: string,
  fanId: string,
  options: { ip?: string } = {},
): Promise<Fan> {
  const deadline = Date.now() + 60_000;
  let queueToken: string | undefined;
  while (!queueToken) {
    const res = await call(gw.url, "POST", `/v1/events/${eventId}/queue`, { json: { fanId }, ...options });
    if (res.status === 200 || res.status === 201) queueToken = (res.body as { queueToken: string }).queueToken;
    else if (res.status !== 429 || Date.now() > deadline) throw new Error(`join ${fanId}: ${res.status} ${res.text}`);
    else await sleep(250);
  }
  for (;;) {
    const res = await call(gw.url, "GET", `/v1/events/${eventId}/queue/status`, { token: queueToken, ...options });
    const body = res.body as { status?: string; accessToken?: string } | undefined;
    if (res.status === 200 && body?.status === "admitted" && body.accessToken) {
      return { fanId, queueToken, accessToken: body.accessToken };
    }
    if (res.status !== 200 && res.status !== 429) throw new Error(`status ${fanId}: ${res.status} ${res.text}`);
    if (Date.now() > deadline) throw new Error(`${fanId} not admitted: ${res.status} ${res.text}`);
    await sleep(200);
  }
}

/**
 * The audit of one event against the table and the simulated provider's charges, repeated until
 * it passes or `settleMs` is over (a purchase left pending is settled by the reconciler).
 */
export async function auditSale(
  gw: ChaosGateway,
  eventId: string,
  settleMs = 60_000,
): Promise<{ report: AuditReport; oversells: number; lostPurchases: number }> {
  const redis = new Redis(gw.redisUrl, { maxRetriesPerRequest: 1 });
  const dynamo = createDynamoClient({ endpoint: inject("dynamoEndpoint"), region: "us-east-1" });
  try {
    const deps = {
      inventory: createInventory({ client: dynamo, tableName: gw.tableName }),
      payments: createSimulatedProvider({ redis }),
    };
    const deadline = Date.now() + settleMs;
    for (;;) {
      const report = await auditEvent(deps, eventId);
      if (report.ok || Date.now() > deadline) return { report, ...auditFigures(report) };
      await sleep(1_000);
    }
  } finally {
    redis.disconnect();
    dynamo.destroy();
  }
}

/** The p-th percentile (0..100) of some durations. */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
}
