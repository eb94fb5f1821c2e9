/**
 * The sharded partitions (docs/data-model.md, "Hot keys"): a listing of purchases over the 16
 * purchases-index shards pages through every purchase exactly once whatever the page size, the
 * counts add the shards up, and the general-admission counter choice covers a quantity from the
 * counters that have places (or says it cannot).
 */
import { DynamoDBDocumentClient, PutCommand, UpdateCommand } from "@aws-sdk/lib-dynamodb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { countersOf, pickCounters } from "../../src/inventory/ga-counters.js";
import { gaCounterCapacity, gaCounters, keys, PURCHASE_SHARDS, purchaseShard } from "../../src/inventory/keys.js";
import { eventInput, type InventoryFixture, setupInventory, uniqueEventId } from "./fixtures.js";

let fx: InventoryFixture;
beforeAll(async () => {
  fx = await setupInventory("shards");
});
afterAll(() => fx?.close());

/** An event as it was made before GSI3 (no `purchasesIndex`): its purchases are in GSI1. */
async function legacyEvent(): Promise<string> {
  const eventId = uniqueEventId("shards");
  const created = await fx.inventory.events.create({ eventId, input: eventInput(fx.clock) });
  expect(created.ok).toBe(true);
  await DynamoDBDocumentClient.from(fx.client).send(
    new UpdateCommand({ TableName: fx.tableName, Key: keys.event(eventId), UpdateExpression: "REMOVE purchasesIndex" }),
  );
  return eventId;
}

describe("purchases over the index shards", () => {
  it("an event made before GSI3: a listing pages through every purchase exactly once, and the counts add the shards up", async () => {
    const eventId = await legacyEvent();
    const inventory = fx.newInstance(); // its event cache reads the event as it is now
    const doc = DynamoDBDocumentClient.from(fx.client);
    const ids = Array.from({ length: 70 }, (_, i) => `p-${i}`);
    const statusOf = (i: number) => (i % 7 === 0 ? "pending" : "confirmed");
    await Promise.all(
      ids.map((purchaseId, i) =>
        doc.send(
          new PutCommand({
            TableName: fx.tableName,
            Item: {
              ...keys.purchase(eventId, purchaseId),
              entity: "PURCHASE",
              eventId,
              purchaseId,
              holdId: "f".repeat(48),
              fanId: `fan-${i}`,
              status: statusOf(i),
              seats: [`A-1-${i + 1}`],
              amount: 100,
              createdAt: new Date().toISOString(),
              GSI1PK: keys.purchasesPartition(eventId, purchaseShard(purchaseId)),
              GSI1SK: keys.purchaseSortKey(statusOf(i), purchaseId),
            },
          }),
        ),
      ),
    );
    // The ids land in many shards (so the listing really merges them).
    expect(new Set(ids.map(purchaseShard)).size).toBeGreaterThan(PURCHASE_SHARDS / 2);

    for (const limit of [1, 3, 500]) {
      const seen: string[] = [];
      let cursor: string | undefined;
      let pages = 0;
      do {
        const page = await inventory.purchases.list({ eventId, limit, ...(cursor ? { cursor } : {}) });
        seen.push(...page.purchases.map((p) => p.purchaseId));
        cursor = page.nextCursor;
        pages++;
      } while (cursor && pages < 200);
      expect(seen.length, `limit ${limit}`).toBe(ids.length);
      expect(new Set(seen)).toEqual(new Set(ids));
      if (limit === 1) expect(pages).toBeGreaterThan(2);
    }
    const pending = await inventory.purchases.list({ eventId, status: "pending" });
    expect(pending.purchases.map((p) => p.purchaseId).sort()).toEqual(ids.filter((_, i) => i % 7 === 0).sort());
    expect(await inventory.purchases.count({ eventId })).toEqual({
      pending: 10,
      confirmed: 60,
      failed: 0,
      refunded: 0,
    });
    // A cursor that is not one of ours is an empty answer, not an error.
    expect((await inventory.purchases.list({ eventId, cursor: "not-a-cursor" })).purchases).toEqual([]);
  });

  it("open purchases (GSI3, keys only) are read over every shard by key, and only while open", async () => {
    const eventId = uniqueEventId("shards");
    expect((await fx.inventory.events.create({ eventId, input: eventInput(fx.clock) })).ok).toBe(true);
    const doc = DynamoDBDocumentClient.from(fx.client);
    const ids = Array.from({ length: 130 }, (_, i) => `o-${i}`);
    const createdAt = new Date(fx.clock.now()).toISOString();
    await Promise.all(
      ids.map((purchaseId, i) =>
        doc.send(
          new PutCommand({
            TableName: fx.tableName,
            Item: {
              ...keys.purchase(eventId, purchaseId),
              entity: "PURCHASE",
              eventId,
              purchaseId,
              holdId: "f".repeat(48),
              fanId: `fan-${i}`,
              status: "pending",
              seats: [`A-1-${i + 1}`],
              amount: 100,
              createdAt,
              GSI3PK: keys.openPurchasesPartition(eventId, purchaseShard(purchaseId)),
              GSI3SK: keys.openPurchaseSortKey(createdAt, purchaseId),
            },
          }),
        ),
      ),
    );
    expect(new Set(ids.map(purchaseShard)).size).toBe(PURCHASE_SHARDS);
    // More than one BatchGetItem's 100 keys.
    const pending = await fx.inventory.purchases.list({ eventId, status: "pending" });
    expect(pending.nextCursor).toBeUndefined();
    expect(pending.purchases.map((p) => p.purchaseId).sort()).toEqual([...ids].sort());
    expect((await fx.inventory.purchases.count({ eventId })).pending).toBe(130);
    // A failure closes it: it leaves the index, and the count of failures has it.
    await fx.inventory.purchases.markFailed({ eventId, purchaseId: "o-0", reason: "declined" });
    const after = await fx.inventory.purchases.list({ eventId });
    expect(after.purchases.map((p) => p.purchaseId)).not.toContain("o-0");
    expect(await fx.inventory.purchases.count({ eventId })).toEqual({
      pending: 129,
      confirmed: 0,
      failed: 1,
      refunded: 0,
    });
  });
});

