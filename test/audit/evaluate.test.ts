/** The audit's checks as a pure function of what was read: no I/O. */
import { describe, expect, it } from "vitest";
import { type AuditCheckName, type AuditSnapshot, chargesOfEvent, evaluateAudit } from "../../src/audit/audit.js";
import type { EventDefinition, Purchase, SeatView } from "../../src/inventory/index.js";
import type { ChargeRecord } from "../../src/payments/simulated.js";

const event: EventDefinition = {
  eventId: "ev1",
  name: "Finals",
  onSaleAt: "2030-01-01T00:00:00.000Z",
  holdSeconds: 480,
  maxSeatsPerFan: 8,
  sections: [{ id: "A", tier: "Floor", price: 100, rows: 1, seatsPerRow: 3 }],
  generalAdmission: [{ id: "GA", tier: "Standing", price: 50, capacity: 10 }],
  waitingRoom: { admitPerSecond: 1, maxActive: 1, sessionSeconds: 60 },
  version: 1,
  layoutComplete: true,
  totalSeats: 3,
  createdAt: "2030-01-01T00:00:00.000Z",
  updatedAt: "2030-01-01T00:00:00.000Z",
};

const seat = (id: string, status: SeatView["status"], purchaseId?: string): SeatView => ({
  id,
  status,
  tier: "Floor",
  price: 100,
  ...(purchaseId ? { purchaseId } : {}),
});

const purchase = (
  id: string,
  status: Purchase["status"],
  seats: string[],
  extra: Partial<Purchase> = {},
): Purchase => ({
  purchaseId: id,
  eventId: "ev1",
  holdId: "h".repeat(32),
  fanId: "fan",
  status,
  seats,
  amount: seats.length * 100,
  createdAt: "2030-01-01T00:00:00.000Z",
  ...extra,
});

const charge = (key: string, amount: number, extra: Partial<ChargeRecord> = {}): ChargeRecord => ({
  chargeId: `ch_${key}_${amount}`,
  idempotencyKey: key,
  amount,
  createdAt: "2030-01-01T00:00:00.000Z",
  refunded: false,
  ...extra,
});

function snapshot(parts: {
  seats?: SeatView[];
  purchases?: Purchase[];
  ga?: { available: number; held: number; sold: number } | null;
  charges?: ChargeRecord[];
}): AuditSnapshot {
  const ga = parts.ga === undefined ? { available: 10, held: 0, sold: 0 } : parts.ga;
  return {
    event,
    seats: new Map(
      (parts.seats ?? [seat("A-1-1", "available"), seat("A-1-2", "available"), seat("A-1-3", "available")]).map((s) => [
        s.id,
        s,
      ]),
    ),
    purchases: new Map((parts.purchases ?? []).map((p) => [p.purchaseId, p])),
    areas: new Map([["GA", ga ? { areaId: "GA", capacity: 10, ...ga } : null]]),
    charges: parts.charges,
  };
}

function failures(s: AuditSnapshot, options = {}): Partial<Record<AuditCheckName, string[]>> {
  const out: Partial<Record<AuditCheckName, string[]>> = {};
  for (const c of evaluateAudit(s, options).checks) {
    if (c.status === "fail") out[c.name] = c.offenders.map((o) => `${o.id}: ${o.problem}`);
  }
  return out;
}

