/**
 * The worker process SIGKILLed mid-sale, again and again (caught with a job running when one can
 * be caught), and started again each time, while fans:
 *  - walk away from their holds (short holdSeconds): the sweeper must reset each expired seat;
 *  - pay with tok_timeout (202 pending): the reconciler must settle each purchase (confirm while
 *    the hold is good, refund once it has lapsed);
 *  - pay with tok_ok (confirmed): the outbox publisher must publish each BookingConfirmed.
 *
 * At the end every effect happened once: each confirmed purchase has exactly one BookingConfirmed
 * job added to the bookings queue (counted from the queue's own event stream, where a repeated add
 * of the same job id shows as "duplicated", not "added"), and none for anything else; every outbox
 * record is marked sent; no seat is still held past its expiry in DynamoDB (the sweeper reset it);
 * no purchase is pending; the audit passes (one charge per purchase, refunds only for refunded
 * purchases).
 *
 * A killed worker's running job is locked for 30 s and taken back by BullMQ's stalled check
 * (30-90 s). The effects do not wait for that: the schedulers add each next run when a run
 * starts, and the periodic reconcile sweep settles a purchase whose own job is stuck. The short
 * form waits for the effects with deadlines and reports how many killed jobs were taken back by
 * then; the full form also waits until every killed job has ended.
 */
import { type Cluster, sleep, startCluster } from "./support/cluster.js";
import { eventInput, uniqueId } from "../gateway/harness.js";
import { type QueueWatch, watchQueue } from "../support/worker-process.js";
import { Queue } from "bullmq";
import { afterAll, describe, expect, it, onTestFailed } from "vitest";
import { BOOKING_CONFIRMED, bookingJobId } from "../../src/workers/outbox.js";
import { QUEUE_PREFIX, type QueueName, queueNames } from "../../src/workers/queues.js";
import { admitFans, seatIds, startSale } from "./support/fans.js";
import { auditFigures, recordScenario } from "./support/report.js";
import { FULL, scaled } from "./support/scale.js";

const FANS = scaled(32, 120);
const SECTION = { id: "A", tier: "Floor", price: 8_000, rows: scaled(8, 24), seatsPerRow: 10 };
const HOLD_SECONDS = 5;
const KILLS = scaled(3, 8);
/** How long the worker runs between a restart and the next kill, at least. */
const UP_MS = scaled(1_500, 3_000);

let cluster: Cluster | undefined;
const watches: QueueWatch<unknown>[] = [];
const queues: Queue[] = [];
afterAll(async () => {
  for (const w of watches) await w.close().catch(() => undefined);
  for (const q of queues) await q.close().catch(() => undefined);
  await cluster?.close();
});

