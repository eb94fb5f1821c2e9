/**
 * The claim path for holds: the hot-seat shield in Redis filters holds that cannot win, DynamoDB
 * decides, and the seat-map cache is told the outcome (./seat-map-writes.ts). Redis never decides:
 * when it cannot answer, the shield is skipped and DynamoDB alone arbitrates. What a hold may ask
 * for (the event, the seat limit, a seat named twice) is the inventory's to decide, once.
 */
import { type HoldResult, type Inventory, type ReleaseResult, shardOf } from "../inventory/index.js";
import type { Logger } from "../logger.js";
import type { Metrics } from "../metrics.js";
import type { SeatMapCache } from "../seatmap/cache.js";
import type { SeatMapWrites } from "./seat-map-writes.js";

export type HoldOutcome =
  | HoldResult
  /** Refused by the shield: no DynamoDB request was made. */
  | { ok: false; reason: "seat_unavailable"; seats: string[]; stage: "shield" };

export interface SeatHoldRequest {
  eventId: string;
  fanId: string;
  seatIds: string[];
  /** Default: the event's holdSeconds. */
  holdSeconds?: number;
}

export interface GeneralAdmissionHoldRequest {
  eventId: string;
  fanId: string;
  areaId: string;
  quantity: number;
  /** Default: the event's holdSeconds. */
  holdSeconds?: number;
}

export interface HoldService {
  holdSeats(request: SeatHoldRequest): Promise<HoldOutcome>;
  holdGeneralAdmission(request: GeneralAdmissionHoldRequest): Promise<HoldResult>;
  release(request: { eventId: string; holdId: string; fanId: string }): Promise<ReleaseResult>;
}

/** Where a hold's expiry asks for its sweep (src/workers/queues.ts sweepScheduler). */
export interface SweepScheduler {
  /** The shards `shards` of the event hold something until `expiresAt` (epoch ms). */
  expiring(eventId: string, shards: readonly number[], expiresAt: number): Promise<void>;
}

export interface HoldServiceOptions {
  /** Absent (some tests): no sweep is asked for; the backstop sweeps. */
  sweeps?: SweepScheduler;
  inventory: Inventory;
  /** For the shield. */
  seatMap: Pick<SeatMapCache, "shield">;
  seatMapWrites: SeatMapWrites;
  metrics: Metrics;
  logger: Logger;
  /** How long a shield lease lasts: longer than a DynamoDB write, short enough to heal fast. */
  leaseMs?: number;
}

export function createHoldService(options: HoldServiceOptions): HoldService {
  const { inventory, seatMap, seatMapWrites, metrics, logger } = options;
  const leaseMs = options.leaseMs ?? 3_000;

  /**
   * A granted hold asks for the sweep of its shards at its expiry. Fire and forget: a hold is
   * never refused or slowed for it, and an expired hold is free to the next fan anyway (the hold
   * condition); a sweep that is lost only leaves the stored status to the backstop.
   */
  const sweepAtExpiry = (result: HoldResult, shards: () => number[]) => {
    if (!result.ok || !options.sweeps) return;
    options.sweeps
      .expiring(result.hold.eventId, shards(), Date.parse(result.hold.expiresAt))
      .catch((err: unknown) =>
        logger.debug({ err: (err as Error).message }, "hold's sweep not queued; the backstop sweeps it"),
      );
  };

  /** Counts one claim-path write, by what it was for in the fan's terms (hold, release). */
  const counted = async <R extends { ok: boolean; reason?: string }>(
    operation: "hold" | "release",
    write: () => Promise<R>,
  ): Promise<R> => {
    try {
      const result = await write();
      metrics.dynamoRequests.inc({ operation, outcome: result.ok ? "ok" : (result.reason ?? "refused") });
      if (operation === "hold") metrics.holds.inc({ outcome: result.ok ? "granted" : (result.reason ?? "refused") });
      return result;
    } catch (err) {
      metrics.dynamoRequests.inc({ operation, outcome: "error" });
      throw err;
    }
  };

  const shieldFor = async (eventId: string, seatIds: string[]) => {
    try {
      return await seatMap.shield(eventId, seatIds, leaseMs);
    } catch (err) {
      logger.warn({ err: (err as Error).message, eventId }, "shield unavailable; DynamoDB decides alone");
      return { kind: "bypass" as const, release: async () => {} };
    }
  };

  return {
    async holdSeats({ eventId, fanId, seatIds, holdSeconds }) {
      // What the request is wrong in itself for (a seat named twice, too many, unknown, not on
      // sale) is refused as such first, whatever state the seats are in; then the shield.
      const check = await inventory.holds.checkSeats({ eventId, fanId, seatIds, holdSeconds });
      if (!check.ok) {
        metrics.holds.inc({ outcome: check.reason });
        return check;
      }
      const shield = await shieldFor(eventId, seatIds);
      if (shield.kind === "lost") {
        metrics.holds.inc({ outcome: "seat_unavailable" });
        metrics.conflicts.inc({ stage: "shield" });
        return { ok: false, reason: "seat_unavailable", seats: shield.seats, stage: "shield" };
      }
      try {
        // One seat or many, a hold is one transaction: the seats, the hold record and the fan's ledger.
        const result = await counted("hold", () => inventory.holds.writeSeats(check.checked));
        if (result.ok) {
          sweepAtExpiry(result, () => result.hold.seats.map(shardOf));
          void seatMapWrites.held(eventId, result.hold.seats, Date.parse(result.hold.expiresAt));
        } else if (result.reason === "seat_unavailable") {
          metrics.conflicts.inc({ stage: "dynamodb" });
          seatMapWrites.stale(eventId, result.seats);
        }
        return result;
      } finally {
        await shield.release();
      }
    },

    async holdGeneralAdmission({ eventId, fanId, areaId, quantity, holdSeconds }) {
      const result = await counted("hold", () =>
        inventory.holds.holdGeneralAdmission({ eventId, fanId, areaId, quantity, holdSeconds }),
      );
      // An area is swept by the shard its id falls in (src/inventory/sweep.ts).
      sweepAtExpiry(result, () => [shardOf(areaId)]);
      return result;
    },

    async release({ eventId, holdId, fanId }) {
      const result = await counted("release", () => inventory.holds.release({ eventId, holdId, fanId }));
      if (result.ok) void seatMapWrites.released(eventId, result.releasedSeats);
      return result;
    },
  };
}
