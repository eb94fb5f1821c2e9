import { randomUUID } from "node:crypto";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { type LateCharge, withTimeout } from "../../src/payments/provider.js";
import {
  createSimulatedProvider,
  type SimulatedProviderOptions,
  simulatedPaymentKeys,
} from "../../src/payments/simulated.js";
import type { WebhookEvent } from "../../src/payments/webhook.js";

// The simulated provider against the real Redis of the test run. Every test works in its own
// namespace (its own hash tag), so tests never see each other's charges and nothing is flushed.

function ns(): string {
  return `t${randomUUID().slice(0, 12)}`;
}

/** Collects webhook events; `next` resolves with the first event that matches, now or later. */
function eventSink() {
  const events: WebhookEvent[] = [];
  const waiters: { match: (e: WebhookEvent) => boolean; resolve: (e: WebhookEvent) => void }[] = [];
  return {
    events,
    onEvent(event: WebhookEvent) {
      events.push(event);
      for (const w of waiters.filter((w) => w.match(event))) {
        waiters.splice(waiters.indexOf(w), 1);
        w.resolve(event);
      }
    },
    next(match: (e: WebhookEvent) => boolean): Promise<WebhookEvent> {
      const found = events.find(match);
      return found ? Promise.resolve(found) : new Promise((resolve) => waiters.push({ match, resolve }));
    },
  };
}

/** Webhooks are delivered on a setImmediate turn; after this one, any due delivery has run. */
const deliveryTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

