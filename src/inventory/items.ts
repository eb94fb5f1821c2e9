/**
 * Stored items <-> domain values. Attribute names are listed in docs/data-model.md.
 */
import type { DrandChain } from "../lottery/drand.js";
import { type Item, num, optNum, optStr, str, strList } from "./store.js";
import type {
  EventDefinition,
  GeneralAdmissionInput,
  GeneralAdmissionQuantity,
  Hold,
  HoldStatus,
  OperatorRoomSettings,
  OutboxRecord,
  Purchase,
  PurchaseStatus,
  SeatStatus,
  SeatView,
  SectionInput,
  WaitingRoomSettings,
} from "./types.js";

export const iso = (ms: number): string => new Date(ms).toISOString();

export function toEvent(item: Item): EventDefinition {
  const sections = (Array.isArray(item.sections) ? item.sections : []) as Item[];
  const areas = (Array.isArray(item.generalAdmission) ? item.generalAdmission : []) as Item[];
  const room = (item.waitingRoom ?? {}) as Item;
  return {
    eventId: str(item, "eventId"),
    name: str(item, "name"),
    onSaleAt: str(item, "onSaleAt"),
    holdSeconds: num(item, "holdSeconds"),
    maxSeatsPerFan: num(item, "maxSeatsPerFan"),
    sections: sections.map(
      (s): SectionInput => ({
        id: str(s, "id"),
        tier: str(s, "tier"),
        price: num(s, "price"),
        rows: num(s, "rows"),
        seatsPerRow: num(s, "seatsPerRow"),
      }),
    ),
    generalAdmission: areas.map(
      (g): GeneralAdmissionInput => ({
        id: str(g, "id"),
        tier: str(g, "tier"),
        price: num(g, "price"),
        capacity: num(g, "capacity"),
      }),
    ),
    waitingRoom: {
      admitPerSecond: num(room, "admitPerSecond"),
      maxActive: num(room, "maxActive"),
      sessionSeconds: num(room, "sessionSeconds"),
      ...(room.drand && typeof room.drand === "object" ? { drand: room.drand as DrandChain } : {}),
      ...(room.fanIds === "issued" ? { fanIds: "issued" as const } : {}),
    } satisfies WaitingRoomSettings,
    version: num(item, "version"),
    layoutComplete: item.layoutComplete === true,
    totalSeats: num(item, "totalSeats"),
    createdAt: str(item, "createdAt"),
    updatedAt: str(item, "updatedAt"),
    ...(optStr(item, "closedAt") !== undefined ? { closedAt: str(item, "closedAt") } : {}),
    ...(optStr(item, "jobsEndedAt") !== undefined ? { jobsEndedAt: str(item, "jobsEndedAt") } : {}),
    ...(item.purchasesIndex !== "GSI3" ? { legacyPurchaseIndexes: true as const } : {}),
    ...(item.roomSettings && typeof item.roomSettings === "object"
      ? {
          roomSettings: {
            admitPerSecond: num(item.roomSettings as Item, "admitPerSecond"),
            maxActive: num(item.roomSettings as Item, "maxActive"),
            sessionSeconds: num(item.roomSettings as Item, "sessionSeconds"),
            abandonSeconds: num(item.roomSettings as Item, "abandonSeconds"),
            paused: (item.roomSettings as Item).paused === true,
            ...(typeof (item.roomSettings as Item).closed === "boolean"
              ? { closed: (item.roomSettings as Item).closed === true }
              : {}),
            ...(typeof (item.roomSettings as Item).powBits === "number"
              ? { powBits: num(item.roomSettings as Item, "powBits") }
              : {}),
            ...(typeof (item.roomSettings as Item).invites === "boolean"
              ? { invites: (item.roomSettings as Item).invites === true }
              : {}),
            ...autoAdmitOf((item.roomSettings as Item).autoAdmit),
            ...(typeof (item.roomSettings as Item).version === "number"
              ? { version: num(item.roomSettings as Item, "version") }
              : {}),
            updatedAt: str(item.roomSettings as Item, "updatedAt"),
          },
        }
      : {}),
  };
}

/** The admission loop's stored settings, when the item has them whole. */
function autoAdmitOf(value: unknown): Pick<OperatorRoomSettings, "autoAdmit"> {
  if (!value || typeof value !== "object") return {};
  const a = value as Item;
  const numbers = ["minPerSecond", "maxPerSecond", "targetClaimP99Ms", "maxThrottlesPerSecond"] as const;
  if (typeof a.enabled !== "boolean" || numbers.some((n) => typeof a[n] !== "number")) return {};
  return {
    autoAdmit: {
      enabled: a.enabled,
      minPerSecond: num(a, "minPerSecond"),
      maxPerSecond: num(a, "maxPerSecond"),
      targetClaimP99Ms: num(a, "targetClaimP99Ms"),
      maxThrottlesPerSecond: num(a, "maxThrottlesPerSecond"),
    },
  };
}

function gaOf(item: Item): GeneralAdmissionQuantity | undefined {
  const areaId = optStr(item, "areaId");
  const quantity = optNum(item, "quantity");
  return areaId !== undefined && quantity !== undefined ? { areaId, quantity } : undefined;
}

