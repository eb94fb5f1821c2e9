/**
 * The purchase saga. Payment is an external system that cannot join the DynamoDB transaction,
 * so a purchase is a chain of local steps, each idempotent, with a destination for every failure:
 *
 *   1. the purchase item is written `pending` (conditional put keyed by a purchase id derived from
 *      the fan's Idempotency-Key, so a retry finds it);
 *   2. a reconcile job is queued (delayed past the payment timeout) BEFORE charging, so a crash at
 *      any later point still gets resolved;
 *   3. the charge, with the purchase id as the provider's idempotency key;
 *   4. charged: ONE transaction confirms (seats held->sold, purchase pending->confirmed, outbox);
 *      charged but the hold is lost: refund (compensation), purchase `refunded`;
 *      declined: purchase `failed`, the hold stays until it expires;
 *      unknown (timeout): left `pending`, resolved by the reconciler via lookup or the webhook.
 *
 * Once the money is taken, the store failing (a DynamoDB timeout on the confirmation: it may have
 * committed or not) never leads to a refund: the purchase stays `pending`, the fan is told so
 * (202), and the reconciler settles it by reading what DynamoDB actually holds. A refund happens
 * only after the purchase has been moved out of `pending` (pending -> failed with reason
 * `refund_due`, then refunded): the confirmation is conditioned on `pending`, so one still on its
 * way (sent before a timeout, arriving late with its old clock) can no longer commit once the
 * money goes back. If that late confirmation wins the race instead, the purchase is confirmed
 * and nothing is refunded.
 *
 * Running any step again changes nothing it already changed, so the whole call is safe to repeat
 * (ten identical requests at once make one charge and one purchase), and `resolve` (reconciler,
 * webhook) may run concurrently with the request that started it.
 */
import { createHash } from "node:crypto";
import { type Inventory, InventoryUnavailableError, type Purchase, REFUND_DUE } from "../inventory/index.js";
import type { Logger } from "../logger.js";
import type { Metrics } from "../metrics.js";
import type { PaymentProvider } from "../payments/provider.js";
import type { SeatMapCache } from "../seatmap/cache.js";
import type { WaitingRoom } from "../waiting-room/index.js";

export type PurchaseOutcome =
  | { kind: "confirmed"; purchase: Purchase }
  /** The payment outcome is not known yet; the reconciler resolves it. */
  | { kind: "pending"; purchase: Purchase }
  | { kind: "declined"; purchase: Purchase; reason: string }
  /** Charged, but the hold was lost before the confirmation: the charge was refunded. */
  | { kind: "refunded"; purchase: Purchase }
  /** The provider failed before charging anything. A new Idempotency-Key may try again. */
  | { kind: "provider_error"; purchase: Purchase }
  | { kind: "key_reused" }
  | { kind: "hold_not_found" }
  | { kind: "hold_unusable"; reason: "hold_expired" | "hold_not_owned" | "hold_released" | "hold_confirmed" };

export interface PurchaseRequest {
  eventId: string;
  fanId: string;
  /** The fan's waiting-room session, ended when the purchase is confirmed. */
  sessionId: string;
  holdId: string;
  idempotencyKey: string;
  paymentToken: string;
}

export interface ReconcileScheduler {
  /** Resolves the purchase after `delayMs` unless it is resolved by then (deduplicated by id). */
  schedule(eventId: string, purchaseId: string, delayMs: number, sessionId?: string): Promise<void>;
}

export interface PurchaseSagaDeps {
  inventory: Inventory;
  /** Already wrapped with withTimeout(PAYMENT_TIMEOUT_MS). */
  payments: PaymentProvider;
  waitingRoom: Pick<WaitingRoom, "completeSession">;
  seatMap: Pick<SeatMapCache, "apply">;
  metrics: Metrics;
  logger: Logger;
  reconciler?: ReconcileScheduler;
  paymentTimeoutMs: number;
}

/**
 * The failure reason of a purchase taken out of `pending` because its charge must be refunded
 * (the hold was lost): `failed` with this reason is a refund under way, not a final state.
 */
export { REFUND_DUE };

const refundDue = (purchase: Purchase) => purchase.status === "failed" && purchase.failureReason === REFUND_DUE;

/**
 * `<eventId>-<26 base32 chars>`: derived from the event, the fan and the fan's Idempotency-Key,
 * so two fans' keys never collide and the event can be read back from the id alone.
 */
export function purchaseIdOf(eventId: string, fanId: string, idempotencyKey: string): string {
  const digest = createHash("sha256").update(`${eventId}\n${fanId}\n${idempotencyKey}`).digest();
  const alphabet = "abcdefghijklmnopqrstuvwxyz234567";
  let bits = 0;
  let value = 0;
  let out = "";
  for (const byte of digest) {
    value = (value << 8) | byte;
    bits += 8;
    while (bits >= 5 && out.length < 26) {
      out += alphabet[(value >>> (bits - 5)) & 31];
      bits -= 5;
    }
  }
  return `${eventId}-${out}`;
}

