/**
 * The audit's checks: one function per property the audit proves, each a pure function of what
 * was read (no I/O) that returns its own findings. `evaluateAudit` runs them in the order of
 * `AUDIT_CHECKS` (the report's order) and gathers what their findings name into the suspects the
 * re-read looks at again (audit.ts). docs/audit.md lists the checks.
 */
import {
  type EventDefinition,
  type GeneralAdmissionCounts,
  type Purchase,
  parseSeatId,
  REFUND_DUE,
  type SeatView,
} from "../inventory/index.js";
import type { ChargeRecord } from "../payments/simulated.js";

export const AUDIT_CHECKS = {
  seats_sold_once: "No seat sold twice",
  sold_seats_match_purchases: "Sold seats = seats of confirmed purchases",
  general_admission_bounds: "General admission within bounds",
  general_admission_sold: "GA sold = confirmed GA quantity",
  fans_within_limit: "No fan bought more than maxSeatsPerFan",
  captured_charges_confirmed: "Captured charges belong to confirmed purchases",
  refunds_match_purchases: "Refunds belong to refunded or failed purchases",
  confirmed_purchases_charged: "Confirmed purchases are charged",
  no_pending_purchases: "No purchase left pending",
} as const;

export type AuditCheckName = keyof typeof AUDIT_CHECKS;

export interface AuditOffender {
  /** A seat, purchase, charge, area or fan id. */
  id: string;
  problem: string;
}

export interface AuditCheck {
  name: AuditCheckName;
  title: string;
  /** `skip`: not checkable with what was given (the charge checks without a payment provider). */
  status: "pass" | "fail" | "skip";
  summary: string;
  /** At most `maxOffenders` of them; `offenderCount` is the full number. */
  offenders: AuditOffender[];
  offenderCount: number;
}

/** Everything the checks look at. */
export interface AuditSnapshot {
  event: EventDefinition;
  seats: Map<string, SeatView>;
  purchases: Map<string, Purchase>;
  /** Every area of the event; null when its item is missing. */
  areas: Map<string, GeneralAdmissionCounts | null>;
  /** This event's charges (key `<eventId>-...`); undefined without a payment provider. */
  charges: ChargeRecord[] | undefined;
}

/** What the re-read should look at again. */
export interface AuditSuspects {
  purchaseIds: Set<string>;
  sections: Set<string>;
}

export interface AuditEvaluation {
  checks: AuditCheck[];
  suspects: AuditSuspects;
}

/** This event's share of the provider's charges: the saga's idempotency key is the purchase id. */
export function chargesOfEvent(charges: readonly ChargeRecord[], eventId: string): ChargeRecord[] {
  const prefix = `${eventId}-`;
  return charges.filter((c) => c.idempotencyKey.startsWith(prefix));
}

/** One check's offenders (the first `max` of them, and their count), and what they make suspect. */
class Findings {
  readonly offenders: AuditOffender[] = [];
  count = 0;
  constructor(
    private readonly max: number,
    private readonly suspects: AuditSuspects,
  ) {}

  add(id: string, problem: string, suspect: { purchaseIds?: (string | undefined)[]; seats?: string[] } = {}): void {
    this.count++;
    if (this.offenders.length < this.max) this.offenders.push({ id, problem });
    for (const p of suspect.purchaseIds ?? []) if (p !== undefined) this.suspects.purchaseIds.add(p);
    for (const s of suspect.seats ?? []) {
      const section = parseSeatId(s)?.sectionId;
      if (section !== undefined) this.suspects.sections.add(section);
    }
  }

  check(name: AuditCheckName, passSummary: string, failSummary: (n: number) => string): AuditCheck {
    const failed = this.count > 0;
    return {
      name,
      title: AUDIT_CHECKS[name],
      status: failed ? "fail" : "pass",
      summary: failed ? failSummary(this.count) : passSummary,
      offenders: this.offenders,
      offenderCount: this.count,
    };
  }
}

