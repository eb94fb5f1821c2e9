/**
 * Where the sweeper finds a held seat since the seat's hold writes no GSI2 expiry entry (issue 30
 * item 2): the seat map in Redis, a read of a section the seat map does not have, the event's
 * periodic read of every section, and (for events made before) the old GSI2 entries. Against the
 * real Redis (a logical database of this file's own, flushed as a Redis that lost its data would
 * be) and the real local DynamoDB; the inventory's clock is moved by hand, the sweeper's `now` given.
 */
import { GetCommand, UpdateCommand } from "@aws-sdk/lib-dynamodb";
import { DynamoDBDocumentClient } from "@aws-sdk/lib-dynamodb";
import { Redis } from "ioredis";
import pino from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createSeatMapWrites } from "../../src/claims/seat-map-writes.js";
import { sectionSource } from "../../src/gateway.js";
import {
  type Hold,
  type HoldResult,
  type HeldSeatsCache,
  type Inventory,
  SWEEP_SHARDS,
  type SweepResult,
} from "../../src/inventory/index.js";
import { expirySortKey, keys, parseSeatId, shardOf } from "../../src/inventory/keys.js";
import { createMetrics } from "../../src/metrics.js";
import { createSeatMapCache, type SeatMapCache } from "../../src/seatmap/cache.js";
import { sweepJob } from "../../src/workers/workers.js";
import { type ClaimedDatabase, claimRedisDatabase, mapLimit } from "../support/worker-process.js";
import { eventInput, type InventoryFixture, manualClock, setupInventory, uniqueEventId } from "./fixtures.js";

const logger = pino({ level: "silent" });
const shards = Array.from({ length: SWEEP_SHARDS }, (_, s) => s);

let fx: InventoryFixture;
let db: ClaimedDatabase;
let redis: Redis;
let seatMap: SeatMapCache;
let doc: DynamoDBDocumentClient;
/** The DynamoDB commands the fixture's client sent, with their input. */
const sent: { command: string; input: Record<string, unknown> }[] = [];

beforeAll(async () => {
  fx = await setupInventory("sweepc");
  db = await claimRedisDatabase();
  redis = new Redis(db.url, { maxRetriesPerRequest: 1 });
  seatMap = createSeatMapCache({
    redis,
    source: sectionSource(fx.inventory),
    metrics: createMetrics(),
    logger,
  });
  doc = DynamoDBDocumentClient.from(fx.client);
  fx.client.middlewareStack.add(
    (next, context) => async (args) => {
      sent.push({ command: String(context.commandName), input: args.input as Record<string, unknown> });
      return next(args);
    },
    { step: "initialize", name: "sweepCandidatesRecorder" },
  );
}, 60_000);
afterAll(async () => {
  redis?.disconnect();
  await db?.release();
  fx?.close();
});

function held(r: HoldResult): Hold {
  if (!r.ok) throw new Error(`expected a hold, got ${JSON.stringify(r)}`);
  return r.hold;
}

/** A hold through the inventory, told to the seat map as the hold service tells it. */
async function holdSeats(inventory: Inventory, eventId: string, fanId: string, seatIds: string[], holdSeconds: number) {
  const hold = held(await inventory.holds.holdSeats({ eventId, fanId, seatIds, holdSeconds }));
  await createSeatMapWrites({ seatMap, logger }).held(eventId, hold.seats, Date.parse(hold.expiresAt));
  return hold;
}

async function newEvent(): Promise<string> {
  const eventId = uniqueEventId("swc");
  await fx.inventory.events.create({ eventId, input: eventInput(fx.clock) });
  return eventId;
}

