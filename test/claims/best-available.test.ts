/**
 * Best available when the map is wrong: DynamoDB decides. Two hold services (two gateways, each
 * its own DynamoDB client) on a real Redis and the local DynamoDB, with the shield bypassed (as
 * when Redis cannot answer it) and the seat map never told of a hold, so every fan proposes from
 * a map on which every seat is free. Proposals collide in the transaction, are marked taken and
 * traded for the next, under the same read of the fan's ledger; nothing is held twice.
 */
import { Redis } from "ioredis";
import pino from "pino";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { BEST_TRANSACTIONS, createHoldService, type HoldService } from "../../src/claims/hold-service.js";
import { createSeatMapWrites } from "../../src/claims/seat-map-writes.js";
import { sectionSource } from "../../src/gateway.js";
import type { HoldResult, Inventory } from "../../src/inventory/index.js";
import { createMetrics } from "../../src/metrics.js";
import { createSeatMapCache, type SeatMapCache } from "../../src/seatmap/cache.js";
import { eventInput, type InventoryFixture, setupInventory, uniqueEventId } from "../inventory/fixtures.js";

let fx: InventoryFixture;
let redis: Redis;
let services: HoldService[];
/** Per request: the transactions it sent (the first, and each lost one traded for other seats). */
let retries: number[] = [];

beforeAll(async () => {
  fx = await setupInventory("best");
  redis = new Redis(inject("redisUrl"), { maxRetriesPerRequest: 1 });
  const logger = pino({ level: "silent" });
  services = fx.gateways(2).map((inventory) => {
    const metrics = createMetrics();
    const real = createSeatMapCache({ redis, source: sectionSource(inventory), metrics, logger });
    const stale: SeatMapCache = {
      ...real,
      // Never told of a hold, never rebuilt: every seat stays free on this map.
      apply: async () => {},
      rebuild: async () => true,
      shield: async () => ({ kind: "bypass", release: async () => {} }),
    };
    const counting: Inventory = {
      ...inventory,
      holds: {
        ...inventory.holds,
        writeSeats: (checked, next) => {
          const id = retries.push(1) - 1;
          return inventory.holds.writeSeats(
            checked,
            next &&
              (async (lost) => {
                const other = await next(lost);
                if (!("ok" in other)) retries[id]!++;
                return other;
              }),
          );
        },
      },
    };
    return createHoldService({
      inventory: counting,
      seatMap: stale,
      seatMapWrites: createSeatMapWrites({ seatMap: stale, logger }),
      metrics,
      logger,
    });
  });
});
afterAll(() => {
  redis.disconnect();
  fx.close();
});

describe("best available on a stale map", () => {
  it("300 fans at once on two instances, 2 best in a section of 40: DynamoDB grants each seat once, in pairs", async () => {
    const eventId = uniqueEventId("best");
    const input = eventInput(fx.clock, {
      sections: [{ id: "F", tier: "Floor", price: 10_000, rows: 4, seatsPerRow: 10 }],
    });
    expect((await fx.inventory.events.create({ eventId, input })).ok).toBe(true);
    retries = [];

    const results: HoldResult[] = await Promise.all(
      Array.from({ length: 300 }, (_, i) =>
        services[i % 2]!.holdBest({ eventId, fanId: `fan${i}`, best: { quantity: 2, tier: "Floor" } }),
      ),
    );
    const granted = results.flatMap((r) => (r.ok ? [r.hold] : []));
    const refused = results.flatMap((r) => (r.ok ? [] : [r]));
    expect(refused.every((r) => r.reason === "no_block_available")).toBe(true);
    const seats = granted.flatMap((h) => h.seats);
    expect(new Set(seats).size).toBe(seats.length);
    expect(seats.length).toBeLessThanOrEqual(40);
    for (const h of granted) {
      const [a, b] = h.seats.map((s) => s.split("-").map((p, i) => (i === 0 ? p : Number(p))));
      expect(a![1]).toBe(b![1]);
      expect(Math.abs((a![2] as number) - (b![2] as number))).toBe(1);
      expect(h.amount).toBe(20_000);
    }
    // The map said every seat was free: the crowd met in DynamoDB, and retried within the bound.
    expect(retries.some((n) => n > 1)).toBe(true);
    expect(Math.max(...retries)).toBeLessThanOrEqual(BEST_TRANSACTIONS);
    expect(granted.length).toBeGreaterThan(1);

    // DynamoDB holds exactly the granted seats.
    const page = await fx.inventory.seats.listSection({ eventId, sectionId: "F", consistent: true, limit: 100 });
    const held = page?.seats.filter((s) => s.status === "held").map((s) => s.id) ?? [];
    expect(held.sort()).toEqual([...seats].sort());
    console.info(
      `stale-map best race: ${granted.length} pairs granted to 300 fans, ` +
        `${retries.reduce((a, b) => a + b, 0)} transactions for 300 requests`,
    );
  }, 120_000);
});
