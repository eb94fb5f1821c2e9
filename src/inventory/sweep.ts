/**
 * The sweeper: housekeeping, never correctness. A held seat whose hold has passed is already
 * free to take (the hold condition says so); sweeping only makes the stored status, the seat map
 * and the counts tell the truth again. General-admission holds are different: their quantity is
 * returned here (or by reclaimExpiredAdmissions when a hold finds the area short), each exactly
 * once, because the return rides in one transaction with the hold record's held -> expired
 * transition.
 *
 * Where a held seat's sweep finds it (issue 30 item 2): a seat's hold writes no index entry (an
 * expiry entry in GSI2 cost 2 write units a sold seat, in at the hold and out at the sale). The
 * candidates come from
 *  - the seat map in Redis (`HeldSeatsCache`): each cached section's held seats and their
 *    expiries, read by the shard's sweep (the seats of its shard whose expiry has passed);
 *  - the sections themselves in DynamoDB (`sweepSections`, the backstop, paid in read units): a
 *    Query of each section, its held seats whose hold has expired reset. A shard's sweep reads a
 *    section the cache does not have (Redis lost it, or is away), at most once per `storeReadDue`
 *    period per process, and the event's periodic backstop reads every section whatever Redis has
 *    (but those it found sold out);
 *  - GSI2's expiry partitions, for the events made before this (no `seatExpiries` on the event
 *    item): seats held then still carry an entry there.
 *
 * Many sweepers at once are safe: every reset is a conditional write that re-checks "still held,
 * by the same hold, and expired" on the item itself; every source only names candidates.
 */
import { UpdateCommand } from "@aws-sdk/lib-dynamodb";
import { GSI2 } from "../dynamodb/table.js";
import { getEventItem, SEAT_EXPIRIES } from "./events.js";
import { iso } from "./items.js";
import { type Counters, countersOf } from "./ga-counters.js";
import { expiryBound, gaCounters, ID_PATTERN, type ItemKey, keys, parseSeatId, shardOf, SWEEP_SHARDS } from "./keys.js";
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
import type { HeldSeatsCache, SweepResult } from "./types.js";

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

/**
 * The hold a candidate was seen held by: its id when the candidate came from the item (a section
 * read, a GSI2 entry), its expiry when it came from the seat map (which keeps no hold ids; a
 * hold's expiry, to the millisecond, is what the map has of it).
 */
type SeenHold = { holdId: string } | { expiresAt: number };

/** A seat back to available: housekeeping of a hold that has passed (the GSI2 keys: a seat held before). */
const SEAT_RESET = "SET #status = :available REMOVE holderId, holdId, holdExpiresAt, heldAt, GSI2PK, GSI2SK";

async function resetExpiredSeat(ctx: Ctx, key: ItemKey, seen: SeenHold, now: number): Promise<boolean> {
  const byId = "holdId" in seen;
  try {
    await ctx.doc.send(
      new UpdateCommand({
        TableName: ctx.tableName,
        Key: key,
        UpdateExpression: SEAT_RESET,
        ConditionExpression: byId
          ? "#status = :held AND holdId = :hold AND holdExpiresAt <= :now"
          : "#status = :held AND holdExpiresAt = :seen AND holdExpiresAt <= :now",
        ExpressionAttributeNames: { "#status": "status" },
        ExpressionAttributeValues: {
          ":available": "available",
          ":held": "held",
          ":now": now,
          ...(byId ? { ":hold": seen.holdId } : { ":seen": seen.expiresAt }),
        },
        ...(byId ? {} : { ReturnValuesOnConditionCheckFailure: "ALL_OLD" as const }),
      }),
    );
    return true;
  } catch (err) {
    // A transaction is on it right now: the next sweep sees how it ended.
    if (isTransactionConflict(err)) return false;
    const failed = conditionFailure(err);
    if (!failed) throw err;
    // Someone re-held, renewed, confirmed, released or swept it first. Or the seat map missed a
    // write (it follows DynamoDB, and may lag): the item is held by another hold than the one the
    // map saw. When that hold has passed as well, it is the one to sweep, on the same condition.
    const item = failed.item;
    if (
      !byId &&
      item?.status === "held" &&
      typeof item.holdId === "string" &&
      typeof item.holdExpiresAt === "number" &&
      item.holdExpiresAt <= now
    ) {
      return resetExpiredSeat(ctx, key, { holdId: item.holdId }, now);
    }
    return false;
  }
}

/** A seat to reset if it is still held as seen, and expired. */
interface SeatCandidate {
  seatId: string;
  key: ItemKey;
  seen: SeenHold;
}

