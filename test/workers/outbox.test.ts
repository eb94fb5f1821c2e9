/**
 * The outbox publisher against the real Redis (BullMQ) and DynamoDB endpoint of the test run.
 * Each test has its own table, event and queue prefix (so it counts only its own jobs); nothing
 * is flushed, and each queue is obliterated at the end.
 */
import { randomUUID } from "node:crypto";
import type { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { type Job, type Queue, Worker } from "bullmq";
import { Redis } from "ioredis";
import pino from "pino";
import { afterEach, describe, expect, inject, it } from "vitest";
import { ensureTable } from "../../src/dynamodb/table.js";
import { createInventory, type Inventory } from "../../src/inventory/index.js";
import {
  BOOKING_CONFIRMED,
  BOOKING_RETENTION_SECONDS,
  type BookingConfirmedJob,
  bookingJobId,
  createBookingsQueue,
  publishOutbox,
} from "../../src/workers/outbox.js";
import { eventInput, manualClock, uniqueEventId } from "../inventory/fixtures.js";
import { createTestDynamoClient } from "../support/dynamo.js";

const logger = pino({ level: "silent" });
const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

interface Fixture {
  eventId: string;
  inventory: Inventory;
  prefix: string;
  /** A bookings queue on a connection of its own, as each worker process would have. */
  queue(): Queue<BookingConfirmedJob>;
  connection(options?: { blocking?: boolean }): Redis;
}

async function setup(): Promise<Fixture> {
  const client: DynamoDBClient = createTestDynamoClient(inject("dynamoEndpoint"));
  cleanups.push(() => client.destroy());
  const tableName = `outbox_${randomUUID().slice(0, 8)}`;
  await ensureTable(client, tableName);
  const clock = manualClock();
  const inventory = createInventory({ client, tableName, clock: clock.now });
  const eventId = uniqueEventId("obx");
  const created = await inventory.createEvent(
    eventId,
    eventInput(clock, { sections: [{ id: "A", tier: "Floor", price: 10_000, rows: 5, seatsPerRow: 10 }] }),
  );
  expect(created.ok).toBe(true);

  // A hash tag of its own: this test's queue shares no key with any other test's.
  const prefix = `{obx${randomUUID().slice(0, 12)}}`;
  const connection = (options: { blocking?: boolean } = {}) => {
    const c = new Redis(inject("redisUrl"), options.blocking ? { maxRetriesPerRequest: null } : {});
    cleanups.push(() => c.disconnect());
    return c;
  };
  let first: Queue<BookingConfirmedJob> | undefined;
  const queue = () => {
    const q = createBookingsQueue(connection(), { prefix });
    cleanups.push(() => q.close());
    if (!first) {
      first = q;
      // Runs before the queues close (cleanups run in reverse).
      cleanups.push(() => q.obliterate({ force: true }));
    }
    return q;
  };
  return { eventId, inventory, prefix, queue, connection };
}

/** `n` purchases confirmed through the inventory: each leaves one unsent BookingConfirmed record. */
async function confirmPurchases(fx: Fixture, n: number, from = 0): Promise<string[]> {
  const ids: string[] = [];
  for (let i = from; i < from + n; i++) {
    const fanId = `fan-${i}`;
    const seat = `A-${Math.floor(i / 10) + 1}-${(i % 10) + 1}`;
    const hold = await fx.inventory.hold(fx.eventId, fanId, [seat], 480);
    if (!hold.ok) throw new Error(`hold ${seat}: ${hold.reason}`);
    const purchaseId = `${fx.eventId}-p${i}`;
    expect((await fx.inventory.createPendingPurchase(fx.eventId, hold.hold.holdId, fanId, purchaseId)).ok).toBe(true);
    expect((await fx.inventory.confirm(fx.eventId, hold.hold.holdId, fanId, purchaseId)).ok).toBe(true);
    ids.push(purchaseId);
  }
  return ids;
}

/** Every job of the queue, in any state: a duplicate anywhere would show here. */
async function allJobs(queue: Queue<BookingConfirmedJob>): Promise<Job<BookingConfirmedJob>[]> {
  return queue.getJobs(["wait", "active", "delayed", "completed", "failed", "prioritized", "waiting-children"], 0, -1);
}

async function expectOneJobPerPurchase(queue: Queue<BookingConfirmedJob>, purchaseIds: string[]): Promise<void> {
  const jobs = await allJobs(queue);
  expect(jobs.map((j) => j.id).sort()).toEqual(purchaseIds.map(bookingJobId).sort());
  const counts = await queue.getJobCounts();
  const total = Object.values(counts).reduce((a, b) => a + b, 0);
  expect(total).toBe(purchaseIds.length);
}

describe("publishOutbox", () => {
  it("adds one BookingConfirmed job per confirmed purchase, then marks each record sent", async () => {
    const fx = await setup();
    const ids = await confirmPurchases(fx, 5);
    const bookings = fx.queue();

    const first = await publishOutbox({ inventory: fx.inventory, bookings, logger }, { eventId: fx.eventId });
    expect(first).toEqual({ published: 5, marked: 5, alreadySent: 0 });
    await expectOneJobPerPurchase(bookings, ids);
    expect(await fx.inventory.listUnsentOutbox(fx.eventId)).toEqual([]);

    const job = await bookings.getJob(bookingJobId(ids[0]!));
    expect(job?.name).toBe(BOOKING_CONFIRMED);
    expect(job?.data).toMatchObject({
      type: BOOKING_CONFIRMED,
      eventId: fx.eventId,
      purchaseId: ids[0],
      outboxId: `BookingConfirmed#${ids[0]}`,
      payload: { purchaseId: ids[0], fanId: "fan-0", seats: ["A-1-1"], amount: 10_000 },
    });

    // Kept after it completes, so a re-add after a crash still finds it (the duplicate window).
    expect(job?.opts.removeOnComplete).toEqual({ age: BOOKING_RETENTION_SECONDS });

    // Again: nothing unsent, nothing added.
    const second = await publishOutbox({ inventory: fx.inventory, bookings, logger }, { eventId: fx.eventId });
    expect(second).toEqual({ published: 0, marked: 0, alreadySent: 0 });
    await expectOneJobPerPurchase(bookings, ids);

    // A purchase confirmed later is published by the next run, alone.
    const [later] = await confirmPurchases(fx, 1, 5);
    const third = await publishOutbox({ inventory: fx.inventory, bookings, logger }, { eventId: fx.eventId });
    expect(third).toEqual({ published: 1, marked: 1, alreadySent: 0 });
    await expectOneJobPerPurchase(bookings, [...ids, later!]);
  });

  it("pages through more records than one page holds", async () => {
    const fx = await setup();
    const ids = await confirmPurchases(fx, 7);
    const bookings = fx.queue();
    const result = await publishOutbox(
      { inventory: fx.inventory, bookings, logger, pageSize: 3 },
      { eventId: fx.eventId },
    );
    expect(result).toEqual({ published: 7, marked: 7, alreadySent: 0 });
    await expectOneJobPerPurchase(bookings, ids);
  });

  it("still emits one job per purchase when 3 publishers run at once", async () => {
    const fx = await setup();
    const ids = await confirmPurchases(fx, 12);
    const queues = [fx.queue(), fx.queue(), fx.queue()];

    const results = await Promise.all(
      queues.map((bookings) => publishOutbox({ inventory: fx.inventory, bookings, logger }, { eventId: fx.eventId })),
    );
    // Each record is marked sent by exactly one of them, whatever they added.
    expect(results.reduce((n, r) => n + r.marked, 0)).toBe(12);
    for (const r of results) expect(r.published).toBe(r.marked + r.alreadySent);
    await expectOneJobPerPurchase(queues[0]!, ids);
    expect(await fx.inventory.listUnsentOutbox(fx.eventId)).toEqual([]);
  });

  it("heals a crash between the add and the mark without a duplicate, even after the job was consumed", async () => {
    const fx = await setup();
    const ids = await confirmPurchases(fx, 4);
    const bookings = fx.queue();

    // The process dies right after adding the second record's job, before marking it sent.
    let marks = 0;
    const crashing: Pick<Inventory, "listUnsentOutbox" | "markOutboxSent"> = {
      listUnsentOutbox: (eventId, limit) => fx.inventory.listUnsentOutbox(eventId, limit),
      markOutboxSent: async (eventId, purchaseId) => {
        if (++marks === 2) throw new Error("crashed between add and mark");
        return fx.inventory.markOutboxSent(eventId, purchaseId);
      },
    };
    await expect(publishOutbox({ inventory: crashing, bookings, logger }, { eventId: fx.eventId })).rejects.toThrow(
      "crashed between add and mark",
    );
    await expectOneJobPerPurchase(bookings, ids.slice(0, 2));
    expect((await fx.inventory.listUnsentOutbox(fx.eventId)).map((r) => r.purchaseId)).toEqual(ids.slice(1));

    // An integrator consumes both jobs before the publisher runs again.
    const consumed: string[] = [];
    const done = new Promise<void>((resolve) => {
      const worker = new Worker<BookingConfirmedJob>(
        bookings.name,
        async (job) => {
          consumed.push(job.data.purchaseId);
        },
        { connection: fx.connection({ blocking: true }), prefix: fx.prefix },
      );
      cleanups.push(() => worker.close());
      worker.on("completed", () => {
        if (consumed.length === 2) resolve();
      });
    });
    await done;
    expect(consumed.sort()).toEqual(ids.slice(0, 2).sort());

    const healed = await publishOutbox({ inventory: fx.inventory, bookings, logger }, { eventId: fx.eventId });
    expect(healed).toEqual({ published: 3, marked: 3, alreadySent: 0 });
    expect(await fx.inventory.listUnsentOutbox(fx.eventId)).toEqual([]);
    // The crashed record's job was completed and kept: the re-add was ignored, not run again.
    await expectOneJobPerPurchase(bookings, ids);
    expect(await bookings.getJobState(bookingJobId(ids[1]!))).toBe("completed");
  });
});
