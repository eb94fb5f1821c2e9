/**
 * The composition root: parse config, find or start Redis and DynamoDB, build each client once,
 * hand them to the app, serve, and shut down in order on SIGTERM/SIGINT.
 */
import { Redis } from "ioredis";
import { startServices } from "./bootstrap.js";
import { ConfigError, type GatewayConfig, loadGatewayConfig } from "./config.js";
import { DEMO_EVENT_ID, ensureDemoEvent } from "./demo.js";
import { createDynamoClient } from "./dynamodb/client.js";
import { ensureTable } from "./dynamodb/table.js";
import { buildGatewayDeps, derivedWebhookSecret } from "./gateway.js";
import { buildApp } from "./http/app.js";
import { listenApp } from "./http/serve.js";
import { createLogger } from "./logger.js";
import { createMetrics } from "./metrics.js";
import { signWebhookEvent, WEBHOOK_SIGNATURE_HEADER } from "./payments/webhook.js";
import { waitForRedis } from "./redis/availability.js";
import { createQueues, reconcileScheduler, scheduleEvent } from "./workers/queues.js";
import { startWorkers } from "./workers/workers.js";

function loadConfigOrExit(): GatewayConfig {
  try {
    return loadGatewayConfig();
  } catch (err) {
    createLogger({ level: "info" }).fatal(err instanceof ConfigError ? err.message : { err }, "cannot start");
    process.exit(1);
  }
}

