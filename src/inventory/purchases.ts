/**
 * Purchases: the pending record the saga writes before it charges, the one-transaction
 * confirmation (seats sold, hold and purchase confirmed, BookingConfirmed in the outbox), the
 * failed/refunded transitions. The outbox record's shape and states live in ./outbox.ts.
 */
import { GetCommand, PutCommand, QueryCommand, UpdateCommand } from "@aws-sdk/lib-dynamodb";
import { GSI1, GSI2 } from "../dynamodb/table.js";
import type { EventCache } from "./events.js";
import { type FanEntry, fanConfirmAction, fanEntryOf } from "./fans.js";
import { type Counters, countersOf, firstCounter } from "./ga-counters.js";
import { readHoldEntry, validFan } from "./holds.js";
import { iso, toPurchase } from "./items.js";
import {
  gaCounters,
  HOLD_ID_PATTERN,
  ID_PATTERN,
  keys,
  PURCHASE_ID_PATTERN,
  PURCHASE_SHARD_LIST,
  parseSeatId,
  purchaseShard,
  REFUND_DUE,
} from "./keys.js";
import { readOpenPurchases, readPurchasesByKey } from "./open.js";
import { outboxUnsentSet } from "./outbox.js";
import {
  type CancellationReason,
  conditionalUpdate,
  conditionFailure,
  type Ctx,
  guard,
  type Item,
  mapLimit,
  queryPages,
  transact,
  type TransactItem,
} from "./store.js";
import type {
  ChargeStartResult,
  ConfirmResult,
  EventRef,
  HoldUnusableReason,
  PendingPurchaseResult,
  Purchase,
  PurchaseStatus,
  PurchaseTransitionResult,
} from "./types.js";

async function getPurchaseItem(ctx: Ctx, eventId: string, purchaseId: string): Promise<Item | undefined> {
  const out = await ctx.doc.send(
    new GetCommand({ TableName: ctx.tableName, Key: keys.purchase(eventId, purchaseId), ConsistentRead: true }),
  );
  return out.Item;
}

export async function getPurchase(ctx: Ctx, eventId: string, purchaseId: string): Promise<Purchase | null> {
  if (!ID_PATTERN.test(eventId) || !PURCHASE_ID_PATTERN.test(purchaseId)) return null;
  return guard("getPurchase", async () => {
    const item = await getPurchaseItem(ctx, eventId, purchaseId);
    return item ? toPurchase(item) : null;
  });
}

/** Why this hold (the fan's ledger entry) cannot be bought now, or null if it can. */
function unusable(entry: FanEntry, now: number): HoldUnusableReason | null {
  if (entry.status === "confirmed") return "hold_confirmed";
  if (entry.status === "released") return "hold_released";
  if (entry.status === "expired" || entry.expiresAt <= now) return "hold_expired";
  // An entry written before entries carried the hold (a deploy mid-sale) cannot be priced.
  if (entry.amount === undefined || (entry.ids === undefined && entry.area === undefined)) return "hold_expired";
  return null;
}

function sameOrder(purchase: Item, holdId: string, fanId: string, fingerprint?: string): boolean {
  return (
    purchase.holdId === holdId &&
    purchase.fanId === fanId &&
    (fingerprint === undefined || purchase.fingerprint === undefined || purchase.fingerprint === fingerprint)
  );
}

/**
 * The purchase, `pending`, written by a conditional put keyed by the caller's purchase id: a
 * retry of the same step (same id) finds the record it wrote and gets it back, unchanged.
 */