function skipped(name: AuditCheckName, summary: string): AuditCheck {
  return { name, title: AUDIT_CHECKS[name], status: "skip", summary, offenders: [], offenderCount: 0 };
}

const plural = (n: number, one: string, many = `${one}s`) => `${n} ${n === 1 ? one : many}`;

/** What the checks read: the snapshot, and what several of them derive from it, derived once. */
interface CheckInput {
  snapshot: AuditSnapshot;
  all: Purchase[];
  confirmed: Purchase[];
  sold: SeatView[];
  allowPending: boolean;
  maxOffenders: number;
  /** The charges by idempotency key (a purchase id); undefined without a payment provider. */
  chargesByKey: Map<string, ChargeRecord[]> | undefined;
  /** A new check's findings; what they name joins the run's suspects. */
  findings(): Findings;
}

type Check = (input: CheckInput) => AuditCheck;

const NO_PROVIDER = "no payment provider given";

/** No seat sold twice: no seat in two confirmed purchases (or twice in one), none sold to nobody. */
function seatsSoldOnce({ confirmed, sold, findings }: CheckInput): AuditCheck {
  const f = findings();
  const claims = new Map<string, string[]>();
  for (const p of confirmed) {
    const seen = new Set<string>();
    for (const seat of p.seats) {
      if (seen.has(seat)) {
        f.add(p.purchaseId, `lists seat ${seat} twice`, { purchaseIds: [p.purchaseId] });
        continue;
      }
      seen.add(seat);
      const ids = claims.get(seat);
      if (ids) ids.push(p.purchaseId);
      else claims.set(seat, [p.purchaseId]);
    }
  }
  for (const [seat, ids] of claims) {
    if (ids.length > 1) {
      f.add(seat, `in ${ids.length} confirmed purchases: ${ids.join(", ")}`, { purchaseIds: ids, seats: [seat] });
    }
  }
  for (const seat of sold) {
    if (!seat.purchaseId) f.add(seat.id, "sold, but names no purchase", { seats: [seat.id] });
  }
  return f.check(
    "seats_sold_once",
    `${plural(sold.length, "sold seat")}, each naming one purchase; no seat in two confirmed purchases`,
    (n) => `${plural(n, "seat")} sold more than once or to nobody`,
  );
}

/** Sold seats are exactly the seats of confirmed purchases, both ways. */
function soldSeatsMatchPurchases({ snapshot, confirmed, sold, findings }: CheckInput): AuditCheck {
  const { seats, purchases } = snapshot;
  const f = findings();
  for (const seat of sold) {
    const pid = seat.purchaseId;
    if (!pid) continue; // seatsSoldOnce reports it
    const p = purchases.get(pid);
    const suspect = { purchaseIds: [pid], seats: [seat.id] };
    if (!p) f.add(seat.id, `sold to ${pid}, which does not exist`, suspect);
    else if (p.status !== "confirmed") f.add(seat.id, `sold to ${pid}, which is ${p.status}`, suspect);
    else if (!p.seats.includes(seat.id)) f.add(seat.id, `sold to ${pid}, which does not list it`, suspect);
  }
  for (const p of confirmed) {
    for (const id of p.seats) {
      const seat = seats.get(id);
      const suspect = { purchaseIds: [p.purchaseId, seat?.purchaseId], seats: [id] };
      if (!seat) f.add(p.purchaseId, `lists seat ${id}, which does not exist`, suspect);
      else if (seat.status !== "sold") f.add(p.purchaseId, `lists seat ${id}, which is ${seat.status}`, suspect);
      else if (seat.purchaseId !== p.purchaseId) {
        f.add(p.purchaseId, `lists seat ${id}, which is sold to ${seat.purchaseId ?? "nobody"}`, suspect);
      }
    }
  }
  const seatPurchases = confirmed.filter((p) => p.seats.length > 0).length;
  return f.check(
    "sold_seats_match_purchases",
    `${plural(sold.length, "sold seat")} = seats of ${plural(seatPurchases, "confirmed seat purchase")}`,
    (n) => plural(n, "mismatch", "mismatches"),
  );
}

