/**
 * Holds: seats (the fan's ledger, whose new entry is the hold, then the seats: writeSeatHold) and
 * general admission (a conditional decrement in a transaction with the hold record and the fan's
 * ledger), release, and reading a hold. The fan's ledger (fans.ts) is what keeps a fan's
 * held plus bought seats within maxSeatsPerFan however many holds the fan sends at once, and it
 * is where a hold is read from: a hold id starts with the fan's key hash, so a hold is found in
 * its fan's ledger and another fan's hold is told apart without a read.
 */
import { randomBytes } from "node:crypto";
import {
  BatchGetCommand,
  type BatchGetCommandOutput,
  GetCommand,
  PutCommand,
  UpdateCommand,
  type UpdateCommandInput,
} from "@aws-sdk/lib-dynamodb";
import { type BestCheck, type BestRequest, checkBest } from "./best.js";
import type { EventCache, SaleEvent } from "./events.js";
import { seatExists } from "./events.js";
import {
  countFan,
  counts,
  FAN_ATTEMPTS,
  type FanLedger,
  toFanLedger,
  type FanEntry,
  fanEntryOf,
  fanHoldAction,
  readFan,
  readFanByHash,
  releaseFanEntry,
} from "./fans.js";
import {
  adjust,
  type Counters,
  countersOf,
  estimatesOf,
  firstCounter,
  pickCounters,
  readCounters,
} from "./ga-counters.js";
import { iso } from "./items.js";
import {
  expirySortKey,
  fanKeyHash,
  HOLD_ID_PATTERN,
  ID_PATTERN,
  keys,
  parseSeatId,
  type SeatRef,
  seatIdOf,
} from "./keys.js";
import {
  backoff,
  conditionalUpdate,
  conditionFailure,
  type Ctx,
  guard,
  type Item,
  isTransactionConflict,
  num,
  optNum,
  transact,
  type TransactItem,
} from "./store.js";
import { overLimit, type SeatLimitExceeded } from "./limits.js";
import {
  placesBack,
  reclaimExpiredAdmissions,
  type SeatCandidates,
  sweepEventSections,
  sweepExpired,
} from "./sweep.js";
import type { EventRef, Hold, HoldResult, ReleaseResult, SweepResult } from "./types.js";

const SINGLE_WRITE_ATTEMPTS = 6;

export type LoadForSale = (eventId: string) => Promise<SaleEvent | null>;

export function validFan(fanId: string): boolean {
  return typeof fanId === "string" && fanId.length >= 1 && fanId.length <= 128;
}

function validHoldSeconds(holdSeconds: number): boolean {
  return Number.isInteger(holdSeconds) && holdSeconds >= 1 && holdSeconds <= 86_400;
}

/** A general-admission hold's record (seat holds have none: their entry in the ledger is the hold). */
export async function getHoldItem(ctx: Ctx, eventId: string, holdId: string): Promise<Item | undefined> {
  const out = await ctx.doc.send(
    new GetCommand({ TableName: ctx.tableName, Key: keys.hold(eventId, holdId), ConsistentRead: true }),
  );
  return out.Item;
}

/**
 * A hold id is the fan's key hash (32 hex digits, keys.ts) and 64 random bits (16 more): the
 * ledger that has the hold is named by the id itself, so a hold is read with one GetItem, and
 * another fan's hold is told from an unknown id by reading the ledger the id names.
 */
const OWNER_DIGITS = 32;

/** True when `holdId` names `fanId`'s ledger (whether it has the hold is the ledger's to say). */
export function holdOwnedBy(holdId: string, fanId: string): boolean {
  return holdId.slice(0, OWNER_DIGITS) === fanKeyHash(fanId);
}

const newHoldId = (fanId: string): string => fanKeyHash(fanId) + randomBytes(8).toString("hex");

/** A hold as the fan's ledger has it; `now` turns a held entry whose expiry has passed into `expired`. */
export function holdOfEntry(eventId: string, fanId: string, holdId: string, e: FanEntry, now: number): Hold {
  return {
    holdId,
    eventId,
    fanId,
    kind: e.area !== undefined ? "general_admission" : "seats",
    seats: e.ids ?? [],
    ...(e.area !== undefined ? { generalAdmission: { areaId: e.area, quantity: e.seats } } : {}),
    amount: e.amount ?? 0,
    createdAt: iso(e.createdAt ?? e.expiresAt),
    expiresAt: iso(e.expiresAt),
    status: e.status ?? (e.expiresAt <= now ? "expired" : "held"),
    ...(e.purchaseId !== undefined ? { purchaseId: e.purchaseId } : {}),
  };
}

/**
 * The fan's entry for `holdId`, read consistently from the fan's ledger: the entry, `not_owned`
 * when the id names another fan's ledger and that ledger has it, or null when nobody has it.
 */
export async function readHoldEntry(
  ctx: Ctx,
  eventId: string,
  fanId: string,
  holdId: string,
): Promise<FanEntry | "not_owned" | null> {
  if (holdOwnedBy(holdId, fanId)) return (await readFan(ctx, eventId, fanId)).holds.get(holdId) ?? null;
  const other = await readFanByHash(ctx, eventId, holdId.slice(0, OWNER_DIGITS));
  return other.holds.has(holdId) ? "not_owned" : null;
}

export async function getHold(ctx: Ctx, eventId: string, fanId: string, holdId: string): Promise<Hold | null> {
  if (!ID_PATTERN.test(eventId) || !HOLD_ID_PATTERN.test(holdId) || !validFan(fanId)) return null;
  return guard("getHold", async () => {
    const entry = await readHoldEntry(ctx, eventId, fanId, holdId);
    return entry && entry !== "not_owned" ? holdOfEntry(eventId, fanId, holdId, entry, ctx.clock()) : null;
  });
}

