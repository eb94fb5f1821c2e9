/**
 * The environment, parsed once. Nothing else in src/ reads process.env: a bad value stops the
 * process at start with a message naming the variable, never a surprise at the first request.
 */
import { loadInvitePublicKey } from "./waiting-room/invites.js";
import { z } from "zod";
import { parseClusterNodes, type RedisClusterNodes, type RedisTarget } from "./redis/connect.js";
import { loadTokenSigning, type TokenSigningConfig } from "./waiting-room/token-config.js";

const bool = z
  .enum(["true", "false", "1", "0", "yes", "no"])
  .transform((v) => v === "true" || v === "1" || v === "yes");

const port = z.coerce.number().int().min(0).max(65_535);

// --- Named operator tokens (ADMIN_TOKENS, issue 17 item 5) -------------------------------------
/**
 * `ADMIN_TOKENS=name:role:token,name:role:token`: each operator (a person, a dashboard, a
 * script) has a token of its own, so the action log says who did what, and a dashboard holds a
 * token that can only read. `role` is `admin` (everything) or `read` (GET only). ADMIN_TOKEN, when
 * set or generated, stays the admin token named "default", so the name is taken. A token is at
 * least 16 characters and may hold `:` (only the first two separate); names and tokens are unique.
 */
export interface OperatorToken {
  name: string;
  role: "admin" | "read";
  token: string;
}

export const OPERATOR_TOKEN_NAME = /^[A-Za-z0-9_.-]{1,64}$/;

function operatorTokensSetting() {
  return z.string().transform((list, ctx): OperatorToken[] => {
    const tokens: OperatorToken[] = [];
    for (const [i, entry] of list.split(",").entries()) {
      const [name = "", role = "", ...rest] = entry.trim().split(":");
      const token = rest.join(":");
      const fail = (why: string) => ctx.addIssue({ code: "custom", message: `entry ${i + 1}: ${why}` });
      if (!OPERATOR_TOKEN_NAME.test(name)) fail("a name of 1..64 letters, digits, '_', '.', '-' (name:role:token)");
      else if (name === "default") fail('"default" is ADMIN_TOKEN\'s name');
      else if (role !== "admin" && role !== "read") fail(`role ${JSON.stringify(role)}: admin or read`);
      else if (token.length < 16) fail(`the token of ${name} must be at least 16 characters`);
      else if (tokens.some((t) => t.name === name)) fail(`${name} is named twice`);
      else if (tokens.some((t) => t.token === token)) fail(`${name} has the token of another name`);
      else tokens.push({ name, role, token });
    }
    return tokens;
  });
}
// ---------------------------------------------------------------------------------------------

