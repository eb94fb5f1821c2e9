/**
 * A worker process (src/main.ts --role=worker) killed with SIGKILL in the middle of reconciling,
 * three times, each time over a fresh batch of tok_timeout purchases (the fan got 202 pending and
 * only the reconciler resolves them): half on an event whose holds are still good (they must end
 * confirmed), half on one whose holds expired meanwhile (refunded). After the restarts every
 * purchase is confirmed or refunded, with one charge each and one refund for each refunded one,
 * no seat sold twice, the audit passes, and every killed reconcile job completes once.
 *
 * The child is the only worker. The state comes from an in-process gateway without workers, on a
 * Redis database of this file's own (test/support/worker-process.ts says why); the simulated
 * provider keeps its charges there too, so the child's lookups find them. The children that are
 * killed reach DynamoDB through a proxy that delays every request: see SLOW_DYNAMO_MS.
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
import type { Purchase, PurchaseStatus } from "../../src/inventory/index.js";
import { createSimulatedProvider } from "../../src/payments/simulated.js";
import { QUEUE_PREFIX, queueNames, type ReconcileJob } from "../../src/workers/queues.js";
import { type DynamoProxy, startDynamoProxy } from "../support/dynamo-proxy.js";

const CYCLES = 3;
/** Purchases per event and batch: seat purchases (two seats each), then general admission. */
const SEAT_PURCHASES = 6;
const GA_PURCHASES = 2;
const PER_BATCH = SEAT_PURCHASES + GA_PURCHASES;
const PAYMENT_TIMEOUT_MS = 300;
/** Long enough for a hold and its purchase request on a loaded machine, short enough to wait for. */
const LAPSED_HOLD_SECONDS = 4;
/**
 * Added to each DynamoDB request of a child that is to be killed. At full speed a batch is
 * reconciled in a few hundred ms (4 jobs at a time, 3 to 5 requests each), and a poll that is
 * late by that much sees it all done and then waits in vain; this way the batch takes seconds.
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
let queue: Queue<ReconcileJob>;
let watch: QueueWatch<{ purchaseId?: string; outcome?: string }>;
let slowDynamo: DynamoProxy;
const children: WorkerProcess[] = [];

beforeAll(async () => {
  db = await claimRedisDatabase();
  tableName = await createTable();
  gw = await startGatewayOn(db.url, { tableName, paymentTimeoutMs: PAYMENT_TIMEOUT_MS });
  redis = new Redis(db.url, { maxRetriesPerRequest: null });
  queue = new Queue<ReconcileJob>(queueNames.reconcile, { connection: redis, prefix: QUEUE_PREFIX });
  watch = await watchQueue(db.url, queueNames.reconcile);
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

/**
 * The purchases made for an event, read by id: a listing has only the open ones (no index of
 * purchases by status is kept; docs/data-model.md).
 */
async function allPurchases(eventId: string, made: ReadonlyMap<string, string>): Promise<Purchase[]> {
  const ids = [...made].filter(([, e]) => e === eventId).map(([id]) => id);
  const out = await Promise.all(ids.map((purchaseId) => gw.deps.inventory.purchases.get({ eventId, purchaseId })));
  return out.filter((p): p is Purchase => p !== null);
}

const resolvedOf = (c: Record<PurchaseStatus, number>) => c.confirmed + c.refunded + c.failed;