interface HoldTerms {
  eventId: string;
  fanId: string;
  holdId: string;
  now: number;
  expiresAt: number;
}

/**
 * A seat's hold write (scripts/bench-inventory.ts times it bare, without the module around it). It
 * writes no index entry: the sweeper finds an expired hold in the seat map, or in a read of the
 * section (src/inventory/sweep.ts), where an expiry entry in GSI2 cost a write unit at the hold and
 * another at the sale. The REMOVE costs nothing on a seat without GSI2 keys; a seat last held
 * before this change loses its old hold's entry, which would otherwise name an expiry long past
 * and cost a failed conditional write at every sweep of its shard while the new hold lives.
 */
export const SEAT_HOLD_UPDATE =
  "SET #status = :held, holderId = :fan, holdId = :hold, holdExpiresAt = :exp, heldAt = :now REMOVE GSI2PK, GSI2SK";
/**
 * Expiry is decided here, at write time: a held seat whose hold has passed is free to take.
 * `holdId = :hold` makes an SDK retry of this very request (same hold id) succeed again.
 * A missing key satisfies no branch (it has no status), so this write never creates a seat.
 * One level of parentheses on purpose: the local DynamoDB's parser slows down steeply with
 * nesting (three levels cost it 4x), and DynamoDB reads both forms the same.
 */
export const SEAT_HOLD_CONDITION =
  "(attribute_exists(PK) AND #status = :available) OR (#status = :held AND holdExpiresAt <= :now) " +
  "OR (#status = :held AND holdId = :hold)";

function seatHoldUpdate(ctx: Ctx, t: HoldTerms, ref: SeatRef): UpdateCommandInput & { UpdateExpression: string } {
  return {
    TableName: ctx.tableName,
    Key: keys.seat(t.eventId, ref),
    UpdateExpression: SEAT_HOLD_UPDATE,
    ConditionExpression: SEAT_HOLD_CONDITION,
    ExpressionAttributeNames: { "#status": "status" },
    ExpressionAttributeValues: {
      ":held": "held",
      ":available": "available",
      ":fan": t.fanId,
      ":hold": t.holdId,
      ":exp": t.expiresAt,
      ":now": t.now,
    },
    ReturnValuesOnConditionCheckFailure: "ALL_OLD",
  };
}

/**
 * A general-admission hold's record: the area's accounting needs an item whose state returns the
 * places exactly once (release, sweep), and the sweeper finds expired ones by it (GSI2).
 */
function admissionRecord(t: HoldTerms, amount: number, ga: { areaId: string; quantity: number }, from: Counters): Item {
  return {
    ...keys.hold(t.eventId, t.holdId),
    entity: "HOLD",
    eventId: t.eventId,
    holdId: t.holdId,
    fanId: t.fanId,
    status: "held",
    seats: [],
    amount,
    createdAt: iso(t.now),
    expiresAt: t.expiresAt,
    areaId: ga.areaId,
    quantity: ga.quantity,
    from,
    GSI2PK: keys.heldAdmissionsPartition(t.eventId, ga.areaId, firstCounter(from)),
    GSI2SK: expirySortKey(t.expiresAt, t.holdId),
  };
}

/** In a transaction the record is new, always: a cancellation's ALL_OLD image tells a retry apart. */
function recordPut(ctx: Ctx, record: Item) {
  return {
    TableName: ctx.tableName,
    Item: record,
    ConditionExpression: "attribute_not_exists(PK)",
    ReturnValuesOnConditionCheckFailure: "ALL_OLD" as const,
  };
}

/**
 * A seat hold that passed every check a request can fail before the write: the fan, the hold's
 * length, no seat named twice, the event on sale, the per-request limit, every seat in the layout.
 * Made by `checkSeatHold` from the one event cache; written by `writeSeatHold`. The claim path
 * checks before the hot-seat shield, so a request that is wrong in itself is refused as such
 * whatever the seats' state.
 */
export interface CheckedSeatHold {
  readonly eventId: string;
  readonly fanId: string;
  readonly seatIds: readonly string[];
  readonly refs: readonly SeatRef[];
  readonly amount: number;
  readonly holdSeconds: number;
  readonly maxSeatsPerFan: number;
}

export type SeatHoldCheck = { ok: true; checked: CheckedSeatHold } | Exclude<HoldResult, { ok: true }>;

export async function checkSeatHold(
  loadForSale: LoadForSale,
  eventId: string,
  fanId: string,
  seatIds: string[],
  holdSeconds?: number,
): Promise<SeatHoldCheck> {
  const refused = checkSeatRequest(eventId, fanId, seatIds, holdSeconds);
  if (refused) return refused;
  return guard("hold", async () => checkSeatsForSale(await loadForSale(eventId), eventId, fanId, seatIds, holdSeconds));
}

/**
 * `checkSeatHold` without waiting, from the event as the cache holds it now: undefined when the
 * cache cannot say without a read (the caller then awaits checkSeatHold). The same checks in the
 * same order, so both answer alike.
 */
export function checkSeatHoldNow(
  peekForSale: (eventId: string) => SaleEvent | null | undefined,
  eventId: string,
  fanId: string,
  seatIds: string[],
  holdSeconds?: number,
): SeatHoldCheck | undefined {
  const refused = checkSeatRequest(eventId, fanId, seatIds, holdSeconds);
  if (refused) return refused;
  const sale = peekForSale(eventId);
  return sale === undefined ? undefined : checkSeatsForSale(sale, eventId, fanId, seatIds, holdSeconds);
}