export async function createPendingPurchase(
  ctx: Ctx,
  eventId: string,
  holdId: string,
  fanId: string,
  purchaseId: string,
  fingerprint?: string,
  startCharge = false,
  sessionId?: string,
): Promise<PendingPurchaseResult> {
  if (!PURCHASE_ID_PATTERN.test(purchaseId)) {
    return { ok: false, reason: "invalid_request", message: "purchaseId must match ^[A-Za-z0-9_-]{1,128}$" };
  }
  if (!validFan(fanId)) return { ok: false, reason: "invalid_request", message: "fanId must be 1..128 characters" };
  if (!ID_PATTERN.test(eventId) || !HOLD_ID_PATTERN.test(holdId))
    return { ok: false, reason: "not_found", what: "hold" };

  return guard("createPendingPurchase", async () => {
    const existing = await getPurchaseItem(ctx, eventId, purchaseId);
    if (existing) {
      return sameOrder(existing, holdId, fanId, fingerprint)
        ? { ok: true, purchase: toPurchase(existing), created: false }
        : { ok: false, reason: "purchase_conflict" };
    }
    const now = ctx.clock();
    const hold = await readHoldEntry(ctx, eventId, fanId, holdId);
    if (hold === "not_owned") return { ok: false, reason: "hold_not_owned" };
    if (!hold) return { ok: false, reason: "not_found", what: "hold" };
    const why = unusable(hold, now);
    if (why) {
      // A concurrent retry may have written this purchase (and the saga confirmed it) between
      // our two reads: then the answer is that purchase, not the hold's state.
      const again = await getPurchaseItem(ctx, eventId, purchaseId);
      if (again && sameOrder(again, holdId, fanId, fingerprint)) {
        return { ok: true, purchase: toPurchase(again), created: false };
      }
      return { ok: false, reason: why };
    }

    const item: Item = {
      ...keys.purchase(eventId, purchaseId),
      entity: "PURCHASE",
      eventId,
      purchaseId,
      holdId,
      fanId,
      status: "pending",
      seats: hold.ids ?? [],
      ...(hold.area !== undefined ? { areaId: hold.area, quantity: hold.seats } : {}),
      amount: hold.amount,
      createdAt: iso(now),
      ...(fingerprint !== undefined ? { fingerprint } : {}),
      ...(startCharge ? { chargeStartedAt: iso(now), chargeAttempts: 1 } : {}),
      ...(sessionId ? { sessionId } : {}),
      // Open from here until its booking is acknowledged (or it fails): GSI3, KEYS_ONLY, a key
      // that never changes in between, so 2 index write units in the purchase's whole life.
      GSI3PK: keys.openPurchasesPartition(eventId, purchaseShard(purchaseId)),
      GSI3SK: keys.openPurchaseSortKey(iso(now), purchaseId),
    };
    try {
      await ctx.doc.send(
        new PutCommand({
          TableName: ctx.tableName,
          Item: item,
          ConditionExpression: "attribute_not_exists(PK)",
          ReturnValuesOnConditionCheckFailure: "ALL_OLD",
        }),
      );
    } catch (err) {
      const failed = conditionFailure(err);
      if (!failed?.item) throw err;
      // A concurrent retry of the same step got there first.
      return sameOrder(failed.item, holdId, fanId, fingerprint)
        ? { ok: true, purchase: toPurchase(failed.item), created: false }
        : { ok: false, reason: "purchase_conflict" };
    }
    return { ok: true, purchase: toPurchase(item), created: true };
  });
}

/**
 * Confirms a pending purchase in ONE TransactWriteItems: every seat held -> sold (still held by
 * this hold and fan, hold unexpired), the hold held -> confirmed, the purchase pending ->
 * confirmed, a BookingConfirmed outbox record, unsent, and the fan's ledger (the hold's entry
 * moves to `bought`). Any failed condition cancels all of it. In three steps: read what is to be
 * confirmed (a repeat ends there), build the transaction, and read why from a cancellation.
 */
export async function confirm(
  ctx: Ctx,
  eventId: string,
  holdId: string,
  fanId: string,
  purchaseId: string,
  chargeId?: string,
): Promise<ConfirmResult> {
  if (!ID_PATTERN.test(eventId) || !PURCHASE_ID_PATTERN.test(purchaseId)) {
    return { ok: false, reason: "not_found", what: "purchase" };
  }
  if (!HOLD_ID_PATTERN.test(holdId)) return { ok: false, reason: "not_found", what: "hold" };

  return guard("confirm", async () => {
    const order: Order = { eventId, holdId, fanId, purchaseId };
    const ready = await readConfirmable(ctx, order);
    if (!("now" in ready)) return ready;
    const { now } = ready;
    const confirmation = confirmTransaction(ctx, order, ready, chargeId);
    const out = await transact(ctx, confirmation.items, 10);
    if (out.ok) return { ok: true, purchase: confirmation.confirmed, alreadyConfirmed: false };
    if (out.contention) return { ok: false, reason: "contention" };
    return whyNotConfirmed(out.reasons, confirmation, ready.purchase.seats, now);
  });
}

interface Order {
  eventId: string;
  holdId: string;
  fanId: string;
  purchaseId: string;
}

/**
 * Step 1: the purchase, pending, of this hold and fan, and a hold that can still be bought. A
 * confirmed purchase (a repeat) is the answer itself.
 */
async function readConfirmable(ctx: Ctx, o: Order): Promise<ConfirmResult | Confirmable> {
  const purchaseItem = await getPurchaseItem(ctx, o.eventId, o.purchaseId);
  if (!purchaseItem) return { ok: false, reason: "not_found", what: "purchase" };
  if (!sameOrder(purchaseItem, o.holdId, o.fanId)) return { ok: false, reason: "purchase_conflict" };
  const purchase = toPurchase(purchaseItem);
  if (purchase.status === "confirmed") return { ok: true, purchase, alreadyConfirmed: true };
  if (purchase.status !== "pending") return { ok: false, reason: "purchase_not_pending", status: purchase.status };

  const now = ctx.clock();
  const hold = await readHoldEntry(ctx, o.eventId, o.fanId, o.holdId);
  if (hold === "not_owned") return { ok: false, reason: "hold_not_owned" };
  if (!hold) return { ok: false, reason: "not_found", what: "hold" };
  if (hold.status === "confirmed" && hold.purchaseId === o.purchaseId) {
    // A concurrent repeat committed between our two reads; the purchase changed in that same
    // transaction, so reading it again gives the first result.
    const stored = await getPurchaseItem(ctx, o.eventId, o.purchaseId);
    if (stored?.status === "confirmed") return { ok: true, purchase: toPurchase(stored), alreadyConfirmed: true };
  }
  const why = unusable(hold, now);
  if (why) return { ok: false, reason: why };
  // The hold was judged at `now`: the transaction is conditioned on that same instant.
  return {
    purchase,
    now,
    legacy: purchaseItem.GSI1PK !== undefined,
    ...(hold.from !== undefined ? { from: hold.from } : {}),
  };
}

