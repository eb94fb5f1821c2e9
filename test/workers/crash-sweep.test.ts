/**
 * A worker process (src/main.ts --role=worker) killed with SIGKILL in the middle of a sweep, three
 * times, each time over a fresh batch of expired seat and general-admission holds: after the
 * restarts every expired hold is reset exactly once, every killed job is taken back by BullMQ and
 * completes once, and the counts, the expiry index and the seat map agree with DynamoDB.
 *
 * The child is the only worker. The state comes from an in-process gateway without workers, on a
 * Redis database of this file's own (test/support/worker-process.ts says why). The children that
 * are killed reach DynamoDB through a proxy that delays every request: see SLOW_DYNAMO_MS.
 */
import {
  type AdmittedFan,
  admitFans,
  createTable,
  eventInput,
  expectAuditPasses,
  putEvent,
  uniqueId,
} from "../gateway/harness.js";
import {
  type ClaimedDatabase,
  claimRedisDatabase,
  mapLimit,
  pollUntil,
  type QueuedGateway,
  type QueueWatch,
  sleep,
  startGatewayOn,
  startWorkerProcess,
  type WorkerProcess,
  watchQueue,
} from "../support/worker-process.js";
import { Queue } from "bullmq";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, inject, it, onTestFailed } from "vitest";
import { SWEEP_SHARDS, type SweepResult } from "../../src/inventory/index.js";
import { shardOf } from "../../src/inventory/keys.js";
import { QUEUE_PREFIX, queueNames, type SweepJob } from "../../src/workers/queues.js";
import { type DynamoProxy, startDynamoProxy } from "../support/dynamo-proxy.js";

const CYCLES = 3;
const ROWS_PER_BATCH = 4;
const SEATS_PER_ROW = 30;
const SEATS_PER_HOLD = 6;
const FANS = 30;
const GA_HOLDS_PER_BATCH = 60;
const GA_CAPACITY = 5_000;
/**
 * Added to each DynamoDB request of a child that is to be killed: at full speed the general
 * admission shard is swept in moments (16 holds at a time), and a poll late by that much sees it
 * all returned and then waits in vain; this way the sweep takes seconds.
 */
const SLOW_DYNAMO_MS = 200;
/**
 * The lock of a job in a child that is to be killed (WORKER_LOCK_MS; 30 s by default): a killed
 * job is taken back once it has expired, and the test waits that long after the last kill. Short,
 * but far above a renewal's delay (it is renewed every 5 s while the child lives).
 */
const KILLED_LOCK_MS = 10_000;

let db: ClaimedDatabase;
let gw: QueuedGateway;
let tableName: string;
let redis: Redis;
let queue: Queue<SweepJob>;
let watch: QueueWatch<SweepResult>;
let slowDynamo: DynamoProxy;
const children: WorkerProcess[] = [];

beforeAll(async () => {
  db = await claimRedisDatabase();
  tableName = await createTable();
  gw = await startGatewayOn(db.url, { tableName });
  redis = new Redis(db.url, { maxRetriesPerRequest: null });
  queue = new Queue<SweepJob>(queueNames.sweep, { connection: redis, prefix: QUEUE_PREFIX });
  watch = await watchQueue<SweepResult>(db.url, queueNames.sweep);
  slowDynamo = await startDynamoProxy(inject("dynamoEndpoint"));
  slowDynamo.setLatency(SLOW_DYNAMO_MS);
});
afterAll(async () => {
  await Promise.all(children.map((c) => c.stop("SIGKILL")));
  await watch?.close();
  await slowDynamo?.close();
  await queue?.close();
  redis?.disconnect();
  await gw?.close();
  await db?.release();
});

interface HoldBody {
  holdId: string;
  seats: string[];
  expiresAt: string;
  generalAdmission?: { id: string; quantity: number };
}