describe("general-admission counters", () => {
  it("an area's counters split its capacity exactly", () => {
    for (const capacity of [1, 250, 251, 999, 5_000, 100_000]) {
      const n = gaCounters(capacity);
      expect(n).toBe(Math.min(16, Math.max(1, Math.ceil(capacity / 250))));
      const shares = Array.from({ length: n }, (_, k) => gaCounterCapacity(capacity, k));
      expect(shares.reduce((a, b) => a + b, 0)).toBe(capacity);
      expect(Math.max(...shares) - Math.min(...shares)).toBeLessThanOrEqual(1);
    }
  });

  it("a hold takes from the counters that have places, from several when none has them all", () => {
    expect(pickCounters([0, 5, 0], 3, () => 0)).toEqual({ "1": 3 });
    expect(pickCounters([1, 0, 1, 1], 3, () => 0.5)).toEqual({ "2": 1, "3": 1, "0": 1 });
    expect(pickCounters([1, 0, 1], 3)).toBeNull();
    expect(pickCounters([0, 0], 1)).toBeNull();
    // Every start spreads the holds: each counter is someone's first.
    const firsts = new Set(
      Array.from({ length: 4 }, (_, i) => Object.keys(pickCounters([9, 9, 9, 9], 1, () => i / 4)!)[0]),
    );
    expect(firsts.size).toBe(4);
  });

  it("a hold's counters read back from its record, and a hold of the one-counter layout took from counter 0", () => {
    expect(countersOf({ "0": 1, "3": 2 }, 3)).toEqual({ "0": 1, "3": 2 });
    expect(countersOf(undefined, 4)).toEqual({ "0": 4 });
    expect(countersOf({ x: 1 }, 2)).toEqual({ "0": 2 });
  });
});
