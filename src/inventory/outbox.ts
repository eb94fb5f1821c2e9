/**
 * The BookingConfirmed outbox. Its record is the purchase item itself: `confirm` makes it
 * `unsent` in the same write that confirms the purchase (no item of its own, so no extra write
 * units in the confirmation), and the publisher and the consumer move it through:
 *
 *   unsent        set by confirm; in GSI2 `EVT#<e>#OUTBOX#UNSENT#<n>`, oldest first.
 *   published     its job was added to the bookings queue; in GSI2 `EVT#<e>#OUTBOX#UNACKED#<n>`,
 *                 sorted by when it is next due for a check (`<checkAt ISO>#<purchaseId>`).
 *
 * `<n>` is the purchase's shard (`purchaseShard`, keys.ts): the event's records are spread over
 * PURCHASE_SHARDS partitions of each kind, and a listing queries every shard.
 *   acknowledged  a consumer finished the job; out of GSI2 (the purchase stays in GSI1).
 *
 * On the purchase item the outbox's attributes are `outboxState, outboxCreatedAt, publishedAt,
 * checks, checkedAt, republished, republishedAt, acknowledgedAt`; the payload is the confirmed
 * purchase itself. The job lives in Redis, and Redis can lose it (restarted empty). Only
 * `acknowledged` says the booking reached an integrator, so a record stays in the unacknowledged
 * index until then, and the publisher re-checks it there (src/workers/outbox.ts): a job that is
 * gone is added again. Every transition is one conditional UpdateItem; a failed condition is an
 * answer (false), never an error.
 */
import { randomUUID } from "node:crypto";
import { GetCommand, QueryCommand, UpdateCommand } from "@aws-sdk/lib-dynamodb";
import { GSI2 } from "../dynamodb/table.js";
import { iso, toOutbox } from "./items.js";
import {
  expiryBound,
  expirySortKey,
  ID_PATTERN,
  keys,
  PURCHASE_ID_PATTERN,
  PURCHASE_SHARD_LIST,
  purchaseShard,
} from "./keys.js";
import type { EventCache } from "./events.js";
import { readOpenPurchases } from "./open.js";
import { conditionalUpdate, conditionFailure, type Ctx, guard } from "./store.js";
import type { EventRef, OutboxRecord } from "./types.js";

/**
 * What confirm's purchase update adds to make the purchase an unsent outbox record: a SET
 * clause and its values, to be joined into that one UpdateItem.
 */
export function outboxUnsentSet(
  eventId: string,
  purchaseId: string,
  confirmedAt: string,
  /** A purchase of the layout before GSI3: the record enters GSI2's unsent partition. */
  legacy = false,
): { set: string; values: Record<string, unknown> } {
  // The record is in GSI3 already (the purchase is open until its acknowledgement): nothing moves.
  if (!legacy)
    return { set: "outboxState = :outboxUnsent, outboxCreatedAt = :at", values: { ":outboxUnsent": "unsent" } };
  return {
    set: "outboxState = :outboxUnsent, outboxCreatedAt = :at, GSI2PK = :outboxPk, GSI2SK = :outboxSk",
    values: {
      ":outboxUnsent": "unsent",
      ":outboxPk": keys.unsentOutboxPartition(eventId, purchaseShard(purchaseId)),
      ":outboxSk": `${confirmedAt}#${purchaseId}`,
    },
  };
}

const valid = (eventId: string, purchaseId: string): boolean =>
  ID_PATTERN.test(eventId) && PURCHASE_ID_PATTERN.test(purchaseId);

/**
 * One listing over every shard of an outbox partition, in parallel: each shard is asked for up to
 * `limit` records under the bound, and the answer is their merge in sort-key order (so up to
 * `limit` per shard). What is read is what is returned: a run reads in proportion to the records
 * waiting, plus one empty Query per shard. An answer shorter than `limit` means every shard was
 * read to its end under the bound (a caller's "short page was the last" still holds).
 */
async function queryShards(
  ctx: Ctx,
  what: string,
  partition: (shard: number) => string,
  limit: number,
  before?: string,
): Promise<OutboxRecord[]> {
  const perShard = Math.max(1, Math.min(limit, 1_000));
  return guard(what, async () => {
    const pages = await Promise.all(
      PURCHASE_SHARD_LIST.map(async (shard) => {
        const out = await ctx.doc.send(
          new QueryCommand({
            TableName: ctx.tableName,
            IndexName: GSI2,
            KeyConditionExpression: before !== undefined ? "GSI2PK = :pk AND GSI2SK < :before" : "GSI2PK = :pk",
            ExpressionAttributeValues: {
              ":pk": partition(shard),
              ...(before !== undefined ? { ":before": before } : {}),
            },
            Limit: perShard,
          }),
        );
        return out.Items ?? [];
      }),
    );
    const items = pages.flat().sort((a, b) => String(a.GSI2SK).localeCompare(String(b.GSI2SK)));
    return items.map(toOutbox).filter((r): r is OutboxRecord => r !== null);
  });
}

