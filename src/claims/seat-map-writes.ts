/**
 * The seat-map write-through, in one place: every path that changes a seat's status in DynamoDB
 * (a hold, a release, a confirmation, a sweep) tells the seat-map cache here, once DynamoDB has
 * decided. The cache only ever follows: an update that fails is logged, never thrown to the caller
 * (the store has decided already) and never retried here; the next rebuild of the section (a lost
 * race, below, or the periodic refresh job) puts the cache right.
 */
import type { Logger } from "../logger.js";
import { RedisUnavailableError } from "../redis/availability.js";
import { type SeatMapCache, sectionOf } from "../seatmap/cache.js";
import { onceEvery } from "../throttle.js";

export interface SeatMapWrites {
  /** `seatIds` are held until `expiresAt` (epoch ms). */
  held(eventId: string, seatIds: readonly string[], expiresAt: number): Promise<void>;
  /**
   * `seatIds` are available again. Only the seats this call turned available, never more: a seat
   * another fan holds since is not ours to mark, and the shield would stop filtering it.
   */
  released(eventId: string, seatIds: readonly string[]): Promise<void>;
  sold(eventId: string, seatIds: readonly string[]): Promise<void>;
  /**
   * A hold lost a race on these seats in DynamoDB: the cache was stale for them. Their sections are
   * rebuilt, once per second at most, so the next fan is filtered by the shield instead.
   */
  stale(eventId: string, seatIds: readonly string[]): void;
}

export function createSeatMapWrites(options: {
  seatMap: Pick<SeatMapCache, "apply" | "rebuild">;
  logger: Logger;
}): SeatMapWrites {
  const { seatMap, logger } = options;
  const rebuildDue = onceEvery(1_000);

  const apply = async (eventId: string, changes: Parameters<SeatMapCache["apply"]>[1]) => {
    if (changes.length === 0) return;
    try {
      await seatMap.apply(eventId, changes);
    } catch (err) {
      // While Redis is away every change would say so; the cache is rebuilt when it returns.
      const level = err instanceof RedisUnavailableError ? "debug" : "warn";
      logger[level]({ err: (err as Error).message, eventId }, "seat-map update failed");
    }
  };

  return {
    held: (eventId, seatIds, expiresAt) =>
      apply(
        eventId,
        seatIds.map((id) => ({ id, status: "held", holdExpiresAt: expiresAt })),
      ),
    released: (eventId, seatIds) =>
      apply(
        eventId,
        seatIds.map((id) => ({ id, status: "available" })),
      ),
    sold: (eventId, seatIds) =>
      apply(
        eventId,
        seatIds.map((id) => ({ id, status: "sold" })),
      ),
    stale(eventId, seatIds) {
      for (const sectionId of new Set(seatIds.map(sectionOf))) {
        if (!rebuildDue(`${eventId}/${sectionId}`)) continue;
        seatMap.rebuild(eventId, sectionId).catch((err: unknown) => {
          logger.warn({ err: (err as Error).message, eventId, sectionId }, "seat-map rebuild failed");
        });
      }
    },
  };
}