/** Each general-admission area's counters in bounds: none negative, adding up to its capacity. */
function generalAdmissionBounds({ snapshot, findings }: CheckInput): AuditCheck {
  const f = findings();
  for (const def of snapshot.event.generalAdmission) {
    const a = snapshot.areas.get(def.id);
    if (!a) {
      f.add(def.id, "area item missing");
      continue;
    }
    for (const field of ["available", "held", "sold"] as const) {
      if (!(a[field] >= 0)) f.add(def.id, `${field} = ${a[field]} is negative`);
    }
    const sum = a.available + a.held + a.sold;
    if (sum !== a.capacity) {
      f.add(def.id, `available ${a.available} + held ${a.held} + sold ${a.sold} = ${sum}, capacity ${a.capacity}`);
    }
    if (a.capacity !== def.capacity) f.add(def.id, `capacity ${a.capacity}, the event says ${def.capacity}`);
  }
  return f.check(
    "general_admission_bounds",
    `${plural(snapshot.event.generalAdmission.length, "area")}: available + held + sold = capacity, none negative`,
    (n) => plural(n, "violation"),
  );
}

/** Each area's sold count is what confirmed purchases bought of it. */
function generalAdmissionSold({ snapshot, all, findings }: CheckInput): AuditCheck {
  const f = findings();
  const bought = new Map<string, number>();
  const ofArea = new Map<string, string[]>();
  for (const p of all) {
    const ga = p.generalAdmission;
    if (!ga) continue;
    const ids = ofArea.get(ga.areaId) ?? [];
    ids.push(p.purchaseId);
    ofArea.set(ga.areaId, ids);
    if (p.status === "confirmed") bought.set(ga.areaId, (bought.get(ga.areaId) ?? 0) + ga.quantity);
  }
  const known = new Set(snapshot.event.generalAdmission.map((g) => g.id));
  for (const areaId of bought.keys()) {
    if (!known.has(areaId)) f.add(areaId, "confirmed purchases name an area the event does not have");
  }
  for (const def of snapshot.event.generalAdmission) {
    const a = snapshot.areas.get(def.id);
    if (!a) continue; // generalAdmissionBounds reports it
    const q = bought.get(def.id) ?? 0;
    if (a.sold !== q) {
      f.add(def.id, `sold ${a.sold}, confirmed purchases bought ${q}`, { purchaseIds: ofArea.get(def.id) ?? [] });
    }
  }
  let total = 0;
  for (const q of bought.values()) total += q;
  return f.check("general_admission_sold", `${total} sold, all by confirmed purchases`, (n) =>
    plural(n, "area mismatch", "area mismatches"),
  );
}

/** No fan bought more than the event allows: seats and general-admission places together. */
function fansWithinLimit({ snapshot, confirmed, findings }: CheckInput): AuditCheck {
  const f = findings();
  const byFan = new Map<string, { seats: number; purchaseIds: string[] }>();
  for (const p of confirmed) {
    const mine = byFan.get(p.fanId) ?? { seats: 0, purchaseIds: [] };
    mine.seats += p.seats.length + (p.generalAdmission?.quantity ?? 0);
    mine.purchaseIds.push(p.purchaseId);
    byFan.set(p.fanId, mine);
  }
  const limit = snapshot.event.maxSeatsPerFan;
  let most = 0;
  for (const [fanId, mine] of byFan) {
    most = Math.max(most, mine.seats);
    if (mine.seats > limit) {
      f.add(
        fanId,
        `bought ${mine.seats} in ${plural(mine.purchaseIds.length, "confirmed purchase")} (${mine.purchaseIds.join(", ")}), the limit is ${limit}`,
        { purchaseIds: mine.purchaseIds },
      );
    }
  }
  return f.check(
    "fans_within_limit",
    `${plural(byFan.size, "fan")} bought, at most ${most} each (limit ${limit})`,
    (n) => `${plural(n, "fan")} past the limit of ${limit}`,
  );
}