/** The checks a seat hold request fails in itself, before its event is read. */
function checkSeatRequest(
  eventId: string,
  fanId: string,
  requested: string[],
  holdSeconds: number | undefined,
): Exclude<SeatHoldCheck, { ok: true }> | undefined {
  if (!validFan(fanId)) return { ok: false, reason: "invalid_request", message: "fanId must be 1..128 characters" };
  if (holdSeconds !== undefined && !validHoldSeconds(holdSeconds))
    return { ok: false, reason: "invalid_request", message: "holdSeconds must be 1..86400" };
  if (requested.length === 0) return { ok: false, reason: "invalid_request", message: "no seats asked for" };
  // Refused, never merged: the fan asked for something other than what a merge would hold (API.md).
  if (requested.length > 1 && new Set(requested).size !== requested.length) {
    return { ok: false, reason: "invalid_request", message: "a seat is named twice" };
  }
  if (!ID_PATTERN.test(eventId)) return { ok: false, reason: "not_found", what: "event" };
  return undefined;
}

/** The checks against the event once read (null: no such event). */
function checkSeatsForSale(
  sale: SaleEvent | null,
  eventId: string,
  fanId: string,
  requested: string[],
  holdSeconds: number | undefined,
): SeatHoldCheck {
  if (!sale) return { ok: false, reason: "not_found", what: "event" };
  if (!sale.onSale) return { ok: false, reason: "not_on_sale" };
  const tooMany = overLimit(sale.event.maxSeatsPerFan, "seats", requested.length);
  if (tooMany) return tooMany;

  const refs: SeatRef[] = [];
  const unknown: string[] = [];
  let amount = 0;
  for (const seatId of requested) {
    const ref = parseSeatId(seatId);
    const section = ref ? seatExists(sale, ref) : undefined;
    if (!ref || !section) unknown.push(seatId);
    else {
      refs.push(ref);
      amount += section.price;
    }
  }
  if (unknown.length > 0) return { ok: false, reason: "not_found", what: "seat", seats: unknown };
  const checked: CheckedSeatHold = {
    eventId,
    fanId,
    seatIds: [...requested],
    refs,
    amount,
    holdSeconds: holdSeconds ?? sale.event.holdSeconds,
    maxSeatsPerFan: sale.event.maxSeatsPerFan,
  };
  return { ok: true, checked };
}

/**
 * What a caller with other seats to offer does when the hold lost some (best available,
 * src/claims/hold-service.ts): the next seats to try, or the answer to give. The lost hold's entry
 * was taken back, so the next seats are counted from a fresh read of the fan's ledger.
 */
export type NextSeats = (lost: string[]) => Promise<CheckedSeatHold | Exclude<HoldResult, { ok: true }>>;

/**
 * A seat hold in two writes, the ledger first. After one consistent read of the ledger and the
 * seats (readLedgerAndSeats, which refuses a seat someone has before anything is written), the
 * fan's entry (the hold) is added to the ledger under the version it counted from, and only then
 * are the seats taken: one conditional UpdateItem for one seat, one TransactWriteItems of the
 * seats for several (all or none). A seat lost there takes the entry back (marked released). In a transaction with the ledger the
 * same hold cost twice the write units (2 per item): 4 for one seat where these cost 2
 * (docs/data-model.md "Capacity notes").
 *
 * Why the ledger first: the limit stays exact (the entry counts from the moment it is written, so
 * two holds of one fan still count each other) and a crash between the two writes leaves only an
 * entry with no seats, which counts against its own fan until its expiry and can never be bought
 * (a confirmation needs the seats held by the hold id, which nobody was told). Seats first would
 * leave seats held by a hold no ledger has, locked against every other fan until they expire.
 *
 * With `next`, seats lost to another fan are not the answer: `next` names others (as many as the
 * first), tried the same way after the ledger is read again.
 */
export function writeSeatHold(ctx: Ctx, first: CheckedSeatHold, next?: NextSeats): Promise<HoldResult> {
  const { eventId, fanId, maxSeatsPerFan } = first;
  let checked = first;
  return guard("hold", () =>
    holdForFan(
      ctx,
      eventId,
      fanId,
      maxSeatsPerFan,
      "seats",
      first.refs.length,
      // Best available (with `next`) holds seats the map proposed as free: the read would find them so.
      next ? null : () => readLedgerAndSeats(ctx, first),
      async (now, ledgerAction) => {
        const { refs, amount } = checked;
        const requested = checked.seatIds as string[];
        const seconds = checked.holdSeconds;
        const t: HoldTerms = { eventId, fanId, holdId: newHoldId(fanId), now, expiresAt: now + seconds * 1000 };
        const entry: FanEntry = { seats: refs.length, expiresAt: t.expiresAt, ids: requested, amount, createdAt: now };
        const reserved = await reserveOnLedger(ctx, ledgerAction(t.holdId, entry), t.holdId);
        if (reserved !== "reserved") return reserved;
        const out = await takeSeats(ctx, t, refs, requested);
        if (out === "held") return { ok: true, hold: holdOfEntry(eventId, fanId, t.holdId, entry, now) };
        // The entry goes back before the answer: the fan's next hold counts without it. Should this
        // write fail, the entry counts against this fan only, until its expiry.
        await releaseFanEntry(ctx, eventId, fanId, t.holdId).catch(() => {});
        if (out === "contention") return { ok: false, reason: "contention" };
        if (out.missing.length > 0) return { ok: false, reason: "not_found", what: "seat", seats: out.missing };
        if (!next) return { ok: false, reason: "seat_unavailable", seats: out.lost };
        const other = await next(out.lost);
        if ("ok" in other) return other;
        checked = other;
        return "recount";
      },
    ),
  );
}

type Refusal = Exclude<HoldResult, { ok: true }>;

