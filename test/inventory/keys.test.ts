import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  expiryBound,
  expirySortKey,
  keys,
  parseSeatId,
  seatIdOf,
  shardOf,
  SWEEP_SHARDS,
} from "../../src/inventory/keys.js";
import { parseEventInput } from "../../src/inventory/schema.js";

describe("inventory keys (no I/O)", () => {
  it("parses canonical seat ids and refuses the rest", () => {
    expect(parseSeatId("A-12-7")).toEqual({ sectionId: "A", row: 12, number: 7 });
    expect(parseSeatId("Upper_2-1-99999")).toEqual({ sectionId: "Upper_2", row: 1, number: 99_999 });
    for (const bad of ["A-012-7", "A-0-1", "A-1", "A-1-1-1", "A#B-1-1", "-1-1", "A-1-100000", "A-1-1 ", ""]) {
      expect(parseSeatId(bad), bad).toBeNull();
    }
  });

  it("round-trips seat ids and keys order seats by row, then number", () => {
    fc.assert(
      fc.property(
        fc.stringMatching(/^[A-Za-z0-9_]{1,32}$/),
        fc.integer({ min: 1, max: 99_999 }),
        fc.integer({ min: 1, max: 99_999 }),
        (sectionId, row, number) => {
          const ref = { sectionId, row, number };
          expect(parseSeatId(seatIdOf(ref))).toEqual(ref);
        },
      ),
    );
    const a = keys.seat("e", { sectionId: "A", row: 2, number: 10 }).SK;
    const b = keys.seat("e", { sectionId: "A", row: 10, number: 1 }).SK;
    const c = keys.seat("e", { sectionId: "A", row: 2, number: 9 }).SK;
    expect([a, b, c].sort()).toEqual([c, a, b]);
  });

  it("every key carries the event", () => {
    const all = [
      keys.event("E1").PK,
      keys.seat("E1", { sectionId: "A", row: 1, number: 1 }).PK,
      keys.availableSeatsPartition("E1", "A"),
      keys.generalAdmission("E1", "GA").PK,
      keys.hold("E1", "h").PK,
      keys.purchase("E1", "p").PK,
      keys.outbox("E1", "p").PK,
      keys.unsentOutboxPartition("E1", 0),
      keys.unacknowledgedOutboxPartition("E1", 15),
      keys.purchasesPartition("E1", 7),
      keys.heldSeatsPartition("E1", 3),
      keys.heldAdmissionsPartition("E1", "GA"),
      keys.fan("E1", "any fan # id").PK,
    ];
    for (const k of all) expect(k.startsWith("EVT#E1")).toBe(true);
    // An event id that is a prefix of another never shares a partition with it.
    expect(keys.event("E1").PK).not.toBe(keys.event("E12").PK);
    expect(keys.seat("E1", { sectionId: "A", row: 1, number: 1 }).PK.startsWith("EVT#E1#")).toBe(true);
  });

  it("names a fan's ledger by a hash of the fan id, never the id itself", () => {
    fc.assert(
      fc.property(fc.string({ minLength: 1, maxLength: 128 }), (fanId) => {
        const { PK, SK } = keys.fan("E1", fanId);
        expect(PK).toMatch(/^EVT#E1#FAN#[0-9a-f]{32}$/);
        expect(SK).toBe("FAN");
        expect(keys.fan("E1", fanId).PK).toBe(PK);
      }),
    );
    expect(keys.fan("E1", "a").PK).not.toBe(keys.fan("E1", "b").PK);
    expect(keys.fan("E1", "a").PK).not.toBe(keys.fan("E2", "a").PK);
  });

  it("expiry sort keys compare like the instants they hold", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 4_000_000_000_000 }),
        fc.integer({ min: 0, max: 4_000_000_000_000 }),
        fc.string({ minLength: 1, maxLength: 40 }),
        (expiresAt, now, id) => {
          const expired = expirySortKey(expiresAt, id) < expiryBound(now);
          expect(expired).toBe(expiresAt <= now);
        },
      ),
    );
  });

  it("shards are stable and in range", () => {
    const seen = new Set<number>();
    for (let i = 0; i < 2_000; i++) {
      const s = shardOf(`A-${i}-1`);
      expect(s).toBeGreaterThanOrEqual(0);
      expect(s).toBeLessThan(SWEEP_SHARDS);
      seen.add(s);
    }
    expect(seen.size).toBe(SWEEP_SHARDS);
    expect(shardOf("A-1-1")).toBe(shardOf("A-1-1"));
  });

  it("validates event input", () => {
    const good = {
      name: "n",
      onSaleAt: "2026-12-01T18:00:00Z",
      holdSeconds: 480,
      maxSeatsPerFan: 8,
      sections: [{ id: "A", tier: "Floor", price: 15_000, rows: 40, seatsPerRow: 50 }],
      generalAdmission: [{ id: "GA", tier: "Standing", price: 6_000, capacity: 5_000 }],
      waitingRoom: { admitPerSecond: 50, maxActive: 2_000, sessionSeconds: 900 },
    };
    expect(parseEventInput(good).ok).toBe(true);
    const dup = parseEventInput({ ...good, generalAdmission: [{ ...good.generalAdmission[0], id: "A" }] });
    expect(dup.ok).toBe(false);
    const badId = parseEventInput({ ...good, sections: [{ ...good.sections[0], id: "A-B" }] });
    expect(badId.ok).toBe(false);
    const huge = parseEventInput({ ...good, sections: [{ ...good.sections[0], rows: 9_999, seatsPerRow: 9_999 }] });
    expect(huge.ok).toBe(false);
  });
});
