/**
 * The post-sale audit: reads one event's authoritative state (DynamoDB through the inventory, and
 * the payment provider's charges when given) and checks the invariants the design promises (no
 * seat sold twice, sold seats = confirmed purchases, money = confirmed purchases, general
 * admission within bounds, no fan past maxSeatsPerFan). docs/audit.md lists the checks.
 *
 * Only GetItem and Query, through the inventory's API: seats by strongly consistent Queries of
 * each section, general-admission areas by consistent GetItem. Purchases are listed from GSI1,
 * which real DynamoDB updates a moment after the table: so a finding is only reported if it is
 * still there after its purchases (consistent GetItem), sections, areas and the charges are read
 * again. A sale that is still running can show a purchase between two writes; run it again, or
 * after the sale.
 *
 * The checks themselves (`evaluateAudit`) are a pure function of what was read.
 */
import type {
  EventDefinition,
  GeneralAdmissionCounts,
  Inventory,
  Purchase,
  PurchaseStatus,
  SeatView,
} from "../inventory/index.js";
import type { ChargeRecord } from "../payments/simulated.js";
import { REFUND_DUE } from "../purchases/saga.js";

export type AuditInventory = Pick<Inventory, "events" | "seats" | "purchases">;

/** What the audit needs of a payment provider: every charge it made (the simulated one has it). */
export interface AuditPayments {
  listCharges(): Promise<ChargeRecord[]>;
}

export interface AuditDeps {
  inventory: AuditInventory;
  payments?: AuditPayments;
}

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

export interface Amounted {
  count: number;
  amount: number;
}

export interface AuditTotals {
  seats: { expected: number; total: number; available: number; held: number; sold: number };
  generalAdmission: {
    capacity: number;
    available: number;
    held: number;
    sold: number;
    areas: Record<string, GeneralAdmissionCounts>;
  };
  purchases: Record<PurchaseStatus, Amounted> & { total: number };
  /** Charges whose idempotency key is one of this event's purchase ids (`<eventId>-...`). */
  charges?: { captured: Amounted; refunded: Amounted };
}

export interface AuditReport {
  eventId: string;
  eventFound: boolean;
  /** Every check passed (skipped ones do not count against it). */
  ok: boolean;
  checkedAt: string;
  /** 1 + the re-reads it took for the findings to settle. */
  passes: number;
  paymentsChecked: boolean;
  allowPending: boolean;
  checks: AuditCheck[];
  totals: AuditTotals;
}

export type AuditPhase = "event" | "seats" | "purchases" | "general_admission" | "charges" | "recheck";

export interface AuditProgress {
  phase: AuditPhase;
  done: number;
  total?: number;
}

