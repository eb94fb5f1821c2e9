import { createHash } from "node:crypto";

/**
 * Every key string of the inventory, built here and nowhere else (docs/data-model.md lists them
 * with their access patterns). Every key starts with `EVT#<eventId>`, so one on-sale never
 * touches another's partitions, and an id never contains `#` (ids are checked before they get
 * here), so no key of one entity can spell a key of another.
 */

/**
 * Sweeper shards: a seat's (and an area's) sweep job. The seats of a shard are found in the seat
 * map and the sections (src/inventory/sweep.ts); for events made before issue 30 item 2 also in
 * their shard's GSI2 expiry partition.
 */
export const SWEEP_SHARDS = 16;

/**
 * Shards of an event's purchases index partition (GSI1 `EVT#<e>#PURCHASES#<n>`) and of its two
 * outbox partitions (GSI2 `EVT#<e>#OUTBOX#UNSENT#<n>`, `#UNACKED#<n>`), `n = fnv1a(purchaseId) mod
 * PURCHASE_SHARDS`. A sale writes 3 units to its purchases shard and 2 to each outbox shard, so 16
 * shards of 1,000 write units/s carry about 16,000 / 3 = 5,300 sales/s per event (docs/data-model.md,
 * docs/scaling.md). Readers query every shard.
 */
export const PURCHASE_SHARDS = 16;

/**
 * A general-admission area's stock is spread over counter items (`generalAdmission(e, a, k)`):
 * one per GA_PLACES_PER_COUNTER places, at most GA_MAX_COUNTERS. A counter takes 2 write units
 * per hold (transactional) and 2 per confirmation, so at 1,000 units/s one counter carries about
 * 250 places/s; 16 counters about 4,000 places/s per area (docs/data-model.md, docs/scaling.md).
 */
export const GA_PLACES_PER_COUNTER = 250;
export const GA_MAX_COUNTERS = 16;

/** How many counters an area of `capacity` places has (1 up to GA_PLACES_PER_COUNTER places). */
export function gaCounters(capacity: number): number {
  return Math.min(GA_MAX_COUNTERS, Math.max(1, Math.ceil(capacity / GA_PLACES_PER_COUNTER)));
}

/** The places counter `k` of an area starts with: an even split, the remainder to the first ones. */
export function gaCounterCapacity(capacity: number, k: number): number {
  const n = gaCounters(capacity);
  return Math.floor(capacity / n) + (k < capacity % n ? 1 : 0);
}

/** Ids of events, sections, rows and general-admission areas (API.md). */
export const ID_PATTERN = /^[A-Za-z0-9_]{1,32}$/;
/** Purchase ids come from the caller (the saga derives them from the Idempotency-Key). */
export const PURCHASE_ID_PATTERN = /^[A-Za-z0-9_-]{1,128}$/;
/** Hold ids are ours: the fan's key hash (32 lowercase hex digits) and 16 random ones (holds.ts). */
export const HOLD_ID_PATTERN = /^[0-9a-f]{48}$/;

/** Rows and seat numbers are 1..MAX_ROW_OR_NUMBER, zero-padded in sort keys for natural order. */
export const MAX_ROW_OR_NUMBER = 99_999;
const PAD = 5;

export interface SeatRef {
  sectionId: string;
  row: number;
  number: number;
}

/** `A-12-7`: no leading zeros, so a seat has exactly one id and one key. */
const SEAT_ID = /^([A-Za-z0-9_]{1,32})-([1-9][0-9]{0,4})-([1-9][0-9]{0,4})$/;

export function parseSeatId(seatId: string): SeatRef | null {
  const m = SEAT_ID.exec(seatId);
  if (!m) return null;
  return { sectionId: m[1]!, row: Number(m[2]), number: Number(m[3]) };
}

export function seatIdOf(ref: SeatRef): string {
  return `${ref.sectionId}-${ref.row}-${ref.number}`;
}

const pad = (n: number): string => String(n).padStart(PAD, "0");
const pad2 = (n: number): string => String(n).padStart(2, "0");