/**
 * The fan's ledger and the seats as they are, in one consistent BatchGetItem (at most 97 keys):
 * with the ledger, `refused` is `seat_unavailable` with the seats another hold has (held and
 * unexpired, or sold), `not_found` for seats with no item, or null when every seat can be taken as
 * far as this read knows. A hold refused here wrote nothing: a fan who clicks a seat someone else
 * has is answered for one request and no write (the seat's conditional write still decides every
 * hold that goes on). One request, not a GetItem beside a BatchGetItem: a crowd on one seat is as
 * many requests in flight as fans, as it was when the ledger read came alone.
 */
async function readLedgerAndSeats(
  ctx: Ctx,
  checked: CheckedSeatHold,
): Promise<{ ledger: FanLedger; refused: Refusal | null }> {
  const fanKey = keys.fan(checked.eventId, checked.fanId);
  const seatKeys = checked.refs.map((ref) => keys.seat(checked.eventId, ref));
  const out = await ctx.doc.send(
    new BatchGetCommand({ RequestItems: { [ctx.tableName]: { Keys: [fanKey, ...seatKeys], ConsistentRead: true } } }),
  );
  const id = (k: { PK?: unknown; SK?: unknown }) => `${String(k.PK)}|${String(k.SK)}`;
  const items = new Map<string, Item | "unknown">();
  for (const item of out.Responses?.[ctx.tableName] ?? []) items.set(id(item), item);
  // Keys DynamoDB left unprocessed are not known here: the ledger is read alone, the seats left to the writes.
  for (const k of out.UnprocessedKeys?.[ctx.tableName]?.Keys ?? []) items.set(id(k), "unknown");
  const ledgerItem = items.get(id(fanKey));
  const ledger =
    ledgerItem === "unknown" ? await readFan(ctx, checked.eventId, checked.fanId) : toFanLedger(ledgerItem);
  const now = ctx.clock();
  const lost: string[] = [];
  const missing: string[] = [];
  seatKeys.forEach((key, i) => {
    const item = items.get(id(key));
    if (item === "unknown") return;
    if (!item) missing.push(checked.seatIds[i]!);
    else if (item.status === "sold" || (item.status === "held" && (optNum(item, "holdExpiresAt") ?? 0) > now)) {
      lost.push(checked.seatIds[i]!);
    }
  });
  if (missing.length > 0) return { ledger, refused: { ok: false, reason: "not_found", what: "seat", seats: missing } };
  if (lost.length > 0) return { ledger, refused: { ok: false, reason: "seat_unavailable", seats: lost } };
  return { ledger, refused: null };
}

/**
 * The ledger's write of a new hold, on its own (not in a transaction): `reserved` when written,
 * or when an SDK retry of this very write finds its entry already there (the version condition is
 * what a committed first attempt fails); `fan_changed` when another write of the fan came first.
 */
async function reserveOnLedger(ctx: Ctx, action: TransactItem, holdId: string): Promise<"reserved" | "fan_changed"> {
  try {
    if (action.Put) await ctx.doc.send(new PutCommand(action.Put));
    else if (action.Update) await ctx.doc.send(new UpdateCommand(action.Update));
    else throw new Error("a ledger write is a Put or an Update");
    return "reserved";
  } catch (err) {
    const failed = conditionFailure(err);
    if (failed) return fanEntryOf(failed.item, holdId) ? "reserved" : "fan_changed";
    // A confirmation or another transaction of the fan is on the item (real DynamoDB): count again.
    if (isTransactionConflict(err)) return "fan_changed";
    throw err;
  }
}

type SeatsTaken = "held" | "contention" | { lost: string[]; missing: string[] };

/**
 * The hold's seats: one conditional UpdateItem for one seat (retried while a transaction is on the
 * item, as conditionalUpdate does), one TransactWriteItems for several. `lost`: seats another
 * hold has (the ALL_OLD image says so); `missing`: seats with no item (not in the layout any more).
 */
async function takeSeats(ctx: Ctx, t: HoldTerms, refs: readonly SeatRef[], ids: string[]): Promise<SeatsTaken> {
  if (refs.length === 1) {
    const seatId = ids[0]!;
    for (let attempt = 0; ; attempt++) {
      try {
        await ctx.doc.send(new UpdateCommand(seatHoldUpdate(ctx, t, refs[0]!)));
        return "held";
      } catch (err) {
        const failed = conditionFailure(err);
        if (failed) return failed.item ? { lost: [seatId], missing: [] } : { lost: [], missing: [seatId] };
        if (!isTransactionConflict(err)) throw err;
        if (attempt + 1 >= SINGLE_WRITE_ATTEMPTS) return "contention";
        await backoff(attempt, 15, 500);
      }
    }
  }
  const out = await transact(
    ctx,
    refs.map((ref) => ({ Update: seatHoldUpdate(ctx, t, ref) })),
  );
  if (out.ok) return "held";
  if (out.contention) return "contention";
  const lost: string[] = [];
  const missing: string[] = [];
  out.reasons.forEach((r, i) => {
    if (r.code !== "ConditionalCheckFailed") return;
    (r.item ? lost : missing).push(ids[i]!);
  });
  if (lost.length === 0 && missing.length === 0) throw new Error("hold transaction cancelled for no stated reason");
  return { lost, missing };
}

export async function hold(
  ctx: Ctx,
  loadForSale: LoadForSale,
  eventId: string,
  fanId: string,
  seatIds: string[],
  holdSeconds?: number,
): Promise<HoldResult> {
  const check = await checkSeatHold(loadForSale, eventId, fanId, seatIds, holdSeconds);
  return check.ok ? writeSeatHold(ctx, check.checked) : check;
}

type LedgerAction = (holdId: string, entry: FanEntry) => TransactItem;
/**
 * `fan_changed`: the ledger's condition failed; `again`: try once more with the same count (the
 * attempt wrote nothing); `recount`: the attempt wrote the ledger and took it back, so read it again.
 */
