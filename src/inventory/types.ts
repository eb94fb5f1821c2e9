/**
 * The inventory's domain types and outcomes. A lost race, a stale hold or an unknown id is an
 * expected outcome, returned as a value (`{ok: false, reason}`); only a store that cannot answer
 * throws (InventoryUnavailableError, a 503 for the gateway). No SDK type appears here.
 */
import type { DrandChain } from "../lottery/drand.js";
import type { FanIdMode } from "../waiting-room/fan-ids.js";

export type SeatStatus = "available" | "held" | "sold";

/** Every inventory call names its event first: all of an event's items share its key prefix. */
export interface EventRef {
  eventId: string;
}

export interface SectionInput {
  id: string;
  tier: string;
  /** Minor units (cents) per seat. */
  price: number;
  rows: number;
  seatsPerRow: number;
}

export interface GeneralAdmissionInput {
  id: string;
  tier: string;
  price: number;
  capacity: number;
}

export interface WaitingRoomSettings {
  admitPerSecond: number;
  maxActive: number;
  sessionSeconds: number;
  /** The drand chain whose round is the lottery's beacon (docs/waiting-room.md, "The beacon"). */
  drand?: DrandChain | undefined;
  /** Who names the fans (src/waiting-room/fan-ids.ts); absent: `any`. */
  fanIds?: FanIdMode | undefined;
}

/** The body of `PUT /v1/admin/events/{eventId}` (API.md). */
export interface EventInput {
  name: string;
  /** ISO-8601 UTC. */
  onSaleAt: string;
  holdSeconds: number;
  maxSeatsPerFan: number;
  sections: SectionInput[];
  generalAdmission: GeneralAdmissionInput[];
  waitingRoom: WaitingRoomSettings;
}

export interface EventDefinition extends EventInput {
  eventId: string;
  /** Increases with every replacement. */
  version: number;
  /** False while the seats of this version are being written; holds are refused meanwhile. */
  layoutComplete: boolean;
  totalSeats: number;
  createdAt: string;
  updatedAt: string;
  /**
   * The waiting-room settings an operator set after the PUT (PATCH .../waiting-room), kept so
   * that a room Redis lost is restored with them, not with the PUT's. Absent until a change.
   */
  roomSettings?: OperatorRoomSettings;
  /** When the operator closed the sale (POST .../close): holds are refused from then on. */
  closedAt?: string;
  /**
   * When a closed event's remaining work was done and every job of it removed from Redis
   * (src/workers/event-jobs.ts): nothing arms it any more.
   */
  jobsEndedAt?: string;
  /**
   * An event created before the open-purchases index (GSI3): its purchases may also be in GSI1
   * (by status) and its outbox records in GSI2, and its readers query those as well.
   */
  legacyPurchaseIndexes?: true;
}

export interface OperatorRoomSettings {
  admitPerSecond: number;
  maxActive: number;
  sessionSeconds: number;
  abandonSeconds: number;
  paused: boolean;
  /** The sale was closed (close-sale): no new places, no admissions; absent: false. */
  closed?: boolean;
  /** Proof-of-work cost on join (docs/waiting-room.md "Keeping bots out"); absent: 0. */
  powBits?: number;
  /** Joins need an operator-signed invite; absent: false. */
  invites?: boolean;
  /** The admission loop's settings (src/waiting-room/types.ts AutoAdmitSettings); absent: off. */
  autoAdmit?: {
    enabled: boolean;
    minPerSecond: number;
    maxPerSecond: number;
    targetClaimP99Ms: number;
    maxThrottlesPerSecond: number;
  };
  /**
   * The version the waiting room gave these settings (update-settings-9.lua): a save with a
   * version not above the stored one changes nothing. Absent on items kept before versions.
   */
  version?: number;
  updatedAt: string;
}

export interface CreateEventProgress {
  /** Seat and area items written so far (puts). */
  written: number;
  /** Seat and area items of a replaced layout deleted so far. */
  deleted: number;
  /** Puts plus deletes this call has to do. */
  total: number;
}

export interface CreateEventOptions {
  onProgress?: (progress: CreateEventProgress) => void;
  /** BatchWriteItem requests in flight at once (default 16). */
  concurrency?: number;
}

export type CreateEventResult =
  | {
      ok: true;
      created: boolean;
      event: EventDefinition;
      seatsWritten: number;
      itemsDeleted: number;
      /**
       * Seats and areas of the replaced layout left as they were because a fan holds or has bought
       * them (a layout write never overwrites those). Empty unless a replacement raced a sale.
       */
      kept: { seats: string[]; areas: string[] };
    }
  | { ok: false; reason: "invalid_request"; issues: string[] }
  /** The stored event has gone on sale; it can no longer be replaced. */
  | { ok: false; reason: "on_sale"; event: EventDefinition }
  /**
   * The stored event goes on sale too soon to be replaced: some gateway may be selling it before
   * this write could land (on-sale minus the event cache's life minus the request budget).
   */
  | { ok: false; reason: "replacement_closed"; event: EventDefinition; replaceableUntil: number }
  /** Another replacement of the same event is running (or won the race). */
  | { ok: false; reason: "conflict" };