export interface AuditOptions {
  /** A pending purchase is normal while the sale runs; without this it fails the audit. */
  allowPending?: boolean;
  /** Offenders listed per check (default 20); the count is always complete. */
  maxOffenders?: number;
  /** Re-reads of what the findings name before they count (default 2). */
  recheckPasses?: number;
  /** Pause before each re-read, for GSI1 to catch up (default 500 ms). */
  recheckDelayMs?: number;
  /** Sections (and purchase GetItems) read at once (default 4, GetItems x4). */
  concurrency?: number;
  onProgress?: (progress: AuditProgress) => void;
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

const SEAT_PAGE = 1_000;
const PURCHASE_PAGE = 1_000;

/** A seat id is `<section>-<row>-<number>`; section ids have no dash. */
function sectionOf(seatId: string): string {
  const dash = seatId.indexOf("-");
  return dash < 0 ? seatId : seatId.slice(0, dash);
}

/** This event's share of the provider's charges: the saga's idempotency key is the purchase id. */
export function chargesOfEvent(charges: readonly ChargeRecord[], eventId: string): ChargeRecord[] {
  const prefix = `${eventId}-`;
  return charges.filter((c) => c.idempotencyKey.startsWith(prefix));
}

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
    for (const s of suspect.seats ?? []) this.suspects.sections.add(sectionOf(s));
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

/** The checks, from what was read; no I/O. */
export function evaluateAudit(
  snapshot: AuditSnapshot,
  options: { allowPending?: boolean; maxOffenders?: number } = {},
): AuditEvaluation {
  const allowPending = options.allowPending ?? false;
  const max = options.maxOffenders ?? 20;
  const suspects: AuditSuspects = { purchaseIds: new Set(), sections: new Set() };
  const findings = () => new Findings(max, suspects);
  const { seats, purchases, areas, charges } = snapshot;
  const all = [...purchases.values()];
  const confirmed = all.filter((p) => p.status === "confirmed");
  const sold = [...seats.values()].filter((s) => s.status === "sold");
  const checks: AuditCheck[] = [];

  // No seat sold twice.
  {
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
    checks.push(
      f.check(
        "seats_sold_once",
        `${plural(sold.length, "sold seat")}, each naming one purchase; no seat in two confirmed purchases`,
        (n) => `${plural(n, "seat")} sold more than once or to nobody`,
      ),
    );
  }

  // Sold seats are exactly the seats of confirmed purchases.
  {
    const f = findings();
    for (const seat of sold) {
      const pid = seat.purchaseId;
      if (!pid) continue; // reported above
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
    checks.push(
      f.check(
        "sold_seats_match_purchases",
        `${plural(sold.length, "sold seat")} = seats of ${plural(seatPurchases, "confirmed seat purchase")}`,
        (n) => plural(n, "mismatch", "mismatches"),
      ),
    );
  }

  // General admission: each area's counters in bounds.
  {
    const f = findings();
    for (const def of snapshot.event.generalAdmission) {
      const a = areas.get(def.id);
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
    checks.push(
      f.check(
        "general_admission_bounds",
        `${plural(snapshot.event.generalAdmission.length, "area")}: available + held + sold = capacity, none negative`,
        (n) => plural(n, "violation"),
      ),
    );
  }

  // General admission: sold = what confirmed purchases bought.
  {
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
      const a = areas.get(def.id);
      if (!a) continue; // reported above
      const q = bought.get(def.id) ?? 0;
      if (a.sold !== q) {
        f.add(def.id, `sold ${a.sold}, confirmed purchases bought ${q}`, { purchaseIds: ofArea.get(def.id) ?? [] });
      }
    }
    let total = 0;
    for (const q of bought.values()) total += q;
    checks.push(
      f.check("general_admission_sold", `${total} sold, all by confirmed purchases`, (n) =>
        plural(n, "area mismatch", "area mismatches"),
      ),
    );
  }

  // No fan bought more than the event allows: seats and general-admission places together.
  {
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
    checks.push(
      f.check(
        "fans_within_limit",
        `${plural(byFan.size, "fan")} bought, at most ${most} each (limit ${limit})`,
        (n) => `${plural(n, "fan")} past the limit of ${limit}`,
      ),
    );
  }

  // Money.
  if (charges === undefined) {
    const why = "no payment provider given";
    checks.push(skipped("captured_charges_confirmed", why));
    checks.push(skipped("refunds_match_purchases", why));
    checks.push(skipped("confirmed_purchases_charged", why));
  } else {
    const byKey = new Map<string, ChargeRecord[]>();
    for (const c of charges) {
      const list = byKey.get(c.idempotencyKey) ?? [];
      list.push(c);
      byKey.set(c.idempotencyKey, list);
    }
    // While the sale runs, a pending purchase and a refund decided but not finished are in flight.
    const inFlight = (p: Purchase) =>
      allowPending && (p.status === "pending" || (p.status === "failed" && p.failureReason === REFUND_DUE));

    const captured = findings();
    const refunds = findings();
    for (const c of charges) {
      const key = c.idempotencyKey;
      const p = purchases.get(key);
      const suspect = { purchaseIds: [key] };
      if (!c.refunded) {
        if (!p) captured.add(c.chargeId, `captured ${c.amount} under ${key}: no such purchase`, suspect);
        else if (p.status === "confirmed") {
          if (c.amount !== p.amount) {
            captured.add(c.chargeId, `captured ${c.amount}, purchase ${key} is for ${p.amount}`, suspect);
          }
        } else if (!inFlight(p))
          captured.add(c.chargeId, `captured ${c.amount} for ${key}, which is ${p.status}`, suspect);
      } else if (!p) refunds.add(c.chargeId, `refunded, under ${key}: no such purchase`, suspect);
      else if (p.status === "confirmed") refunds.add(c.chargeId, `refunded, but ${key} is confirmed`, suspect);
      else if (p.status === "pending" && !inFlight(p)) {
        refunds.add(c.chargeId, `refunded, but ${key} is still pending`, suspect);
      }
    }
    for (const [key, list] of byKey) {
      const live = list.filter((c) => !c.refunded);
      if (live.length > 1) captured.add(key, `${live.length} captured charges under one key`, { purchaseIds: [key] });
    }
    for (const p of all) {
      if (p.status !== "refunded") continue;
      const list = byKey.get(p.purchaseId) ?? [];
      if (list.length === 0)
        refunds.add(p.purchaseId, "refunded, but no charge under its id", { purchaseIds: [p.purchaseId] });
      else if (list.some((c) => !c.refunded)) {
        refunds.add(p.purchaseId, "refunded, but its charge is still captured", { purchaseIds: [p.purchaseId] });
      }
    }

    const unpaid = findings();
    for (const p of confirmed) {
      const list = byKey.get(p.purchaseId) ?? [];
      const live = list.filter((c) => !c.refunded);
      const suspect = { purchaseIds: [p.purchaseId] };
      if (live.length === 0) {
        unpaid.add(p.purchaseId, list.length > 0 ? "its charge was refunded" : "no charge under its id", suspect);
      } else if (p.chargeId !== undefined && !live.some((c) => c.chargeId === p.chargeId)) {
        unpaid.add(p.purchaseId, `records charge ${p.chargeId}, the provider has ${live[0]!.chargeId}`, suspect);
      }
    }

    const live = charges.filter((c) => !c.refunded);
    const back = charges.filter((c) => c.refunded);
    checks.push(
      captured.check(
        "captured_charges_confirmed",
        `${plural(live.length, "captured charge")}, each for a confirmed purchase of the same amount${allowPending ? " (or one still pending)" : ""}`,
        (n) => plural(n, "stray charge"),
      ),
    );
    checks.push(
      refunds.check(
        "refunds_match_purchases",
        `${plural(back.length, "refunded charge")}, each for a refunded or failed purchase`,
        (n) => plural(n, "mismatch", "mismatches"),
      ),
    );
    checks.push(
      unpaid.check(
        "confirmed_purchases_charged",
        `${plural(confirmed.length, "confirmed purchase")}, each charged`,
        (n) => plural(n, "confirmed purchase", "confirmed purchases") + " without a captured charge",
      ),
    );
  }

  // Pending purchases.
  {
    const pending = all.filter((p) => p.status === "pending");
    if (allowPending) {
      checks.push({
        name: "no_pending_purchases",
        title: AUDIT_CHECKS.no_pending_purchases,
        status: "pass",
        summary: `${plural(pending.length, "pending purchase")} (allowed: the sale is running)`,
        offenders: pending.slice(0, max).map((p) => ({ id: p.purchaseId, problem: "pending" })),
        offenderCount: pending.length,
      });
    } else {
      const f = findings();
      for (const p of pending) f.add(p.purchaseId, `pending since ${p.createdAt}`, { purchaseIds: [p.purchaseId] });
      checks.push(f.check("no_pending_purchases", "none pending", (n) => `${plural(n, "purchase")} still pending`));
    }
  }

  return { checks, suspects };
}

export function totalsOf(snapshot: AuditSnapshot): AuditTotals {
  const seats = { expected: 0, total: 0, available: 0, held: 0, sold: 0 };
  for (const s of snapshot.event.sections) seats.expected += s.rows * s.seatsPerRow;
  for (const seat of snapshot.seats.values()) {
    seats.total++;
    seats[seat.status]++;
  }
  const generalAdmission: AuditTotals["generalAdmission"] = { capacity: 0, available: 0, held: 0, sold: 0, areas: {} };
  for (const [id, a] of snapshot.areas) {
    if (!a) continue;
    generalAdmission.areas[id] = a;
    generalAdmission.capacity += a.capacity;
    generalAdmission.available += a.available;
    generalAdmission.held += a.held;
    generalAdmission.sold += a.sold;
  }
  const zero = (): Amounted => ({ count: 0, amount: 0 });
  const purchases: AuditTotals["purchases"] = {
    total: 0,
    pending: zero(),
    confirmed: zero(),
    failed: zero(),
    refunded: zero(),
  };
  for (const p of snapshot.purchases.values()) {
    purchases.total++;
    const bucket = purchases[p.status];
    if (!bucket) continue;
    bucket.count++;
    bucket.amount += p.amount;
  }
  const totals: AuditTotals = { seats, generalAdmission, purchases };
  if (snapshot.charges) {
    const captured = zero();
    const refunded = zero();
    for (const c of snapshot.charges) {
      const bucket = c.refunded ? refunded : captured;
      bucket.count++;
      bucket.amount += c.amount;
    }
    totals.charges = { captured, refunded };
  }
  return totals;
}

/** Runs `fn` over `items` with at most `limit` in flight. */
async function eachLimit<T>(items: readonly T[], limit: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length) await fn(items[next++]!);
  };
  await Promise.all(Array.from({ length: Math.min(Math.max(1, limit), items.length) }, worker));
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

class Reader {
  private seatsRead = 0;

