import { DynamoDBDocumentClient, UpdateCommand } from "@aws-sdk/lib-dynamodb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Hold, HoldResult, SeatView } from "../../src/inventory/index.js";
import { REFUND_DUE, SWEEP_SHARDS } from "../../src/inventory/index.js";
import { eventInput, eventually, type InventoryFixture, setupInventory, uniqueEventId } from "./fixtures.js";

let fx: InventoryFixture;
beforeAll(async () => {
  fx = await setupInventory("purchases");
});
afterAll(() => fx.close());

async function newEvent(overrides = {}): Promise<string> {
  const eventId = uniqueEventId("buy");
  const created = await fx.inventory.events.create({ eventId, input: eventInput(fx.clock, overrides) });
  expect(created.ok).toBe(true);
  return eventId;
}

function held(r: HoldResult): Hold {
  if (!r.ok) throw new Error(`expected a hold, got ${JSON.stringify(r)}`);
  return r.hold;
}

async function seat(eventId: string, id: string): Promise<SeatView | undefined> {
  const page = await fx.inventory.seats.listSection({ eventId, sectionId: "A", consistent: true });
  return page?.seats.find((s) => s.id === id);
}

async function sweepAll(eventId: string) {
  let seatsReleased = 0;
  for (let s = 0; s < SWEEP_SHARDS; s++)
    seatsReleased += (await fx.inventory.holds.sweepExpired({ eventId, shard: s })).seatsReleased;
  return seatsReleased;
}

describe("createPendingPurchase", () => {
  it("writes the purchase pending, and a retry with the same id finds it", async () => {
    const eventId = await newEvent();
    const hold = held(
      await fx.inventory.holds.holdSeats({ eventId, fanId: "fan-1", seatIds: ["A-1-1", "A-1-2"], holdSeconds: 480 }),
    );
    const first = await fx.inventory.purchases.createPending({
      eventId,
      holdId: hold.holdId,
      fanId: "fan-1",
      purchaseId: "pur_1",
    });
    expect(first).toMatchObject({
      ok: true,
      created: true,
      purchase: {
        purchaseId: "pur_1",
        status: "pending",
        seats: ["A-1-1", "A-1-2"],
        amount: 30_000,
        holdId: hold.holdId,
      },
    });
    const retries = await Promise.all(
      [1, 2, 3].map(() =>
        fx.inventory.purchases.createPending({ eventId, holdId: hold.holdId, fanId: "fan-1", purchaseId: "pur_1" }),
      ),
    );
    for (const r of retries) expect(r).toEqual({ ...first, created: false });
    expect(await fx.inventory.purchases.get({ eventId, purchaseId: "pur_1" })).toEqual(first.ok && first.purchase);

    const other = held(
      await fx.inventory.holds.holdSeats({ eventId, fanId: "fan-1", seatIds: ["A-2-1"], holdSeconds: 480 }),
    );
    expect(
      await fx.inventory.purchases.createPending({
        eventId,
        holdId: other.holdId,
        fanId: "fan-1",
        purchaseId: "pur_1",
      }),
    ).toEqual({
      ok: false,
      reason: "purchase_conflict",
    });
    expect(
      await fx.inventory.purchases.createPending({ eventId, holdId: hold.holdId, fanId: "fan-2", purchaseId: "pur_2" }),
    ).toEqual({
      ok: false,
      reason: "hold_not_owned",
    });
    expect(
      await fx.inventory.purchases.createPending({
        eventId,
        holdId: "f".repeat(32),
        fanId: "fan-1",
        purchaseId: "pur_3",
      }),
    ).toMatchObject({
      ok: false,
      reason: "not_found",
    });
    fx.clock.advance(480_000);
    expect(
      await fx.inventory.purchases.createPending({
        eventId,
        holdId: other.holdId,
        fanId: "fan-1",
        purchaseId: "pur_4",
      }),
    ).toEqual({
      ok: false,
      reason: "hold_expired",
    });
  });
});