export type HoldStatus = "held" | "expired" | "released" | "confirmed";

export interface GeneralAdmissionQuantity {
  areaId: string;
  quantity: number;
}

export interface Hold {
  holdId: string;
  eventId: string;
  fanId: string;
  kind: "seats" | "general_admission";
  /** Seat ids; empty for a general-admission hold. */
  seats: string[];
  generalAdmission?: GeneralAdmissionQuantity;
  amount: number;
  createdAt: string;
  expiresAt: string;
  /** `expired` when a held hold's expiry has passed, whether or not the sweeper has run. */
  status: HoldStatus;
  purchaseId?: string;
}

export type HoldResult =
  | { ok: true; hold: Hold }
  /** Lost the race: `seats` names every requested seat that someone else holds or bought. */
  | { ok: false; reason: "seat_unavailable"; seats: string[] }
  /** Fewer general-admission places left than asked for. */
  | { ok: false; reason: "insufficient_quantity"; available: number }
  | { ok: false; reason: "not_found"; what: "event" | "seat" | "area" | "section" | "tier"; seats?: string[] }
  /**
   * Best available: no `quantity` seats together (or over two rows, when allowed) are free where
   * the request allows, or every proposal was lost to other fans. `available`: the free seats left
   * there, as far as the map knew.
   */
  | { ok: false; reason: "no_block_available"; available: number }
  /** Before onSaleAt, or while the event's seats are being (re)written. */
  | { ok: false; reason: "not_on_sale" }
  /**
   * The request alone is larger than the limit, or the fan's live held plus bought seats and
   * places at this event would pass it (`limit`: the event's maxSeatsPerFan, or
   * MAX_SEATS_PER_HOLD for one request). Nothing was written.
   */
  | { ok: false; reason: "seat_limit_exceeded"; limit: number }
  | { ok: false; reason: "invalid_request"; message: string }
  /** Other transactions kept colliding on the same items; nothing was held. Retry later. */
  | { ok: false; reason: "contention" };

export type ReleaseResult =
  /**
   * `releasedSeats`: the seats this call turned available (for the seat map); `placesReturned`:
   * the general-admission places it gave back. Both empty (0) on a repeat, or when the sweep
   * returned the hold first: each seat and place is counted by exactly one caller.
   */
  | { ok: true; hold: Hold; releasedSeats: string[]; placesReturned: number }
  | { ok: false; reason: "not_found" }
  | { ok: false; reason: "hold_not_owned" }
  /** The hold was bought; sold seats never go back. */
  | { ok: false; reason: "hold_confirmed" };

export type PurchaseStatus = "pending" | "confirmed" | "failed" | "refunded";

export interface Purchase {
  purchaseId: string;
  eventId: string;
  holdId: string;
  fanId: string;
  status: PurchaseStatus;
  seats: string[];
  generalAdmission?: GeneralAdmissionQuantity;
  amount: number;
  createdAt: string;
  confirmedAt?: string;
  failedAt?: string;
  refundedAt?: string;
  failureReason?: string;
  /** Fingerprint of the request that created it (the saga's idempotency check). */
  fingerprint?: string;
  /** The payment provider's charge, once known. */
  chargeId?: string;
  /** When the latest charge attempt started (startCharge); the reconciler ages a purchase from it. */
  chargeStartedAt?: string;
  /** Charge attempts started under the purchase's key (a replay starts another). */
  chargeAttempts?: number;
  /**
   * The waiting-room session that made it: whichever path confirms the purchase (the request, the
   * webhook, the reconciler) ends that session, so its slot goes to the next fan.
   */
  sessionId?: string;
}

/** Why a hold cannot be bought (any of them maps to 409 `hold_expired` or `hold_not_owned`). */
export type HoldUnusableReason = "hold_not_owned" | "hold_expired" | "hold_released" | "hold_confirmed";

export type PendingPurchaseResult =
  | { ok: true; purchase: Purchase; created: boolean }
  | { ok: false; reason: "not_found"; what: "hold" }
  | { ok: false; reason: HoldUnusableReason }
  /** The purchase id exists for another hold or fan. */
  | { ok: false; reason: "purchase_conflict" }
  | { ok: false; reason: "invalid_request"; message: string };

export type ConfirmResult =
  /** `alreadyConfirmed`: a repeat; the purchase is the one the first confirmation stored. */
  | { ok: true; purchase: Purchase; alreadyConfirmed: boolean }
  | { ok: false; reason: "not_found"; what: "hold" | "purchase" }
  | { ok: false; reason: HoldUnusableReason; seats?: string[] }
  | { ok: false; reason: "purchase_conflict" }
  | { ok: false; reason: "purchase_not_pending"; status: PurchaseStatus }
  | { ok: false; reason: "contention" };