describe("evaluateAudit", () => {
  it("passes an untouched event, with the charge checks skipped when there are no charges to read", () => {
    const { checks } = evaluateAudit(snapshot({}));
    expect(checks.map((c) => [c.name, c.status])).toEqual([
      ["seats_sold_once", "pass"],
      ["sold_seats_match_purchases", "pass"],
      ["general_admission_bounds", "pass"],
      ["general_admission_sold", "pass"],
      ["fans_within_limit", "pass"],
      ["captured_charges_confirmed", "skip"],
      ["refunds_match_purchases", "skip"],
      ["confirmed_purchases_charged", "skip"],
      ["no_pending_purchases", "pass"],
    ]);
  });

  it("names a seat two confirmed purchases list, and a purchase listing a seat twice", () => {
    const s = snapshot({
      seats: [seat("A-1-1", "sold", "ev1-a"), seat("A-1-2", "sold", "ev1-b"), seat("A-1-3", "available")],
      purchases: [
        purchase("ev1-a", "confirmed", ["A-1-1"]),
        purchase("ev1-b", "confirmed", ["A-1-2", "A-1-1", "A-1-2"]),
      ],
    });
    const f = failures(s);
    expect(f.seats_sold_once).toEqual([
      "ev1-b: lists seat A-1-2 twice",
      "A-1-1: in 2 confirmed purchases: ev1-a, ev1-b",
    ]);
    expect(f.sold_seats_match_purchases).toEqual(["ev1-b: lists seat A-1-1, which is sold to ev1-a"]);
    const { suspects } = evaluateAudit(s);
    expect([...suspects.purchaseIds].sort()).toEqual(["ev1-a", "ev1-b"]);
    expect([...suspects.sections]).toEqual(["A"]);
  });

  it("names a confirmed purchase listing a seat the event does not have", () => {
    const f = failures(snapshot({ purchases: [purchase("ev1-a", "confirmed", ["Z-1-1"])] }));
    expect(f.sold_seats_match_purchases).toEqual(["ev1-a: lists seat Z-1-1, which does not exist"]);
  });

  it("checks general admission against capacity and confirmed quantities", () => {
    const gaPurchase = (id: string, status: Purchase["status"], quantity: number, areaId = "GA") =>
      purchase(id, status, [], { generalAdmission: { areaId, quantity }, amount: quantity * 50 });
    expect(failures(snapshot({ ga: null })).general_admission_bounds).toEqual(["GA: area item missing"]);
    expect(
      failures(
        snapshot({
          ga: { available: 6, held: 0, sold: 4 },
          purchases: [gaPurchase("ev1-a", "confirmed", 3), gaPurchase("ev1-b", "failed", 1)],
        }),
      ).general_admission_sold,
    ).toEqual(["GA: sold 4, confirmed purchases bought 3"]);
    expect(
      failures(snapshot({ purchases: [gaPurchase("ev1-a", "confirmed", 1, "VIP")] })).general_admission_sold,
    ).toEqual(["VIP: confirmed purchases name an area the event does not have"]);
  });

  it("names a fan whose confirmed seats and places together pass maxSeatsPerFan (8)", () => {
    const ga = (quantity: number) => ({ generalAdmission: { areaId: "GA", quantity }, amount: quantity * 50 });
    const s = snapshot({
      seats: [seat("A-1-1", "sold", "ev1-a"), seat("A-1-2", "sold", "ev1-b"), seat("A-1-3", "sold", "ev1-d")],
      ga: { available: 0, held: 0, sold: 10 },
      purchases: [
        // fan: 1 seat + 7 places = 8, at the limit; a pending and a failed purchase do not count.
        purchase("ev1-a", "confirmed", ["A-1-1"]),
        purchase("ev1-c", "confirmed", [], ga(7)),
        purchase("ev1-p", "pending", ["A-1-3"]),
        purchase("ev1-f", "failed", [], ga(5)),
        // greedy: 1 + 1 seats and 3 places = 5.
        purchase("ev1-b", "confirmed", ["A-1-2"], { fanId: "greedy" }),
        purchase("ev1-d", "confirmed", ["A-1-3"], { fanId: "greedy" }),
        purchase("ev1-e", "confirmed", [], { fanId: "greedy", ...ga(3) }),
      ],
    });
    expect(failures(s).fans_within_limit).toBeUndefined();
    const over = snapshot({
      seats: [seat("A-1-1", "sold", "ev1-a"), seat("A-1-2", "sold", "ev1-b"), seat("A-1-3", "available")],
      ga: { available: 0, held: 0, sold: 10 },
      purchases: [
        purchase("ev1-a", "confirmed", ["A-1-1"]),
        purchase("ev1-c", "confirmed", [], ga(7)),
        purchase("ev1-b", "confirmed", ["A-1-2"]),
        purchase("ev1-e", "confirmed", [], { fanId: "other", ...ga(3) }),
      ],
    });
    expect(failures(over).fans_within_limit).toEqual([
      "fan: bought 9 in 3 confirmed purchases (ev1-a, ev1-c, ev1-b), the limit is 8",
    ]);
    const { checks, suspects } = evaluateAudit(over);
    expect(checks.find((c) => c.name === "fans_within_limit")?.summary).toBe("1 fan past the limit of 8");
    expect([...suspects.purchaseIds].sort()).toEqual(["ev1-a", "ev1-b", "ev1-c"]);
  });

  it("checks money both ways", () => {
    const s = snapshot({
      seats: [seat("A-1-1", "sold", "ev1-a"), seat("A-1-2", "sold", "ev1-b"), seat("A-1-3", "available")],
      purchases: [
        purchase("ev1-a", "confirmed", ["A-1-1"], { chargeId: "ch_recorded" }),
        purchase("ev1-b", "confirmed", ["A-1-2"]),
        purchase("ev1-c", "refunded", []),
      ],
      charges: [charge("ev1-a", 100), charge("ev1-b", 100), charge("ev1-b", 100, { chargeId: "ch_second" })],
    });
    const f = failures(s);
    expect(f.captured_charges_confirmed).toEqual(["ev1-b: 2 captured charges under one key"]);
    expect(f.confirmed_purchases_charged).toEqual(["ev1-a: records charge ch_recorded, the provider has ch_ev1-a_100"]);
    expect(f.refunds_match_purchases).toEqual(["ev1-c: refunded, but no charge under its id"]);
  });

  it("lets a charged purchase still pending pass only while the sale runs", () => {
    const s = snapshot({
      purchases: [purchase("ev1-a", "pending", ["A-1-1"]), purchase("ev1-b", "pending", ["A-1-2"])],
      charges: [charge("ev1-a", 100), charge("ev1-b", 100, { refunded: true, refundId: "re_1" })],
    });
    expect(failures(s)).toEqual({
      captured_charges_confirmed: ["ch_ev1-a_100: captured 100 for ev1-a, which is pending"],
      refunds_match_purchases: ["ch_ev1-b_100: refunded, but ev1-b is still pending"],
      no_pending_purchases: [
        "ev1-a: pending since 2030-01-01T00:00:00.000Z",
        "ev1-b: pending since 2030-01-01T00:00:00.000Z",
      ],
    });
    expect(failures(s, { allowPending: true })).toEqual({});
  });

  it("keeps only this event's charges", () => {
    const all = [charge("ev1-a", 1), charge("ev10-a", 1), charge("xev1-a", 1), charge("ev1", 1)];
    expect(chargesOfEvent(all, "ev1").map((c) => c.idempotencyKey)).toEqual(["ev1-a"]);
  });
});
