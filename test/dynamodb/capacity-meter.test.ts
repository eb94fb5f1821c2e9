/**
 * The capacity meter (src/dynamodb/capacity.ts) against the local DynamoDB: each inventory
 * operation's units are filed under its own name, also when many operations of different kinds
 * are in flight at once on one client, and a refused write is counted as refused.
 */
import { GetCommand } from "@aws-sdk/lib-dynamodb";
import { DynamoDBDocumentClient } from "@aws-sdk/lib-dynamodb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createCapacityMeter, meterCapacity } from "../../src/dynamodb/capacity.js";
import { eventInput, type InventoryFixture, setupInventory, uniqueEventId } from "../inventory/fixtures.js";

let fx: InventoryFixture;
const meter = createCapacityMeter();

beforeAll(async () => {
  fx = await setupInventory("meter");
  meterCapacity(fx.client, meter);
});
afterAll(() => fx.close());

const row = (name: string) => meter.rows().find((r) => r.operation === name);

describe("capacity meter", () => {
  it("files each operation's units under its name, with many of them in flight at once", async () => {
    const eventId = uniqueEventId("meter");
    const created = await fx.inventory.events.create({ eventId, input: eventInput(fx.clock) });
    expect(created.ok).toBe(true);
    // Once, so that the event is in the process's cache and no hold below reads it.
    expect((await fx.inventory.holds.holdSeats({ eventId, fanId: "warm", seatIds: ["A-3-1"] })).ok).toBe(true);
    meter.reset();
    const seats = ["A-1-1", "A-1-2", "A-1-3", "A-1-4", "A-1-5", "A-2-1", "A-2-2", "A-2-3"];
    const doc = DynamoDBDocumentClient.from(fx.client);
    // Eight holds of different fans, eight raw reads outside any operation, all at once.
    const [holds] = await Promise.all([
      Promise.all(seats.map((s, i) => fx.inventory.holds.holdSeats({ eventId, fanId: `fan${i}`, seatIds: [s] }))),
      Promise.all(
        seats.map(() =>
          doc.send(new GetCommand({ TableName: fx.tableName, Key: { PK: `EVT#${eventId}`, SK: "EVENT" } })),
        ),
      ),
    ]);
    expect(holds.every((h) => h.ok)).toBe(true);
    const hold = row("hold")!;
    // Per hold: one consistent read of the ledger and the seat (1 unit each), then the ledger's
    // write and the seat's (1 unit each, not 2 each in a transaction).
    expect(hold.requests).toBe(24);
    expect(hold.writeUnits - hold.indexWriteUnits).toBe(8 * 2);
    expect(hold.readUnits).toBe(8 * 2);
    const other = row("other")!;
    expect(other.requests).toBe(8);
    expect(other.writeUnits).toBe(0);
    expect(other.readUnits).toBe(8 * 0.5);
    expect(meter.total().requests).toBe(32);
  });

  it("counts a refused write as refused, with no units it was not told of", async () => {
    const eventId = uniqueEventId("meter");
    await fx.inventory.events.create({ eventId, input: eventInput(fx.clock) });
    const first = await fx.inventory.holds.holdSeats({ eventId, fanId: "a", seatIds: ["A-1-1"] });
    expect(first.ok).toBe(true);
    // Written without the read in front (as best available writes the seats the map proposed):
    // the ledger's entry is written, the seat's write is refused, the entry is taken back.
    const checked = await fx.inventory.holds.checkSeats({ eventId, fanId: "b", seatIds: ["A-1-1"] });
    if (!checked.ok) throw new Error("checks failed");
    meter.reset();
    const lost = await fx.inventory.holds.writeSeats(checked.checked, async (seats) => ({
      ok: false,
      reason: "seat_unavailable",
      seats,
    }));
    expect(lost).toMatchObject({ ok: false, reason: "seat_unavailable" });
    const hold = row("hold")!;
    expect(hold.refused).toBe(1);
    // The ledger's read, its write and the write taking the entry back; not the refused seat write.
    expect(hold.requests).toBe(3);
    expect(hold.writeUnits).toBe(2);
  });

  it("a sold seat costs 12 write units, 2 of them the purchase's index entry (GSI3, entered and left once)", async () => {
    const eventId = uniqueEventId("meter");
    await fx.inventory.events.create({ eventId, input: eventInput(fx.clock) });
    expect((await fx.inventory.holds.holdSeats({ eventId, fanId: "warm", seatIds: ["A-3-1"] })).ok).toBe(true);
    meter.reset();
    const hold = await fx.inventory.holds.holdSeats({ eventId, fanId: "buyer", seatIds: ["A-4-1"] });
    if (!hold.ok) throw new Error("hold refused");
    const purchase = { eventId, holdId: hold.hold.holdId, fanId: "buyer", purchaseId: "sold-seat" };
    expect((await fx.inventory.purchases.createPending({ ...purchase, startCharge: true })).ok).toBe(true);
    expect((await fx.inventory.purchases.confirm({ ...purchase, chargeId: "ch_1" })).ok).toBe(true);
    expect(await fx.inventory.outbox.acknowledge({ eventId, purchaseId: "sold-seat" })).toBe(true);
    const units = (name: string) => {
      const r = row(name)!;
      return [r.writeUnits - r.indexWriteUnits, r.indexWriteUnits];
    };
    // [table, index]. Before GSI3 the purchase's GSI1 entry (projection ALL, keyed by status)
    // moved at the confirmation (2) and was rewritten at the acknowledgement (1), and the outbox's
    // GSI2 entry was entered and left (2): confirm 6 + 4, acknowledgement 1 + 2, 18 in all. Before
    // issue 30 item 2 the seat entered GSI2's expiry partition at the hold and left it at the
    // confirmation (1 each): 14.
    expect(units("hold")).toEqual([2, 0]); // the ledger, the seat; no index entry
    expect(units("createPendingPurchase")).toEqual([1, 1]); // enters GSI3
    expect(units("confirm")).toEqual([6, 0]); // seat, purchase, ledger (x2)
    expect(units("acknowledgeOutbox")).toEqual([1, 1]); // leaves GSI3
    expect(meter.total().writeUnits).toBe(12);
  });
});
