/**
 * Replacing an event near its on-sale (issue 13, item 2), against a slowed store: the operator's
 * inventory talks to DynamoDB through the proxy of test/support/dynamo-proxy.ts, which keeps one
 * request of the replacement stalled while the (manual) clock passes the on-sale and fans, on a
 * gateway that reads the store directly, hold and buy seats. Whatever the replacement then
 * writes, every seat a fan was told it holds or bought must still be held or sold afterwards.
 */
import { GetCommand } from "@aws-sdk/lib-dynamodb";
import { DynamoDBDocumentClient } from "@aws-sdk/lib-dynamodb";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { createInventory, type EventInput, type HoldResult, type Inventory } from "../../src/inventory/index.js";
import { type DynamoProxy, type ProxiedRequest, startDynamoProxy } from "../support/dynamo-proxy.js";
import { createTestDynamoClient } from "../support/dynamo.js";
import { eventInput, type InventoryFixture, setupInventory, uniqueEventId } from "./fixtures.js";

const MINUTE = 60_000;
// What the inventory assumes by default: the 60 s event cache plus 5 s x 3 attempts.
const GUARD_MS = 60_000 + 15_000;

let fx: InventoryFixture;
let proxy: DynamoProxy;
let operatorClient: ReturnType<typeof createTestDynamoClient>;
/** The operator's gateway: every request it sends goes through the proxy. */
let operator: Inventory;

beforeAll(async () => {
  fx = await setupInventory("replace");
  proxy = await startDynamoProxy(inject("dynamoEndpoint"));
  operatorClient = createTestDynamoClient(proxy.endpoint);
  operator = createInventory({ client: operatorClient, tableName: fx.tableName, clock: fx.clock.now });
});
afterAll(async () => {
  proxy.stall(null);
  proxy.releaseStalled();
  operatorClient.destroy();
  await proxy.close();
  fx.close();
});

const layout = (price: number, overrides: Partial<EventInput> = {}): Partial<EventInput> => ({
  sections: [
    { id: "A", tier: "Floor", price, rows: 4, seatsPerRow: 10 },
    { id: "B", tier: "Balcony", price: price / 2, rows: 1, seatsPerRow: 4 },
  ],
  generalAdmission: [{ id: "GA", tier: "Standing", price: 1_000, capacity: 10 }],
  ...overrides,
});

/** Until the proxy holds a request matching `which` (the replacement has reached that step). */
async function stalledOn(which: (r: ProxiedRequest) => boolean): Promise<void> {
  for (let i = 0; !proxy.stalled().some(which); i++) {
    if (i > 3_000) throw new Error("the replacement never reached the stalled request");
    await new Promise((r) => setTimeout(r, 10));
  }
}

const isEventRequest = (target: string, eventId: string) => (r: ProxiedRequest) =>
  r.target === target && r.body.includes(`"EVT#${eventId}"`) && r.body.includes('"EVENT"');

async function rawSeat(eventId: string, sectionId: string, row: number, number: number) {
  const doc = DynamoDBDocumentClient.from(fx.client);
  const pad = (n: number) => String(n).padStart(5, "0");
  const out = await doc.send(
    new GetCommand({
      TableName: fx.tableName,
      Key: { PK: `EVT#${eventId}#SEC#${sectionId}`, SK: `SEAT#${pad(row)}#${pad(number)}` },
      ConsistentRead: true,
    }),
  );
  return out.Item;
}

interface Sale {
  seat: string;
  holdId: string;
  purchaseId?: string;
}

/**
 * `fans` fans at once, each holding one seat of `seats` on the selling gateway, every other one
 * buying it too. Returns what each fan was told it has.
 */
