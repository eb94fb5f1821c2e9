/**
 * One purchase of a hold at a time (lua/purchase-fence-1.lua), per fan. Two purchases of one hold under two
 * Idempotency-Keys (a double click; a client that makes a new key per click) each charged the card,
 * and all but the one confirmed were refunded: ten clicks, ten charges, nine refunds. The fence,
 * a Redis key per hold naming the purchase under way, turns the second away before it writes or
 * charges anything (409 `purchase_in_progress`), until the first has ended.
 *
 * It filters; it does not decide. Redis unavailable: the purchase goes ahead unfenced, and
 * DynamoDB's confirmation (the hold held -> confirmed, once) with the saga's refund keeps the money
 * right, as before. A fence whose holder has ended (confirmed, failed, refunded) is taken over by
 * the next purchase; so is one whose holder never wrote its purchase (a process that died between
 * the two) once STALE_CLAIM_MS has passed. The fence lasts FENCE_MS at most, past any hold's life.
 */
import { createHash } from "node:crypto";
import type { Logger } from "../logger.js";
import { type RedisClient, registerScripts, scriptFamily } from "../redis/scripts.js";

/** Longer than any hold lives (an event's holdSeconds is at most a day). */
export const FENCE_MS = 25 * 3_600_000;
/** A claim this old whose purchase was never written was left by a request that died. */
export const STALE_CLAIM_MS = 10_000;

/**
 * One fence per hold and fan: a hold is one fan's, so the fan's own purchases meet; another fan
 * naming the hold id (refused by the store as not theirs) never holds the owner's fence.
 */
export const purchaseFenceKey = (eventId: string, holdId: string, fanId: string) =>
  `buy:{evt:${eventId}}:${holdId}:${createHash("sha256").update(fanId).digest("base64url").slice(0, 22)}`;

/** Whose purchase of which hold. */
export interface FencedOrder {
  eventId: string;
  holdId: string;
  fanId: string;
}

export type FenceClaim = { ok: true } | { ok: false; holder: string; ageMs: number };

export interface PurchaseFence {
  /** The fence for `purchaseId` (its own already, free, or taken from `takeOverFrom`), or who holds it. */
  claim(order: FencedOrder, purchaseId: string, takeOverFrom?: string): Promise<FenceClaim>;
  /** Gives the fence back if `purchaseId` holds it; never throws. */
  release(order: FencedOrder, purchaseId: string): Promise<void>;
}

const fenceScripts = scriptFamily({ name: "purchase-fence", files: { fence: "purchase-fence-1" } });

export function createPurchaseFence(redis: RedisClient, logger: Logger): PurchaseFence {
  const run = registerScripts(redis, fenceScripts);
  return {
    async claim({ eventId, holdId, fanId }, purchaseId, takeOverFrom = "") {
      const reply = await run<unknown[]>(
        "fence",
        [purchaseFenceKey(eventId, holdId, fanId)],
        ["claim", purchaseId, FENCE_MS, takeOverFrom],
      );
      if (reply[0] === 1) return { ok: true };
      return { ok: false, holder: String(reply[1]), ageMs: Number(reply[2]) };
    },
    async release({ eventId, holdId, fanId }, purchaseId) {
      await run("fence", [purchaseFenceKey(eventId, holdId, fanId)], ["release", purchaseId]).catch((err: unknown) =>
        logger.debug({ err: (err as Error).message, holdId }, "purchase fence not released; it lapses by itself"),
      );
    },
  };
}
