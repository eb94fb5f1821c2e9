/**
 * Builds everything the HTTP app needs from the clients main.ts (or a test) created: the
 * inventory on DynamoDB, the waiting room and seat-map cache on Redis, the hold service and the
 * rate limiter. Nothing here opens a connection of its own.
 */
import type { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { DescribeTableCommand } from "@aws-sdk/client-dynamodb";
import type { Redis } from "ioredis";
import { createHoldService } from "./claims/hold-service.js";
import { createSeatMapWrites } from "./claims/seat-map-writes.js";
import { instrumentDynamo } from "./dynamodb/instrument.js";
import type { AppDeps, GatewayLimits } from "./http/context.js";
import { createStreamSlots } from "./http/stream-slots.js";
import { createRateLimiter } from "./http/middleware/rate-limit.js";
import { createInventory, type Inventory } from "./inventory/index.js";
import type { Logger } from "./logger.js";
import type { Metrics } from "./metrics.js";
import { createSeatMapCache, type SeatRow } from "./seatmap/cache.js";
import { createSectionPages, type SectionPagesOptions } from "./seatmap/pages.js";
import { createSeatChangeRelay } from "./seatmap/relay.js";
import { createHmac } from "node:crypto";
import type { PaymentProvider } from "./payments/provider.js";
import { withTimeout } from "./payments/provider.js";
import { createSimulatedProvider } from "./payments/simulated.js";
import type { WebhookEvent } from "./payments/webhook.js";
import { createPurchaseSaga, type ReconcileScheduler } from "./purchases/saga.js";
import { redisReady, requireRedis, trackRedis } from "./redis/availability.js";
import { rescheduleOnReconnect } from "./workers/reschedule.js";
import { createWaitingRoom } from "./waiting-room/index.js";
import { ApiError } from "./http/errors.js";

export interface GatewayClients {
  /** Commands, scripts. */
  redis: Redis;
  /** A second connection, for pub/sub only (a subscribed connection can run nothing else). */
  subscriber: Redis;
  dynamo: DynamoDBClient;
  tableName: string;
}

export interface GatewayOptions extends GatewayClients {
  logger: Logger;
  metrics: Metrics;
  adminToken: string;
  gatewaySecret: string;
  limits?: Partial<GatewayLimits>;
  /** Epoch ms; tests move it. */
  clock?: () => number;
  scheduleEvent?: AppDeps["scheduleEvent"];
  /** The payment provider; default: the simulated one, its state in `paymentRedis`. */
  payments?: PaymentProvider;
  /** Where the simulated provider keeps its ledger (PAYMENT_REDIS_URL); default `redis`. */
  paymentRedis?: Redis;
  /** After this a charge's outcome counts as unknown (PAYMENT_TIMEOUT_MS). */
  paymentTimeoutMs?: number;
  reconciler?: ReconcileScheduler;
  /** Webhook signing secret; default derived from the gateway secret. */
  webhookSecret?: string;
  /** Where the simulated provider delivers its webhook events (main.ts posts them to itself). */
  onPaymentEvent?: (event: WebhookEvent) => void | Promise<void>;
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
}

/** The default webhook secret: derived, so the simulated provider and the gateway agree. */
export function derivedWebhookSecret(gatewaySecret: string): string {
  return createHmac("sha256", gatewaySecret).update("payment-webhook").digest("base64url");
}

export const defaultLimits: GatewayLimits = {
  ratePerIp: 50,
  ratePerFan: 5,
  ratePerOperatorIp: 20,
  trustProxy: false,
  maxBodyBytes: 16 * 1024,
  maxStreams: 10_000,
  maxStreamsPerIp: 50,
  streamBacklogBytes: 64 * 1024,
  streamWriteTimeoutMs: 30_000,
};

/** The seat-map cache loads a section from the authoritative store, page by page. */
export function sectionSource(inventory: Inventory) {
  return {
    async loadSection(
      eventId: string,
      sectionId: string,
      options: { consistent?: boolean } = {},
    ): Promise<SeatRow[] | null> {
      const event = await inventory.events.get({ eventId });
      if (!event?.sections.some((s) => s.id === sectionId)) return null;
      const rows: SeatRow[] = [];
      let cursor: string | undefined;
      do {
        const page = await inventory.seats.listSection({
          eventId,
          sectionId,
          ...options,
          ...(cursor === undefined ? {} : { cursor }),
        });
        if (!page) return null;
        for (const s of page.seats) {
          rows.push({
            id: s.id,
            status: s.status,
            ...(s.holdExpiresAt ? { holdExpiresAt: Date.parse(s.holdExpiresAt) } : {}),
          });
        }
        cursor = page.nextCursor;
      } while (cursor);
      return rows;
    },
    countAvailable: (eventId: string, sectionId: string) => inventory.seats.countAvailable({ eventId, sectionId }),
  };
}

/**
 * What a waiting room Redis lost is configured again from: the event item, once its layout is
 * complete: the operator's latest settings (every PATCH keeps them on the item, paused included),
 * else those of its last PUT.
 */
export function roomSource(inventory: Inventory) {
  return async (eventId: string) => {
    const event = await inventory.events.get({ eventId });
    if (!event?.layoutComplete) return null;
    // The operator's latest settings when there are any (PATCH keeps them on the event), else the PUT's.
    const operator = event.roomSettings;
    return operator
      ? {
          onSaleAt: event.onSaleAt,
          admitPerSecond: operator.admitPerSecond,
          maxActive: operator.maxActive,
          sessionSeconds: operator.sessionSeconds,
          abandonSeconds: operator.abandonSeconds,
          paused: operator.paused,
        }
      : { onSaleAt: event.onSaleAt, ...event.waitingRoom };
  };
}

export function buildGatewayDeps(options: GatewayOptions): AppDeps {
  const { redis, subscriber, dynamo, tableName, logger, metrics } = options;
  trackRedis(redis);
  for (const client of [redis, subscriber]) {
    // While Redis is away ioredis reports every reconnect attempt; the modules answer for the
    // calls themselves. Without a listener ioredis would print each one as "unhandled".
    if (client.listenerCount("error") === 0) {
      client.on("error", (err: Error) => logger.debug({ err: err.message }, "redis connection error"));
    }
  }
  instrumentDynamo(dynamo, metrics);
  const inventory = createInventory({
    client: dynamo,
    tableName,
    ...(options.clock ? { clock: options.clock } : {}),
    ...(options.dynamoRequestBudgetMs ? { requestBudgetMs: options.dynamoRequestBudgetMs } : {}),
  });
  const seatMap = createSeatMapCache({ redis, source: sectionSource(inventory), metrics, logger });
  const seatMapWrites = createSeatMapWrites({ seatMap, logger });
  const waitingRoom = createWaitingRoom({
    redis,
    secret: options.gatewaySecret,
    logger,
    restore: roomSource(inventory),
  });
  const paymentTimeoutMs = options.paymentTimeoutMs ?? 3_000;
  const payments =
    options.payments ??
    createSimulatedProvider({
      redis: options.paymentRedis ?? redis,
      timeoutDelayMs: paymentTimeoutMs + 1_000,
      logger,
      ...(options.onPaymentEvent ? { onEvent: options.onPaymentEvent } : {}),
    });
  const purchases = createPurchaseSaga({
    inventory,
    payments: withTimeout(payments, paymentTimeoutMs),
    waitingRoom,
    seatMapWrites,
    metrics,
    logger,
    paymentTimeoutMs,
    ...(options.dynamoRequestBudgetMs ? { storeRequestBudgetMs: options.dynamoRequestBudgetMs } : {}),
    ...(options.clock ? { clock: options.clock } : {}),
    ...(options.reconciler ? { reconciler: options.reconciler } : {}),
  });
  const seenKey = (id: string) => `webhook:{pay}:seen:${id}`;
  const limits = { ...defaultLimits, ...options.limits };
  const relay = createSeatChangeRelay(subscriber, logger);
  return {
    logger,
    metrics,
    limits,
    adminToken: options.adminToken,
    inventory,
    waitingRoom,
    seatMap,
    seatMapWrites,
    relay,
    sectionPages: createSectionPages({ seatMap, relay, logger, ...options.sectionPages }),
    streams: createStreamSlots(limits),
    holds: createHoldService({
      inventory,
      seatMap,
      seatMapWrites,
      metrics,
      logger,
      ...(options.shieldLeaseMs ? { leaseMs: options.shieldLeaseMs } : {}),
    }),
    rateLimiter: createRateLimiter(redis, { metrics, logger }),
    purchases,
    webhooks: {
      secret: options.webhookSecret ?? derivedWebhookSecret(options.gatewaySecret),
      firstDelivery: async (id) => {
        // Without the dedup record a delivery cannot be told from a repeat: 503, the provider retries.
        try {
          requireRedis(redis, "webhook deduplication");
          return (await redis.set(seenKey(id), "1", "EX", 7 * 86_400, "NX")) === "OK";
        } catch (err) {
          throw new ApiError("unavailable", "webhook deduplication unavailable; deliver again later", {
            retryAfter: 5,
            cause: err,
          });
        }
      },
      forget: async (id) => {
        // Best effort: a record that cannot be deleted now was most likely lost with Redis anyway.
        if (redisReady(redis)) await redis.del(seenKey(id)).catch(() => 0);
      },
    },
    ...(options.scheduleEvent
      ? { scheduleEvent: rescheduleOnReconnect(redis, options.scheduleEvent, logger).schedule }
      : {}),
    health: {
      redis: {
        check: async () => {
          requireRedis(redis, "ping");
          await redis.ping();
        },
      },
      dynamodb: { check: async () => void (await dynamo.send(new DescribeTableCommand({ TableName: tableName }))) },
    },
    purchaseCounts: (eventId) => inventory.purchases.count({ eventId }),
  };
}
