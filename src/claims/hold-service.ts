/**
 * The claim path for holds: the hot-seat shield in Redis filters holds that cannot win, DynamoDB
 * decides, and the seat-map cache is told the outcome. Redis never decides: when it cannot
 * answer, the shield is skipped and DynamoDB alone arbitrates.
 */
import type { Hold, HoldResult, Inventory, ReleaseResult } from "../inventory/index.js";
import type { Logger } from "../logger.js";
import type { Metrics } from "../metrics.js";
import { RedisUnavailableError } from "../redis/availability.js";
import { type SeatMapCache, sectionOf } from "../seatmap/cache.js";
import { onceEvery } from "../throttle.js";

export type HoldOutcome =
  | HoldResult
  /** Refused by the shield: no DynamoDB request was made. */
  | { ok: false; reason: "seat_unavailable"; seats: string[]; stage: "shield" };

export interface HoldService {
  holdSeats(eventId: string, fanId: string, seatIds: string[], holdSeconds: number): Promise<HoldOutcome>;
  holdGeneralAdmission(
    eventId: string,
    fanId: string,
    areaId: string,
    quantity: number,
    holdSeconds: number,
  ): Promise<HoldResult>;
  release(eventId: string, holdId: string, fanId: string): Promise<ReleaseResult>;
}

export interface HoldServiceOptions {
  inventory: Inventory;
  seatMap: SeatMapCache;
  metrics: Metrics;
  logger: Logger;
  /** How long a shield lease lasts: longer than a DynamoDB write, short enough to heal fast. */
  leaseMs?: number;
}

export function createHoldService(options: HoldServiceOptions): HoldService {
  const { inventory, seatMap, metrics, logger } = options;
  const leaseMs = options.leaseMs ?? 3_000;

  // A lost race means the cache was stale for those seats: rebuild their sections, once per
  // second at most, so the next fan is filtered by the shield instead of reaching DynamoDB.
  const rebuildDue = onceEvery(1_000);
  const refreshSections = (eventId: string, seatIds: string[]) => {
    for (const sectionId of new Set(seatIds.map(sectionOf))) {
      if (!rebuildDue(`${eventId}/${sectionId}`)) continue;
      seatMap.rebuild(eventId, sectionId).catch((err: unknown) => {
        logger.warn({ err: (err as Error).message, eventId, sectionId }, "seat-map rebuild failed");
      });
    }
  };

  /**
   * `seats`: the seats whose status this call changed, never more. A release names only what it
   * released: a seat of the hold that another fan holds since (or a repeated release) is not ours
   * to mark available, and the shield would stop filtering it.
   */
  const tellCache = (eventId: string, hold: Hold, seats: string[], status: "held" | "available") => {
    if (seats.length === 0) return;
    const expiry = Date.parse(hold.expiresAt);
    seatMap
      .apply(
        eventId,
        seats.map((id) => ({ id, status, ...(status === "held" ? { holdExpiresAt: expiry } : {}) })),
      )
      .catch((err: unknown) => {
        // While Redis is away every claim would say so; the cache is rebuilt when it returns.
        const level = err instanceof RedisUnavailableError ? "debug" : "warn";
        logger[level]({ err: (err as Error).message, eventId }, "seat-map update failed");
      });
  };

  return {
    async holdSeats(eventId, fanId, seatIds, holdSeconds) {
      let shield: Awaited<ReturnType<SeatMapCache["shield"]>>;
      try {
        shield = await seatMap.shield(eventId, seatIds, leaseMs);
      } catch (err) {
        logger.warn({ err: (err as Error).message, eventId }, "shield unavailable; DynamoDB decides alone");
        shield = { kind: "bypass", release: async () => {} };
      }
      if (shield.kind === "lost") {
        metrics.holds.inc({ outcome: "seat_unavailable" });
        metrics.conflicts.inc({ stage: "shield" });
        return { ok: false, reason: "seat_unavailable", seats: shield.seats, stage: "shield" };
      }
      // One seat or many, a hold is one transaction: the seats, the hold record and the fan's ledger.
      const operation = "TransactWriteItems";
      try {
        const result = await inventory.hold(eventId, fanId, seatIds, holdSeconds);
        metrics.dynamoRequests.inc({ operation: `hold:${operation}`, outcome: result.ok ? "ok" : result.reason });
        metrics.holds.inc({ outcome: result.ok ? "granted" : result.reason });
        if (result.ok) {
          tellCache(eventId, result.hold, result.hold.seats, "held");
        } else if (result.reason === "seat_unavailable") {
          metrics.conflicts.inc({ stage: "dynamodb" });
          refreshSections(eventId, result.seats);
        }
        return result;
      } catch (err) {
        metrics.dynamoRequests.inc({ operation: `hold:${operation}`, outcome: "error" });
        throw err;
      } finally {
        await shield.release();
      }
    },

    async holdGeneralAdmission(eventId, fanId, areaId, quantity, holdSeconds) {
      try {
        const result = await inventory.holdGeneralAdmission(eventId, fanId, areaId, quantity, holdSeconds);
        metrics.dynamoRequests.inc({ operation: "hold:TransactWriteItems", outcome: result.ok ? "ok" : result.reason });
        metrics.holds.inc({ outcome: result.ok ? "granted" : result.reason });
        return result;
      } catch (err) {
        metrics.dynamoRequests.inc({ operation: "hold:TransactWriteItems", outcome: "error" });
        throw err;
      }
    },

    async release(eventId, holdId, fanId) {
      const result = await inventory.release(eventId, holdId, fanId);
      metrics.dynamoRequests.inc({ operation: "release", outcome: result.ok ? "ok" : result.reason });
      if (result.ok) tellCache(eventId, result.hold, result.releasedSeats, "available");
      return result;
    },
  };
}
