/**
 * maxSeatsPerFan against a fan racing itself: held (live) plus bought seats of one fan never pass
 * the limit, however many holds it sends at once, through several gateways, decided by DynamoDB
 * alone (the FAN ledger item). Real concurrency: every batch below is in flight at once.
 */
import { DynamoDBDocumentClient, GetCommand, QueryCommand, UpdateCommand } from "@aws-sdk/lib-dynamodb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { countFan, PRUNE_GRACE_MS, toFanLedger } from "../../src/inventory/fans.js";
import type { Hold, HoldResult, Inventory, SeatView } from "../../src/inventory/index.js";
import { MAX_SEATS_PER_HOLD } from "../../src/inventory/index.js";
import { fanKeyHash, keys } from "../../src/inventory/keys.js";
import { eventInput, type InventoryFixture, manualClock, setupInventory, uniqueEventId } from "./fixtures.js";

let fx: InventoryFixture;
let doc: DynamoDBDocumentClient;
beforeAll(async () => {
  fx = await setupInventory("fanlimit");
  doc = DynamoDBDocumentClient.from(fx.client);
});
afterAll(() => fx.close());

const MAX = 4;
const SECTION = { id: "A", tier: "Floor", price: 1_000, rows: 5, seatsPerRow: 10 };

async function newEvent(overrides = {}): Promise<string> {
  const eventId = uniqueEventId("fan");
  const created = await fx.inventory.events.create({
    eventId,
    input: eventInput(fx.clock, {
      maxSeatsPerFan: MAX,
      holdSeconds: 60,
      sections: [SECTION],
      generalAdmission: [{ id: "GA", tier: "Standing", price: 500, capacity: 50 }],
      ...overrides,
    }),
  });
  expect(created.ok).toBe(true);
  return eventId;
}

const seatIds = (n: number, row = 1) =>
  Array.from({ length: n }, (_, i) => `A-${row + Math.floor(i / 10)}-${(i % 10) + 1}`);

async function seatsOf(eventId: string): Promise<Map<string, SeatView>> {
  const page = await fx.inventory.seats.listSection({ eventId, sectionId: "A", consistent: true });
  return new Map((page?.seats ?? []).map((s) => [s.id, s]));
}

function held(r: HoldResult): Hold {
  if (!r.ok) throw new Error(`expected a hold, got ${JSON.stringify(r)}`);
  return r.hold;
}

const size = (h: Hold) => h.seats.length + (h.generalAdmission?.quantity ?? 0);

async function ledgerItem(eventId: string, fanId: string) {
  const out = await doc.send(
    new GetCommand({ TableName: fx.tableName, Key: keys.fan(eventId, fanId), ConsistentRead: true }),
  );
  return out.Item;
}

/** What the next hold of the fan would count: bought + unexpired held. */
async function counted(eventId: string, fanId: string): Promise<number> {
  return countFan(toFanLedger(await ledgerItem(eventId, fanId)), fx.clock.now()).counted;
}