async function sellAtOnce(selling: Inventory, eventId: string, seats: string[]): Promise<Sale[]> {
  const results = await Promise.all(
    seats.map(async (seat, i): Promise<Sale | null> => {
      const fanId = `fan-${eventId}-${seat}`;
      const held: HoldResult = await selling.holds.holdSeats({ eventId, fanId, seatIds: [seat], holdSeconds: 480 });
      if (!held.ok) return null;
      if (i % 2 === 1) return { seat, holdId: held.hold.holdId };
      const purchaseId = `pur_${seat.replaceAll("-", "_")}_${i}`;
      const pending = await selling.purchases.createPending({ eventId, holdId: held.hold.holdId, fanId, purchaseId });
      if (!pending.ok) throw new Error(`pending purchase refused: ${JSON.stringify(pending)}`);
      const confirmed = await selling.purchases.confirm({ eventId, holdId: held.hold.holdId, fanId, purchaseId });
      if (!confirmed.ok) throw new Error(`confirm refused: ${JSON.stringify(confirmed)}`);
      return { seat, holdId: held.hold.holdId, purchaseId };
    }),
  );
  return results.filter((s): s is Sale => s !== null);
}

/** Every seat a fan was told it holds or bought is still held by that hold, or sold to that purchase. */
async function expectStillTaken(eventId: string, sales: Sale[]): Promise<void> {
  const seen = await Promise.all(
    sales.map(async (s) => {
      const [sectionId = "", row = "0", number = "0"] = s.seat.split("-");
      const item = await rawSeat(eventId, sectionId, Number(row), Number(number));
      return {
        seat: s.seat,
        status: item?.status,
        holdId: s.purchaseId ? undefined : item?.holdId,
        purchaseId: s.purchaseId ? item?.purchaseId : undefined,
      };
    }),
  );
  expect(seen).toEqual(
    sales.map((s) =>
      s.purchaseId
        ? { seat: s.seat, status: "sold", holdId: undefined, purchaseId: s.purchaseId }
        : { seat: s.seat, status: "held", holdId: s.holdId, purchaseId: undefined },
    ),
  );
}

