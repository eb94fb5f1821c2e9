/**
 * Finds or starts what the gateway stands on, so that `npm start` on a fresh clone works with no
 * configuration at all:
 *  - Redis: REDIS_CLUSTER_NODES (a cluster, used as given) or REDIS_URL; else 127.0.0.1:6379 when
 *    it answers; else a redis-server started here.
 *  - DynamoDB: DYNAMODB_ENDPOINT; else the local DynamoDB as a child process, data under DATA_DIR
 *    (in production, NODE_ENV=production: DynamoDB of AWS_REGION instead).
 * Production mode never gets here without REDIS_URL/REDIS_CLUSTER_NODES and both secrets
 * (src/config.ts refuses to start), so nothing below is probed, started or generated there.
 *  - Secrets: ADMIN_TOKEN / GATEWAY_SECRET; else generated once and kept in DATA_DIR/secrets.json,
 *    so tokens stay valid across restarts. With TOKEN_ALG ES256 or EdDSA and no TOKEN_SIGNING_KEYS,
 *    the same for a signing key of that algorithm (`tokenSigningKeys` in the file, one per algorithm).
 */
import { randomBytes } from "node:crypto";
import { chmodSync, existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import type { GatewayConfig } from "./config.js";
import type { Logger } from "./logger.js";
import { createDynamoClient } from "./dynamodb/client.js";
import { lacksOpenPurchasesIndex } from "./dynamodb/table.js";
import { spawnLocalDynamoDB } from "./local/dynamodb.js";
import { redisAnswers, spawnRedis } from "./local/redis.js";
import type { RedisTarget } from "./redis/connect.js";
import { type AsymmetricAlgorithm, generateSigningKey, type SigningKeyInput } from "./waiting-room/index.js";

type Stop = () => Promise<void>;

/** What the gateway stands on (not its services: those are src/services.ts). */
export interface Infrastructure {
  redis: RedisTarget;
  dynamoEndpoint: string | undefined;
  adminToken: string;
  /**
   * Where the operator token came from: ADMIN_TOKEN (`supplied`), DATA_DIR/secrets.json from an
   * earlier start (`stored`), or made on this start (`generated`, the only time it is printed).
   */
  adminTokenSource: "supplied" | "stored" | "generated";
  /** DATA_DIR/secrets.json, when the secrets file was used. */
  secretsFile: string | undefined;
  gatewaySecret: string;
  /** The ES256 or EdDSA keys that sign tokens (TOKEN_SIGNING_KEYS, or kept in DATA_DIR); undefined: HS256. */
  tokenSigningKeys: SigningKeyInput[] | undefined;
  /** Stops what bootstrap started, in reverse order. */
  stop: Stop;
}

const DEFAULT_REDIS = "redis://127.0.0.1:6379";

async function resolveRedis(config: GatewayConfig, log: Logger, stops: Stop[]): Promise<RedisTarget> {
  if (config.redisCluster) return { kind: "cluster", ...config.redisCluster };
  return { kind: "server", url: await resolveRedisServer(config, log, stops) };
}

async function resolveRedisServer(config: GatewayConfig, log: Logger, stops: Stop[]): Promise<string> {
  if (config.redisUrl) return config.redisUrl;
  if (await redisAnswers(DEFAULT_REDIS)) {
    log.info({ redis: DEFAULT_REDIS }, "using the Redis on the default port");
    return DEFAULT_REDIS;
  }
  try {
    const redis = await spawnRedis();
    stops.push(redis.close);
    log.info({ redis: redis.url }, "started a redis-server of our own (nothing answered on 6379)");
    return redis.url;
  } catch (err) {
    throw new Error(
      `no Redis: nothing answers on 127.0.0.1:6379 and ${(err as Error).message}. ` +
        "Set REDIS_URL, start Redis, or install redis-server.",
    );
  }
}

async function resolveDynamo(config: GatewayConfig, log: Logger, stops: Stop[]): Promise<string | undefined> {
  // Production: the endpoint given, or none (the SDK's endpoint of AWS_REGION); never embedded.
  if (!config.dynamodb.embedded) return config.dynamodb.endpoint;
  // Another process of ours (`npm run dynamodb`, or a gateway started first) may already serve
  // the local store on its port: share it rather than open the same data directory twice.
  const existing = `http://127.0.0.1:${config.dynamodb.localPort}`;
  if (config.dynamodb.localPort !== 0 && (await dynamoAnswers(existing))) {
    log.info({ endpoint: existing }, "using the local DynamoDB already running");
    return existing;
  }
  const path = resolve(config.dataDir, "dynamodb");
  const spawnAt = async (port: number) => {
    try {
      return await spawnLocalDynamoDB({ port, path });
    } catch (err) {
      log.warn({ err: (err as Error).message, port }, "local DynamoDB port busy; using a free one");
      return spawnLocalDynamoDB({ port: 0, path });
    }
  };
  let db = await spawnAt(config.dynamodb.localPort);
  // The demo's local store, kept from a version before the open-purchases index: the local
  // DynamoDB cannot add an index to a table (src/dynamodb/table.ts), so the old data is moved aside
  // (kept, not deleted) and the gateway starts on a new table; the demo event is made again.
  if (await madeBeforeOpenPurchasesIndex(db.endpoint, config.dynamodb.region, config.dynamodb.table)) {
    await db.close();
    const aside = `${path}-before-gsi3-${new Date().toISOString().replace(/[:.]/g, "-")}`;
    renameSync(path, aside);
    log.warn(
      { movedTo: aside, table: config.dynamodb.table },
      "the local DynamoDB data was made by an older version (its table has no open-purchases index, which the local DynamoDB cannot add): moved aside, starting on a new table",
    );
    db = await spawnAt(config.dynamodb.localPort);
  }
  stops.push(db.close);
  log.info({ endpoint: db.endpoint, path }, "started the embedded local DynamoDB");
  return db.endpoint;
}

/** Whether the store at `endpoint` holds `table` made before GSI3 (false when it holds no such table). */
async function madeBeforeOpenPurchasesIndex(endpoint: string, region: string, table: string): Promise<boolean> {
  const client = createDynamoClient({ endpoint, region, maxAttempts: 2 });
  try {
    return await lacksOpenPurchasesIndex(client, table);
  } finally {
    client.destroy();
  }
}

/** True when a DynamoDB endpoint answers (any DynamoDB answers an unsigned call with `__type`). */
export async function dynamoAnswers(endpoint: string): Promise<boolean> {
  try {
    const res = await fetch(endpoint, {
      method: "POST",
      headers: { "content-type": "application/x-amz-json-1.0", "x-amz-target": "DynamoDB_20120810.ListTables" },
      body: "{}",
      signal: AbortSignal.timeout(1_000),
    });
    // Any DynamoDB answers an unsigned request with a JSON error naming the missing signature.
    return (await res.text()).includes("__type");
  } catch {
    return false;
  }
}

interface StoredSecrets {
  adminToken: string;
  gatewaySecret: string;
  /** A generated signing key per algorithm, for TOKEN_ALG ES256 or EdDSA without TOKEN_SIGNING_KEYS. */
  tokenSigningKeys?: Partial<Record<AsymmetricAlgorithm, SigningKeyInput>>;
}

type ResolvedSecrets = Omit<StoredSecrets, "tokenSigningKeys"> &
  Pick<Infrastructure, "adminTokenSource" | "secretsFile">;

function resolveSecrets(config: GatewayConfig, log: Logger): ResolvedSecrets {
  if (config.adminToken && config.gatewaySecret) {
    return {
      adminToken: config.adminToken,
      gatewaySecret: config.gatewaySecret,
      adminTokenSource: "supplied",
      secretsFile: undefined,
    };
  }
  mkdirSync(config.dataDir, { recursive: true });
  const file = join(config.dataDir, "secrets.json");
  let stored: Partial<StoredSecrets> = {};
  if (existsSync(file)) stored = JSON.parse(readFileSync(file, "utf8")) as Partial<StoredSecrets>;
  const secrets: StoredSecrets = {
    adminToken: config.adminToken ?? stored.adminToken ?? `adm_${randomBytes(18).toString("base64url")}`,
    gatewaySecret: config.gatewaySecret ?? stored.gatewaySecret ?? randomBytes(48).toString("base64url"),
  };
  if (secrets.adminToken !== stored.adminToken || secrets.gatewaySecret !== stored.gatewaySecret) {
    writeFileSync(file, `${JSON.stringify({ ...stored, ...secrets }, null, 2)}\n`, { mode: 0o600 });
    chmodSync(file, 0o600);
    log.info({ file }, "generated secrets for this data directory (set ADMIN_TOKEN and GATEWAY_SECRET in production)");
  }
  const adminTokenSource = config.adminToken
    ? "supplied"
    : stored.adminToken === secrets.adminToken
      ? "stored"
      : "generated";
  return { ...secrets, adminTokenSource, secretsFile: file };
}

/**
 * The configured key set; else, for TOKEN_ALG ES256 or EdDSA, the key of that algorithm kept in
 * DATA_DIR/secrets.json, generated on the first start that asks for it (one gateway's key: several
 * gateways, or any verifier outside, need TOKEN_SIGNING_KEYS).
 */
function resolveTokenKeys(config: GatewayConfig, log: Logger): SigningKeyInput[] | undefined {
  const { alg, signingKeys } = config.tokens;
  if (signingKeys || alg === "HS256") return signingKeys;
  mkdirSync(config.dataDir, { recursive: true });
  const file = join(config.dataDir, "secrets.json");
  const stored = (existsSync(file) ? JSON.parse(readFileSync(file, "utf8")) : {}) as Partial<StoredSecrets>;
  const kept = stored.tokenSigningKeys?.[alg];
  if (kept) return [{ ...kept, state: "active" }];
  const key = generateSigningKey(alg);
  const next = { ...stored, tokenSigningKeys: { ...stored.tokenSigningKeys, [alg]: key } };
  writeFileSync(file, `${JSON.stringify(next, null, 2)}\n`, { mode: 0o600 });
  chmodSync(file, 0o600);
  log.info(
    { file, alg, kid: key.kid },
    "generated a token signing key for this data directory (set TOKEN_SIGNING_KEYS in production: every gateway signs with the same keys)",
  );
  return [key];
}

export async function startInfrastructure(config: GatewayConfig, log: Logger): Promise<Infrastructure> {
  const stops: Stop[] = [];
  const stop: Stop = async () => {
    for (const s of stops.reverse()) await s().catch(() => {});
  };
  try {
    const [redis, dynamoEndpoint] = await Promise.all([
      resolveRedis(config, log, stops),
      resolveDynamo(config, log, stops),
    ]);
    const secrets = resolveSecrets(config, log);
    return { redis, dynamoEndpoint, ...secrets, tokenSigningKeys: resolveTokenKeys(config, log), stop };
  } catch (err) {
    await stop();
    throw err;
  }
}
