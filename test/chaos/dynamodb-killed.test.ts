/**
 * The DynamoDB endpoint killed mid-sale: the local DynamoDB child gets SIGKILL while fans hold and
 * pay, stays down for a few seconds, and comes back on the same port with its LevelDB data.
 *
 * While it is down, holds and purchases answer 503 with Retry-After (or 409 when the Redis
 * hot-seat shield already knows the seats are taken) and change nothing. After it returns, the
 * sale goes on, and what DynamoDB holds is compared with what the fans were told:
 *  - every hold a fan got a 201 for exists, for that fan and those seats;
 *  - every held seat belongs to a hold some fan was granted, except where the answer was
 *    ambiguous: a hold request in flight at the moment of the kill (or timed out against the
 *    just-restarted store) may have written its seat and then failed before it could answer. Such a seat is held by a hold
 *    id nobody knows, for the hold's time, then it is free again (a held seat past its expiry is
 *    available to the next hold, and the sweeper resets it). They are counted in the notes;
 *  - a fan arriving after the last restart holds a free seat;
 *  - every sold seat belongs to a purchase a fan started;
 *  - every purchase a fan was told is confirmed is confirmed, every declined one failed.
 * Then the reconciler settles every pending purchase and the audit passes (no oversell, no charge
 * without a ticket or refund, nothing pending).
 */
import { type Cluster, sleep, startCluster } from "./support/cluster.js";
import { eventInput, uniqueId } from "../gateway/harness.js";
import { afterAll, describe, expect, it } from "vitest";
import { admitFans, type HoldAttempt, seatIds, startSale } from "./support/fans.js";
import { auditFigures, recordScenario } from "./support/report.js";
import { scaled } from "./support/scale.js";

const FANS = scaled(30, 120);
const SECTION = { id: "A", tier: "Floor", price: 10_000, rows: scaled(8, 24), seatsPerRow: 10 };
const SALE_MS = scaled(12_000, 45_000);
const OUTAGE_MS = scaled(3_000, 6_000);
const KILLS = scaled(1, 3);

let cluster: Cluster | undefined;
afterAll(async () => {
  await cluster?.close();
});

interface Outage {
  killStart: number;
  killDone: number;
  restartStart: number;
  restartDone: number;
}

