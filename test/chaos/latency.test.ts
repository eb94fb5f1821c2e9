/**
 * Network slowness between the processes and DynamoDB, injected by the proxy, with
 * DYNAMODB_TIMEOUT_MS = 3 s and one attempt per request (the margin over the 150 ms phase's
 * answers is wide, so a loaded machine does not turn a slow answer into a 503):
 *
 *  1. baseline, no added latency: a sale; p50/p95 of holds and purchases;
 *  2. latency below the timeout (150 ms per DynamoDB request): a sale; every answer is still a
 *     correct one (no 503), only slower;
 *  3. latency above the timeout (5 s) on every request: holds and purchases answer 503 promptly
 *     (about the timeout). A purchase changes nothing (its first read times out); a seat is free,
 *     held by a granted hold, or held for the fan who asked by a timed-out one, never sold. After
 *     the latency goes, the fans' retried purchases (same Idempotency-Key) confirm;
 *  3b. only the hold's own write slowed past the timeout: the gateway answers 503, and the write
 *     lands afterwards. What such a timed-out hold leaves: its seats held under a hold id nobody
 *     was told, for the fan who asked, never sold; it expires like any hold, and the moment it
 *     has, another fan holds the seat (201) and the fan who asked may hold again;
 *  4. only the confirmation slow (above the timeout), after the charge: the confirmation's fate is
 *     unknown to the gateway, so the fan gets 202 pending (the money is taken; never a refund on a
 *     guess). The late confirmation commits; the reconciler finds every purchase confirmed, and no
 *     charge refunded.
 * Then no purchase is pending, and the audit of every event passes: no sold seat without a
 * confirmed purchase, no charge without a purchase or a refund.
 *
 * The second test is the race the saga's refund must win: a confirmation sent before the hold
 * expired, stalled on the network, arriving after the reconciler has decided to refund (the
 * charge already refunded at the provider). The saga takes the purchase out of `pending` before it
 * refunds, so that late confirmation is cancelled by its own condition: nothing is sold, and the
 * purchase ends refunded.
 */
import { type Cluster, sleep, startCluster } from "./support/cluster.js";
import { eventInput, uniqueId } from "../gateway/harness.js";
import { afterAll, beforeAll, describe, expect, it, onTestFailed } from "vitest";
import { REFUND_DUE } from "../../src/purchases/saga.js";
import { admitFans, type Fan, seatIds, startSale } from "./support/fans.js";
import { isConfirmTransaction, type ProxiedRequest, purchaseOfConfirm } from "../support/dynamo-proxy.js";
import { auditFigures, recordScenario } from "./support/report.js";
import { scaled } from "./support/scale.js";
import type { RequestKind } from "./support/traffic.js";

const FANS = scaled(16, 60);
const SECTION = { id: "A", tier: "Floor", price: 9_000, rows: scaled(7, 25), seatsPerRow: 10 };
const SALE_MS = scaled(2_000, 10_000);
const TIMEOUT_MS = 3_000;
const BELOW_MS = 150;
const ABOVE_MS = 5_000;

let cluster: Cluster | undefined;
beforeAll(async () => {
  cluster = await startCluster({
    proxy: true,
    paymentTimeoutMs: 3_000,
    dynamoTimeoutMs: TIMEOUT_MS,
    dynamoMaxAttempts: 1,
  });
}, 120_000);
afterAll(async () => {
  await cluster?.close();
});

/** Seats for measuring: held and released, one fan per seat, so there is no contention. */
const PROBE = { id: "P", tier: "Probe", price: 1_000, rows: 1, seatsPerRow: 4 };
const PROBE_ROUNDS = scaled(6, 30);
const layout = { maxSeatsPerFan: 4, sections: [SECTION, PROBE], generalAdmission: [] };
const fanIds = (prefix: string) => Array.from({ length: FANS }, (_, i) => `${prefix}${i}`);