/**
 * Unsent outbox records of an event, oldest first (GSI2, sparse: published records leave it).
 * `olderThanMs`: only those confirmed more than this long before the clock's now (the key
 * condition stops there: younger records are not read).
 */
export async function listUnsentOutbox(
  ctx: Ctx,
  cache: EventCache,
  eventId: string,
  limit = 100,
  olderThanMs?: number,
): Promise<OutboxRecord[]> {
  if (!ID_PATTERN.test(eventId)) return [];
  const before = olderThanMs !== undefined ? iso(ctx.clock() - olderThanMs) : undefined;
  const open = (await openRecords(ctx, "listUnsentOutbox", eventId))
    .filter((r) => r.state === "unsent" && (before === undefined || r.createdAt < before))
    // The order GSI2's sort key gave: confirmation time, then purchase id.
    .sort((a, b) => `${a.createdAt}#${a.purchaseId}`.localeCompare(`${b.createdAt}#${b.purchaseId}`))
    .slice(0, limit);
  if (!(await legacyEvent(cache, eventId))) return open;
  const legacy = await queryShards(
    ctx,
    "listUnsentOutbox",
    (shard) => keys.unsentOutboxPartition(eventId, shard),
    limit,
    before,
  );
  return [...open, ...legacy];
}

/**
 * The event's open purchases (GSI3) that are outbox records, read by key. The index has no order
 * by due time: a run reads every open record (one page of keys per shard, then their items), which
 * is nearly nothing while a consumer keeps up, and every waiting booking when none does.
 */
async function openRecords(ctx: Ctx, what: string, eventId: string): Promise<OutboxRecord[]> {
  const items = await guard(what, () => readOpenPurchases(ctx, eventId));
  return items.map(toOutbox).filter((r): r is OutboxRecord => r !== null);
}

async function legacyEvent(cache: EventCache, eventId: string): Promise<boolean> {
  return guard("outboxLayout", async () => (await cache.forSale(eventId))?.event.legacyPurchaseIndexes === true);
}

/**
 * Published records not acknowledged yet whose check is due at the clock's now, the most overdue
 * first. Records checked recently are not read: the key condition stops at now.
 */
export async function listDueUnacknowledgedOutbox(
  ctx: Ctx,
  cache: EventCache,
  eventId: string,
  limit = 100,
): Promise<OutboxRecord[]> {
  if (!ID_PATTERN.test(eventId)) return [];
  const now = iso(ctx.clock());
  const open = (await openRecords(ctx, "listDueUnacknowledgedOutbox", eventId))
    .filter((r) => r.state === "published" && (r.nextCheckAt === undefined || r.nextCheckAt <= now))
    .sort((a, b) => `${a.nextCheckAt ?? ""}#${a.purchaseId}`.localeCompare(`${b.nextCheckAt ?? ""}#${b.purchaseId}`))
    .slice(0, limit);
  if (!(await legacyEvent(cache, eventId))) return open;
  const legacy = await queryShards(
    ctx,
    "listDueUnacknowledgedOutbox",
    (shard) => keys.unacknowledgedOutboxPartition(eventId, shard),
    limit,
    expiryBound(ctx.clock()),
  );
  return [...open, ...legacy];
}

export async function getOutboxRecord(ctx: Ctx, eventId: string, purchaseId: string): Promise<OutboxRecord | null> {
  if (!valid(eventId, purchaseId)) return null;
  return guard("getOutboxRecord", async () => {
    const out = await ctx.doc.send(
      new GetCommand({ TableName: ctx.tableName, Key: keys.outbox(eventId, purchaseId), ConsistentRead: true }),
    );
    return out.Item ? toOutbox(out.Item) : null;
  });
}

/**
 * unsent -> published, due for its first check `checkAfterMs` from now. True the first time;
 * false if another publisher marked it first or a consumer already acknowledged it (a consumer
 * can finish the job before the publisher that added it gets here).
 */
export async function markOutboxPublished(
  ctx: Ctx,
  eventId: string,
  purchaseId: string,
  checkAfterMs: number,
  legacy = false,
): Promise<boolean> {
  if (!valid(eventId, purchaseId)) return false;
  const now = ctx.clock();
  // The due time is an attribute (the record stays where it is in GSI3); a record of the layout
  // before GSI3 moves to GSI2's unacknowledged partition, sorted by it, as it always did.
  return guard("markOutboxPublished", () =>
    conditionalUpdate(ctx, {
      Key: keys.outbox(eventId, purchaseId),
      UpdateExpression: `SET outboxState = :published, publishedAt = :at, checks = :zero, nextCheckAt = :due${legacy ? ", GSI2PK = :pk, GSI2SK = :sk" : ""}`,
      ConditionExpression: "outboxState = :unsent",
      ExpressionAttributeValues: {
        ":published": "published",
        ":unsent": "unsent",
        ":zero": 0,
        ":at": iso(now),
        ":due": iso(now + checkAfterMs),
        ...(legacy
          ? {
              ":pk": keys.unacknowledgedOutboxPartition(eventId, purchaseShard(purchaseId)),
              ":sk": expirySortKey(now + checkAfterMs, purchaseId),
            }
          : {}),
      },
    }),
  );
}