interface Confirmable {
  purchase: Purchase;
  now: number;
  /** The counters a general-admission hold took its places from (ga-counters.ts). */
  from?: Counters;
  /** A purchase of the layout before GSI3 (in GSI1 by status): it moves there as it always did. */
  legacy: boolean;
}

interface Confirmation {
  items: TransactItem[];
  holdId: string;
  /**
   * Where the hold record's (general admission only; -1 otherwise), the purchase's and the
   * ledger's actions are in `items` (the seats come first).
   */
  holdIndex: number;
  purchaseIndex: number;
  fanIndex: number;
  confirmed: Purchase;
}

/** Step 2: the one transaction, every action conditioned on what step 1 read still being so. */
function confirmTransaction(ctx: Ctx, o: Order, ready: Confirmable, chargeId?: string): Confirmation {
  const { eventId, holdId, fanId, purchaseId } = o;
  const { purchase, now, from, legacy } = ready;
  const seats = purchase.seats;
  const refs = seats.map((s) => parseSeatId(s));
  if (refs.some((r) => r === null)) throw new Error(`purchase ${purchaseId} has a malformed seat id`);
  const confirmedAt = iso(now);
  const confirmed: Purchase = {
    ...purchase,
    status: "confirmed",
    confirmedAt,
    ...(chargeId !== undefined ? { chargeId } : {}),
  };
  // The same write makes the purchase its own BookingConfirmed outbox record, unsent.
  const outbox = outboxUnsentSet(eventId, purchaseId, confirmedAt, legacy);

  const items: TransactItem[] = refs.map((ref) => ({
    Update: {
      TableName: ctx.tableName,
      Key: keys.seat(eventId, ref!),
      UpdateExpression: "SET #status = :sold, purchaseId = :pid, soldAt = :at REMOVE holdExpiresAt, GSI2PK, GSI2SK",
      // A late confirmation can never capture a seat: it must still be this hold's, unexpired.
      ConditionExpression: "#status = :held AND holdId = :hold AND holderId = :fan AND holdExpiresAt > :now",
      ExpressionAttributeNames: { "#status": "status" },
      ExpressionAttributeValues: {
        ":sold": "sold",
        ":held": "held",
        ":pid": purchaseId,
        ":hold": holdId,
        ":fan": fanId,
        ":now": now,
        ":at": confirmedAt,
      },
      ReturnValuesOnConditionCheckFailure: "ALL_OLD",
    },
  }));
  // A general-admission hold's record moves with its places (a seat hold has none).
  const holdIndex = purchase.generalAdmission ? items.length : -1;
  if (purchase.generalAdmission)
    items.push({
      Update: {
        TableName: ctx.tableName,
        Key: keys.hold(eventId, holdId),
        // From the area's expiry partition to its sold one (a key change: 2 index units, where
        // leaving was 1): the one place a confirmed purchase of places is found, as a purchase
        // of seats is found from its sold seats (the audit, the counts).
        UpdateExpression:
          "SET #status = :confirmed, purchaseId = :pid, confirmedAt = :at, GSI2PK = :soldPk, GSI2SK = :pid",
        ConditionExpression: "#status = :held AND fanId = :fan AND expiresAt > :now",
        ExpressionAttributeNames: { "#status": "status" },
        ExpressionAttributeValues: {
          ":soldPk": keys.soldAdmissionsPartition(
            eventId,
            purchase.generalAdmission.areaId,
            firstCounter(countersOf(from, purchase.generalAdmission.quantity)),
          ),
          ":confirmed": "confirmed",
          ":held": "held",
          ":pid": purchaseId,
          ":fan": fanId,
          ":now": now,
          ":at": confirmedAt,
        },
        ReturnValuesOnConditionCheckFailure: "ALL_OLD",
      },
    });
  const purchaseIndex = items.length;
  items.push({
    Update: {
      TableName: ctx.tableName,
      Key: keys.purchase(eventId, purchaseId),
      UpdateExpression: `SET #status = :confirmed, confirmedAt = :at, ${legacy ? "GSI1SK = :sk, " : ""}${outbox.set}${chargeId !== undefined ? ", chargeId = :charge" : ""}`,
      ConditionExpression: "#status = :pending AND holdId = :hold AND fanId = :fan",
      ExpressionAttributeNames: { "#status": "status" },
      ExpressionAttributeValues: {
        ":confirmed": "confirmed",
        ":pending": "pending",
        ":hold": holdId,
        ":fan": fanId,
        ":at": confirmedAt,
        ...(legacy ? { ":sk": keys.purchaseSortKey("confirmed", purchaseId) } : {}),
        ...outbox.values,
        ...(chargeId !== undefined ? { ":charge": chargeId } : {}),
      },
      ReturnValuesOnConditionCheckFailure: "ALL_OLD",
    },
  });
  if (purchase.generalAdmission) {
    const { areaId, quantity } = purchase.generalAdmission;
    // The places move from held to sold on the counters the hold took them from.
    for (const [k, q] of Object.entries(countersOf(from, quantity))) {
      items.push({
        Update: {
          TableName: ctx.tableName,
          Key: keys.generalAdmission(eventId, areaId, Number(k)),
          UpdateExpression: "SET held = held - :q, sold = sold + :q",
          ConditionExpression: "attribute_exists(PK)",
          ExpressionAttributeValues: { ":q": q },
        },
      });
    }
  }

  // The fan's ledger: the hold's entry becomes bought seats (the fan's total stays the same).
  const fanIndex = items.length;
  items.push(
    fanConfirmAction(
      ctx,
      eventId,
      fanId,
      holdId,
      seats.length + (purchase.generalAdmission?.quantity ?? 0),
      purchaseId,
    ),
  );
  return { items, holdId, holdIndex, purchaseIndex, fanIndex, confirmed };
}