async function newEvent(c: Cluster, prefix: string, holdSeconds: number): Promise<{ eventId: string; fans: Fan[] }> {
  const eventId = uniqueId(prefix);
  await c.putEvent(eventId, eventInput({ ...layout, holdSeconds }));
  return { eventId, fans: await admitFans(c.traffic, eventId, fanIds("fan")) };
}

/**
 * The write of a hold's seats (an UpdateItem for one seat, a transaction for several; the fan's
 * ledger entry is written before it, not slowed), or a standing hold's transaction (area, record
 * and ledger); not a confirmation.
 */
const isHoldWrite = (r: ProxiedRequest) =>
  (r.target === "TransactWriteItems" || r.target === "UpdateItem") &&
  !isConfirmTransaction(r) &&
  (r.body.includes("holdExpiresAt = :exp") || r.body.includes('"entity":{"S":"HOLD"}'));

const fmt = (n: number) => (Number.isNaN(n) ? "-" : String(Math.round(n)));

describe("chaos: DynamoDB behind a slow network", () => {
  it("latency below the timeout: slower, correct; above it: prompt 503s and nothing half-done", async () => {
    const c = cluster!;
    const proxy = c.proxy!;
    onTestFailed(() => console.log(c.recentLogs()));
    const events: string[] = [];
    const figures: string[] = [];
    const latencyOf = (phase: string, kind: RequestKind) => {
      const l = c.traffic.latency(phase, kind);
      return `${kind} p50 ${fmt(l.p50)} / p95 ${fmt(l.p95)} ms`;
    };

    // 1 and 2: the same sale without, then with latency below the timeout.
    const sell = async (phase: string, latencyMs: number) => {
      const { eventId, fans } = await newEvent(c, phase.slice(0, 2), 120);
      events.push(eventId);
      proxy.setLatency(latencyMs);
      c.traffic.setPhase(phase);
      const before = { ...c.traffic.counts };
      const ledger = await startSale(c.traffic, {
        eventId,
        fans,
        seats: seatIds(SECTION),
        durationMs: SALE_MS,
        thinkMs: [50, 200],
        paymentToken: (fan, attempt) =>
          Number(fan.fanId.slice(3)) % 4 === 0 && attempt === 0 ? "tok_decline" : "tok_ok",
      }).done;
      proxy.setLatency(0);
      c.traffic.setPhase("other");
      expect(c.traffic.counts.unavailable - before.unavailable, `${phase}: 503s`).toBe(0);
      expect(c.traffic.counts.noAnswer - before.noAnswer, `${phase}: unanswered`).toBe(0);
      for (const h of ledger.holds) expect([201, 409], `${phase} hold`).toContain(h.status);
      for (const p of ledger.purchases) expect(["confirmed", "declined"], `${phase} purchase`).toContain(p.end);
      expect(ledger.purchases.filter((p) => p.end === "confirmed").length).toBeGreaterThan(0);
      // Steady state, after the burst: a few fans holding and releasing a seat each, in turn.
      const probers = await admitFans(
        c.traffic,
        eventId,
        seatIds(PROBE).map((_, i) => `prober${i}`),
      );
      proxy.setLatency(latencyMs);
      c.traffic.setPhase(`${phase} steady`);
      await Promise.all(
        seatIds(PROBE).map(async (seat, i) => {
          const fan = probers[i]!;
          for (let round = 0; round < PROBE_ROUNDS; round++) {
            const res = await c.traffic.request(`/v1/events/${eventId}/holds`, {
              method: "POST",
              token: fan.accessToken,
              json: { seats: [seat] },
              kind: "hold",
            });
            expect(res.status, JSON.stringify(res.body)).toBe(201);
            const holdId = (res.body as { holdId: string }).holdId;
            const released = await c.traffic.request(`/v1/events/${eventId}/holds/${holdId}`, {
              method: "DELETE",
              token: fan.accessToken,
              kind: "release",
            });
            expect(released.status).toBe(204);
          }
        }),
      );
      proxy.setLatency(0);
      c.traffic.setPhase("other");
      figures.push(
        `${phase}: sale burst ${latencyOf(phase, "hold")}, ${latencyOf(phase, "purchase")}; ` +
          `steady ${latencyOf(`${phase} steady`, "hold")}, release p50 ${fmt(c.traffic.latency(`${phase} steady`, "release").p50)} ms`,
      );
    };
    await sell("baseline", 0);
    await sell(`latency ${BELOW_MS} ms`, BELOW_MS);

    // 3: above the timeout. Holds granted first, without latency; then purchases of them, and
    // holds of other seats, all at once with the latency on.
    {
      // The holds must outlive the timed-out purchases, the wait for the late requests and the retry.
      const HOLD_SECONDS = 30;
      const { eventId, fans } = await newEvent(c, "ab", HOLD_SECONDS);
      events.push(eventId);
      const seats = seatIds(SECTION);
      const mine = new Map<string, string>();
      await Promise.all(
        fans.map(async (fan, i) => {
          const res = await c.traffic.request(`/v1/events/${eventId}/holds`, {
            method: "POST",
            token: fan.accessToken,
            json: { seats: [seats[i]!] },
            kind: "hold",
          });
          expect(res.status, JSON.stringify(res.body)).toBe(201);
          mine.set(fan.fanId, (res.body as { holdId: string }).holdId);
        }),
      );

      proxy.setLatency(ABOVE_MS);
      c.traffic.setPhase("above");
      const asked = new Map<string, { fanId: string; seats: string[] }>();
      const answers = await Promise.all(
        fans.flatMap((fan, i) => {
          const other = [seats[FANS + 2 * i]!, ...(i % 2 === 0 ? [seats[FANS + 2 * i + 1]!] : [])];
          for (const s of other) asked.set(s, { fanId: fan.fanId, seats: other });
          return [
            c.traffic.request(`/v1/events/${eventId}/holds/${mine.get(fan.fanId)}/purchase`, {
              method: "POST",
              token: fan.accessToken,
              headers: { "idempotency-key": "k1" },
              json: { paymentToken: "tok_ok" },
              kind: "purchase",
            }),
            c.traffic.request(`/v1/events/${eventId}/holds`, {
              method: "POST",
              token: fan.accessToken,
              json: { seats: other },
              kind: "hold",
            }),
          ];
        }),
      );
      c.traffic.setPhase("other");
      for (const a of answers) expect(a.status, JSON.stringify(a.body)).toBe(503);
      figures.push(
        `latency ${ABOVE_MS} ms (timeout ${TIMEOUT_MS} ms): all 503, ${latencyOf("above", "hold")}, ${latencyOf("above", "purchase")}`,
      );

      // The late requests land (the proxy forwards them after the latency); then, latency gone:
      const lateBefore = proxy.counts().answeredAfterClientLeft;
      proxy.setLatency(0);
      // The answers came at the timeout; the requests land a little later.
      await sleep(ABOVE_MS - TIMEOUT_MS + 1_000);
      const landedLate = proxy.counts().answeredAfterClientLeft - lateBefore;
      // No purchase was started: the 503 changed nothing.
      const purchases = await c.inventory.purchases.list({ eventId });
      expect(purchases.purchases).toEqual([]);
      // Each seat is free, held by a granted hold, or held (never sold) under the hold id of a
      // timed-out request, for the fan who asked for it.
      const stored = await c.storedSeats(eventId, [SECTION.id]);
      const granted = new Set(mine.values());
      const ghosts = stored.filter((s) => s.status === "held" && !granted.has(s.holdId ?? ""));
      for (const s of stored) {
        expect(s.status, s.id).not.toBe("sold");
        if (s.status !== "held" || granted.has(s.holdId ?? "")) continue;
        expect(s.holderId, `${s.id} held by a timed-out hold`).toBe(asked.get(s.id)?.fanId);
      }
      // The fans try their purchases again, same key: confirmed now.
      const retried = await Promise.all(
        fans.map((fan) =>
          c.traffic.request(`/v1/events/${eventId}/holds/${mine.get(fan.fanId)}/purchase`, {
            method: "POST",
            token: fan.accessToken,
            headers: { "idempotency-key": "k1" },
            json: { paymentToken: "tok_ok" },
            kind: "purchase",
          }),
        ),
      );
      for (const r of retried) expect(r.status, JSON.stringify(r.body)).toBe(201);
      figures.push(
        `${landedLate} DynamoDB requests reached it after the gateway had given up; ${ghosts.length} seats held by a timed-out hold`,
      );
    }

    // 3b: only the hold's own write slow (the fan's reads are fast): the write lands after the
    // gateway answered 503. The seats are then held under a hold id nobody was told, for the fan
    // who asked, until the hold expires; then another fan gets them, and the fan may hold again.
    {
      // Long enough that the late writes (sent at t, landing at t + ABOVE_MS, looked at a second
      // later) are still held when looked at (the sweeper is not fooled).
      const HOLD_SECONDS = ABOVE_MS / 1000 + 5;
      const { eventId, fans } = await newEvent(c, "hw", HOLD_SECONDS);
      events.push(eventId);
      const seats = seatIds(SECTION);
      const asked = new Map<string, string>();
      proxy.setLatency((r) => (isHoldWrite(r) ? ABOVE_MS : 0));
      c.traffic.setPhase("slow-hold-write");
      const answers = await Promise.all(
        fans.map((fan, i) => {
          const mine = [seats[2 * i]!, ...(i % 2 === 0 ? [seats[2 * i + 1]!] : [])];
          for (const s of mine) asked.set(s, fan.fanId);
          return c.traffic.request(`/v1/events/${eventId}/holds`, {
            method: "POST",
            token: fan.accessToken,
            json: { seats: mine },
            kind: "hold",
          });
        }),
      );
      c.traffic.setPhase("other");
      for (const a of answers) expect(a.status, JSON.stringify(a.body)).toBe(503);
      // The answers came at the timeout; the requests land a little later.
      await sleep(ABOVE_MS - TIMEOUT_MS + 1_000);
      proxy.setLatency(0);
      const ghosts = (await c.storedSeats(eventId, [SECTION.id])).filter((s) => s.status === "held");
      expect(ghosts.length, "seats held by holds that answered 503").toBeGreaterThan(0);
      for (const s of ghosts) expect(s.holderId, `${s.id} held by a timed-out hold`).toBe(asked.get(s.id));
      // Once expired, another fan takes each seat, and the fans who asked may hold again.
      const lastExpiry = Math.max(...ghosts.map((s) => s.holdExpiresAt ?? 0));
      await sleep(Math.max(0, lastExpiry - Date.now() + 100));
      const [late] = await admitFans(c.traffic, eventId, ["latecomer"]);
      for (const s of ghosts) {
        const res = await c.traffic.request(`/v1/events/${eventId}/holds`, {
          method: "POST",
          token: late!.accessToken,
          json: { seats: [s.id] },
          kind: "hold",
        });
        expect(res.status, `${s.id} after the timed-out hold expired: ${JSON.stringify(res.body)}`).toBe(201);
        const released = await c.traffic.request(
          `/v1/events/${eventId}/holds/${(res.body as { holdId: string }).holdId}`,
          {
            method: "DELETE",
            token: late!.accessToken,
            kind: "release",
          },
        );
        expect(released.status).toBe(204);
      }
      const again = await Promise.all(
        fans.map((fan, i) =>
          c.traffic.request(`/v1/events/${eventId}/holds`, {
            method: "POST",
            token: fan.accessToken,
            json: { seats: [seats[2 * FANS + i]!, seats[3 * FANS + i]!] },
            kind: "hold",
          }),
        ),
      );
      for (const a of again) expect(a.status, JSON.stringify(a.body)).toBe(201);
      figures.push(
        `hold writes slowed past the timeout: ${answers.length} holds answered 503 (${latencyOf("slow-hold-write", "hold")}), ` +
          `then ${ghosts.length} of ${asked.size} seats were held under hold ids nobody was told; each expired after ` +
          `${HOLD_SECONDS} s, was taken by another fan, and the fans held again`,
      );
    }

    // 4: only the confirmation above the timeout, after the charge: 202 pending, then confirmed.
    {
      const { eventId, fans } = await newEvent(c, "cf", 120);
      events.push(eventId);
      proxy.setLatency((r) => (isConfirmTransaction(r) ? ABOVE_MS : 0));
      c.traffic.setPhase("slow-confirm");
      const ledger = await startSale(c.traffic, {
        eventId,
        fans,
        seats: seatIds(SECTION),
        durationMs: SALE_MS,
        thinkMs: [0, 50],
      }).done;
      c.traffic.setPhase("other");
      proxy.setLatency(0);
      expect(ledger.purchases.length).toBeGreaterThan(0);
      for (const p of ledger.purchases) expect(p.end, `${p.purchaseId}: ${JSON.stringify(p.answers)}`).toBe("pending");
      const settleMs = await c.waitUntilSettled(eventId);
      const charges = await c.charges();
      for (const p of ledger.purchases) {
        expect((await c.inventory.purchases.get({ eventId, purchaseId: p.purchaseId }))?.status, p.purchaseId).toBe(
          "confirmed",
        );
        expect(charges.find((ch) => ch.idempotencyKey === p.purchaseId)?.refunded, p.purchaseId).toBe(false);
      }
      figures.push(
        `confirmation slowed past the timeout: ${ledger.purchases.length} purchases answered 202 (${latencyOf("slow-confirm", "purchase")}), all confirmed, none refunded, settled ${(settleMs / 1000).toFixed(1)} s after`,
      );
    }

    const reports = [];
    for (const eventId of events) {
      await c.waitUntilSettled(eventId);
      reports.push(await c.audit(eventId));
    }
    const audit = reports.map(auditFigures);
    const counts = c.traffic.counts;
    recordScenario({
      scenario: "latency",
      faults: `DynamoDB latency ${BELOW_MS} ms and ${ABOVE_MS} ms (timeout ${TIMEOUT_MS} ms), confirmations slowed past it`,
      requests: counts.total,
      oversells: audit.reduce((n, f) => n + f.oversells, 0),
      lostPurchases: audit.reduce((n, f) => n + f.lostPurchases, 0),
      serverErrors: counts.serverErrors,
      unavailable: counts.unavailable,
      notes: figures.join("; "),
    });
    console.log(`latency figures:\n  ${figures.join("\n  ")}`);
    expect(c.traffic.violations).toEqual([]);
    for (const r of reports) expect(r.checks.filter((check) => check.status === "fail")).toEqual([]);
    for (const f of audit) {
      expect(f.oversells).toBe(0);
      expect(f.lostPurchases).toBe(0);
    }
    expect(counts.serverErrors).toBe(0);
  }, 240_000);

  it("a confirmation arriving after the reconciler decided to refund is cancelled, not committed", async () => {
    const c = cluster!;
    const proxy = c.proxy!;
    onTestFailed(() => console.log(c.recentLogs()));
    const HOLD_SECONDS = 3;
    const eventId = uniqueId("lc");
    await c.putEvent(eventId, eventInput({ ...layout, holdSeconds: HOLD_SECONDS }));
    const [fan] = await admitFans(c.traffic, eventId, ["racer"]);
    const before = { ...c.traffic.counts };

    // Every confirmation of the purchase, and its pending|failed -> refunded write, stalled.
    let purchaseId = "";
    const markRefunded = (body: string) => body.includes(purchaseId) && body.includes('":to":{"S":"refunded"}');
    proxy.stall(
      (r) =>
        purchaseId !== "" &&
        ((isConfirmTransaction(r) && purchaseOfConfirm(r) === purchaseId) ||
          (r.target === "UpdateItem" && markRefunded(r.body))),
    );
    try {
      const held = await c.traffic.request(`/v1/events/${eventId}/holds`, {
        method: "POST",
        token: fan!.accessToken,
        json: { seats: ["A-1-1"] },
        kind: "hold",
      });
      expect(held.status).toBe(201);
      const holdId = (held.body as { holdId: string }).holdId;
      const { purchaseIdOf } = await import("../../src/purchases/saga.js");
      purchaseId = purchaseIdOf(eventId, fan!.fanId, "race");
      const paid = await c.traffic.request(`/v1/events/${eventId}/holds/${holdId}/purchase`, {
        method: "POST",
        token: fan!.accessToken,
        headers: { "idempotency-key": "race" },
        json: { paymentToken: "tok_ok" },
        kind: "purchase",
      });
      // Charged; the confirmation timed out on its way: pending, for the reconciler.
      expect(paid.status, JSON.stringify(paid.body)).toBe(202);

      // The hold expires; the reconciler finds it lost, refunds the charge, and is stalled
      // writing `refunded`. The confirmations sent before the expiry are still on their way.
      const deadline = Date.now() + 60_000;
      while (!proxy.stalled().some((r) => r.target === "UpdateItem")) {
        if (Date.now() > deadline) throw new Error(`no refund came: ${JSON.stringify(proxy.counts())}`);
        await sleep(50);
      }
      const charge = (await c.charges()).find((ch) => ch.idempotencyKey === purchaseId);
      expect(charge?.refunded).toBe(true);
      const lateConfirms = proxy.releaseStalled(isConfirmTransaction);
      expect(lateConfirms).toBeGreaterThan(0);
      // They land: cancelled by their own condition (the purchase is no longer pending).
      await sleep(1_000);
      const between = await c.inventory.purchases.get({ eventId, purchaseId });
      expect(between?.status).toBe("failed");
      expect(between?.failureReason).toBe(REFUND_DUE);
      const [seat] = await c.storedSeats(eventId, ["A"]);
      expect(seat?.status).not.toBe("sold");
    } finally {
      proxy.stall(null);
      proxy.releaseStalled();
    }
    await c.waitUntilSettled(eventId);
    // The reconciler finishes the refund: refunded, and the seat was never sold.
    const deadline = Date.now() + 60_000;
    let purchase = await c.inventory.purchases.get({ eventId, purchaseId });
    while (purchase?.status !== "refunded" && Date.now() < deadline) {
      await sleep(250);
      purchase = await c.inventory.purchases.get({ eventId, purchaseId });
    }
    expect(purchase?.status).toBe("refunded");
    expect((await c.storedSeats(eventId, ["A"])).filter((s) => s.status === "sold")).toEqual([]);
    const report = await c.audit(eventId);
    const figures = auditFigures(report);
    recordScenario({
      scenario: "late-confirm",
      faults: "a confirmation stalled past the hold's expiry, released after the reconciler refunded",
      requests: c.traffic.counts.total - before.total,
      ...figures,
      serverErrors: c.traffic.counts.serverErrors - before.serverErrors,
      notes: "the late confirmation was cancelled (purchase already out of pending); purchase refunded, seat unsold",
    });
    expect(report.checks.filter((check) => check.status === "fail")).toEqual([]);
    expect(figures.oversells).toBe(0);
    expect(figures.lostPurchases).toBe(0);
    expect(c.traffic.counts.serverErrors - before.serverErrors).toBe(0);
  }, 120_000);
});