  constructor(
    private readonly deps: AuditDeps,
    private readonly eventId: string,
    private readonly concurrency: number,
    private readonly progress: (p: AuditProgress) => void,
  ) {}

  /** Every seat of the given sections, strongly consistent, a page at a time. */
  async seats(sectionIds: readonly string[], into: Map<string, SeatView>, expected: number): Promise<void> {
    this.seatsRead = 0;
    await eachLimit(sectionIds, this.concurrency, async (sectionId) => {
      let cursor: string | undefined;
      do {
        const page = await this.deps.inventory.seats.listSection({
          eventId: this.eventId,
          sectionId,
          consistent: true,
          limit: SEAT_PAGE,
          ...(cursor !== undefined ? { cursor } : {}),
        });
        if (!page) throw new Error(`section ${sectionId} of ${this.eventId} could not be read`);
        for (const seat of page.seats) into.set(seat.id, seat);
        this.seatsRead += page.seats.length;
        this.progress({ phase: "seats", done: this.seatsRead, total: expected });
        cursor = page.nextCursor;
      } while (cursor !== undefined);
    });
  }

  async purchases(): Promise<Map<string, Purchase>> {
    const out = new Map<string, Purchase>();
    let cursor: string | undefined;
    do {
      const page = await this.deps.inventory.purchases.list({
        eventId: this.eventId,
        limit: PURCHASE_PAGE,
        ...(cursor !== undefined ? { cursor } : {}),
      });
      for (const p of page.purchases) out.set(p.purchaseId, p);
      this.progress({ phase: "purchases", done: out.size });
      cursor = page.nextCursor;
    } while (cursor !== undefined);
    return out;
  }