const gatewaySchema = z.object({
  PORT: port.default(8080),
  HOST: z.string().default("0.0.0.0"),
  LOG_LEVEL: z.enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"]).default("info"),
  /** Unset: 127.0.0.1:6379 if it answers, else a redis-server started by the gateway. */
  REDIS_URL: z.string().url().optional(),
  /** A Redis Cluster instead: seed nodes `host:port,host:port,...` (not with REDIS_URL). */
  REDIS_CLUSTER_NODES: z
    .string()
    .transform((list, ctx) => {
      try {
        return parseClusterNodes(list);
      } catch (err) {
        ctx.addIssue({ code: "custom", message: (err as Error).message });
        return z.NEVER;
      }
    })
    .optional(),
  /** AUTH password of every cluster node. */
  REDIS_CLUSTER_PASSWORD: z.string().optional(),
  /**
   * Runs the Lua scripts as Redis Functions (FUNCTION LOAD once per master, then FCALL) where the
   * server has them (Redis >= 7), EVALSHA otherwise (src/redis/functions.ts). false: EVALSHA always.
   */
  REDIS_FUNCTIONS: bool.default(true),
  /** TLS to every cluster node. */
  REDIS_CLUSTER_TLS: bool.default(false),
  /** Unset: the embedded local DynamoDB, data under DATA_DIR. */
  DYNAMODB_ENDPOINT: z.string().url().optional(),
  DYNAMODB_PORT: port.default(8000),
  DYNAMODB_TABLE: z
    .string()
    .regex(/^[A-Za-z0-9_.-]{3,255}$/)
    .default("onsale"),
  AWS_REGION: z.string().default("us-east-1"),
  /** Per-request DynamoDB timeout: past it a claim answers 503 (the write may still apply; see RELIABILITY.md). */
  DYNAMODB_TIMEOUT_MS: z.coerce.number().int().positive().default(5_000),
  /** Attempts per DynamoDB request (the SDK's retries with backoff), 1 = no retry. */
  DYNAMODB_MAX_ATTEMPTS: z.coerce.number().int().min(1).max(10).default(3),
  DATA_DIR: z.string().default(".data"),
  ADMIN_TOKEN: z.string().min(16).optional(),
  ADMIN_TOKENS: operatorTokensSetting().optional(),
  GATEWAY_SECRET: z.string().min(32).optional(),
  PAYMENT_TIMEOUT_MS: z.coerce.number().int().positive().default(3_000),
  /**
   * Redis for the simulated payment provider's ledger; default REDIS_URL. A real provider keeps its
   * ledger elsewhere: a Redis of its own lets the simulation survive a flush of the gateway's Redis.
   */
  PAYMENT_REDIS_URL: z.string().url().optional(),
  /** HMAC secret of payment webhooks; default derived from GATEWAY_SECRET (the simulated provider uses it). */
  PAYMENT_WEBHOOK_SECRET: z.string().min(16).optional(),
  /**
   * Where "seats are back" batches are posted (src/notify/); unset: the feature is off, except
   * under `npm start`'s demo event, which wires a local receiver that logs them.
   */
  NOTIFY_WEBHOOK_URL: z.string().url().optional(),
  /** HMAC secret of the seats-back webhook (Onsale-Signature); default derived from GATEWAY_SECRET. */
  NOTIFY_WEBHOOK_SECRET: z.string().min(16).optional(),
  /** Fans told per seat that comes back to a sold-out event, in the order they asked. */
  NOTIFY_FANS_PER_SEAT: z.coerce.number().positive().max(100).default(2),
  /** Requests to be told an event may hold at once; past it 409 notify_limit_reached. */
  NOTIFY_MAX_REQUESTS_PER_EVENT: z.coerce.number().int().positive().max(1_000_000).default(10_000),
  RATE_LIMIT_PER_IP: z.coerce.number().min(0).default(50),
  RATE_LIMIT_PER_FAN: z.coerce.number().min(0).default(5),
  /**
   * A secret the operator hands to the load generators: requests carrying it (X-Load-Test-Token)
   * skip the per-IP limit, never the per-fan one, so a load test runs with the limits on. Unset: off.
   */
  LOAD_TEST_TOKEN: z.string().min(16).optional(),
  /** A bearer token /metrics asks for (Authorization: Bearer ...); unset: /metrics is open. */
  METRICS_TOKEN: z.string().min(16).optional(),
  /** HS256 invite tokens (src/waiting-room/invites.ts): the secret the operator's system signs them with. */
  INVITE_SECRET: z.string().min(32).optional(),
  /** EdDSA invite tokens: the operator's Ed25519 public key, PEM or JWK, or the path of a file holding one. */
  INVITE_PUBLIC_KEY: z.string().optional(),
  TRUST_PROXY: bool.default(false),
  /**
   * Fan shards of a waiting room this gateway creates (docs/redis-cluster.md "One event over many
   * masters"): its heartbeats then live in this many shards, each under a hash tag of its own, so
   * on a Redis Cluster they spread over the masters. Fixed per room at creation; 0 (the default):
   * they stay on the event's slot. 12 divides evenly over 1, 2, 3, 4, 6 and 12 masters.
   */
  WAITING_ROOM_FAN_SHARDS: z.coerce.number().int().min(0).max(256).default(0),
  /**
   * The waiting rooms this gateway creates admit by claims (docs/waiting-room.md "Admission by
   * claims"): the cursor offers a session at each place it passes and the fan there claims it at
   * its next poll, so admission reads no fan's record. Fixed per room at creation. Off by default.
   * `shards` (with WAITING_ROOM_FAN_SHARDS > 0): and the fans' records live on the fan shards, so a
   * join's and a poll's record calls spread over a cluster's masters too (docs/redis-cluster.md
   * "Steps 2 and 3, call by call"; on m masters, m - 1 fan shards: one on each master but the event's).
   */
  WAITING_ROOM_CLAIMS: z
    .enum(["true", "false", "1", "0", "yes", "no", "shards"])
    .default("false")
    .transform((v): boolean | "shards" => (v === "shards" ? "shards" : v === "true" || v === "1" || v === "yes")),
  /**
   * drand relays (comma-separated base URLs, e.g. https://api.drand.sh,https://drand.cloudflare.com)
   * a draw waiting for its drand round fetches the round from (src/lottery/drand-relay.ts); only a
   * round that verifies is taken. Unset: the round is recorded through the operator's PUT only.
   */
  DRAND_RELAYS: z
    .string()
    .default("")
    .transform((v) =>
      v
        .split(",")
        .map((u) => u.trim())
        .filter((u) => u.length > 0),
    )
    .pipe(z.array(z.url({ protocol: /^https?$/ }))),
  /**
   * How long an idle kept-alive connection stays open; above a load balancer's idle timeout (60 s
   * is usual), so the server never closes a connection the client is about to reuse.
   */
  HTTP_KEEP_ALIVE_TIMEOUT_MS: z.coerce.number().int().positive().default(65_000),
  /** Open seat-map streams per gateway process; past it 503 with Retry-After. */
  SSE_MAX_STREAMS: z.coerce.number().int().positive().default(10_000),
  /** Open seat-map streams per client IP (see TRUST_PROXY); past it 429 with Retry-After. */
  SSE_MAX_STREAMS_PER_IP: z.coerce.number().int().positive().default(50),
  /** Bytes a stream may queue behind a write its client has not taken; past it the client is resynced. */
  SSE_MAX_BACKLOG_BYTES: z.coerce
    .number()
    .int()
    .min(1_024)
    .default(64 * 1024),
  /** A stream write the client does not take within this ends the connection. */
  SSE_WRITE_TIMEOUT_MS: z.coerce.number().int().positive().default(30_000),
  /** Default true, false in production. */
  DEMO_EVENT: bool.optional(),
  /** all: gateway and workers in one process (npm start); gateway or worker: one of them. */
  ROLE: z.enum(["all", "gateway", "worker"]).default("all"),
  // --- production mode, shutdown, worker health, log format (issue 17) ---
  /** `production`: no embedded defaults (see productionProblems); any other value or unset: none of that. */
  NODE_ENV: z.string().optional(),
  /**
   * After SIGTERM, how long /readyz answers 503 (draining) before the server stops taking
   * connections: the time a load balancer needs to see it. Default 5000 in production, else 0.
   */
  SHUTDOWN_DRAIN_MS: z.coerce.number().int().min(0).max(120_000).optional(),
  /** A process running workers serves /livez and /readyz on this port; unset: no health server. */
  WORKER_HEALTH_PORT: port.optional(),
  /**
   * How long a job stays locked to the worker running it (renewed at half of it while it runs):
   * a killed worker's job is taken back by another this long after the kill, at the latest.
   */
  WORKER_LOCK_MS: z.coerce.number().int().min(1_000).max(600_000).default(30_000),
  /**
   * A worker that starts no job while jobs wait this long, with a free slot, is replaced by a new
   * one on a new connection (src/workers/watchdog.ts: a blocking connection stuck after a failover).
   */
  WORKER_STALL_MS: z.coerce.number().int().min(1_000).max(3_600_000).default(60_000),
  /** auto: readable lines on a terminal outside production, JSON otherwise. */
  LOG_FORMAT: z.enum(["auto", "json", "pretty"]).default("auto"),
});

