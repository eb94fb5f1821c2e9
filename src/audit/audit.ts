/**
 * The post-sale audit: reads one event's authoritative state (DynamoDB through the inventory, and
 * the payment provider's charges when given) and checks the invariants the design promises (no
 * seat sold twice, sold seats = confirmed purchases, money = confirmed purchases, general
 * admission within bounds, no fan past maxSeatsPerFan). docs/audit.md lists the checks.
 *
 * Only GetItem and Query, through the inventory's API: seats by strongly consistent Queries of
 * each section, general-admission areas by consistent GetItem. Purchases come from where the sale
 * names them, no index of purchases by status being kept: the open ones (GSI3: pending, refund
 * under way, booking not acknowledged yet), the confirmed ones that sold seats and the areas'
 * confirmed holds name (GSI2 `GASOLD`), and those the provider's charges name, each read by key
 * (an event made before GSI3 also lists GSI1). Indexes are updated a moment after the table in
 * real DynamoDB: so a finding is only reported if it is
 * still there after its purchases (consistent GetItem), sections, areas and the charges are read
 * again. A sale that is still running can show a purchase between two writes; run it again, or
 * after the sale.
 *
 * The checks themselves (checks.ts, `evaluateAudit`) are a pure function of what was read.
 */
import { mapLimit } from "../concurrency.js";
import { setTimeout as sleep } from "node:timers/promises";
import type {
  EventDefinition,
  GeneralAdmissionCounts,
  Inventory,
  Purchase,
  PurchaseStatus,
  SeatView,
} from "../inventory/index.js";
import type { ChargeRecord } from "../payments/simulated.js";
import { type AuditCheck, type AuditSnapshot, type AuditSuspects, chargesOfEvent, evaluateAudit } from "./checks.js";
import { type StrandedSeats, strandedSeats } from "./stranded.js";

export {
  AUDIT_CHECKS,
  type AuditCheck,
  type AuditCheckName,
  type AuditEvaluation,
  type AuditOffender,
  type AuditSnapshot,
  type AuditSuspects,
  chargesOfEvent,
  evaluateAudit,
} from "./checks.js";
export { type StrandedSeats, strandedSeats } from "./stranded.js";

export type AuditInventory = Pick<Inventory, "events" | "seats" | "purchases">;

/** What the audit needs of a payment provider: every charge it made (the simulated one has it). */
export interface AuditPayments {
  listCharges(): Promise<ChargeRecord[]>;
}