/** Step 3: why the transaction was cancelled, from its reasons and their ALL_OLD images; no extra read. */
function whyNotConfirmed(reasons: CancellationReason[], at: Confirmation, seats: string[], now: number): ConfirmResult {
  const purchaseNow = reasons[at.purchaseIndex]?.item;
  if (purchaseNow && purchaseNow.status !== "pending") {
    const status = purchaseNow.status as PurchaseStatus;
    // The same confirmation ran concurrently (a retry) and won.
    if (status === "confirmed") return { ok: true, purchase: toPurchase(purchaseNow), alreadyConfirmed: true };
    return { ok: false, reason: "purchase_not_pending", status };
  }
  // The hold as the ledger had it when the transaction was cancelled (its ALL_OLD image).
  const holdNow = fanEntryOf(reasons[at.fanIndex]?.item, at.holdId);
  const holdWhy = holdNow ? unusable(holdNow, now) : null;
  const lost = seats.filter((_, i) => reasons[i]?.code === "ConditionalCheckFailed");
  if (holdWhy) return { ok: false, reason: holdWhy, ...(lost.length ? { seats: lost } : {}) };
  if (lost.length) return { ok: false, reason: "hold_expired", seats: lost };
  // Hold and seats still fine, but the ledger has no entry for the hold: a hold on a gateway
  // whose clock is ahead removed it as expired (or the hold predates the ledger). Buying it now
  // could put the fan past maxSeatsPerFan, so it is expired for this purpose too.
  if (reasons[at.fanIndex]?.code === "ConditionalCheckFailed") return { ok: false, reason: "hold_expired" };
  throw new Error(`confirm cancelled for no stated reason: ${reasons.map((r) => r.code).join(",")}`);
}

async function transition(
  ctx: Ctx,
  eventId: string,
  purchaseId: string,
  to: "failed" | "refunded",
  from: PurchaseStatus[],
  reason?: string,
  chargeId?: string,
  /** Only if exactly this many charge attempts have started (none: 0). */
  ifAttempts?: number,
): Promise<PurchaseTransitionResult> {
  if (!ID_PATTERN.test(eventId) || !PURCHASE_ID_PATTERN.test(purchaseId)) return { ok: false, reason: "not_found" };
  return guard(`markPurchase ${to}`, async () => {
    const at = to === "failed" ? "failedAt" : "refundedAt";
    const atIso = iso(ctx.clock());
    // A refund under way keeps the purchase open (the reconciler finds it there); any other
    // failure, and a refund, close it. A purchase of the layout before GSI3 (it has GSI1PK) moves
    // in GSI1 instead: tried only when the first attempt's condition says it is one.
    const stillOpen = to === "failed" && reason === REFUND_DUE;
    const attempt = async (legacy: boolean) =>
      ctx.doc.send(
        new UpdateCommand({
          TableName: ctx.tableName,
          Key: keys.purchase(eventId, purchaseId),
          UpdateExpression: `SET #status = :to, ${at} = :at${legacy ? ", GSI1SK = :sk" : ""}${reason !== undefined ? ", failureReason = :why" : ""}${chargeId !== undefined ? ", chargeId = :charge" : ""}${!legacy && !stillOpen ? " REMOVE GSI3PK, GSI3SK" : ""}`,
          ConditionExpression: `attribute_exists(PK) AND ${legacy ? "attribute_exists(GSI1PK)" : "attribute_not_exists(GSI1PK)"} AND #status IN (${from.map((_, i) => `:from${i}`).join(", ")})${
            ifAttempts === undefined
              ? ""
              : ifAttempts === 0
                ? " AND attribute_not_exists(chargeAttempts)"
                : " AND chargeAttempts = :attempts"
          }`,
          ExpressionAttributeNames: { "#status": "status" },
          ExpressionAttributeValues: {
            ":to": to,
            ":at": atIso,
            ...(legacy
              ? {
                  ":sk":
                    to === "failed" && reason === REFUND_DUE
                      ? keys.refundDueSortKey(purchaseId)
                      : keys.purchaseSortKey(to, purchaseId),
                }
              : {}),
            ...Object.fromEntries(from.map((s, i) => [`:from${i}`, s])),
            ...(reason !== undefined ? { ":why": reason.slice(0, 500) } : {}),
            ...(chargeId !== undefined ? { ":charge": chargeId } : {}),
            ...(ifAttempts ? { ":attempts": ifAttempts } : {}),
          },
          ReturnValues: "ALL_OLD",
          ReturnValuesOnConditionCheckFailure: "ALL_OLD",
        }),
      );
    let legacy = false;
    for (;;) {
      try {
        const out = await attempt(legacy);
        const old = out.Attributes ?? {};
        const now: Item = {
          ...old,
          status: to,
          [at]: atIso,
          ...(reason !== undefined ? { failureReason: reason.slice(0, 500) } : {}),
          ...(chargeId !== undefined ? { chargeId } : {}),
        };
        if (!legacy) await countTransition(ctx, eventId, old.status as PurchaseStatus, to);
        return { ok: true, purchase: toPurchase(now) };
      } catch (err) {
        const failed = conditionFailure(err);
        if (!failed) throw err;
        if (!failed.item) return { ok: false, reason: "not_found" };
        const current = toPurchase(failed.item);
        // Idempotent: asking again for the state it is already in succeeds.
        if (current.status === to) return { ok: true, purchase: current };
        const isLegacy = failed.item.GSI1PK !== undefined;
        if (isLegacy !== legacy && from.includes(current.status)) {
          legacy = isLegacy;
          continue;
        }
        return { ok: false, reason: "invalid_transition", status: current.status };
      }
    }
  });
}