/** Resets the candidates (CONCURRENCY at a time) and counts them, and those reset, into `into`. */
async function resetCandidates(
  ctx: Ctx,
  found: readonly SeatCandidate[],
  now: number,
  into: Pick<SweepResult, "examined" | "seatsReleased" | "releasedSeats">,
): Promise<void> {
  into.examined += found.length;
  const reset = await mapLimit(found, CONCURRENCY, (c) => resetExpiredSeat(ctx, c.key, c.seen, now));
  found.forEach((c, i) => {
    if (!reset[i]) return;
    into.seatsReleased++;
    into.releasedSeats.push(c.seatId);
  });
}

/** A seat item read from the table (a section read, a GSI2 entry) as a candidate named by its hold id. */
const itemCandidate = (seat: Item): SeatCandidate => ({
  seatId: String(seat.seatId),
  key: { PK: String(seat.PK), SK: String(seat.SK) },
  seen: { holdId: String(seat.holdId) },
});

/**
 * The backstop that does not depend on Redis: each section's seats read from DynamoDB (a Query of
 * the section's partition, eventually consistent; DynamoDB charges it by the items it reads, about
 * 16 read units per 1,000 seats), then the same conditional reset per held seat whose hold has
 * expired. Every seat of the section, whatever its shard: one read serves them all. A seat held or
 * released while the read runs is a candidate at worst: the condition decides. The sold seats are
 * filtered out in DynamoDB (they cost the same read units, not the transfer); a section whose every
 * seat is sold is named in `soldOutSections`, so that the caller need not read it again (a sold seat
 * never goes back, and a layout is fixed once on sale). `shard`: only that shard's seats are reset
 * (a caller whose every shard's sweep reads the section).
 */
export async function sweepSections(
  ctx: Ctx,
  eventId: string,
  sectionIds: readonly string[],
  now: number,
  shard?: number,
): Promise<Pick<SweepResult, "examined" | "seatsReleased" | "releasedSeats" | "soldOutSections">> {
  const result = { examined: 0, seatsReleased: 0, releasedSeats: [] as string[], soldOutSections: [] as string[] };
  for (const sectionId of sectionIds) {
    if (!ID_PATTERN.test(sectionId)) continue;
    let read = 0;
    let unsold = 0;
    for await (const page of queryPages(ctx, {
      KeyConditionExpression: "PK = :pk AND begins_with(SK, :seat)",
      FilterExpression: "#status <> :sold",
      ProjectionExpression: "PK, SK, seatId, #status, holdId, holdExpiresAt",
      ExpressionAttributeNames: { "#status": "status" },
      ExpressionAttributeValues: {
        ":pk": keys.sectionPartition(eventId, sectionId),
        ":seat": "SEAT#",
        ":sold": "sold",
      },
    })) {
      read += page.ScannedCount ?? 0;
      unsold += page.Count ?? 0;
      const found = (page.Items ?? []).filter(
        (i) =>
          i.status === "held" &&
          (shard === undefined || shardOf(String(i.seatId)) === shard) &&
          typeof i.holdId === "string" &&
          typeof i.holdExpiresAt === "number" &&
          i.holdExpiresAt <= now,
      );
      await resetCandidates(ctx, found.map(itemCandidate), now, result);
    }
    if (read > 0 && unsold === 0) result.soldOutSections.push(sectionId);
  }
  return result;
}

/**
 * Where a shard's sweep finds held seats (besides GSI2, for an event made before). `heldSeats`: the seat
 * map (absent: none, so every section is read from DynamoDB, as a caller without Redis must).
 * `storeReadDue(sectionId)`: whether a section the cache does not have may be read from DynamoDB
 * by this sweep now; the caller keeps it to one read per period, whichever of its sixteen shards'
 * sweeps comes first, since that read resets the expired seats of every shard. Absent: every
 * sweep reads, and resets only the seats of its own shard (sixteen sweeps at once would otherwise
 * all try every seat).
 */
export interface SeatCandidates {
  heldSeats?: HeldSeatsCache;
  storeReadDue?: (sectionId: string) => boolean;
}