/**
 * A published record checked and still not acknowledged: due again `checkAfterMs` from now.
 * `republished` when the check found its job gone and added it again. False when it is no longer
 * `published` (acknowledged meanwhile), so a check never puts an acknowledged record back.
 */
export async function deferOutboxCheck(
  ctx: Ctx,
  eventId: string,
  purchaseId: string,
  checkAfterMs: number,
  republished: boolean,
  legacy = false,
): Promise<boolean> {
  if (!valid(eventId, purchaseId)) return false;
  const now = ctx.clock();
  return guard("deferOutboxCheck", () =>
    conditionalUpdate(ctx, {
      Key: keys.outbox(eventId, purchaseId),
      UpdateExpression: `SET nextCheckAt = :due, ${legacy ? "GSI2SK = :sk, " : ""}checkedAt = :at${republished ? ", republishedAt = :at" : ""} ADD checks :one${republished ? ", republished :one" : ""}`,
      ConditionExpression: "outboxState = :published",
      ExpressionAttributeValues: {
        ":published": "published",
        ":one": 1,
        ":at": iso(now),
        ":due": iso(now + checkAfterMs),
        ...(legacy ? { ":sk": expirySortKey(now + checkAfterMs, purchaseId) } : {}),
      },
    }),
  );
}

/**
 * unsent | published -> acknowledged: a consumer finished the booking. True exactly once per
 * record, however many consumers and publishers try; false when it was already acknowledged (or
 * there is no such record).
 */
export async function acknowledgeOutbox(ctx: Ctx, eventId: string, purchaseId: string): Promise<boolean> {
  if (!valid(eventId, purchaseId)) return false;
  // Signed with a nonce: when an SDK retry of this very request (the first attempt applied, its
  // answer lost) fails the condition, the image says the acknowledgement was this call's, so the
  // answer is still true, and it is true for exactly one caller.
  const nonce = randomUUID();
  return guard("acknowledgeOutbox", async () => {
    try {
      await ctx.doc.send(
        new UpdateCommand({
          TableName: ctx.tableName,
          Key: keys.outbox(eventId, purchaseId),
          UpdateExpression:
            // Out of the open purchases (GSI3), or for a record before GSI3 out of GSI2's outbox.
            "SET outboxState = :acknowledged, acknowledgedAt = :at, acknowledgedBy = :nonce REMOVE GSI2PK, GSI2SK, GSI3PK, GSI3SK",
          // A purchase that was never confirmed has no outboxState: nothing to acknowledge.
          ConditionExpression: "outboxState IN (:unsent, :published)",
          ExpressionAttributeValues: {
            ":acknowledged": "acknowledged",
            ":unsent": "unsent",
            ":published": "published",
            ":at": iso(ctx.clock()),
            ":nonce": nonce,
          },
          ReturnValuesOnConditionCheckFailure: "ALL_OLD",
        }),
      );
      return true;
    } catch (err) {
      const failed = conditionFailure(err);
      if (!failed) throw err;
      return failed.item?.acknowledgedBy === nonce;
    }
  });
}

type OutboxRef = EventRef & { purchaseId: string };

/** The BookingConfirmed outbox: unsent -> published -> acknowledged (see the top of this file). */
export interface OutboxStore {
  /** Oldest first; `olderThanMs`: only records confirmed more than this long ago. */
  listUnsent(args: EventRef & { limit?: number; olderThanMs?: number }): Promise<OutboxRecord[]>;
  /** Published, not acknowledged, due for a check at the clock's now (most overdue first). */
  listDue(args: EventRef & { limit?: number }): Promise<OutboxRecord[]>;
  get(args: OutboxRef): Promise<OutboxRecord | null>;
  /** `legacy`: a record of the layout before GSI3 (OutboxRecord.legacyIndex). */
  markPublished(args: OutboxRef & { checkAfterMs: number; legacy?: boolean }): Promise<boolean>;
  deferCheck(args: OutboxRef & { checkAfterMs: number; republished: boolean; legacy?: boolean }): Promise<boolean>;
  /** True exactly once per record. */
  acknowledge(args: OutboxRef): Promise<boolean>;
}

export function createOutboxStore(ctx: Ctx, cache: EventCache): OutboxStore {
  return {
    listUnsent: ({ eventId, limit, olderThanMs }) => listUnsentOutbox(ctx, cache, eventId, limit, olderThanMs),
    listDue: ({ eventId, limit }) => listDueUnacknowledgedOutbox(ctx, cache, eventId, limit),
    get: ({ eventId, purchaseId }) => getOutboxRecord(ctx, eventId, purchaseId),
    markPublished: ({ eventId, purchaseId, checkAfterMs, legacy }) =>
      markOutboxPublished(ctx, eventId, purchaseId, checkAfterMs, legacy === true),
    deferCheck: ({ eventId, purchaseId, checkAfterMs, republished, legacy }) =>
      deferOutboxCheck(ctx, eventId, purchaseId, checkAfterMs, republished, legacy === true),
    acknowledge: ({ eventId, purchaseId }) => acknowledgeOutbox(ctx, eventId, purchaseId),
  };
}