/** Every variable the gateway and the worker read (deployment files are checked against it). */
export const GATEWAY_VARIABLES: readonly string[] = Object.keys(gatewaySchema.shape);

/**
 * Secrets published in this repository (docker-compose.yml before issue 17, README, docs, the load
 * kit's examples, deploy/k8s's example Secret). Anyone can read them, so production refuses them;
 * test/foundation/config.test.ts greps the published files and fails when one is missing here.
 */
export const KNOWN_DEFAULT_SECRETS: readonly string[] = [
  "change-me-operator-token",
  "change-me-gateway-secret-at-least-32-chars",
  "change-me-payment-webhook-secret",
  "change-me-load-test-token",
  "load-generator-token-0001",
  "load-operator-token-0001",
];

/** The variables holding secrets, checked against KNOWN_DEFAULT_SECRETS in production. */
const SECRET_VARIABLES = [
  "ADMIN_TOKEN",
  "GATEWAY_SECRET",
  "PAYMENT_WEBHOOK_SECRET",
  "NOTIFY_WEBHOOK_SECRET",
  "LOAD_TEST_TOKEN",
  "METRICS_TOKEN",
  "INVITE_SECRET",
] as const;

/** The secret parts of a variable's value: ADMIN_TOKENS holds `name:role:token,...`. */
function secretsOf(name: string, value: string): string[] {
  if (name !== "ADMIN_TOKENS") return [value];
  return value.split(",").map((entry) => entry.split(":").slice(2).join(":"));
}