/**
 * The failed and refunded purchases of an event are counted on one item (no index lists them):
 * one UpdateItem after the transition, off the path of a sale. Best effort: a process dying in
 * between, or this write failing, leaves the console's count one short (the purchases are right).
 */
async function countTransition(ctx: Ctx, eventId: string, was: PurchaseStatus, to: "failed" | "refunded") {
  if (was === to) return;
  try {
    await ctx.doc.send(
      new UpdateCommand({
        TableName: ctx.tableName,
        Key: keys.purchaseCounts(eventId),
        UpdateExpression: was === "failed" ? "ADD #to :one, #was :minus" : "ADD #to :one",
        ExpressionAttributeNames: { "#to": to, ...(was === "failed" ? { "#was": was } : {}) },
        ExpressionAttributeValues: { ":one": 1, ...(was === "failed" ? { ":minus": -1 } : {}) },
      }),
    );
  } catch {
    // The counts are the operator's figures, not the sale's: the transition stands.
  }
}

/**
 * pending -> failed (declined, or the provider says nothing was charged under its key).
 * `ifAttempts`: only if no charge attempt has started since the caller looked (startCharge counts
 * them), so a verdict of "never charged" cannot land on a purchase whose new attempt is under way.
 */
export function markPurchaseFailed(
  ctx: Ctx,
  eventId: string,
  purchaseId: string,
  reason?: string,
  options: { ifAttempts?: number } = {},
) {
  return transition(ctx, eventId, purchaseId, "failed", ["pending"], reason, undefined, options.ifAttempts);
}

/**
 * pending | failed -> failed with reason refund_due: a charge was found for a purchase that is not
 * confirmed and must go back. Out of `pending` first, so no confirmation still on its way can
 * commit after the refund; listed apart in the purchases index, so the reconciler finishes a
 * refund that a crash or a provider failure cut short, whatever the purchase's failure was before.
 */
export function markRefundDue(ctx: Ctx, eventId: string, purchaseId: string, chargeId: string) {
  return transition(ctx, eventId, purchaseId, "failed", ["pending", "failed"], REFUND_DUE, chargeId);
}

/**
 * Right before a charge: the purchase must still be `pending` (a condition, so a purchase the
 * reconciler failed meanwhile is never charged), and the attempt is recorded: when it started
 * (the reconciler ages a purchase from its latest attempt, not from its creation, which came
 * before the hold read and the PutItem) and how many have started (the reconciler's "never
 * charged" verdict is conditional on that count, see markPurchaseFailed).
 */
export async function startCharge(ctx: Ctx, eventId: string, purchaseId: string): Promise<ChargeStartResult> {
  if (!ID_PATTERN.test(eventId) || !PURCHASE_ID_PATTERN.test(purchaseId)) return { ok: false, reason: "not_found" };
  return guard("startCharge", async () => {
    try {
      const out = await ctx.doc.send(
        new UpdateCommand({
          TableName: ctx.tableName,
          Key: keys.purchase(eventId, purchaseId),
          UpdateExpression: "SET chargeStartedAt = :at, chargeAttempts = if_not_exists(chargeAttempts, :zero) + :one",
          ConditionExpression: "attribute_exists(PK) AND #status = :pending",
          ExpressionAttributeNames: { "#status": "status" },
          ExpressionAttributeValues: { ":at": iso(ctx.clock()), ":zero": 0, ":one": 1, ":pending": "pending" },
          ReturnValues: "ALL_NEW",
          ReturnValuesOnConditionCheckFailure: "ALL_OLD",
        }),
      );
      const purchase = toPurchase(out.Attributes ?? {});
      return { ok: true, purchase, attempt: purchase.chargeAttempts ?? 1 };
    } catch (err) {
      const failed = conditionFailure(err);
      if (!failed) throw err;
      if (!failed.item) return { ok: false, reason: "not_found" };
      return { ok: false, reason: "not_pending", purchase: toPurchase(failed.item) };
    }
  });
}

