/**
 * A sale inside DynamoDB's per-partition limits (issue 16 item 2): many fans at once hold and buy
 * seats and general-admission places against a local DynamoDB in aws mode, whose partitions
 * throttle past their write and read units/s and whose transactions on one item conflict. The
 * limits are a tenth of AWS's (100 write and 300 read units/s per partition) so that this
 * machine's rate meets them: one purchases-index partition for the whole event (3 units per sale)
 * or one counter item per standing area (4 units per place, and every hold of the area
 * transacting on one item) throttles and conflicts here, as they would at ten times the rate on
 * AWS. With the purchases and outbox partitions sharded and the area's stock over its counters,
 * no operation fails for throttling or conflict after the SDK's retries, and the audit passes.
 */
import { randomUUID } from "node:crypto";
import type { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { auditEvent } from "../../src/audit/audit.js";
import { mapLimit } from "../../src/concurrency.js";
import { createDynamoClient } from "../../src/dynamodb/client.js";
import { ensureTable } from "../../src/dynamodb/table.js";
import { createInventory, type Inventory } from "../../src/inventory/index.js";
import { gaCounters } from "../../src/inventory/keys.js";
import { type SpawnedDynamoDB, spawnLocalDynamoDB } from "../../src/local/dynamodb.js";
import { fetchLocalDynamoReport, formatPartitionReport } from "../../src/local/dynamodb-report.js";

const PARTITION_WCU = 100;
const PARTITION_RCU = 300;
const SECTIONS = 12;
const ROWS = 4;
const PER_ROW = 10; // 40 seats per section, 480 in all
const PLACES = 1_200; // gaCounters: 5 counters
const SEAT_FANS = 520; // more fans than seats: the last ones find none
const GA_FANS = 450; // 1 to 4 places each: more asked for than there are
const CONCURRENCY = 48;

let db: SpawnedDynamoDB;
let client: DynamoDBClient;
let inventory: Inventory;
const tableName = `hot_${randomUUID().slice(0, 8)}`;

beforeAll(async () => {
  db = await spawnLocalDynamoDB({
    port: 0,
    mode: "aws",
    partitionWcu: PARTITION_WCU,
    partitionRcu: PARTITION_RCU,
    startTimeoutMs: 60_000,
  });
  // As a gateway's client: the SDK's own retries (3 attempts) on throttling and conflicts.
  // A burst queues behind 64 sockets: the wait for one counts against the connection timeout.
  client = createDynamoClient({
    endpoint: db.endpoint,
    region: "us-east-1",
    maxSockets: 64,
    requestTimeoutMs: 60_000,
    connectionTimeoutMs: 60_000,
  });
  await ensureTable(client, tableName);
  inventory = createInventory({ client, tableName });
}, 120_000);

afterAll(async () => {
  client?.destroy();
  await db?.close();
});

/** An error or an answer that says DynamoDB refused for load, not for the sale's state. */
const isLoadFailure = (x: unknown): boolean =>
  x instanceof Error
    ? /throttl|conflict|capacity|contention|unavailable/i.test(`${x.name} ${x.message}`)
    : (x as { reason?: string })?.reason === "contention";

describe("a sale in aws mode at a tenth of the partition limits", () => {
  it("sells seats and standing places with no request failed for throttling or conflict, and the audit passes", async () => {
    const eventId = `hot${randomUUID().replaceAll("-", "").slice(0, 12)}`;
    expect(gaCounters(PLACES)).toBeGreaterThan(1);
    const created = await inventory.events.create({
      eventId,
      input: {
        name: "Hot keys",
        onSaleAt: new Date(Date.now() - 60_000).toISOString(),
        holdSeconds: 600,
        maxSeatsPerFan: 4,
        sections: Array.from({ length: SECTIONS }, (_, s) => ({
          id: `S${s}`,
          tier: "T",
          price: 5_000,
          rows: ROWS,
          seatsPerRow: PER_ROW,
        })),
        generalAdmission: [{ id: "GA", tier: "Standing", price: 3_000, capacity: PLACES }],
        waitingRoom: { admitPerSecond: 1_000, maxActive: 10_000, sessionSeconds: 900 },
      },
    });
    expect(created.ok).toBe(true);
    await fetchLocalDynamoReport(db.endpoint, { reset: true });

    const seatIds = Array.from({ length: SECTIONS * ROWS * PER_ROW }, (_, i) => {
      const s = i % SECTIONS;
      const k = Math.floor(i / SECTIONS);
      return `S${s}-${Math.floor(k / PER_ROW) + 1}-${(k % PER_ROW) + 1}`;
    });
    const loadFailures: unknown[] = [];
    const otherFailures: unknown[] = [];
    let seatsSold = 0;
    let placesSold = 0;
    let refusedSoldOut = 0;

    const buy = async (fanId: string, holdId: string, i: number) => {
      const purchaseId = `p-${i}-${randomUUID().slice(0, 8)}`;
      const pending = await inventory.purchases.createPending({
        eventId,
        holdId,
        fanId,
        purchaseId,
        startCharge: true,
      });
      if (!pending.ok) return pending;
      return inventory.purchases.confirm({ eventId, holdId, fanId, purchaseId, chargeId: `ch_${purchaseId}` });
    };

    const jobs = [
      ...Array.from({ length: SEAT_FANS }, (_, i) => ({ kind: "seat" as const, i })),
      ...Array.from({ length: GA_FANS }, (_, i) => ({ kind: "ga" as const, i })),
    ].sort(() => Math.random() - 0.5);
    let next = 0;
    await mapLimit(jobs, CONCURRENCY, async (job) => {
      const fanId = `${job.kind}-fan-${job.i}`;
      try {
        if (job.kind === "seat") {
          // Each fan tries seats in turn until one is held or none is left.
          while (next < seatIds.length) {
            const seat = seatIds[next++]!;
            const h = await inventory.holds.holdSeats({ eventId, fanId, seatIds: [seat] });
            if (!h.ok) {
              if (isLoadFailure(h)) loadFailures.push(h);
              else if (h.reason !== "seat_unavailable") otherFailures.push(h);
              if (isLoadFailure(h)) return;
              continue;
            }
            const c = await buy(fanId, h.hold.holdId, job.i);
            if (c.ok) seatsSold++;
            else (isLoadFailure(c) ? loadFailures : otherFailures).push(c);
            return;
          }
          refusedSoldOut++;
          return;
        }
        const quantity = 1 + (job.i % 4);
        const h = await inventory.holds.holdGeneralAdmission({ eventId, fanId, areaId: "GA", quantity });
        if (!h.ok) {
          if (h.reason === "insufficient_quantity") refusedSoldOut++;
          else (isLoadFailure(h) ? loadFailures : otherFailures).push(h);
          return;
        }
        // One in ten gives its places back: a release returns them to the counters it took from.
        if (job.i % 10 === 9) {
          const r = await inventory.holds.release({ eventId, holdId: h.hold.holdId, fanId });
          if (!r.ok) (isLoadFailure(r) ? loadFailures : otherFailures).push(r);
          return;
        }
        const c = await buy(fanId, h.hold.holdId, 100_000 + job.i);
        if (c.ok) placesSold += quantity;
        else (isLoadFailure(c) ? loadFailures : otherFailures).push(c);
      } catch (err) {
        (isLoadFailure(err) ? loadFailures : otherFailures).push(err);
      }
    });

    const report = await fetchLocalDynamoReport(db.endpoint);
    process.stderr.write(
      `hot-keys sale: ${seatsSold} seats and ${placesSold} places sold, ${refusedSoldOut} refused (sold out)\n` +
        `${formatPartitionReport(report, { top: 10 })}\n`,
    );
    // No partition of the event carries a large share of the sale's writes: one purchases-index
    // partition would take about a quarter (3 of some 13 units per sale), one area counter a tenth.
    const ofEvent = report.partitions.filter((p) => p.partitionKey.startsWith(`EVT#${eventId}#`));
    const total = ofEvent.reduce((n, p) => n + p.writeUnits, 0);
    const hottest = ofEvent.reduce((a, b) => (b.writeUnits > a.writeUnits ? b : a));
    expect(hottest.writeUnits / total, `hottest: ${hottest.index ?? "table"} ${hottest.partitionKey}`).toBeLessThan(
      0.05,
    );
    expect(loadFailures).toEqual([]);
    expect(otherFailures).toEqual([]);
    expect(seatsSold).toBe(seatIds.length);
    // Asked for: 450 fans x 2.5 places on average, less the releases: more than there are.
    const ga = await inventory.seats.generalAdmission({ eventId, areaId: "GA" });
    expect(ga).toMatchObject({ capacity: PLACES, sold: placesSold, held: 0 });
    expect(ga!.available + ga!.sold).toBe(PLACES);

    const audit = await auditEvent({ inventory }, eventId, { recheckPasses: 2, recheckDelayMs: 500 });
    expect(audit.checks.filter((c) => c.status === "fail")).toEqual([]);
    expect(audit.ok).toBe(true);
    expect(audit.totals.generalAdmission.sold).toBe(placesSold);
  }, 300_000);
});