  /** Consistent GetItem of each id: the truth where the index may lag. */
  async purchasesById(ids: Iterable<string>, into: Map<string, Purchase>): Promise<void> {
    await eachLimit([...ids], this.concurrency * 4, async (id) => {
      const p = await this.deps.inventory.purchases.get({ eventId: this.eventId, purchaseId: id });
      if (p) into.set(id, p);
      else into.delete(id);
    });
  }

  async areas(event: EventDefinition): Promise<Map<string, GeneralAdmissionCounts | null>> {
    const out = new Map<string, GeneralAdmissionCounts | null>();
    for (const g of event.generalAdmission) {
      out.set(g.id, await this.deps.inventory.seats.generalAdmission({ eventId: this.eventId, areaId: g.id }));
    }
    this.progress({ phase: "general_admission", done: out.size, total: event.generalAdmission.length });
    return out;
  }

  async charges(): Promise<ChargeRecord[] | undefined> {
    if (!this.deps.payments) return undefined;
    const charges = chargesOfEvent(await this.deps.payments.listCharges(), this.eventId);
    this.progress({ phase: "charges", done: charges.length });
    return charges;
  }
}

function emptyTotals(): AuditTotals {
  const zero = (): Amounted => ({ count: 0, amount: 0 });
  return {
    seats: { expected: 0, total: 0, available: 0, held: 0, sold: 0 },
    generalAdmission: { capacity: 0, available: 0, held: 0, sold: 0, areas: {} },
    purchases: { total: 0, pending: zero(), confirmed: zero(), failed: zero(), refunded: zero() },
  };
}

/**
 * Audits one event. An unknown event gives `eventFound: false` and no checks. Throws only when the
 * store or the provider cannot answer (InventoryUnavailableError, a Redis error).
 */
export async function auditEvent(deps: AuditDeps, eventId: string, options: AuditOptions = {}): Promise<AuditReport> {
  const allowPending = options.allowPending ?? false;
  const maxOffenders = options.maxOffenders ?? 20;
  const recheckPasses = options.recheckPasses ?? 2;
  const recheckDelayMs = options.recheckDelayMs ?? 500;
  const progress = options.onProgress ?? (() => {});
  const reader = new Reader(deps, eventId, options.concurrency ?? 4, progress);
  const base = { eventId, allowPending, paymentsChecked: deps.payments !== undefined };

  progress({ phase: "event", done: 0 });
  const event = await deps.inventory.events.get({ eventId });
  if (!event) {
    return {
      ...base,
      eventFound: false,
      ok: false,
      checkedAt: new Date().toISOString(),
      passes: 1,
      checks: [],
      totals: emptyTotals(),
    };
  }
  progress({ phase: "event", done: 1 });

  const expected = event.sections.reduce((n, s) => n + s.rows * s.seatsPerRow, 0);
  const seats = new Map<string, SeatView>();
  await reader.seats(
    event.sections.map((s) => s.id),
    seats,
    expected,
  );
  const purchases = await reader.purchases();
  // A seat sold to a purchase the (lagging) index does not list yet: read it where it is.
  const unlisted = new Set<string>();
  for (const seat of seats.values())
    if (seat.purchaseId && !purchases.has(seat.purchaseId)) unlisted.add(seat.purchaseId);
  await reader.purchasesById(unlisted, purchases);
  const snapshot: AuditSnapshot = {
    event,
    seats,
    purchases,
    areas: await reader.areas(event),
    charges: await reader.charges(),
  };

  let evaluation = evaluateAudit(snapshot, { allowPending, maxOffenders });
  let passes = 1;
  while (passes <= recheckPasses && evaluation.checks.some((c) => c.status === "fail")) {
    progress({ phase: "recheck", done: passes, total: recheckPasses });
    if (recheckDelayMs > 0) await sleep(recheckDelayMs);
    const { suspects } = evaluation;
    // Seats first, then purchases: a confirmation that commits in between is caught by the next pass.
    const sections = event.sections.filter((s) => suspects.sections.has(s.id));
    await reader.seats(
      sections.map((s) => s.id),
      seats,
      sections.reduce((n, s) => n + s.rows * s.seatsPerRow, 0),
    );
    const relisted = await reader.purchases();
    const again = new Set(suspects.purchaseIds);
    for (const p of relisted.values()) if (p.status === "pending") again.add(p.purchaseId);
    for (const seat of seats.values())
      if (seat.purchaseId && !relisted.has(seat.purchaseId)) again.add(seat.purchaseId);
    await reader.purchasesById(again, relisted);
    snapshot.purchases = relisted;
    snapshot.areas = await reader.areas(event);
    snapshot.charges = await reader.charges();
    evaluation = evaluateAudit(snapshot, { allowPending, maxOffenders });
    passes++;
  }

  return {
    ...base,
    eventFound: true,
    ok: evaluation.checks.every((c) => c.status !== "fail"),
    checkedAt: new Date().toISOString(),
    passes,
    checks: evaluation.checks,
    totals: totalsOf(snapshot),
  };
}
