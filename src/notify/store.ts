/**
 * "Tell me when seats come back": the fans' requests, in DynamoDB (a Redis wipe loses none).
 *
 *   request  PK `EVT#<e>#NOTIFY#<fanHash>`, SK `NOTIFY`: fanId, contact, requestedAt, state.
 *            One item per event and fan (fanKeyHash: a fan id may hold anything, `#` included),
 *            so asking twice is one conditional Put that finds the first.
 *   count    PK `EVT#<e>#NOTIFY`, SK `COUNT`: requests waiting to be told, against the per-event
 *            limit. It rides in the same transaction as the Put and as the Delete of a waiting
 *            request, and goes down by the fans a claim takes (one UpdateItem after them), so fans
 *            told free their places: a limit that only a cancel lowered would be spent, once for
 *            the whole sale, by the first fans told. A count that could not be lowered after a
 *            claim over-counts (refuses early), never under-counts.
 *
 * A request moves waiting -> claimed -> notified, each step one conditional UpdateItem:
 *   waiting  in GSI2 `EVT#<e>#NOTIFY#WAITING`, sorted `<requestedAt ISO>#<seq>#<fanHash>`: the order
 *            fans asked in, read oldest first.
 *   claimed  taken by one delivery batch (`batchId`), out of the waiting index and into
 *            `EVT#<e>#NOTIFY#CLAIMED` sorted by when its delivery is next due for a check, so a
 *            batch whose job was lost (Redis restarted empty) is delivered again (same batch id,
 *            same idempotency key at the receiver).
 *   notified the receiver acknowledged its batch; out of GSI2.
 *
 * Claiming is per item (`state = waiting` on the item itself): two sweeps reading the same
 * candidates from the index each win different fans, and no fan is claimed twice. A whole-batch
 * transaction would be all-or-nothing: two sweeps on the same first fans would cancel each other.
 *
 *   level    PK `EVT#<e>#NOTIFY`, SK `LEVEL`: what the backstop reconciles the event's available
 *            seats and places against (./service.ts "Durability"): `announced` (told to the
 *            waiting list and, as far as the last check saw, still available), `version` (every
 *            write adds one; the backstop's writes are conditional on the one it read), `owedSeats`
 *            and `owedSeenAt` (a shortfall seen and not acted on yet), `leaseUntil` (a backstop is
 *            claiming for it). Beside the count, so one Query reads both, and not on it: the count
 *            rides in request transactions, which a write to the same item would cancel.
 */
