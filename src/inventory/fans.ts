/**
 * The per-fan ledger that makes `maxSeatsPerFan` a promise rather than a per-request check: one
 * FAN item per (event, fan) holds the fan's holds (`holds`: hold id -> entry) and the seats the
 * fan has bought (`bought`). The entry is the hold itself (there is no hold item for seats: the
 * seats carry the hold id, the entry carries the rest): `{seats, expiresAt, amount, createdAt}`
 * and `ids` (the seat ids) or `area` (a general-admission area, whose hold also has an item for
 * the area's accounting), and `status` once it is `released` or `confirmed` (with `purchaseId`).
 * At every moment
 *
 *   bought + seats of the unexpired entries <= maxSeatsPerFan
 *
 * because the only write that adds to either side (a hold adding its entry) is conditioned on the
 * item's `version` being the one it counted from: a seat hold writes it before its seats (and takes
 * it back if they are lost), a general-admission hold in its transaction. A parallel hold of the
 * same fan changes the version, so one of the two writes fails, reads again and counts the other. Confirm moves an entry to `bought` (same total), release removes it
 * (lower total); both bump the version too, so any count a hold made is of one exact state. A later
 * hold of the fan removes the entries that no longer count (expired, released, confirmed).
 * docs/data-model.md has the reasoning and the crash cases.
 */
import { GetCommand, UpdateCommand } from "@aws-sdk/lib-dynamodb";
import { fanKeyHash, keys } from "./keys.js";
import { backoff, conditionFailure, type Ctx, isTransactionConflict, type Item, type TransactItem } from "./store.js";

/** Parallel holds of one fan each cancel the others but one; after this many rounds: `contention`. */
export const FAN_ATTEMPTS = 10;
/** Entries a hold removes at once, to keep its UpdateExpression small; the next hold takes the rest. */
const MAX_PRUNED = 40;
/**
 * An entry that no longer counts (expired, released, confirmed) is kept this long after its expiry,
 * so that a repeated release or purchase of it answers as the first did, and then removed by the
 * fan's next hold; of those, at most KEEP_DONE are kept in any case (the item's size, and so every
 * write of it, stays bounded however many holds a fan makes).
 */
export const PRUNE_GRACE_MS = 10 * 60_000;
export const KEEP_DONE = 32;

export interface FanEntry {
  /** Seats, or general-admission places. */
  seats: number;
  expiresAt: number;
  /** The held seats' ids (a seat hold). */
  ids?: string[];
  /** The area (a general-admission hold). */
  area?: string;
  /** Where a general-admission hold's places came from: counter -> places (ga-counters.ts). */
  from?: Record<string, number>;
  amount?: number;
  createdAt?: number;
  /**
   * Absent while held (expired or not: `expiresAt` says); `expired` once a hold of the fan has
   * counted it as expired (from then on it can never be confirmed, whatever another gateway's
   * clock says).
   */
  status?: "released" | "confirmed" | "expired";
  purchaseId?: string;
}

export interface FanLedger {
  /** Absent: the fan has never held anything at this event. */
  version: number | undefined;
  bought: number;
  holds: Map<string, FanEntry>;
}

export function toFanLedger(item: Item | undefined): FanLedger {
  if (!item) return { version: undefined, bought: 0, holds: new Map() };
  const holds = new Map<string, FanEntry>();
  const raw = item.holds;
  if (raw && typeof raw === "object") {
    for (const [holdId, v] of Object.entries(raw as Record<string, unknown>)) {
      const entry = toFanEntry(v);
      if (entry) holds.set(holdId, entry);
    }
  }
  return {
    version: typeof item.version === "number" ? item.version : 0,
    bought: typeof item.bought === "number" ? item.bought : 0,
    holds,
  };
}