type Attempt = HoldResult | "fan_changed" | "again" | "recount";

/**
 * Runs a hold under the fan's limit: reads the fan's ledger (consistent), refuses if the fan's
 * bought seats plus unexpired held seats plus this hold would pass `max`, and otherwise lets
 * `attempt` write its transaction with the ledger's conditional write in it. When the ledger
 * changed in between, reads it again and retries (jittered), at most FAN_ATTEMPTS times.
 */
/** How often a refusal that rests on young entries reads the ledger again (holdForFan). */
const IN_FLIGHT_WAITS = 6;
/** An entry younger than this may belong to a seat hold whose seats are still being written. */
const IN_FLIGHT_MS = 2_000;

/**
 * The fan's limit, read before anything is leased or written: the refusal a hold of `seats` more
 * would meet now, or null. Counted as the hold counts: a young entry (a hold of the fan's that
 * may still be in flight) only once its seats are held by it. One consistent read of the fan's
 * ledger, and of the young entries' seats when the count rests on them.
 */
export async function fanOverLimit(
  ctx: Ctx,
  eventId: string,
  fanId: string,
  maxSeatsPerFan: number,
  seats: number,
): Promise<SeatLimitExceeded | null> {
  return guard("fanOverLimit", async () => {
    const ledger = await readFan(ctx, eventId, fanId);
    const now = ctx.clock();
    const { counted } = countFan(ledger, now);
    const tooMany = overLimit(maxSeatsPerFan, "seats", seats, counted);
    if (!tooMany) return null;
    // As holdForFan: young entries count only once their seats are theirs (one read of them).
    const young = youngSeatEntries(ledger, now);
    if (young.length === 0) return tooMany;
    return overLimit(maxSeatsPerFan, "seats", seats, counted - (await unsettledSeats(ctx, eventId, young)));
  });
}

/**
 * The young seat-hold entries that count: made in the last IN_FLIGHT_MS (by their own `createdAt`).
 * Only a seat hold writes its entry before its seats; a standing hold's entry is in its transaction.
 */
function youngSeatEntries(ledger: FanLedger, now: number): [string, FanEntry][] {
  const young: [string, FanEntry][] = [];
  for (const [holdId, e] of ledger.holds) {
    if (counts(e, now) && e.ids && e.createdAt !== undefined && e.createdAt > now - IN_FLIGHT_MS)
      young.push([holdId, e]);
  }
  return young;
}

/**
 * Seats of the young entries whose seats are not (yet) all held by them: the holds that may still
 * be in flight, or about to be taken back. One consistent BatchGetItem of their seats (a fan has
 * few: the limit bounds them); past 100 keys every young entry is taken as unsettled.
 */
async function unsettledSeats(ctx: Ctx, eventId: string, young: [string, FanEntry][]): Promise<number> {
  const all = young.reduce((n, [, e]) => n + e.seats, 0);
  // One key per seat: two young entries of one fan may name the same seat (a fan racing itself),
  // and BatchGetItem refuses a list with a key twice.
  const wanted = [...new Set(young.flatMap(([, e]) => e.ids ?? []))];
  const refs = wanted.map((id) => parseSeatId(id));
  if (wanted.length === 0 || wanted.length > 100 || refs.some((r) => r === null)) return all;
  let out: BatchGetCommandOutput;
  try {
    out = await ctx.doc.send(
      new BatchGetCommand({
        RequestItems: {
          [ctx.tableName]: {
            Keys: refs.map((ref) => keys.seat(eventId, ref as SeatRef)),
            ConsistentRead: true,
            ProjectionExpression: "seatId, holdId",
          },
        },
      }),
    );
  } catch {
    // A shortcut only: without it the refusal waits for the young entries as if none had settled.
    return all;
  }
  if ((out.UnprocessedKeys?.[ctx.tableName]?.Keys ?? []).length > 0) return all;
  const holder = new Map<string, unknown>();
  for (const item of out.Responses?.[ctx.tableName] ?? []) holder.set(String(item.seatId), item.holdId);
  let unsettled = 0;
  for (const [holdId, e] of young) if (!(e.ids ?? []).every((id) => holder.get(id) === holdId)) unsettled += e.seats;
  return unsettled;
}

async function holdForFan(
  ctx: Ctx,
  eventId: string,
  fanId: string,
  max: number,
  kind: "seats" | "general_admission",
  seats: number,
  /**
   * The first read, when it is more than the ledger (readLedgerAndSeats): its refusal is the answer
   * once the fan's count allows the hold.
   */
  firstRead: (() => Promise<{ ledger: FanLedger; refused: Refusal | null }>) | null,
  attempt: (now: number, ledgerAction: LedgerAction) => Promise<Attempt>,
): Promise<HoldResult> {
  const { ledger: first, refused } = firstRead
    ? await firstRead()
    : { ledger: await readFan(ctx, eventId, fanId), refused: null };
  let ledger = first;
  let precheckDue = refused !== null;
  for (let conflicts = 0, waits = 0; ; ) {
    const now = ctx.clock();
    const { counted, ...upkeep } = countFan(ledger, now);
    const tooMany = overLimit(max, kind, seats, counted);
    if (tooMany) {
      // A seat hold's entry is written before its seats (writeSeatHold) and taken back if they are
      // lost: a young entry whose seats are not held by it yet may be one in flight. A refusal that
      // rests on such entries waits for them to settle (a few reads, well under a second), so a
      // fan's parallel holds answer as some order of them would, never "too many" because of a
      // hold that is about to fail. Entries whose seats are theirs are counted as they stand.
      const young = waits < IN_FLIGHT_WAITS ? youngSeatEntries(ledger, now) : [];
      if (young.length === 0) return tooMany;
      if (overLimit(max, kind, seats, counted - (await unsettledSeats(ctx, eventId, young))) !== null) return tooMany;
      await backoff(waits++, 10, 200);
      ledger = await readFan(ctx, eventId, fanId);
      continue;
    }
    if (precheckDue && refused) return refused;
    precheckDue = false;
    const seen = ledger;
    const out = await attempt(now, (holdId, entry) => fanHoldAction(ctx, eventId, fanId, seen, upkeep, holdId, entry));
    if (out === "again") continue;
    if (out === "recount") {
      ledger = await readFan(ctx, eventId, fanId);
      continue;
    }
    if (out !== "fan_changed") return out;
    conflicts++;
    if (conflicts >= FAN_ATTEMPTS) return { ok: false, reason: "contention" };
    await backoff(conflicts - 1, 10, 250);
    ledger = await readFan(ctx, eventId, fanId);
  }
}

