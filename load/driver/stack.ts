/**
 * A gateway of the driver's own: a free-port redis-server (or, with `redisCluster`, a Redis
 * Cluster: one started here, 3 masters, or the seed nodes given), the local DynamoDB, and
 * src/main.ts in a child process (PORT=0, no demo event); with `gateways` N, N such processes on the
 * same stores, whose URLs the driver takes in turn (as several --base-url). Its rate limits are on, at their defaults: the
 * driver carries the gateway's load-test token, which lifts the per-IP limit (every fan comes
 * from this one host) and leaves the per-fan one, as fans meet it.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { type SpawnedDynamoDB, spawnLocalDynamoDB } from "../../src/local/dynamodb.js";
import { type SpawnedRedis, type SpawnedRedisCluster, spawnRedis, spawnRedisCluster } from "../../src/local/redis.js";
import { parseClusterNodes, type RedisTarget } from "../../src/redis/connect.js";

export interface Stack {
  /** The gateways' URLs, comma-separated (one unless `gateways` was more). */
  url: string;
  urls: string[];
  adminToken: string;
  /** The gateway's LOAD_TEST_TOKEN. */
  loadTestToken: string;
  /** The gateway's Redis: a server or a cluster. */
  redis: RedisTarget;
  dynamoEndpoint: string;
  table: string;
  gateways: ChildProcess[];
  stop(): Promise<void>;
}

/** At most this many gateway processes of the driver's own. */
export const MAX_OWN_GATEWAYS = 8;

const root = fileURLToPath(new URL("../../", import.meta.url));

/** The URL the gateway child logs once it listens; rejects when it exits first or takes 60 s. */
function listeningUrl(gateway: ChildProcess, logs: string[]): Promise<string> {
  return new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`gateway did not start:\n${logs.join("")}`)), 60_000);
    const lines = createInterface({ input: gateway.stdout! });
    lines.on("line", (line) => {
      if (logs.length < 200) logs.push(line);
      try {
        const entry = JSON.parse(line) as { msg?: string; url?: string };
        if (entry.msg === "gateway listening" && entry.url) {
          clearTimeout(timer);
          resolve(entry.url.replace("localhost", "127.0.0.1"));
        }
      } catch {}
    });
    gateway.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`gateway exited with ${code}:\n${logs.join("\n")}`));
    });
  });
}