export function toFanEntry(v: unknown): FanEntry | null {
  if (!v || typeof v !== "object") return null;
  const e = v as Record<string, unknown>;
  if (typeof e.seats !== "number" || typeof e.expiresAt !== "number") return null;
  return {
    seats: e.seats,
    expiresAt: e.expiresAt,
    ...(Array.isArray(e.ids) ? { ids: e.ids.filter((x): x is string => typeof x === "string") } : {}),
    ...(typeof e.area === "string" ? { area: e.area } : {}),
    ...(e.from && typeof e.from === "object" && !Array.isArray(e.from)
      ? { from: e.from as Record<string, number> }
      : {}),
    ...(typeof e.amount === "number" ? { amount: e.amount } : {}),
    ...(typeof e.createdAt === "number" ? { createdAt: e.createdAt } : {}),
    ...(e.status === "released" || e.status === "confirmed" || e.status === "expired" ? { status: e.status } : {}),
    ...(typeof e.purchaseId === "string" ? { purchaseId: e.purchaseId } : {}),
  };
}

/** The entry of `holdId` in a ledger item (an ALL_OLD image, say), or null. */
export function fanEntryOf(item: Item | undefined, holdId: string): FanEntry | null {
  const holds = item?.holds;
  return holds && typeof holds === "object" ? toFanEntry((holds as Record<string, unknown>)[holdId]) : null;
}

/** An entry that counts against the limit at `now`: held, unexpired (`expiresAt <= now` is expired, as for seats). */
export const counts = (e: FanEntry, now: number): boolean => e.status === undefined && e.expiresAt > now;

/** What a hold's ledger write does to the entries it did not count (see countFan). */
export interface LedgerUpkeep {
  /** Held entries it counted as expired: marked `expired`, so that no confirmation can take them any more. */
  expire: string[];
  /** Entries that count for nothing and are past keeping: removed. */
  prune: string[];
}

/**
 * What counts against the limit at `now`, and what the next write of the ledger must do to the
 * entries that did not count (`LedgerUpkeep`):
 *  - counted: bought seats, plus the entries that count (held, unexpired);
 *  - expire: the held entries whose expiry has passed. Counting them for nothing is safe only if
 *    they can no longer be bought: the write marks them `expired`, in the same conditional write
 *    that adds the new hold. At most MAX_PRUNED; any beyond are counted as if held;
 *  - prune: of the entries that count for nothing (expired, released, confirmed: those seats are in
 *    `bought`), the ones past PRUNE_GRACE_MS after their expiry and any beyond the KEEP_DONE latest.
 */
export function countFan(ledger: FanLedger, now: number): { counted: number } & LedgerUpkeep {
  let counted = ledger.bought;
  const done: [string, FanEntry][] = [];
  const expire: string[] = [];
  for (const [holdId, e] of ledger.holds) {
    if (counts(e, now)) counted += e.seats;
    else if (e.status === undefined && expire.length >= MAX_PRUNED) counted += e.seats;
    else {
      if (e.status === undefined) expire.push(holdId);
      done.push([holdId, e]);
    }
  }
  done.sort(([, a], [, b]) => b.expiresAt - a.expiresAt);
  const prune = done
    .filter(([, e], i) => i >= KEEP_DONE || e.expiresAt + PRUNE_GRACE_MS <= now)
    .map(([id]) => id)
    .slice(0, MAX_PRUNED);
  const pruned = new Set(prune);
  return { counted, expire: expire.filter((id) => !pruned.has(id)), prune };
}

export function readFan(ctx: Ctx, eventId: string, fanId: string): Promise<FanLedger> {
  return readFanByHash(ctx, eventId, fanKeyHash(fanId));
}

/** The ledger named by a fan key hash (`keys.fanByHash`), as a hold id names it. */
export async function readFanByHash(ctx: Ctx, eventId: string, hash: string): Promise<FanLedger> {
  const out = await ctx.doc.send(
    new GetCommand({ TableName: ctx.tableName, Key: keys.fanByHash(eventId, hash), ConsistentRead: true }),
  );
  return toFanLedger(out.Item);
}

/**
 * The hold's write of the ledger, for its transaction: the new entry, the expired entries it saw
 * removed, and the version moved on, all conditioned on the version it counted from (or, for the
 * fan's first hold, on there being no item yet).
 */
