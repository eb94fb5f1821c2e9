/**
 * The environment, parsed once. Nothing else in src/ reads process.env: a bad value stops the
 * process at start with a message naming the variable, never a surprise at the first request.
 */
import { z } from "zod";
import { parseClusterNodes, type RedisClusterNodes } from "./redis/connect.js";
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
  RATE_LIMIT_PER_IP: z.coerce.number().min(0).default(50),
  RATE_LIMIT_PER_FAN: z.coerce.number().min(0).default(5),
  /**
   * A secret the operator hands to the load generators: requests carrying it (X-Load-Test-Token)
   * skip the per-IP limit, never the per-fan one, so a load test runs with the limits on. Unset: off.
   */
  LOAD_TEST_TOKEN: z.string().min(16).optional(),
  /** A bearer token /metrics asks for (Authorization: Bearer ...); unset: /metrics is open. */
  METRICS_TOKEN: z.string().min(16).optional(),
  TRUST_PROXY: bool.default(false),
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
  DEMO_EVENT: bool.default(true),
  /** all: gateway and workers in one process (npm start); gateway or worker: one of them. */
  ROLE: z.enum(["all", "gateway", "worker"]).default("all"),
});

export type GatewayConfig = {
  port: number;
  host: string;
  logLevel: string;
  redisUrl: string | undefined;
  /** Set instead of `redisUrl` for a Redis Cluster (REDIS_CLUSTER_NODES). */
  redisCluster: RedisClusterNodes | undefined;
  dynamodb: {
    endpoint: string | undefined;
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
  rateLimitPerIp: number;
  rateLimitPerFan: number;
  loadTestToken: string | undefined;
  metricsToken: string | undefined;
  trustProxy: boolean;
  httpKeepAliveTimeoutMs: number;
  sse: { maxStreams: number; maxStreamsPerIp: number; backlogBytes: number; writeTimeoutMs: number };
  demoEvent: boolean;
  role: "all" | "gateway" | "worker";
  /** TOKEN_ALG and TOKEN_SIGNING_KEYS (src/waiting-room/token-config.ts). */
  tokens: TokenSigningConfig;
};

export class ConfigError extends Error {
  override name = "ConfigError";
}

function parse<T extends z.ZodType>(schema: T, env: NodeJS.ProcessEnv): z.infer<T> {
  // An empty variable means "unset", as a shell user expects from `FOO= npm start`.
  const present = Object.fromEntries(Object.entries(env).filter(([, v]) => v !== undefined && v !== ""));
  const result = schema.safeParse(present);
  if (!result.success) {
    const lines = result.error.issues.map((i) => `  ${i.path.join(".")}: ${i.message}`);
    throw new ConfigError(`invalid configuration:\n${lines.join("\n")}`);
  }
  return result.data;
}

/** TOKEN_ALG and TOKEN_SIGNING_KEYS, each fault named, as every other variable's. */
function tokenSigningOrThrow(env: NodeJS.ProcessEnv): TokenSigningConfig {
  const result = loadTokenSigning(env.TOKEN_ALG || undefined, env.TOKEN_SIGNING_KEYS || undefined);
  if (!result.ok) throw new ConfigError(`invalid configuration:\n  ${result.variable}: ${result.message}`);
  return result.config;
}

/** `--role=<role>` on the command line wins over ROLE (npm run gateway / npm run worker use it). */
export function loadGatewayConfig(env: NodeJS.ProcessEnv = process.env, argv: string[] = process.argv): GatewayConfig {
  const roleFlag = argv.find((a) => a.startsWith("--role="))?.slice("--role=".length);
  const e = parse(gatewaySchema, roleFlag ? { ...env, ROLE: roleFlag } : env);
  if (e.REDIS_URL && e.REDIS_CLUSTER_NODES) {
    throw new ConfigError(
      "invalid configuration:\n  REDIS_CLUSTER_NODES: set either REDIS_URL (one server) or REDIS_CLUSTER_NODES (a cluster), not both",
    );
  }
  if (!e.REDIS_CLUSTER_NODES && (e.REDIS_CLUSTER_PASSWORD || e.REDIS_CLUSTER_TLS)) {
    throw new ConfigError(
      "invalid configuration:\n  REDIS_CLUSTER_NODES: REDIS_CLUSTER_PASSWORD and REDIS_CLUSTER_TLS need REDIS_CLUSTER_NODES",
    );
  }
  return {
    port: e.PORT,
    host: e.HOST,
    logLevel: e.LOG_LEVEL,
    redisUrl: e.REDIS_URL,
    redisCluster: e.REDIS_CLUSTER_NODES
      ? {
          nodes: e.REDIS_CLUSTER_NODES,
          ...(e.REDIS_CLUSTER_PASSWORD ? { password: e.REDIS_CLUSTER_PASSWORD } : {}),
          ...(e.REDIS_CLUSTER_TLS ? { tls: true } : {}),
        }
      : undefined,
    dynamodb: {
      endpoint: e.DYNAMODB_ENDPOINT,
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
    rateLimitPerIp: e.RATE_LIMIT_PER_IP,
    rateLimitPerFan: e.RATE_LIMIT_PER_FAN,
    loadTestToken: e.LOAD_TEST_TOKEN,
    metricsToken: e.METRICS_TOKEN,
    trustProxy: e.TRUST_PROXY,
    httpKeepAliveTimeoutMs: e.HTTP_KEEP_ALIVE_TIMEOUT_MS,
    sse: {
      maxStreams: e.SSE_MAX_STREAMS,
      maxStreamsPerIp: e.SSE_MAX_STREAMS_PER_IP,
      backlogBytes: e.SSE_MAX_BACKLOG_BYTES,
      writeTimeoutMs: e.SSE_WRITE_TIMEOUT_MS,
    },
    demoEvent: e.DEMO_EVENT,
    role: e.ROLE,
    tokens: tokenSigningOrThrow(env),
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