async function main(): Promise<void> {
  const config = loadConfigOrExit();
  const log = createLogger({ level: config.logLevel });
  const services = await startServices(config, log);

  // Fail fast rather than queue: a claim must answer 503 (or go to DynamoDB) while Redis is away.
  // No offline queue: a command issued while disconnected is refused at once instead of waiting
  // for a reconnect (the modules also check the connection first; see src/redis/availability.ts).
  // A Redis that is connected but silent is bounded by the command timeout.
  const redisOptions = {
    maxRetriesPerRequest: 1,
    commandTimeout: 2_000,
    enableAutoPipelining: true,
    enableOfflineQueue: false,
  };
  const redis = new Redis(services.redisUrl, redisOptions);
  // The subscriber keeps its offline queue: a subscription asked for while Redis is away is sent
  // when it is back, and ioredis subscribes every channel again after a reconnect.
  const subscriber = new Redis(services.redisUrl, { maxRetriesPerRequest: null });
  // ioredis reports every failed reconnect attempt: one line per client every 10 s is enough.
  const logConnection = (client: Redis, name: string) => {
    let lastError = 0;
    client.on("error", (err) => {
      const now = Date.now();
      if (lastError > now - 10_000) return;
      lastError = now;
      log.warn({ err: err.message }, `${name} connection error`);
    });
    client.on("ready", () => {
      if (lastError > 0) log.info(`${name} connection ready again`);
    });
  };
  logConnection(redis, "redis");
  logConnection(subscriber, "redis");
  // The simulated payment provider's ledger: in a Redis of its own when PAYMENT_REDIS_URL says so.
  const paymentRedis = config.paymentRedisUrl ? new Redis(config.paymentRedisUrl, redisOptions) : undefined;
  if (paymentRedis) logConnection(paymentRedis, "payment redis");
  if (!(await waitForRedis(redis, 10_000))) {
    log.warn(
      { redis: services.redisUrl },
      "redis does not answer yet; starting anyway (waiting-room calls answer 503)",
    );
  }
  const dynamo = createDynamoClient({
    endpoint: services.dynamoEndpoint,
    region: config.dynamodb.region,
    requestTimeoutMs: config.dynamodb.timeoutMs,
    maxAttempts: config.dynamodb.maxAttempts,
  });
  await ensureTable(dynamo, config.dynamodb.table);

  const queues = createQueues(redis, log);
  const webhookSecret = config.paymentWebhookSecret ?? derivedWebhookSecret(services.gatewaySecret);
  let listeningPort: number | undefined;
  const deps = buildGatewayDeps({
    redis,
    subscriber,
    dynamo,
    tableName: config.dynamodb.table,
    logger: log,
    metrics: createMetrics({ defaultMetrics: true }),
    adminToken: services.adminToken,
    gatewaySecret: services.gatewaySecret,
    limits: {
      ratePerIp: config.rateLimitPerIp,
      ratePerFan: config.rateLimitPerFan,
      ...(config.loadTestToken ? { loadTestToken: config.loadTestToken } : {}),
      trustProxy: config.trustProxy,
      maxStreams: config.sse.maxStreams,
      maxStreamsPerIp: config.sse.maxStreamsPerIp,
      streamBacklogBytes: config.sse.backlogBytes,
      streamWriteTimeoutMs: config.sse.writeTimeoutMs,
    },
    scheduleEvent: (eventId, sectionIds) => scheduleEvent(queues, eventId, sectionIds),
    paymentTimeoutMs: config.paymentTimeoutMs,
    // A hold's write may take every attempt's timeout: the shield's lease covers all of them.
    shieldLeaseMs: config.dynamodb.timeoutMs * config.dynamodb.maxAttempts,
    // An event replacement could land that late, and a charge attempt be sent that long after it
    // was dated: the replacement guard and the reconciler allow for it.
    dynamoRequestBudgetMs: config.dynamodb.timeoutMs * config.dynamodb.maxAttempts,
    reconciler: reconcileScheduler(queues),
    webhookSecret,
    ...(paymentRedis ? { paymentRedis } : {}),
    // The simulated provider delivers its webhooks over HTTP to this gateway, as a real one would.
    onPaymentEvent: async (event) => {
      if (!listeningPort) return;
      const { body, signature } = signWebhookEvent(webhookSecret, event);
      await fetch(`http://127.0.0.1:${listeningPort}/v1/payments/webhook`, {
        method: "POST",
        headers: { "content-type": "application/json", [WEBHOOK_SIGNATURE_HEADER]: signature },
        body,
      });
    },
  });
  const runGateway = config.role !== "worker";
  const runWorkers = config.role !== "gateway";

  const workers = runWorkers
    ? startWorkers({
        redisUrl: services.redisUrl,
        inventory: deps.inventory,
        seatMap: deps.seatMap,
        seatMapWrites: deps.seatMapWrites,
        purchases: deps.purchases,
        paymentTimeoutMs: config.paymentTimeoutMs,
        logger: log,
      })
    : undefined;
  if (workers) log.info({ queues: workers.workers.map((w) => w.name) }, "workers running");

  if (config.demoEvent && runGateway) {
    const created = await ensureDemoEvent(deps);
    const demo = await deps.inventory.events.get({ eventId: DEMO_EVENT_ID });
    if (demo) {
      await deps
        .scheduleEvent?.(
          DEMO_EVENT_ID,
          demo.sections.map((s) => s.id),
        )
        .catch((err: unknown) =>
          log.warn({ err: (err as Error).message }, "demo jobs not scheduled yet; they will be when Redis answers"),
        );
    }
    log.info({ eventId: DEMO_EVENT_ID, created }, created ? "demo event created" : "demo event found");
  }

  let server: import("node:http").Server | undefined;
  if (runGateway) {
    const listening = await listenApp({
      fetch: buildApp(deps).fetch,
      port: config.port,
      host: config.host,
      keepAliveTimeoutMs: config.httpKeepAliveTimeoutMs,
    });
    server = listening.server;
    listeningPort = listening.port;
    const base = `http://localhost:${listening.port}`;
    log.info(
      {
        url: base,
        role: config.role,
        redis: services.redisUrl,
        dynamodb: services.dynamoEndpoint ?? "AWS",
        table: config.dynamodb.table,
      },
      "gateway listening",
    );
    if (config.demoEvent) {
      log.info(
        {
          fanPage: `${base}/?event=${DEMO_EVENT_ID}`,
          operatorConsole: `${base}/console?event=${DEMO_EVENT_ID}`,
          waitingRoom: `${base}/v1/events/${DEMO_EVENT_ID}/waiting-room`,
          seatMap: `${base}/v1/events/${DEMO_EVENT_ID}/seatmap`,
          apiDocs: `${base}/docs`,
        },
        "demo on-sale ready",
      );
    }
    // A secret in the log is a secret in every log store: only a token made on this very start is
    // printed (once, so `npm start` on a fresh clone shows it); a stored one is pointed to, and one
    // the operator supplied is never repeated.
    if (services.adminTokenSource === "generated") log.info(`operator token: ${services.adminToken}`);
    else if (services.adminTokenSource === "stored") {
      log.info({ file: services.secretsFile }, `operator token: kept in ${services.secretsFile} (adminToken)`);
    }
  }

  let stopping = false;
  const shutdown = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, "shutting down");
    const force = setTimeout(() => process.exit(1), 15_000);
    force.unref();
    if (server) {
      // SSE streams never end by themselves: close idle and streaming sockets after a grace period.
      const open = server;
      setTimeout(() => open.closeAllConnections(), 2_000).unref();
      await new Promise<void>((resolve) => open.close(() => resolve()));
    }
    // A worker finishes its current jobs; one killed instead would see them retried elsewhere.
    await workers?.close();
    await queues.close();
    await deps.relay.close();
    redis.disconnect();
    paymentRedis?.disconnect();
    dynamo.destroy();
    await services.stop();
    log.info("stopped");
    process.exit(0);
  };
  process.on("SIGTERM", () => void shutdown("SIGTERM"));
  process.on("SIGINT", () => void shutdown("SIGINT"));
}

await main();