describe("maxSeatsPerFan under parallel holds of one fan", () => {
  it("20 parallel 1-seat holds, max 4: exactly 4 granted, the rest seat_limit_exceeded, their seats untouched", async () => {
    const eventId = await newEvent();
    const gateways = fx.gateways(4);
    const wanted = seatIds(20);
    const results = await Promise.all(
      wanted.map((s, i) =>
        gateways[i % 4]!.holds.holdSeats({ eventId, fanId: "racer", seatIds: [s], holdSeconds: 60 }),
      ),
    );

    const granted = results.filter((r) => r.ok).map(held);
    expect(granted).toHaveLength(MAX);
    for (const r of results) if (!r.ok) expect(r).toEqual({ ok: false, reason: "seat_limit_exceeded", limit: MAX });

    const seats = await seatsOf(eventId);
    const grantedSeats = new Set(granted.flatMap((h) => h.seats));
    for (const id of wanted) {
      if (grantedSeats.has(id)) expect(seats.get(id)).toMatchObject({ status: "held", holderId: "racer" });
      else expect(seats.get(id)?.status, id).toBe("available");
    }
    expect(await counted(eventId, "racer")).toBe(MAX);
    // The seats refused to the racer are free for anyone else at once.
    const other = wanted.find((s) => !grantedSeats.has(s))!;
    held(await fx.inventory.holds.holdSeats({ eventId, fanId: "someone-else", seatIds: [other], holdSeconds: 60 }));
  });

  it("mixed parallel seat and general-admission holds of 1 or 2 count together", async () => {
    const eventId = await newEvent();
    const gateways = fx.gateways(4);
    const wanted = seatIds(30);
    const calls: Promise<HoldResult>[] = [];
    for (let i = 0; i < 30; i++) {
      const gw = gateways[i % 4]!;
      if (i % 3 === 0)
        calls.push(
          gw.holds.holdGeneralAdmission({
            eventId,
            fanId: "mixer",
            areaId: "GA",
            quantity: 1 + (i % 2),
            holdSeconds: 60,
          }),
        );
      else if (i % 3 === 1)
        calls.push(gw.holds.holdSeats({ eventId, fanId: "mixer", seatIds: [wanted[i]!], holdSeconds: 60 }));
      else
        calls.push(
          gw.holds.holdSeats({
            eventId,
            fanId: "mixer",
            seatIds: [wanted[i]!, wanted[(i + 15) % 30]!],
            holdSeconds: 60,
          }),
        );
    }
    const results = await Promise.all(calls);
    const granted = results.filter((r) => r.ok).map(held);
    // Some 1-seat request was refused (there are 10 of them), so the fan reached exactly the limit.
    expect(granted.reduce((n, h) => n + size(h), 0)).toBe(MAX);
    for (const r of results) {
      if (!r.ok) expect(["seat_limit_exceeded", "seat_unavailable"]).toContain(r.reason);
      // A seat a parallel 2-seat hold of the same fan took is the only way to lose one here.
      if (!r.ok && r.reason === "seat_unavailable") {
        for (const s of r.seats) expect(granted.some((h) => h.seats.includes(s))).toBe(true);
      }
    }
    const gaHeld = granted.reduce((n, h) => n + (h.generalAdmission?.quantity ?? 0), 0);
    expect(await fx.inventory.seats.generalAdmission({ eventId, areaId: "GA" })).toMatchObject({
      available: 50 - gaHeld,
      held: gaHeld,
    });
    const seats = await seatsOf(eventId);
    const heldSeats = [...seats.values()].filter((s) => s.status === "held");
    expect(heldSeats.every((s) => s.holderId === "mixer")).toBe(true);
    expect(heldSeats.length).toBe(MAX - gaHeld);
    expect(await counted(eventId, "mixer")).toBe(MAX);
  });

  it("a transaction cancelled by the ledger alone is retried, never reported as a lost seat", async () => {
    // Ten parallel holds within the limit: all but one lose the first round on the ledger's
    // version, none on a seat; every one of them must end held.
    const eventId = await newEvent({ maxSeatsPerFan: 10 });
    const gateways = fx.gateways(4);
    const results = await Promise.all(
      seatIds(10).map((s, i) =>
        gateways[i % 4]!.holds.holdSeats({ eventId, fanId: "ten", seatIds: [s], holdSeconds: 60 }),
      ),
    );
    expect(results.filter((r) => !r.ok)).toEqual([]);
    expect(await counted(eventId, "ten")).toBe(10);
  });

  it("young entries that name one seat twice (a fan racing itself) still get an answer: the limit, not a 503", async () => {
    const eventId = await newEvent();
    const fanId = "twice";
    // The fan holds A-1-1 (entry A). Entry B, for the same seat, is one still in flight or about to
    // be taken back: written straight into the ledger, as a hold between its two writes leaves it.
    const a = await fx.inventory.holds.holdSeats({ eventId, fanId, seatIds: ["A-1-1"] });
    expect(a.ok).toBe(true);
    const now = fx.clock.now();
    const b = `${fanKeyHash(fanId)}${"b".repeat(16)}`;
    await doc.send(
      new UpdateCommand({
        TableName: fx.tableName,
        Key: keys.fan(eventId, fanId),
        UpdateExpression: "SET holds.#b = :entry, version = version + :one",
        ExpressionAttributeNames: { "#b": b },
        ExpressionAttributeValues: {
          ":entry": { seats: MAX - 1, expiresAt: now + 60_000, ids: ["A-1-1"], amount: 0, createdAt: now },
          ":one": 1,
        },
      }),
    );
    // 1 + 3 counted + 1 asked for is over 4; the refusal rests on B, which never settles: after its
    // waits it answers the limit (the seats' read names A-1-1 once).
    const c = await fx.inventory.holds.holdSeats({ eventId, fanId, seatIds: ["A-2-1"] });
    expect(c).toMatchObject({ ok: false, reason: "seat_limit_exceeded" });
  });

  it("two fans are not limited by each other", async () => {
    const eventId = await newEvent();
    const gateways = fx.gateways(4);
    const results = await Promise.all(
      seatIds(40).map((s, i) =>
        gateways[i % 4]!.holds.holdSeats({ eventId, fanId: i % 2 ? "left" : "right", seatIds: [s], holdSeconds: 60 }),
      ),
    );
    const byFan = new Map<string, number>();
    for (const r of results) if (r.ok) byFan.set(r.hold.fanId, (byFan.get(r.hold.fanId) ?? 0) + 1);
    expect(Object.fromEntries(byFan)).toEqual({ left: MAX, right: MAX });
    held(await fx.inventory.holds.holdSeats({ eventId, fanId: "third", seatIds: seatIds(MAX, 5), holdSeconds: 60 }));
  });

  it("after a release the fan may hold again, exactly as much as it gave back", async () => {
    const eventId = await newEvent();
    const a = held(
      await fx.inventory.holds.holdSeats({ eventId, fanId: "fan", seatIds: ["A-1-1", "A-1-2"], holdSeconds: 60 }),
    );
    held(
      await fx.inventory.holds.holdGeneralAdmission({
        eventId,
        fanId: "fan",
        areaId: "GA",
        quantity: 2,
        holdSeconds: 60,
      }),
    );
    expect(await fx.inventory.holds.holdSeats({ eventId, fanId: "fan", seatIds: ["A-1-3"], holdSeconds: 60 })).toEqual({
      ok: false,
      reason: "seat_limit_exceeded",
      limit: MAX,
    });
    expect(await fx.inventory.holds.release({ eventId, holdId: a.holdId, fanId: "fan" })).toMatchObject({ ok: true });
    expect(await counted(eventId, "fan")).toBe(2);
    // Two seats' worth back. In parallel: 3 seats can never fit, and only one of the two 2-seat holds.
    const results = await Promise.all([
      fx.inventory.holds.holdSeats({ eventId, fanId: "fan", seatIds: ["A-2-1", "A-2-2", "A-2-3"], holdSeconds: 60 }),
      fx.inventory.holds.holdSeats({ eventId, fanId: "fan", seatIds: ["A-3-1", "A-3-2"], holdSeconds: 60 }),
      fx.inventory.holds.holdSeats({ eventId, fanId: "fan", seatIds: ["A-4-1", "A-4-2"], holdSeconds: 60 }),
    ]);
    expect(results[0]).toEqual({ ok: false, reason: "seat_limit_exceeded", limit: MAX });
    expect(results.filter((r) => r.ok)).toHaveLength(1);
    expect(await counted(eventId, "fan")).toBe(MAX);

    // A general-admission release gives its places back too, and a repeat changes nothing.
    const ga = held(
      await fx
        .newInstance()
        .holds.holdGeneralAdmission({ eventId, fanId: "fan2", areaId: "GA", quantity: 4, holdSeconds: 60 }),
    );
    await Promise.all([1, 2, 3].map(() => fx.inventory.holds.release({ eventId, holdId: ga.holdId, fanId: "fan2" })));
    expect(await counted(eventId, "fan2")).toBe(0);
    held(
      await fx.inventory.holds.holdGeneralAdmission({
        eventId,
        fanId: "fan2",
        areaId: "GA",
        quantity: 4,
        holdSeconds: 60,
      }),
    );
  });

  it("expired holds stop counting at their expiry, with no sweeper; the next hold marks them, a later one prunes them", async () => {
    const clock = manualClock(fx.clock.now());
    const inv = fx.newInstance(clock);
    const eventId = uniqueEventId("fanexp");
    expect(
      (
        await inv.events.create({
          eventId,
          input: eventInput(clock, { maxSeatsPerFan: MAX, holdSeconds: 60, sections: [SECTION] }),
        })
      ).ok,
    ).toBe(true);
    held(await inv.holds.holdSeats({ eventId, fanId: "fan", seatIds: ["A-1-1", "A-1-2", "A-1-3"], holdSeconds: 60 }));
    held(await inv.holds.holdGeneralAdmission({ eventId, fanId: "fan", areaId: "GA", quantity: 1, holdSeconds: 60 }));
    clock.advance(59_999);
    expect(await inv.holds.holdSeats({ eventId, fanId: "fan", seatIds: ["A-2-1"], holdSeconds: 60 })).toMatchObject({
      reason: "seat_limit_exceeded",
    });
    clock.advance(1);
    const results = await Promise.all(
      seatIds(8, 3).map((s) => inv.holds.holdSeats({ eventId, fanId: "fan", seatIds: [s], holdSeconds: 60 })),
    );
    expect(results.filter((r) => r.ok)).toHaveLength(MAX);
    const ledger = toFanLedger(await ledgerItem(eventId, "fan"));
    const live = [...ledger.holds.values()].filter((e) => e.status === undefined);
    expect(live).toHaveLength(MAX);
    expect(live.every((e) => e.expiresAt > clock.now())).toBe(true);
    // The two expired holds are marked (no confirmation can take them now), and kept a while.
    expect([...ledger.holds.values()].filter((e) => e.status === "expired")).toHaveLength(2);
    // Once past the grace after their expiry, the fan's next hold removes them (and the four that
    // expired meanwhile are marked).
    clock.advance(PRUNE_GRACE_MS);
    held(await inv.holds.holdSeats({ eventId, fanId: "fan", seatIds: ["A-5-10"], holdSeconds: 60 }));
    const later = toFanLedger(await ledgerItem(eventId, "fan"));
    expect([...later.holds.values()].map((e) => e.status ?? "held").sort()).toEqual([
      "expired",
      "expired",
      "expired",
      "expired",
      "held",
    ]);
  });

  it("after buying 4 the fan cannot hold more, ever; the purchases move seats from held to bought", async () => {
    const eventId = await newEvent();
    const holds = [
      held(
        await fx.inventory.holds.holdSeats({ eventId, fanId: "buyer", seatIds: ["A-1-1", "A-1-2"], holdSeconds: 60 }),
      ),
      held(
        await fx.inventory.holds.holdGeneralAdmission({
          eventId,
          fanId: "buyer",
          areaId: "GA",
          quantity: 1,
          holdSeconds: 60,
        }),
      ),
      held(await fx.inventory.holds.holdSeats({ eventId, fanId: "buyer", seatIds: ["A-1-3"], holdSeconds: 60 })),
    ];
    await Promise.all(
      holds.map(async (h, i) => {
        expect(
          (
            await fx.inventory.purchases.createPending({
              eventId,
              holdId: h.holdId,
              fanId: "buyer",
              purchaseId: `p${i}`,
            })
          ).ok,
        ).toBe(true);
        expect(
          await fx.inventory.purchases.confirm({ eventId, holdId: h.holdId, fanId: "buyer", purchaseId: `p${i}` }),
        ).toMatchObject({ ok: true });
      }),
    );
    const ledger = toFanLedger(await ledgerItem(eventId, "buyer"));
    expect(ledger.bought).toBe(MAX);
    // Each entry says it was bought, by which purchase; none counts any more (they are in `bought`).
    expect([...ledger.holds.values()].map((e) => e.status)).toEqual(["confirmed", "confirmed", "confirmed"]);
    expect(countFan(ledger, fx.clock.now()).counted).toBe(MAX);
    const attempts = await Promise.all([
      ...seatIds(10, 3).map((s) =>
        fx.inventory.holds.holdSeats({ eventId, fanId: "buyer", seatIds: [s], holdSeconds: 60 }),
      ),
      fx.inventory.holds.holdGeneralAdmission({ eventId, fanId: "buyer", areaId: "GA", quantity: 1, holdSeconds: 60 }),
    ]);
    for (const r of attempts) expect(r).toEqual({ ok: false, reason: "seat_limit_exceeded", limit: MAX });
    fx.clock.advance(3_600_000);
    expect(
      await fx.inventory.holds.holdSeats({ eventId, fanId: "buyer", seatIds: ["A-5-5"], holdSeconds: 60 }),
    ).toMatchObject({ reason: "seat_limit_exceeded" });
  });

  it("a confirm whose ledger entry a gateway with a fast clock pruned as expired is refused, not oversold", async () => {
    const eventId = await newEvent();
    const slow = fx.inventory;
    const fast = fx.newInstance(manualClock(fx.clock.now() + 61_000));
    const h = held(
      await slow.holds.holdSeats({ eventId, fanId: "skew", seatIds: ["A-1-1", "A-1-2", "A-1-3"], holdSeconds: 60 }),
    );
    expect(
      (await slow.purchases.createPending({ eventId, holdId: h.holdId, fanId: "skew", purchaseId: "p_skew" })).ok,
    ).toBe(true);
    // By its clock the first hold has expired: it counts 0 and prunes the entry.
    held(
      await fast.holds.holdSeats({
        eventId,
        fanId: "skew",
        seatIds: ["A-2-1", "A-2-2", "A-2-3", "A-2-4"],
        holdSeconds: 60,
      }),
    );
    // By the slow clock the hold is still live, seats and record agree, but the ledger does not.
    expect(await slow.purchases.confirm({ eventId, holdId: h.holdId, fanId: "skew", purchaseId: "p_skew" })).toEqual({
      ok: false,
      reason: "hold_expired",
    });
    expect((await slow.purchases.get({ eventId, purchaseId: "p_skew" }))?.status).toBe("pending");
    expect((await seatsOf(eventId)).get("A-1-1")?.status).toBe("held");
    expect(toFanLedger(await ledgerItem(eventId, "skew")).bought).toBe(0);
  });

  it(`holds and buys up to MAX_SEATS_PER_HOLD (${MAX_SEATS_PER_HOLD}) seats: the confirm is a full 100-action transaction`, async () => {
    const eventId = await newEvent({
      maxSeatsPerFan: 100,
      sections: [{ id: "A", tier: "Floor", price: 10, rows: 10, seatsPerRow: 10 }],
    });
    const all = seatIds(100);
    expect(
      await fx.inventory.holds.holdSeats({
        eventId,
        fanId: "bulk",
        seatIds: all.slice(0, MAX_SEATS_PER_HOLD + 1),
        holdSeconds: 60,
      }),
    ).toEqual({
      ok: false,
      reason: "seat_limit_exceeded",
      limit: MAX_SEATS_PER_HOLD,
    });
    const h = held(
      await fx.inventory.holds.holdSeats({
        eventId,
        fanId: "bulk",
        seatIds: all.slice(0, MAX_SEATS_PER_HOLD),
        holdSeconds: 60,
      }),
    );
    expect(
      (await fx.inventory.purchases.createPending({ eventId, holdId: h.holdId, fanId: "bulk", purchaseId: "p_bulk" }))
        .ok,
    ).toBe(true);
    expect(
      await fx.inventory.purchases.confirm({ eventId, holdId: h.holdId, fanId: "bulk", purchaseId: "p_bulk" }),
    ).toMatchObject({ ok: true });
    // 96 bought; 4 more fit, 5 do not.
    expect(
      await fx.inventory.holds.holdSeats({
        eventId,
        fanId: "bulk",
        seatIds: all.slice(MAX_SEATS_PER_HOLD),
        holdSeconds: 60,
      }),
    ).toMatchObject({ ok: true });
    expect(await counted(eventId, "bulk")).toBe(100);
  });

  it("keys the ledger by a hash of the fan id: any fan id, never in a key in clear", async () => {
    const eventId = await newEvent();
    const odd = [`x#FAN#${fanKeyHash("y")}`, "y", "ünï cödé 🎟", "#", "a".repeat(128)];
    const results = await Promise.all(
      odd.map((fan, i) =>
        fx.inventory.holds.holdSeats({ eventId, fanId: fan, seatIds: seatIds(MAX, i + 1), holdSeconds: 60 }),
      ),
    );
    for (const r of results) expect(r.ok).toBe(true);
    const out = await doc.send(
      new QueryCommand({
        TableName: fx.tableName,
        KeyConditionExpression: "PK = :pk",
        ExpressionAttributeValues: { ":pk": keys.fan(eventId, "y").PK },
        ConsistentRead: true,
      }),
    );
    expect(out.Items).toHaveLength(1);
    expect(out.Items![0]).toMatchObject({ fanId: "y", SK: "FAN", entity: "FAN" });
    for (const fan of odd) {
      const k = keys.fan(eventId, fan);
      expect(k.PK).toMatch(new RegExp(`^EVT#${eventId}#FAN#[0-9a-f]{32}$`));
      expect(await counted(eventId, fan)).toBe(MAX);
    }
  });
});

