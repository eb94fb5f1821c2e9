/**
 * How many seats a fan may take: the one rule, decided here and nowhere else. The route's schema
 * bounds a request by MAX_SEATS_PER_FAN only as a coarse syntactic check (no event allows more);
 * the claim path asks `overLimit` once before it reads the fan's ledger (a request too big on its
 * own costs no read) and once with the ledger's count, inside the hold's retry loop (holds.ts).
 */

/** DynamoDB's limit on the actions of one TransactWriteItems. */
export const TRANSACTION_MAX_ITEMS = 100;

/**
 * A confirmation is one transaction: every seat, the hold, the purchase, the outbox record and the
 * fan's ledger, so a seat hold names at most this many seats. (A hold is every seat, the record and
 * the ledger.) A general-admission hold is one area item whatever its quantity: no such bound.
 */
export const MAX_SEATS_PER_HOLD = TRANSACTION_MAX_ITEMS - 4;

/** The largest `maxSeatsPerFan` an event may set, and so the most one request may ask for. */
export const MAX_SEATS_PER_FAN = 100;

export interface SeatLimitExceeded {
  ok: false;
  reason: "seat_limit_exceeded";
  /** The event's maxSeatsPerFan, or MAX_SEATS_PER_HOLD for one seat request larger than that. */
  limit: number;
}

/**
 * Refuses `asked` more seats (or general-admission places) for a fan who already counts `counted`
 * live held and bought ones at an event allowing `maxSeatsPerFan`; null when it is allowed.
 */
export function overLimit(
  maxSeatsPerFan: number,
  kind: "seats" | "general_admission",
  asked: number,
  counted = 0,
): SeatLimitExceeded | null {
  const single = kind === "seats" ? Math.min(maxSeatsPerFan, MAX_SEATS_PER_HOLD) : maxSeatsPerFan;
  if (asked > single) return { ok: false, reason: "seat_limit_exceeded", limit: single };
  if (counted + asked > maxSeatsPerFan) return { ok: false, reason: "seat_limit_exceeded", limit: maxSeatsPerFan };
  return null;
}