describe("chaos: the DynamoDB endpoint killed mid-sale", () => {
  it("answers 503 and changes nothing while it is down; afterwards every hold and purchase is consistent", async () => {
    cluster = await startCluster({ paymentTimeoutMs: 1_000, dynamoTimeoutMs: 2_000, dynamoMaxAttempts: 2 });
    const c = cluster;
    const eventId = uniqueId("dk");
    await c.putEvent(
      eventId,
      eventInput({ holdSeconds: 300, maxSeatsPerFan: 4, sections: [SECTION], generalAdmission: [] }),
    );
    const fans = await admitFans(
      c.traffic,
      eventId,
      Array.from({ length: FANS }, (_, i) => `fan${i}`),
    );

    const sale = startSale(c.traffic, {
      eventId,
      fans,
      seats: seatIds(SECTION),
      durationMs: SALE_MS,
      graceMs: 40_000,
      arrivalMs: [0, SALE_MS * 0.7],
      thinkMs: [300, 1_000],
      payDelayMs: [200, 800],
      // A fifth decline once (then pay), a fifth pay with tok_timeout (pending, for the reconciler).
      paymentToken: (fan, attempt) => {
        const n = Number(fan.fanId.slice(3));
        if (n % 5 === 0 && attempt === 0) return "tok_decline";
        if (n % 5 === 1) return "tok_timeout";
        return "tok_ok";
      },
    });

    // Kill it once the sale is under way (some purchases answered), then every few seconds.
    const outages: Outage[] = [];
    const deadline = Date.now() + SALE_MS - OUTAGE_MS - 1_000;
    for (let k = 0; k < KILLS && Date.now() < deadline; k++) {
      const answered = sale.ledger.purchases.length;
      const until = Date.now() + 5_000;
      while (sale.ledger.purchases.length < answered + Math.max(2, FANS / 8) && Date.now() < until) await sleep(100);
      const killStart = Date.now();
      await c.killDynamo();
      const killDone = Date.now();
      await sleep(OUTAGE_MS);
      const restartStart = Date.now();
      await c.restartDynamo();
      outages.push({ killStart, killDone, restartStart, restartDone: Date.now() });
      await sleep(scaled(2_000, 5_000));
    }
    const ledger = await sale.done;
    expect(outages.length).toBeGreaterThan(0);

    // While it was down (requests sent after the kill and answered before the restart began):
    // holds and purchases never succeeded, and a 503 each time (the shield may say 409).
    const inOutage = (a: { startedAt: number; endedAt: number }) =>
      outages.some((o) => a.startedAt > o.killDone && a.endedAt < o.restartStart);
    const outageHolds = ledger.holds.filter(inOutage);
    const outagePurchases = ledger.purchases.flatMap((p) => p.answers).filter(inOutage);
    expect(outageHolds.length + outagePurchases.length).toBeGreaterThan(0);
    for (const h of outageHolds) expect([409, 503], `hold during the outage: ${JSON.stringify(h)}`).toContain(h.status);
    for (const p of outagePurchases) expect(p.status, `purchase during the outage: ${JSON.stringify(p)}`).toBe(503);
    const unavailableInOutage =
      outageHolds.filter((h) => h.status === 503).length + outagePurchases.filter((p) => p.status === 503).length;
    expect(unavailableInOutage).toBeGreaterThan(0);
    // The sale went on after the (first) restart (reported: how many depends on the timing), and
    // a fan arriving now holds a free seat.
    const firstRestart = outages[0]!.restartDone;
    const afterRestart = ledger.holds.filter((h) => h.status === 201 && h.startedAt > firstRestart).length;
    const [latecomer] = await admitFans(c.traffic, eventId, ["latecomer"]);
    const free = (await c.storedSeats(eventId, [SECTION.id])).find((s) => s.status === "available");
    expect(free, "a seat left to hold after the sale").toBeDefined();
    const late = await c.traffic.request(`/v1/events/${eventId}/holds`, {
      method: "POST",
      token: latecomer!.accessToken,
      json: { seats: [free!.id] },
      kind: "hold",
    });
    expect(late.status, JSON.stringify(late.body)).toBe(201);
    const lateHold = late.body as { holdId: string };
    expect((await c.inventory.holds.get({ eventId, holdId: lateHold.holdId, fanId: "latecomer" }))?.fanId).toBe(
      "latecomer",
    );

    // Every granted hold exists, for that fan and those seats.
    const granted = new Map<string, HoldAttempt>();
    for (const h of ledger.holds) if (h.status === 201) granted.set(h.holdId!, h);
    for (const h of granted.values()) {
      const stored = await c.inventory.holds.get({ eventId, holdId: h.holdId!, fanId: h.fanId });
      expect(stored, `hold ${h.holdId}`).not.toBeNull();
      expect(stored!.fanId).toBe(h.fanId);
      expect([...stored!.seats].sort()).toEqual([...h.seats].sort());
    }

    // Every held seat is a granted hold's, or an ambiguous answer's: a hold answered 503 or not at
    // all may have been written (in flight at a kill, or timed out against the just-restarted store).
    const ambiguous = ledger.holds.filter((h) => h.status === 503 || h.status === 0);
    const purchaseIds = new Set(ledger.purchases.map((p) => p.purchaseId));
    const unexplained: string[] = [];
    let heldByUnknownHold = 0;
    const seats = await c.storedSeats(eventId, [SECTION.id]);
    for (const seat of seats) {
      if (seat.status === "held") {
        const hold = granted.get(seat.holdId ?? "");
        if (seat.holdId === lateHold.holdId) continue;
        if (hold) {
          if (hold.fanId !== seat.holderId || !hold.seats.includes(seat.id))
            unexplained.push(`${seat.id}: wrong holder`);
        } else if (ambiguous.some((h) => h.fanId === seat.holderId && h.seats.includes(seat.id))) {
          heldByUnknownHold++;
        } else {
          unexplained.push(`${seat.id}: held by ${seat.holderId} under ${seat.holdId}, never granted`);
        }
      } else if (seat.status === "sold" && !purchaseIds.has(seat.purchaseId ?? "")) {
        unexplained.push(`${seat.id}: sold to ${seat.purchaseId}, a purchase no fan started`);
      }
    }
    expect(unexplained).toEqual([]);

    // What fans were told about their purchases is what DynamoDB says.
    for (const p of ledger.purchases) {
      if (p.end !== "confirmed" && p.end !== "declined") continue;
      const stored = await c.inventory.purchases.get({ eventId, purchaseId: p.purchaseId });
      expect(stored?.status, `${p.purchaseId} (${p.end})`).toBe(p.end === "confirmed" ? "confirmed" : "failed");
    }

    const settleMs = await c.waitUntilSettled(eventId);
    const report = await c.audit(eventId);
    const figures = auditFigures(report);
    const counts = c.traffic.counts;
    const downFor = outages.map((o) => ((o.restartDone - o.killStart) / 1000).toFixed(1));
    const byEnd = (end: string) => ledger.purchases.filter((p) => p.end === end).length;
    recordScenario({
      scenario: "dynamodb-killed",
      faults: `local DynamoDB SIGKILLed mid-sale and restarted x${outages.length}`,
      requests: counts.total,
      ...figures,
      serverErrors: counts.serverErrors,
      unavailable: counts.unavailable,
      notes:
        `${FANS} fans, ${seats.length} seats; down ${downFor.join(" s, ")} s; ` +
        `${unavailableInOutage} holds/purchases answered 503 while down; ${afterRestart} holds granted after the restart; ` +
        `${heldByUnknownHold} seat(s) held by an ambiguous hold (answered 503: in flight at a kill, or timed out), left to expire; ` +
        `purchases: ${byEnd("confirmed")} confirmed, ${byEnd("pending")} pending, ${byEnd("declined")} declined, ` +
        `${byEnd("unavailable")} gave up on 503; settled ${(settleMs / 1000).toFixed(1)} s after the sale; ` +
        `audit: ${report.totals.purchases.confirmed.count} confirmed, ${report.totals.purchases.refunded.count} refunded`,
    });
    expect(c.traffic.violations).toEqual([]);
    expect(report.checks.filter((check) => check.status === "fail")).toEqual([]);
    expect(figures.oversells).toBe(0);
    expect(figures.lostPurchases).toBe(0);
    expect(counts.serverErrors).toBe(0);
  }, 180_000);
});
