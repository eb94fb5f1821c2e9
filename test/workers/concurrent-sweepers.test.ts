/**
 * Three sweepers at once over the same shards of one event, each with its own DynamoDB client,
 * inventory and seat-map cache (as three worker processes would have): every expired seat is
 * reset by exactly one of them, every expired general-admission hold returns its quantity exactly
 * once, live holds are left alone, and the seat map ends where DynamoDB is.
 */
import {
  createTable,
  eventInput,
  expectAuditPasses,
  type Gateway,
  putEvent,
  startGateway,
  uniqueId,
} from "../gateway/harness.js";
import { mapLimit, sleep } from "../support/worker-process.js";
import { Redis } from "ioredis";
import pino from "pino";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { createDynamoClient } from "../../src/dynamodb/client.js";
import { sectionSource } from "../../src/gateway.js";
import { createInventory, type Hold, SWEEP_SHARDS, type SweepResult } from "../../src/inventory/index.js";
import { createMetrics } from "../../src/metrics.js";
import { createSeatMapCache } from "../../src/seatmap/cache.js";
import { sweepJob } from "../../src/workers/workers.js";
import { createSeatMapWrites } from "../../src/claims/seat-map-writes.js";

const SWEEPERS = 3;
const ROWS = 10;
const SEATS_PER_ROW = 30;
const TOTAL_SEATS = ROWS * SEATS_PER_ROW;

let gw: Gateway;
let tableName: string;
let auditRedis: Redis;
const closers: (() => void)[] = [];

beforeAll(async () => {
  tableName = await createTable();
  gw = await startGateway({ tableName, workers: false });
  auditRedis = new Redis(inject("redisUrl"));
});
afterAll(async () => {
  for (const close of closers) close();
  auditRedis?.disconnect();
  await gw?.close();
});

/** What one worker process has: its own clients, inventory and seat-map cache. */
function sweeper() {
  const dynamo = createDynamoClient({
    endpoint: inject("dynamoEndpoint"),
    region: "us-east-1",
    requestTimeoutMs: 30_000,
  });
  const redis = new Redis(inject("redisUrl"), { maxRetriesPerRequest: 1 });
  closers.push(
    () => dynamo.destroy(),
    () => redis.disconnect(),
  );
  const inventory = createInventory({ client: dynamo, tableName });
  const seatMap = createSeatMapCache({
    redis,
    source: sectionSource(inventory),
    metrics: createMetrics(),
    logger: pino({ level: "silent" }),
  });
  return { inventory, seatMap, seatMapWrites: createSeatMapWrites({ seatMap, logger: pino({ level: "silent" }) }) };
}

function held(result: { ok: true; hold: Hold } | { ok: false; reason: string }): Hold {
  if (!result.ok) throw new Error(`expected a hold, got ${JSON.stringify(result)}`);
  return result.hold;
}

