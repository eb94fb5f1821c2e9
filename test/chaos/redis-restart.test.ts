/**
 * Redis restarted mid-sale: the cluster's own redis-server gets SIGKILL while fans hold and join,
 * stays down a few seconds, and comes back EMPTY on the same port (no persistence): the waiting
 * room, the seat-map cache, the rate limits, the queues and the simulated provider's ledger are
 * gone. DynamoDB, the authority, is untouched.
 *
 * The contract (docs/API.md, RELIABILITY.md):
 *  - while Redis is down: joins and status polls answer 503 with Retry-After; holds and purchases
 *    with a valid access token keep working against DynamoDB and the provider (201/202/402/409);
 *    a purchase that answers 503 charged nothing;
 *  - after it returns empty: the waiting room is restored from the event item (joins work; a status
 *    poll with a queue token from before re-places the fan), access tokens from before keep
 *    working, the seat map is rebuilt from DynamoDB (an ETag from before gets no false 304), the
 *    workers run again (the outbox publishes what was confirmed);
 *  - the sale finishes with no oversell and no lost purchase (audit).
 *
 * What a fan in the queue experiences is measured and reported: the answers to their status polls
 * while Redis is down, and what the first poll after it returns says.
 *
 * The simulated payment provider keeps its ledger in a redis-server of its own (PAYMENT_REDIS_URL),
 * as a real provider's ledger is elsewhere and survives: the kill takes the gateway's Redis only,
 * and the audit checks every charge ever made. The purchases fans make while Redis is down must
 * charge nothing at all.
 */
import { type Cluster, sleep, startCluster, ADMIN_TOKEN } from "./support/cluster.js";
import { eventInput, uniqueId } from "../gateway/harness.js";
import { afterAll, describe, expect, it, onTestFailed } from "vitest";
import { bookingJobId } from "../../src/workers/outbox.js";
import { QUEUE_PREFIX, queueNames } from "../../src/workers/queues.js";
import { admitFans, pollUntilAdmitted, seatIds, startSale } from "./support/fans.js";
import { auditFigures, recordScenario } from "./support/report.js";
import { scaled } from "./support/scale.js";
import type { Answer } from "./support/traffic.js";

const FANS = scaled(24, 100);
const QUEUERS = scaled(6, 30);
const SECTION = { id: "A", tier: "Floor", price: 11_000, rows: scaled(8, 24), seatsPerRow: 10 };
const SALE_MS = scaled(12_000, 40_000);
const OUTAGE_MS = scaled(3_000, 8_000);
/** How long recovery may take before the scenario calls it a failure. */
const RECOVERY_MS = 45_000;

let cluster: Cluster | undefined;
afterAll(async () => {
  await cluster?.close();
});

