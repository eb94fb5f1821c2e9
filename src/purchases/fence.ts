/**
 * One purchase of a session at a time (lua/purchase-fence-1.lua). Two purchases of one hold under two
 * Idempotency-Keys (a double click; a client that makes a new key per click) each charged the card,
 * and all but the one confirmed were refunded: ten clicks, ten charges, nine refunds. Two holds
 * bought at once both sold, though a session ends with its first purchase (one bought after the
 * other is refused). The fence, a Redis key per session naming the purchase under way, turns the
 * second away before it writes or charges anything (409 `purchase_in_progress`), until the first
 * has ended: confirmed (the session with it), or failed, which lets the next one go.
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

/** Whose purchase of which hold, in which waiting-room session. */
export interface FencedOrder {
  eventId: string;
  holdId: string;
  fanId: string;
  /**
   * The session that buys. A session makes one purchase (it ends with the first confirmed), so its
   * purchases meet at one fence whatever hold they name: two holds bought at once, or one hold
   * under two keys, and the second is turned away. The session id comes from the signed access
   * token, so another fan never holds this fence. Absent (a purchase stored before sessions were
   * recorded on it): one fence per hold and fan.
   */
  sessionId?: string | undefined;
}

const hashed = (text: string) => createHash("sha256").update(text).digest("base64url").slice(0, 22);

/** The fence's key: per session (see FencedOrder), else per hold and fan; under the event's tag. */
export const purchaseFenceKey = ({ eventId, holdId, fanId, sessionId }: FencedOrder) =>
  sessionId ? `buy:{evt:${eventId}}:s:${hashed(sessionId)}` : `buy:{evt:${eventId}}:${holdId}:${hashed(fanId)}`;

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
    async claim(order, purchaseId, takeOverFrom = "") {
      const reply = await run<unknown[]>(
        "fence",
        [purchaseFenceKey(order)],
        ["claim", purchaseId, FENCE_MS, takeOverFrom],
      );
      if (reply[0] === 1) return { ok: true };
      return { ok: false, holder: String(reply[1]), ageMs: Number(reply[2]) };
    },
    async release(order, purchaseId) {
      await run("fence", [purchaseFenceKey(order)], ["release", purchaseId]).catch((err: unknown) =>
        logger.debug(
          { err: (err as Error).message, holdId: order.holdId },
          "purchase fence not released; it lapses by itself",
        ),
      );
    },
  };
}