/**
 * pending | failed -> refunded (money taken for a purchase that could not be confirmed).
 * A confirmed purchase is never refunded here: its seats are sold for good, and a sold seat
 * always belongs to a confirmed purchase.
 */
export function markPurchaseRefunded(
  ctx: Ctx,
  eventId: string,
  purchaseId: string,
  reason?: string,
  chargeId?: string,
) {
  return transition(ctx, eventId, purchaseId, "refunded", ["pending", "failed"], reason, chargeId);
}

/** Records the provider's charge on a purchase (any state; idempotent). */
export async function recordCharge(ctx: Ctx, eventId: string, purchaseId: string, chargeId: string): Promise<boolean> {
  if (!ID_PATTERN.test(eventId) || !PURCHASE_ID_PATTERN.test(purchaseId)) return false;
  return guard("recordCharge", () =>
    conditionalUpdate(ctx, {
      Key: keys.purchase(eventId, purchaseId),
      UpdateExpression: "SET chargeId = :charge",
      ConditionExpression: "attribute_exists(PK) AND (attribute_not_exists(chargeId) OR chargeId = :charge)",
      ExpressionAttributeValues: { ":charge": chargeId },
    }),
  );
}

/**
 * Where a listing stands in each purchases shard: the shard's last evaluated key, `null` once the
 * shard is read to its end; a shard absent is not started.
 */
type ShardCursor = Record<string, Record<string, unknown> | null>;

function parseShardCursor(cursor: string): ShardCursor | null {
  try {
    const parsed = JSON.parse(Buffer.from(cursor, "base64url").toString("utf8")) as unknown;
    return parsed !== null && typeof parsed === "object" && !Array.isArray(parsed) ? (parsed as ShardCursor) : null;
  } catch {
    return null;
  }
}

/**
 * Purchases of an event, optionally in one state, a page at a time (GSI1, eventually consistent).
 * The event's purchases are spread over PURCHASE_SHARDS index partitions: a page queries every
 * shard not yet read to its end, in parallel, up to `limit` items each (so a page holds up to
 * `limit` per shard, sorted by status and purchase id within the page), and the cursor carries
 * each shard's position. A shard's position moves only past what this page returned: nothing
 * is skipped or read twice.
 */
async function listLegacyPurchases(
  ctx: Ctx,
  eventId: string,
  /** `refundDue`: only failed purchases whose refund is under way (reason refund_due). */
  options: { status?: PurchaseStatus; refundDue?: boolean; cursor?: string; limit?: number } = {},
): Promise<{ purchases: Purchase[]; nextCursor?: string }> {
  if (!ID_PATTERN.test(eventId)) return { purchases: [] };
  let positions: ShardCursor = {};
  if (options.cursor !== undefined) {
    const parsed = parseShardCursor(options.cursor);
    if (!parsed) return { purchases: [] };
    positions = parsed;
  }
  const prefix = options.refundDue
    ? `failed#${REFUND_DUE}#`
    : options.status !== undefined
      ? `${options.status}#`
      : undefined;
  const limit = Math.max(1, Math.min(options.limit ?? 500, 1_000));
  return guard("listPurchases", async () => {
    const next: ShardCursor = { ...positions };
    const pages = await Promise.all(
      PURCHASE_SHARD_LIST.map(async (shard) => {
        const at = positions[String(shard)];
        if (at === null) return [];
        const out = await ctx.doc.send(
          new QueryCommand({
            TableName: ctx.tableName,
            IndexName: GSI1,
            KeyConditionExpression:
              prefix !== undefined ? "GSI1PK = :pk AND begins_with(GSI1SK, :status)" : "GSI1PK = :pk",
            ExpressionAttributeValues: {
              ":pk": keys.purchasesPartition(eventId, shard),
              ...(prefix !== undefined ? { ":status": prefix } : {}),
            },
            Limit: limit,
            ...(at ? { ExclusiveStartKey: at } : {}),
          }),
        );
        next[String(shard)] = out.LastEvaluatedKey ?? null;
        return out.Items ?? [];
      }),
    );
    const items = pages.flat().sort((a, b) => String(a.GSI1SK).localeCompare(String(b.GSI1SK)));
    const more = PURCHASE_SHARD_LIST.some((shard) => next[String(shard)] !== null);
    const nextCursor = more ? Buffer.from(JSON.stringify(next), "utf8").toString("base64url") : undefined;
    return { purchases: items.map(toPurchase), ...(nextCursor !== undefined ? { nextCursor } : {}) };
  });
}

type ListOptions = { status?: PurchaseStatus; refundDue?: boolean; cursor?: string; limit?: number };

/**
 * Purchases of an event that are open (GSI3: pending, confirmed and not acknowledged yet, refund
 * under way), optionally in one state, read by key: one page, no cursor. A confirmed purchase
 * whose booking was acknowledged, a failed or a refunded one is in no index (a confirmed one is
 * named by its sold seats or its area's sold partition, see `confirmedPurchaseIds`). An event made
 * before GSI3 also pages through GSI1 (the cursor is that listing's).
 */