function total(results: SweepResult[]): SweepResult {
  return results.reduce(
    (a, r) => ({
      examined: a.examined + r.examined,
      seatsReleased: a.seatsReleased + r.seatsReleased,
      releasedSeats: [...a.releasedSeats, ...r.releasedSeats],
      generalAdmissionHoldsExpired: a.generalAdmissionHoldsExpired + r.generalAdmissionHoldsExpired,
      generalAdmissionQuantityReturned: a.generalAdmissionQuantityReturned + r.generalAdmissionQuantityReturned,
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

/** Every shard swept once, at `now`, with the seat map's candidates. */
async function sweepShards(
  eventId: string,
  now: number,
  options: { heldSeats?: HeldSeatsCache; storeReadDue?: (sectionId: string) => boolean; inventory?: Inventory } = {},
): Promise<SweepResult> {
  const inventory = options.inventory ?? fx.inventory;
  return total(
    await Promise.all(
      shards.map((shard) =>
        inventory.holds.sweepExpired({
          eventId,
          shard,
          now,
          heldSeats: options.heldSeats ?? seatMap,
          ...(options.storeReadDue ? { storeReadDue: options.storeReadDue } : {}),
        }),
      ),
    ),
  );
}

async function seatItem(eventId: string, seatId: string) {
  const out = await doc.send(
    new GetCommand({ TableName: fx.tableName, Key: keys.seat(eventId, parseSeatId(seatId)!), ConsistentRead: true }),
  );
  return out.Item;
}

/** The sweeps' DynamoDB reads of an event since `from`: GSI2 queries and reads of its sections. */
function sweepReads(eventId: string, from: number): string[] {
  return sent
    .slice(from)
    .filter((c) => c.command === "QueryCommand")
    .map((c) => ({ index: c.input.IndexName, pk: String((c.input.ExpressionAttributeValues as Item)?.[":pk"]) }))
    .filter((q) => q.pk.startsWith(`EVT#${eventId}#`) && !q.pk.includes("#GAEXP#"))
    .map((q) => `${q.index ?? "table"} ${q.pk}`);
}
type Item = Record<string, unknown>;

const never = () => false;

describe("the sweeper's candidates", () => {
  it("an expired hold is swept from the seat map's expiry in Redis, with no index entry and no read of the section", async () => {
    const eventId = await newEvent();
    // The seat map has the section (the hold path's shield fills it before a hold).
    expect(await seatMap.getSection(eventId, "A")).not.toBeNull();
    const short = await holdSeats(fx.inventory, eventId, "fan-short", ["A-1-1", "A-1-2"], 30);
    const long = await holdSeats(fx.inventory, eventId, "fan-long", ["A-2-1"], 300);
    // The hold wrote no GSI2 key on the seat: nothing for an index to bill.
    const item = await seatItem(eventId, "A-1-1");
    expect(item).toMatchObject({ status: "held", holdId: short.holdId });
    expect(item?.GSI2PK).toBeUndefined();
    expect(item?.GSI2SK).toBeUndefined();
    expect((await seatMap.heldUntil(eventId, ["A"])).get("A")?.get("A-1-1")).toBe(Date.parse(short.expiresAt));

    const from = sent.length;
    // Not expired yet: nothing swept.
    expect((await sweepShards(eventId, fx.clock.now(), { storeReadDue: never })).seatsReleased).toBe(0);
    fx.clock.advance(30_000);
    const swept = await sweepShards(eventId, fx.clock.now(), { storeReadDue: never });
    expect(swept.releasedSeats.sort()).toEqual(["A-1-1", "A-1-2"]);
    expect(swept.seatsReleased).toBe(2);
    // Redis named them: no GSI2 query (the event is marked) and no read of the section.
    expect(sweepReads(eventId, from)).toEqual([]);
    expect(await seatItem(eventId, "A-1-1")).toMatchObject({ status: "available" });
    expect(await seatItem(eventId, "A-2-1")).toMatchObject({ status: "held", holdId: long.holdId });
  });

  it("a seat map rebuilt after a hold lapsed shows the seat available and still names it to the sweep", async () => {
    const eventId = await newEvent();
    await seatMap.getSection(eventId, "A");
    const lapsed = await holdSeats(fx.inventory, eventId, "fan-lapsed", ["A-1-5", "A-3-2"], 30);
    const live = await holdSeats(fx.inventory, eventId, "fan-live", ["A-2-4"], 300);
    fx.clock.advance(30_000);
    // The refresh job rebuilds the section from DynamoDB before any sweep ran: the lapsed hold's
    // seats are free to take, and shown so.
    expect(await seatMap.rebuild(eventId, "A")).toBe(true);
    const statuses = new Map((await seatMap.getSection(eventId, "A"))!.seats.map((s) => [s.id, s.status]));
    expect([statuses.get("A-1-5"), statuses.get("A-3-2"), statuses.get("A-2-4")]).toEqual([
      "available",
      "available",
      "held",
    ]);
    const expiries = (await seatMap.heldUntil(eventId, ["A"])).get("A");
    expect(expiries?.get("A-1-5")).toBe(Date.parse(lapsed.expiresAt));
    expect(expiries?.get("A-2-4")).toBe(Date.parse(live.expiresAt));

    // The shards' sweeps find the lapsed seats in the rebuilt map: no section read, no backstop.
    const from = sent.length;
    const swept = await sweepShards(eventId, fx.clock.now(), { storeReadDue: never });
    expect(swept.releasedSeats.sort()).toEqual(["A-1-5", "A-3-2"]);
    expect(sweepReads(eventId, from)).toEqual([]);
    expect(await seatItem(eventId, "A-1-5")).toMatchObject({ status: "available" });
    expect(await seatItem(eventId, "A-2-4")).toMatchObject({ status: "held", holdId: live.holdId });
    // Told to the map, the seats leave its expiries (and the available count does not move twice).
    const before = await seatMap.availability(eventId);
    await createSeatMapWrites({ seatMap, logger }).released(eventId, swept.releasedSeats);
    expect((await seatMap.heldUntil(eventId, ["A"])).get("A")?.has("A-1-5")).toBe(false);
    expect(await seatMap.availability(eventId)).toEqual(before);
  });

  it("Redis lost the seat map (FLUSHDB): the sweep reads the section from DynamoDB, once for every shard", async () => {
    const eventId = await newEvent();
    await seatMap.getSection(eventId, "A");
    await holdSeats(fx.inventory, eventId, "fan-1", ["A-1-1"], 30);
    await holdSeats(fx.inventory, eventId, "fan-2", ["A-3-4"], 30);
    const live = await holdSeats(fx.inventory, eventId, "fan-3", ["A-2-2"], 300);
    await db.wipe();
    expect((await seatMap.heldUntil(eventId, ["A"])).has("A")).toBe(false);
    fx.clock.advance(30_000);

    const from = sent.length;
    // One read per period for the section, whichever shard's sweep comes first (the worker's
    // onceEvery): it resets the expired seats of every shard.
    const due = new Set<string>();
    const once = (sectionId: string) => !due.has(sectionId) && due.add(sectionId) !== undefined;
    const swept = await sweepShards(eventId, fx.clock.now(), { storeReadDue: once });
    expect(swept.releasedSeats.sort()).toEqual(["A-1-1", "A-3-4"]);
    expect(sweepReads(eventId, from)).toEqual([`table ${keys.sectionPartition(eventId, "A")}`]);
    expect(await seatItem(eventId, "A-2-2")).toMatchObject({ status: "held", holdId: live.holdId });

    // Redis away altogether (the cache throws): the same read.
    const down: HeldSeatsCache = {
      heldUntil: async () => {
        throw new Error("redis away");
      },
    };
    await holdSeats(fx.inventory, eventId, "fan-4", ["A-4-1"], 10);
    fx.clock.advance(10_000);
    const again = await sweepShards(eventId, fx.clock.now(), { heldSeats: down });
    expect(again.releasedSeats).toEqual(["A-4-1"]);
  });

  it("a held seat the seat map never heard of is swept by the event's read of every section, which Redis does not enter", async () => {
    const eventId = await newEvent();
    await seatMap.getSection(eventId, "A");
    // Written to DynamoDB, never told to the seat map (a write-through that failed).
    held(await fx.inventory.holds.holdSeats({ eventId, fanId: "fan-1", seatIds: ["A-4-5"], holdSeconds: 20 }));
    fx.clock.advance(20_000);
    // The seat map has the section and does not list the seat: the shards' sweeps cannot see it.
    expect((await sweepShards(eventId, fx.clock.now())).seatsReleased).toBe(0);
    const from = sent.length;
    const backstop = await fx.inventory.holds.sweepSections({ eventId });
    expect(backstop).toMatchObject({ seatsReleased: 1, releasedSeats: ["A-4-5"] });
    expect(sweepReads(eventId, from)).toEqual([`table ${keys.sectionPartition(eventId, "A")}`]);
    expect(await seatItem(eventId, "A-4-5")).toMatchObject({ status: "available" });
    // Before the on-sale no seat can be held: the backstop reads nothing.
    const later = uniqueEventId("swc");
    await fx.inventory.events.create({
      eventId: later,
      input: eventInput(fx.clock, { onSaleAt: new Date(fx.clock.now() + 3_600_000).toISOString() }),
    });
    const before = sent.length;
    expect((await fx.inventory.holds.sweepSections({ eventId: later })).examined).toBe(0);
    expect(sweepReads(later, before)).toEqual([]);
  });

  it("the read of every section remembers a sold-out section and does not read it again", async () => {
    const eventId = uniqueEventId("swc");
    await fx.inventory.events.create({
      eventId,
      input: eventInput(fx.clock, {
        sections: [
          { id: "A", tier: "Floor", price: 15_000, rows: 1, seatsPerRow: 2 },
          { id: "B", tier: "Floor", price: 15_000, rows: 1, seatsPerRow: 2 },
        ],
      }),
    });
    const hold = held(
      await fx.inventory.holds.holdSeats({ eventId, fanId: "fan-b", seatIds: ["B-1-1", "B-1-2"], holdSeconds: 60 }),
    );
    const purchase = { eventId, holdId: hold.holdId, fanId: "fan-b", purchaseId: `${eventId}-b` };
    expect((await fx.inventory.purchases.createPending(purchase)).ok).toBe(true);
    expect((await fx.inventory.purchases.confirm(purchase)).ok).toBe(true);
    const deps = {
      inventory: fx.inventory,
      seatMap,
      seatMapWrites: createSeatMapWrites({ seatMap, logger }),
      soldOut: new Set<string>(),
    };
    const from = sent.length;
    expect((await sweepJob(deps, { eventId, sections: true })).seatsReleased).toBe(0);
    expect([...deps.soldOut]).toEqual([`${eventId}/B`]);
    const second = sent.length;
    await sweepJob(deps, { eventId, sections: true });
    const partition = (id: string) => `table ${keys.sectionPartition(eventId, id)}`;
    // The first read both sections; the second only the one with seats left.
    expect(sweepReads(eventId, second)).toEqual([partition("A")]);
    expect(sweepReads(eventId, from).sort()).toEqual([partition("A"), partition("A"), partition("B")]);
  });

  it("a hold renewed or confirmed between the candidate's read and the sweep's write is not released", async () => {
    const eventId = await newEvent();
    await seatMap.getSection(eventId, "A");
    const renewedFrom = await holdSeats(fx.inventory, eventId, "fan-r", ["A-1-3"], 30);
    const confirmed = await holdSeats(fx.inventory, eventId, "fan-c", ["A-2-3"], 30);
    const expiry = Date.parse(renewedFrom.expiresAt);
    // A gateway whose clock is a second behind the sweeper's still confirms the hold it sees live.
    const gatewayClock = manualClock(expiry - 1_000);
    const gateway = fx.newInstance(gatewayClock);
    fx.clock.set(expiry);
    let renewed: Hold | undefined;
    // Between Redis's answer and the conditional writes (once, whichever shard's sweep asks first):
    // the fan holds the seat again (a new hold, a new expiry), and the other fan's purchase commits.
    let race: Promise<void> | undefined;
    const interleave = async () => {
      renewed = held(
        await fx.inventory.holds.holdSeats({ eventId, fanId: "fan-r", seatIds: ["A-1-3"], holdSeconds: 300 }),
      );
      const purchase = { eventId, holdId: confirmed.holdId, fanId: "fan-c", purchaseId: `${eventId}-c` };
      expect((await gateway.purchases.createPending(purchase)).ok).toBe(true);
      expect((await gateway.purchases.confirm(purchase)).ok).toBe(true);
    };
    const seen: number[] = [];
    const racing: HeldSeatsCache = {
      async heldUntil(e, sectionIds) {
        const known = await seatMap.heldUntil(e, sectionIds);
        seen.push(known.get("A")?.get("A-1-3") ?? 0);
        race ??= interleave();
        await race;
        return known;
      },
    };
    const swept = await sweepShards(eventId, expiry, { heldSeats: racing, storeReadDue: never });
    await race;
    // Every shard's sweep read the renewed seat's old expiry, and the two seats were candidates.
    expect(new Set(seen)).toEqual(new Set([expiry]));
    expect(swept.examined).toBe(2);
    expect(swept.seatsReleased).toBe(0);
    expect(await seatItem(eventId, "A-1-3")).toMatchObject({ status: "held", holdId: renewed?.holdId });
    expect(await seatItem(eventId, "A-2-3")).toMatchObject({ status: "sold", purchaseId: `${eventId}-c` });
  });

  it("a seat map that missed a re-hold names an older expiry: the seat's own expired hold is swept all the same", async () => {
    const eventId = await newEvent();
    await seatMap.getSection(eventId, "A");
    await holdSeats(fx.inventory, eventId, "fan-1", ["A-3-3"], 10);
    fx.clock.advance(10_000);
    // Held again after the first expired, and the seat map not told: it still has the first expiry.
    const second = held(
      await fx.inventory.holds.holdSeats({ eventId, fanId: "fan-2", seatIds: ["A-3-3"], holdSeconds: 10 }),
    );
    // While the second lives, the stale candidate releases nothing.
    expect((await sweepShards(eventId, fx.clock.now(), { storeReadDue: never })).seatsReleased).toBe(0);
    expect(await seatItem(eventId, "A-3-3")).toMatchObject({ status: "held", holdId: second.holdId });
    fx.clock.advance(10_000);
    const swept = await sweepShards(eventId, fx.clock.now(), { storeReadDue: never });
    expect(swept.releasedSeats).toEqual(["A-3-3"]);
    expect(await seatItem(eventId, "A-3-3")).toMatchObject({ status: "available" });
  });

  it("sweepers and re-holds at once, on separate clients: no re-held seat is ever released", async () => {
    const eventId = uniqueEventId("swc");
    await fx.inventory.events.create({
      eventId,
      input: eventInput(fx.clock, {
        maxSeatsPerFan: 8,
        sections: [{ id: "A", tier: "Floor", price: 15_000, rows: 4, seatsPerRow: 10 }],
      }),
    });
    await seatMap.getSection(eventId, "A");
    const seatIds = Array.from({ length: 40 }, (_, i) => `A-${Math.floor(i / 10) + 1}-${(i % 10) + 1}`);
    await mapLimit(seatIds, 8, (seatId, i) => holdSeats(fx.inventory, eventId, `old${i}`, [seatId], 5));
    fx.clock.advance(5_000);
    const [g1, g2, g3, g4] = fx.gateways(4);
    // Three sweepers of every shard and a re-hold of every seat by another fan, all in flight at once.
    const [sweeps, reheld] = await Promise.all([
      Promise.all([g1!, g2!, g3!].map((inventory) => sweepShards(eventId, fx.clock.now(), { inventory }))),
      Promise.all(
        seatIds.map(async (seatId, i) =>
          held(await g4!.holds.holdSeats({ eventId, fanId: `new${i}`, seatIds: [seatId], holdSeconds: 600 })),
        ),
      ),
    ]);
    const released = total(sweeps).releasedSeats;
    // Each seat released at most once, and only before its re-hold: every seat ends held by it.
    expect(new Set(released).size).toBe(released.length);
    for (const [i, seatId] of seatIds.entries()) {
      expect(await seatItem(eventId, seatId), seatId).toMatchObject({ status: "held", holdId: reheld[i]!.holdId });
    }
  });

  it("an event made before keeps its seats' GSI2 expiry entries swept; a new hold of such a seat takes its entry out", async () => {
    const eventId = await newEvent();
    // As the event item and a hold looked before: no mark, and the seat in GSI2's expiry partition.
    await doc.send(
      new UpdateCommand({ TableName: fx.tableName, Key: keys.event(eventId), UpdateExpression: "REMOVE seatExpiries" }),
    );
    const oldHold = async (seatId: string, holdId: string, expiresAt: number) =>
      doc.send(
        new UpdateCommand({
          TableName: fx.tableName,
          Key: keys.seat(eventId, parseSeatId(seatId)!),
          UpdateExpression:
            "SET #status = :held, holderId = :fan, holdId = :hold, holdExpiresAt = :exp, heldAt = :now, GSI2PK = :pk, GSI2SK = :sk",
          ExpressionAttributeNames: { "#status": "status" },
          ExpressionAttributeValues: {
            ":held": "held",
            ":fan": "old-fan",
            ":hold": holdId,
            ":exp": expiresAt,
            ":now": fx.clock.now(),
            ":pk": keys.heldSeatsPartition(eventId, shardOf(seatId)),
            ":sk": expirySortKey(expiresAt, seatId),
          },
        }),
      );
    const expiresAt = fx.clock.now() + 10_000;
    await oldHold("A-1-5", "a".repeat(48), expiresAt);
    await oldHold("A-2-5", "b".repeat(48), expiresAt);
    fx.clock.advance(10_000);
    // The seat map has the section, without these seats (held before it was filled, say).
    await seatMap.getSection(eventId, "A");
    await redis.hdel(`sm:{evt:${eventId}}:sec:A:exp`, "A-1-5", "A-2-5");
    // A new hold of one of them removes its stale entry with the hold's own write.
    const rehold = held(
      await fx.inventory.holds.holdSeats({ eventId, fanId: "fan-n", seatIds: ["A-2-5"], holdSeconds: 300 }),
    );
    expect((await seatItem(eventId, "A-2-5"))?.GSI2PK).toBeUndefined();

    const from = sent.length;
    const swept = await sweepShards(eventId, fx.clock.now(), { storeReadDue: never });
    expect(swept.releasedSeats).toEqual(["A-1-5"]);
    // The old entry was found in GSI2; the sweep took the seat out of it.
    expect(sweepReads(eventId, from)).toContain(`GSI2 ${keys.heldSeatsPartition(eventId, shardOf("A-1-5"))}`);
    const item = await seatItem(eventId, "A-1-5");
    expect(item).toMatchObject({ status: "available" });
    expect(item?.GSI2PK).toBeUndefined();
    expect(await seatItem(eventId, "A-2-5")).toMatchObject({ status: "held", holdId: rehold.holdId });
  });
});