/**
 * A fan id comes from the access token and may contain anything (`#` included), so it never goes
 * into a key in clear: the fan's partition is named by the first 32 hex digits (128 bits) of its
 * SHA-256, which no fan id can choose to collide with another's and which cannot spell a key of
 * another entity. The clear id is an attribute of the item.
 */
export function fanKeyHash(fanId: string): string {
  return createHash("sha256").update(fanId, "utf8").digest("hex").slice(0, 32);
}

export interface ItemKey {
  PK: string;
  SK: string;
}

/** The failure reason of a purchase taken out of `pending` because its charge must be refunded. */
export const REFUND_DUE = "refund_due";

export const keys = {
  event: (eventId: string): ItemKey => ({ PK: `EVT#${eventId}`, SK: "EVENT" }),
  /**
   * GSI1 partition of every event item, sorted by `<onSaleAt ISO>#<eventId>`: the one key not
   * under an event's prefix, read only at startup (which events' background jobs to arm), never
   * on a request path, and written once per PUT.
   */
  eventsPartition: "EVENTS",
  eventSortKey: (onSaleAtIso: string, eventId: string): string => `${onSaleAtIso}#${eventId}`,

  sectionPartition: (eventId: string, sectionId: string): string => `EVT#${eventId}#SEC#${sectionId}`,
  seat: (eventId: string, ref: SeatRef): ItemKey => ({
    PK: keys.sectionPartition(eventId, ref.sectionId),
    SK: `SEAT#${pad(ref.row)}#${pad(ref.number)}`,
  }),
  /** GSI1 partition of a section's available seats (sparse: only available seats carry it). */
  availableSeatsPartition: (eventId: string, sectionId: string): string => `EVT#${eventId}#SEC#${sectionId}#AVAILABLE`,

  /**
   * Counter `k` of a general-admission area (gaCounters); counter 0 has the key an area had when
   * it was one item, so an area of up to GA_PLACES_PER_COUNTER places is laid out as before.
   */
  generalAdmission: (eventId: string, areaId: string, k = 0): ItemKey => ({
    PK: k === 0 ? `EVT#${eventId}#GA#${areaId}` : `EVT#${eventId}#GA#${areaId}#${pad2(k)}`,
    SK: "GA",
  }),

  hold: (eventId: string, holdId: string): ItemKey => ({ PK: `EVT#${eventId}#HOLD#${holdId}`, SK: "HOLD" }),

  /** The seats one fan holds and has bought at one event (the maxSeatsPerFan ledger). */
  fan: (eventId: string, fanId: string): ItemKey => keys.fanByHash(eventId, fanKeyHash(fanId)),
  /** The same ledger named by its hash (the first 32 hex digits of a hold id, holds.ts). */
  fanByHash: (eventId: string, hash: string): ItemKey => ({ PK: `EVT#${eventId}#FAN#${hash}`, SK: "FAN" }),

  purchase: (eventId: string, purchaseId: string): ItemKey => ({
    PK: `EVT#${eventId}#PURCHASE#${purchaseId}`,
    SK: "PURCHASE",
  }),

  /** The outbox record of a purchase is the purchase item itself (src/inventory/outbox.ts). */
  outbox: (eventId: string, purchaseId: string): ItemKey => keys.purchase(eventId, purchaseId),
  /** GSI2 partition of an event's unsent outbox records (sparse: they leave it once published). */
  unsentOutboxPartition: (eventId: string, shard: number): string => `EVT#${eventId}#OUTBOX#UNSENT#${pad2(shard)}`,
  /**
   * GSI2 partition of an event's published outbox records not yet acknowledged by a consumer,
   * sorted by when each is next due for a check (`expirySortKey(checkAt, purchaseId)`).
   */
  unacknowledgedOutboxPartition: (eventId: string, shard: number): string =>
    `EVT#${eventId}#OUTBOX#UNACKED#${pad2(shard)}`,
  /**
   * GSI1 partition of every purchase of an event, sorted by `<status>#<purchaseId>` so one Query
   * lists the purchases in one state (the reconciler's pending ones, the audit's all).
   */
  purchasesPartition: (eventId: string, shard: number): string => `EVT#${eventId}#PURCHASES#${pad2(shard)}`,
  purchaseSortKey: (status: string, purchaseId: string): string => `${status}#${purchaseId}`,
  /**
   * A failed purchase whose refund is under way sorts apart inside `failed#` (`failed#refund_due#<id>`;
   * purchase ids have no '#'), so the reconcile sweep finds those without reading every decline.
   */
  refundDueSortKey: (purchaseId: string): string => `failed#${REFUND_DUE}#${purchaseId}`,

  /**
   * GSI3 partition (KEYS_ONLY) of an event's open purchases: pending, confirmed and not yet
   * acknowledged, or failed with a refund under way. Entered when the purchase is created, left
   * at its acknowledgement (or when it fails or is refunded), its key never changing in between,
   * so a sale costs 2 index write units here. The readers (reconciler, outbox publisher, counts,
   * audit) read the items they find by key. Events created before GSI3 (no `purchasesIndex` on
   * the event item) also keep their purchases in GSI1 and their outbox in GSI2, above.
   */
  openPurchasesPartition: (eventId: string, shard: number): string => `EVT#${eventId}#OPEN#${pad2(shard)}`,
  openPurchaseSortKey: (createdAtIso: string, purchaseId: string): string => `${createdAtIso}#${purchaseId}`,
  /**
   * GSI2 partition of the confirmed general-admission holds whose first counter is `k` (sort key:
   * the purchase id), one per counter as the expiry partitions are, so an area of 16 counters
   * takes 16,000 purchases/s here: a confirmed purchase of places is found here, as one of seats
   * is found from its sold seats.
   */
  soldAdmissionsPartition: (eventId: string, areaId: string, k = 0): string =>
    k === 0 ? `EVT#${eventId}#GASOLD#${areaId}` : `EVT#${eventId}#GASOLD#${areaId}#${pad2(k)}`,
  /** Failed and refunded purchases of an event, counted (the console's counts; no index has them). */
  purchaseCounts: (eventId: string): ItemKey => ({ PK: `EVT#${eventId}#PURCHASES`, SK: "COUNT" }),

  /**
   * GSI2 partition of held seats of one sweeper shard, sorted by expiry: written by seat holds
   * before issue 30 item 2 only (a hold writes no index entry since); read by the sweeps of events
   * without `seatExpiries`.
   */
  heldSeatsPartition: (eventId: string, shard: number): string => `EVT#${eventId}#EXP#${pad2(shard)}`,
  /**
   * GSI2 partition of the general-admission holds that took places from counter `k` of an area
   * (their first counter), sorted by expiry.
   */
  heldAdmissionsPartition: (eventId: string, areaId: string, k = 0): string =>
    k === 0 ? `EVT#${eventId}#GAEXP#${areaId}` : `EVT#${eventId}#GAEXP#${areaId}#${pad2(k)}`,
} as const;

