/**
 * The process: parse config, find or start Redis and DynamoDB (bootstrap.ts), build every client
 * and service once (services.ts), run the workers and serve the app as the role says, and shut
 * down in order on SIGTERM/SIGINT.
 */
import { type Infrastructure, startInfrastructure } from "./bootstrap.js";
import { ConfigError, type GatewayConfig, loadGatewayConfig } from "./config.js";
import { DEMO_EVENT_ID, demoNotifyReceiver, ensureDemoEvent } from "./demo.js";
import { ensureTable } from "./dynamodb/table.js";
import { derivedWebhookSecret } from "./gateway.js";
import { buildApp } from "./http/app.js";
import { listenApp } from "./http/serve.js";
import { chooseLogFormat, createLogger, type Logger } from "./logger.js";
import { createMetrics } from "./metrics.js";
import { derivedNotifySecret } from "./notify/service.js";
import { signWebhookEvent, WEBHOOK_SIGNATURE_HEADER } from "./payments/webhook.js";
import { waitForRedis } from "./redis/availability.js";
import { describeRedis } from "./redis/connect.js";
import { loadScriptLibraries, type RedisClient, useRedisFunctions } from "./redis/scripts.js";
import { buildServices } from "./services.js";
import { startWorkerHealthServer, type WorkerHealthServer } from "./workers/health-server.js";

/** A bad configuration is one message naming every bad setting, and exit 1: no stack trace. */
function loadConfigOrExit(): GatewayConfig {
  try {
    return loadGatewayConfig();
  } catch (err) {
    // Before the config there is no LOG_FORMAT: a terminal gets the readable line.
    const format = chooseLogFormat({ setting: "auto", isTTY: process.stdout.isTTY === true, production: false });
    const log = createLogger({ level: "info", format });
    if (err instanceof ConfigError) log.fatal(`cannot start: ${err.message}`);
    else log.fatal({ err }, "cannot start");
    process.exit(1);
  }
}