describe("replacing an event near its on-sale", () => {
  it("refuses a replacement inside the guard window (on-sale minus event cache minus request budget)", async () => {
    const eventId = uniqueEventId("window");
    const onSaleAtMs = fx.clock.now() + GUARD_MS + 5_000;
    const onSaleAt = new Date(onSaleAtMs).toISOString();
    expect(
      (await fx.inventory.events.create({ eventId, input: eventInput(fx.clock, { onSaleAt, ...layout(100) }) })).ok,
    ).toBe(true);

    // Outside the window: still replaceable.
    const early = await fx.inventory.events.create({
      eventId,
      input: eventInput(fx.clock, { onSaleAt, ...layout(110) }),
    });
    expect(early).toMatchObject({ ok: true, created: false });

    fx.clock.advance(10_000); // now inside: on-sale in GUARD_MS - 5 s
    const late = await fx.inventory.events.create({
      eventId,
      input: eventInput(fx.clock, { onSaleAt, name: "Too late", ...layout(120) }),
    });
    expect(late).toMatchObject({ ok: false, reason: "replacement_closed", replaceableUntil: onSaleAtMs - GUARD_MS });
    const stored = await fx.inventory.events.get({ eventId });
    expect(stored).toMatchObject({ name: "Finals Night", version: 2, layoutComplete: true });
  });

  it("a replacement whose first read is slowed past the on-sale is refused, and sold and held seats stay", async () => {
    const eventId = uniqueEventId("slowread");
    const onSaleAtMs = fx.clock.now() + 10 * MINUTE;
    const onSaleAt = new Date(onSaleAtMs).toISOString();
    expect(
      (await fx.inventory.events.create({ eventId, input: eventInput(fx.clock, { onSaleAt, ...layout(100) }) })).ok,
    ).toBe(true);

    proxy.stall(isEventRequest("GetItem", eventId));
    const replacing = operator.events.create({
      eventId,
      input: eventInput(fx.clock, { onSaleAt, name: "Replaced", ...layout(200) }),
    });
    await stalledOn(isEventRequest("GetItem", eventId));
    proxy.stall(null);

    // The store is slow: meanwhile the on-sale comes and fans hold and buy, many at once.
    fx.clock.set(onSaleAtMs + MINUTE);
    const selling = fx.newInstance();
    const sales = await sellAtOnce(
      selling,
      eventId,
      Array.from({ length: 10 }, (_, i) => `A-1-${i + 1}`),
    );
    expect(sales).toHaveLength(10);

    proxy.releaseStalled(isEventRequest("GetItem", eventId));
    const result = await replacing;
    expect(result).toMatchObject({ ok: false, reason: "on_sale" });
    await expectStillTaken(eventId, sales);
    expect((await fx.inventory.events.get({ eventId }))?.name).toBe("Finals Night");
  });

  it("a replacement whose event write lands after the on-sale never overwrites a held or sold seat or area", async () => {
    const eventId = uniqueEventId("slowput");
    const onSaleAtMs = fx.clock.now() + 10 * MINUTE;
    const onSaleAt = new Date(onSaleAtMs).toISOString();
    expect(
      (await fx.inventory.events.create({ eventId, input: eventInput(fx.clock, { onSaleAt, ...layout(100) }) })).ok,
    ).toBe(true);

    // The event write is held back by the slow store, longer than any budget: it carries the
    // clock of when it was sent, and DynamoDB evaluates its condition with that.
    proxy.stall(isEventRequest("PutItem", eventId));
    const replacing = operator.events.create({
      eventId,
      input: eventInput(fx.clock, {
        onSaleAt,
        name: "Replaced",
        // A is rewritten (new price), B is dropped (its seats deleted), GA is rewritten.
        ...layout(200, {
          sections: [{ id: "A", tier: "Floor", price: 200, rows: 4, seatsPerRow: 10 }],
          generalAdmission: [{ id: "GA", tier: "Standing", price: 2_000, capacity: 10 }],
        }),
      }),
    });
    await stalledOn(isEventRequest("PutItem", eventId));
    proxy.stall(null);

    fx.clock.set(onSaleAtMs + MINUTE);
    const selling = fx.newInstance();
    const seats = [
      ...Array.from({ length: 20 }, (_, i) => `A-${1 + (i % 2)}-${1 + Math.floor(i / 2)}`),
      "B-1-1",
      "B-1-2",
    ];
    const [sales, ga] = await Promise.all([
      sellAtOnce(selling, eventId, seats),
      selling.holds.holdGeneralAdmission({
        eventId,
        fanId: `ga-fan-${eventId}`,
        areaId: "GA",
        quantity: 3,
        holdSeconds: 480,
      }),
    ]);
    expect(sales).toHaveLength(seats.length);
    expect(ga.ok).toBe(true);

    // The event write lands; while its seats are written, the selling gateway (which has the
    // event cached as on sale) keeps selling, many fans at once.
    proxy.releaseStalled(isEventRequest("PutItem", eventId));
    const later = sellAtOnce(
      selling,
      eventId,
      Array.from({ length: 10 }, (_, i) => `A-4-${i + 1}`),
    );
    const [result, laterSales] = await Promise.all([replacing, later]);
    expect(result).toMatchObject({ ok: true, created: false, kept: { areas: ["GA"] } });
    if (!result.ok) return;
    // Those taken before the event write landed were all there when their seats were written.
    expect(result.kept.seats).toEqual(expect.arrayContaining(sales.map((s) => s.seat)));

    await expectStillTaken(eventId, [...sales, ...laterSales]);
    const area = await fx.inventory.seats.generalAdmission({ eventId, areaId: "GA" });
    expect(area).toMatchObject({ held: 3, available: 7 });
    // A seat nobody took is the new layout's.
    expect(await rawSeat(eventId, "A", 3, 1)).toMatchObject({ status: "available", price: 200 });
  });
});