import { DeleteCommand, GetCommand, QueryCommand, UpdateCommand } from "@aws-sdk/lib-dynamodb";
import type { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { GSI2 } from "../dynamodb/table.js";
import { expiryBound, expirySortKey, fanKeyHash, ID_PATTERN } from "../inventory/keys.js";
import { conditionalUpdate, createCtx, type Ctx, guard, type Item, mapLimit, transact } from "../inventory/store.js";

export type NotifyState = "waiting" | "claimed" | "notified";

export interface NotifyRequest {
  eventId: string;
  fanId: string;
  contact: string;
  requestedAt: string;
  state: NotifyState;
  batchId?: string;
  notifiedAt?: string;
}

export interface ClaimedFan {
  fanId: string;
  contact: string;
  /** The request's key hash (its item). */
  fanHash: string;
  /** Its place in the order fans asked in (its waiting sort key), kept while claimed. */
  order: string;
}

export type RequestOutcome =
  | { ok: true; created: boolean; request: NotifyRequest }
  | { ok: false; reason: "limit_reached"; limit: number }
  | { ok: false; reason: "contention" };

/** The event's reconciliation level (the `level` item above); all zero before its first write. */
export interface NoticeLevel {
  /** Seats and places told to the waiting list that the backstop still counts as available. */
  announced: number;
  /** 0: no item yet. */
  version: number;
  /** A shortfall (available minus announced) the backstop saw at `at` (epoch ms), not told yet. */
  owed?: { seats: number; at: number };
  /** A backstop claims for the shortfall until then (epoch ms). */
  leaseUntil?: number;
}

export interface NotifyStore {
  request(input: { eventId: string; fanId: string; contact: string; maxRequests: number }): Promise<RequestOutcome>;
  /** True when there was a request to cancel. */
  cancel(eventId: string, fanId: string): Promise<boolean>;
  get(eventId: string, fanId: string): Promise<NotifyRequest | null>;
  /**
   * Up to `count` waiting requests, oldest first, claimed for `batchId`; due for a check at
   * `checkAt` (epoch ms) unless acknowledged by then.
   */
  claim(eventId: string, count: number, batchId: string, checkAt: number, seatsReturned: number): Promise<ClaimedFan[]>;
  /** claimed (by `batchId`) -> notified; false when it was not (cancelled meanwhile, another batch). */
  markNotified(eventId: string, fanHash: string, batchId: string): Promise<boolean>;
  /** Claimed requests whose delivery check is due, grouped by batch. */
  dueBatches(
    eventId: string,
    limit?: number,
  ): Promise<Array<{ batchId: string; seatsReturned: number; claimedAt: string; fans: ClaimedFan[] }>>;
  /** A due batch's requests, next due at `checkAt`. */
  deferBatch(eventId: string, fans: readonly ClaimedFan[], batchId: string, checkAt: number): Promise<void>;
  /**
   * One consistent read of the event's count and level: `waiting` may over-count (see the count
   * above), never under-count, so 0 means nobody waits.
   */
  noticeState(eventId: string): Promise<{ waiting: number; level: NoticeLevel }>;
  /**
   * `seats` more told (a claim for a return, or the backstop's for a shortfall): one UpdateItem,
   * unconditional, since it adds. `settle`: the shortfall and the lease it was told under go.
   */
  addAnnounced(eventId: string, seats: number, settle?: boolean): Promise<void>;
  /** The backstop's write: the level replaced if its version is still `version`; false if not. */
  setLevel(eventId: string, version: number, next: Omit<NoticeLevel, "version">): Promise<boolean>;
}

export const notifyKeys = {
  request: (eventId: string, fanHash: string) => ({ PK: `EVT#${eventId}#NOTIFY#${fanHash}`, SK: "NOTIFY" }),
  count: (eventId: string) => ({ PK: `EVT#${eventId}#NOTIFY`, SK: "COUNT" }),
  level: (eventId: string) => ({ PK: `EVT#${eventId}#NOTIFY`, SK: "LEVEL" }),
  waiting: (eventId: string) => `EVT#${eventId}#NOTIFY#WAITING`,
  claimed: (eventId: string) => `EVT#${eventId}#NOTIFY#CLAIMED`,
};

const iso = (ms: number) => new Date(ms).toISOString();

function toRequest(item: Item): NotifyRequest {
  return {
    eventId: String(item.eventId),
    fanId: String(item.fanId),
    contact: String(item.contact),
    requestedAt: String(item.requestedAt),
    state: item.state as NotifyState,
    ...(typeof item.batchId === "string" ? { batchId: item.batchId } : {}),
    ...(typeof item.notifiedAt === "string" ? { notifiedAt: item.notifiedAt } : {}),
  };
}

export function createNotifyStore(options: {
  client: DynamoDBClient;
  tableName: string;
  clock?: () => number;
}): NotifyStore {
  const ctx: Ctx = createCtx(options.client, options.tableName, options.clock ?? Date.now);
  // Requests of one millisecond keep the order they were written in this process.
  let seq = 0;

  /**
   * Claimed requests leave the count (they wait no more). After the claims, not with them: a
   * claim is one conditional write per fan, so that two sweeps split the candidates (see above).
   * Failing, it leaves the count high, which refuses early and never lets past the limit.
   */
  const leaveCount = (eventId: string, n: number) =>
    ctx.doc
      .send(
        new UpdateCommand({
          TableName: ctx.tableName,
          Key: notifyKeys.count(eventId),
          UpdateExpression: "ADD requests :minus",
          ExpressionAttributeValues: { ":minus": -n },
        }),
      )
      .then(
        () => undefined,
        () => undefined,
      );

  const get = (eventId: string, fanId: string) =>
    guard("notifyGet", async () => {
      if (!ID_PATTERN.test(eventId)) return null;
      const out = await ctx.doc.send(
        new GetCommand({
          TableName: ctx.tableName,
          Key: notifyKeys.request(eventId, fanKeyHash(fanId)),
          ConsistentRead: true,
        }),
      );
      return out.Item ? toRequest(out.Item) : null;
    });

  return {
    get,

    request: ({ eventId, fanId, contact, maxRequests }) =>
      guard("notifyRequest", async (): Promise<RequestOutcome> => {
        const fanHash = fanKeyHash(fanId);
        const now = ctx.clock();
        seq = (seq + 1) % 1_000_000;
        const item: Item = {
          ...notifyKeys.request(eventId, fanHash),
          entity: "NOTIFY",
          eventId,
          fanId,
          contact,
          requestedAt: iso(now),
          state: "waiting",
          GSI2PK: notifyKeys.waiting(eventId),
          GSI2SK: `${iso(now)}#${String(seq).padStart(6, "0")}#${fanHash}`,
        };
        const out = await transact(ctx, [
          {
            Put: {
              TableName: ctx.tableName,
              Item: item,
              ConditionExpression: "attribute_not_exists(PK)",
              ReturnValuesOnConditionCheckFailure: "ALL_OLD",
            },
          },
          {
            Update: {
              TableName: ctx.tableName,
              Key: notifyKeys.count(eventId),
              UpdateExpression: "ADD requests :one",
              ConditionExpression: "attribute_not_exists(requests) OR requests < :max",
              ExpressionAttributeValues: { ":one": 1, ":max": maxRequests },
            },
          },
        ]);
        if (out.ok) return { ok: true, created: true, request: toRequest(item) };
        if (out.contention) return { ok: false, reason: "contention" };
        // Asked before: the first request stands (its place in the order, its contact).
        const existing = out.reasons[0]?.item;
        if (out.reasons[0]?.code === "ConditionalCheckFailed" && existing) {
          return { ok: true, created: false, request: toRequest(existing) };
        }
        return { ok: false, reason: "limit_reached", limit: maxRequests };
      }),

    cancel: (eventId, fanId) =>
      guard("notifyCancel", async () => {
        const key = notifyKeys.request(eventId, fanKeyHash(fanId));
        // A waiting request leaves the count with its Delete, in one transaction.
        const out = await transact(ctx, [
          {
            Delete: {
              TableName: ctx.tableName,
              Key: key,
              ConditionExpression: "#state = :waiting",
              ExpressionAttributeNames: { "#state": "state" },
              ExpressionAttributeValues: { ":waiting": "waiting" },
            },
          },
          {
            Update: {
              TableName: ctx.tableName,
              Key: notifyKeys.count(eventId),
              UpdateExpression: "ADD requests :minus",
              ExpressionAttributeValues: { ":minus": -1 },
            },
          },
        ]);
        if (out.ok) return true;
        if (out.contention) {
          // Collisions only: delete the request alone (the count then over-counts by one, never under).
          await ctx.doc.send(new DeleteCommand({ TableName: ctx.tableName, Key: key }));
          return true;
        }
        // None, or one claimed or told: it left the count when it was claimed; it goes alone.
        const alone = await ctx.doc.send(
          new DeleteCommand({ TableName: ctx.tableName, Key: key, ReturnValues: "ALL_OLD" }),
        );
        return alone.Attributes !== undefined;
      }),

    claim: (eventId, count, batchId, checkAt, seatsReturned) =>
      guard("notifyClaim", async () => {
        const claimed: ClaimedFan[] = [];
        if (count <= 0 || !ID_PATTERN.test(eventId)) return claimed;
        const now = ctx.clock();
        let start: Record<string, unknown> | undefined;
        // Candidates in request order; each is taken by a conditional write on the item, so a
        // candidate another sweep took (or the index shows late) is skipped, never taken twice.
        while (claimed.length < count) {
          const page = await ctx.doc.send(
            new QueryCommand({
              TableName: ctx.tableName,
              IndexName: GSI2,
              KeyConditionExpression: "GSI2PK = :pk",
              ExpressionAttributeValues: { ":pk": notifyKeys.waiting(eventId) },
              Limit: Math.min(100, Math.max(count * 2, 10)),
              ...(start ? { ExclusiveStartKey: start } : {}),
            }),
          );
          // As many at once as are still wanted (no more: a fan claimed is a fan told), so a
          // return of hundreds of seats is not hundreds of writes in a row; winners keep their order.
          const items = page.Items ?? [];
          for (let i = 0; i < items.length && claimed.length < count; ) {
            const slice = items.slice(i, i + (count - claimed.length));
            i += slice.length;
            const won = await mapLimit(slice, 16, (candidate) =>
              conditionalUpdate(ctx, {
                Key: { PK: candidate.PK, SK: candidate.SK },
                UpdateExpression:
                  "SET #state = :claimed, batchId = :batch, claimedAt = :at, seatsReturned = :seats, #order = :order, " +
                  "GSI2PK = :pk, GSI2SK = :sk",
                ConditionExpression: "#state = :waiting",
                ExpressionAttributeNames: { "#state": "state", "#order": "order" },
                ExpressionAttributeValues: {
                  ":claimed": "claimed",
                  ":waiting": "waiting",
                  ":batch": batchId,
                  ":at": iso(now),
                  ":seats": seatsReturned,
                  ":pk": notifyKeys.claimed(eventId),
                  ":order": String(candidate.GSI2SK),
                  // A batch's requests in the order they were made, so a redelivery keeps it.
                  ":sk": expirySortKey(checkAt, `${batchId}#${String(candidate.GSI2SK)}`),
                },
              }),
            );
            slice.forEach((candidate, j) => {
              if (!won[j]) return;
              claimed.push({
                fanId: String(candidate.fanId),
                contact: String(candidate.contact),
                fanHash: String(candidate.PK).slice(String(candidate.PK).lastIndexOf("#") + 1),
                order: String(candidate.GSI2SK),
              });
            });
            const taken = won.filter(Boolean).length;
            if (taken > 0) await leaveCount(eventId, taken);
          }
          start = page.LastEvaluatedKey;
          if (!start) break;
        }
        return claimed;
      }),

    markNotified: (eventId, fanHash, batchId) =>
      guard("notifyMarkNotified", () =>
        conditionalUpdate(ctx, {
          Key: notifyKeys.request(eventId, fanHash),
          UpdateExpression: "SET #state = :notified, notifiedAt = :at REMOVE GSI2PK, GSI2SK",
          ConditionExpression: "#state = :claimed AND batchId = :batch",
          ExpressionAttributeNames: { "#state": "state" },
          ExpressionAttributeValues: {
            ":notified": "notified",
            ":claimed": "claimed",
            ":batch": batchId,
            ":at": iso(ctx.clock()),
          },
        }),
      ),

    dueBatches: (eventId, limit = 1_000) =>
      guard("notifyDueBatches", async () => {
        if (!ID_PATTERN.test(eventId)) return [];
        const out = await ctx.doc.send(
          new QueryCommand({
            TableName: ctx.tableName,
            IndexName: GSI2,
            KeyConditionExpression: "GSI2PK = :pk AND GSI2SK < :bound",
            ExpressionAttributeValues: { ":pk": notifyKeys.claimed(eventId), ":bound": expiryBound(ctx.clock()) },
            Limit: limit,
          }),
        );
        const batches = new Map<
          string,
          { batchId: string; seatsReturned: number; claimedAt: string; fans: ClaimedFan[] }
        >();
        for (const item of out.Items ?? []) {
          const batchId = String(item.batchId);
          const batch = batches.get(batchId) ?? {
            batchId,
            seatsReturned: Number(item.seatsReturned ?? 0),
            claimedAt: String(item.claimedAt),
            fans: [],
          };
          const fanHash = String(item.PK).slice(String(item.PK).lastIndexOf("#") + 1);
          batch.fans.push({
            fanId: String(item.fanId),
            contact: String(item.contact),
            fanHash,
            order: String(item.order),
          });
          batches.set(batchId, batch);
        }
        const due = [...batches.values()];
        // A full page may have cut its last batch short: that one waits for the next run, whole
        // (its retry carries the same idempotency key, so a partial one would hide the rest).
        if (out.LastEvaluatedKey && due.length > 1) due.pop();
        return due;
      }),

    deferBatch: (eventId, fans, batchId, checkAt) =>
      guard("notifyDeferBatch", async () => {
        await Promise.all(
          fans.map((f) =>
            conditionalUpdate(ctx, {
              Key: notifyKeys.request(eventId, f.fanHash),
              UpdateExpression: "SET GSI2SK = :sk",
              ConditionExpression: "#state = :claimed AND batchId = :batch",
              ExpressionAttributeNames: { "#state": "state" },
              ExpressionAttributeValues: {
                ":claimed": "claimed",
                ":batch": batchId,
                ":sk": expirySortKey(checkAt, `${batchId}#${f.order}`),
              },
            }),
          ),
        );
      }),

    noticeState: (eventId) =>
      guard("notifyNoticeState", async () => {
        const level: NoticeLevel = { announced: 0, version: 0 };
        if (!ID_PATTERN.test(eventId)) return { waiting: 0, level };
        const out = await ctx.doc.send(
          new QueryCommand({
            TableName: ctx.tableName,
            KeyConditionExpression: "PK = :pk",
            ExpressionAttributeValues: { ":pk": notifyKeys.count(eventId).PK },
            ConsistentRead: true,
          }),
        );
        let waiting = 0;
        for (const item of out.Items ?? []) {
          if (item.SK === "COUNT") waiting = Number(item.requests ?? 0);
          if (item.SK !== "LEVEL") continue;
          level.announced = Number(item.announced ?? 0);
          level.version = Number(item.version ?? 0);
          if (typeof item.owedSeats === "number" && typeof item.owedSeenAt === "number") {
            level.owed = { seats: item.owedSeats, at: item.owedSeenAt };
          }
          if (typeof item.leaseUntil === "number") level.leaseUntil = item.leaseUntil;
        }
        return { waiting, level };
      }),

    addAnnounced: (eventId, seats, settle = false) =>
      guard("notifyAddAnnounced", async () => {
        if ((seats <= 0 && !settle) || !ID_PATTERN.test(eventId)) return;
        await ctx.doc.send(
          new UpdateCommand({
            TableName: ctx.tableName,
            Key: notifyKeys.level(eventId),
            UpdateExpression: `ADD announced :n, #version :one${settle ? " REMOVE owedSeats, owedSeenAt, leaseUntil" : ""}`,
            ExpressionAttributeNames: { "#version": "version" },
            ExpressionAttributeValues: { ":n": Math.max(0, seats), ":one": 1 },
          }),
        );
      }),

    setLevel: (eventId, version, next) =>
      guard("notifySetLevel", () => {
        const set = ["announced = :announced", "#version = :next"];
        const remove: string[] = [];
        const values: Record<string, unknown> = { ":announced": next.announced, ":next": version + 1 };
        if (next.owed) {
          set.push("owedSeats = :owed", "owedSeenAt = :seen");
          values[":owed"] = next.owed.seats;
          values[":seen"] = next.owed.at;
        } else remove.push("owedSeats", "owedSeenAt");
        if (next.leaseUntil !== undefined) {
          set.push("leaseUntil = :lease");
          values[":lease"] = next.leaseUntil;
        } else remove.push("leaseUntil");
        if (version > 0) values[":version"] = version;
        return conditionalUpdate(ctx, {
          Key: notifyKeys.level(eventId),
          UpdateExpression: `SET ${set.join(", ")}${remove.length ? ` REMOVE ${remove.join(", ")}` : ""}`,
          // Version 0 is "no item yet": two first writes cannot both win.
          ConditionExpression: version > 0 ? "#version = :version" : "attribute_not_exists(#version)",
          ExpressionAttributeNames: { "#version": "version" },
          ExpressionAttributeValues: values,
        });
      }),
  };
}