export function fanHoldAction(
  ctx: Ctx,
  eventId: string,
  fanId: string,
  ledger: FanLedger,
  upkeep: LedgerUpkeep,
  holdId: string,
  entry: FanEntry,
): TransactItem {
  const Key = keys.fan(eventId, fanId);
  if (ledger.version === undefined) {
    return {
      Put: {
        TableName: ctx.tableName,
        Item: {
          ...Key,
          entity: "FAN",
          eventId,
          fanId,
          holds: { [holdId]: entry },
          bought: 0,
          version: 1,
        },
        ConditionExpression: "attribute_not_exists(PK)",
        ReturnValuesOnConditionCheckFailure: "ALL_OLD",
      },
    };
  }
  const names: Record<string, string> = { "#h": holdId };
  const values: Record<string, unknown> = { ":entry": entry, ":next": ledger.version + 1, ":seen": ledger.version };
  const set = ["holds.#h = :entry", "version = :next"];
  upkeep.expire.forEach((id, i) => {
    names[`#e${i}`] = id;
    set.push(`holds.#e${i}.#st = :expired`);
  });
  if (upkeep.expire.length) {
    names["#st"] = "status";
    values[":expired"] = "expired";
  }
  upkeep.prune.forEach((id, i) => {
    names[`#x${i}`] = id;
  });
  return {
    Update: {
      TableName: ctx.tableName,
      Key,
      UpdateExpression:
        `SET ${set.join(", ")}` +
        (upkeep.prune.length ? ` REMOVE ${upkeep.prune.map((_, i) => `holds.#x${i}`).join(", ")}` : ""),
      ConditionExpression: "version = :seen",
      ExpressionAttributeNames: names,
      ExpressionAttributeValues: values,
      ReturnValuesOnConditionCheckFailure: "ALL_OLD",
    },
  };
}

/**
 * The confirmation's write of the ledger, for the confirm transaction: the entry's seats become
 * bought seats, and the entry says `confirmed` (by `purchaseId`). The entry must still be there
 * and held: a hold on another gateway removes an entry once it has expired by that gateway's
 * clock, and a purchase of a hold the ledger has given up on must not be confirmed (the seats would
 * count twice: in `bought`, and not at all in that gateway's count); a released entry is released.
 */
export function fanConfirmAction(
  ctx: Ctx,
  eventId: string,
  fanId: string,
  holdId: string,
  seats: number,
  purchaseId: string,
): TransactItem {
  return {
    Update: {
      TableName: ctx.tableName,
      Key: keys.fan(eventId, fanId),
      UpdateExpression:
        "SET bought = bought + :n, version = version + :one, holds.#h.#st = :confirmed, holds.#h.purchaseId = :pid",
      ConditionExpression: "attribute_exists(holds.#h) AND attribute_not_exists(holds.#h.#st)",
      ExpressionAttributeNames: { "#h": holdId, "#st": "status" },
      ExpressionAttributeValues: { ":n": seats, ":one": 1, ":confirmed": "confirmed", ":pid": purchaseId },
      ReturnValuesOnConditionCheckFailure: "ALL_OLD",
    },
  };
}

/**
 * Marks a released hold's entry released (it stops counting). Idempotent: an entry already
 * released, or gone (removed by a later hold), or a ledger that does not exist changes nothing.
 * `confirmed` when the entry says the hold was bought (nothing is changed then).
 */
export async function releaseFanEntry(
  ctx: Ctx,
  eventId: string,
  fanId: string,
  holdId: string,
): Promise<"released" | "unchanged" | "confirmed"> {
  const Key = keys.fan(eventId, fanId);
  for (let attempt = 0; ; attempt++) {
    try {
      await ctx.doc.send(
        new UpdateCommand({
          TableName: ctx.tableName,
          Key,
          UpdateExpression: "SET version = version + :one, holds.#h.#st = :released",
          ConditionExpression: "attribute_exists(holds.#h) AND attribute_not_exists(holds.#h.#st)",
          ExpressionAttributeNames: { "#h": holdId, "#st": "status" },
          ExpressionAttributeValues: { ":one": 1, ":released": "released" },
          ReturnValuesOnConditionCheckFailure: "ALL_OLD",
        }),
      );
      return "released";
    } catch (err) {
      const failed = conditionFailure(err);
      if (failed) return fanEntryOf(failed.item, holdId)?.status === "confirmed" ? "confirmed" : "unchanged";
      // Another transaction of the same fan on the item (real DynamoDB only): try again.
      if (!isTransactionConflict(err) || attempt + 1 >= FAN_ATTEMPTS) throw err;
      await backoff(attempt);
    }
  }
}
