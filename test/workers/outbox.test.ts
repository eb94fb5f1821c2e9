/**
 * The outbox publisher and the bookings consumer against the real Redis (BullMQ) and DynamoDB
 * endpoint of the test run. Each test has its own table, event and queue prefix (so it counts
 * only its own jobs), and each queue is obliterated at the end. The tests of a Redis data loss
 * FLUSHDB a logical database claimed for themselves alone (claimRedisDatabase), never another's.
 *
 * Time: the inventory's clock is a manual one, so "a record is due for a check" is moved by the
 * test, never waited for.
 */
import { claimRedisDatabase, mapLimit, pollUntil } from "../support/worker-process.js";
import { randomUUID } from "node:crypto";
import type { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { type Job, type Queue, Worker } from "bullmq";
import { Redis } from "ioredis";
import pino from "pino";
import { afterEach, describe, expect, inject, it } from "vitest";
import { ensureTable } from "../../src/dynamodb/table.js";
import { createInventory, type Inventory, type OutboxState } from "../../src/inventory/index.js";
import { consumeBookings } from "../../src/workers/bookings-consumer.js";
import {
  BOOKING_CONFIRMED,
  BOOKING_RETENTION_SECONDS,
  type BookingConfirmedJob,
  bookingJobId,
  createBookingsQueue,
  OUTBOX_CHECK_AFTER_MS,
  OUTBOX_MAX_CHECK_AFTER_MS,
  publishOutbox,
  type PublishOutboxResult,
} from "../../src/workers/outbox.js";
import { eventInput, type ManualClock, manualClock, uniqueEventId } from "../inventory/fixtures.js";
import { createTestDynamoClient } from "../support/dynamo.js";

const logger = pino({ level: "silent" });
const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

interface Fixture {
  eventId: string;
  clock: ManualClock;
  inventory: Inventory;
  prefix: string;
  /** A bookings queue on a connection of its own, as each worker process would have. */
  queue(): Queue<BookingConfirmedJob>;
  connection(options?: { blocking?: boolean }): Redis;
}

async function setup(options: { redisUrl?: string } = {}): Promise<Fixture> {
  const redisUrl = options.redisUrl ?? inject("redisUrl");
  const client: DynamoDBClient = createTestDynamoClient(inject("dynamoEndpoint"));
  cleanups.push(() => client.destroy());
  const tableName = `outbox_${randomUUID().slice(0, 8)}`;
  await ensureTable(client, tableName);
  const clock = manualClock();
  const inventory = createInventory({ client, tableName, clock: clock.now });
  const eventId = uniqueEventId("obx");
  const created = await inventory.events.create({
    eventId,
    input: eventInput(clock, { sections: [{ id: "A", tier: "Floor", price: 10_000, rows: 5, seatsPerRow: 10 }] }),
  });
  expect(created.ok).toBe(true);

  // A hash tag of its own: this test's queue shares no key with any other test's.
  const prefix = `{obx${randomUUID().slice(0, 12)}}`;
  const connection = (options: { blocking?: boolean } = {}) => {
    const c = new Redis(redisUrl, options.blocking ? { maxRetriesPerRequest: null } : {});
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
  return { eventId, clock, inventory, prefix, queue, connection };
}

/** `n` purchases confirmed through the inventory: each leaves one unsent BookingConfirmed record. */
async function confirmPurchases(fx: Fixture, n: number, from = 0): Promise<string[]> {
  const ids: string[] = [];
  for (let i = from; i < from + n; i++) {
    const fanId = `fan-${i}`;
    const seat = `A-${Math.floor(i / 10) + 1}-${(i % 10) + 1}`;
    const hold = await fx.inventory.holds.holdSeats({ eventId: fx.eventId, fanId, seatIds: [seat], holdSeconds: 480 });
    if (!hold.ok) throw new Error(`hold ${seat}: ${hold.reason}`);
    const purchaseId = `${fx.eventId}-p${i}`;
    expect(
      (await fx.inventory.purchases.createPending({ eventId: fx.eventId, holdId: hold.hold.holdId, fanId, purchaseId }))
        .ok,
    ).toBe(true);
    expect(
      (await fx.inventory.purchases.confirm({ eventId: fx.eventId, holdId: hold.hold.holdId, fanId, purchaseId })).ok,
    ).toBe(true);
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

const NOTHING: PublishOutboxResult = {
  published: 0,
  marked: 0,
  alreadyPublished: 0,
  checked: 0,
  acknowledged: 0,
  republished: 0,
};

/** The state of each record, read consistently, by purchase id. */
async function states(fx: Fixture, purchaseIds: string[]): Promise<Record<string, OutboxState | "missing">> {
  const out: Record<string, OutboxState | "missing"> = {};
  for (const id of purchaseIds)
    out[id] = (await fx.inventory.outbox.get({ eventId: fx.eventId, purchaseId: id }))?.state ?? "missing";
  return out;
}

const all = (purchaseIds: string[], state: OutboxState) => Object.fromEntries(purchaseIds.map((id) => [id, state]));

/** A consumer on a connection of its own that counts the bookings its handler saw. */
function consumer(
  fx: Fixture,
  seen: Map<string, number>,
  inventory: OutboxOf = fx.inventory,
  concurrency = 1,
  /** Awaited by the handler after it counted the booking (default: nothing to wait for). */
  gate: () => Promise<void> = async () => {},
) {
  const worker = consumeBookings({
    connection: fx.connection({ blocking: true }),
    prefix: fx.prefix,
    inventory,
    logger,
    concurrency,
    handle: async (booking) => {
      seen.set(booking.purchaseId, (seen.get(booking.purchaseId) ?? 0) + 1);
      await gate();
    },
  });
  cleanups.push(() => worker.close());
  return worker;
}

/** What the publisher and the consumer use of the inventory. */
type OutboxOf = Pick<Inventory, "outbox">;

/** The inventory, counting per purchase id the acknowledgments that were applied (true). */
function countingAcks(inventory: Inventory): { store: OutboxOf; acks: Map<string, number> } {
  const acks = new Map<string, number>();
  const store: OutboxOf = {
    outbox: {
      ...inventory.outbox,
      acknowledge: async (ref) => {
        const applied = await inventory.outbox.acknowledge(ref);
        if (applied) acks.set(ref.purchaseId, (acks.get(ref.purchaseId) ?? 0) + 1);
        return applied;
      },
    },
  };
  return { store, acks };
}

describe("publishOutbox", () => {
  it("adds one BookingConfirmed job per confirmed purchase, then marks each record published", async () => {
    const fx = await setup();
    const ids = await confirmPurchases(fx, 5);
    const bookings = fx.queue();

    const first = await publishOutbox(
      { unsentMarginMs: 0, inventory: fx.inventory, bookings, logger },
      { eventId: fx.eventId },
    );
    expect(first).toEqual({ ...NOTHING, published: 5, marked: 5 });
    await expectOneJobPerPurchase(bookings, ids);
    expect(await fx.inventory.outbox.listUnsent({ eventId: fx.eventId })).toEqual([]);
    // Published is not acknowledged: nobody has consumed them.
    expect(await states(fx, ids)).toEqual(all(ids, "published"));

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

    // Again: nothing unsent, nothing added, and no published record due for a check yet.
    const second = await publishOutbox(
      { unsentMarginMs: 0, inventory: fx.inventory, bookings, logger },
      { eventId: fx.eventId },
    );
    expect(second).toEqual(NOTHING);
    await expectOneJobPerPurchase(bookings, ids);

    // A purchase confirmed later is published by the next run, alone.
    const [later] = await confirmPurchases(fx, 1, 5);
    const third = await publishOutbox(
      { unsentMarginMs: 0, inventory: fx.inventory, bookings, logger },
      { eventId: fx.eventId },
    );
    expect(third).toEqual({ ...NOTHING, published: 1, marked: 1 });
    await expectOneJobPerPurchase(bookings, [...ids, later!]);
  });

  it("pages through more records than one page holds", async () => {
    const fx = await setup();
    const ids = await confirmPurchases(fx, 7);
    const bookings = fx.queue();
    const result = await publishOutbox(
      { unsentMarginMs: 0, inventory: fx.inventory, bookings, logger, pageSize: 3 },
      { eventId: fx.eventId },
    );
    expect(result).toEqual({ ...NOTHING, published: 7, marked: 7 });
    await expectOneJobPerPurchase(bookings, ids);
  });

  it("checks a published record only when it is due, less often each time its job still waits", async () => {
    const fx = await setup();
    const ids = await confirmPurchases(fx, 4);
    const bookings = fx.queue();
    const run = () =>
      publishOutbox({ unsentMarginMs: 0, inventory: fx.inventory, bookings, logger }, { eventId: fx.eventId });
    await run();

    // Due after OUTBOX_CHECK_AFTER_MS, not a moment before: the runs in between read nothing.
    fx.clock.advance(OUTBOX_CHECK_AFTER_MS - 1);
    expect(await run()).toEqual(NOTHING);
    fx.clock.advance(1);
    expect(await run()).toEqual({ ...NOTHING, checked: 4 });
    expect(await run()).toEqual(NOTHING);
    // The jobs still wait (no consumer): the next check is twice as far off.
    fx.clock.advance(2 * OUTBOX_CHECK_AFTER_MS - 1);
    expect(await run()).toEqual(NOTHING);
    fx.clock.advance(1);
    expect(await run()).toEqual({ ...NOTHING, checked: 4 });
    expect((await fx.inventory.outbox.get({ eventId: fx.eventId, purchaseId: ids[0]! }))?.checks).toBe(2);
    await expectOneJobPerPurchase(bookings, ids);
    expect(await states(fx, ids)).toEqual(all(ids, "published"));
  });

  it("still emits one job per purchase when 3 publishers run at once", async () => {
    const fx = await setup();
    const ids = await confirmPurchases(fx, 12);
    const queues = [fx.queue(), fx.queue(), fx.queue()];

    const results = await Promise.all(
      queues.map((bookings) =>
        publishOutbox({ unsentMarginMs: 0, inventory: fx.inventory, bookings, logger }, { eventId: fx.eventId }),
      ),
    );
    // Each record is marked published by exactly one of them, whatever they added.
    expect(results.reduce((n, r) => n + r.marked, 0)).toBe(12);
    for (const r of results) expect(r.published).toBe(r.marked + r.alreadyPublished);
    await expectOneJobPerPurchase(queues[0]!, ids);
    expect(await fx.inventory.outbox.listUnsent({ eventId: fx.eventId })).toEqual([]);
  });

  it("heals a crash between the add and the mark without a duplicate, even after the job was consumed", async () => {
    const fx = await setup();
    const ids = await confirmPurchases(fx, 4);
    const bookings = fx.queue();

    // The process dies right after adding the second record's job, before marking it published.
    let marks = 0;
    const crashing: OutboxOf = {
      outbox: {
        ...countingAcks(fx.inventory).store.outbox,
        markPublished: async (args) => {
          if (++marks === 2) throw new Error("crashed between add and mark");
          return fx.inventory.outbox.markPublished(args);
        },
      },
    };
    await expect(
      publishOutbox({ unsentMarginMs: 0, inventory: crashing, bookings, logger }, { eventId: fx.eventId }),
    ).rejects.toThrow("crashed between add and mark");
    await expectOneJobPerPurchase(bookings, ids.slice(0, 2));
    expect((await fx.inventory.outbox.listUnsent({ eventId: fx.eventId })).map((r) => r.purchaseId)).toEqual(
      ids.slice(1),
    );

    // An integrator consumes both jobs (a plain BullMQ worker: no acknowledgment of its own)
    // before the publisher runs again.
    const consumed: string[] = [];
    const worker = new Worker<BookingConfirmedJob>(
      bookings.name,
      async (job) => {
        consumed.push(job.data.purchaseId);
      },
      { connection: fx.connection({ blocking: true }), prefix: fx.prefix },
    );
    cleanups.push(() => worker.close());
    await pollUntil(
      "both jobs consumed",
      async () => consumed.length,
      (n) => n === 2,
      { timeoutMs: 30_000 },
    );
    expect([...consumed].sort()).toEqual(ids.slice(0, 2).sort());

    const healed = await publishOutbox(
      { unsentMarginMs: 0, inventory: fx.inventory, bookings, logger },
      { eventId: fx.eventId },
    );
    expect(healed).toEqual({ ...NOTHING, published: 3, marked: 3 });
    expect(await fx.inventory.outbox.listUnsent({ eventId: fx.eventId })).toEqual([]);
    // The crashed record's job was completed and kept: the re-add was ignored, not run again.
    await expectOneJobPerPurchase(bookings, ids);
    expect(await bookings.getJobState(bookingJobId(ids[1]!))).toBe("completed");

    // The plain worker takes the other two; the publisher's checks acknowledge all four, once.
    await pollUntil(
      "all four consumed",
      async () => consumed.length,
      (n) => n === 4,
      { timeoutMs: 30_000 },
    );
    fx.clock.advance(OUTBOX_CHECK_AFTER_MS);
    const checked = await publishOutbox(
      { unsentMarginMs: 0, inventory: fx.inventory, bookings, logger },
      { eventId: fx.eventId },
    );
    expect(checked).toEqual({ ...NOTHING, checked: 4, acknowledged: 4 });
    expect(await states(fx, ids)).toEqual(all(ids, "acknowledged"));
    expect([...consumed].sort()).toEqual([...ids].sort());
  });
});

describe("the bookings consumer", () => {
  it("runs the handler, then acknowledges the record; a record acknowledged already is not handled again", async () => {
    const fx = await setup();
    const ids = await confirmPurchases(fx, 3);
    const bookings = fx.queue();
    await publishOutbox({ unsentMarginMs: 0, inventory: fx.inventory, bookings, logger }, { eventId: fx.eventId });
    const seen = new Map<string, number>();
    const counted = countingAcks(fx.inventory);
    consumer(fx, seen, counted.store);
    await pollUntil(
      "every record acknowledged",
      () => states(fx, ids),
      (s) => Object.values(s).every((x) => x === "acknowledged"),
      {
        timeoutMs: 30_000,
      },
    );
    expect([...seen.entries()].sort()).toEqual(ids.map((id) => [id, 1]).sort());
    expect([...counted.acks.entries()].sort()).toEqual(ids.map((id) => [id, 1]).sort());

    // The same booking queued again (a re-publication racing an acknowledgment): skipped.
    const again = await bookings.add(BOOKING_CONFIRMED, (await bookings.getJob(bookingJobId(ids[0]!)))!.data, {
      jobId: "a-stale-republication",
    });
    await pollUntil(
      "the stale job finished",
      () => again.getState(),
      (s) => s === "completed",
      { timeoutMs: 30_000 },
    );
    expect((await bookings.getJob(again.id!))?.returnvalue).toEqual({ delivered: false, acknowledged: false });
    expect(seen.get(ids[0]!)).toBe(1);

    // Nothing is left for the publisher to check: acknowledged records left the index.
    fx.clock.advance(OUTBOX_MAX_CHECK_AFTER_MS);
    expect(
      await publishOutbox({ unsentMarginMs: 0, inventory: fx.inventory, bookings, logger }, { eventId: fx.eventId }),
    ).toEqual(NOTHING);
  });
});

describe("BookingConfirmed through a Redis data loss", () => {
  it("delivers every booking when Redis loses its data between publish and consume", async () => {
    // FLUSHDB on a database of this test's own: a real data loss, on nobody else's keys.
    const db = await claimRedisDatabase();
    cleanups.push(() => db.release());
    const fx = await setup({ redisUrl: db.url });
    const ids = await confirmPurchases(fx, 6);
    const bookings = fx.queue();

    await publishOutbox({ unsentMarginMs: 0, inventory: fx.inventory, bookings, logger }, { eventId: fx.eventId });
    await expectOneJobPerPurchase(bookings, ids);

    // Redis comes back empty before any integrator consumed a single job.
    await db.wipe();
    expect(await allJobs(bookings)).toEqual([]);

    // The integrator's consumer, and the publisher still running every second as its scheduler
    // does, while time passes.
    const seen = new Map<string, number>();
    const worker = new Worker<BookingConfirmedJob>(
      bookings.name,
      async (job) => {
        seen.set(job.data.purchaseId, (seen.get(job.data.purchaseId) ?? 0) + 1);
      },
      { connection: fx.connection({ blocking: true }), prefix: fx.prefix },
    );
    cleanups.push(() => worker.close());
    await pollUntil(
      "every booking consumed",
      async () => {
        fx.clock.advance(10_000);
        await publishOutbox({ unsentMarginMs: 0, inventory: fx.inventory, bookings, logger }, { eventId: fx.eventId });
        return [...seen.keys()].sort();
      },
      (consumed) => consumed.length === ids.length,
      { timeoutMs: 20_000, intervalMs: 250 },
    );
    expect([...seen.keys()].sort()).toEqual([...ids].sort());

    // That consumer acknowledges nothing itself: the publisher's checks find the jobs completed.
    await pollUntil(
      "every record acknowledged",
      async () => {
        fx.clock.advance(OUTBOX_MAX_CHECK_AFTER_MS);
        await publishOutbox({ unsentMarginMs: 0, inventory: fx.inventory, bookings, logger }, { eventId: fx.eventId });
        return states(fx, ids);
      },
      (s) => Object.values(s).every((x) => x === "acknowledged"),
      { timeoutMs: 20_000, intervalMs: 250 },
    );
    // Each job was added twice in all (before and after the loss), and run once.
    for (const id of ids) {
      expect((await fx.inventory.outbox.get({ eventId: fx.eventId, purchaseId: id }))?.republished, id).toBe(1);
      expect(seen.get(id), id).toBe(1);
    }
  }, 90_000);

  it("delivers again a booking whose acknowledgment was lost with Redis: at least once, by a stable purchase id", async () => {
    const db = await claimRedisDatabase();
    cleanups.push(() => db.release());
    const fx = await setup({ redisUrl: db.url });
    const ids = await confirmPurchases(fx, 4);
    const bookings = fx.queue();
    await publishOutbox({ unsentMarginMs: 0, inventory: fx.inventory, bookings, logger }, { eventId: fx.eventId });

    // The handler finishes each booking, but DynamoDB does not take the acknowledgment.
    const seen = new Map<string, number>();
    const unreachable: OutboxOf = {
      outbox: {
        ...countingAcks(fx.inventory).store.outbox,
        acknowledge: async () => {
          throw new Error("DynamoDB unreachable");
        },
      },
    };
    const first = consumer(fx, seen, unreachable);
    await pollUntil(
      "every booking handled",
      async () => seen.size,
      (n) => n === ids.length,
      { timeoutMs: 30_000 },
    );
    await pollUntil(
      "every job completed",
      () => Promise.all(ids.map((id) => bookings.getJobState(bookingJobId(id)))),
      (s) => s.every((x) => x === "completed"),
      { timeoutMs: 30_000 },
    );
    await first.close();
    expect(await states(fx, ids)).toEqual(all(ids, "published"));

    // Redis loses the completed jobs before the publisher saw them completed.
    await db.wipe();
    const seenAfter = new Map<string, number>();
    const counted = countingAcks(fx.inventory);
    consumer(fx, seenAfter, counted.store);
    await pollUntil(
      "every record acknowledged",
      async () => {
        fx.clock.advance(OUTBOX_MAX_CHECK_AFTER_MS);
        await publishOutbox({ unsentMarginMs: 0, inventory: counted.store, bookings, logger }, { eventId: fx.eventId });
        return { states: await states(fx, ids), counted: counted.acks.size };
      },
      // Every acknowledgement's answer back too: the table shows a record acknowledged before the
      // call that did it has its answer (a CI run read the counts in between and found 3 of 4).
      (s) => Object.values(s.states).every((x) => x === "acknowledged") && s.counted === ids.length,
      { timeoutMs: 30_000, intervalMs: 250 },
    );
    // Delivered twice in all, each time under its purchase id: the documented duplicate.
    expect([...seen.keys()].sort()).toEqual([...ids].sort());
    expect([...seenAfter.keys()].sort()).toEqual([...ids].sort());
    expect([...counted.acks.values()]).toEqual(ids.map(() => 1));
  }, 90_000);

  it("several publishers and consumers at once, Redis wiped mid-run: every booking delivered, each acknowledged once", async () => {
    const db = await claimRedisDatabase();
    cleanups.push(() => db.release());
    const fx = await setup({ redisUrl: db.url });
    const ids = await confirmPurchases(fx, 30);
    const counted = countingAcks(fx.inventory);
    const seen = new Map<string, number>();
    // The first 5 bookings go straight through; the others stay in their handlers (their jobs
    // active) until the gate opens after the wipe, so the loss catches jobs in every state.
    let open!: () => void;
    const opened = new Promise<void>((resolve) => {
      open = resolve;
    });
    const gate = () => (seen.size > 5 ? opened : Promise.resolve());
    for (let i = 0; i < 3; i++) consumer(fx, seen, counted.store, 4, gate);
    const publishers = [fx.queue(), fx.queue(), fx.queue()];
    const runAll = () =>
      mapLimit(publishers, publishers.length, (bookings) =>
        publishOutbox(
          { unsentMarginMs: 0, inventory: counted.store, bookings, logger, pageSize: 7 },
          { eventId: fx.eventId },
        ),
      );

    // First round: the three publishers at once, with the consumers taking jobs; then the data
    // loss with jobs completed and acknowledged, active in a handler, and waiting.
    await runAll();
    await pollUntil(
      "every consumer slot busy",
      async () => seen.size,
      (n) => n >= 5 + 3 * 4,
      { timeoutMs: 30_000, intervalMs: 20 },
    );
    await db.wipe();
    open();

    const final = await pollUntil(
      "every record acknowledged",
      async () => {
        fx.clock.advance(OUTBOX_MAX_CHECK_AFTER_MS);
        await runAll();
        return { states: await states(fx, ids), counted: counted.acks.size };
      },
      // The acknowledging calls' answers back too (see the test above).
      (s) => Object.values(s.states).every((x) => x === "acknowledged") && s.counted === ids.length,
      { timeoutMs: 60_000, intervalMs: 250 },
    );
    expect(final.states).toEqual(all(ids, "acknowledged"));
    expect([...seen.keys()].sort()).toEqual([...ids].sort());
    // Acknowledged exactly once each, by whichever consumer or publisher got there.
    expect([...counted.acks.entries()].sort()).toEqual(ids.map((id) => [id, 1]).sort());
    expect(await fx.inventory.outbox.listUnsent({ eventId: fx.eventId })).toEqual([]);
    expect(await fx.inventory.outbox.listDue({ eventId: fx.eventId })).toEqual([]);
    // The waiting jobs were lost with the data and published again (each record says so).
    const republished = await mapLimit(
      ids,
      8,
      async (id) => (await fx.inventory.outbox.get({ eventId: fx.eventId, purchaseId: id }))!,
    );
    expect(republished.filter((r) => r.republished > 0).length).toBeGreaterThan(0);
  }, 120_000);
});