/** While the sale runs, a pending purchase and a refund decided but not finished are in flight. */
const inFlight = (p: Purchase, allowPending: boolean) =>
  allowPending && (p.status === "pending" || (p.status === "failed" && p.failureReason === REFUND_DUE));

/** Every captured charge is for a confirmed purchase of the same amount, one per purchase. */
function capturedChargesConfirmed({ snapshot, allowPending, chargesByKey, findings }: CheckInput): AuditCheck {
  const { charges, purchases } = snapshot;
  if (charges === undefined || chargesByKey === undefined) return skipped("captured_charges_confirmed", NO_PROVIDER);
  const f = findings();
  for (const c of charges) {
    if (c.refunded) continue;
    const key = c.idempotencyKey;
    const p = purchases.get(key);
    const suspect = { purchaseIds: [key] };
    if (!p) f.add(c.chargeId, `captured ${c.amount} under ${key}: no such purchase`, suspect);
    else if (p.status === "confirmed") {
      if (c.amount !== p.amount) {
        f.add(c.chargeId, `captured ${c.amount}, purchase ${key} is for ${p.amount}`, suspect);
      }
    } else if (!inFlight(p, allowPending)) {
      f.add(c.chargeId, `captured ${c.amount} for ${key}, which is ${p.status}`, suspect);
    }
  }
  for (const [key, list] of chargesByKey) {
    const live = list.filter((c) => !c.refunded);
    if (live.length > 1) f.add(key, `${live.length} captured charges under one key`, { purchaseIds: [key] });
  }
  const captured = charges.filter((c) => !c.refunded).length;
  return f.check(
    "captured_charges_confirmed",
    `${plural(captured, "captured charge")}, each for a confirmed purchase of the same amount${allowPending ? " (or one still pending)" : ""}`,
    (n) => plural(n, "stray charge"),
  );
}

/** Every refund is of a refunded or failed purchase, and every refunded purchase's charge is refunded. */
function refundsMatchPurchases({ snapshot, all, allowPending, chargesByKey, findings }: CheckInput): AuditCheck {
  const { charges, purchases } = snapshot;
  if (charges === undefined || chargesByKey === undefined) return skipped("refunds_match_purchases", NO_PROVIDER);
  const f = findings();
  for (const c of charges) {
    if (!c.refunded) continue;
    const key = c.idempotencyKey;
    const p = purchases.get(key);
    const suspect = { purchaseIds: [key] };
    if (!p) f.add(c.chargeId, `refunded, under ${key}: no such purchase`, suspect);
    else if (p.status === "confirmed") f.add(c.chargeId, `refunded, but ${key} is confirmed`, suspect);
    else if (p.status === "pending" && !inFlight(p, allowPending)) {
      f.add(c.chargeId, `refunded, but ${key} is still pending`, suspect);
    }
  }
  for (const p of all) {
    if (p.status !== "refunded") continue;
    const list = chargesByKey.get(p.purchaseId) ?? [];
    const suspect = { purchaseIds: [p.purchaseId] };
    if (list.length === 0) f.add(p.purchaseId, "refunded, but no charge under its id", suspect);
    else if (list.some((c) => !c.refunded)) f.add(p.purchaseId, "refunded, but its charge is still captured", suspect);
  }
  const refunded = charges.filter((c) => c.refunded).length;
  return f.check(
    "refunds_match_purchases",
    `${plural(refunded, "refunded charge")}, each for a refunded or failed purchase`,
    (n) => plural(n, "mismatch", "mismatches"),
  );
}