describe("a worker process killed in the middle of a sweep", () => {
  // Four worker starts, three catches, a lock to outwait and the end: room for a loaded machine.
  it("after restarts every expired hold is reset once and every killed job completes once", async () => {
    const started = Date.now();
    // Where the time went, printed only when the test fails.
    const timeline: string[] = [];
    onTestFailed(() => console.log(timeline.join("\n")));
    const log = (msg: string) => timeline.push(`+${((Date.now() - started) / 1000).toFixed(1)}s ${msg}`);
    const eventId = uniqueId("sw");
    const input = eventInput({
      holdSeconds: 1,
      // Each fan holds up to 6 seats and 10 places in a cycle (held + bought per fan is capped):
      // the limit is not what this test is about.
      maxSeatsPerFan: 100,
      sections: [{ id: "A", tier: "Floor", price: 10000, rows: ROWS_PER_BATCH * CYCLES, seatsPerRow: SEATS_PER_ROW }],
      generalAdmission: [{ id: "GA", tier: "Standing", price: 5000, capacity: GA_CAPACITY }],
    });
    expect((await putEvent(gw, eventId, input)).status).toBe(201);
    const totalSeats = ROWS_PER_BATCH * CYCLES * SEATS_PER_ROW;
    const gaShard = shardOf("GA");
    const fans = await admitFans(
      gw,
      eventId,
      Array.from({ length: FANS }, (_, i) => `fan${i}`),
    );

    log("fans admitted");
    const hold = async (fan: AdmittedFan, json: unknown) => {
      const res = await gw.request(`/v1/events/${eventId}/holds`, { method: "POST", token: fan.accessToken, json });
      if (res.status !== 201) throw new Error(`hold: ${res.status} ${await res.text()}`);
      return (await res.json()) as HoldBody;
    };
    const expiredSeats = new Set<string>();
    const gaHolds = new Map<string, number>();
    const killedJobs = new Map<string, SweepJob>();
    /**
     * A killed job's attemptsStarted when it was killed. It stays active, locked by the dead worker,
     * until its lock runs out; then the next worker takes it back (attemptsStarted goes up) and may
     * be the one sweeping the general admission, the new batch's too: a job in flight again.
     */
    const startsAtKill = new Map<string, number>();
    const inFlight = (j: { id?: string | undefined; attemptsStarted: number }) =>
      !j.id || !startsAtKill.has(j.id) || j.attemptsStarted > startsAtKill.get(j.id)!;
    let gaJobKills = 0;

    for (let cycle = 0; cycle < CYCLES; cycle++) {
      // A fresh batch while no worker runs: rows of its own, and general admission; one-second holds.
      const holdsPerRow = SEATS_PER_ROW / SEATS_PER_HOLD;
      const seatRequests = Array.from({ length: ROWS_PER_BATCH * holdsPerRow }, (_, i) => {
        const row = cycle * ROWS_PER_BATCH + 1 + Math.floor(i / holdsPerRow);
        const from = (i % holdsPerRow) * SEATS_PER_HOLD + 1;
        return Array.from({ length: SEATS_PER_HOLD }, (_, k) => `A-${row}-${from + k}`);
      });
      const seatHolds = await mapLimit(seatRequests, 12, (seats, i) => hold(fans[i % FANS]!, { seats }));
      const admissionHolds = await mapLimit(
        Array.from({ length: GA_HOLDS_PER_BATCH }, (_, i) => i),
        12,
        (i) => hold(fans[i % FANS]!, { generalAdmission: { id: "GA", quantity: 1 + (i % 5) } }),
      );
      for (const h of seatHolds) for (const s of h.seats) expiredSeats.add(s);
      for (const h of admissionHolds) gaHolds.set(h.holdId, h.generalAdmission!.quantity);
      const lastExpiry = Math.max(...[...seatHolds, ...admissionHolds].map((h) => Date.parse(h.expiresAt)));
      // The clock has to pass the expiry; there is nothing to poll for that.
      await sleep(Math.max(0, lastExpiry - Date.now() + 50));

      log(`cycle ${cycle}: holds expired`);
      const before = (await gw.deps.inventory.seats.generalAdmission({ eventId, areaId: "GA" }))!;
      expect(before.held).toBeGreaterThan(0);
      const child = await startWorkerProcess({
        redisUrl: db.url,
        tableName,
        dynamoEndpoint: slowDynamo.endpoint,
        env: { WORKER_LOCK_MS: String(KILLED_LOCK_MS) },
      });
      children.push(child);
      log(`cycle ${cycle}: worker running`);

      // Mid-sweep: the GA shard's job is running and has returned part of what is expired, not all.
      const caught = await pollUntil(
        "a sweep job in flight with part of the general admission returned",
        async () => {
          const [active, ga] = await Promise.all([
            queue.getActive(),
            gw.deps.inventory.seats.generalAdmission({ eventId, areaId: "GA" }),
          ]);
          // Not a job a previous kill left behind still locked by the dead worker; such a job taken
          // back by this worker is in flight again.
          const running = active.some((j) => j.data.shard === gaShard && inFlight(j));
          return { running, held: ga!.held, returned: before.held - ga!.held };
        },
        (s) => s.running && s.returned > 0 && s.held > 0,
        { timeoutMs: 45_000, intervalMs: 20 },
      ).catch((err: Error) => {
        throw new Error(
          `${err.message}\ntimeline:\n${timeline.join("\n")}\nworker log:\n${child.logs.slice(-20).join("\n")}`,
        );
      });
      await child.stop("SIGKILL");
      // Nothing else processes this queue now: what is active was the dead worker's (a job killed
      // before and taken back by it is killed again: MAX_STALLED_COUNT lets it stall five times).
      const left = (await queue.getActive()).filter((j) => j.id && inFlight(j));
      for (const job of left) {
        killedJobs.set(job.id!, job.data);
        startsAtKill.set(job.id!, job.attemptsStarted);
      }
      if (left.some((j) => j.data.shard === gaShard)) gaJobKills++;
      const named = left.map((j) => (j.data.sections ? "sections" : (j.data.shard ?? "all"))).join(", ");
      log(
        `cycle ${cycle}: killed with GA ${caught.returned} returned, ${caught.held} held; ${left.length} jobs left behind (${named})`,
      );
    }

    const child = await startWorkerProcess({ redisUrl: db.url, tableName });
    children.push(child);
    const { counts } = await pollUntil(
      "every expired hold reset and every killed job completed",
      async () => ({
        counts: (await gw.deps.inventory.seats.eventCounts({ eventId }))!,
        recovered: [...killedJobs.keys()].filter((id) => watch.completions.has(id)).length,
      }),
      ({ counts: c, recovered }) =>
        recovered === killedJobs.size &&
        c.seats.held === 0 &&
        c.seats.expiredHolds === 0 &&
        c.seats.available === totalSeats &&
        c.generalAdmission.GA?.held === 0,
      { timeoutMs: 75_000 },
    );
    log(`resolved; ${killedJobs.size} killed jobs taken back and completed`);

    // Everything back; general admission returned exactly once: a second return would show as
    // available above capacity and held below zero.
    expect(counts.seats).toMatchObject({ total: totalSeats, available: totalSeats, held: 0, sold: 0 });
    expect(counts.generalAdmission.GA).toMatchObject({
      capacity: GA_CAPACITY,
      available: GA_CAPACITY,
      held: 0,
      sold: 0,
    });

    // Every killed job was taken back as stalled and completed; no job completed twice.
    for (const id of killedJobs.keys()) expect(watch.stalled.has(id), `job ${id} stalled`).toBe(true);
    for (const [id, results] of watch.completions) expect(results, `completions of ${id}`).toHaveLength(1);

    // Seats released by completed runs: each once, each an expired one. Those no completed run
    // released were reset by a killed run, so they belong to a shard whose job was killed, or a
    // job of no shard was killed (the event's backstop over its sections, sweep-sections).
    const results = [...watch.completions.values()].flat();
    const released = results.flatMap((r) => r.releasedSeats);
    expect(new Set(released).size).toBe(released.length);
    for (const seat of released) expect(expiredSeats.has(seat), seat).toBe(true);
    const releasedOnce = new Set(released);
    const killedShards = new Set([...killedJobs.values()].map((j) => j.shard));
    const byKilledRuns = [...expiredSeats].filter((s) => !releasedOnce.has(s));
    const killedAnyShard = killedShards.has(undefined);
    for (const seat of byKilledRuns) expect(killedAnyShard || killedShards.has(shardOf(seat)), seat).toBe(true);
    const gaTotal = [...gaHolds.values()].reduce((a, b) => a + b, 0);
    const gaByCompleted = results.reduce((n, r) => n + r.generalAdmissionQuantityReturned, 0);
    // The kills did land mid-sweep: the GA shard's job was in flight, and what it had returned
    // before it died appears in no completed run's result.
    expect(gaJobKills).toBeGreaterThan(0);
    expect(gaByCompleted).toBeGreaterThan(0);
    expect(gaByCompleted).toBeLessThan(gaTotal);

    await expectAuditPasses(gw, eventId, redis);

    // The expiry index is clean: one more pass over every shard finds nothing.
    const again = await Promise.all(
      Array.from({ length: SWEEP_SHARDS }, (_, shard) => gw.deps.inventory.holds.sweepExpired({ eventId, shard })),
    );
    expect(again.reduce((n, r) => n + r.examined, 0)).toBe(0);

    // The seat map may still show "held" for seats a killed run reset (it died before telling the
    // cache), and only for those, until the refresh job (every minute) rebuilds it from DynamoDB.
    const cached = (await gw.deps.seatMap.getSection(eventId, "A"))!;
    const stale = cached.seats.filter((s) => s.status !== "available").map((s) => s.id);
    for (const seat of stale) expect(byKilledRuns, seat).toContain(seat);
    log(`seat map: ${stale.length} of the ${byKilledRuns.length} seats reset by killed runs still shown held`);
    await gw.queues.seatMapRefresh.add("refresh", { eventId, kind: "event", sectionIds: ["A"] });
    await pollUntil(
      "the seat map rebuilt",
      async () => (await gw.deps.seatMap.getSection(eventId, "A"))!.seats.filter((s) => s.status !== "available"),
      (notAvailable) => notAvailable.length === 0,
      { timeoutMs: 15_000 },
    );
    expect((await gw.deps.seatMap.availability(eventId)).A).toBe(totalSeats);

    expect(await child.stop("SIGTERM")).toBe(0);
  }, 300_000);
});