/** Rounds a standing hold whose transactions keep colliding waits out before it answers contention. */
const GA_COLLISION_ROUNDS = 6;

export async function holdGeneralAdmission(
  ctx: Ctx,
  loadForSale: LoadForSale,
  eventId: string,
  fanId: string,
  areaId: string,
  quantity: number,
  holdSeconds?: number,
): Promise<HoldResult> {
  if (!validFan(fanId)) return { ok: false, reason: "invalid_request", message: "fanId must be 1..128 characters" };
  if (holdSeconds !== undefined && !validHoldSeconds(holdSeconds))
    return { ok: false, reason: "invalid_request", message: "holdSeconds must be 1..86400" };
  if (!Number.isInteger(quantity) || quantity < 1) {
    return { ok: false, reason: "invalid_request", message: "quantity must be a positive integer" };
  }
  if (!ID_PATTERN.test(eventId)) return { ok: false, reason: "not_found", what: "event" };

  return guard("holdGeneralAdmission", async () => {
    const sale = await loadForSale(eventId);
    if (!sale) return { ok: false, reason: "not_found", what: "event" };
    if (!sale.onSale) return { ok: false, reason: "not_on_sale" };
    const area = sale.areas.get(areaId);
    if (!area) return { ok: false, reason: "not_found", what: "area" };
    const max = sale.event.maxSeatsPerFan;
    const tooMany = overLimit(max, "general_admission", quantity);
    if (tooMany) return tooMany;
    const seconds = holdSeconds ?? sale.event.holdSeconds;

    const est = estimatesOf(ctx, eventId, areaId, area.capacity);
    let reclaims = 0;
    let misses = 0;
    let refreshes = 0;
    let collisions = 0;
    return holdForFan(ctx, eventId, fanId, max, "general_admission", quantity, null, async (now, ledgerAction) => {
      // Where to take the places from (the shield, ga-counters.ts). When the estimates have too
      // few, or tries kept missing, every counter is read: the truth decides "sold out".
      const parts = misses <= est.length + 1 ? pickCounters(est, quantity) : null;
      if (!parts) {
        // Each full read ends with a fresh try; only a hold that keeps losing the last places to
        // others this many times is told to retry (the sell-out bench saw 3 in 5,000 at 4).
        if (refreshes >= 8) return { ok: false, reason: "contention" };
        refreshes++;
        misses = 0;
        const states = await readCounters(ctx, eventId, areaId, est);
        if (!states) return { ok: false, reason: "not_found", what: "area" };
        const available = states.reduce((n, c) => n + c.available, 0);
        if (available >= quantity) return "again";
        // Expired holds still count against `available` until someone returns them; do it now
        // rather than tell a fan "sold out" while expired places wait for the sweeper.
        if (reclaims < 2 && states.some((c) => c.held > 0)) {
          reclaims++;
          const reclaimed = await reclaimExpiredAdmissions(ctx, eventId, areaId, states.length, now);
          adjust(est, reclaimed.counters, 1);
          // Try again when expired holds were found, even if a concurrent caller returned them first.
          if (reclaimed.quantity > 0 || reclaimed.examined > 0) return "again";
          // None were left to return, yet a concurrent caller may have returned them between our
          // read and the reclaim's query (the inventory model test caught "1 left" told while 4
          // were): the answer comes from a read made after that query.
          const after = await readCounters(ctx, eventId, areaId, est);
          if (!after) return { ok: false, reason: "not_found", what: "area" };
          const left = after.reduce((n, c) => n + c.available, 0);
          if (left >= quantity) return "again";
          return { ok: false, reason: "insufficient_quantity", available: left };
        }
        return { ok: false, reason: "insufficient_quantity", available };
      }
      const t: HoldTerms = { eventId, fanId, holdId: newHoldId(fanId), now, expiresAt: now + seconds * 1000 };
      const amount = area.price * quantity;
      const record = admissionRecord(t, amount, { areaId, quantity }, parts);
      const entry: FanEntry = {
        seats: quantity,
        expiresAt: t.expiresAt,
        area: areaId,
        from: parts,
        amount,
        createdAt: now,
      };
      const held = (): HoldResult => ({ ok: true, hold: holdOfEntry(eventId, fanId, t.holdId, entry, now) });
      const counters = Object.entries(parts);
      const out = await transact(ctx, [
        ...counters.map(
          ([k, q]): TransactItem => ({
            Update: {
              TableName: ctx.tableName,
              Key: keys.generalAdmission(eventId, areaId, Number(k)),
              UpdateExpression: "SET available = available - :q, held = held + :q",
              ConditionExpression: "attribute_exists(PK) AND available >= :q",
              ExpressionAttributeValues: { ":q": q },
              ReturnValuesOnConditionCheckFailure: "ALL_OLD",
            },
          }),
        ),
        { Put: recordPut(ctx, record) },
        ledgerAction(t.holdId, entry),
      ]);
      const recordAt = counters.length;
      if (out.ok) {
        adjust(est, parts, -1);
        return held();
      }
      if (out.contention) {
        // Transactions on the same counters kept colliding (TransactionConflict past transact's own
        // retries): at the sold-out tail many fans want the last counters with places. Wait a
        // jittered while and try again, from another counter when the random pick moves, before
        // telling the fan to retry (test/inventory/hot-keys.test.ts met 2 of 1,200 here).
        if (collisions >= GA_COLLISION_ROUNDS) return { ok: false, reason: "contention" };
        collisions++;
        await backoff(collisions, 20, 500);
        return "again";
      }
      if (out.reasons[recordAt]?.item?.holdId === t.holdId) {
        adjust(est, parts, -1);
        return held();
      }
      if (out.reasons[recordAt + 1]?.code === "ConditionalCheckFailed") return "fan_changed";
      let refused = false;
      counters.forEach(([k], i) => {
        const r = out.reasons[i];
        if (r?.code !== "ConditionalCheckFailed") return;
        refused = true;
        // A counter with no item has no places (counter 0 missing: the area is gone, see above).
        est[Number(k)] = r.item ? num(r.item, "available") : 0;
      });
      if (!refused) throw new Error("GA hold cancelled on the hold record");
      misses++;
      return "again";
    });
  });
}