/** The event of a purchase id, or null when it is not one of ours. */
export function eventOfPurchase(purchaseId: string): string | null {
  const m = /^([A-Za-z0-9_]{1,32})-[a-z2-7]{26}$/.exec(purchaseId);
  return m?.[1] ?? null;
}

/** Same key, same body: the fingerprint of what the fan asked for under one key. */
export function requestFingerprint(holdId: string, paymentToken: string): string {
  return createHash("sha256").update(`${holdId}\n${paymentToken}`).digest("hex").slice(0, 32);
}

export interface PurchaseSaga {
  purchase(request: PurchaseRequest): Promise<PurchaseOutcome>;
  /**
   * Drives a pending purchase to its end from the provider's own answer (lookup), for the
   * reconciler and the webhook. `minAgeMs`: leave it alone if younger (a charge may be in flight).
   */
  resolve(
    eventId: string,
    purchaseId: string,
    options?: { minAgeMs?: number; sessionId?: string },
  ): Promise<PurchaseOutcome | null>;
}

export function createPurchaseSaga(deps: PurchaseSagaDeps): PurchaseSaga {
  const { inventory, payments, metrics, logger } = deps;

  const ended = (purchase: Purchase): PurchaseOutcome | null => {
    if (refundDue(purchase)) return null;
    switch (purchase.status) {
      case "confirmed":
        return { kind: "confirmed", purchase };
      case "refunded":
        return { kind: "refunded", purchase };
      case "failed":
        return purchase.failureReason === "provider_error"
          ? { kind: "provider_error", purchase }
          : { kind: "declined", purchase, reason: purchase.failureReason ?? "declined" };
      default:
        return null;
    }
  };

  const current = async (eventId: string, purchaseId: string, fallback: Purchase) =>
    (await inventory.getPurchase(eventId, purchaseId)) ?? fallback;

  /** Step 4 once the money is known to be taken: confirm, or compensate with a refund. */
  async function settleCharged(purchase: Purchase, chargeId: string, sessionId?: string): Promise<PurchaseOutcome> {
    const { eventId, purchaseId, holdId, fanId } = purchase;
    await inventory.recordCharge(eventId, purchaseId, chargeId);
    const confirmed = await inventory.confirm(eventId, holdId, fanId, purchaseId);
    if (confirmed.ok) {
      if (!confirmed.alreadyConfirmed) {
        metrics.purchases.inc({ outcome: "confirmed" });
        deps.seatMap
          .apply(
            eventId,
            confirmed.purchase.seats.map((id) => ({ id, status: "sold" as const })),
          )
          .catch((err: unknown) => logger.warn({ err: (err as Error).message, purchaseId }, "seat-map update failed"));
      }
      if (sessionId) {
        // The session's slot goes to the next fan in line. Best effort: it also expires.
        await deps.waitingRoom.completeSession(eventId, sessionId).catch(() => undefined);
      }
      return { kind: "confirmed", purchase: confirmed.purchase };
    }
    if (confirmed.reason === "contention") return { kind: "pending", purchase };
    if (confirmed.reason === "purchase_not_pending") {
      const now = await current(eventId, purchaseId, purchase);
      return ended(now) ?? { kind: "pending", purchase: now };
    }
    // The hold is gone (expired, released, another's): the money must go back. First out of
    // `pending`, so that no confirmation still on its way can commit after the refund.
    const fenced = await inventory.markPurchaseFailed(eventId, purchaseId, REFUND_DUE);
    if (!fenced.ok) {
      const now = await current(eventId, purchaseId, purchase);
      if (now.status === "confirmed") {
        // A confirmation sent earlier (one that timed out on its way) committed after all: the
        // seats are sold to this purchase, and the money stays.
        logger.info({ purchaseId }, "a late confirmation committed before the refund; kept");
        if (sessionId) await deps.waitingRoom.completeSession(eventId, sessionId).catch(() => undefined);
        return { kind: "confirmed", purchase: now };
      }
      return (
        ended(now) ??
        (refundDue(now) ? refundCharged(now, chargeId, confirmed.reason) : { kind: "pending", purchase: now })
      );
    }
    return refundCharged(fenced.purchase, chargeId, confirmed.reason);
  }

  /** The compensation of a purchase already taken out of `pending` (refund_due): refund, then mark it refunded. */
  async function refundCharged(purchase: Purchase, chargeId: string, reason: string): Promise<PurchaseOutcome> {
    const { eventId, purchaseId } = purchase;
    const refund = await payments.refund(chargeId, `refund-${purchaseId}`);
    if (refund.kind !== "refunded") {
      logger.warn({ purchaseId, chargeId, err: refund.message }, "refund failed; the reconciler will retry");
      return { kind: "pending", purchase };
    }
    const marked = await inventory.markPurchaseRefunded(eventId, purchaseId, reason, chargeId);
    metrics.purchases.inc({ outcome: "refunded" });
    logger.info({ purchaseId, chargeId, reason }, "charged but the hold was lost: refunded");
    return { kind: "refunded", purchase: marked.ok ? marked.purchase : purchase };
  }

  async function fail(purchase: Purchase, reason: string): Promise<PurchaseOutcome> {
    const marked = await inventory.markPurchaseFailed(purchase.eventId, purchase.purchaseId, reason);
    const now = marked.ok ? marked.purchase : await current(purchase.eventId, purchase.purchaseId, purchase);
    metrics.purchases.inc({ outcome: reason === "provider_error" ? "provider_error" : "declined" });
    return ended(now) ?? { kind: "pending", purchase: now };
  }

  return {
    async purchase(request) {
      const { eventId, fanId, holdId } = request;
      const purchaseId = purchaseIdOf(eventId, fanId, request.idempotencyKey);
      const fingerprint = requestFingerprint(holdId, request.paymentToken);
      const created = await inventory.createPendingPurchase(eventId, holdId, fanId, purchaseId, fingerprint);
      if (!created.ok) {
        switch (created.reason) {
          case "purchase_conflict":
            return { kind: "key_reused" };
          case "not_found":
            return { kind: "hold_not_found" };
          case "invalid_request":
            return { kind: "key_reused" };
          default:
            return { kind: "hold_unusable", reason: created.reason };
        }
      }
      const purchase = created.purchase;
      const done = ended(purchase);
      if (done) return done;
      if (created.created) metrics.purchases.inc({ outcome: "started" });

      // Before the charge: whatever happens to this process from here on, someone resolves it.
      await deps.reconciler
        ?.schedule(eventId, purchaseId, deps.paymentTimeoutMs + 2_000, request.sessionId)
        .catch((err: unknown) =>
          logger.warn(
            { err: (err as Error).message, purchaseId },
            "reconcile job not queued; the periodic sweep will find it",
          ),
        );

      const charge = await payments.charge(purchaseId, purchase.amount, request.paymentToken);
      switch (charge.kind) {
        case "charged":
          try {
            return await settleCharged(purchase, charge.chargeId, request.sessionId);
          } catch (err) {
            // The money is taken and the confirmation's fate unknown (a store timeout may have
            // committed it): never guess, and never refund here. The reconciler reads the truth.
            const unavailable = err instanceof InventoryUnavailableError;
            logger[unavailable ? "warn" : "error"](
              { purchaseId, err: unavailable ? (err as Error).message : err },
              "charged, confirmation not settled; left pending for the reconciler",
            );
            metrics.purchases.inc({ outcome: "pending" });
            return { kind: "pending", purchase };
          }
        case "declined":
          return fail(purchase, "declined");
        case "unknown":
          metrics.purchases.inc({ outcome: "pending" });
          logger.info({ purchaseId }, "payment outcome unknown; left pending for the reconciler");
          return { kind: "pending", purchase };
        case "error":
          if (charge.code === "idempotency_mismatch") return { kind: "key_reused" };
          logger.warn(
            { purchaseId, code: charge.code, err: charge.message },
            "payment provider error; nothing charged",
          );
          return fail(purchase, "provider_error");
      }
    },

    async resolve(eventId, purchaseId, options = {}) {
      const purchase = await inventory.getPurchase(eventId, purchaseId);
      if (!purchase) return null;
      const done = ended(purchase);
      if (done) return done;
      if (refundDue(purchase)) {
        // A refund that was decided but not finished (the provider failed, or a crash).
        const found = await payments.lookup(purchaseId);
        if (found.kind === "charged") {
          if (found.refunded) {
            const marked = await inventory.markPurchaseRefunded(eventId, purchaseId, REFUND_DUE, found.chargeId);
            return { kind: "refunded", purchase: marked.ok ? marked.purchase : purchase };
          }
          return refundCharged(purchase, found.chargeId, REFUND_DUE);
        }
        // Only a charge is ever marked refund_due; the provider's answer per key is final.
        throw new Error(`refund due for ${purchaseId}, but the payment lookup says ${found.kind}`);
      }
      if (options.minAgeMs && Date.now() - Date.parse(purchase.createdAt) < options.minAgeMs) {
        return { kind: "pending", purchase };
      }
      const found = await payments.lookup(purchaseId);
      switch (found.kind) {
        case "charged":
          if (found.refunded) {
            const marked = await inventory.markPurchaseRefunded(eventId, purchaseId, "refunded", found.chargeId);
            return { kind: "refunded", purchase: marked.ok ? marked.purchase : purchase };
          }
          return settleCharged(purchase, found.chargeId, options.sessionId);
        case "declined":
          return fail(purchase, "declined");
        case "not_found":
          // Past the payment timeout and the provider never charged under this key: it never will.
          return fail(purchase, "not_charged");
        case "error":
          throw new Error(`payment lookup failed for ${purchaseId}: ${found.message}`);
      }
    },
  };
}
