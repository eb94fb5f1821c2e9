/**
 * The purchase saga. Payment is an external system that cannot join the DynamoDB transaction,
 * so a purchase is a chain of local steps, each idempotent, with a destination for every failure:
 *
 *   1. the purchase item is written `pending` (conditional put keyed by a purchase id derived from
 *      the fan's Idempotency-Key, so a retry finds it);
 *   2. a reconcile job is queued (delayed past the payment timeout) BEFORE charging, so a crash at
 *      any later point still gets resolved;
 *   3. right before the charge, a conditional write: the purchase is still `pending` (one the
 *      reconciler failed meanwhile is never charged), and the attempt is dated and counted;
 *      then the charge, with the purchase id as the provider's idempotency key;
 *   4. charged: ONE transaction confirms (seats held->sold, purchase pending->confirmed, outbox);
 *      charged but the purchase cannot be confirmed (the hold is lost, or the purchase failed
 *      meanwhile): refund (compensation), purchase `refunded`;
 *      declined: purchase `failed`, the hold stays until it expires;
 *      unknown (timeout): left `pending`, resolved by the reconciler via lookup or the webhook;
 *      a provider error: looked up. Charged: as charged. Nothing under the key: `failed` only if
 *      this was the one attempt ever made, by the request that created the purchase; a replay
 *      stays `pending` (its first attempt may still land), and the answer is 202.
 *
 * Money taken never ends without a ticket or a refund, whoever finds the charge: the saga when
 * its charge comes back, the reconciler (pending purchases, after the latest attempt's charge
 * window; failed ones on their per-purchase job) and the webhook all refund a charge whose
 * purchase is not confirmed, whatever state the purchase is in. "Nothing was charged" is said
 * only on the provider's word for the key (a lookup), never on the word of one call.
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
import type { SeatMapWrites } from "../claims/seat-map-writes.js";
import type { WaitingRoom } from "../waiting-room/index.js";
import { type FencedOrder, type PurchaseFence, STALE_CLAIM_MS } from "./fence.js";

export type PurchaseOutcome =
  | { kind: "confirmed"; purchase: Purchase }
  /** The payment outcome is not known yet; the reconciler resolves it. */
  | { kind: "pending"; purchase: Purchase }
  | { kind: "declined"; purchase: Purchase; reason: string }
  /** Charged, but the hold was lost before the confirmation: the charge was refunded. */
  | { kind: "refunded"; purchase: Purchase }
  /**
   * Nothing was charged under the key, on the provider's word (a provider error on the only
   * attempt and a lookup that found nothing, or the reconciler's verdict after the charge
   * window). A new Idempotency-Key may try again.
   */
  | { kind: "provider_error"; purchase: Purchase }
  | { kind: "key_reused" }
  /** Another purchase of this session (another hold, or another Idempotency-Key) is under way: nothing was charged. */
  | { kind: "in_progress" }
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
  seatMapWrites: Pick<SeatMapWrites, "sold">;
  metrics: Metrics;
  logger: Logger;
  reconciler?: ReconcileScheduler;
  /** One purchase of a session at a time (./fence.ts); absent (some tests): purchases are not fenced. */
  fence?: PurchaseFence;
  /**
   * Adds a confirmed purchase's BookingConfirmed job (src/workers/outbox.ts bookingPublisher), so
   * its consumer acknowledges the outbox record from `unsent`. Absent: the publisher adds it.
   */
  bookings?: { confirmed(purchase: Purchase): Promise<void> };
  paymentTimeoutMs: number;
  /**
   * The longest a store write may take (DYNAMODB_TIMEOUT_MS x DYNAMODB_MAX_ATTEMPTS): a charge
   * attempt is sent at most this long after it was dated. Default 0.
   */
  storeRequestBudgetMs?: number;
  /** Epoch ms, the inventory's clock; default Date.now. */
  clock?: () => number;
}

/**
 * The failure reason of a purchase taken out of `pending` because its charge must be refunded
 * (the hold was lost): `failed` with this reason is a refund under way, not a final state.
 */
export { REFUND_DUE };

const refundDue = (purchase: Purchase) => purchase.status === "failed" && purchase.failureReason === REFUND_DUE;

/** Failure reasons. The provider said nothing was charged for the key, when the saga looked: */
const PROVIDER_ERROR = "provider_error";
const NOT_CHARGED = "not_charged";
/** The refund reason of a charge that landed on a purchase already failed. */
const CHARGED_AFTER_FAILURE = "charged_after_failure";