describe("three sweepers at once", () => {
  it("reset each expired hold exactly once and leave live holds alone", async () => {
    const eventId = uniqueId("cs");
    const capacity = 2_000;
    const input = eventInput({
      maxSeatsPerFan: 8,
      sections: [{ id: "A", tier: "Floor", price: 10000, rows: ROWS, seatsPerRow: SEATS_PER_ROW }],
      generalAdmission: [{ id: "GA", tier: "Standing", price: 5000, capacity }],
    });
    expect((await putEvent(gw, eventId, input)).status).toBe(201);
    const { holds, inventory, seatMap } = gw.deps;

    // Through the hold service, as the route does, so the seat map shows them held.
    const seatGroups = Array.from({ length: 30 }, (_, i) => {
      const row = Math.floor(i / 5) + 1;
      return Array.from({ length: 6 }, (_, k) => `A-${row}-${(i % 5) * 6 + k + 1}`);
    });
    const live = new Set([0, 7, 19, 29]); // a few holds that outlive the sweep
    const seatHolds = await mapLimit(seatGroups, 12, async (seats, i) =>
      held(await holds.holdSeats({ eventId, fanId: `fan${i}`, seatIds: seats, holdSeconds: live.has(i) ? 600 : 1 })),
    );
    const gaHolds = await mapLimit(
      Array.from({ length: 48 }, (_, i) => i),
      12,
      async (i) =>
        held(
          await holds.holdGeneralAdmission({
            eventId,
            fanId: `ga${i}`,
            areaId: "GA",
            quantity: 1 + (i % 4),
            holdSeconds: i % 12 === 0 ? 600 : 1,
          }),
        ),
    );
    const expiredSeats = seatHolds.filter((_, i) => !live.has(i)).flatMap((h) => h.seats);
    const liveSeats = seatHolds.filter((_, i) => live.has(i)).flatMap((h) => h.seats);
    const quantity = (h: Hold) => h.generalAdmission?.quantity ?? 0;
    const isLive = (h: Hold) => Date.parse(h.expiresAt) - Date.parse(h.createdAt) > 60_000;
    const expiredGa = gaHolds.filter((h) => !isLive(h));
    const liveGa = gaHolds.filter(isLive).reduce((n, h) => n + quantity(h), 0);
    const shortExpiry = Math.max(
      ...[...seatHolds.filter((_, i) => !live.has(i)), ...expiredGa].map((h) => Date.parse(h.expiresAt)),
    );
    // The clock has to pass the short holds' expiry; there is nothing to poll for that.
    await sleep(Math.max(0, shortExpiry - Date.now() + 50));
    expect((await seatMap.getSection(eventId, "A"))!.seats.filter((s) => s.status === "held")).toHaveLength(
      seatHolds.length * 6,
    );

    // Every sweeper starts every shard at the same moment.
    const sweepers = Array.from({ length: SWEEPERS }, sweeper);
    const runs = await Promise.all(
      sweepers.map((deps) =>
        Promise.all(Array.from({ length: SWEEP_SHARDS }, (_, shard) => sweepJob(deps, { eventId, shard }))),
      ),
    );
    const all: SweepResult[] = runs.flat();

    // The released seats partition the expired ones: each released by exactly one sweeper.
    const released = all.flatMap((r) => r.releasedSeats);
    expect(released.length).toBe(expiredSeats.length);
    expect(new Set(released)).toEqual(new Set(expiredSeats));

    // General admission: each expired hold's quantity returned exactly once.
    expect(all.reduce((n, r) => n + r.generalAdmissionHoldsExpired, 0)).toBe(expiredGa.length);
    expect(all.reduce((n, r) => n + r.generalAdmissionQuantityReturned, 0)).toBe(
      expiredGa.reduce((n, h) => n + quantity(h), 0),
    );
    expect(await inventory.seats.generalAdmission({ eventId, areaId: "GA" })).toMatchObject({
      capacity,
      held: liveGa,
      available: capacity - liveGa,
      sold: 0,
    });

    // Live holds untouched; stored statuses and the available index true again.
    const seats = new Map(
      (await inventory.seats.listSection({ eventId, sectionId: "A" }))!.seats.map((s) => [s.id, s]),
    );
    for (const id of liveSeats) expect(seats.get(id)?.status, id).toBe("held");
    const counts = (await inventory.seats.eventCounts({ eventId }))!;
    expect(counts.seats).toMatchObject({
      total: TOTAL_SEATS,
      held: liveSeats.length,
      expiredHolds: 0,
      available: TOTAL_SEATS - liveSeats.length,
    });
    for (const h of gaHolds.filter(isLive))
      expect((await inventory.holds.get({ eventId, holdId: h.holdId, fanId: h.fanId }))?.status).toBe("held");

    // A second round of all three finds nothing left to do.
    const again = (
      await Promise.all(
        sweepers.map((deps) =>
          Promise.all(Array.from({ length: SWEEP_SHARDS }, (_, shard) => sweepJob(deps, { eventId, shard }))),
        ),
      )
    ).flat();
    expect(again.reduce((n, r) => n + r.seatsReleased + r.generalAdmissionQuantityReturned + r.examined, 0)).toBe(0);

    // The seat map: what the sweepers applied (each seat by the one that released it) is the truth.
    const cached = (await seatMap.getSection(eventId, "A"))!;
    const cachedHeld = cached.seats.filter((s) => s.status !== "available").map((s) => s.id);
    expect(cachedHeld.sort()).toEqual([...liveSeats].sort());
    expect((await seatMap.availability(eventId)).A).toBe(TOTAL_SEATS - liveSeats.length);
    await expectAuditPasses(gw, eventId, auditRedis);
  });
});