describe("chaos: the worker killed mid-job, repeatedly", () => {
  it("every expired hold is reset, every purchase settled and every booking published, each once", async () => {
    cluster = await startCluster({ paymentTimeoutMs: 1_000 });
    const c = cluster;
    const timeline: string[] = [];
    const started = Date.now();
    const log = (msg: string) => timeline.push(`+${((Date.now() - started) / 1000).toFixed(1)}s ${msg}`);
    onTestFailed(() => console.log(`${timeline.join("\n")}\n${c.recentLogs()}`));

    const watched: QueueName[] = [queueNames.sweep, queueNames.reconcile, queueNames.outbox];
    for (const name of watched) {
      watches.push(await watchQueue(c.redisUrl, name));
      queues.push(new Queue(name, { connection: c.redis.duplicate(), prefix: QUEUE_PREFIX }));
    }

    const eventId = uniqueId("wk");
    await c.putEvent(
      eventId,
      eventInput({ holdSeconds: HOLD_SECONDS, maxSeatsPerFan: 4, sections: [SECTION], generalAdmission: [] }),
    );
    const fans = await admitFans(
      c.traffic,
      eventId,
      Array.from({ length: FANS }, (_, i) => `fan${i}`),
    );
    log("fans admitted");
    const role = (fanId: string) => Number(fanId.slice(3)) % 4;
    const sale = startSale(c.traffic, {
      eventId,
      fans,
      seats: seatIds(SECTION),
      durationMs: KILLS * (UP_MS + 4_000),
      // Fans arrive over the whole kill phase, so there is work for every restarted worker.
      arrivalMs: [0, KILLS * (UP_MS + 3_000)],
      thinkMs: [100, 400],
      payDelayMs: [100, 500],
      // A quarter walk away from their holds, a quarter pay with tok_timeout, the rest tok_ok.
      pays: (fan) => role(fan.fanId) !== 0,
      paymentToken: (fan) => (role(fan.fanId) === 1 ? "tok_timeout" : "tok_ok"),
    });

    // Kill, restart, repeat; each time a job is running if one shows up within a few seconds.
    const killedJobs = new Map<string, string>(); // `${queue}/${jobId}` -> queue
    let midJob = 0;
    for (let k = 0; k < KILLS; k++) {
      await sleep(UP_MS);
      const until = Date.now() + 3_000;
      let active: { queue: string; id: string }[] = [];
      while (Date.now() < until) {
        const lists = await Promise.all(
          queues.map(async (q) => (await q.getActive()).map((j) => ({ queue: q.name, id: j.id! }))),
        );
        active = lists.flat().filter((j) => !killedJobs.has(`${j.queue}/${j.id}`));
        if (active.length > 0) break;
        await sleep(5);
      }
      await c.killWorker("SIGKILL");
      // What is still active now was the dead worker's (nothing else processes these queues).
      const left = (
        await Promise.all(queues.map(async (q) => (await q.getActive()).map((j) => ({ queue: q.name, id: j.id! }))))
      ).flat();
      let caught = 0;
      for (const j of left) {
        if (killedJobs.has(`${j.queue}/${j.id}`)) continue;
        killedJobs.set(`${j.queue}/${j.id}`, j.queue);
        caught++;
      }
      if (caught > 0) midJob++;
      log(`kill ${k + 1}: ${caught} job(s) running`);
      await c.startWorker();
      log(`worker ${k + 2} running`);
    }
    const ledger = await sale.done;
    log(`sale over: ${ledger.holds.length} hold attempts, ${ledger.purchases.length} purchases`);

    // Every purchase settled.
    const settleMs = await c.waitUntilSettled(eventId, 90_000);
    log("no purchase pending");

    // Every expired hold reset by the sweeper: no stored seat held past its expiry (with a little
    // slack for the sweeper's 5 s period).
    const sweepDeadline = Date.now() + 60_000;
    for (;;) {
      const now = Date.now();
      const seats = await c.storedSeats(eventId, [SECTION.id]);
      const stale = seats.filter((s) => s.status === "held" && (s.holdExpiresAt ?? 0) < now - 500);
      const stillHeld = seats.filter((s) => s.status === "held");
      if (stillHeld.length === 0) break;
      if (now > sweepDeadline) throw new Error(`seats still held past expiry: ${JSON.stringify(stale)}`);
      await sleep(250);
    }
    log("every expired hold reset");

    // Every confirmed purchase published once (and only those), every outbox record sent.
    const purchases = await c.inventory.purchases.list({ eventId, limit: 1_000 });
    const confirmed = purchases.purchases.filter((p) => p.status === "confirmed").map((p) => p.purchaseId);
    const eventsKey = `${QUEUE_PREFIX}:${queueNames.bookings}:events`;
    const readBookings = async () => {
      const added = new Map<string, number>();
      let duplicated = 0;
      for (const [, fields] of await c.redis.xrange(eventsKey, "-", "+")) {
        const entry: Record<string, string> = {};
        for (let i = 0; i + 1 < fields.length; i += 2) entry[fields[i]!] = fields[i + 1]!;
        if (!entry.jobId?.startsWith(`${BOOKING_CONFIRMED}-${eventId}-`)) continue;
        if (entry.event === "added") added.set(entry.jobId, (added.get(entry.jobId) ?? 0) + 1);
        if (entry.event === "duplicated") duplicated++;
      }
      return { added, duplicated };
    };
    const publishDeadline = Date.now() + 30_000;
    let bookings = await readBookings();
    while (confirmed.some((id) => !bookings.added.has(bookingJobId(id))) && Date.now() < publishDeadline) {
      await sleep(250);
      bookings = await readBookings();
    }
    for (const id of confirmed) expect(bookings.added.get(bookingJobId(id)), `BookingConfirmed of ${id}`).toBe(1);
    expect([...bookings.added.keys()].sort()).toEqual(confirmed.map(bookingJobId).sort());
    // The records may still say unsent: the saga added each job itself, and no consumer runs here
    // to acknowledge them (the publisher takes an unsent record only once it is 10 s old).
    log("every booking published once");

    // Full form: every job the kills interrupted is taken back (30-90 s) and ends.
    const ended = (key: string) => {
      const [queue, id] = [killedJobs.get(key)!, key.slice(key.indexOf("/") + 1)];
      const w = watches[watched.indexOf(queue as QueueName)]!;
      return w.completions.has(id) || w.failed.has(id);
    };
    if (FULL) {
      const jobDeadline = Date.now() + 150_000;
      while ([...killedJobs.keys()].some((k) => !ended(k)) && Date.now() < jobDeadline) await sleep(500);
      for (const key of killedJobs.keys()) expect(ended(key), `killed job ${key} ended`).toBe(true);
    }
    const takenBack = [...killedJobs.keys()].filter(ended).length;

    const report = await c.audit(eventId);
    const figures = auditFigures(report);
    const counts = c.traffic.counts;
    const t = report.totals.purchases;
    const walkedAway = ledger.holds.filter((h) => h.status === 201 && role(h.fanId) === 0).length;
    recordScenario({
      scenario: "worker-killed",
      faults: `worker SIGKILLed and restarted x${KILLS} (${midJob} with a job running)`,
      requests: counts.total,
      ...figures,
      serverErrors: counts.serverErrors,
      unavailable: counts.unavailable,
      notes:
        `${FANS} fans; ${killedJobs.size} jobs killed mid-run (${takenBack} taken back and ended by the end); ` +
        `${walkedAway} abandoned holds reset by the sweeper; purchases ${t.confirmed.count} confirmed, ` +
        `${t.refunded.count} refunded, ${t.failed.count} failed, settled ${(settleMs / 1000).toFixed(1)} s after the sale; ` +
        `${bookings.added.size} BookingConfirmed published once each (${bookings.duplicated} repeated adds ignored)`,
    });
    expect(c.traffic.violations).toEqual([]);
    expect(report.checks.filter((check) => check.status === "fail")).toEqual([]);
    expect(figures.oversells).toBe(0);
    expect(figures.lostPurchases).toBe(0);
    expect(counts.serverErrors).toBe(0);
    expect(confirmed.length).toBeGreaterThan(0);
    expect(walkedAway).toBeGreaterThan(0);
  }, 300_000);
});