/** `now` turns a stored `held` whose expiry has passed into `expired`. */
export function toHold(item: Item, now: number): Hold {
  const stored = str(item, "status") as HoldStatus;
  const expiresAtMs = num(item, "expiresAt");
  const ga = gaOf(item);
  const purchaseId = optStr(item, "purchaseId");
  return {
    holdId: str(item, "holdId"),
    eventId: str(item, "eventId"),
    fanId: str(item, "fanId"),
    kind: ga ? "general_admission" : "seats",
    seats: strList(item, "seats"),
    ...(ga ? { generalAdmission: ga } : {}),
    amount: num(item, "amount"),
    createdAt: str(item, "createdAt"),
    expiresAt: iso(expiresAtMs),
    status: stored === "held" && expiresAtMs <= now ? "expired" : stored,
    ...(purchaseId !== undefined ? { purchaseId } : {}),
  };
}

export function toPurchase(item: Item): Purchase {
  const ga = gaOf(item);
  const attempts = optNum(item, "chargeAttempts");
  const optional = (
    name:
      | "confirmedAt"
      | "failedAt"
      | "refundedAt"
      | "failureReason"
      | "fingerprint"
      | "chargeId"
      | "chargeStartedAt"
      | "sessionId",
  ) => {
    const v = optStr(item, name);
    return v !== undefined ? { [name]: v } : {};
  };
  return {
    purchaseId: str(item, "purchaseId"),
    eventId: str(item, "eventId"),
    holdId: str(item, "holdId"),
    fanId: str(item, "fanId"),
    status: str(item, "status") as PurchaseStatus,
    seats: strList(item, "seats"),
    ...(ga ? { generalAdmission: ga } : {}),
    amount: num(item, "amount"),
    createdAt: str(item, "createdAt"),
    ...optional("confirmedAt"),
    ...optional("failedAt"),
    ...optional("refundedAt"),
    ...optional("failureReason"),
    ...optional("fingerprint"),
    ...optional("chargeId"),
    ...optional("chargeStartedAt"),
    ...optional("sessionId"),
    ...(attempts !== undefined ? { chargeAttempts: attempts } : {}),
  };
}

export function toSeatView(item: Item, now: number): SeatView {
  const stored = str(item, "status") as SeatStatus;
  const expiresAt = optNum(item, "holdExpiresAt");
  const expired = stored === "held" && expiresAt !== undefined && expiresAt <= now;
  const view: SeatView = {
    id: str(item, "seatId"),
    status: expired ? "available" : stored,
    tier: str(item, "tier"),
    price: num(item, "price"),
  };
  if (stored === "held" && !expired) {
    const holdId = optStr(item, "holdId");
    const holderId = optStr(item, "holderId");
    if (holdId !== undefined) view.holdId = holdId;
    if (holderId !== undefined) view.holderId = holderId;
    if (expiresAt !== undefined) view.holdExpiresAt = iso(expiresAt);
  }
  if (expired) view.lapsedHoldExpiresAt = iso(expiresAt);
  if (stored === "sold") {
    const purchaseId = optStr(item, "purchaseId");
    const holderId = optStr(item, "holderId");
    if (purchaseId !== undefined) view.purchaseId = purchaseId;
    if (holderId !== undefined) view.holderId = holderId;
  }
  return view;
}

/**
 * The outbox record of a purchase (its outbox attributes, src/inventory/outbox.ts), or null when
 * the purchase is not confirmed and so has none.
 */
export function toOutbox(item: Item): OutboxRecord | null {
  const state = item.outboxState;
  if (state !== "unsent" && state !== "published" && state !== "acknowledged") return null;
  const purchase = toPurchase(item);
  const publishedAt = optStr(item, "publishedAt");
  const acknowledgedAt = optStr(item, "acknowledgedAt");
  const confirmedAt = purchase.confirmedAt ?? str(item, "outboxCreatedAt");
  return {
    outboxId: `BookingConfirmed#${purchase.purchaseId}`,
    eventId: purchase.eventId,
    type: "BookingConfirmed",
    purchaseId: purchase.purchaseId,
    createdAt: optStr(item, "outboxCreatedAt") ?? confirmedAt,
    state,
    ...(publishedAt !== undefined ? { publishedAt } : {}),
    ...(acknowledgedAt !== undefined ? { acknowledgedAt } : {}),
    checks: optNum(item, "checks") ?? 0,
    republished: optNum(item, "republished") ?? 0,
    ...(optStr(item, "nextCheckAt") !== undefined ? { nextCheckAt: str(item, "nextCheckAt") } : {}),
    ...(item.GSI1PK !== undefined ? { legacyIndex: true as const } : {}),
    payload: {
      purchaseId: purchase.purchaseId,
      holdId: purchase.holdId,
      fanId: purchase.fanId,
      seats: purchase.seats,
      ...(purchase.generalAdmission ? { generalAdmission: purchase.generalAdmission } : {}),
      amount: purchase.amount,
      confirmedAt,
    },
  };
}