export async function listPurchases(
  ctx: Ctx,
  cache: EventCache,
  eventId: string,
  options: ListOptions = {},
): Promise<{ purchases: Purchase[]; nextCursor?: string }> {
  if (!ID_PATTERN.test(eventId)) return { purchases: [] };
  const sale = await guard("listPurchases", () => cache.forSale(eventId));
  const legacy = sale?.event.legacyPurchaseIndexes === true;
  if (options.cursor !== undefined) return legacy ? listLegacyPurchases(ctx, eventId, options) : { purchases: [] };
  const wanted = (p: Purchase) =>
    options.refundDue
      ? p.status === "failed" && p.failureReason === REFUND_DUE
      : options.status === undefined || p.status === options.status;
  const open = (await guard("listPurchases", () => readOpenPurchases(ctx, eventId))).map(toPurchase).filter(wanted);
  if (sale && !options.refundDue && (options.status === undefined || options.status === "confirmed")) {
    // The confirmed ones whose bookings were acknowledged: named by the sale, read by key.
    const listed = new Set(open.map((p) => p.purchaseId));
    const named = await guard("listPurchases", () => confirmedPurchaseIds(ctx, sale.event));
    const items = await guard("listPurchases", () =>
      readPurchasesByKey(
        ctx,
        [...named].filter((id) => !listed.has(id)).map((id) => keys.purchase(eventId, id)),
      ),
    );
    open.push(...items.map(toPurchase).filter(wanted));
  }
  if (!legacy) return { purchases: open };
  const page = await listLegacyPurchases(ctx, eventId, options);
  const seen = new Set(open.map((p) => p.purchaseId));
  return { ...page, purchases: [...open, ...page.purchases.filter((p) => !seen.has(p.purchaseId))] };
}

/**
 * The confirmed purchases of an event as the sale left them, without an index of purchases: the
 * purchase ids its sold seats name (a Query of each section) and those of its areas' confirmed
 * holds (GSI2 `EVT#<e>#GASOLD#<area>`). Eventually consistent unless `consistent`.
 */
export async function confirmedPurchaseIds(
  ctx: Ctx,
  event: { eventId: string; sections: { id: string }[]; generalAdmission: { id: string; capacity: number }[] },
  options: { consistent?: boolean } = {},
): Promise<Set<string>> {
  const ids = new Set<string>();
  await mapLimit(
    [
      ...event.sections.map((s) => ({ kind: "section" as const, id: s.id })),
      ...event.generalAdmission.flatMap((g) =>
        Array.from({ length: gaCounters(g.capacity) }, (_, k) => ({ kind: "area" as const, id: g.id, k })),
      ),
    ],
    8,
    async ({ kind, id, ...at }) => {
      const input =
        kind === "section"
          ? {
              KeyConditionExpression: "PK = :pk AND begins_with(SK, :seat)",
              FilterExpression: "#status = :sold",
              ProjectionExpression: "purchaseId",
              ExpressionAttributeNames: { "#status": "status" },
              ExpressionAttributeValues: {
                ":pk": keys.sectionPartition(event.eventId, id),
                ":seat": "SEAT#",
                ":sold": "sold",
              },
              ...(options.consistent ? { ConsistentRead: true } : {}),
            }
          : {
              IndexName: GSI2,
              KeyConditionExpression: "GSI2PK = :pk",
              ProjectionExpression: "purchaseId",
              ExpressionAttributeValues: {
                ":pk": keys.soldAdmissionsPartition(event.eventId, id, "k" in at ? at.k : 0),
              },
            };
      for await (const page of queryPages(ctx, input)) {
        for (const item of page.Items ?? []) if (typeof item.purchaseId === "string") ids.add(item.purchaseId);
      }
    },
  );
  return ids;
}

/**
 * Purchases of an event by status. Pending: the open ones read by key. Confirmed: the purchases
 * its sold seats and its areas' confirmed holds name (`confirmedPurchaseIds`). Failed and
 * refunded: the event's count item (written after each such transition). An event made before
 * GSI3: one Select COUNT Query per status and shard on GSI1, as before.
 */
export async function countPurchases(
  ctx: Ctx,
  cache: EventCache,
  eventId: string,
  soldSeatPurchases?: number,
): Promise<Record<PurchaseStatus, number>> {
  const counts = { pending: 0, confirmed: 0, failed: 0, refunded: 0 };
  if (!ID_PATTERN.test(eventId)) return counts;
  return guard("countPurchases", async () => {
    const sale = await cache.forSale(eventId);
    if (!sale) return counts;
    if (sale.event.legacyPurchaseIndexes) return countLegacyPurchases(ctx, eventId);
    const [open, confirmed, counted] = await Promise.all([
      readOpenPurchases(ctx, eventId),
      // The seats' part from the caller's read of the seats when it has one; the areas' always.
      soldSeatPurchases === undefined
        ? confirmedPurchaseIds(ctx, sale.event).then((ids) => ids.size)
        : confirmedPurchaseIds(ctx, { ...sale.event, sections: [] }).then((ids) => ids.size + soldSeatPurchases),
      ctx.doc.send(new GetCommand({ TableName: ctx.tableName, Key: keys.purchaseCounts(eventId) })),
    ]);
    for (const item of open) if (item.status === "pending") counts.pending++;
    counts.confirmed = confirmed;
    counts.failed = Math.max(0, Number(counted.Item?.failed ?? 0));
    counts.refunded = Math.max(0, Number(counted.Item?.refunded ?? 0));
    return counts;
  });
}