describe("a worker process killed in the middle of reconciling", () => {
  // Four worker starts, three catches, a lock to outwait and the end: room for a loaded machine.
  it("after restarts every purchase ends confirmed or refunded once, with one charge each", async () => {
    const started = Date.now();
    // Where the time went, printed only when the test fails.
    const timeline: string[] = [];
    onTestFailed(() => console.log(timeline.join("\n")));
    const log = (msg: string) => timeline.push(`+${((Date.now() - started) / 1000).toFixed(1)}s ${msg}`);
    const layout = {
      maxSeatsPerFan: 4,
      sections: [{ id: "A", tier: "Floor", price: 10000, rows: CYCLES * 2, seatsPerRow: SEAT_PURCHASES }],
      generalAdmission: [{ id: "GA", tier: "Standing", price: 4000, capacity: 100 }],
    };
    // `kept`: holds outlive the reconciler (confirmed). `lapsed`: holds end before it runs (refunded).
    const kept = uniqueId("rk");
    const lapsed = uniqueId("rl");
    expect((await putEvent(gw, kept, eventInput({ ...layout, holdSeconds: 300 }))).status).toBe(201);
    expect((await putEvent(gw, lapsed, eventInput({ ...layout, holdSeconds: LAPSED_HOLD_SECONDS }))).status).toBe(201);
    const fanIds = Array.from({ length: CYCLES * PER_BATCH }, (_, i) => `buyer${i}`);
    const fans = { [kept]: await admitFans(gw, kept, fanIds), [lapsed]: await admitFans(gw, lapsed, fanIds) };
    log("fans admitted");

    const buy = async (eventId: string, fan: AdmittedFan, json: unknown, key: string) => {
      const held = await gw.request(`/v1/events/${eventId}/holds`, { method: "POST", token: fan.accessToken, json });
      if (held.status !== 201) throw new Error(`hold: ${held.status} ${await held.text()}`);
      const hold = (await held.json()) as { holdId: string; expiresAt: string };
      const res = await gw.request(`/v1/events/${eventId}/holds/${hold.holdId}/purchase`, {
        method: "POST",
        token: fan.accessToken,
        headers: { "idempotency-key": key },
        json: { paymentToken: "tok_timeout" },
      });
      if (res.status !== 202) throw new Error(`purchase: ${res.status} ${await res.text()}`);
      const body = (await res.json()) as { purchaseId: string; status: string };
      expect(body.status).toBe("pending");
      return { purchaseId: body.purchaseId, expiresAt: Date.parse(hold.expiresAt) };
    };

    const madeBy = new Map<string, string>(); // purchase id -> event id
    const killedIn = new Map<string, number>(); // job id -> times it was in flight at a kill
    for (let cycle = 0; cycle < CYCLES; cycle++) {
      // A fresh batch while no worker runs; each purchase times out, leaving it pending.
      // The lapsed event's first, so their holds age while the kept ones are bought.
      const orders = [lapsed, kept].flatMap((eventId) =>
        Array.from({ length: PER_BATCH }, (_, i) => ({
          eventId,
          fan: fans[eventId]![cycle * PER_BATCH + i]!,
          json:
            i < SEAT_PURCHASES
              ? { seats: [`A-${cycle * 2 + 1}-${i + 1}`, `A-${cycle * 2 + 2}-${i + 1}`] }
              : { generalAdmission: { id: "GA", quantity: 2 } },
        })),
      );
      // A few at a time, so that each purchase follows its hold closely even on a loaded machine.
      const made = await mapLimit(orders, 8, async (o) => ({
        ...(await buy(o.eventId, o.fan, o.json, `batch-${cycle}`)),
        eventId: o.eventId,
      }));
      for (const p of made) madeBy.set(p.purchaseId, p.eventId);
      const lapsedExpiry = Math.max(...made.filter((p) => p.eventId === lapsed).map((p) => p.expiresAt));
      // The clock has to pass the lapsed holds' expiry; there is nothing to poll for that.
      await sleep(Math.max(0, lapsedExpiry - Date.now() + 50));

      log(`cycle ${cycle}: ${made.length} purchases pending, lapsed holds expired`);
      const before = resolvedOf(await gw.deps.inventory.purchases.count({ eventId: kept }));
      const beforeLapsed = resolvedOf(await gw.deps.inventory.purchases.count({ eventId: lapsed }));
      const child = await startWorkerProcess({
        redisUrl: db.url,
        tableName,
        paymentTimeoutMs: PAYMENT_TIMEOUT_MS,
        dynamoEndpoint: slowDynamo.endpoint,
        env: { WORKER_LOCK_MS: String(KILLED_LOCK_MS) },
      });
      children.push(child);
      log(`cycle ${cycle}: worker running`);

      // Mid-reconcile: a reconcile job is running, part of this batch is resolved, part pending.
      const caught = await pollUntil(
        "a reconcile job in flight with part of the batch resolved",
        async () => {
          const [active, k, l] = await Promise.all([
            queue.getActive(),
            gw.deps.inventory.purchases.count({ eventId: kept }),
            gw.deps.inventory.purchases.count({ eventId: lapsed }),
          ]);
          return {
            // Not counting jobs a previous kill left behind (still locked by the dead worker).
            running: active.filter((j) => !killedIn.has(j.id ?? "")).length,
            resolved: resolvedOf(k) - before + resolvedOf(l) - beforeLapsed,
            pending: k.pending + l.pending,
          };
        },
        (s) => s.running > 0 && s.resolved > 0 && s.pending > 0,
        { timeoutMs: 45_000, intervalMs: 10 },
      ).catch((err: Error) => {
        throw new Error(`${err.message}\nworker log:\n${child.logs.slice(-20).join("\n")}`);
      });
      await child.stop("SIGKILL");
      // Nothing else processes this queue now: what is active was the dead worker's.
      const left = await queue.getActive();
      // A job still locked by an earlier dead worker is not killed again; one taken back and run
      // again by this one is (each time BullMQ took it back counts in its stalledCounter).
      for (const job of left) if (job.id) killedIn.set(job.id, job.stalledCounter + 1);
      log(
        `cycle ${cycle}: killed with ${caught.resolved} resolved, ${caught.pending} pending; ${left.length} jobs left`,
      );
    }

    // Nothing to catch in flight any more: this one talks to DynamoDB directly.
    const child = await startWorkerProcess({ redisUrl: db.url, tableName, paymentTimeoutMs: PAYMENT_TIMEOUT_MS });
    children.push(child);
    // Every purchase job, and every job a kill interrupted, ends (completed, or failed for good).
    const purchaseJobs = [...madeBy.keys()].map((id) => `reconcile-${id}`);
    const ended = (id: string) => watch.completions.has(id) || watch.failed.has(id);
    await pollUntil(
      "every purchase resolved and every reconcile job ended",
      async () => {
        const [k, l] = await Promise.all([
          gw.deps.inventory.purchases.count({ eventId: kept }),
          gw.deps.inventory.purchases.count({ eventId: lapsed }),
        ]);
        return {
          pending: k.pending + l.pending,
          unended: [...purchaseJobs, ...killedIn.keys()].filter((id) => !ended(id)).length,
        };
      },
      (s) => s.pending === 0 && s.unended === 0,
      { timeoutMs: 75_000 },
    );
    log(`resolved; ${killedIn.size} killed jobs taken back`);
    expect(killedIn.size).toBeGreaterThan(0);

    // Every purchase: confirmed where the hold was still good, refunded where it had lapsed.
    const purchases = [...(await allPurchases(kept, madeBy)), ...(await allPurchases(lapsed, madeBy))];
    expect(purchases).toHaveLength(madeBy.size);
    for (const p of purchases) {
      expect(p.status, p.purchaseId).toBe(p.eventId === kept ? "confirmed" : "refunded");
    }

    // One charge per purchase; refunded once for each refunded purchase, never for a confirmed one.
    const provider = createSimulatedProvider({ redis });
    const charges = await provider.listCharges();
    expect(charges.map((c) => c.idempotencyKey).sort()).toEqual([...madeBy.keys()].sort());
    for (const charge of charges) {
      const refunded = madeBy.get(charge.idempotencyKey) === lapsed;
      expect(charge.refunded, charge.idempotencyKey).toBe(refunded);
      if (refunded) expect(charge.refundId).toBeDefined();
    }
    const totals = await provider.totals();
    const lapsedCount = purchases.filter((p) => p.eventId === lapsed).length;
    expect(totals).toMatchObject({ charges: madeBy.size, refunds: lapsedCount, declines: 0, errors: 0 });
    const amount = (eventId?: string) =>
      purchases.filter((p) => eventId === undefined || p.eventId === eventId).reduce((n, p) => n + p.amount, 0);
    expect(totals.captured).toBe(amount());
    expect(totals.refunded).toBe(amount(lapsed));

    // The seats: the kept event's sold once each, to their purchase; the lapsed event sold none.
    const seatsOf = async (eventId: string) =>
      (await gw.deps.inventory.seats.listSection({ eventId, sectionId: "A" }))!.seats;
    const soldTo = new Map((await seatsOf(kept)).filter((s) => s.status === "sold").map((s) => [s.id, s.purchaseId]));
    const keptSeatPurchases = purchases.filter((p) => p.eventId === kept && p.seats.length > 0);
    expect(soldTo.size).toBe(keptSeatPurchases.reduce((n, p) => n + p.seats.length, 0));
    for (const p of keptSeatPurchases) for (const s of p.seats) expect(soldTo.get(s), s).toBe(p.purchaseId);
    expect((await seatsOf(lapsed)).filter((s) => s.status === "sold")).toEqual([]);
    const keptGa = (await gw.deps.inventory.seats.generalAdmission({ eventId: kept, areaId: "GA" }))!;
    expect(keptGa).toMatchObject({ sold: CYCLES * GA_PURCHASES * 2, held: 0, available: 100 - keptGa.sold });

    // The audit agrees (no seat sold twice, sold = confirmed, money = confirmed, nothing pending).
    await expectAuditPasses(gw, kept, redis);
    await expectAuditPasses(gw, lapsed, redis);

    // Jobs: each killed one was taken back as stalled; each completed at most once. A purchase job
    // in flight at two kills fails for good (BullMQ's stalled limit): its purchase is resolved anyway.
    for (const id of killedIn.keys()) expect(watch.stalled.has(id), `job ${id} stalled`).toBe(true);
    for (const [id, results] of watch.completions) expect(results, `completions of ${id}`).toHaveLength(1);
    for (const id of purchaseJobs) {
      if ((killedIn.get(id) ?? 0) < 2) {
        expect(watch.completions.has(id), `${id} completed (${watch.failed.get(id) ?? "not failed"})`).toBe(true);
      }
      const outcome = watch.completions.get(id)?.[0]?.outcome;
      if (outcome) expect(outcome).toBe(madeBy.get(id.slice("reconcile-".length)) === kept ? "confirmed" : "refunded");
    }
    expect(await child.stop("SIGTERM")).toBe(0);
  }, 300_000);
});