const PRODUCTION_SHUTDOWN_DRAIN_MS = 5_000;

/** True when the environment asks for production mode (`NODE_ENV=production`). */
export function isProduction(env: NodeJS.ProcessEnv): boolean {
  return env.NODE_ENV === "production";
}

/**
 * What production mode refuses, one line per variable: every embedded default that is safe for
 * one developer and unsafe for a fleet. An embedded DynamoDB per host is one seat store per host
 * (a seat sells once per host); secrets generated into each DATA_DIR differ per host (a token from
 * one gateway fails on the next); a Redis found on 127.0.0.1 is not the one the others use.
 * `env` is the environment with empty values removed.
 */
export function productionProblems(env: Record<string, string | undefined>): string[] {
  const problems: string[] = [];
  if (!env.DYNAMODB_ENDPOINT && !env.AWS_REGION) {
    problems.push(
      "DYNAMODB_ENDPOINT: production needs an explicit DynamoDB: DYNAMODB_ENDPOINT (a DynamoDB endpoint URL) or AWS_REGION (DynamoDB of that AWS region); no embedded local DynamoDB is started",
    );
  }
  if (!env.REDIS_URL && !env.REDIS_CLUSTER_NODES) {
    problems.push(
      "REDIS_URL: production needs an explicit Redis: REDIS_URL (one server) or REDIS_CLUSTER_NODES (a cluster); none is looked for on 127.0.0.1 or started",
    );
  }
  if (!env.GATEWAY_SECRET) {
    problems.push(
      "GATEWAY_SECRET: required in production (at least 32 characters, the same on every gateway); none is generated",
    );
  }
  if (!env.ADMIN_TOKEN) {
    problems.push("ADMIN_TOKEN: required in production (at least 16 characters); none is generated");
  }
  const alg = env.TOKEN_ALG;
  if (alg && alg !== "HS256" && !env.TOKEN_SIGNING_KEYS) {
    problems.push(
      `TOKEN_SIGNING_KEYS: required in production with TOKEN_ALG=${alg} (the same key set on every gateway); a key generated into one DATA_DIR signs tokens the other gateways refuse`,
    );
  }
  for (const name of [...SECRET_VARIABLES, "ADMIN_TOKENS"]) {
    const value = env[name];
    if (!value) continue;
    if (secretsOf(name, value).some((v) => KNOWN_DEFAULT_SECRETS.includes(v) || /change-?me/i.test(v))) {
      problems.push(`${name}: a value published in this repository's examples; choose a secret of your own`);
    }
  }
  return problems;
}