describe("the ledger under several gateways and fans at once", () => {
  it("many fans, each racing itself over shared seats: nobody passes the limit, no seat twice", async () => {
    const eventId = await newEvent();
    const gateways: Inventory[] = fx.gateways(4);
    const fans = Array.from({ length: 8 }, (_, i) => `crowd-${i}`);
    const all = seatIds(50);
    const results = await Promise.all(
      Array.from({ length: 160 }, (_, i) => {
        const fan = fans[i % fans.length]!;
        const seats = i % 4 === 0 ? [all[i % 50]!, all[(i * 7) % 50]!] : [all[(i * 13) % 50]!];
        return gateways[i % 4]!.holds.holdSeats({
          eventId,
          fanId: fan,
          seatIds: [...new Set(seats)],
          holdSeconds: 60,
        }).then((r) => ({ fan, r }));
      }),
    );
    const perFan = new Map<string, number>();
    const owner = new Map<string, string>();
    for (const { fan, r } of results) {
      if (r.ok) {
        perFan.set(fan, (perFan.get(fan) ?? 0) + r.hold.seats.length);
        for (const s of r.hold.seats) {
          expect(owner.has(s), `${s} twice`).toBe(false);
          owner.set(s, fan);
        }
      } else expect(["seat_limit_exceeded", "seat_unavailable", "contention"]).toContain(r.reason);
    }
    for (const fan of fans) {
      expect(perFan.get(fan) ?? 0).toBeLessThanOrEqual(MAX);
      expect(await counted(eventId, fan)).toBe(perFan.get(fan) ?? 0);
    }
    const seats = await seatsOf(eventId);
    for (const [id, seat] of seats) expect(seat.status === "held" ? seat.holderId : undefined).toBe(owner.get(id));
  });
});