describe("confirm", () => {
  it("sells every seat, confirms hold and purchase, and writes one unsent BookingConfirmed", async () => {
    const eventId = await newEvent();
    const hold = held(
      await fx.inventory.holds.holdSeats({
        eventId,
        fanId: "fan-1",
        seatIds: ["A-1-1", "A-1-2", "A-1-3"],
        holdSeconds: 480,
      }),
    );
    await fx.inventory.purchases.createPending({ eventId, holdId: hold.holdId, fanId: "fan-1", purchaseId: "pur_ok" });
    fx.clock.advance(10_000);
    const result = await fx.inventory.purchases.confirm({
      eventId,
      holdId: hold.holdId,
      fanId: "fan-1",
      purchaseId: "pur_ok",
    });
    expect(result).toMatchObject({
      ok: true,
      alreadyConfirmed: false,
      purchase: { status: "confirmed", seats: ["A-1-1", "A-1-2", "A-1-3"], amount: 45_000 },
    });
    for (const id of ["A-1-1", "A-1-2", "A-1-3"]) {
      expect(await seat(eventId, id)).toMatchObject({ status: "sold", purchaseId: "pur_ok", holderId: "fan-1" });
    }
    expect(await fx.inventory.holds.get({ eventId, holdId: hold.holdId, fanId: "fan-1" })).toMatchObject({
      status: "confirmed",
      purchaseId: "pur_ok",
    });
    expect((await fx.inventory.purchases.get({ eventId, purchaseId: "pur_ok" }))?.status).toBe("confirmed");

    const outbox = await eventually(
      () => fx.inventory.outbox.listUnsent({ eventId }),
      (o) => expect(o).toHaveLength(1),
    );
    expect(outbox[0]).toMatchObject({
      type: "BookingConfirmed",
      purchaseId: "pur_ok",
      state: "unsent",
      payload: { fanId: "fan-1", seats: ["A-1-1", "A-1-2", "A-1-3"], amount: 45_000, holdId: hold.holdId },
    });
    expect(await fx.inventory.outbox.markPublished({ eventId, purchaseId: "pur_ok", checkAfterMs: 30_000 })).toBe(true);
    expect(await fx.inventory.outbox.markPublished({ eventId, purchaseId: "pur_ok", checkAfterMs: 30_000 })).toBe(
      false,
    );
    await eventually(
      () => fx.inventory.outbox.listUnsent({ eventId }),
      (o) => expect(o).toEqual([]),
    );

    // Sold never changes: not by a hold long after, a release, or a sweeper.
    fx.clock.advance(3_600_000);
    expect(
      await fx.inventory.holds.holdSeats({ eventId, fanId: "fan-2", seatIds: ["A-1-1"], holdSeconds: 60 }),
    ).toMatchObject({ reason: "seat_unavailable" });
    expect(await fx.inventory.holds.release({ eventId, holdId: hold.holdId, fanId: "fan-1" })).toEqual({
      ok: false,
      reason: "hold_confirmed",
    });
    expect(await sweepAll(eventId)).toBe(0);
    expect(await seat(eventId, "A-1-1")).toMatchObject({ status: "sold", purchaseId: "pur_ok" });
    await eventually(
      () => fx.inventory.seats.eventCounts({ eventId }),
      (counts) => expect(counts?.seats).toMatchObject({ sold: 3, held: 0, available: 17 }),
    );
  });

  it("returns the first result to a repeat, however often and concurrently it is sent", async () => {
    const eventId = await newEvent();
    const hold = held(
      await fx.inventory.holds.holdSeats({ eventId, fanId: "fan-1", seatIds: ["A-2-1", "A-2-2"], holdSeconds: 480 }),
    );
    await fx.inventory.purchases.createPending({ eventId, holdId: hold.holdId, fanId: "fan-1", purchaseId: "pur_dup" });
    const gateways = fx.gateways(2);
    const results = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        gateways[i % 2]!.purchases.confirm({ eventId, holdId: hold.holdId, fanId: "fan-1", purchaseId: "pur_dup" }),
      ),
    );
    expect(results.every((r) => r.ok)).toBe(true);
    expect(results.filter((r) => r.ok && !r.alreadyConfirmed)).toHaveLength(1);
    const first = results.find((r) => r.ok && !r.alreadyConfirmed);
    fx.clock.advance(1_000_000);
    const later = await fx.inventory.purchases.confirm({
      eventId,
      holdId: hold.holdId,
      fanId: "fan-1",
      purchaseId: "pur_dup",
    });
    expect(later).toEqual({ ok: true, alreadyConfirmed: true, purchase: first?.ok && first.purchase });
    await eventually(
      () => fx.inventory.outbox.listUnsent({ eventId }),
      (o) => expect(o).toHaveLength(1),
    );
  });

  it("fails a confirmation that arrives after the hold expired, leaving the seat to its new holder", async () => {
    const eventId = await newEvent();
    const late = held(
      await fx.inventory.holds.holdSeats({ eventId, fanId: "fan-late", seatIds: ["A-3-1", "A-3-2"], holdSeconds: 60 }),
    );
    await fx.inventory.purchases.createPending({
      eventId,
      holdId: late.holdId,
      fanId: "fan-late",
      purchaseId: "pur_late",
    });
    fx.clock.advance(60_000); // expiry is inclusive: at expiresAt the hold is over
    const next = held(
      await fx.inventory.holds.holdSeats({ eventId, fanId: "fan-next", seatIds: ["A-3-2"], holdSeconds: 60 }),
    );

    const result = await fx.inventory.purchases.confirm({
      eventId,
      holdId: late.holdId,
      fanId: "fan-late",
      purchaseId: "pur_late",
    });
    expect(result).toMatchObject({ ok: false, reason: "hold_expired" });
    expect(await seat(eventId, "A-3-2")).toMatchObject({ status: "held", holdId: next.holdId, holderId: "fan-next" });
    expect((await seat(eventId, "A-3-1"))?.status).toBe("available");
    expect((await fx.inventory.purchases.get({ eventId, purchaseId: "pur_late" }))?.status).toBe("pending");
    expect(await fx.inventory.outbox.listUnsent({ eventId })).toEqual([]);

    // The new holder buys it.
    await fx.inventory.purchases.createPending({
      eventId,
      holdId: next.holdId,
      fanId: "fan-next",
      purchaseId: "pur_next",
    });
    expect(
      await fx.inventory.purchases.confirm({ eventId, holdId: next.holdId, fanId: "fan-next", purchaseId: "pur_next" }),
    ).toMatchObject({ ok: true });
    expect(await seat(eventId, "A-3-2")).toMatchObject({ status: "sold", purchaseId: "pur_next" });
    // The saga then refunds the late purchase.
    expect(
      await fx.inventory.purchases.markRefunded({ eventId, purchaseId: "pur_late", reason: "hold expired" }),
    ).toMatchObject({
      ok: true,
      purchase: { status: "refunded", failureReason: "hold expired" },
    });
  });

  it("fails the whole confirmation when the transaction finds one seat no longer this hold's", async () => {
    const eventId = await newEvent();
    const hold = held(
      await fx.inventory.holds.holdSeats({
        eventId,
        fanId: "fan-1",
        seatIds: ["A-4-1", "A-4-2", "A-4-3"],
        holdSeconds: 60,
      }),
    );
    await fx.inventory.purchases.createPending({
      eventId,
      holdId: hold.holdId,
      fanId: "fan-1",
      purchaseId: "pur_edge",
    });
    // Another writer moved one seat behind the hold record's back (as a lost race would): the
    // pre-checks on the hold record pass, only the transaction's seat conditions can catch it.
    const doc = DynamoDBDocumentClient.from(fx.client);
    await doc.send(
      new UpdateCommand({
        TableName: fx.tableName,
        Key: { PK: `EVT#${eventId}#SEC#A`, SK: "SEAT#00004#00002" },
        UpdateExpression: "SET holdId = :other, holderId = :fan",
        ExpressionAttributeValues: { ":other": "e".repeat(32), ":fan": "fan-other" },
      }),
    );
    const r = await fx.inventory.purchases.confirm({
      eventId,
      holdId: hold.holdId,
      fanId: "fan-1",
      purchaseId: "pur_edge",
    });
    expect(r).toEqual({ ok: false, reason: "hold_expired", seats: ["A-4-2"] });
    expect((await seat(eventId, "A-4-1"))?.status).toBe("held");
    expect((await seat(eventId, "A-4-3"))?.status).toBe("held");
    expect((await fx.inventory.purchases.get({ eventId, purchaseId: "pur_edge" }))?.status).toBe("pending");
    expect((await fx.inventory.holds.get({ eventId, holdId: hold.holdId, fanId: "fan-1" }))?.status).toBe("held");
    expect(await fx.inventory.outbox.listUnsent({ eventId })).toEqual([]);
  });

  it("lets exactly one of release and confirm win when they race", async () => {
    const eventId = await newEvent({ sections: [{ id: "A", tier: "Floor", price: 100, rows: 10, seatsPerRow: 8 }] });
    const gateways = fx.gateways(2);
    for (let row = 1; row <= 10; row++) {
      const seats = [1, 2, 3, 4].map((n) => `A-${row}-${n}`);
      const hold = held(
        await fx.inventory.holds.holdSeats({ eventId, fanId: `fan-${row}`, seatIds: seats, holdSeconds: 480 }),
      );
      await fx.inventory.purchases.createPending({
        eventId,
        holdId: hold.holdId,
        fanId: `fan-${row}`,
        purchaseId: `pur_r${row}`,
      });
      const [released, confirmed] = await Promise.all([
        gateways[0]!.holds.release({ eventId, holdId: hold.holdId, fanId: `fan-${row}` }),
        gateways[1]!.purchases.confirm({
          eventId,
          holdId: hold.holdId,
          fanId: `fan-${row}`,
          purchaseId: `pur_r${row}`,
        }),
      ]);
      const page = await fx.inventory.seats.listSection({ eventId, sectionId: "A", consistent: true });
      const statuses = page!.seats.filter((s) => seats.includes(s.id)).map((s) => s.status);
      if (confirmed.ok) {
        expect(released).toEqual({ ok: false, reason: "hold_confirmed" });
        expect(statuses).toEqual(["sold", "sold", "sold", "sold"]);
      } else {
        expect(released.ok).toBe(true);
        expect(statuses).toEqual(["available", "available", "available", "available"]);
      }
    }
  });

  it("confirms a general-admission hold: held moves to sold on the area", async () => {
    const eventId = await newEvent();
    const hold = held(
      await fx.inventory.holds.holdGeneralAdmission({
        eventId,
        fanId: "fan-1",
        areaId: "GA",
        quantity: 3,
        holdSeconds: 480,
      }),
    );
    await fx.inventory.purchases.createPending({ eventId, holdId: hold.holdId, fanId: "fan-1", purchaseId: "pur_ga" });
    expect(
      await fx.inventory.purchases.confirm({ eventId, holdId: hold.holdId, fanId: "fan-1", purchaseId: "pur_ga" }),
    ).toMatchObject({
      ok: true,
      purchase: { generalAdmission: { areaId: "GA", quantity: 3 }, amount: 18_000, seats: [] },
    });
    expect(await fx.inventory.seats.generalAdmission({ eventId, areaId: "GA" })).toMatchObject({
      available: 7,
      held: 0,
      sold: 3,
    });
    expect(await fx.inventory.holds.release({ eventId, holdId: hold.holdId, fanId: "fan-1" })).toEqual({
      ok: false,
      reason: "hold_confirmed",
    });
    fx.clock.advance(3_600_000);
    await sweepAll(eventId);
    expect(await fx.inventory.seats.generalAdmission({ eventId, areaId: "GA" })).toMatchObject({
      available: 7,
      held: 0,
      sold: 3,
    });
    const outbox = await eventually(
      () => fx.inventory.outbox.listUnsent({ eventId }),
      (o) => expect(o).toHaveLength(1),
    );
    expect(outbox[0]?.payload.generalAdmission).toEqual({ areaId: "GA", quantity: 3 });
  });

  it("sells a hold once when two purchases race for it", async () => {
    const eventId = await newEvent();
    const hold = held(
      await fx.inventory.holds.holdSeats({ eventId, fanId: "fan-1", seatIds: ["A-1-5"], holdSeconds: 480 }),
    );
    await fx.inventory.purchases.createPending({ eventId, holdId: hold.holdId, fanId: "fan-1", purchaseId: "pur_x" });
    await fx.inventory.purchases.createPending({ eventId, holdId: hold.holdId, fanId: "fan-1", purchaseId: "pur_y" });
    const [x, y] = await Promise.all([
      fx.inventory.purchases.confirm({ eventId, holdId: hold.holdId, fanId: "fan-1", purchaseId: "pur_x" }),
      fx.inventory.purchases.confirm({ eventId, holdId: hold.holdId, fanId: "fan-1", purchaseId: "pur_y" }),
    ]);
    expect([x.ok, y.ok].filter(Boolean)).toHaveLength(1);
    const loser = x.ok ? y : x;
    expect(loser).toMatchObject({ ok: false, reason: "hold_confirmed" });
    await eventually(
      () => fx.inventory.outbox.listUnsent({ eventId }),
      (o) => expect(o).toHaveLength(1),
    );
  });
});

