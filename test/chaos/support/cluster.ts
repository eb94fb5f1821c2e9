/**
 * A live on-sale made of real processes, for the chaos scenarios to break:
 *
 *   redis-server (its own, on its own port; SIGKILL loses everything, as the scenario wants)
 *   local DynamoDB (a child process with a LevelDB directory of its own: SIGKILLed and started
 *                   again on the same port, it comes back with its data)
 *   [proxy]        (test/chaos/support/proxy.ts, between the processes and DynamoDB)
 *   gateways       (src/main.ts --role=gateway, any number)
 *   worker(s)      (src/main.ts --role=worker; one, or `workers` of them)
 *
 * every process started with explicit settings (no rate limits, no demo event, the payment and
 * DynamoDB timeouts the scenario picks). The test side gets: an HTTP client that counts answers
 * by status (traffic.ts), the inventory and the simulated provider read directly from the
 * cluster's DynamoDB and Redis (for the audit and for checking what the store holds), and
 * kill/restart for every process. `close()` kills everything, and a process exit handler SIGKILLs
 * whatever is left if the test runner goes away first.
 */
import { setTimeout as sleep } from "node:timers/promises";
import { ADMIN_TOKEN, SECRET, uniqueId } from "../../gateway/harness.js";
import { startMainProcess, type MainProcess } from "../../support/processes.js";
import type { ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { DynamoDBDocumentClient, QueryCommand } from "@aws-sdk/lib-dynamodb";
import { Redis } from "ioredis";
import { type AuditReport, auditEvent } from "../../../src/audit/audit.js";
import { createDynamoClient } from "../../../src/dynamodb/client.js";
import { ensureTable } from "../../../src/dynamodb/table.js";
import { createInventory, type EventInput, type Inventory, type PurchaseStatus } from "../../../src/inventory/index.js";
import { keys } from "../../../src/inventory/keys.js";
import { type SpawnedDynamoDB, spawnLocalDynamoDB } from "../../../src/local/dynamodb.js";
import { type SpawnedRedis, spawnRedis } from "../../../src/local/redis.js";
import { type ChargeRecord, createSimulatedProvider } from "../../../src/payments/simulated.js";
import { REFUND_DUE } from "../../../src/purchases/saga.js";
import { type DynamoProxy, startDynamoProxy } from "../../support/dynamo-proxy.js";
import { Traffic } from "./traffic.js";

export { ADMIN_TOKEN };

export interface ClusterOptions {
  /** Gateway processes to start (default 1). */
  gateways?: number;
  /** Start the worker process (default true). */
  worker?: boolean;
  /** With `worker`: how many worker processes to start (default 1); the first is `worker`. */
  workers?: number;
  /** More variables for the worker processes only, after `env` (e.g. LOG_LEVEL=debug for their job logs). */
  workerEnv?: Record<string, string>;
  /** Put the proxy between the processes and DynamoDB (default false). */
  proxy?: boolean;
  /** With a proxy: does the worker go through it too (default true)? */
  workerThroughProxy?: boolean;
  paymentTimeoutMs?: number;
  dynamoTimeoutMs?: number;
  dynamoMaxAttempts?: number;
  /** More variables for every gateway and worker process. */
  env?: Record<string, string>;
  /**
   * Keep the simulated payment provider's ledger in a redis-server of its own (PAYMENT_REDIS_URL),
   * as a real provider's is elsewhere: killing the gateway's Redis then loses no charge record.
   */
  paymentRedis?: boolean;
}

export interface Cluster {
  tableName: string;
  /** The DynamoDB endpoint itself (not the proxy). */
  dynamoEndpoint: string;
  proxy: DynamoProxy | undefined;
  redisUrl: string;
  gateways: MainProcess[];
  worker: MainProcess | undefined;
  /** Every worker process started: `worker`, then those `startAnotherWorker` added. */
  workerProcesses: MainProcess[];
  /** Counts every answer the scenario's clients get. */
  traffic: Traffic;
  /** Reads and writes the cluster's DynamoDB directly (never through the proxy). */
  inventory: Inventory;
  dynamo: DynamoDBClient;
  /** A client of the cluster's Redis (reconnects after a restart). */
  redis: Redis;
  settings: { paymentTimeoutMs: number; dynamoTimeoutMs: number; dynamoMaxAttempts: number };

  startGateway(): Promise<MainProcess>;
  /** Kills gateway `index` (default: the first one alive) with `signal` (default SIGKILL). */
  killGateway(index?: number, signal?: NodeJS.Signals): Promise<MainProcess>;
  startWorker(): Promise<MainProcess>;
  killWorker(signal?: NodeJS.Signals): Promise<void>;
  /** One more worker process beside `worker` (BullMQ shares the jobs between them). */
  startAnotherWorker(): Promise<MainProcess>;
  killRedis(): Promise<void>;
  /** A new, empty redis-server on the same port. */
  restartRedis(): Promise<void>;
  killDynamo(): Promise<void>;
  /** The local DynamoDB again, same port, same data directory. */
  restartDynamo(): Promise<void>;

  putEvent(eventId: string, input: EventInput): Promise<void>;
  /**
   * Every seat of the event's sections as DynamoDB stores it (consistent reads), not as the
   * inventory presents it: a held seat whose hold has expired still reads `held` here until the
   * sweeper resets it.
   */
  storedSeats(eventId: string, sectionIds: readonly string[]): Promise<StoredSeat[]>;
  /** Purchases of the event by status, read from DynamoDB. */
  purchaseCounts(eventId: string): Promise<Record<PurchaseStatus, number>>;
  /**
   * Polls until no purchase of the event is pending, nor failed on its way to a refund (the
   * reconciler ran); returns how long it took.
   */
  waitUntilSettled(eventId: string, timeoutMs?: number): Promise<number>;
  /** Every charge the simulated provider recorded (in the cluster's Redis). */
  charges(): Promise<ChargeRecord[]>;
  /**
   * The audit (src/audit/audit.ts) of one event with the simulated provider's charges, plus
   * `extraCharges` (charges a scenario saved before it wiped the provider's Redis).
   */
  audit(eventId: string, options?: { allowPending?: boolean; extraCharges?: ChargeRecord[] }): Promise<AuditReport>;
  /** The last `lines` log lines of every gateway and worker process, for a failing test to print. */
  recentLogs(lines?: number): string;
  close(): Promise<void>;
}

export interface StoredSeat {
  id: string;
  status: "available" | "held" | "sold";
  holdId?: string;
  holderId?: string;
  holdExpiresAt?: number;
  purchaseId?: string;
}

const live = new Set<ChildProcess>();
let exitHookInstalled = false;

/** Whatever is still running when the runner exits (even on a crash) is killed, not orphaned. */
function track(child: ChildProcess): void {
  live.add(child);
  child.once("exit", () => live.delete(child));
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.once("exit", () => {
    for (const c of live) {
      try {
        if (c.pid) process.kill(c.pid, "SIGKILL");
      } catch {
        // already gone
      }
    }
  });
}

export async function startCluster(options: ClusterOptions = {}): Promise<Cluster> {
  const settings = {
    paymentTimeoutMs: options.paymentTimeoutMs ?? 1_000,
    dynamoTimeoutMs: options.dynamoTimeoutMs ?? 2_000,
    dynamoMaxAttempts: options.dynamoMaxAttempts ?? 2,
  };
  const dataDir = mkdtempSync(join(tmpdir(), "chaos-"));
  const dynamoPath = join(dataDir, "dynamodb");
  const tableName = `chaos_${uniqueId("t")}`;
  const cleanups: Array<() => Promise<void>> = [];
  const gateways: MainProcess[] = [];
  let worker: MainProcess | undefined;
  const otherWorkers: MainProcess[] = [];
  let redisServer: SpawnedRedis | undefined;
  let paymentRedisServer: SpawnedRedis | undefined;
  let dynamoServer: SpawnedDynamoDB | undefined;

  const closeAll = async () => {
    await Promise.allSettled([...gateways, ...(worker ? [worker] : []), ...otherWorkers].map((p) => p.stop("SIGKILL")));
    for (const c of cleanups.reverse()) await c().catch(() => undefined);
    if (redisServer) await killChild(redisServer.child);
    if (paymentRedisServer) await killChild(paymentRedisServer.child);
    if (dynamoServer) await killChild(dynamoServer.child);
    rmSync(dataDir, { recursive: true, force: true });
  };

  try {
    redisServer = await spawnRedis();
    track(redisServer.child);
    const redisPort = redisServer.port;
    if (options.paymentRedis) {
      paymentRedisServer = await spawnRedis();
      track(paymentRedisServer.child);
    }
    dynamoServer = await spawnLocalDynamoDB({ port: 0, path: dynamoPath });
    track(dynamoServer.child);
    const dynamoPort = dynamoServer.port;
    const dynamoEndpoint = dynamoServer.endpoint;
    const proxy = options.proxy ? await startDynamoProxy(dynamoEndpoint) : undefined;
    if (proxy) cleanups.push(() => proxy.close());

    const dynamo = createDynamoClient({ endpoint: dynamoEndpoint, region: "us-east-1", maxAttempts: 3 });
    cleanups.push(async () => dynamo.destroy());
    await ensureTable(dynamo, tableName);
    const inventory = createInventory({ client: dynamo, tableName, eventCacheMs: 0 });
    const redis = new Redis(redisServer.url, { maxRetriesPerRequest: 1 });
    redis.on("error", () => undefined);
    cleanups.push(async () => redis.disconnect());
    let providerRedis = redis;
    if (paymentRedisServer) {
      const own = new Redis(paymentRedisServer.url, { maxRetriesPerRequest: 1 });
      own.on("error", () => undefined);
      cleanups.push(async () => own.disconnect());
      providerRedis = own;
    }
    const provider = createSimulatedProvider({ redis: providerRedis });
    const traffic = new Traffic(() => {
      const up = gateways.filter((g) => g.alive() && g.url);
      return up.length ? up[Math.floor(Math.random() * up.length)]!.url : undefined;
    });

    const processEnv = (through: boolean): Record<string, string> => ({
      REDIS_URL: redisServer!.url,
      ...(paymentRedisServer ? { PAYMENT_REDIS_URL: paymentRedisServer.url } : {}),
      DYNAMODB_ENDPOINT: through && proxy ? proxy.endpoint : dynamoEndpoint,
      DYNAMODB_TABLE: tableName,
      DYNAMODB_TIMEOUT_MS: String(settings.dynamoTimeoutMs),
      DYNAMODB_MAX_ATTEMPTS: String(settings.dynamoMaxAttempts),
      ADMIN_TOKEN,
      GATEWAY_SECRET: SECRET,
      DATA_DIR: dataDir,
      DEMO_EVENT: "false",
      RATE_LIMIT_PER_IP: "0",
      RATE_LIMIT_PER_FAN: "0",
      PAYMENT_TIMEOUT_MS: String(settings.paymentTimeoutMs),
      // info: the readiness checks wait for info lines; requests themselves log at debug.
      LOG_LEVEL: "info",
      ...options.env,
    });

    const cluster: Cluster = {
      tableName,
      dynamoEndpoint,
      proxy,
      redisUrl: redisServer.url,
      gateways,
      get worker() {
        return worker;
      },
      get workerProcesses() {
        return [...(worker ? [worker] : []), ...otherWorkers];
      },
      traffic,
      inventory,
      dynamo,
      redis,
      settings,

      async startGateway() {
        const env = processEnv(true);
        const gw = await startMainProcess({ role: "gateway", env, timeoutMs: 60_000 });
        track(gw.child);
        gateways.push(gw);
        return gw;
      },
      async killGateway(index, signal = "SIGKILL") {
        const gw = index === undefined ? gateways.find((g) => g.alive()) : gateways[index];
        if (!gw) throw new Error("no gateway to kill");
        await gw.stop(signal);
        return gw;
      },
      async startWorker() {
        if (worker?.alive()) throw new Error("the worker is already running");
        const env = { ...processEnv(options.workerThroughProxy ?? true), ...options.workerEnv };
        worker = await startMainProcess({ role: "worker", env, timeoutMs: 60_000 });
        track(worker.child);
        return worker;
      },
      async startAnotherWorker() {
        const env = { ...processEnv(options.workerThroughProxy ?? true), ...options.workerEnv };
        const another = await startMainProcess({ role: "worker", env, timeoutMs: 60_000 });
        track(another.child);
        otherWorkers.push(another);
        return another;
      },
      async killWorker(signal = "SIGKILL") {
        await worker?.stop(signal);
      },
      async killRedis() {
        await killChild(redisServer!.child);
      },
      async restartRedis() {
        redisServer = await spawnRedis({ port: redisPort, startTimeoutMs: 20_000 });
        track(redisServer.child);
      },
      async killDynamo() {
        await killChild(dynamoServer!.child);
      },
      async restartDynamo() {
        dynamoServer = await spawnLocalDynamoDB({ port: dynamoPort, path: dynamoPath, startTimeoutMs: 60_000 });
        track(dynamoServer.child);
      },

      async putEvent(eventId, input) {
        const res = await traffic.request(`/v1/admin/events/${eventId}`, {
          method: "PUT",
          json: input,
          token: ADMIN_TOKEN,
          kind: "admin",
        });
        if (res.status !== 201 && res.status !== 200) {
          throw new Error(`PUT event ${eventId}: ${res.status} ${JSON.stringify(res.body)}`);
        }
      },
      async storedSeats(eventId, sectionIds) {
        const doc = DynamoDBDocumentClient.from(dynamo);
        const out: StoredSeat[] = [];
        for (const sectionId of sectionIds) {
          const partition = keys.sectionPartition(eventId, sectionId);
          let start: Record<string, unknown> | undefined;
          do {
            const page = await doc.send(
              new QueryCommand({
                TableName: tableName,
                KeyConditionExpression: "PK = :pk AND begins_with(SK, :seat)",
                ExpressionAttributeValues: { ":pk": partition, ":seat": "SEAT#" },
                ConsistentRead: true,
                ...(start ? { ExclusiveStartKey: start } : {}),
              }),
            );
            for (const item of page.Items ?? []) {
              out.push({
                id: String(item.seatId),
                status: item.status as StoredSeat["status"],
                ...(item.holdId !== undefined ? { holdId: String(item.holdId) } : {}),
                ...(item.holderId !== undefined ? { holderId: String(item.holderId) } : {}),
                ...(item.holdExpiresAt !== undefined ? { holdExpiresAt: Number(item.holdExpiresAt) } : {}),
                ...(item.purchaseId !== undefined ? { purchaseId: String(item.purchaseId) } : {}),
              });
            }
            start = page.LastEvaluatedKey;
          } while (start);
        }
        return out;
      },
      purchaseCounts: (eventId) => inventory.purchases.count({ eventId }),
      async waitUntilSettled(eventId, timeoutMs = 90_000) {
        const started = Date.now();
        // Pending, or failed on the way to a refund (src/purchases/saga.ts REFUND_DUE): not settled.
        const unsettled = async () => {
          const counts = await inventory.purchases.count({ eventId });
          if (counts.pending > 0 || counts.failed === 0) return counts.pending;
          const failed = await inventory.purchases.list({ eventId, status: "failed", limit: 1_000 });
          return failed.purchases.filter((p) => p.failureReason === REFUND_DUE).length;
        };
        let left = await unsettled();
        while (left > 0) {
          if (Date.now() - started > timeoutMs) {
            throw new Error(`${left} purchases of ${eventId} still pending after ${timeoutMs} ms`);
          }
          await sleep(250);
          left = await unsettled().catch(() => left);
        }
        return Date.now() - started;
      },
      charges: () => provider.listCharges(),
      async audit(eventId, auditOptions = {}) {
        const payments = {
          listCharges: async () => {
            const byId = new Map<string, ChargeRecord>();
            for (const c of auditOptions.extraCharges ?? []) byId.set(c.chargeId, c);
            // The provider's own record wins: it knows about refunds made since the copy.
            for (const c of await provider.listCharges()) byId.set(c.chargeId, c);
            return [...byId.values()];
          },
        };
        return auditEvent({ inventory, payments }, eventId, { allowPending: auditOptions.allowPending ?? false });
      },
      recentLogs(lines = 30) {
        const procs = [
          ...gateways.map((g, i) => [`gateway ${i}`, g] as const),
          ["worker", worker] as const,
          ...otherWorkers.map((w, i) => [`worker ${i + 2}`, w] as const),
        ];
        return procs
          .filter(([, p]) => p)
          .map(
            ([name, p]) =>
              `--- ${name} (pid ${p!.pid}${p!.alive() ? "" : ", exited"})\n${p!.logs.slice(-lines).join("\n")}`,
          )
          .join("\n");
      },
      close: closeAll,
    };

    for (let i = 0; i < (options.gateways ?? 1); i++) await cluster.startGateway();
    if (options.worker ?? true) {
      await cluster.startWorker();
      for (let i = 1; i < (options.workers ?? 1); i++) await cluster.startAnotherWorker();
    }
    return cluster;
  } catch (err) {
    await closeAll();
    throw err;
  }
}

/** SIGKILL, and wait for the exit. */
async function killChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  child.kill("SIGKILL");
  await exited;
}

// The platform's, re-exported for the tests that import it from here.
export { sleep };
