import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SWEEP_SHARDS, type Hold, type HoldResult, type SweepResult } from "../../src/inventory/index.js";
import { eventInput, eventually, type InventoryFixture, setupInventory, uniqueEventId } from "./fixtures.js";

let fx: InventoryFixture;
beforeAll(async () => {
  fx = await setupInventory("sweep");
});
afterAll(() => fx.close());

function held(r: HoldResult): Hold {
  if (!r.ok) throw new Error(`expected a hold, got ${JSON.stringify(r)}`);
  return r.hold;
}

const shards = Array.from({ length: SWEEP_SHARDS }, (_, s) => s);

/** Sweeps every shard, again and again, adding up, until `check` passes on the running total. */
async function sweepUntil(eventId: string, check: (r: SweepResult) => void, start?: SweepResult): Promise<SweepResult> {
  let sum = start ?? total([]);
  try {
    check(sum);
    return sum;
  } catch {
    // not there yet
  }
  await eventually(async () => {
    sum = total([
      sum,
      ...(await Promise.all(shards.map((s) => fx.inventory.holds.sweepExpired({ eventId, shard: s })))),
    ]);
    return sum;
  }, check);
  return sum;
}

function total(results: SweepResult[]): SweepResult {
  return results.reduce(
    (a, r) => ({
      examined: a.examined + r.examined,
      seatsReleased: a.seatsReleased + r.seatsReleased,
      generalAdmissionHoldsExpired: a.generalAdmissionHoldsExpired + r.generalAdmissionHoldsExpired,
      generalAdmissionQuantityReturned: a.generalAdmissionQuantityReturned + r.generalAdmissionQuantityReturned,
      releasedSeats: [...a.releasedSeats, ...r.releasedSeats],
    }),
    {
      examined: 0,
      seatsReleased: 0,
      releasedSeats: [] as string[],
      generalAdmissionHoldsExpired: 0,
      generalAdmissionQuantityReturned: 0,
    },
  );
}