export type GatewayConfig = {
  /** NODE_ENV=production: every dependency and secret explicit, nothing embedded (productionProblems). */
  production: boolean;
  port: number;
  host: string;
  logLevel: string;
  redisUrl: string | undefined;
  /** Set instead of `redisUrl` for a Redis Cluster (REDIS_CLUSTER_NODES). */
  redisCluster: RedisClusterNodes | undefined;
  /** REDIS_FUNCTIONS: the scripts as Redis Functions where the server has them. */
  redisFunctions: boolean;
  dynamodb: {
    endpoint: string | undefined;
    /** No endpoint outside production: bootstrap finds or starts the local DynamoDB. */
    embedded: boolean;
    localPort: number;
    table: string;
    region: string;
    timeoutMs: number;
    maxAttempts: number;
  };
  dataDir: string;
  adminToken: string | undefined;
  /** ADMIN_TOKENS: named operator tokens besides ADMIN_TOKEN (which is the admin token "default"). */
  operatorTokens: OperatorToken[];
  gatewaySecret: string | undefined;
  paymentTimeoutMs: number;
  paymentWebhookSecret: string | undefined;
  paymentRedisUrl: string | undefined;
  /** The seats-back webhook (src/notify/): off without a URL. */
  notify: {
    webhookUrl: string | undefined;
    webhookSecret: string | undefined;
    fansPerSeat: number;
    maxRequestsPerEvent: number;
  };
  rateLimitPerIp: number;
  rateLimitPerFan: number;
  loadTestToken: string | undefined;
  metricsToken: string | undefined;
  /** INVITE_SECRET and INVITE_PUBLIC_KEY: what checks the operator's invite tokens. */
  invites: { secret: string | undefined; publicKey: string | undefined };
  trustProxy: boolean;
  /** DRAND_RELAYS: where a draw fetches its drand round; empty: it does not. */
  drandRelays: string[];
  /** WAITING_ROOM_FAN_SHARDS: fan shards of the rooms this gateway creates (0: none). */
  fanShards: number;
  /** WAITING_ROOM_CLAIMS: the rooms this gateway creates admit by claims; "shards": their records on the fan shards. */
  claims: boolean | "shards";
  httpKeepAliveTimeoutMs: number;
  sse: { maxStreams: number; maxStreamsPerIp: number; backlogBytes: number; writeTimeoutMs: number };
  demoEvent: boolean;
  role: "all" | "gateway" | "worker";
  /** TOKEN_ALG and TOKEN_SIGNING_KEYS (src/waiting-room/token-config.ts). */
  tokens: TokenSigningConfig;
  /** SHUTDOWN_DRAIN_MS: readiness off this long before the server closes on SIGTERM. */
  shutdownDrainMs: number;
  /** WORKER_HEALTH_PORT: the workers' /livez and /readyz; undefined: none. */
  workerHealthPort: number | undefined;
  /** WORKER_LOCK_MS: BullMQ's lock of a running job; a killed worker's job is taken back after it. */
  workerLockMs: number;
  /** WORKER_STALL_MS: a worker that takes no job while jobs wait this long is replaced. */
  workerStallMs: number;
  logFormat: "auto" | "json" | "pretty";
};

export class ConfigError extends Error {
  override name = "ConfigError";
}

/** An empty variable means "unset", as a shell user expects from `FOO= npm start`. */
function presentOf(env: NodeJS.ProcessEnv): Record<string, string> {
  return Object.fromEntries(
    Object.entries(env).filter((e): e is [string, string] => e[1] !== undefined && e[1] !== ""),
  );
}

function configError(problems: string[], heading = "invalid configuration"): ConfigError {
  return new ConfigError(`${heading}:\n${problems.map((p) => `  ${p}`).join("\n")}`);
}