export type ChargeStartResult =
  /** `attempt`: how many attempts have started, this one included. */
  | { ok: true; purchase: Purchase; attempt: number }
  | { ok: false; reason: "not_found" }
  /** Confirmed, failed or refunded meanwhile: nothing may be charged now. */
  | { ok: false; reason: "not_pending"; purchase: Purchase };

export type PurchaseTransitionResult =
  | { ok: true; purchase: Purchase }
  | { ok: false; reason: "not_found" }
  | { ok: false; reason: "invalid_transition"; status: PurchaseStatus };

/**
 * What a cache knows of the held seats of an event's sections (the seat map in Redis,
 * src/seatmap/cache.ts): for each section it has, held seat id -> its hold's expiry (epoch ms); a
 * section it does not have is absent from the answer. The sweeper's candidates, never more: a seat
 * is reset only by a condition on its item (src/inventory/sweep.ts).
 */
export interface HeldSeatsCache {
  heldUntil(eventId: string, sectionIds: readonly string[]): Promise<ReadonlyMap<string, ReadonlyMap<string, number>>>;
}

export interface SweepResult {
  /** Expired candidates found: the seat map's, the sections' reads', the GSI2 queries'. */
  examined: number;
  seatsReleased: number;
  /** Ids of the seats this pass turned available, for the seat map. */
  releasedSeats: string[];
  generalAdmissionHoldsExpired: number;
  generalAdmissionQuantityReturned: number;
  /**
   * Sections this pass read from DynamoDB and found every seat of sold: none of them can ever
   * be held again (a sold seat never goes back, and a layout is fixed once on sale), so a caller
   * that remembers them need not read them again.
   */
  soldOutSections?: string[];
}

export interface SeatView {
  id: string;
  /** Effective status: a held seat whose hold has expired reads `available`. */
  status: SeatStatus;
  tier: string;
  price: number;
  holdId?: string;
  holderId?: string;
  holdExpiresAt?: string;
  /**
   * A hold that has passed and is not swept yet (the item still says held): its expiry. The status
   * reads `available`; this is what names the seat to the sweep (a seat-map rebuild keeps it).
   */
  lapsedHoldExpiresAt?: string;
  purchaseId?: string;
}

export interface SeatPage {
  seats: SeatView[];
  /** Opaque; pass back as `cursor` for the next page. Absent on the last page. */
  nextCursor?: string;
}

export interface SectionCounts {
  sectionId: string;
  total: number;
  /** Seats in the sparse available index (GSI1, eventually consistent). */
  available: number;
  /** Held with an unexpired hold. */
  held: number;
  /** Stored as held, but the hold has expired: the next fan may take them; the sweeper resets them. */
  expiredHolds: number;
  sold: number;
}

export interface GeneralAdmissionCounts {
  areaId: string;
  capacity: number;
  available: number;
  /** Includes expired holds the sweeper has not returned yet. */
  held: number;
  sold: number;
}

export interface EventCounts {
  eventId: string;
  seats: { total: number; available: number; held: number; expiredHolds: number; sold: number };
  sections: SectionCounts[];
  generalAdmission: Record<string, GeneralAdmissionCounts>;
  /**
   * Distinct purchases the sold seats name (read with the seats, at no extra unit): the confirmed
   * purchases of seats, for the purchase counts, no index of purchases by status being kept.
   */
  soldSeatPurchases?: number;
}

/**
 * unsent (confirm wrote it) -> published (its job is on the bookings queue) -> acknowledged (a
 * consumer finished it). Only acknowledged says a booking reached an integrator: a published job
 * can still be lost with Redis' data.
 */
export type OutboxState = "unsent" | "published" | "acknowledged";

export interface OutboxRecord {
  outboxId: string;
  eventId: string;
  type: "BookingConfirmed";
  purchaseId: string;
  createdAt: string;
  state: OutboxState;
  publishedAt?: string;
  acknowledgedAt?: string;
  /** Checks of the published record that found it not acknowledged yet. */
  checks: number;
  /** Times a check found the job gone from Redis and added it again. */
  republished: number;
  /** A published record: when its next check is due (ISO). */
  nextCheckAt?: string;
  /**
   * A record of the layout before GSI3 (its purchase is in GSI1): it moves through GSI2's outbox
   * partitions as it always did.
   */
  legacyIndex?: true;
  payload: {
    purchaseId: string;
    holdId: string;
    fanId: string;
    seats: string[];
    generalAdmission?: GeneralAdmissionQuantity;
    amount: number;
    confirmedAt: string;
  };
}

/**
 * The store could not answer (throttled, unreachable, timed out). After a timeout the write may or
 * may not have happened: every operation here is safe to repeat, so the caller retries.
 */
export class InventoryUnavailableError extends Error {
  override name = "InventoryUnavailableError";
}

/** Epoch milliseconds; injectable so tests can move time. */
export type Clock = () => number;