/**
 * Sort key of GSI2: the expiry as a fixed-width ISO string first, so `GSI2SK < expiryBound(now)`
 * selects exactly the entries whose expiry is at or before `now`.
 */
export function expirySortKey(expiresAtMs: number, id: string): string {
  return `${new Date(expiresAtMs).toISOString()}#${id}`;
}

/** Upper bound (exclusive) for GSI2SK of entries expired at `nowMs`: `~` sorts after `#`. */
export function expiryBound(nowMs: number): string {
  return `${new Date(nowMs).toISOString()}~`;
}

/** FNV-1a, so an id always lands in the same shard on every instance and every run. */
function fnv1a(id: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < id.length; i++) {
    h ^= id.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

/** The sweeper shard of a seat (or of an area's general-admission holds). */
export function shardOf(id: string): number {
  return fnv1a(id) % SWEEP_SHARDS;
}

/** The purchases-index and outbox shard of a purchase (0..PURCHASE_SHARDS-1). */
export function purchaseShard(purchaseId: string): number {
  return fnv1a(purchaseId) % PURCHASE_SHARDS;
}

/** 0..PURCHASE_SHARDS-1: every shard a reader of the purchases index or the outbox queries. */
export const PURCHASE_SHARD_LIST: readonly number[] = Array.from({ length: PURCHASE_SHARDS }, (_, i) => i);
