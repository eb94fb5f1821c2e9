/**
 * The hold service's seat-map updates after a release (issue 13, item 3), on a real Redis and a
 * real DynamoDB endpoint. The inventory runs on a clock the test moves, so a hold expires without
 * waiting; the seat-map cache is the real one, wrapped only to record (and let the test await)
 * what the service tells it.
 */
import { Redis } from "ioredis";
import pino from "pino";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { createHoldService, type HoldService } from "../../src/claims/hold-service.js";
import { createSeatMapWrites } from "../../src/claims/seat-map-writes.js";
import { sectionSource } from "../../src/gateway.js";
import type { HoldResult, Inventory } from "../../src/inventory/index.js";
import { createMetrics } from "../../src/metrics.js";
import { createSeatMapCache, type SeatMapCache, type SeatRow } from "../../src/seatmap/cache.js";
import { eventInput, type InventoryFixture, setupInventory, uniqueEventId } from "../inventory/fixtures.js";

let fx: InventoryFixture;
let redis: Redis;
let inventory: Inventory;
let seatMap: SeatMapCache;
/** Every change the service asked the cache to apply, in order. */
const applied: SeatRow[][] = [];
const pending: Promise<void>[] = [];
let service: HoldService;

beforeAll(async () => {
  fx = await setupInventory("release");
  redis = new Redis(inject("redisUrl"), { maxRetriesPerRequest: 1 });
  inventory = fx.inventory;
  const logger = pino({ level: "silent" });
  const metrics = createMetrics();
  seatMap = createSeatMapCache({ redis, source: sectionSource(inventory), metrics, logger });
  const recording: SeatMapCache = {
    ...seatMap,
    apply: (eventId, changes) => {
      applied.push(changes);
      const p = seatMap.apply(eventId, changes);
      pending.push(p.catch(() => undefined));
      return p;
    },
  };
  service = createHoldService({
    inventory,
    seatMap: recording,
    seatMapWrites: createSeatMapWrites({ seatMap: recording, logger }),
    metrics,
    logger,
    leaseMs: 10_000,
  });
});
afterAll(() => {
  redis.disconnect();
  fx.close();
});

/** The updates the service has sent so far have reached Redis. */
async function settled(): Promise<void> {
  await Promise.all(pending.splice(0));
}

function held(r: HoldResult | Awaited<ReturnType<HoldService["holdSeats"]>>) {
  if (!r.ok) throw new Error(`expected a hold, got ${JSON.stringify(r)}`);
  return r.hold;
}

async function cachedStatus(eventId: string, seatId: string): Promise<string | undefined> {
  const section = await seatMap.getSection(eventId, seatId.split("-")[0]!);
  return section?.seats.find((s) => s.id === seatId)?.status;
}

async function newEvent(): Promise<string> {
  // The shield judges expiry by Redis's clock: keep the inventory's a minute behind it, so a hold
  // the inventory has expired is expired for the shield too, and a live one is live for both.
  fx.clock.set(Date.now() - 60_000);
  const eventId = uniqueEventId("rel");
  expect((await inventory.events.create({ eventId, input: eventInput(fx.clock, { holdSeconds: 2 }) })).ok).toBe(true);
  // Warm the cache so updates are applied to a loaded section.
  expect(await cachedStatus(eventId, "A-1-1")).toBe("available");
  return eventId;
}

const changesFor = (seatId: string) => applied.flat().filter((c) => c.id === seatId);