/** Every confirmed purchase has a captured charge: the one it records, when it records one. */
function confirmedPurchasesCharged({ confirmed, chargesByKey, findings }: CheckInput): AuditCheck {
  if (chargesByKey === undefined) return skipped("confirmed_purchases_charged", NO_PROVIDER);
  const f = findings();
  for (const p of confirmed) {
    const list = chargesByKey.get(p.purchaseId) ?? [];
    const live = list.filter((c) => !c.refunded);
    const suspect = { purchaseIds: [p.purchaseId] };
    if (live.length === 0) {
      f.add(p.purchaseId, list.length > 0 ? "its charge was refunded" : "no charge under its id", suspect);
    } else if (p.chargeId !== undefined && !live.some((c) => c.chargeId === p.chargeId)) {
      f.add(p.purchaseId, `records charge ${p.chargeId}, the provider has ${live[0]!.chargeId}`, suspect);
    }
  }
  return f.check(
    "confirmed_purchases_charged",
    `${plural(confirmed.length, "confirmed purchase")}, each charged`,
    (n) => `${plural(n, "confirmed purchase", "confirmed purchases")} without a captured charge`,
  );
}

/** No purchase left pending; while the sale runs (allowPending) they are listed but pass. */
function noPendingPurchases({ all, allowPending, maxOffenders, findings }: CheckInput): AuditCheck {
  const pending = all.filter((p) => p.status === "pending");
  if (allowPending) {
    return {
      name: "no_pending_purchases",
      title: AUDIT_CHECKS.no_pending_purchases,
      status: "pass",
      summary: `${plural(pending.length, "pending purchase")} (allowed: the sale is running)`,
      offenders: pending.slice(0, maxOffenders).map((p) => ({ id: p.purchaseId, problem: "pending" })),
      offenderCount: pending.length,
    };
  }
  const f = findings();
  for (const p of pending) f.add(p.purchaseId, `pending since ${p.createdAt}`, { purchaseIds: [p.purchaseId] });
  return f.check("no_pending_purchases", "none pending", (n) => `${plural(n, "purchase")} still pending`);
}

/** Every check, by name; the report lists them in AUDIT_CHECKS' order. */
const CHECKS: Record<AuditCheckName, Check> = {
  seats_sold_once: seatsSoldOnce,
  sold_seats_match_purchases: soldSeatsMatchPurchases,
  general_admission_bounds: generalAdmissionBounds,
  general_admission_sold: generalAdmissionSold,
  fans_within_limit: fansWithinLimit,
  captured_charges_confirmed: capturedChargesConfirmed,
  refunds_match_purchases: refundsMatchPurchases,
  confirmed_purchases_charged: confirmedPurchasesCharged,
  no_pending_purchases: noPendingPurchases,
};

function byKey(charges: readonly ChargeRecord[]): Map<string, ChargeRecord[]> {
  const out = new Map<string, ChargeRecord[]>();
  for (const c of charges) {
    const list = out.get(c.idempotencyKey) ?? [];
    list.push(c);
    out.set(c.idempotencyKey, list);
  }
  return out;
}

/** The checks, from what was read; no I/O. */
export function evaluateAudit(
  snapshot: AuditSnapshot,
  options: { allowPending?: boolean; maxOffenders?: number } = {},
): AuditEvaluation {
  const maxOffenders = options.maxOffenders ?? 20;
  const suspects: AuditSuspects = { purchaseIds: new Set(), sections: new Set() };
  const all = [...snapshot.purchases.values()];
  const input: CheckInput = {
    snapshot,
    all,
    confirmed: all.filter((p) => p.status === "confirmed"),
    sold: [...snapshot.seats.values()].filter((s) => s.status === "sold"),
    allowPending: options.allowPending ?? false,
    maxOffenders,
    chargesByKey: snapshot.charges && byKey(snapshot.charges),
    findings: () => new Findings(maxOffenders, suspects),
  };
  const checks = (Object.keys(AUDIT_CHECKS) as AuditCheckName[]).map((name) => CHECKS[name](input));
  return { checks, suspects };
}