export async function startStack(
  options: {
    redisUrl?: string;
    /** `true`: a local cluster of 3 masters started here; a string: seed nodes (REDIS_CLUSTER_NODES). */
    redisCluster?: boolean | string;
    dynamoEndpoint?: string;
    env?: Record<string, string>;
    /** Gateway processes on the same stores (default 1). */
    gateways?: number;
  } = {},
): Promise<Stack> {
  if (options.redisUrl && options.redisCluster) throw new Error("give a Redis URL or a Redis Cluster, not both");
  const count = options.gateways ?? 1;
  if (!Number.isInteger(count) || count < 1 || count > MAX_OWN_GATEWAYS) {
    throw new Error(`gateways: 1 to ${MAX_OWN_GATEWAYS}, not ${count}`);
  }
  const ownCluster: SpawnedRedisCluster | undefined =
    options.redisCluster === true ? await spawnRedisCluster({ masters: 3 }) : undefined;
  const redis: SpawnedRedis | undefined = options.redisUrl || options.redisCluster ? undefined : await spawnRedis();
  const dynamo: SpawnedDynamoDB | undefined = options.dynamoEndpoint
    ? undefined
    : await spawnLocalDynamoDB({ port: 0 });
  const target: RedisTarget = ownCluster
    ? { kind: "cluster", nodes: ownCluster.nodes }
    : typeof options.redisCluster === "string"
      ? { kind: "cluster", nodes: parseClusterNodes(options.redisCluster) }
      : { kind: "server", url: options.redisUrl ?? redis!.url };
  const redisEnv: Record<string, string> =
    target.kind === "cluster"
      ? { REDIS_CLUSTER_NODES: target.nodes.map((n) => `${n.host}:${n.port}`).join(","), REDIS_URL: "" }
      : { REDIS_URL: target.url, REDIS_CLUSTER_NODES: "" };
  const dynamoEndpoint = options.dynamoEndpoint ?? dynamo!.endpoint;
  const adminToken = `load_${randomBytes(12).toString("hex")}`;
  const loadTestToken = `loadgen_${randomBytes(12).toString("hex")}`;
  const table = `load_${Date.now().toString(36)}`;
  const gatewaySecret = randomBytes(32).toString("hex");
  const dataDirs: string[] = [];
  // Every gateway alike (one secret, one admin token): a fan's requests go to each in turn.
  const spawnGateway = () => {
    const dataDir = mkdtempSync(join(tmpdir(), "load-gw-"));
    dataDirs.push(dataDir);
    return spawn(process.execPath, ["--import", "tsx", "src/main.ts"], {
      cwd: root,
      env: {
        ...process.env,
        PORT: "0",
        HOST: "127.0.0.1",
        LOG_LEVEL: "info",
        LOAD_TEST_TOKEN: loadTestToken,
        DEMO_EVENT: "false",
        ...redisEnv,
        DYNAMODB_ENDPOINT: dynamoEndpoint,
        DYNAMODB_TABLE: table,
        ADMIN_TOKEN: adminToken,
        GATEWAY_SECRET: gatewaySecret,
        DATA_DIR: dataDir,
        AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: "true",
        ...options.env,
      },
      stdio: ["ignore", "pipe", "pipe"],
    });
  };
  const gateways = Array.from({ length: count }, spawnGateway);
  const logs = gateways.map((gateway) => {
    const lines: string[] = [];
    gateway.stderr?.on("data", (d: Buffer) => lines.push(d.toString()));
    return lines;
  });
  // The driver exiting any other way than through stop() (a crash in a fan's journey, process.exit,
  // a SIGTERM from `timeout` or a CI runner) takes its gateway and Redis with it: they would live on
  // as orphans, holding ports and CPU under the next run (the local DynamoDB exits with its parent).
  const own = [
    ...gateways,
    ...(redis ? [redis.child] : []),
    ...(ownCluster ? ownCluster.masters.concat(ownCluster.replicas).map((n) => n.child) : []),
  ];
  const killOwn = () => {
    for (const child of own) if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  };
  const onSignal = (signal: NodeJS.Signals) => {
    killOwn();
    process.kill(process.pid, signal);
  };
  process.once("exit", killOwn);
  process.once("SIGTERM", onSignal);
  process.once("SIGINT", onSignal);
  const forgetOwn = () => {
    process.off("exit", killOwn);
    process.off("SIGTERM", onSignal);
    process.off("SIGINT", onSignal);
  };
  const stopStores = async () => {
    await redis?.close();
    await ownCluster?.close();
    await dynamo?.close();
    for (const dir of dataDirs) rmSync(dir, { recursive: true, force: true });
  };
  let urls: string[];
  try {
    urls = await Promise.all(gateways.map((gateway, i) => listeningUrl(gateway, logs[i] as string[])));
  } catch (err) {
    for (const gateway of gateways) gateway.kill("SIGKILL");
    await stopStores();
    forgetOwn();
    throw err;
  }
  return {
    url: urls.join(","),
    urls,
    adminToken,
    loadTestToken,
    redis: target,
    dynamoEndpoint,
    table,
    gateways,
    stop: async () => {
      await Promise.all(
        gateways.map(async (gateway) => {
          if (gateway.exitCode !== null || gateway.signalCode !== null) return;
          await new Promise<void>((resolve) => {
            gateway.once("exit", () => resolve());
            gateway.kill("SIGTERM");
            setTimeout(() => gateway.kill("SIGKILL"), 10_000).unref();
          });
        }),
      );
      await stopStores();
      forgetOwn();
    },
  };
}