describe("release tells the seat map only what it released", () => {
  it("releasing an expired hold whose seat another fan now holds leaves that seat held in the map and the shield", async () => {
    const eventId = await newEvent();
    const a = held(await service.holdSeats({ eventId, fanId: "fan-a", seatIds: ["A-1-1", "A-1-2"], holdSeconds: 2 }));
    fx.clock.advance(3_000); // A's hold has expired
    held(await service.holdSeats({ eventId, fanId: "fan-b", seatIds: ["A-1-1"], holdSeconds: 480 }));
    await settled();
    expect(await cachedStatus(eventId, "A-1-1")).toBe("held");
    applied.length = 0;

    // Fan A gives its hold back, several times at once (a double click, a retry).
    const releases = await Promise.all(
      Array.from({ length: 8 }, () => service.release({ eventId, holdId: a.holdId, fanId: "fan-a" })),
    );
    expect(releases.every((r) => r.ok)).toBe(true);
    expect(releases.flatMap((r) => (r.ok ? r.releasedSeats : [])).sort()).toEqual(["A-1-2"]);
    await settled();

    expect(changesFor("A-1-1")).toEqual([]);
    expect(changesFor("A-1-2")).toEqual([{ id: "A-1-2", status: "available" }]);
    expect(await cachedStatus(eventId, "A-1-1")).toBe("held");
    expect(await cachedStatus(eventId, "A-1-2")).toBe("available");
    // The shield still filters a third fan out of B's seat, with no DynamoDB request.
    const third = await service.holdSeats({ eventId, fanId: "fan-c", seatIds: ["A-1-1"], holdSeconds: 480 });
    expect(third).toMatchObject({ ok: false, reason: "seat_unavailable", stage: "shield" });
  });

  it("a repeated release publishes nothing, even after the seat was taken again", async () => {
    const eventId = await newEvent();
    const a = held(await service.holdSeats({ eventId, fanId: "fan-a", seatIds: ["A-2-1"], holdSeconds: 480 }));
    expect(await service.release({ eventId, holdId: a.holdId, fanId: "fan-a" })).toMatchObject({
      ok: true,
      releasedSeats: ["A-2-1"],
    });
    held(await service.holdSeats({ eventId, fanId: "fan-b", seatIds: ["A-2-1"], holdSeconds: 480 }));
    await settled();
    applied.length = 0;

    const repeats = await Promise.all(
      Array.from({ length: 5 }, () => service.release({ eventId, holdId: a.holdId, fanId: "fan-a" })),
    );
    expect(repeats.every((r) => r.ok && r.releasedSeats.length === 0)).toBe(true);
    await settled();
    expect(applied).toEqual([]);
    expect(await cachedStatus(eventId, "A-2-1")).toBe("held");
    expect(await service.holdSeats({ eventId, fanId: "fan-c", seatIds: ["A-2-1"], holdSeconds: 480 })).toMatchObject({
      stage: "shield",
    });
  });
});

describe("a request wrong in itself is refused as such, whatever the seats' state", () => {
  it("a seat named twice, too many seats, an unknown seat: the same answer when the seats are held, with no shield lease left", async () => {
    const eventId = await newEvent();
    held(await service.holdSeats({ eventId, fanId: "fan-a", seatIds: ["A-2-1"], holdSeconds: 480 }));
    await settled();
    expect(await cachedStatus(eventId, "A-2-1")).toBe("held");
    const event = await inventory.events.get({ eventId });
    const tooMany = Array.from({ length: event!.maxSeatsPerFan + 1 }, (_, i) => `A-2-${i + 1}`);
    // Many at once, each against a held seat (A-2-1) and a free one (A-3-1).
    const [twiceHeld, twiceFree, overHeld, unknownHeld] = await Promise.all([
      service.holdSeats({ eventId, fanId: "fan-b", seatIds: ["A-2-1", "A-2-1"] }),
      service.holdSeats({ eventId, fanId: "fan-b", seatIds: ["A-3-1", "A-3-1"] }),
      service.holdSeats({ eventId, fanId: "fan-b", seatIds: tooMany }),
      service.holdSeats({ eventId, fanId: "fan-b", seatIds: ["A-2-1", "Z-9-9"] }),
    ]);
    expect(twiceHeld).toMatchObject({ ok: false, reason: "invalid_request" });
    expect(twiceFree).toMatchObject({ ok: false, reason: "invalid_request" });
    expect(overHeld).toMatchObject({ ok: false, reason: "seat_limit_exceeded" });
    expect(unknownHeld).toMatchObject({ ok: false, reason: "not_found", what: "seat", seats: ["Z-9-9"] });
    // The free seats were never leased by those refusals: a fan holds one at once.
    held(await service.holdSeats({ eventId, fanId: "fan-c", seatIds: ["A-3-1"], holdSeconds: 480 }));
  });
});
