/**
 * Builds everything the HTTP app needs from the clients main.ts (or a test) created: the
 * inventory on DynamoDB, the waiting room and seat-map cache on Redis, the hold service and the
 * rate limiter. Nothing here opens a connection of its own.
 */
import type { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { DescribeTableCommand } from "@aws-sdk/client-dynamodb";
import type { Redis } from "ioredis";
import { createHoldService } from "./claims/hold-service.js";
import type { AppDeps, GatewayLimits } from "./http/context.js";
import { createRateLimiter } from "./http/middleware/rate-limit.js";
import { createInventory, type Inventory } from "./inventory/index.js";
import type { Logger } from "./logger.js";
import type { Metrics } from "./metrics.js";
import { createSeatMapCache, type SeatRow } from "./seatmap/cache.js";
import { createSeatChangeRelay } from "./seatmap/relay.js";
import { createWaitingRoom } from "./waiting-room/index.js";

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
}

export const defaultLimits: GatewayLimits = {
  ratePerIp: 50,
  ratePerFan: 5,
  ratePerOperatorIp: 20,
  trustProxy: false,
  maxBodyBytes: 16 * 1024,
};

/** The seat-map cache loads a section from the authoritative store, page by page. */
export function sectionSource(inventory: Inventory) {
  return {
    async loadSection(eventId: string, sectionId: string): Promise<SeatRow[] | null> {
      const event = await inventory.getEvent(eventId);
      if (!event?.sections.some((s) => s.id === sectionId)) return null;
      const rows: SeatRow[] = [];
      let cursor: string | undefined;
      do {
        const page = await inventory.listSectionSeats(eventId, sectionId, cursor === undefined ? {} : { cursor });
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
  };
}

export const purchaseCountsKey = (eventId: string) => `stats:{evt:${eventId}}:purchases`;

export function buildGatewayDeps(options: GatewayOptions): AppDeps {
  const { redis, subscriber, dynamo, tableName, logger, metrics } = options;
  const inventory = createInventory({ client: dynamo, tableName, ...(options.clock ? { clock: options.clock } : {}) });
  const seatMap = createSeatMapCache({ redis, source: sectionSource(inventory), metrics, logger });
  const waitingRoom = createWaitingRoom({ redis, secret: options.gatewaySecret, logger });
  return {
    logger,
    metrics,
    limits: { ...defaultLimits, ...options.limits },
    adminToken: options.adminToken,
    inventory,
    waitingRoom,
    seatMap,
    relay: createSeatChangeRelay(subscriber, logger),
    holds: createHoldService({ inventory, seatMap, metrics, logger }),
    rateLimiter: createRateLimiter(redis, { metrics, logger }),
    ...(options.scheduleEvent ? { scheduleEvent: options.scheduleEvent } : {}),
    health: {
      redis: { check: async () => void (await redis.ping()) },
      dynamodb: { check: async () => void (await dynamo.send(new DescribeTableCommand({ TableName: tableName }))) },
    },
    async purchaseCounts(eventId) {
      const raw = await redis.hgetall(purchaseCountsKey(eventId)).catch(() => ({}) as Record<string, string>);
      const n = (k: string) => Number(raw[k] ?? 0);
      return { confirmed: n("confirmed"), pending: n("pending"), failed: n("failed"), refunded: n("refunded") };
    },
  };
}
