/**
 * The authoritative seat inventory on DynamoDB. `createInventory({client, tableName})` returns the
 * interface the gateway, the payment saga and the workers use; docs/data-model.md explains the
 * keys and why each operation is safe under any amount of concurrency.
 */
import type { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import {
  createEvent,
  createEventCache,
  DEFAULT_REQUEST_BUDGET_MS,
  EVENT_CACHE_MS,
  getEvent,
  saveRoomSettings,
} from "./events.js";
import { getHold, hold, holdGeneralAdmission, release } from "./holds.js";
import {
  confirm,
  countPurchases,
  createPendingPurchase,
  getPurchase,
  listPurchases,
  recordCharge,
  markPurchaseFailed,
  markPurchaseRefunded,
  markRefundDue,
  startCharge,
} from "./purchases.js";
import {
  acknowledgeOutbox,
  deferOutboxCheck,
  getOutboxRecord,
  listDueUnacknowledgedOutbox,
  listUnsentOutbox,
  markOutboxPublished,
} from "./outbox.js";
import { countAvailable, eventCounts, getGeneralAdmission, listSectionSeats, type SeatPageOptions } from "./reads.js";
import { createCtx, guard } from "./store.js";
import { sweepExpired } from "./sweep.js";
import type {
  ChargeStartResult,
  Clock,
  ConfirmResult,
  CreateEventOptions,
  CreateEventResult,
  EventCounts,
  EventDefinition,
  EventInput,
  GeneralAdmissionCounts,
  Hold,
  HoldResult,
  OperatorRoomSettings,
  OutboxRecord,
  PendingPurchaseResult,
  Purchase,
  PurchaseStatus,
  PurchaseTransitionResult,
  ReleaseResult,
  SeatPage,
  SweepResult,
} from "./types.js";

export interface InventoryOptions {
  client: DynamoDBClient;
  tableName: string;
  /** Epoch ms; defaults to Date.now. Every expiry decision uses it. */
  clock?: Clock;
  /** How long an on-sale event's layout is cached in this process (default 60 s; 0: never). */
  eventCacheMs?: number;
  /**
   * The longest one DynamoDB request may take, every attempt counted (default 5 s x 3). With the
   * event cache's life it sets how long before its on-sale an event can still be replaced.
   */
  requestBudgetMs?: number;
}

export interface Inventory {
  /** Creates an event and writes all its seats, or replaces one that is not on sale yet. */
  createEvent(eventId: string, input: EventInput, options?: CreateEventOptions): Promise<CreateEventResult>;
  /** A consistent read of the event item (the waiting room's restore, the seat-map loader, audits). */
  getEvent(eventId: string): Promise<EventDefinition | null>;
  /**
   * The event from this process's one event cache (events.ts): kept 60 s once on sale (it can no
   * longer change), 2 s before (a replacement elsewhere shows within that; here, at once).
   */
  cachedEvent(eventId: string): Promise<EventDefinition | null>;
  /** Keeps the operator's waiting-room settings on the event (restored with them after a Redis loss). */
  saveRoomSettings(eventId: string, settings: Omit<OperatorRoomSettings, "updatedAt">): Promise<boolean>;

  /**
   * All or nothing, one transaction (the seats, the hold record, the fan's ledger). Refused with
   * `seat_limit_exceeded` when the fan's held and bought seats at this event plus these would pass
   * maxSeatsPerFan, however many holds the fan has in flight (limits.ts), and with
   * `invalid_request` when a seat is named twice. `holdSeconds`: default the event's.
   */
  hold(eventId: string, fanId: string, seatIds: string[], holdSeconds?: number): Promise<HoldResult>;
  holdGeneralAdmission(
    eventId: string,
    fanId: string,
    areaId: string,
    quantity: number,
    holdSeconds?: number,
  ): Promise<HoldResult>;
  /** Idempotent. Seats go back only while this hold still holds them. */
  release(eventId: string, holdId: string, fanId: string): Promise<ReleaseResult>;
  getHold(eventId: string, holdId: string): Promise<Hold | null>;

  /**
   * Before charging: the `pending` purchase, found again by a retry with the same purchase id.
   * `fingerprint` (of the request) makes a retry with another body a `purchase_conflict`.
   */
  createPendingPurchase(
    eventId: string,
    holdId: string,
    fanId: string,
    purchaseId: string,
    fingerprint?: string,
  ): Promise<PendingPurchaseResult>;
  /** After the charge: one transaction; a repeat returns the first result. */
  confirm(eventId: string, holdId: string, fanId: string, purchaseId: string): Promise<ConfirmResult>;
  /** Right before a charge: still pending (conditional); records the attempt and when it started. */
  startCharge(eventId: string, purchaseId: string): Promise<ChargeStartResult>;
  /** pending -> failed; `ifAttempts`: only if exactly that many charge attempts have started. */
  markPurchaseFailed(
    eventId: string,
    purchaseId: string,
    reason?: string,
    options?: { ifAttempts?: number },
  ): Promise<PurchaseTransitionResult>;
  /** pending | failed -> failed (refund_due): a charge to give back was found. */
  markRefundDue(eventId: string, purchaseId: string, chargeId: string): Promise<PurchaseTransitionResult>;
  markPurchaseRefunded(
    eventId: string,
    purchaseId: string,
    reason?: string,
    chargeId?: string,
  ): Promise<PurchaseTransitionResult>;
  getPurchase(eventId: string, purchaseId: string): Promise<Purchase | null>;
  recordCharge(eventId: string, purchaseId: string, chargeId: string): Promise<boolean>;
  countPurchases(eventId: string): Promise<Record<PurchaseStatus, number>>;
  listPurchases(
    eventId: string,
    /** `refundDue`: only failed purchases whose refund is under way (reason refund_due). */
    options?: { status?: PurchaseStatus; refundDue?: boolean; cursor?: string; limit?: number },
  ): Promise<{ purchases: Purchase[]; nextCursor?: string }>;

  /** Resets expired holds of one shard (0..SWEEP_SHARDS-1); `now` defaults to the clock. */
  sweepExpired(eventId: string, shard: number, now?: number): Promise<SweepResult>;

  /** null for an unknown event or section, or a malformed cursor. */
  listSectionSeats(eventId: string, sectionId: string, options?: SeatPageOptions): Promise<SeatPage | null>;
  countAvailable(eventId: string, sectionId: string): Promise<number>;
  eventCounts(eventId: string): Promise<EventCounts | null>;
  getGeneralAdmission(eventId: string, areaId: string): Promise<GeneralAdmissionCounts | null>;

  /** The BookingConfirmed outbox (./outbox.ts: unsent -> published -> acknowledged). */
  listUnsentOutbox(eventId: string, limit?: number): Promise<OutboxRecord[]>;
  /** Published, not acknowledged, due for a check at the clock's now (most overdue first). */
  listDueUnacknowledgedOutbox(eventId: string, limit?: number): Promise<OutboxRecord[]>;
  getOutboxRecord(eventId: string, purchaseId: string): Promise<OutboxRecord | null>;
  markOutboxPublished(eventId: string, purchaseId: string, checkAfterMs: number): Promise<boolean>;
  deferOutboxCheck(eventId: string, purchaseId: string, checkAfterMs: number, republished: boolean): Promise<boolean>;
  /** True exactly once per record. */
  acknowledgeOutbox(eventId: string, purchaseId: string): Promise<boolean>;
}

export function createInventory(options: InventoryOptions): Inventory {
  const ctx = createCtx(options.client, options.tableName, options.clock ?? Date.now);
  const events = createEventCache(ctx, options.eventCacheMs);
  const loadForSale = events.forSale;
  // Every gateway caches an on-sale event this long (the default unless a test says otherwise).
  const replaceGuardMs =
    Math.max(options.eventCacheMs ?? 0, EVENT_CACHE_MS) + (options.requestBudgetMs ?? DEFAULT_REQUEST_BUDGET_MS);
  return {
    createEvent: async (eventId, input, opts) => {
      try {
        return await createEvent(ctx, eventId, input, opts, replaceGuardMs);
      } finally {
        // A version read while the layout was written (or before) must not outlive the write here.
        events.forget(eventId);
      }
    },
    getEvent: (eventId) => getEvent(ctx, eventId),
    cachedEvent: (eventId) => guard("cachedEvent", async () => (await events.forSale(eventId))?.event ?? null),
    saveRoomSettings: (eventId, settings) => saveRoomSettings(ctx, eventId, settings),
    hold: (eventId, fanId, seatIds, holdSeconds) => hold(ctx, loadForSale, eventId, fanId, seatIds, holdSeconds),
    holdGeneralAdmission: (eventId, fanId, areaId, quantity, holdSeconds) =>
      holdGeneralAdmission(ctx, loadForSale, eventId, fanId, areaId, quantity, holdSeconds),
    release: (eventId, holdId, fanId) => release(ctx, eventId, holdId, fanId),
    getHold: (eventId, holdId) => getHold(ctx, eventId, holdId),
    createPendingPurchase: (eventId, holdId, fanId, purchaseId, fingerprint) =>
      createPendingPurchase(ctx, eventId, holdId, fanId, purchaseId, fingerprint),
    confirm: (eventId, holdId, fanId, purchaseId) => confirm(ctx, eventId, holdId, fanId, purchaseId),
    startCharge: (eventId, purchaseId) => startCharge(ctx, eventId, purchaseId),
    markPurchaseFailed: (eventId, purchaseId, reason, options) =>
      markPurchaseFailed(ctx, eventId, purchaseId, reason, options),
    markRefundDue: (eventId, purchaseId, chargeId) => markRefundDue(ctx, eventId, purchaseId, chargeId),
    markPurchaseRefunded: (eventId, purchaseId, reason, chargeId) =>
      markPurchaseRefunded(ctx, eventId, purchaseId, reason, chargeId),
    getPurchase: (eventId, purchaseId) => getPurchase(ctx, eventId, purchaseId),
    recordCharge: (eventId, purchaseId, chargeId) => recordCharge(ctx, eventId, purchaseId, chargeId),
    listPurchases: (eventId, opts) => listPurchases(ctx, eventId, opts),
    countPurchases: (eventId) => countPurchases(ctx, eventId),
    sweepExpired: (eventId, shard, now) => sweepExpired(ctx, eventId, shard, now ?? ctx.clock()),
    listSectionSeats: (eventId, sectionId, opts) => listSectionSeats(ctx, eventId, sectionId, opts),
    countAvailable: (eventId, sectionId) => countAvailable(ctx, eventId, sectionId),
    eventCounts: (eventId) => eventCounts(ctx, eventId),
    getGeneralAdmission: (eventId, areaId) => getGeneralAdmission(ctx, eventId, areaId),
    listUnsentOutbox: (eventId, limit) => listUnsentOutbox(ctx, eventId, limit),
    listDueUnacknowledgedOutbox: (eventId, limit) => listDueUnacknowledgedOutbox(ctx, eventId, limit),
    getOutboxRecord: (eventId, purchaseId) => getOutboxRecord(ctx, eventId, purchaseId),
    markOutboxPublished: (eventId, purchaseId, checkAfterMs) =>
      markOutboxPublished(ctx, eventId, purchaseId, checkAfterMs),
    deferOutboxCheck: (eventId, purchaseId, checkAfterMs, republished) =>
      deferOutboxCheck(ctx, eventId, purchaseId, checkAfterMs, republished),
    acknowledgeOutbox: (eventId, purchaseId) => acknowledgeOutbox(ctx, eventId, purchaseId),
  };
}