/** Resets one seat to available if (and only if) it is still held by `holdId`. */
/** False when it is not ours any more: sold, released, or re-held. */
function releaseSeat(ctx: Ctx, eventId: string, holdId: string, ref: SeatRef): Promise<boolean> {
  return conditionalUpdate(
    ctx,
    {
      Key: keys.seat(eventId, ref),
      UpdateExpression: "SET #status = :available REMOVE holderId, holdId, holdExpiresAt, heldAt, GSI2PK, GSI2SK",
      ConditionExpression: "#status = :held AND holdId = :hold",
      ExpressionAttributeNames: { "#status": "status" },
      ExpressionAttributeValues: { ":available": "available", ":held": "held", ":hold": holdId },
    },
    SINGLE_WRITE_ATTEMPTS,
  );
}

/**
 * Gives a hold back. Seats are released one conditional write each (a seat another fan has taken
 * since the hold expired is left alone), then the fan's entry is marked released; a crash in
 * between is finished by calling release again, and until then the entry counts against the fan
 * (never for the fan) no longer than the hold's expiry. A general-admission hold returns its
 * quantity in the same transaction that moves its record from held to released, so it is
 * returned exactly once.
 */
export async function release(ctx: Ctx, eventId: string, holdId: string, fanId: string): Promise<ReleaseResult> {
  if (!ID_PATTERN.test(eventId) || !HOLD_ID_PATTERN.test(holdId) || !validFan(fanId)) {
    return { ok: false, reason: "not_found" };
  }
  return guard("release", async () => {
    const entry = await readHoldEntry(ctx, eventId, fanId, holdId);
    if (entry === "not_owned") return { ok: false, reason: "hold_not_owned" };
    if (!entry) return { ok: false, reason: "not_found" };
    const now = ctx.clock();
    const view = (e: FanEntry) => holdOfEntry(eventId, fanId, holdId, e, now);
    if (entry.status === "confirmed") return { ok: false, reason: "hold_confirmed" };
    if (entry.status === "released") return { ok: true, hold: view(entry), releasedSeats: [], placesReturned: 0 };

    if (entry.area === undefined) {
      const refs = (entry.ids ?? []).map((s) => parseSeatId(s)).filter((r): r is SeatRef => r !== null);
      const released = await Promise.all(refs.map((ref) => releaseSeat(ctx, eventId, holdId, ref)));
      const releasedSeats = refs.filter((_, i) => released[i]).map(seatIdOf);
      // Last, once the seats are back. A confirmation that committed first sold them (no seat
      // above was ours any more) and marked the entry: then it is the answer.
      if ((await releaseFanEntry(ctx, eventId, fanId, holdId)) === "confirmed") {
        return { ok: false, reason: "hold_confirmed" };
      }
      return { ok: true, hold: view({ ...entry, status: "released" }), releasedSeats, placesReturned: 0 };
    }

    const areaId = entry.area;
    const counters = countersOf(entry.from, entry.seats);
    const out = await transact(
      ctx,
      [
        {
          Update: {
            TableName: ctx.tableName,
            Key: keys.hold(eventId, holdId),
            UpdateExpression: "SET #status = :released, releasedAt = :at REMOVE GSI2PK, GSI2SK",
            ConditionExpression: "#status = :held AND fanId = :fan",
            ExpressionAttributeNames: { "#status": "status" },
            ExpressionAttributeValues: { ":released": "released", ":held": "held", ":fan": fanId, ":at": iso(now) },
            ReturnValuesOnConditionCheckFailure: "ALL_OLD",
          },
        },
        ...Object.entries(counters).map(([k, q]) => ({
          Update: placesBack(ctx, eventId, areaId, Number(k), q),
        })),
      ],
      10,
    );
    let status = "released";
    if (!out.ok) {
      if (out.contention) throw new Error("release: transactions kept colliding");
      const current = out.reasons[0]?.item;
      if (!current) throw new Error("release: general-admission hold record missing");
      if (current.status === "confirmed") return { ok: false, reason: "hold_confirmed" };
      status = String(current.status);
    }
    // After the record left `held` (as for seats above): the entry only ever outlives the hold.
    if (status === "released") {
      if ((await releaseFanEntry(ctx, eventId, fanId, holdId)) === "confirmed") {
        return { ok: false, reason: "hold_confirmed" };
      }
      // Only the call whose transaction moved the record gave the places back (a concurrent
      // release of the same hold finds it released and returns none).
      const placesReturned = out.ok ? Object.values(counters).reduce((a, b) => a + b, 0) : 0;
      return { ok: true, hold: view({ ...entry, status: "released" }), releasedSeats: [], placesReturned };
    }
    // Swept as expired before us: its places are back, and the entry counts for nothing any more.
    return { ok: true, hold: view(entry), releasedSeats: [], placesReturned: 0 };
  });
}

