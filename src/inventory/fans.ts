/**
 * The per-fan ledger that makes `maxSeatsPerFan` a promise rather than a per-request check: one
 * FAN item per (event, fan) holds the fan's live holds (`holds`: hold id -> {seats, expiresAt})
 * and the seats the fan has bought (`bought`). At every moment
 *
 *   bought + seats of the unexpired entries <= maxSeatsPerFan
 *
 * because the only write that adds to either side (a hold adding its entry) rides in the hold's
 * own transaction, conditioned on the item's `version` being the one it counted from. A parallel
 * hold of the same fan changes the version, so one of the two transactions is cancelled, reads
 * again and counts the other. Confirm moves an entry to `bought` (same total), release removes it
 * (lower total); both bump the version too, so any count a hold made is of one exact state.
 * docs/data-model.md has the reasoning and the crash cases.
 */
import { GetCommand } from "@aws-sdk/lib-dynamodb";
import { keys } from "./keys.js";
import { conditionalUpdate, type Ctx, type Item, type TransactItem } from "./store.js";

/** Parallel holds of one fan each cancel the others but one; after this many rounds: `contention`. */
export const FAN_ATTEMPTS = 10;
/** Expired entries a hold removes at once, to keep its UpdateExpression small; the next hold takes the rest. */
const MAX_PRUNED = 40;

export interface FanEntry {
  seats: number;
  expiresAt: number;
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
      const e = v as { seats?: unknown; expiresAt?: unknown };
      if (typeof e.seats === "number" && typeof e.expiresAt === "number") {
        holds.set(holdId, { seats: e.seats, expiresAt: e.expiresAt });
      }
    }
  }
  return {
    version: typeof item.version === "number" ? item.version : 0,
    bought: typeof item.bought === "number" ? item.bought : 0,
    holds,
  };
}

/**
 * What counts against the limit at `now`: bought seats plus the entries whose hold has not expired
 * (the same write-time rule as for seats: `expiresAt <= now` is expired), and the expired ones.
 */
export function countFan(ledger: FanLedger, now: number): { counted: number; expired: string[] } {
  let counted = ledger.bought;
  const expired: string[] = [];
  for (const [holdId, e] of ledger.holds) {
    if (e.expiresAt > now) counted += e.seats;
    else expired.push(holdId);
  }
  return { counted, expired };
}

export async function readFan(ctx: Ctx, eventId: string, fanId: string): Promise<FanLedger> {
  const out = await ctx.doc.send(
    new GetCommand({ TableName: ctx.tableName, Key: keys.fan(eventId, fanId), ConsistentRead: true }),
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
  expired: readonly string[],
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
  const pruned = expired.slice(0, MAX_PRUNED);
  const names: Record<string, string> = { "#h": holdId };
  pruned.forEach((id, i) => {
    names[`#x${i}`] = id;
  });
  return {
    Update: {
      TableName: ctx.tableName,
      Key,
      UpdateExpression:
        "SET holds.#h = :entry, version = :next" +
        (pruned.length ? ` REMOVE ${pruned.map((_, i) => `holds.#x${i}`).join(", ")}` : ""),
      ConditionExpression: "version = :seen",
      ExpressionAttributeNames: names,
      ExpressionAttributeValues: { ":entry": entry, ":next": ledger.version + 1, ":seen": ledger.version },
      ReturnValuesOnConditionCheckFailure: "ALL_OLD",
    },
  };
}

/**
 * The confirmation's write of the ledger, for the confirm transaction: the entry becomes bought
 * seats. The entry must still be there: a hold on another gateway removes an entry once it has
 * expired by that gateway's clock, and a purchase of a hold the ledger has given up on must not
 * be confirmed (the seats would count twice: in `bought`, and not at all in that gateway's count).
 */
export function fanConfirmAction(
  ctx: Ctx,
  eventId: string,
  fanId: string,
  holdId: string,
  seats: number,
): TransactItem {
  return {
    Update: {
      TableName: ctx.tableName,
      Key: keys.fan(eventId, fanId),
      UpdateExpression: "SET bought = bought + :n, version = version + :one REMOVE holds.#h",
      ConditionExpression: "attribute_exists(holds.#h)",
      ExpressionAttributeNames: { "#h": holdId },
      ExpressionAttributeValues: { ":n": seats, ":one": 1 },
      ReturnValuesOnConditionCheckFailure: "ALL_OLD",
    },
  };
}

/**
 * Removes a released hold's entry. Idempotent: an entry already gone (released before, or removed
 * as expired by a later hold) or a ledger that does not exist changes nothing.
 */
export function removeFanEntry(ctx: Ctx, eventId: string, fanId: string, holdId: string): Promise<boolean> {
  // Retried while a hold transaction of the same fan is on the item (real DynamoDB only).
  return conditionalUpdate(
    ctx,
    {
      Key: keys.fan(eventId, fanId),
      UpdateExpression: "SET version = version + :one REMOVE holds.#h",
      ConditionExpression: "attribute_exists(holds.#h)",
      ExpressionAttributeNames: { "#h": holdId },
      ExpressionAttributeValues: { ":one": 1 },
    },
    FAN_ATTEMPTS,
  );
}