function issuesOf(error: z.ZodError): string[] {
  return error.issues.map((i) => `${i.path.join(".")}: ${i.message}`);
}

function parse<T extends z.ZodType>(schema: T, env: NodeJS.ProcessEnv): z.infer<T> {
  const result = schema.safeParse(presentOf(env));
  if (!result.success) throw configError(issuesOf(result.error));
  return result.data;
}

/** TOKEN_ALG and TOKEN_SIGNING_KEYS, each fault named, as every other variable's. */
function tokenSigningOrThrow(env: NodeJS.ProcessEnv): TokenSigningConfig {
  const result = loadTokenSigning(env.TOKEN_ALG || undefined, env.TOKEN_SIGNING_KEYS || undefined);
  if (!result.ok) throw new ConfigError(`invalid configuration:\n  ${result.variable}: ${result.message}`);
  return result.config;
}
const truthy = new Set(["true", "1", "yes"]);

/** REDIS_CLUSTER_NODES with its password and TLS, as one setting (undefined: no cluster). */
function clusterNodesOf(e: {
  REDIS_CLUSTER_NODES?: RedisClusterNodes["nodes"] | undefined;
  REDIS_CLUSTER_PASSWORD?: string | undefined;
  REDIS_CLUSTER_TLS: boolean;
}): RedisClusterNodes | undefined {
  if (!e.REDIS_CLUSTER_NODES) return undefined;
  return {
    nodes: e.REDIS_CLUSTER_NODES,
    ...(e.REDIS_CLUSTER_PASSWORD ? { password: e.REDIS_CLUSTER_PASSWORD } : {}),
    ...(e.REDIS_CLUSTER_TLS ? { tls: true } : {}),
  };
}

/**
 * The Redis that REDIS_URL or REDIS_CLUSTER_NODES (with REDIS_CLUSTER_PASSWORD, REDIS_CLUSTER_TLS)
 * name, read as the gateway reads them (an empty value is unset), for a tool that needs only Redis
 * (scripts/redis-functions.ts); undefined when neither is set. Throws, naming the variable, on a
 * malformed value.
 */