/** The hold aggregate: holds of seats and of general-admission places, and their expiry. */
export interface HoldStore {
  /**
   * All or nothing, one transaction (the seats and the fan's ledger). Refused with
   * `seat_limit_exceeded` when the fan's held and bought seats at this event plus these would pass
   * maxSeatsPerFan, however many holds the fan has in flight (limits.ts), and with
   * `invalid_request` when a seat is named twice. `holdSeconds`: default the event's.
   */
  holdSeats(args: EventRef & { fanId: string; seatIds: string[]; holdSeconds?: number }): Promise<HoldResult>;
  /**
   * `holdSeats` in two steps, for a caller with work between them (the claim path's shield): the
   * checks a request can fail before any write, then the transaction.
   */
  checkSeats(args: EventRef & { fanId: string; seatIds: string[]; holdSeconds?: number }): Promise<SeatHoldCheck>;
  /** `checkSeats` without waiting: undefined when the event is not in the cache, read and fresh. */
  checkSeatsNow(args: EventRef & { fanId: string; seatIds: string[]; holdSeconds?: number }): SeatHoldCheck | undefined;
  /** With `next`: seats lost to another fan are traded for the ones `next` names (best available). */
  writeSeats(checked: CheckedSeatHold, next?: NextSeats): Promise<HoldResult>;
  /**
   * The fan's limit read before a hold (one consistent read): the refusal `seats` more would meet
   * now, on settled entries only; null otherwise. For the claim path, so a fan at the limit does
   * not lease seats it cannot hold.
   */
  fanOverLimit(
    args: EventRef & { fanId: string; maxSeatsPerFan: number; seats: number },
  ): Promise<SeatLimitExceeded | null>;
  /** A best-available request's checks (./best.ts); the claim path proposes the seats. */
  checkBest(args: EventRef & { fanId: string; best: BestRequest; holdSeconds?: number }): Promise<BestCheck>;
  holdGeneralAdmission(
    args: EventRef & { fanId: string; areaId: string; quantity: number; holdSeconds?: number },
  ): Promise<HoldResult>;
  /** Idempotent. Seats go back only while this hold still holds them. */
  release(args: EventRef & { holdId: string; fanId: string }): Promise<ReleaseResult>;
  /** The fan's hold, from the fan's ledger; null when the fan has no such hold. */
  get(args: EventRef & { holdId: string; fanId: string }): Promise<Hold | null>;
  /**
   * Resets expired holds of one shard (0..SWEEP_SHARDS-1); `now` defaults to the clock. Held seats
   * are found in `heldSeats` (the seat map), and in a read of each section it does not have, when
   * `storeReadDue` allows it (then every shard's expired seats of it are reset; without
   * `storeReadDue`, every sweep reads it and resets its own shard's), src/inventory/sweep.ts;
   * without `heldSeats`, every section is read.
   */
  sweepExpired(args: EventRef & SeatCandidates & { shard: number; now?: number }): Promise<SweepResult>;
  /**
   * The backstop that does not depend on Redis: every section of the event read from DynamoDB
   * (but those `skip` names: sold out), its held seats whose hold has expired reset (nothing is
   * read before the on-sale).
   */
  sweepSections(args: EventRef & { now?: number; skip?: (sectionId: string) => boolean }): Promise<SweepResult>;
}

export function createHoldStore(ctx: Ctx, events: EventCache): HoldStore {
  return {
    holdSeats: ({ eventId, fanId, seatIds, holdSeconds }) =>
      hold(ctx, events.forSale, eventId, fanId, seatIds, holdSeconds),
    checkSeats: ({ eventId, fanId, seatIds, holdSeconds }) =>
      checkSeatHold(events.forSale, eventId, fanId, seatIds, holdSeconds),
    checkSeatsNow: ({ eventId, fanId, seatIds, holdSeconds }) =>
      checkSeatHoldNow(events.peekForSale, eventId, fanId, seatIds, holdSeconds),
    writeSeats: (checked, next) => writeSeatHold(ctx, checked, next),
    fanOverLimit: ({ eventId, fanId, maxSeatsPerFan, seats }) =>
      fanOverLimit(ctx, eventId, fanId, maxSeatsPerFan, seats),
    checkBest: ({ eventId, fanId, best, holdSeconds }) =>
      checkBest(events.forSale, eventId, fanId, best, holdSeconds, validFan),
    holdGeneralAdmission: ({ eventId, fanId, areaId, quantity, holdSeconds }) =>
      holdGeneralAdmission(ctx, events.forSale, eventId, fanId, areaId, quantity, holdSeconds),
    release: ({ eventId, holdId, fanId }) => release(ctx, eventId, holdId, fanId),
    get: ({ eventId, holdId, fanId }) => getHold(ctx, eventId, fanId, holdId),
    sweepExpired: ({ eventId, shard, now, heldSeats, storeReadDue }) =>
      sweepExpired(ctx, eventId, shard, now ?? ctx.clock(), {
        ...(heldSeats ? { heldSeats } : {}),
        ...(storeReadDue ? { storeReadDue } : {}),
      }),
    sweepSections: ({ eventId, now, skip }) => sweepEventSections(ctx, eventId, now ?? ctx.clock(), skip),
  };
}