describe("sweepExpired", () => {
  it("resets expired seats and returns expired general admission; leaves live holds alone", async () => {
    const eventId = uniqueEventId("sweep");
    await fx.inventory.events.create({ eventId, input: eventInput(fx.clock) });
    const short = held(
      await fx.inventory.holds.holdSeats({
        eventId,
        fanId: "fan-1",
        seatIds: ["A-1-1", "A-1-2", "A-1-3"],
        holdSeconds: 30,
      }),
    );
    const long = held(
      await fx.inventory.holds.holdSeats({ eventId, fanId: "fan-2", seatIds: ["A-2-1"], holdSeconds: 300 }),
    );
    const gaShort = held(
      await fx.inventory.holds.holdGeneralAdmission({
        eventId,
        fanId: "fan-3",
        areaId: "GA",
        quantity: 4,
        holdSeconds: 30,
      }),
    );
    const gaLong = held(
      await fx.inventory.holds.holdGeneralAdmission({
        eventId,
        fanId: "fan-4",
        areaId: "GA",
        quantity: 2,
        holdSeconds: 300,
      }),
    );

    // Nothing has expired yet.
    expect(
      total(await Promise.all(shards.map((s) => fx.inventory.holds.sweepExpired({ eventId, shard: s })))).seatsReleased,
    ).toBe(0);

    fx.clock.advance(30_000);
    await eventually(
      () => fx.inventory.seats.eventCounts({ eventId }),
      (counts) => expect(counts?.seats).toMatchObject({ available: 16, held: 1, expiredHolds: 3 }),
    );
    // Sweep until the index has shown every expired entry (at once here; eventually in DynamoDB).
    const first = await sweepUntil(eventId, (r) =>
      expect(r).toMatchObject({
        seatsReleased: 3,
        generalAdmissionHoldsExpired: 1,
        generalAdmissionQuantityReturned: 4,
      }),
    );
    expect(first.releasedSeats.sort()).toEqual(["A-1-1", "A-1-2", "A-1-3"]);

    const counts = await eventually(
      () => fx.inventory.seats.eventCounts({ eventId }),
      (c) => expect(c?.seats).toMatchObject({ available: 19, held: 1, expiredHolds: 0, sold: 0 }),
    );
    expect(counts?.generalAdmission.GA).toMatchObject({ available: 8, held: 2, sold: 0 });
    expect((await fx.inventory.holds.get({ eventId, holdId: short.holdId, fanId: short.fanId }))?.status).toBe(
      "expired",
    );
    expect((await fx.inventory.holds.get({ eventId, holdId: long.holdId, fanId: long.fanId }))?.status).toBe("held");
    expect((await fx.inventory.holds.get({ eventId, holdId: gaLong.holdId, fanId: gaLong.fanId }))?.status).toBe(
      "held",
    );

    // A second pass finds nothing left to do.
    const again = total(await Promise.all(shards.map((s) => fx.inventory.holds.sweepExpired({ eventId, shard: s }))));
    expect(again).toMatchObject({ seatsReleased: 0, generalAdmissionQuantityReturned: 0 });

    // Releasing the swept GA hold gives nothing back a second time.
    expect(await fx.inventory.holds.release({ eventId, holdId: gaShort.holdId, fanId: "fan-3" })).toMatchObject({
      ok: true,
      hold: { status: "expired" },
    });
    expect(await fx.inventory.seats.generalAdmission({ eventId, areaId: "GA" })).toMatchObject({
      available: 8,
      held: 2,
    });
    await expect(fx.inventory.holds.sweepExpired({ eventId, shard: SWEEP_SHARDS })).rejects.toThrow(RangeError);
  });

  it("never resets a seat someone re-held after its old hold expired", async () => {
    const eventId = uniqueEventId("sweep");
    await fx.inventory.events.create({ eventId, input: eventInput(fx.clock) });
    held(await fx.inventory.holds.holdSeats({ eventId, fanId: "fan-1", seatIds: ["A-3-3"], holdSeconds: 10 }));
    fx.clock.advance(10_000);
    const fresh = held(
      await fx.inventory.holds.holdSeats({ eventId, fanId: "fan-2", seatIds: ["A-3-3"], holdSeconds: 600 }),
    );
    // A sweeper that read the old entry before the re-hold still finds the condition false.
    const r = total(
      await Promise.all(shards.map((s) => fx.inventory.holds.sweepExpired({ eventId, shard: s, now: fx.clock.now() }))),
    );
    expect(r.seatsReleased).toBe(0);
    const page = await fx.inventory.seats.listSection({ eventId, sectionId: "A", consistent: true });
    expect(page?.seats.find((s) => s.id === "A-3-3")).toMatchObject({ status: "held", holdId: fresh.holdId });
  });

  it("is safe with many sweepers at once: every expired seat and place is returned exactly once", async () => {
    const eventId = uniqueEventId("sweepers");
    await fx.inventory.events.create({
      eventId,
      input: eventInput(fx.clock, {
        maxSeatsPerFan: 10,
        sections: [{ id: "A", tier: "Floor", price: 100, rows: 20, seatsPerRow: 10 }],
        generalAdmission: [
          { id: "GA", tier: "Standing", price: 10, capacity: 100 },
          { id: "GB", tier: "Standing", price: 10, capacity: 100 },
        ],
      }),
    });
    // 200 seats held in 20 holds, and 40 general-admission holds, all expiring together.
    await Promise.all(
      Array.from({ length: 20 }, (_, row) =>
        fx.inventory.holds.holdSeats({
          eventId,
          fanId: `fan-${row}`,
          seatIds: Array.from({ length: 10 }, (_, n) => `A-${row + 1}-${n + 1}`),
          holdSeconds: 60,
        }),
      ),
    );
    await Promise.all(
      Array.from({ length: 40 }, (_, i) =>
        fx.inventory.holds.holdGeneralAdmission({
          eventId,
          fanId: `ga-${i}`,
          areaId: i % 2 ? "GA" : "GB",
          quantity: 1 + (i % 4),
          holdSeconds: 60,
        }),
      ),
    );
    const gaTotal = Array.from({ length: 40 }, (_, i) => 1 + (i % 4)).reduce((a, b) => a + b, 0);
    fx.clock.advance(60_000);

    // Six sweeper processes, each sweeping every shard, all at once.
    const sweepers = fx.gateways(6);
    const results = await Promise.all(
      sweepers.flatMap((inv) => shards.map((s) => inv.holds.sweepExpired({ eventId, shard: s }))),
    );
    // Whatever the index had not shown yet, later passes pick up; the total must still be exact.
    const sum = await sweepUntil(
      eventId,
      (r) => expect(r.seatsReleased + r.generalAdmissionHoldsExpired).toBe(240),
      total(results),
    );
    expect(sum.seatsReleased).toBe(200);
    expect(new Set(sum.releasedSeats).size).toBe(200);
    expect(sum.generalAdmissionHoldsExpired).toBe(40);
    expect(sum.generalAdmissionQuantityReturned).toBe(gaTotal);
    const counts = await fx.inventory.seats.eventCounts({ eventId });
    expect(counts?.seats).toMatchObject({ available: 200, held: 0, expiredHolds: 0 });
    expect(counts?.generalAdmission.GA).toMatchObject({ available: 100, held: 0, sold: 0 });
    expect(counts?.generalAdmission.GB).toMatchObject({ available: 100, held: 0, sold: 0 });
  });
});