/** Purchases of an event made before GSI3 by status: one Select COUNT Query per status and shard on GSI1. */
async function countLegacyPurchases(ctx: Ctx, eventId: string): Promise<Record<PurchaseStatus, number>> {
  const statuses: PurchaseStatus[] = ["pending", "confirmed", "failed", "refunded"];
  const counts = { pending: 0, confirmed: 0, failed: 0, refunded: 0 };
  {
    const queries = statuses.flatMap((status) => PURCHASE_SHARD_LIST.map((shard) => ({ status, shard })));
    await mapLimit(queries, 16, async ({ status, shard }) => {
      for await (const page of queryPages(ctx, {
        IndexName: GSI1,
        KeyConditionExpression: "GSI1PK = :pk AND begins_with(GSI1SK, :status)",
        ExpressionAttributeValues: { ":pk": keys.purchasesPartition(eventId, shard), ":status": `${status}#` },
        Select: "COUNT",
      })) {
        counts[status] += page.Count ?? 0;
      }
    });
    return counts;
  }
}

type PurchaseRef = EventRef & { purchaseId: string };

/** The purchase aggregate: the saga's steps in the store, and the purchases of an event. */
export interface PurchaseStore {
  /**
   * Before charging: the `pending` purchase, found again by a retry with the same purchase id.
   * `fingerprint` (of the request) makes a retry with another body a `purchase_conflict`.
   */
  createPending(
    args: PurchaseRef & {
      holdId: string;
      fanId: string;
      fingerprint?: string;
      /**
       * The purchase is written with its first charge attempt started (`chargeAttempts: 1`,
       * `chargeStartedAt`: as startCharge would, in the same write). A retry that finds the
       * purchase starts its own attempt with startCharge.
       */
      startCharge?: boolean;
      /** The waiting-room session that buys (ended by whichever path confirms the purchase). */
      sessionId?: string;
    },
  ): Promise<PendingPurchaseResult>;
  /**
   * After the charge: one transaction; a repeat returns the first result. `chargeId`: recorded
   * on the purchase in the same write.
   */
  confirm(args: PurchaseRef & { holdId: string; fanId: string; chargeId?: string }): Promise<ConfirmResult>;
  /** Right before a charge: still pending (conditional); records the attempt and when it started. */
  startCharge(args: PurchaseRef): Promise<ChargeStartResult>;
  /** pending -> failed; `ifAttempts`: only if exactly that many charge attempts have started. */
  markFailed(args: PurchaseRef & { reason?: string; ifAttempts?: number }): Promise<PurchaseTransitionResult>;
  /** pending | failed -> failed (refund_due): a charge to give back was found. */
  markRefundDue(args: PurchaseRef & { chargeId: string }): Promise<PurchaseTransitionResult>;
  markRefunded(args: PurchaseRef & { reason?: string; chargeId?: string }): Promise<PurchaseTransitionResult>;
  get(args: PurchaseRef): Promise<Purchase | null>;
  /** False when another charge is recorded already. */
  recordCharge(args: PurchaseRef & { chargeId: string }): Promise<boolean>;
  /** `soldSeatPurchases`: the distinct purchases sold seats name, when the caller read them already. */
  count(args: EventRef & { soldSeatPurchases?: number }): Promise<Record<PurchaseStatus, number>>;
  list(
    /** `refundDue`: only failed purchases whose refund is under way (reason refund_due). */
    args: EventRef & { status?: PurchaseStatus; refundDue?: boolean; cursor?: string; limit?: number },
  ): Promise<{ purchases: Purchase[]; nextCursor?: string }>;
}

export function createPurchaseStore(ctx: Ctx, cache: EventCache): PurchaseStore {
  return {
    createPending: ({ eventId, holdId, fanId, purchaseId, fingerprint, startCharge, sessionId }) =>
      createPendingPurchase(ctx, eventId, holdId, fanId, purchaseId, fingerprint, startCharge === true, sessionId),
    confirm: ({ eventId, holdId, fanId, purchaseId, chargeId }) =>
      confirm(ctx, eventId, holdId, fanId, purchaseId, chargeId),
    startCharge: ({ eventId, purchaseId }) => startCharge(ctx, eventId, purchaseId),
    markFailed: ({ eventId, purchaseId, reason, ifAttempts }) =>
      markPurchaseFailed(ctx, eventId, purchaseId, reason, ifAttempts === undefined ? {} : { ifAttempts }),
    markRefundDue: ({ eventId, purchaseId, chargeId }) => markRefundDue(ctx, eventId, purchaseId, chargeId),
    markRefunded: ({ eventId, purchaseId, reason, chargeId }) =>
      markPurchaseRefunded(ctx, eventId, purchaseId, reason, chargeId),
    get: ({ eventId, purchaseId }) => getPurchase(ctx, eventId, purchaseId),
    recordCharge: ({ eventId, purchaseId, chargeId }) => recordCharge(ctx, eventId, purchaseId, chargeId),
    count: ({ eventId, soldSeatPurchases }) => countPurchases(ctx, cache, eventId, soldSeatPurchases),
    list: ({ eventId, ...options }) => listPurchases(ctx, cache, eventId, options),
  };
}
