/**
 * The sweeper: housekeeping, never correctness. A held seat whose hold has passed is already
 * free to take (the hold condition says so); sweeping only makes the stored status, the sparse
 * available index and the counts tell the truth again. General-admission holds are different:
 * their quantity is returned here (or by reclaimExpiredAdmissions when a hold finds the area
 * short), each exactly once, because the return rides in one transaction with the hold record's
 * held -> expired transition.
 *
 * Many sweepers at once are safe: every reset is a conditional write that re-checks "still held,
 * by the same hold, and expired" on the item itself; the GSI2 entries are only candidates.
 */
import { UpdateCommand } from "@aws-sdk/lib-dynamodb";
import { GSI2 } from "../dynamodb/table.js";
import { getEventItem } from "./events.js";
import { iso } from "./items.js";
import { type Counters, countersOf } from "./ga-counters.js";
import { expiryBound, gaCounters, ID_PATTERN, keys, shardOf, SWEEP_SHARDS } from "./keys.js";
import {
  conditionFailure,
  type Ctx,
  guard,
  type Item,
  isTransactionConflict,
  mapLimit,
  queryPages,
  transact,
} from "./store.js";
import type { SweepResult } from "./types.js";

const PAGE = 100;
const CONCURRENCY = 16;

async function* expiredEntries(ctx: Ctx, partition: string, now: number): AsyncGenerator<Item[]> {
  for await (const page of queryPages(ctx, {
    IndexName: GSI2,
    KeyConditionExpression: "GSI2PK = :pk AND GSI2SK < :bound",
    ExpressionAttributeValues: { ":pk": partition, ":bound": expiryBound(now) },
    Limit: PAGE,
  })) {
    yield page.Items ?? [];
  }
}

async function resetExpiredSeat(ctx: Ctx, seat: Item, now: number): Promise<boolean> {
  try {
    await ctx.doc.send(
      new UpdateCommand({
        TableName: ctx.tableName,
        Key: { PK: seat.PK, SK: seat.SK },
        UpdateExpression: "SET #status = :available REMOVE holderId, holdId, holdExpiresAt, heldAt, GSI2PK, GSI2SK",
        ConditionExpression: "#status = :held AND holdId = :hold AND holdExpiresAt <= :now",
        ExpressionAttributeNames: { "#status": "status" },
        ExpressionAttributeValues: {
          ":available": "available",
          ":held": "held",
          ":hold": seat.holdId,
          ":now": now,
        },
      }),
    );
    return true;
  } catch (err) {
    // Someone re-held, confirmed, released or swept it first; or a transaction is on it right now.
    if (conditionFailure(err) || isTransactionConflict(err)) return false;
    throw err;
  }
}

async function expireAdmissionHold(
  ctx: Ctx,
  eventId: string,
  areaId: string,
  hold: Item,
  now: number,
): Promise<Counters | null> {
  const quantity = Number(hold.quantity);
  const from = countersOf(hold.from, quantity);
  const out = await transact(
    ctx,
    [
      {
        Update: {
          TableName: ctx.tableName,
          Key: keys.hold(eventId, String(hold.holdId)),
          UpdateExpression: "SET #status = :expired, expiredAt = :at REMOVE GSI2PK, GSI2SK",
          ConditionExpression: "#status = :held AND expiresAt <= :now",
          ExpressionAttributeNames: { "#status": "status" },
          ExpressionAttributeValues: { ":expired": "expired", ":held": "held", ":now": now, ":at": iso(now) },
        },
      },
      ...Object.entries(from).map(([k, q]) => ({ Update: placesBack(ctx, eventId, areaId, Number(k), q) })),
    ],
    3,
  );
  return out.ok ? from : null;
}

/**
 * A general-admission area's places back from held to available on counter `k`: a release's and
 * a sweep's (each to the counters the hold took from).
 */
export function placesBack(ctx: Ctx, eventId: string, areaId: string, k: number, quantity: number) {
  return {
    TableName: ctx.tableName,
    Key: keys.generalAdmission(eventId, areaId, k),
    UpdateExpression: "SET available = available + :q, held = held - :q",
    ConditionExpression: "attribute_exists(PK)",
    ExpressionAttributeValues: { ":q": quantity },
  };
}

/**
 * Returns an area's expired general-admission holds to the counters they took from: the expiry
 * partition of each of its `counters` counters (a hold's record sits in its first counter's).
 */
export async function reclaimExpiredAdmissions(
  ctx: Ctx,
  eventId: string,
  areaId: string,
  counters: number,
  now: number,
): Promise<{ examined: number; holds: number; quantity: number; counters: Counters }> {
  let examined = 0;
  let holds = 0;
  let quantity = 0;
  const returnedTo: Counters = {};
  // One counter's partition at a time, each with CONCURRENCY returns in flight: as many writes in
  // flight as a sweep ever had (16 x 16 at once sent a 5,000-place area's every return together,
  // so a worker killed mid-sweep had none left undone: the crash-sweep test caught it).
  await mapLimit(
    Array.from({ length: counters }, (_, k) => k),
    1,
    async (k) => {
      for await (const page of expiredEntries(ctx, keys.heldAdmissionsPartition(eventId, areaId, k), now)) {
        examined += page.length;
        const returned = await mapLimit(page, CONCURRENCY, (h) => expireAdmissionHold(ctx, eventId, areaId, h, now));
        for (const from of returned) {
          if (!from) continue;
          holds++;
          for (const [c, q] of Object.entries(from)) {
            quantity += q;
            returnedTo[c] = (returnedTo[c] ?? 0) + q;
          }
        }
      }
    },
  );
  return { examined, holds, quantity, counters: returnedTo };
}

/**
 * One sweeper pass over one shard of one event: held seats of the shard whose hold expired at or
 * before `now`, and the general-admission areas assigned to this shard (shardOf(areaId)).
 */
export async function sweepExpired(ctx: Ctx, eventId: string, shard: number, now: number): Promise<SweepResult> {
  const result: SweepResult = {
    examined: 0,
    seatsReleased: 0,
    releasedSeats: [],
    generalAdmissionHoldsExpired: 0,
    generalAdmissionQuantityReturned: 0,
  };
  if (!ID_PATTERN.test(eventId)) return result;
  if (!Number.isInteger(shard) || shard < 0 || shard >= SWEEP_SHARDS) {
    throw new RangeError(`shard must be 0..${SWEEP_SHARDS - 1}`);
  }
  return guard("sweepExpired", async () => {
    for await (const page of expiredEntries(ctx, keys.heldSeatsPartition(eventId, shard), now)) {
      result.examined += page.length;
      const reset = await mapLimit(page, CONCURRENCY, (seat) => resetExpiredSeat(ctx, seat, now));
      page.forEach((seat, i) => {
        if (reset[i]) result.releasedSeats.push(String(seat.seatId));
      });
      result.seatsReleased += reset.filter(Boolean).length;
    }
    const event = await getEventItem(ctx, eventId);
    const areas = Array.isArray(event?.generalAdmission) ? (event.generalAdmission as Item[]) : [];
    for (const area of areas) {
      const areaId = String(area.id);
      if (shardOf(areaId) !== shard) continue;
      // Every counter of an area is swept with the area's shard (the hold path schedules that one).
      const counters = gaCounters(typeof area.capacity === "number" ? area.capacity : 0);
      const r = await reclaimExpiredAdmissions(ctx, eventId, areaId, counters, now);
      result.examined += r.examined;
      result.generalAdmissionHoldsExpired += r.holds;
      result.generalAdmissionQuantityReturned += r.quantity;
    }
    return result;
  });
}