export function redisTargetFromEnv(env: NodeJS.ProcessEnv = process.env): RedisTarget | undefined {
  const parsed = gatewaySchema
    .pick({ REDIS_URL: true, REDIS_CLUSTER_NODES: true, REDIS_CLUSTER_PASSWORD: true, REDIS_CLUSTER_TLS: true })
    .safeParse(presentOf(env));
  if (!parsed.success) {
    throw new Error(parsed.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`).join("; "));
  }
  const e = parsed.data;
  if (e.REDIS_URL && e.REDIS_CLUSTER_NODES) throw new Error("set REDIS_URL or REDIS_CLUSTER_NODES, not both");
  const cluster = clusterNodesOf(e);
  if (cluster) return { kind: "cluster", ...cluster };
  return e.REDIS_URL ? { kind: "server", url: e.REDIS_URL } : undefined;
}

/** `--role=<role>` on the command line wins over ROLE (npm run gateway / npm run worker use it). */
export function loadGatewayConfig(env: NodeJS.ProcessEnv = process.env, argv: string[] = process.argv): GatewayConfig {
  const roleFlag = argv.find((a) => a.startsWith("--role="))?.slice("--role=".length);
  const present = presentOf(roleFlag ? { ...env, ROLE: roleFlag } : env);
  const production = isProduction(present);
  // Every problem at once, in one message: an operator fixing a manifest should not meet them
  // one start at a time.
  const result = gatewaySchema.safeParse(present);
  const problems = result.success ? [] : issuesOf(result.error);
  if (present.REDIS_URL && present.REDIS_CLUSTER_NODES) {
    problems.push(
      "REDIS_CLUSTER_NODES: set either REDIS_URL (one server) or REDIS_CLUSTER_NODES (a cluster), not both",
    );
  }
  if (result.success && result.data.WAITING_ROOM_CLAIMS === "shards" && result.data.WAITING_ROOM_FAN_SHARDS === 0) {
    problems.push(
      "WAITING_ROOM_CLAIMS: shards keeps the fans' records on the fan shards; set WAITING_ROOM_FAN_SHARDS too (on m masters, m - 1)",
    );
  }
  const clusterTls = truthy.has(present.REDIS_CLUSTER_TLS ?? "");
  if (!present.REDIS_CLUSTER_NODES && (present.REDIS_CLUSTER_PASSWORD || clusterTls)) {
    problems.push("REDIS_CLUSTER_NODES: REDIS_CLUSTER_PASSWORD and REDIS_CLUSTER_TLS need REDIS_CLUSTER_NODES");
  }
  if (production) problems.push(...productionProblems(present));
  if (present.INVITE_PUBLIC_KEY) {
    try {
      loadInvitePublicKey(present.INVITE_PUBLIC_KEY);
    } catch (err) {
      problems.push(`INVITE_PUBLIC_KEY: ${(err as Error).message}`);
    }
  }
  if (problems.length > 0 || !result.success) {
    throw configError(problems, production ? "invalid configuration for production (NODE_ENV=production)" : undefined);
  }
  const e = result.data;
  return {
    production,
    port: e.PORT,
    host: e.HOST,
    logLevel: e.LOG_LEVEL,
    redisUrl: e.REDIS_URL,
    redisFunctions: e.REDIS_FUNCTIONS,
    redisCluster: clusterNodesOf(e),
    dynamodb: {
      endpoint: e.DYNAMODB_ENDPOINT,
      // Production with no endpoint is DynamoDB itself, in AWS_REGION; elsewhere no endpoint
      // means the embedded local one.
      embedded: !production && !e.DYNAMODB_ENDPOINT,
      localPort: e.DYNAMODB_PORT,
      table: e.DYNAMODB_TABLE,
      region: e.AWS_REGION,
      timeoutMs: e.DYNAMODB_TIMEOUT_MS,
      maxAttempts: e.DYNAMODB_MAX_ATTEMPTS,
    },
    dataDir: e.DATA_DIR,
    adminToken: e.ADMIN_TOKEN,
    operatorTokens: e.ADMIN_TOKENS ?? [],
    gatewaySecret: e.GATEWAY_SECRET,
    paymentTimeoutMs: e.PAYMENT_TIMEOUT_MS,
    paymentWebhookSecret: e.PAYMENT_WEBHOOK_SECRET,
    paymentRedisUrl: e.PAYMENT_REDIS_URL,
    notify: {
      webhookUrl: e.NOTIFY_WEBHOOK_URL,
      webhookSecret: e.NOTIFY_WEBHOOK_SECRET,
      fansPerSeat: e.NOTIFY_FANS_PER_SEAT,
      maxRequestsPerEvent: e.NOTIFY_MAX_REQUESTS_PER_EVENT,
    },
    rateLimitPerIp: e.RATE_LIMIT_PER_IP,
    rateLimitPerFan: e.RATE_LIMIT_PER_FAN,
    loadTestToken: e.LOAD_TEST_TOKEN,
    metricsToken: e.METRICS_TOKEN,
    invites: { secret: e.INVITE_SECRET, publicKey: e.INVITE_PUBLIC_KEY },
    trustProxy: e.TRUST_PROXY,
    drandRelays: e.DRAND_RELAYS,
    fanShards: e.WAITING_ROOM_FAN_SHARDS,
    claims: e.WAITING_ROOM_CLAIMS,
    httpKeepAliveTimeoutMs: e.HTTP_KEEP_ALIVE_TIMEOUT_MS,
    sse: {
      maxStreams: e.SSE_MAX_STREAMS,
      maxStreamsPerIp: e.SSE_MAX_STREAMS_PER_IP,
      backlogBytes: e.SSE_MAX_BACKLOG_BYTES,
      writeTimeoutMs: e.SSE_WRITE_TIMEOUT_MS,
    },
    demoEvent: e.DEMO_EVENT ?? !production,
    role: e.ROLE,
    tokens: tokenSigningOrThrow(env),
    shutdownDrainMs: e.SHUTDOWN_DRAIN_MS ?? (production ? PRODUCTION_SHUTDOWN_DRAIN_MS : 0),
    workerHealthPort: e.WORKER_HEALTH_PORT,
    workerLockMs: e.WORKER_LOCK_MS,
    workerStallMs: e.WORKER_STALL_MS,
    logFormat: e.LOG_FORMAT,
  };
}

const localDynamoSchema = z.object({
  DYNAMODB_PORT: port.default(8000),
  DYNAMODB_HOST: z.string().default("127.0.0.1"),
  /** Unset: in memory. `npm start` passes DATA_DIR/dynamodb. */
  DYNAMODB_DATA_PATH: z.string().optional(),
  LOG_LEVEL: z.string().default("info"),
  /** `aws`: TransactionConflict and per-partition throughput as DynamoDB (docs/local-dynamodb.md). */
  LOCAL_DYNAMODB_MODE: z.enum(["default", "aws"]).default("default"),
  /** A TransactWriteItems stays in flight (its items locked) at least this long. */
  LOCAL_DYNAMODB_TRANSACTION_MS: z.coerce.number().int().min(0).default(0),
  /** aws mode: write units/s of each partition (table or index, partition key value). */
  LOCAL_DYNAMODB_PARTITION_WCU: z.coerce.number().positive().default(1000),
  /** aws mode: read units/s of each partition. */
  LOCAL_DYNAMODB_PARTITION_RCU: z.coerce.number().positive().default(3000),
});

export type LocalDynamoMode = "default" | "aws";

export interface LocalDynamoConfig {
  port: number;
  host: string;
  path: string | undefined;
  logLevel: string;
  mode: LocalDynamoMode;
  transactionMs: number;
  partitionWcu: number;
  partitionRcu: number;
}

/**
 * For `npm run dynamodb`; command-line flags (--port, --host, --path, --mode, --transaction-ms,
 * --partition-wcu, --partition-rcu) win over the environment.
 */
export function loadLocalDynamoConfig(argv: string[], env: NodeJS.ProcessEnv = process.env): LocalDynamoConfig {
  const flags = new Map<string, string>();
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const v = argv[i + 1];
    if (a?.startsWith("--") && v !== undefined) {
      flags.set(a.slice(2), v);
      i++;
    }
  }
  const flagPort = flags.get("port");
  // a flag is parsed as the variable it stands for, with the same message when it is bad
  const e = parse(localDynamoSchema, {
    ...env,
    ...(flags.has("mode") ? { LOCAL_DYNAMODB_MODE: flags.get("mode") } : {}),
    ...(flags.has("transaction-ms") ? { LOCAL_DYNAMODB_TRANSACTION_MS: flags.get("transaction-ms") } : {}),
    ...(flags.has("partition-wcu") ? { LOCAL_DYNAMODB_PARTITION_WCU: flags.get("partition-wcu") } : {}),
    ...(flags.has("partition-rcu") ? { LOCAL_DYNAMODB_PARTITION_RCU: flags.get("partition-rcu") } : {}),
  });
  return {
    port: flagPort === undefined ? e.DYNAMODB_PORT : parse(z.object({ p: port }), { p: flagPort }).p,
    host: flags.get("host") ?? e.DYNAMODB_HOST,
    path: flags.get("path") ?? e.DYNAMODB_DATA_PATH,
    logLevel: e.LOG_LEVEL,
    mode: e.LOCAL_DYNAMODB_MODE,
    transactionMs: e.LOCAL_DYNAMODB_TRANSACTION_MS,
    partitionWcu: e.LOCAL_DYNAMODB_PARTITION_WCU,
    partitionRcu: e.LOCAL_DYNAMODB_PARTITION_RCU,
  };
}