/** The seat map's expired holds of one shard, and the sections it does not have. */
async function cachedCandidates(
  eventId: string,
  sectionIds: readonly string[],
  shard: number,
  now: number,
  cache: HeldSeatsCache | undefined,
): Promise<{ seats: [string, number][]; missing: string[] }> {
  if (!cache || sectionIds.length === 0) return { seats: [], missing: [...sectionIds] };
  let known: ReadonlyMap<string, ReadonlyMap<string, number>>;
  try {
    known = await cache.heldUntil(eventId, sectionIds);
  } catch {
    // Redis away: the candidates come from DynamoDB alone.
    return { seats: [], missing: [...sectionIds] };
  }
  const seats: [string, number][] = [];
  const missing: string[] = [];
  for (const sectionId of sectionIds) {
    const held = known.get(sectionId);
    if (!held) {
      missing.push(sectionId);
      continue;
    }
    for (const [seatId, expiresAt] of held) {
      if (expiresAt <= now && Number.isFinite(expiresAt) && shardOf(seatId) === shard) seats.push([seatId, expiresAt]);
    }
  }
  return { seats, missing };
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

function emptyResult(): SweepResult {
  return {
    examined: 0,
    seatsReleased: 0,
    releasedSeats: [],
    generalAdmissionHoldsExpired: 0,
    generalAdmissionQuantityReturned: 0,
  };
}

function add(
  result: SweepResult,
  part: Pick<SweepResult, "examined" | "seatsReleased" | "releasedSeats" | "soldOutSections">,
) {
  result.examined += part.examined;
  result.seatsReleased += part.seatsReleased;
  result.releasedSeats.push(...part.releasedSeats);
  if (part.soldOutSections?.length)
    result.soldOutSections = [...(result.soldOutSections ?? []), ...part.soldOutSections];
}

const sectionIdsOf = (event: Item | undefined): string[] =>
  Array.isArray(event?.sections) ? (event.sections as Item[]).map((s) => String(s.id)) : [];

const onSale = (event: Item, now: number): boolean => typeof event.onSaleAtMs === "number" && event.onSaleAtMs <= now;

/**
 * One sweeper pass over one shard of one event: held seats of the shard whose hold expired at or
 * before `now` (the candidates: the seat map's, a read of each section it does not have, and for
 * an event made before issue 30 item 2 its GSI2 expiry partition), and the general-admission areas
 * assigned to this shard (shardOf(areaId)).
 */
export async function sweepExpired(
  ctx: Ctx,
  eventId: string,
  shard: number,
  now: number,
  candidates: SeatCandidates = {},
): Promise<SweepResult> {
  const result = emptyResult();
  if (!ID_PATTERN.test(eventId)) return result;
  if (!Number.isInteger(shard) || shard < 0 || shard >= SWEEP_SHARDS) {
    throw new RangeError(`shard must be 0..${SWEEP_SHARDS - 1}`);
  }
  return guard("sweepExpired", async () => {
    const event = await getEventItem(ctx, eventId);
    if (!event) return result;
    if (event.seatExpiries !== SEAT_EXPIRIES) {
      for await (const page of expiredEntries(ctx, keys.heldSeatsPartition(eventId, shard), now)) {
        await resetCandidates(ctx, page.map(itemCandidate), now, result);
      }
    }
    // Before the on-sale no seat can be held: nothing to ask Redis or read from the sections.
    const sections = onSale(event, now) ? sectionIdsOf(event) : [];
    const cached = await cachedCandidates(eventId, sections, shard, now, candidates.heldSeats);
    // A seat id the map holds that is not one (never written by this gateway) counts as examined.
    result.examined += cached.seats.filter(([seatId]) => !parseSeatId(seatId)).length;
    const fromMap = cached.seats.flatMap(([seatId, expiresAt]): SeatCandidate[] => {
      const ref = parseSeatId(seatId);
      return ref ? [{ seatId, key: keys.seat(eventId, ref), seen: { expiresAt } }] : [];
    });
    await resetCandidates(ctx, fromMap, now, result);
    const due = candidates.storeReadDue;
    const unread = cached.missing.filter((sectionId) => !due || due(sectionId));
    if (unread.length > 0) add(result, await sweepSections(ctx, eventId, unread, now, due ? undefined : shard));

    const areas = Array.isArray(event.generalAdmission) ? (event.generalAdmission as Item[]) : [];
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

/**
 * The event's periodic backstop (and a closed event's end runs): every section read from DynamoDB,
 * whatever the seat map has, so a held seat Redis never knew of or lost is swept all the same;
 * `skip`: sections the caller knows are sold out. Nothing is read before the on-sale: no seat can
 * be held then.
 */
export async function sweepEventSections(
  ctx: Ctx,
  eventId: string,
  now: number,
  skip?: (sectionId: string) => boolean,
): Promise<SweepResult> {
  const result = emptyResult();
  if (!ID_PATTERN.test(eventId)) return result;
  return guard("sweepSections", async () => {
    const event = await getEventItem(ctx, eventId);
    if (!event || !onSale(event, now)) return result;
    const sections = sectionIdsOf(event).filter((sectionId) => !skip?.(sectionId));
    add(result, await sweepSections(ctx, eventId, sections, now));
    return result;
  });
}
