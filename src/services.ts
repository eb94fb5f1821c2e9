/**
 * The composition root's one recipe: `buildServices(config)` opens each client once (Redis for
 * commands, Redis for pub/sub, DynamoDB, the payment ledger's Redis when it has its own) and builds
 * every service once on them: the inventory, the waiting room, the seat map and its write-through,
 * the event, hold and purchase services, the rate limiter, the webhook deduplication, the queues
 * and event jobs, and (on demand) the workers. src/main.ts, test/gateway/harness.ts,
 * test/support/worker-process.ts and scripts/bench-server.ts all build the gateway this way, so a
 * test runs the wiring production runs. `close()` stops it all in order.
 */
import type { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { DescribeTableCommand } from "@aws-sdk/client-dynamodb";
import type { RedisOptions } from "ioredis";
import { createHoldService } from "./claims/hold-service.js";
import { createSeatMapWrites, type SeatMapWrites } from "./claims/seat-map-writes.js";
import { createDocumentClient, createDynamoClient } from "./dynamodb/client.js";
import { instrumentDynamo } from "./dynamodb/instrument.js";
import { createEventService } from "./events/event-service.js";
import { defaultLimits, derivedWebhookSecret, roomKeeper, roomSource, sectionSource } from "./gateway.js";
import type { AppDeps, GatewayLimits } from "./http/context.js";
import type { NamedOperatorToken } from "./http/middleware/admin-auth.js";
import { createRateLimiter } from "./http/middleware/rate-limit.js";
import { createStreamSlots } from "./http/stream-slots.js";
import { createInventory, type Inventory } from "./inventory/index.js";
import type { Logger } from "./logger.js";
import type { Metrics } from "./metrics.js";
import { createDecisionStore } from "./decisions/store.js";
import { drandRelays } from "./lottery/drand-relay.js";
import { createLotteryStore } from "./lottery/store.js";
import { createActionLog } from "./operators/action-log.js";
import { type PaymentProvider, withTimeout } from "./payments/provider.js";
import { createSimulatedProvider } from "./payments/simulated.js";
import type { WebhookEvent } from "./payments/webhook.js";
import { createNotifier, derivedNotifySecret } from "./notify/service.js";
import { createFanIdIssuer } from "./waiting-room/fan-ids.js";
import { createNotifyStore } from "./notify/store.js";
import { createPurchaseFence } from "./purchases/fence.js";
import { createPurchaseSaga } from "./purchases/saga.js";
import { createWebhookDeduplication } from "./purchases/webhook-dedup.js";
import { requireRedis, trackRedis } from "./redis/availability.js";
import { connectRedis, type RedisTarget } from "./redis/connect.js";
import type { RedisClient } from "./redis/scripts.js";
import { createSeatMapCache } from "./seatmap/cache.js";
import { createSectionPages, type SectionPagesOptions } from "./seatmap/pages.js";
import { createSeatChangeRelay } from "./seatmap/relay.js";
import { createWaitingRoom, type SigningKeyInput } from "./waiting-room/index.js";
import { createInviteVerifier, type InviteKeys } from "./waiting-room/invites.js";
import { createProofOfWork } from "./waiting-room/proof-of-work.js";
import { createEventJobs, type EventJobs } from "./workers/event-jobs.js";
import { bookingPublisher } from "./workers/outbox.js";
import {
  createQueues,
  notifyDispatch,
  type Queues,
  queueJobCounts,
  reconcileScheduler,
  sweepScheduler,
} from "./workers/queues.js";
import { createMetricsReporter } from "./metrics-reporter.js";
import { createEventStats, type EventStatsOptions } from "./stats/index.js";
import { startWorkers, type WorkerDeps, type Workers } from "./workers/workers.js";

export interface ServicesConfig {
  /** One Redis server; or `redis` (a server or a cluster, src/redis/connect.ts). One of the two. */
  redisUrl?: string;
  redis?: RedisTarget;
  /**
   * The command connection's options (default FAIL_FAST_REDIS; on a cluster, each node's); a test
   * may keep an offline queue.
   */
  redisOptions?: RedisOptions;
  /**
   * Polls of waiting fans answered from this process's view of the line (default true;
   * src/waiting-room/line-view.ts). false: every poll asks Redis, as before (a benchmark's baseline).
   */
  lineCache?: boolean;
  /** WAITING_ROOM_FAN_SHARDS: fan shards of the rooms this process creates (default 0: none). */
  fanShards?: number;
  /**
   * WAITING_ROOM_CLAIMS: the rooms this process creates admit by claims (default false); "shards"
   * (with `fanShards`) keeps their records on the fan shards.
   */
  claims?: boolean | "shards";
  /** The simulated provider's ledger in a Redis of its own (PAYMENT_REDIS_URL); default `redisUrl`. */
  paymentRedisUrl?: string;
  /** DRAND_RELAYS: where a draw waiting for its drand round fetches it (src/lottery/drand-relay.ts); none: it does not. */
  drandRelays?: string[];
  dynamodb: {
    /** Unset: AWS. */
    endpoint?: string | undefined;
    region: string;
    table: string;
    /** Per attempt (DYNAMODB_TIMEOUT_MS). */
    timeoutMs?: number;
    maxAttempts?: number;
  };
  logger: Logger;
  metrics: Metrics;
  adminToken: string;
  /** The bearer token /metrics asks for (METRICS_TOKEN); none: open. */
  metricsToken?: string;
  /** ADMIN_TOKENS: named operator tokens besides ADMIN_TOKEN ("default"). */
  operatorTokens?: readonly NamedOperatorToken[];
  gatewaySecret: string;
  /**
   * ES256 or EdDSA keys that sign queue and access tokens (TOKEN_SIGNING_KEYS, or the key bootstrap
   * keeps in DATA_DIR); unset: HS256 with `gatewaySecret`.
   */
  tokenSigningKeys?: readonly SigningKeyInput[] | undefined;
  /** Webhook signing secret; default derived from the gateway secret. */
  webhookSecret?: string;
  /** What checks the operator's invite tokens (INVITE_SECRET, INVITE_PUBLIC_KEY); none: invites refused. */
  invites?: InviteKeys;
  limits?: Partial<GatewayLimits>;
  /** After this a charge's outcome counts as unknown (PAYMENT_TIMEOUT_MS; default 3 s). */
  paymentTimeoutMs?: number;
  /**
   * BullMQ producers: an event's jobs are armed when it is stored, and a purchase queues its
   * reconcile job. Off in tests that run no background work.
   */
  queues?: boolean;
  /**
   * How long the hot-seat shield's lease on a seat lasts while its hold is written (default 3 s).
   * It should outlast the slowest hold write (main.ts: the DynamoDB request budget), or a slow
   * write lets the crowd behind it through to DynamoDB. The winner releases it when answered.
   */
  shieldLeaseMs?: number;
  /**
   * The longest a DynamoDB request may take, every attempt counted (main.ts: DYNAMODB_TIMEOUT_MS x
   * DYNAMODB_MAX_ATTEMPTS): an event replacement is refused once it could land after the on-sale,
   * and a charge attempt may be sent that long after it was dated (the reconciler waits it out).
   */
  dynamoRequestBudgetMs?: number;
  /** The in-memory section pages' knobs (defaults in src/seatmap/pages.ts); tests change them. */
  sectionPages?: Pick<SectionPagesOptions, "revalidateMs" | "maxPages" | "compress">;
  /** Epoch ms; tests move it. */
  clock?: () => number;
  /** The payment provider; default: the simulated one, its ledger in `paymentRedisUrl`'s Redis. */
  payments?: PaymentProvider;
  /** Where the simulated provider delivers its webhook events (main.ts posts them to itself). */
  onPaymentEvent?: (event: WebhookEvent) => void | Promise<void>;
  /**
   * Logs each client's connection errors at warn, once per 10 s, and its return (main.ts). Default:
   * debug level, as a test that stops Redis expects them.
   */
  logConnections?: boolean;
  /**
   * After a close, how long a hold may still be made elsewhere (default: the event cache's 60 s
   * plus the DynamoDB request budget); the event's end waits that plus holdSeconds. Tests shorten it.
   */
  eventCloseGraceMs?: number;
  /** The operator's figures: counts snapshot and history intervals (src/stats/); tests shorten them. */
  stats?: EventStatsOptions;
  /** The seats-back webhook (NOTIFY_*, src/notify/); no `webhookUrl`: the feature is off. */
  notify?: {
    webhookUrl?: string | undefined;
    webhookSecret?: string | undefined;
    fansPerSeat?: number;
    maxRequestsPerEvent?: number;
    /** Per delivery attempt (default 10 s). */
    timeoutMs?: number;
  };
}

export interface Services extends AppDeps {
  /** The store itself: for the workers, the audit and tests; no route reaches it. */
  inventory: Inventory;
  seatMapWrites: SeatMapWrites;
  /** Present when `queues` was asked for. */
  queues?: Queues;
  eventJobs?: EventJobs;
  clients: { redis: RedisClient; subscriber: RedisClient; paymentRedis?: RedisClient; dynamo: DynamoDBClient };
  /** Starts this process's BullMQ workers (once; later calls return the same ones). */
  startWorkers(options?: Pick<WorkerDeps, "concurrency" | "lockMs" | "stallMs" | "outbox" | "ending">): Workers;
  /** Stops what was built, in order: workers (their current jobs finish), queues, the relay, clients. */
  close(): Promise<void>;
}

export function buildServices(config: ServicesConfig): Services {
  const { logger, metrics } = config;
  const target = redisTargetOf(config);
  const clients = openClients(config, target);
  const { redis, subscriber, paymentRedis, dynamo } = clients;
  const tableName = config.dynamodb.table;

  const inventory = createInventory({
    client: dynamo,
    tableName,
    ...(config.clock ? { clock: config.clock } : {}),
    ...(config.dynamoRequestBudgetMs ? { requestBudgetMs: config.dynamoRequestBudgetMs } : {}),
  });
  const seatMap = createSeatMapCache({
    redis,
    source: sectionSource(inventory),
    metrics,
    logger,
    // The relay subscribes on the same kind: sharded on a cluster (src/seatmap/relay.ts).
    shardedPubSub: target.kind === "cluster",
  });
  const seatMapWrites = createSeatMapWrites({ seatMap, logger });
  const doc = createDocumentClient(dynamo);
  const records = createDecisionStore({ doc, tableName, ...(config.clock ? { clock: config.clock } : {}) });
  const lottery = createLotteryStore({ doc, tableName, ...(config.clock ? { clock: config.clock } : {}) });
  const waitingRoom = createWaitingRoom({
    redis,
    secret: config.gatewaySecret,
    signingKeys: config.tokenSigningKeys,
    logger,
    restore: roomSource(inventory, records),
    keep: roomKeeper(inventory),
    records,
    lottery,
    ...(config.drandRelays?.length ? { drandRounds: drandRelays(config.drandRelays) } : {}),
    ...(config.lineCache === false ? { lineCache: false } : {}),
    ...(config.fanShards ? { fanShards: config.fanShards } : {}),
    ...(config.claims ? { claims: config.claims } : {}),
    onJoinBatch: (size) => metrics.joinBatchSize.observe(size),
  });
  metrics.readLineViewFrom(() => waitingRoom.lineCacheCounters());
  // BullMQ's producers on a connection of their own: BullMQ defines its 64 Lua scripts on the
  // client it is given, and ioredis copies every script defined on a client onto each pipeline it
  // builds, one per auto-pipelined turn. On the commands connection (the line, the holds, the seat
  // map) that made such a turn cost 131-163 µs of CPU against 77-95 (`npm run bench:pipeline`).
  const queueConnection = config.queues ? connectRedis(target, "commands", config.redisOptions) : undefined;
  if (queueConnection) watchConnection(queueConnection, "redis", config.logger, config.logConnections ?? false);
  const queues = queueConnection ? createQueues(queueConnection, logger) : undefined;
  const closeGrace = config.eventCloseGraceMs ? { closeGraceMs: config.eventCloseGraceMs } : {};
  const eventJobs = queues ? createEventJobs({ queues, inventory, logger, ...closeGrace }) : undefined;

  const paymentTimeoutMs = config.paymentTimeoutMs ?? 3_000;
  const purchases = createPurchaseSaga({
    inventory,
    payments: withTimeout(paymentsOf(config, paymentRedis ?? redis, paymentTimeoutMs), paymentTimeoutMs),
    waitingRoom,
    seatMapWrites,
    fence: createPurchaseFence(redis, logger),
    metrics,
    logger,
    paymentTimeoutMs,
    ...(config.dynamoRequestBudgetMs ? { storeRequestBudgetMs: config.dynamoRequestBudgetMs } : {}),
    ...(config.clock ? { clock: config.clock } : {}),
    ...(queues ? { reconciler: reconcileScheduler(queues), bookings: bookingPublisher(queues) } : {}),
  });
  const limits = { ...defaultLimits, ...config.limits };
  const notifyConfig = config.notify ?? {};
  const notify = createNotifier({
    store: createNotifyStore({ client: dynamo, tableName, ...(config.clock ? { clock: config.clock } : {}) }),
    ...(notifyConfig.webhookUrl
      ? {
          delivery: {
            url: notifyConfig.webhookUrl,
            secret: notifyConfig.webhookSecret ?? derivedNotifySecret(config.gatewaySecret),
            ...(notifyConfig.timeoutMs ? { timeoutMs: notifyConfig.timeoutMs } : {}),
          },
        }
      : {}),
    ...(queues ? { dispatch: notifyDispatch(queues) } : {}),
    ...(notifyConfig.fansPerSeat ? { fansPerSeat: notifyConfig.fansPerSeat } : {}),
    ...(notifyConfig.maxRequestsPerEvent ? { maxRequestsPerEvent: notifyConfig.maxRequestsPerEvent } : {}),
    // The backstop's level check counts what DynamoDB has available, as the console does: a seat
    // map in Redis may have missed the very return whose notice was lost.
    available: async (eventId) => {
      const counts = await inventory.seats.eventCounts({ eventId });
      if (!counts) return null;
      return Object.values(counts.generalAdmission).reduce((n, a) => n + a.available, counts.seats.available);
    },
    logger,
    metrics,
    ...(config.clock ? { clock: config.clock } : {}),
  });
  const relay = createSeatChangeRelay(subscriber, logger);
  const sectionPages = createSectionPages({ seatMap, relay, logger, ...config.sectionPages });
  const stats = createEventStats(
    {
      redis,
      source: {
        seats: (eventId) => inventory.seats.eventCounts({ eventId }),
        purchases: (eventId, seats) => purchases.counts(eventId, seats.soldSeatPurchases),
      },
      waitingRoom,
      scope: tableName,
      logger,
      metrics,
    },
    config.stats,
  );

  let workers: Workers | undefined;
  const services: Services = {
    logger,
    metrics,
    limits,
    adminToken: config.adminToken,
    ...(config.metricsToken ? { metricsToken: config.metricsToken } : {}),
    metricsReporter: createMetricsReporter(redis, { scope: tableName }),
    ...(queues ? { queueJobCounts: () => queueJobCounts(queues) } : {}),
    ...(config.operatorTokens ? { operatorTokens: config.operatorTokens } : {}),
    actionLog: createActionLog({ doc, tableName }),
    inventory,
    waitingRoom,
    bots: {
      pow: createProofOfWork(config.gatewaySecret),
      fanIds: createFanIdIssuer(config.gatewaySecret),
      invites: createInviteVerifier(config.invites ?? {}),
    },
    seatMap,
    seatMapWrites,
    relay,
    sectionPages,
    streams: createStreamSlots(limits),
    events: createEventService({
      inventory,
      waitingRoom,
      seatMap,
      lottery,
      ...(eventJobs ? { jobs: eventJobs } : {}),
      ...closeGrace,
    }),
    // A released hold's seats are told to the fans who asked to hear of them (src/notify/).
    holds: notify.wrapHolds(
      createHoldService({
        inventory,
        seatMap,
        seatMapWrites,
        pages: sectionPages,
        metrics,
        logger,
        ...(config.shieldLeaseMs ? { leaseMs: config.shieldLeaseMs } : {}),
        ...(queues ? { sweeps: sweepScheduler(queues) } : {}),
        // The admission loop's claim p99 (src/stats/loop.ts).
        latency: stats.claims,
      }),
    ),
    notify,
    rateLimiter: createRateLimiter(redis, { metrics, logger }),
    purchases,
    stats,
    webhooks: {
      secret: config.webhookSecret ?? derivedWebhookSecret(config.gatewaySecret),
      ...createWebhookDeduplication(redis, logger),
    },
    health: healthProbes(redis, dynamo, tableName),
    ...(queues ? { queues } : {}),
    ...(eventJobs ? { eventJobs } : {}),
    clients,
    startWorkers(options = {}) {
      workers ??= startWorkers({
        redis: target,
        inventory,
        seatMap,
        seatMapWrites,
        notify,
        waitingRoom,
        purchases,
        paymentTimeoutMs,
        logger,
        metrics,
        ...(options.concurrency ? { concurrency: options.concurrency } : {}),
        ...(options.lockMs ? { lockMs: options.lockMs } : {}),
        ...(options.stallMs ? { stallMs: options.stallMs } : {}),
        ...(options.outbox ? { outbox: options.outbox } : {}),
        ...(options.ending ? { ending: options.ending } : {}),
      });
      return workers;
    },
    async close() {
      services.stats.sampler.stop();
      // The heartbeats of polls answered from the line cache, before the connection goes.
      await waitingRoom.close();
      // A worker finishes its current jobs; one killed instead would see them retried elsewhere.
      await workers?.close();
      eventJobs?.close();
      await queues?.close();
      queueConnection?.disconnect();
      await relay.close();
      redis.disconnect();
      paymentRedis?.disconnect();
      dynamo.destroy();
    },
  };
  return services;
}

/** The configured provider, else the simulated one with its ledger in `ledger`. */
function paymentsOf(config: ServicesConfig, ledger: RedisClient, paymentTimeoutMs: number): PaymentProvider {
  return (
    config.payments ??
    createSimulatedProvider({
      redis: ledger,
      // Its `tok_timeout` answers after the gateway has stopped waiting.
      timeoutDelayMs: paymentTimeoutMs + 1_000,
      logger: config.logger,
      ...(config.onPaymentEvent ? { onEvent: config.onPaymentEvent } : {}),
    })
  );
}

function healthProbes(redis: RedisClient, dynamo: DynamoDBClient, tableName: string): AppDeps["health"] {
  return {
    redis: {
      check: async () => {
        requireRedis(redis, "ping");
        await redis.ping();
      },
    },
    dynamodb: { check: async () => void (await dynamo.send(new DescribeTableCommand({ TableName: tableName }))) },
    lifecycle: { draining: false },
  };
}

export function redisTargetOf(config: Pick<ServicesConfig, "redis" | "redisUrl">): RedisTarget {
  if (config.redis && config.redisUrl) throw new Error("services: give `redis` or `redisUrl`, not both");
  if (config.redis) return config.redis;
  if (config.redisUrl) return { kind: "server", url: config.redisUrl };
  throw new Error("services: no Redis (`redis` or `redisUrl`)");
}

/** Each client once: Redis for commands, for pub/sub and (when apart) the payment ledger; DynamoDB. */
function openClients(config: ServicesConfig, target: RedisTarget): Services["clients"] {
  const redis = connectRedis(target, "commands", config.redisOptions);
  // The subscriber keeps its offline queue: a subscription asked for while Redis is away is sent
  // when it is back, and ioredis subscribes every channel again after a reconnect (on a cluster,
  // after the slots moved).
  const subscriber = connectRedis(target, "subscriber");
  const paymentRedis = config.paymentRedisUrl
    ? connectRedis({ kind: "server", url: config.paymentRedisUrl }, "commands", config.redisOptions)
    : undefined;
  for (const [client, name] of [
    [redis, "redis"],
    [subscriber, "redis"],
    [paymentRedis, "payment redis"],
  ] as const) {
    if (client) watchConnection(client, name, config.logger, config.logConnections ?? false);
  }
  trackRedis(redis);
  const dynamo = createDynamoClient({
    endpoint: config.dynamodb.endpoint,
    region: config.dynamodb.region,
    ...(config.dynamodb.timeoutMs !== undefined ? { requestTimeoutMs: config.dynamodb.timeoutMs } : {}),
    ...(config.dynamodb.maxAttempts !== undefined ? { maxAttempts: config.dynamodb.maxAttempts } : {}),
  });
  instrumentDynamo(dynamo, config.metrics);
  return { redis, subscriber, dynamo, ...(paymentRedis ? { paymentRedis } : {}) };
}

/**
 * ioredis reports every failed reconnect attempt, and without a listener prints each one as
 * unhandled. Production logs them at warn, one line per client every 10 s, and says when the
 * connection is back; elsewhere they go to debug.
 */
function watchConnection(client: RedisClient, name: string, logger: Logger, loud: boolean): void {
  if (!loud) {
    client.on("error", (err: Error) => logger.debug({ err: err.message }, `${name} connection error`));
    return;
  }
  let lastError = 0;
  client.on("error", (err) => {
    const now = Date.now();
    if (lastError > now - 10_000) return;
    lastError = now;
    logger.warn({ err: err.message }, `${name} connection error`);
  });
  client.on("ready", () => {
    if (lastError > 0) logger.info(`${name} connection ready again`);
  });
}