describe("purchase transitions", () => {
  it("pending -> failed -> refunded, idempotent; confirmed is never refunded; failed is never confirmed", async () => {
    const eventId = await newEvent();
    const hold = held(
      await fx.inventory.holds.holdSeats({ eventId, fanId: "fan-1", seatIds: ["A-2-5"], holdSeconds: 480 }),
    );
    await fx.inventory.purchases.createPending({ eventId, holdId: hold.holdId, fanId: "fan-1", purchaseId: "pur_f" });
    expect(await fx.inventory.purchases.markFailed({ eventId, purchaseId: "pur_f", reason: "declined" })).toMatchObject(
      {
        ok: true,
        purchase: { status: "failed", failureReason: "declined" },
      },
    );
    expect(await fx.inventory.purchases.markFailed({ eventId, purchaseId: "pur_f" })).toMatchObject({
      ok: true,
      purchase: { status: "failed" },
    });
    expect(
      await fx.inventory.purchases.confirm({ eventId, holdId: hold.holdId, fanId: "fan-1", purchaseId: "pur_f" }),
    ).toEqual({
      ok: false,
      reason: "purchase_not_pending",
      status: "failed",
    });
    // The fan pays again with another card: a new purchase of the same hold.
    await fx.inventory.purchases.createPending({ eventId, holdId: hold.holdId, fanId: "fan-1", purchaseId: "pur_g" });
    expect(
      await fx.inventory.purchases.confirm({ eventId, holdId: hold.holdId, fanId: "fan-1", purchaseId: "pur_g" }),
    ).toMatchObject({ ok: true });
    expect(await fx.inventory.purchases.markRefunded({ eventId, purchaseId: "pur_g" })).toEqual({
      ok: false,
      reason: "invalid_transition",
      status: "confirmed",
    });
    expect(await fx.inventory.purchases.markFailed({ eventId, purchaseId: "pur_g" })).toEqual({
      ok: false,
      reason: "invalid_transition",
      status: "confirmed",
    });
    expect(await fx.inventory.purchases.markRefunded({ eventId, purchaseId: "pur_f" })).toMatchObject({
      ok: true,
      purchase: { status: "refunded" },
    });
    expect(await fx.inventory.purchases.markRefunded({ eventId, purchaseId: "pur_f" })).toMatchObject({
      ok: true,
      purchase: { status: "refunded" },
    });
    expect(await fx.inventory.purchases.markFailed({ eventId, purchaseId: "pur_none" })).toEqual({
      ok: false,
      reason: "not_found",
    });
    expect(await fx.inventory.purchases.get({ eventId, purchaseId: "pur_none" })).toBeNull();
  });

  it("a refund under way (failed, refund_due) is listed apart from the declines, and still among the failed", async () => {
    const eventId = await newEvent();
    const ids: string[] = [];
    for (const [i, seatId] of ["A-3-1", "A-3-2", "A-3-3"].entries()) {
      const hold = held(
        await fx.inventory.holds.holdSeats({ eventId, fanId: `fan-${i}`, seatIds: [seatId], holdSeconds: 480 }),
      );
      await fx.inventory.purchases.createPending({
        eventId,
        holdId: hold.holdId,
        fanId: `fan-${i}`,
        purchaseId: `pur_r${i}`,
      });
      ids.push(`pur_r${i}`);
    }
    await fx.inventory.purchases.markFailed({ eventId, purchaseId: "pur_r0", reason: "declined" });
    await fx.inventory.purchases.markFailed({ eventId, purchaseId: "pur_r1", reason: REFUND_DUE });
    const due = await fx.inventory.purchases.list({ eventId, refundDue: true });
    expect(due.purchases.map((p) => p.purchaseId)).toEqual(["pur_r1"]);
    // A decline leaves the open purchases (GSI3); a refund under way stays, the reconciler's to finish.
    const failed = await fx.inventory.purchases.list({ eventId, status: "failed" });
    expect(failed.purchases.map((p) => p.purchaseId).sort()).toEqual(["pur_r1"]);
    // Both are counted (the event's count item, written after each transition).
    expect((await fx.inventory.purchases.count({ eventId })).failed).toBe(2);
    // Refunded: it leaves the refund_due listing.
    await fx.inventory.purchases.markRefunded({ eventId, purchaseId: "pur_r1", reason: REFUND_DUE });
    expect((await fx.inventory.purchases.list({ eventId, refundDue: true })).purchases).toEqual([]);
    expect(
      (await fx.inventory.purchases.list({ eventId, status: "pending" })).purchases.map((p) => p.purchaseId),
    ).toEqual(["pur_r2"]);
  });
});