describe("chaos: Redis killed mid-sale and restarted empty", () => {
  it("claims go on against DynamoDB while it is down; the waiting room, seat map and workers recover", async () => {
    cluster = await startCluster({ paymentTimeoutMs: 1_000, paymentRedis: true });
    const c = cluster;
    const timeline: string[] = [];
    const t0 = Date.now();
    const log = (msg: string) => timeline.push(`+${((Date.now() - t0) / 1000).toFixed(1)}s ${msg}`);
    onTestFailed(() => console.log(`${timeline.join("\n")}\n${c.recentLogs(40)}`));

    const eventId = uniqueId("rr");
    const base = `/v1/events/${eventId}`;
    await c.putEvent(
      eventId,
      eventInput({ holdSeconds: 120, maxSeatsPerFan: 4, sections: [SECTION], generalAdmission: [] }),
    );
    const fans = await admitFans(
      c.traffic,
      eventId,
      Array.from({ length: FANS }, (_, i) => `fan${i}`),
    );
    // Two fans outside the sale, and two seats kept from it: one holds and buys while Redis is
    // down, the other holds after it returns. What the sale's fans happen to do in those windows
    // depends on the timing; the probes make each window's claim certain.
    const probers = await admitFans(c.traffic, eventId, ["prober0", "prober1"]);
    const allSeats = seatIds(SECTION);
    const probeSeats = allSeats.slice(-2);
    // Fans still in the queue at the kill: admission paused, then they join.
    const paused = await c.traffic.request(`/v1/admin/events/${eventId}/waiting-room`, {
      method: "PATCH",
      token: ADMIN_TOKEN,
      json: { admitPerSecond: 0 },
      kind: "admin",
    });
    expect(paused.status, JSON.stringify(paused.body)).toBe(200);
    const queuers: { fanId: string; queueToken: string; before: unknown }[] = [];
    for (let i = 0; i < QUEUERS; i++) {
      const fanId = `queued${i}`;
      const res = await c.traffic.request(`${base}/queue`, { method: "POST", json: { fanId }, kind: "join" });
      expect(res.status, JSON.stringify(res.body)).toBe(201);
      const queueToken = (res.body as { queueToken: string }).queueToken;
      const status = await c.traffic.request(`${base}/queue/status`, { token: queueToken, kind: "status" });
      expect(status.status).toBe(200);
      queuers.push({ fanId, queueToken, before: status.body });
    }
    log(`${FANS} fans admitted, ${QUEUERS} waiting`);

    const sale = startSale(c.traffic, {
      eventId,
      fans,
      seats: allSeats.slice(0, -2),
      durationMs: SALE_MS,
      graceMs: 30_000,
      // Fans arrive over most of the sale, so many are still holding and paying when Redis dies.
      arrivalMs: [0, SALE_MS * 0.7],
      thinkMs: [200, 800],
      payDelayMs: [100, 400],
      // Some decline first; some charge with an unknown outcome (202), left to the reconciler, whose
      // per-purchase jobs die with Redis: the per-event sweep re-armed on reconnect settles them.
      paymentToken: (fan, attempt) => {
        const n = Number(fan.fanId.slice(3));
        if (attempt > 0) return "tok_ok";
        return n % 5 === 0 ? "tok_decline" : n % 7 === 3 ? "tok_timeout" : "tok_ok";
      },
    });

    // Mid-sale: a seat-map ETag, then the kill.
    await sleep(scaled(2_500, 8_000));
    const sectionBefore = await c.traffic.request(`${base}/sections/A/seats`, { kind: "seatmap" });
    expect(sectionBefore.status).toBe(200);
    const etagBefore = sectionBefore.headers.get("etag")!;
    const chargesBefore = (await c.charges()).length;
    const confirmedBefore = (await c.inventory.purchases.list({ eventId, status: "confirmed" })).purchases.length;
    const killStart = Date.now();
    await c.killRedis();
    const killDone = Date.now();
    log(`redis killed (${chargesBefore} charges so far, ${confirmedBefore} purchases confirmed)`);

    // While it is down: a prober holds and buys (against DynamoDB and the provider); new fans
    // join, queued fans poll. Redis stays down at least until the prober is answered.
    const downProbeHold = await c.traffic.request(`${base}/holds`, {
      method: "POST",
      token: probers[0]!.accessToken,
      json: { seats: [probeSeats[0]!] },
      kind: "hold",
    });
    const downProbePurchase =
      downProbeHold.status === 201
        ? await c.traffic.request(`${base}/holds/${(downProbeHold.body as { holdId: string }).holdId}/purchase`, {
            method: "POST",
            token: probers[0]!.accessToken,
            headers: { "idempotency-key": "probe-down" },
            json: { paymentToken: "tok_ok" },
            kind: "purchase",
          })
        : undefined;
    const outageAnswers: { kind: string; answer: Answer }[] = [];
    const probeUntil = Math.max(killDone + OUTAGE_MS, Date.now() + 300);
    let probe = 0;
    do {
      const join = await c.traffic.request(`${base}/queue`, {
        method: "POST",
        json: { fanId: `outage${probe++}` },
        kind: "join",
      });
      outageAnswers.push({ kind: "join", answer: join });
      const q = queuers[probe % queuers.length]!;
      const status = await c.traffic.request(`${base}/queue/status`, { token: q.queueToken, kind: "status" });
      outageAnswers.push({ kind: "status", answer: status });
      await sleep(200);
    } while (Date.now() < probeUntil - 300);
    await sleep(Math.max(0, probeUntil - Date.now()));
    const restartStart = Date.now();
    await c.restartRedis();
    const restartDone = Date.now();
    log("redis restarted, empty");

    // Recovery, as fans see it: a new fan joins; each queued fan's old token is answered again.
    const firstJoin = await pollAnswer(async () =>
      c.traffic.request(`${base}/queue`, { method: "POST", json: { fanId: `after${Date.now()}` }, kind: "join" }),
    );
    const joinsBackMs = firstJoin.endedAt - restartDone;
    log(`joins work again after ${joinsBackMs} ms (${firstJoin.status})`);
    const upProbeHold = await pollAnswer(() =>
      c.traffic.request(`${base}/holds`, {
        method: "POST",
        token: probers[1]!.accessToken,
        json: { seats: [probeSeats[1]!] },
        kind: "hold",
      }),
    );
    const queuedAfter = await Promise.all(
      queuers.map(async (q) => {
        const res = await pollAnswer(() =>
          c.traffic.request(`${base}/queue/status`, { token: q.queueToken, kind: "status" }),
        );
        return { ...q, after: res.body, status: res.status, backMs: res.endedAt - restartDone };
      }),
    );
    log("queued fans answered again");

    // An ETag from before the kill is not taken for the current seat map.
    const sectionAfter = await c.traffic.request(`${base}/sections/A/seats`, {
      headers: { "if-none-match": etagBefore },
      kind: "seatmap",
    });
    log(`seat map with the old ETag: ${sectionAfter.status}`);

    const ledger = await sale.done;
    log(`sale over: ${ledger.holds.length} holds tried, ${ledger.purchases.length} purchases`);

    // While down (sent after the kill, answered before the restart began):
    const inOutage = (a: { startedAt: number; endedAt: number }) => a.startedAt >= killDone && a.endedAt < restartStart;
    const downJoins = outageAnswers.filter((a) => a.kind === "join" && inOutage(a.answer)).map((a) => a.answer);
    const downPolls = outageAnswers.filter((a) => a.kind === "status" && inOutage(a.answer)).map((a) => a.answer);
    const downHolds = ledger.holds.filter(inOutage);
    const downPurchases = ledger.purchases.filter((p) => p.answers.some(inOutage));

    // The queued fans, after: placed again (200), never told their token is no good.
    for (const q of queuedAfter) expect(q.status, `${q.fanId}: ${JSON.stringify(q.after)}`).toBe(200);
    // Let them in again and they hold seats, with access tokens issued by the new Redis.
    await c.traffic.request(`/v1/admin/events/${eventId}/waiting-room`, {
      method: "PATCH",
      token: ADMIN_TOKEN,
      json: { admitPerSecond: 1_000 },
      kind: "admin",
    });
    const lateTokens = await Promise.all(
      queuers.map((q) => pollUntilAdmitted(c.traffic, eventId, q.queueToken, Date.now() + RECOVERY_MS)),
    );
    const free = (await c.storedSeats(eventId, [SECTION.id])).filter((s) => s.status === "available");
    const lateHolds = await Promise.all(
      lateTokens
        .slice(0, free.length)
        .map((token, i) =>
          c.traffic.request(`${base}/holds`, { method: "POST", token, json: { seats: [free[i]!.id] }, kind: "hold" }),
        ),
    );
    for (const h of lateHolds) expect(h.status, JSON.stringify(h.body)).toBe(201);
    log("queued fans admitted and holding");

    // The workers run again: every confirmed purchase's booking is in the queue again (a job the
    // wipe took is added back from its record, which is still unsent: nobody acknowledged it), and
    // nothing is left pending. The Redis is the restarted one, so its stream has only jobs added since.
    const settleMs = await c.waitUntilSettled(eventId, RECOVERY_MS);
    const eventsKey = `${QUEUE_PREFIX}:${queueNames.bookings}:events`;
    const addedJobs = async () => {
      const added = new Set<string>();
      for (const [, fields] of await c.redis.xrange(eventsKey, "-", "+")) {
        const entry: Record<string, string> = {};
        for (let i = 0; i + 1 < fields.length; i += 2) entry[fields[i]!] = fields[i + 1]!;
        if (entry.event === "added" && entry.jobId) added.add(entry.jobId);
      }
      return added;
    };
    const unsentWithoutJob = async () => {
      const added = await addedJobs();
      return (await c.inventory.outbox.listUnsent({ eventId })).filter((r) => !added.has(bookingJobId(r.purchaseId)));
    };
    const publishDeadline = Date.now() + RECOVERY_MS;
    while ((await unsentWithoutJob()).length > 0 && Date.now() < publishDeadline) await sleep(500);
    expect(await unsentWithoutJob(), "unsent outbox records whose job is not in Redis").toEqual([]);
    const confirmedAfter = (await c.inventory.purchases.list({ eventId, status: "confirmed" })).purchases.filter(
      (p) => Date.parse(p.confirmedAt ?? "") > restartDone,
    );
    const added = await addedJobs();
    for (const p of confirmedAfter) expect(added.has(bookingJobId(p.purchaseId)), p.purchaseId).toBe(true);
    log("workers ran again: outbox drained");

    // The seat map, rebuilt from DynamoDB, tells the truth again (it may lag by a few seconds).
    const mapDeadline = Date.now() + RECOVERY_MS;
    let mismatched: string[] = [];
    for (;;) {
      const now = Date.now();
      const truth = new Map(
        (await c.storedSeats(eventId, [SECTION.id])).map((s) => [
          s.id,
          s.status === "held" && (s.holdExpiresAt ?? 0) <= now ? "available" : s.status,
        ]),
      );
      const cached = await c.traffic.request(`${base}/sections/A/seats`, { kind: "seatmap" });
      const seats = (cached.body as { seats?: { id: string; status: string }[] } | null)?.seats ?? [];
      mismatched = seats
        .filter((s) => truth.get(s.id) !== s.status)
        .map((s) => `${s.id}: ${s.status} != ${truth.get(s.id)}`);
      if (cached.status === 200 && seats.length === truth.size && mismatched.length === 0) break;
      if (Date.now() > mapDeadline) break;
      await sleep(500);
    }

    const charges = await c.charges();
    const report = await c.audit(eventId);
    const figures = auditFigures(report);
    const counts = c.traffic.counts;
    const firstPoll = queuedAfter.map((q) => (q.after as { status?: string; position?: number }) ?? {});
    recordScenario({
      scenario: "redis-restart",
      faults: "the gateway's redis-server SIGKILLed mid-sale, restarted empty x1 (payment ledger in its own Redis)",
      requests: counts.total,
      ...figures,
      serverErrors: counts.serverErrors,
      unavailable: counts.unavailable,
      notes:
        `down ${((restartDone - killStart) / 1000).toFixed(1)} s; while down: ${downHolds.filter((h) => h.status === 201).length}/${downHolds.length} holds 201 ` +
        `(${downHolds.filter((h) => h.status === 409).length} 409), joins ${statuses(downJoins)}, status polls ${statuses(downPolls)}, ` +
        `purchases ${statuses(downPurchases.flatMap((p) => p.answers.filter(inOutage)))}; after: joins back in ${joinsBackMs} ms, ` +
        `queued fans' first poll ${firstPoll.map((p) => `${p.status}${p.position !== undefined ? `@${p.position}` : ""}`).join(",")} ` +
        `(${Math.max(...queuedAfter.map((q) => q.backMs))} ms at most), old ETag -> ${sectionAfter.status}; ` +
        `settled ${(settleMs / 1000).toFixed(1)} s after the sale`,
    });
    console.log(timeline.join("\n"));

    // While down: joins and polls 503 (with Retry-After, checked for every 503 by the traffic
    // counter); holds decided by DynamoDB; purchases 503 and no charge for them.
    expect(downJoins.length).toBeGreaterThan(0);
    for (const a of downJoins) expect(a.status, `join while down: ${JSON.stringify(a.body)}`).toBe(503);
    for (const a of downPolls) expect(a.status, `status while down: ${JSON.stringify(a.body)}`).toBe(503);
    for (const h of downHolds) expect([201, 409], `hold while down: ${JSON.stringify(h)}`).toContain(h.status);
    expect(downProbeHold.status, `the prober's hold while down: ${JSON.stringify(downProbeHold.body)}`).toBe(201);
    expect(inOutage(downProbeHold)).toBe(true);
    // Purchases go on: the provider (its own Redis) answers, and a reconcile job that cannot be
    // queued is covered by the per-event sweep, re-armed when Redis returns.
    for (const p of downPurchases) {
      for (const a of p.answers.filter(inOutage))
        expect([201, 202, 402, 503], `purchase while down: ${JSON.stringify(a)}`).toContain(a.status);
    }
    expect(
      downProbePurchase?.status,
      `the prober's purchase while down: ${JSON.stringify(downProbePurchase?.body)}`,
    ).toBe(201);
    expect(inOutage(downProbePurchase!)).toBe(true);
    // The provider's ledger outlived the gateway's Redis: nothing charged before the kill is gone.
    expect(charges.length).toBeGreaterThanOrEqual(chargesBefore);
    const chargedKeys = new Set(charges.map((ch) => ch.idempotencyKey));
    for (const p of downPurchases) {
      // A purchase refused with 503 while down was never charged.
      if (p.answers.every((a) => inOutage(a) && a.status === 503))
        expect(chargedKeys.has(p.purchaseId), `${p.purchaseId} charged`).toBe(false);
    }
    // After: joins work, the old ETag is no 304, holds went on, the seat map agrees with DynamoDB.
    expect(firstJoin.status).toBe(201);
    expect(sectionAfter.status, "an ETag from before the restart").toBe(200);
    expect(upProbeHold.status, `the prober's hold after: ${JSON.stringify(upProbeHold.body)}`).toBe(201);
    expect(mismatched, "seat map vs DynamoDB").toEqual([]);

    expect(c.traffic.violations).toEqual([]);
    expect(report.checks.filter((check) => check.status === "fail")).toEqual([]);
    expect(figures.oversells).toBe(0);
    expect(figures.lostPurchases).toBe(0);
    expect(counts.serverErrors).toBe(0);
  }, 240_000);
});

/** Retries `send` (as Retry-After says) until it is answered with a 2xx, for RECOVERY_MS at most. */
async function pollAnswer(send: () => Promise<Answer>): Promise<Answer> {
  const deadline = Date.now() + RECOVERY_MS;
  for (;;) {
    const res = await send();
    if ((res.status >= 200 && res.status < 300) || Date.now() > deadline) return res;
    const after = Number(res.headers.get("retry-after"));
    await sleep(Number.isFinite(after) && after > 0 ? Math.min(after * 1000, 1_000) : 200);
  }
}

function statuses(answers: { status: number }[]): string {
  const by = new Map<number, number>();
  for (const a of answers) by.set(a.status, (by.get(a.status) ?? 0) + 1);
  return by.size === 0 ? "none" : [...by].map(([s, n]) => `${n}x${s}`).join(" ");
}