async function main(): Promise<void> {
  const config = loadConfigOrExit();
  useRedisFunctions(config.redisFunctions);
  const log = createLogger({
    level: config.logLevel,
    format: chooseLogFormat({
      setting: config.logFormat,
      isTTY: process.stdout.isTTY === true,
      production: config.production,
    }),
  });
  if (config.production) log.info({ role: config.role }, "production mode (NODE_ENV=production)");
  const infra = await startInfrastructure(config, log);

  const webhookSecret = config.paymentWebhookSecret ?? derivedWebhookSecret(infra.gatewaySecret);
  // A hold's write may take every attempt's timeout: the shield's lease covers all of them. An
  // event replacement could land that late, and a charge attempt be sent that long after it was
  // dated: the replacement guard and the reconciler allow for it.
  const requestBudgetMs = config.dynamodb.timeoutMs * config.dynamodb.maxAttempts;
  let listeningPort: number | undefined;
  const notifySecret = config.notify.webhookSecret ?? derivedNotifySecret(infra.gatewaySecret);
  const notifyReceiver = await demoNotifyReceiver({
    demoEvent: config.demoEvent,
    role: config.role,
    webhookUrl: config.notify.webhookUrl,
    secret: notifySecret,
    logger: log,
  });
  const services = buildServices({
    redis: infra.redis,
    ...(config.paymentRedisUrl ? { paymentRedisUrl: config.paymentRedisUrl } : {}),
    ...(config.drandRelays.length > 0 ? { drandRelays: config.drandRelays } : {}),
    ...(config.fanShards > 0 ? { fanShards: config.fanShards } : {}),
    ...(config.claims ? { claims: config.claims } : {}),
    dynamodb: {
      endpoint: infra.dynamoEndpoint,
      region: config.dynamodb.region,
      table: config.dynamodb.table,
      timeoutMs: config.dynamodb.timeoutMs,
      maxAttempts: config.dynamodb.maxAttempts,
    },
    logger: log,
    metrics: createMetrics({ defaultMetrics: true }),
    logConnections: true,
    adminToken: infra.adminToken,
    ...(config.metricsToken ? { metricsToken: config.metricsToken } : {}),
    operatorTokens: config.operatorTokens,
    gatewaySecret: infra.gatewaySecret,
    invites: config.invites,
    tokenSigningKeys: infra.tokenSigningKeys,
    webhookSecret,
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
    queues: true,
    notify: {
      webhookUrl: config.notify.webhookUrl ?? notifyReceiver?.url,
      webhookSecret: notifySecret,
      fansPerSeat: config.notify.fansPerSeat,
      maxRequestsPerEvent: config.notify.maxRequestsPerEvent,
    },
    paymentTimeoutMs: config.paymentTimeoutMs,
    shieldLeaseMs: requestBudgetMs,
    dynamoRequestBudgetMs: requestBudgetMs,
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
  const redisAnswered = await waitForRedis(services.clients.redis, 10_000);
  if (!redisAnswered) {
    log.warn(
      { redis: describeRedis(infra.redis) },
      "redis does not answer yet; starting anyway (waiting-room calls answer 503)",
    );
  }
  await ensureTable(services.clients.dynamo, config.dynamodb.table);
  const runGateway = config.role !== "worker";
  const runWorkers = config.role !== "gateway";

  let workerHealth: WorkerHealthServer | undefined;
  if (runWorkers) {
    const workers = services.startWorkers({ lockMs: config.workerLockMs, stallMs: config.workerStallMs });
    if (config.workerHealthPort !== undefined) {
      workerHealth = await startWorkerHealthServer(
        {
          health: services.health,
          workersRunning: () => workers.workers.every((w) => w.isRunning()),
          metrics: { registry: services.metrics.registry, token: config.metricsToken },
        },
        { port: config.workerHealthPort, host: config.host },
      );
    }
    if (!runGateway && redisAnswered) await loadLibraries(log, services.clients);
    log.info(
      {
        queues: workers.workers.map((w) => w.name),
        ...(workerHealth ? { health: `http://localhost:${workerHealth.port}` } : {}),
      },
      "workers running",
    );
  }
  // A Redis that came back empty while no process that armed them ran has none of the schedules.
  const armed = await services.eventJobs?.armStored();
  if (armed) log.info({ events: armed }, "background jobs of stored events armed");

  if (config.demoEvent && runGateway) {
    const created = await ensureDemoEvent(services);
    log.info({ eventId: DEMO_EVENT_ID, created }, created ? "demo event created" : "demo event found");
  }

  let server: import("node:http").Server | undefined;
  if (runGateway) {
    const app = buildApp(services);
    // Every script the app and the workers registered, loaded before the first request.
    if (redisAnswered) await loadLibraries(log, services.clients);
    const listening = await listenApp({
      fetch: app.fetch,
      fastPath: app.fastPath,
      port: config.port,
      host: config.host,
      keepAliveTimeoutMs: config.httpKeepAliveTimeoutMs,
    });
    server = listening.server;
    // The console's history (src/stats/sampler.ts): every gateway ticks, one takes each sample.
    services.stats.sampler.start();
    listeningPort = listening.port;
    logListening(log, config, infra, listening.port);
  }

  shutDownOnSignals(log, config.shutdownDrainMs, async () => {
    // Readiness answers 503 first; the load balancer takes this pod out while it still serves
    // (in Kubernetes the preStop sleep has already covered the endpoint removal).
    services.health.lifecycle.draining = true;
    if (config.shutdownDrainMs > 0) {
      log.info({ drainMs: config.shutdownDrainMs }, "draining: readiness off, still serving");
      await new Promise((resolve) => setTimeout(resolve, config.shutdownDrainMs));
    }
    if (server) {
      // SSE streams never end by themselves: close idle and streaming sockets after a grace period.
      const open = server;
      setTimeout(() => open.closeAllConnections(), 2_000).unref();
      await new Promise<void>((resolve) => open.close(() => resolve()));
    }
    await services.close();
    await notifyReceiver?.close();
    await workerHealth?.close();
    await infra.stop();
  });
}

/**
 * Loads the Redis Functions of every script registered so far on the process's Redis clients, so
 * the first fans of an on-sale do not each wait for a library's load. A library not loaded here (Redis
 * away, a master failing over) is loaded at its first call, as it would be without this.
 */
async function loadLibraries(log: Logger, clients: { redis: RedisClient; paymentRedis?: RedisClient }): Promise<void> {
  const targets = [
    clients.redis,
    ...(clients.paymentRedis && clients.paymentRedis !== clients.redis ? [clients.paymentRedis] : []),
  ];
  for (const redis of targets) {
    const done = await loadScriptLibraries(redis);
    if (done.failed > 0) {
      log.warn(done, "some Redis Functions were not loaded at start; each is loaded at its first call");
    } else {
      log.info(done, done.mode === "functions" ? "Redis Functions loaded" : "scripts run through EVALSHA");
    }
  }
}

/** Where the gateway answers, the demo's pages, and (only when made on this start) the operator token. */
function logListening(log: Logger, config: GatewayConfig, infra: Infrastructure, port: number): void {
  const base = `http://localhost:${port}`;
  log.info(
    {
      url: base,
      role: config.role,
      redis: describeRedis(infra.redis),
      dynamodb: infra.dynamoEndpoint ?? "AWS",
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
  if (infra.adminTokenSource === "generated") log.info(`operator token: ${infra.adminToken}`);
  else if (infra.adminTokenSource === "stored") {
    log.info({ file: infra.secretsFile }, `operator token: kept in ${infra.secretsFile} (adminToken)`);
  }
}

/** SIGTERM/SIGINT: `stop` once, then exit; a stop that hangs is cut short 15 s after the drain. */
function shutDownOnSignals(log: Logger, drainMs: number, stop: () => Promise<void>): void {
  let stopping = false;
  const shutdown = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, "shutting down");
    const force = setTimeout(() => process.exit(1), drainMs + 15_000);
    force.unref();
    await stop();
    log.info("stopped");
    process.exit(0);
  };
  process.on("SIGTERM", () => void shutdown("SIGTERM"));
  process.on("SIGINT", () => void shutdown("SIGINT"));
}

await main();