export interface AuditDeps {
  inventory: AuditInventory;
  payments?: AuditPayments;
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
  /** Single seats left alone between taken ones (./stranded.ts): a figure, never a failure. */
  stranded: StrandedSeats;
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

const SEAT_PAGE = 1_000;
const PURCHASE_PAGE = 1_000;

const zero = (): Amounted => ({ count: 0, amount: 0 });

function emptyTotals(): AuditTotals {
  return {
    seats: { expected: 0, total: 0, available: 0, held: 0, sold: 0 },
    generalAdmission: { capacity: 0, available: 0, held: 0, sold: 0, areas: {} },
    purchases: { total: 0, pending: zero(), confirmed: zero(), failed: zero(), refunded: zero() },
  };
}

const seatsOfLayout = (sections: EventDefinition["sections"]) =>
  sections.reduce((n, s) => n + s.rows * s.seatsPerRow, 0);

export function totalsOf(snapshot: AuditSnapshot): AuditTotals {
  const totals = emptyTotals();
  const { seats, generalAdmission, purchases } = totals;
  seats.expected = seatsOfLayout(snapshot.event.sections);
  for (const seat of snapshot.seats.values()) {
    seats.total++;
    seats[seat.status]++;
  }
  for (const [id, a] of snapshot.areas) {
    if (!a) continue;
    generalAdmission.areas[id] = a;
    generalAdmission.capacity += a.capacity;
    generalAdmission.available += a.available;
    generalAdmission.held += a.held;
    generalAdmission.sold += a.sold;
  }
  for (const p of snapshot.purchases.values()) {
    purchases.total++;
    const bucket = purchases[p.status];
    if (!bucket) continue;
    bucket.count++;
    bucket.amount += p.amount;
  }
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

class Reader {
  private seatsRead = 0;

  constructor(
    private readonly deps: AuditDeps,
    private readonly eventId: string,
    private readonly concurrency: number,
    private readonly progress: (p: AuditProgress) => void,
  ) {}

  /** Every seat of the given sections, strongly consistent, a page at a time. */
  async seats(sections: EventDefinition["sections"], into: Map<string, SeatView>): Promise<void> {
    this.seatsRead = 0;
    const expected = seatsOfLayout(sections);
    await mapLimit(sections, this.concurrency, async ({ id: sectionId }) => {
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

  /** The purchases the provider's charges name that no listing had (failed and refunded ones). */
  async chargedPurchases(charges: ChargeRecord[] | undefined, into: Map<string, Purchase>): Promise<void> {
    if (!charges) return;
    await this.purchasesById(new Set(charges.map((c) => c.idempotencyKey).filter((id) => !into.has(id))), into);
  }

  /** Consistent GetItem of each id: the truth where the index may lag. */
  async purchasesById(ids: Iterable<string>, into: Map<string, Purchase>): Promise<void> {
    await mapLimit([...ids], this.concurrency * 4, async (id) => {
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

  /** The first read of everything the checks look at. */
  async snapshot(event: EventDefinition): Promise<AuditSnapshot> {
    const seats = new Map<string, SeatView>();
    await this.seats(event.sections, seats);
    const purchases = await this.purchases();
    // A seat sold to a purchase the (lagging) index does not list yet: read it where it is.
    await this.purchasesById(unlistedBuyers(seats, purchases), purchases);
    const areas = await this.areas(event);
    const charges = await this.charges();
    await this.chargedPurchases(charges, purchases);
    return { event, seats, purchases, areas, charges };
  }

  /** Reads again what the findings name (and every pending purchase), into `snapshot`. */
  async reread(snapshot: AuditSnapshot, suspects: AuditSuspects): Promise<void> {
    const { event, seats } = snapshot;
    // Seats first, then purchases: a confirmation that commits in between is caught by the next pass.
    await this.seats(
      event.sections.filter((s) => suspects.sections.has(s.id)),
      seats,
    );
    const relisted = await this.purchases();
    const again = unlistedBuyers(seats, relisted);
    for (const id of suspects.purchaseIds) again.add(id);
    for (const p of relisted.values()) if (p.status === "pending") again.add(p.purchaseId);
    await this.purchasesById(again, relisted);
    snapshot.purchases = relisted;
    snapshot.areas = await this.areas(event);
    snapshot.charges = await this.charges();
    await this.chargedPurchases(snapshot.charges, relisted);
  }
}

/** The purchases seats are sold to that the listing does not have. */
function unlistedBuyers(seats: ReadonlyMap<string, SeatView>, listed: ReadonlyMap<string, Purchase>): Set<string> {
  const out = new Set<string>();
  for (const seat of seats.values()) if (seat.purchaseId && !listed.has(seat.purchaseId)) out.add(seat.purchaseId);
  return out;
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
      stranded: { count: 0, seats: [], bySection: {} },
    };
  }
  progress({ phase: "event", done: 1 });

  const snapshot = await reader.snapshot(event);
  let evaluation = evaluateAudit(snapshot, { allowPending, maxOffenders });
  let passes = 1;
  while (passes <= recheckPasses && evaluation.checks.some((c) => c.status === "fail")) {
    progress({ phase: "recheck", done: passes, total: recheckPasses });
    if (recheckDelayMs > 0) await sleep(recheckDelayMs);
    await reader.reread(snapshot, evaluation.suspects);
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
    stranded: strandedSeats(event, snapshot.seats, maxOffenders),
  };
}