describe("simulated payment provider (real Redis)", () => {
  const url = inject("redisUrl");
  const connections: Redis[] = [];
  let redis: Redis;

  function connect(): Redis {
    const conn = new Redis(url);
    connections.push(conn);
    return conn;
  }

  function provider(options: Omit<SimulatedProviderOptions, "redis"> & { redis?: Redis }) {
    return createSimulatedProvider({ redis: options.redis ?? redis, ...options });
  }

  beforeAll(() => {
    redis = connect();
  });
  afterAll(() => {
    for (const conn of connections) conn.disconnect();
  });

  it("tok_error_after_charge: the money is taken, every call answers a provider error, lookup finds the charge", async () => {
    const sink = eventSink();
    const p = provider({ namespace: ns(), onEvent: (e) => sink.onEvent(e) });
    const first = await p.charge("k-5xx", 1_500, "tok_error_after_charge");
    expect(first).toMatchObject({ kind: "error", code: "provider_error" });
    const again = await p.charge("k-5xx", 1_500, "tok_error_after_charge");
    expect(again).toMatchObject({ kind: "error", code: "provider_error" });
    const found = await p.lookup("k-5xx");
    expect(found).toMatchObject({ kind: "charged", amount: 1_500, refunded: false });
    expect(await p.totals()).toMatchObject({ captured: 1_500, charges: 1 });
    // The provider still tells of the charge, as one that captured before failing to answer would.
    const event = await sink.next((e) => e.type === "charge.succeeded");
    expect(event.data).toMatchObject({ idempotencyKey: "k-5xx", amount: 1_500 });
  });

  it("tok_ok charges once; a repeat replays the same charge; lookup, records and totals agree", async () => {
    const namespace = ns();
    const sink = eventSink();
    const pay = provider({ namespace, onEvent: sink.onEvent });

    const first = await pay.charge("purchase-1", 15_000, "tok_ok");
    expect(first).toMatchObject({ kind: "charged", amount: 15_000 });
    if (first.kind !== "charged") throw new Error("unreachable");
    expect(first.chargeId).toMatch(/^ch_/);
    expect(await pay.charge("purchase-1", 15_000, "tok_ok")).toEqual(first);

    expect(await pay.lookup("purchase-1")).toEqual({
      kind: "charged",
      chargeId: first.chargeId,
      amount: 15_000,
      refunded: false,
    });
    expect(await pay.lookup("never-used")).toEqual({ kind: "not_found" });
    expect(await pay.getCharge(first.chargeId)).toMatchObject({
      chargeId: first.chargeId,
      idempotencyKey: "purchase-1",
      amount: 15_000,
      refunded: false,
    });
    expect(await pay.getCharge("ch_missing")).toBeNull();
    expect((await pay.listCharges()).map((c) => c.chargeId)).toEqual([first.chargeId]);
    expect(await pay.totals()).toEqual({
      captured: 15_000,
      refunded: 0,
      charges: 1,
      refunds: 0,
      declines: 0,
      errors: 0,
    });

    const event = await sink.next((e) => e.type === "charge.succeeded");
    expect(event.data).toEqual({ idempotencyKey: "purchase-1", chargeId: first.chargeId, amount: 15_000 });
    await deliveryTurn();
    expect(sink.events).toHaveLength(1);
  });

  it("50 concurrent charges with one key over 5 connections make one charge with one chargeId", async () => {
    const namespace = ns();
    const providers = Array.from({ length: 5 }, () => provider({ namespace, redis: connect() }));
    await Promise.all(providers.map((p) => p.totals())); // connected before the race starts

    const outcomes = await Promise.all(
      Array.from({ length: 50 }, (_, i) => providers[i % 5]!.charge("same-key", 4_200, "tok_ok")),
    );
    const ids = new Set(outcomes.map((o) => (o.kind === "charged" ? o.chargeId : `not charged: ${o.kind}`)));
    expect(ids.size).toBe(1);
    expect([...ids][0]).toMatch(/^ch_/);

    const pay = providers[0]!;
    expect(await pay.listCharges()).toHaveLength(1);
    expect(await pay.totals()).toMatchObject({ captured: 4_200, charges: 1 });
  });

  it("racing one key with different amounts: one amount wins, every other call is a mismatch", async () => {
    const namespace = ns();
    const providers = Array.from({ length: 4 }, () => provider({ namespace, redis: connect() }));
    const outcomes = await Promise.all(
      Array.from({ length: 40 }, (_, i) => providers[i % 4]!.charge("contested", 1_000 + (i % 2), "tok_ok")),
    );
    const charged = outcomes.filter((o) => o.kind === "charged");
    const mismatched = outcomes.filter((o) => o.kind === "error" && o.code === "idempotency_mismatch");
    expect(charged.length + mismatched.length).toBe(40);
    expect(new Set(charged.map((o) => o.chargeId)).size).toBe(1);
    expect(new Set(charged.map((o) => o.amount)).size).toBe(1);
    expect(charged.length).toBe(20);
    expect(await providers[0]!.totals()).toMatchObject({ charges: 1, captured: charged[0]!.amount });
  });

  it("the same key with another amount or token is an idempotency mismatch and charges nothing", async () => {
    const namespace = ns();
    const pay = provider({ namespace });
    const first = await pay.charge("k", 2_500, "tok_ok");
    expect(await pay.charge("k", 2_600, "tok_ok")).toMatchObject({ kind: "error", code: "idempotency_mismatch" });
    expect(await pay.charge("k", 2_500, "tok_decline")).toMatchObject({ kind: "error", code: "idempotency_mismatch" });
    expect(await pay.charge("k", 2_500, "tok_ok")).toEqual(first);
    expect(await pay.totals()).toMatchObject({ captured: 2_500, charges: 1 });
  });

  it("tok_decline declines, finally for its key; lookup says declined; a charge.failed webhook goes out", async () => {
    const namespace = ns();
    const sink = eventSink();
    const pay = provider({ namespace, onEvent: sink.onEvent });
    expect(await pay.charge("d1", 900, "tok_decline")).toEqual({ kind: "declined", reason: "card_declined" });
    expect(await pay.charge("d1", 900, "tok_decline")).toEqual({ kind: "declined", reason: "card_declined" });
    expect(await pay.lookup("d1")).toEqual({ kind: "declined", reason: "card_declined" });
    expect(await pay.listCharges()).toEqual([]);
    expect(await pay.totals()).toMatchObject({ captured: 0, charges: 0, declines: 1 });
    const event = await sink.next((e) => e.type === "charge.failed");
    expect(event.data).toEqual({ idempotencyKey: "d1", amount: 900, reason: "card_declined" });
  });

  it("an unknown token declines with reason unknown_token", async () => {
    const pay = provider({ namespace: ns() });
    expect(await pay.charge("u1", 100, "tok_who_knows")).toEqual({ kind: "declined", reason: "unknown_token" });
    expect(await pay.lookup("u1")).toEqual({ kind: "declined", reason: "unknown_token" });
  });

  it("tok_error fails with a provider error, charges and records nothing, so the key stays usable", async () => {
    const namespace = ns();
    const sink = eventSink();
    const pay = provider({ namespace, onEvent: sink.onEvent });
    expect(await pay.charge("e1", 700, "tok_error")).toMatchObject({ kind: "error", code: "provider_error" });
    expect(await pay.lookup("e1")).toEqual({ kind: "not_found" });
    expect(await pay.listCharges()).toEqual([]);
    expect(await pay.totals()).toMatchObject({ captured: 0, charges: 0, errors: 1 });
    await deliveryTurn();
    expect(sink.events).toEqual([]);
    expect(await pay.charge("e1", 700, "tok_ok")).toMatchObject({ kind: "charged", amount: 700 });
  });

  it("rejects a bad amount or key before anything is recorded", async () => {
    const pay = provider({ namespace: ns() });
    for (const amount of [0, -5, 1.5, Number.NaN]) {
      expect(await pay.charge("bad", amount, "tok_ok")).toMatchObject({ kind: "error", code: "invalid_request" });
    }
    expect(await pay.charge("", 100, "tok_ok")).toMatchObject({ kind: "error", code: "invalid_request" });
    expect(await pay.charge("x".repeat(256), 100, "tok_ok")).toMatchObject({ kind: "error", code: "invalid_request" });
    expect(await pay.lookup("bad")).toEqual({ kind: "not_found" });
  });

  it("tok_timeout: the gateway sees unknown, lookup finds the charge, the late answer and webhook agree", async () => {
    const namespace = ns();
    const sink = eventSink();
    let lateAnswer!: (late: LateCharge) => void;
    const late = new Promise<LateCharge>((resolve) => {
      lateAnswer = resolve;
    });
    // The gateway gives up at 1 s, the provider answers at 3 s: the lookup (one Redis round trip)
    // has the same 1 s budget, ample on a loaded machine.
    const raw = provider({ namespace, timeoutDelayMs: 3_000, onEvent: sink.onEvent });
    const gateway = withTimeout(raw, 1_000, { onLateCharge: (_key, outcome) => lateAnswer(outcome) });

    expect(await gateway.charge("slow-1", 3_000, "tok_timeout")).toEqual({ kind: "unknown" });
    // Told nothing, the gateway asks by key: the charge is there.
    const found = await gateway.lookup("slow-1");
    expect(found).toMatchObject({ kind: "charged", amount: 3_000, refunded: false });
    if (found.kind !== "charged") throw new Error("unreachable");

    // The provider's own answer arrives after the delay, and the webhook with it: the same charge.
    expect(await late).toEqual({ kind: "charged", chargeId: found.chargeId, amount: 3_000 });
    const event = await sink.next((e) => e.type === "charge.succeeded");
    expect(event.data).toEqual({ idempotencyKey: "slow-1", chargeId: found.chargeId, amount: 3_000 });
    expect(await raw.totals()).toMatchObject({ captured: 3_000, charges: 1 });
  });

  it("tok_timeout records the charge before it answers", async () => {
    const namespace = ns();
    const sink = eventSink();
    // A delay no test waits for: the answer stays pending (its timer is unreferenced).
    const pay = provider({ namespace, timeoutDelayMs: 600_000, onEvent: sink.onEvent });
    let answered = false;
    void pay.charge("slow-2", 1_200, "tok_timeout").then(() => {
      answered = true;
    });
    let found = await pay.lookup("slow-2");
    for (let i = 0; found.kind === "not_found" && i < 1_000; i++) {
      await deliveryTurn();
      found = await pay.lookup("slow-2");
    }
    expect(found).toMatchObject({ kind: "charged", amount: 1_200 });
    expect(answered).toBe(false);
    expect(sink.events).toEqual([]);
    // A retry under the same key is just as slow, and finds the same charge: nothing more is taken.
    expect(await withTimeout(pay, 50).charge("slow-2", 1_200, "tok_timeout")).toEqual({ kind: "unknown" });
    expect(await pay.totals()).toMatchObject({ captured: 1_200, charges: 1 });
  });

  it("refund is idempotent per charge, under concurrency and with different keys", async () => {
    const namespace = ns();
    const sink = eventSink();
    const pay = provider({ namespace, onEvent: sink.onEvent });
    const charged = await pay.charge("r1", 8_000, "tok_ok");
    if (charged.kind !== "charged") throw new Error(`expected a charge, got ${charged.kind}`);

    const others = [connect(), connect()].map((conn) => provider({ namespace, redis: conn }));
    const refunds = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        (i % 3 === 0 ? pay : others[i % 2]!).refund(charged.chargeId, `refund-${i}`),
      ),
    );
    const refundIds = new Set(refunds.map((r) => (r.kind === "refunded" ? r.refundId : "error")));
    expect(refundIds.size).toBe(1);
    const [refundId] = refundIds;
    expect(refundId).toMatch(/^re_/);
    expect(await pay.refund(charged.chargeId)).toEqual({ kind: "refunded", refundId });

    expect(await pay.lookup("r1")).toEqual({
      kind: "charged",
      chargeId: charged.chargeId,
      amount: 8_000,
      refunded: true,
    });
    expect(await pay.getCharge(charged.chargeId)).toMatchObject({ refunded: true, refundId });
    expect(await pay.totals()).toMatchObject({ captured: 8_000, refunded: 8_000, charges: 1, refunds: 1 });

    const event = await sink.next((e) => e.type === "charge.refunded");
    expect(event.data).toEqual({ idempotencyKey: "r1", chargeId: charged.chargeId, amount: 8_000 });
    await deliveryTurn();
    expect(sink.events.filter((e) => e.type === "charge.refunded")).toHaveLength(1);

    expect(await pay.refund("ch_nope")).toMatchObject({ kind: "error" });
    expect(await pay.totals()).toMatchObject({ refunded: 8_000, refunds: 1 });
  });

  it("state survives a restart: a new provider over a new connection sees and replays it", async () => {
    const namespace = ns();
    const before = connect();
    const first = createSimulatedProvider({ redis: before, namespace });
    const charged = await first.charge("keep-1", 5_000, "tok_ok");
    await first.charge("keep-2", 5_000, "tok_decline");
    if (charged.kind !== "charged") throw new Error(`expected a charge, got ${charged.kind}`);
    await before.quit();

    const after = connect();
    const second = createSimulatedProvider({ redis: after, namespace });
    expect(await second.lookup("keep-1")).toEqual({
      kind: "charged",
      chargeId: charged.chargeId,
      amount: 5_000,
      refunded: false,
    });
    expect(await second.lookup("keep-2")).toEqual({ kind: "declined", reason: "card_declined" });
    expect(await second.charge("keep-1", 5_000, "tok_ok")).toEqual(charged);
    expect(await second.refund(charged.chargeId)).toMatchObject({ kind: "refunded" });
    expect(await second.totals()).toEqual({
      captured: 5_000,
      refunded: 5_000,
      charges: 1,
      refunds: 1,
      declines: 1,
      errors: 0,
    });
  });

  it("keeps every key under one hash tag, pay:{<namespace>}:", async () => {
    const namespace = ns();
    const pay = provider({ namespace });
    const charged = await pay.charge("tagged", 100, "tok_ok");
    await pay.charge("tagged-decline", 100, "tok_decline");
    if (charged.kind === "charged") await pay.refund(charged.chargeId);

    const found: string[] = [];
    let cursor = "0";
    do {
      const [next, batch] = await redis.scan(cursor, "MATCH", `pay:{${namespace}}*`, "COUNT", 1000);
      cursor = next;
      found.push(...batch);
    } while (cursor !== "0");
    const k = simulatedPaymentKeys(namespace);
    expect(found.sort()).toEqual(
      [
        k.idem("tagged"),
        k.idem("tagged-decline"),
        k.charges,
        k.totals,
        ...(charged.kind === "charged" ? [k.charge(charged.chargeId)] : []),
      ].sort(),
    );
  });

  it("drops a failing webhook receiver without failing the charge", async () => {
    let delivered = 0;
    let bothDelivered!: () => void;
    const done = new Promise<void>((resolve) => {
      bothDelivered = resolve;
    });
    const pay = provider({
      namespace: ns(),
      onEvent: (event) => {
        delivered++;
        if (delivered === 2) bothDelivered();
        if (event.type === "charge.succeeded") throw new Error("receiver down");
        return Promise.reject(new Error("receiver timed out"));
      },
    });
    expect(await pay.charge("w1", 100, "tok_ok")).toMatchObject({ kind: "charged" });
    expect(await pay.charge("w2", 100, "tok_decline")).toMatchObject({ kind: "declined" });
    await done;
  });
});