/** Failed on the provider's word that the key was not charged (a later charge is refunded). */
const nothingCharged = (purchase: Purchase) =>
  purchase.status === "failed" && (purchase.failureReason === PROVIDER_ERROR || purchase.failureReason === NOT_CHARGED);

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
  /** The purchase as stored (consistent), or null. */
  find(eventId: string, purchaseId: string): Promise<Purchase | null>;
  /** Purchases of an event by status, from the authoritative store. */
  /** `soldSeatPurchases`: the confirmed purchases of seats, when the caller just read the seats. */
  counts(eventId: string, soldSeatPurchases?: number): Promise<Record<Purchase["status"], number>>;
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

/**
 * The longest queueing the reconcile job may take (a fail-fast Redis command: a 2 s timeout, one
 * retry), which happens after the purchase's creation dates its first charge attempt.
 */
export const SCHEDULE_BUDGET_MS = 5_000;

export function createPurchaseSaga(deps: PurchaseSagaDeps): PurchaseSaga {
  const { inventory, payments, metrics, logger } = deps;
  const clock = deps.clock ?? Date.now;
  // A lookup that finds nothing is believed only this long after the latest attempt started: the
  // attempt's own write may take the store's whole budget before the charge is sent (a first
  // attempt is dated by the purchase's creation, and the reconcile job is queued between the two:
  // SCHEDULE_BUDGET_MS), and the charge the payment timeout before the saga stops waiting for it.
  const chargeWindowMs = deps.paymentTimeoutMs + (deps.storeRequestBudgetMs ?? 0) + SCHEDULE_BUDGET_MS;

  const ended = (purchase: Purchase): PurchaseOutcome | null => {
    if (refundDue(purchase)) return null;
    switch (purchase.status) {
      case "confirmed":
        return { kind: "confirmed", purchase };
      case "refunded":
        return { kind: "refunded", purchase };
      case "failed":
        return nothingCharged(purchase)
          ? { kind: "provider_error", purchase }
          : { kind: "declined", purchase, reason: purchase.failureReason ?? "declined" };
      default:
        return null;
    }
  };

  const pending = (purchase: Purchase): PurchaseOutcome => ({ kind: "pending", purchase });

  const current = async (eventId: string, purchaseId: string, fallback: Purchase) =>
    (await inventory.purchases.get({ eventId, purchaseId })) ?? fallback;

  /** Since the purchase's latest charge attempt started (its creation, if none has). */
  const ageOf = (purchase: Purchase) => clock() - Date.parse(purchase.chargeStartedAt ?? purchase.createdAt);

  const completeSession = async (eventId: string, sessionId?: string) => {
    // The session's slot goes to the next fan in line. Best effort: it also expires.
    if (sessionId) await deps.waitingRoom.completeSession(eventId, sessionId).catch(() => undefined);
  };

  /** Step 4 once the money is known to be taken: confirm, or compensate with a refund. */
  async function settleCharged(purchase: Purchase, chargeId: string): Promise<PurchaseOutcome> {
    const { eventId, purchaseId, holdId, fanId } = purchase;
    // The charge is recorded by the transition that follows: the confirmation, or refund_due.
    const confirmed = await inventory.purchases.confirm({ eventId, holdId, fanId, purchaseId, chargeId });
    if (confirmed.ok) {
      if (!confirmed.alreadyConfirmed) {
        metrics.purchases.inc({ outcome: "confirmed" });
        void deps.seatMapWrites.sold(eventId, confirmed.purchase.seats);
        // Right after the commit; a crash or a Redis away here leaves the record unsent, and the
        // outbox publisher adds the same job (same id) once the record is past its margin.
        deps.bookings
          ?.confirmed(confirmed.purchase)
          .catch((err: unknown) =>
            logger.debug({ err: (err as Error).message, purchaseId }, "booking not queued; the outbox publisher will"),
          );
      }
      return { kind: "confirmed", purchase: confirmed.purchase };
    }
    if (confirmed.reason === "contention") return pending(purchase);
    if (confirmed.reason === "purchase_not_pending") {
      // Failed meanwhile (a verdict of "never charged" that the charge outran, or a decision to
      // refund): the money must go back all the same. Refunded already: nothing more to do.
      const now = await current(eventId, purchaseId, purchase);
      if (now.status === "failed") return compensate(now, chargeId, CHARGED_AFTER_FAILURE);
      return ended(now) ?? pending(now);
    }
    // The hold is gone (expired, released, another's): the money must go back.
    return compensate(purchase, chargeId, confirmed.reason);
  }

  /**
   * A charge was found for a purchase that cannot be confirmed. First out of `pending` (or from
   * whatever failure it had) to refund_due, so that no confirmation still on its way can commit
   * after the refund and the reconciler finishes the refund if this process cannot; then refund.
   */
  async function compensate(purchase: Purchase, chargeId: string, reason: string): Promise<PurchaseOutcome> {
    const { eventId, purchaseId } = purchase;
    const fenced = await inventory.purchases.markRefundDue({ eventId, purchaseId, chargeId });
    if (fenced.ok) return refundCharged(fenced.purchase, chargeId, reason);
    const now = await current(eventId, purchaseId, purchase);
    if (now.status === "confirmed") {
      // A confirmation sent earlier (one that timed out on its way) committed after all: the
      // seats are sold to this purchase, and the money stays.
      logger.info({ purchaseId }, "a late confirmation committed before the refund; kept");
      return { kind: "confirmed", purchase: now };
    }
    return ended(now) ?? pending(now);
  }

  /** The compensation of a purchase already taken out of `pending` (refund_due): refund, then mark it refunded. */
  async function refundCharged(purchase: Purchase, chargeId: string, reason: string): Promise<PurchaseOutcome> {
    const { eventId, purchaseId } = purchase;
    const refund = await payments.refund(chargeId, `refund-${purchaseId}`);
    if (refund.kind !== "refunded") {
      logger.warn({ purchaseId, chargeId, err: refund.message }, "refund failed; the reconciler will retry");
      return pending(purchase);
    }
    const marked = await inventory.purchases.markRefunded({ eventId, purchaseId, reason, chargeId });
    metrics.purchases.inc({ outcome: "refunded" });
    logger.info({ purchaseId, chargeId, reason }, "charged, but the purchase could not be confirmed: refunded");
    return { kind: "refunded", purchase: marked.ok ? marked.purchase : purchase };
  }

  /** pending -> failed; `ifAttempts` fences a "never charged" verdict against a newer attempt. */
  async function fail(purchase: Purchase, reason: string, ifAttempts?: number): Promise<PurchaseOutcome> {
    const marked = await inventory.purchases.markFailed({
      eventId: purchase.eventId,
      purchaseId: purchase.purchaseId,
      reason,
      ...(ifAttempts === undefined ? {} : { ifAttempts }),
    });
    const now = marked.ok ? marked.purchase : await current(purchase.eventId, purchase.purchaseId, purchase);
    if (marked.ok) metrics.purchases.inc({ outcome: reason === "declined" ? "declined" : "provider_error" });
    return ended(now) ?? pending(now);
  }

  /** The provider's record of the key says it was charged and refunded: the purchase says so too. */
  async function alreadyRefunded(purchase: Purchase, chargeId: string, reason: string): Promise<PurchaseOutcome> {
    const marked = await inventory.purchases.markRefunded({
      eventId: purchase.eventId,
      purchaseId: purchase.purchaseId,
      reason,
      chargeId,
    });
    if (marked.ok) return { kind: "refunded", purchase: marked.purchase };
    const now = await current(purchase.eventId, purchase.purchaseId, purchase);
    return ended(now) ?? pending(now);
  }

  /** settleCharged, but a store failure after the charge leaves it pending for the reconciler. */
  async function settleOrLeave(purchase: Purchase, chargeId: string): Promise<PurchaseOutcome> {
    try {
      return await settleCharged(purchase, chargeId);
    } catch (err) {
      // The money is taken and the confirmation's fate unknown (a store timeout may have
      // committed it): never guess, and never refund here. The reconciler reads the truth.
      const unavailable = err instanceof InventoryUnavailableError;
      logger[unavailable ? "warn" : "error"](
        { purchaseId: purchase.purchaseId, err: unavailable ? (err as Error).message : err },
        "charged, confirmation not settled; left pending for the reconciler",
      );
      metrics.purchases.inc({ outcome: "pending" });
      return pending(purchase);
    }
  }

  /**
   * The provider answered this call with an error. That says nothing about the key: a 5xx can
   * come after the capture, and an earlier attempt (the one a replay repeats) may have charged.
   * The lookup decides; "nothing charged" is said only when the lookup finds nothing AND this was
   * the only attempt ever started, by the request that created the purchase (the conditional
   * write checks that no other attempt started since).
   */
  async function afterProviderError(
    purchase: Purchase,
    code: "provider_error" | "unreachable" | "invalid_request",
    attempt: { number: number; createdPurchase: boolean },
  ): Promise<PurchaseOutcome> {
    const onlyAttempt = attempt.createdPurchase && attempt.number === 1;
    if (code === "unreachable") {
      // This call never left: it charged nothing. Alone, nothing was charged under the key; a
      // replay's first attempt may have, and the provider cannot be asked now.
      if (onlyAttempt) return fail(purchase, PROVIDER_ERROR, 1);
      metrics.purchases.inc({ outcome: "pending" });
      return pending(purchase);
    }
    const found = await payments.lookup(purchase.purchaseId);
    switch (found.kind) {
      case "charged":
        return found.refunded
          ? alreadyRefunded(purchase, found.chargeId, "refunded")
          : settleOrLeave(purchase, found.chargeId);
      case "declined":
        return fail(purchase, "declined");
      case "error":
        metrics.purchases.inc({ outcome: "pending" });
        logger.warn({ purchaseId: purchase.purchaseId, err: found.message }, "payment provider error; left pending");
        return pending(purchase);
      case "not_found":
        if (onlyAttempt) return fail(purchase, PROVIDER_ERROR, 1);
        metrics.purchases.inc({ outcome: "pending" });
        logger.info({ purchaseId: purchase.purchaseId }, "provider error on a repeated attempt; left pending");
        return pending(purchase);
    }
  }

  /** The saga of one purchase, once its hold's fence is its own. */
  async function purchaseOnce(request: PurchaseRequest): Promise<PurchaseOutcome> {
    const { eventId, fanId, holdId } = request;
    const purchaseId = purchaseIdOf(eventId, fanId, request.idempotencyKey);
    const fingerprint = requestFingerprint(holdId, request.paymentToken);
    // A new purchase is written with its first charge attempt started (one write for both).
    const created = await inventory.purchases.createPending({
      eventId,
      holdId,
      fanId,
      purchaseId,
      fingerprint,
      startCharge: true,
      ...(request.sessionId ? { sessionId: request.sessionId } : {}),
    });
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
    const done = ended(created.purchase);
    if (done) return done;
    // A refund under way: the reconciler finishes it; nothing is charged again.
    if (refundDue(created.purchase)) return pending(created.purchase);
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

    // Right before the charge, conditionally: still pending (a purchase failed meanwhile is
    // never charged), and this attempt dated and counted for the reconciler. A purchase this
    // request wrote has its first attempt started by that write.
    const started = created.created
      ? { ok: true as const, purchase: created.purchase, attempt: created.purchase.chargeAttempts ?? 1 }
      : await inventory.purchases.startCharge({ eventId, purchaseId });
    if (!started.ok) {
      if (started.reason === "not_found") return { kind: "hold_not_found" };
      return ended(started.purchase) ?? pending(started.purchase);
    }
    const purchase = started.purchase;

    const charge = await payments.charge(purchaseId, purchase.amount, request.paymentToken);
    switch (charge.kind) {
      case "charged":
        return settleOrLeave(purchase, charge.chargeId);
      case "declined":
        return fail(purchase, "declined");
      case "unknown":
        metrics.purchases.inc({ outcome: "pending" });
        logger.info({ purchaseId }, "payment outcome unknown; left pending for the reconciler");
        return pending(purchase);
      case "error":
        if (charge.code === "idempotency_mismatch") return { kind: "key_reused" };
        logger.warn({ purchaseId, code: charge.code, err: charge.message }, "payment provider error; looking it up");
        return afterProviderError(purchase, charge.code, { number: started.attempt, createdPurchase: created.created });
    }
  }

  /**
   * Whether this purchase may go on: the hold's fence is its own (free, its own already: a replay,
   * or taken from a purchase that has ended or never got written). False: another purchase of the
   * hold is under way. Redis or DynamoDB unable to say: true (DynamoDB still lets one purchase of
   * the hold through, and the saga refunds the others' charges).
   */
  async function fenced(order: FencedOrder, purchaseId: string): Promise<boolean> {
    const fence = deps.fence;
    if (!fence) return true;
    try {
      const claim = await fence.claim(order, purchaseId);
      if (claim.ok) return true;
      const other = await inventory.purchases.get({ eventId: order.eventId, purchaseId: claim.holder });
      const over = other ? other.status !== "pending" : claim.ageMs >= STALE_CLAIM_MS;
      if (!over) return false;
      return (await fence.claim(order, purchaseId, claim.holder)).ok;
    } catch (err) {
      logger.debug(
        { err: (err as Error).message, holdId: order.holdId },
        "purchase fence unavailable; DynamoDB decides alone",
      );
      return true;
    }
  }

  /** resolve's work; the fence is given back by resolve. */
  async function resolveOnce(
    eventId: string,
    purchaseId: string,
    options: { minAgeMs?: number; sessionId?: string },
  ): Promise<PurchaseOutcome | null> {
    const purchase = await inventory.purchases.get({ eventId, purchaseId });
    if (!purchase) return null;
    if (purchase.status === "confirmed" || purchase.status === "refunded") return ended(purchase);
    if (refundDue(purchase)) {
      // A refund that was decided but not finished (the provider failed, or a crash).
      const found = await payments.lookup(purchaseId);
      if (found.kind === "error") throw new Error(`payment lookup failed for ${purchaseId}: ${found.message}`);
      if (found.kind === "charged") {
        return found.refunded
          ? alreadyRefunded(purchase, found.chargeId, REFUND_DUE)
          : refundCharged(purchase, found.chargeId, REFUND_DUE);
      }
      // Only a charge is ever marked refund_due; the provider's answer per key is final.
      throw new Error(`refund due for ${purchaseId}, but the payment lookup says ${found.kind}`);
    }
    if (purchase.status === "failed") {
      // A declined key never charges. Any other failure ("never charged", a provider error)
      // was a verdict on what the provider had then: a charge that landed later goes back.
      if (!nothingCharged(purchase)) return ended(purchase);
      const found = await payments.lookup(purchaseId);
      if (found.kind === "error") throw new Error(`payment lookup failed for ${purchaseId}: ${found.message}`);
      if (found.kind !== "charged") return ended(purchase);
      if (found.refunded) return alreadyRefunded(purchase, found.chargeId, CHARGED_AFTER_FAILURE);
      logger.warn({ purchaseId, chargeId: found.chargeId }, "a charge landed after the purchase failed; refunding");
      return compensate(purchase, found.chargeId, CHARGED_AFTER_FAILURE);
    }
    if (options.minAgeMs && ageOf(purchase) < options.minAgeMs) return pending(purchase);
    const found = await payments.lookup(purchaseId);
    switch (found.kind) {
      case "charged":
        if (found.refunded) return alreadyRefunded(purchase, found.chargeId, "refunded");
        return settleCharged(purchase, found.chargeId);
      case "declined":
        return fail(purchase, "declined");
      case "not_found":
        // Nothing under the key yet. Only once the latest attempt's charge window has passed is
        // that the answer, and only if no attempt started since this read (conditional).
        if (ageOf(purchase) < chargeWindowMs) return pending(purchase);
        return fail(purchase, NOT_CHARGED, purchase.chargeAttempts ?? 0);
      case "error":
        throw new Error(`payment lookup failed for ${purchaseId}: ${found.message}`);
    }
  }

  return {
    find: (eventId, purchaseId) => inventory.purchases.get({ eventId, purchaseId }),
    counts: (eventId, soldSeatPurchases) =>
      inventory.purchases.count({ eventId, ...(soldSeatPurchases !== undefined ? { soldSeatPurchases } : {}) }),

    async purchase(request) {
      const { eventId, holdId, fanId, sessionId } = request;
      const purchaseId = purchaseIdOf(eventId, fanId, request.idempotencyKey);
      const order = { eventId, holdId, fanId, sessionId };
      if (!(await fenced(order, purchaseId))) {
        metrics.purchases.inc({ outcome: "in_progress" });
        return { kind: "in_progress" };
      }
      const outcome = await purchaseOnce(request);
      if (outcome.kind === "confirmed") await completeSession(eventId, sessionId || outcome.purchase.sessionId);
      // A purchase whose outcome is not known yet keeps the session's fence: the next key finds it
      // pending and is turned away until the reconciler ends it. Any other outcome gives it back
      // (a throw keeps it too: the next key looks the purchase up).
      if (outcome.kind !== "pending") void deps.fence?.release(order, purchaseId);
      return outcome;
    },

    async resolve(eventId, purchaseId, options = {}) {
      const outcome = await resolveOnce(eventId, purchaseId, options);
      if (outcome && outcome.kind !== "pending" && "purchase" in outcome) {
        const { holdId, fanId } = outcome.purchase;
        const sessionId = outcome.purchase.sessionId ?? options.sessionId;
        // Confirmed by whoever got here (the webhook, the reconciler, a backstop that knows no
        // session): the session the purchase was made in ends, and its slot goes to the next fan.
        // Idempotent: a session already ended is left as it is.
        if (outcome.kind === "confirmed") await completeSession(eventId, sessionId);
        // Ended: the session's fence goes, so its next purchase meets the ended one at once.
        void deps.fence?.release({ eventId, holdId, fanId, sessionId }, purchaseId);
      }
      return outcome;
    },
  };
}
