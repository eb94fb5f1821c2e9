/**
 * Model test of the purchase saga against a payment provider that misbehaves the way real ones do.
 * fast-check draws, per run: how each charge call goes (charged; declined; a 5xx after capture; an
 * error; unreachable; a timeout that charged, that will charge later, or that did nothing), lookup
 * and refund blips, and a sequence of batches. A batch is one to three operations run at once
 * (purchases and their replays under two keys per fan, webhook deliveries, duplicated and out of
 * order, the per-event backstop, per-purchase reconcile jobs, a release, the clock moving past the
 * charge window or the holds' expiry, a late charge landing).
 *
 * After every run the provider recovers, the late charges land, every webhook is delivered and the
 * reconcilers run until nothing is pending; then the audit's invariants must hold: every captured
 * charge belongs to a confirmed purchase of its amount, every refund to a refunded or failed one,
 * every confirmed purchase is charged, no purchase is pending, no seat is sold twice.
 *
 * The store is the real local DynamoDB; the provider is this file's (its ledger in memory: the
 * provider is the outside world here, and its faults are what is drawn).
 */
import { randomUUID } from "node:crypto";
import fc from "fast-check";
import pino from "pino";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { auditEvent } from "../../src/audit/audit.js";
import { ensureTable } from "../../src/dynamodb/table.js";
import { createInventory, type EventInput, type Inventory } from "../../src/inventory/index.js";
import { createMetrics } from "../../src/metrics.js";
import type { ChargeOutcome, LookupOutcome, PaymentProvider, RefundOutcome } from "../../src/payments/provider.js";
import type { ChargeRecord } from "../../src/payments/simulated.js";
import type { WebhookEvent } from "../../src/payments/webhook.js";
import { createPurchaseSaga, type PurchaseSaga, purchaseIdOf } from "../../src/purchases/saga.js";
import { reconcileJob } from "../../src/workers/workers.js";
import { manualClock } from "../inventory/fixtures.js";
import { createTestDynamoClient } from "../support/dynamo.js";

const PAYMENT_TIMEOUT_MS = 1_000;
const HOLD_SECONDS = 60;
const FANS = ["fan-0", "fan-1", "fan-2"];
const SEATS = ["A-1-1", "A-1-2", "A-1-3"];
const PRICE = 2_500;

type ChargeFault =
  | "ok"
  | "decline"
  | "error_after_charge"
  | "error"
  | "unreachable"
  | "timeout_charged"
  | "timeout_late"
  | "timeout_none";
type CallFault = "ok" | "blip";

interface Script {
  charges: ChargeFault[];
  lookups: CallFault[];
  refunds: CallFault[];
  /** Microtask turns each provider answer waits, so answers interleave with the store's. */
  turns: number[];
}

type Decision = { kind: "charged"; chargeId: string; amount: number; refunded: boolean } | { kind: "declined" };

/** A provider with one decision per key (as real ones), answering with the drawn faults. */
class ScriptedProvider implements PaymentProvider {
  readonly decisions = new Map<string, Decision>();
  readonly records: ChargeRecord[] = [];
  /** Charges a timed-out call will still make, when they land. */
  readonly late: (() => void)[] = [];
  readonly webhooks: WebhookEvent[] = [];
  healthy = false;
  private calls = { charge: 0, lookup: 0, refund: 0, turn: 0 };

  constructor(private readonly script: Script) {}

  private pick<T>(list: T[], counter: "charge" | "lookup" | "refund"): T {
    const i = this.calls[counter]++;
    return list[i % list.length]!;
  }

  private async pause(): Promise<void> {
    const turns = this.script.turns[this.calls.turn++ % this.script.turns.length]!;
    for (let i = 0; i < turns; i++) await new Promise<void>((r) => setImmediate(r));
  }

  private capture(key: string, amount: number): Decision {
    const prior = this.decisions.get(key);
    if (prior) return prior;
    const chargeId = `ch_${randomUUID().slice(0, 12)}`;
    const decision: Decision = { kind: "charged", chargeId, amount, refunded: false };
    this.decisions.set(key, decision);
    this.records.push({ chargeId, idempotencyKey: key, amount, createdAt: new Date().toISOString(), refunded: false });
    this.webhooks.push({
      id: `evt_${randomUUID()}`,
      type: "charge.succeeded",
      data: { idempotencyKey: key, chargeId, amount },
    });
    return decision;
  }

  private replay(decision: Decision): ChargeOutcome {
    return decision.kind === "charged"
      ? { kind: "charged", chargeId: decision.chargeId, amount: decision.amount }
      : { kind: "declined", reason: "card_declined" };
  }

  async charge(key: string, amount: number): Promise<ChargeOutcome> {
    await this.pause();
    const fault = this.healthy ? "ok" : this.pick(this.script.charges, "charge");
    const prior = this.decisions.get(key);
    switch (fault) {
      case "unreachable":
        return { kind: "error", code: "unreachable", message: "connection refused" };
      case "error":
        return { kind: "error", code: "provider_error", message: "502 before capture" };
      case "timeout_none":
        return { kind: "unknown" };
      case "timeout_late":
        if (!prior) this.late.push(() => void this.capture(key, amount));
        return { kind: "unknown" };
      case "timeout_charged":
        this.capture(key, amount);
        return { kind: "unknown" };
      case "error_after_charge":
        this.capture(key, amount);
        return { kind: "error", code: "provider_error", message: "500 after capture" };
      case "decline":
        if (!prior) {
          this.decisions.set(key, { kind: "declined" });
          this.webhooks.push({
            id: `evt_${randomUUID()}`,
            type: "charge.failed",
            data: { idempotencyKey: key, amount },
          });
          return { kind: "declined", reason: "card_declined" };
        }
        return this.replay(prior);
      case "ok":
        return this.replay(this.capture(key, amount));
    }
  }

  async lookup(key: string): Promise<LookupOutcome> {
    await this.pause();
    if (!this.healthy && this.pick(this.script.lookups, "lookup") === "blip") {
      return { kind: "error", message: "lookup blip" };
    }
    const decision = this.decisions.get(key);
    if (!decision) return { kind: "not_found" };
    if (decision.kind === "declined") return { kind: "declined", reason: "card_declined" };
    return { kind: "charged", chargeId: decision.chargeId, amount: decision.amount, refunded: decision.refunded };
  }

  async refund(chargeId: string): Promise<RefundOutcome> {
    await this.pause();
    if (!this.healthy && this.pick(this.script.refunds, "refund") === "blip") {
      return { kind: "error", message: "refund blip" };
    }
    const record = this.records.find((r) => r.chargeId === chargeId);
    if (!record) return { kind: "error", message: `no charge ${chargeId}` };
    const decision = this.decisions.get(record.idempotencyKey);
    if (decision?.kind === "charged" && !decision.refunded) {
      decision.refunded = true;
      record.refunded = true;
      this.webhooks.push({
        id: `evt_${randomUUID()}`,
        type: "charge.refunded",
        data: { idempotencyKey: record.idempotencyKey, chargeId },
      });
    }
    return { kind: "refunded", refundId: `re_${chargeId}` };
  }

  async listCharges(): Promise<ChargeRecord[]> {
    return this.records.map((r) => ({ ...r }));
  }
}

type Op =
  /** `slowPut`: the pending PutItem answers a charge window late, and the backstop runs meanwhile. */
  | { kind: "purchase"; fan: number; key: number; slowPut: boolean }
  | { kind: "webhook"; pick: number; duplicate: boolean }
  | { kind: "backstop" }
  | { kind: "reconcile"; fan: number; key: number }
  | { kind: "release"; fan: number }
  | { kind: "advance"; ms: number }
  | { kind: "land" };

const opArb: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.record({
      kind: fc.constant("purchase" as const),
      fan: fc.nat(2),
      key: fc.nat(1),
      slowPut: fc.boolean(),
    }),
  },
  {
    weight: 3,
    arbitrary: fc.record({ kind: fc.constant("webhook" as const), pick: fc.nat(20), duplicate: fc.boolean() }),
  },
  { weight: 2, arbitrary: fc.constant({ kind: "backstop" as const }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant("reconcile" as const), fan: fc.nat(2), key: fc.nat(1) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("release" as const), fan: fc.nat(2) }) },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant("advance" as const),
      ms: fc.constantFrom(300, PAYMENT_TIMEOUT_MS + 1, HOLD_SECONDS * 1_000),
    }),
  },
  { weight: 1, arbitrary: fc.constant({ kind: "land" as const }) },
);

const scriptArb: fc.Arbitrary<Script> = fc.record({
  charges: fc.array(
    fc.constantFrom<ChargeFault>(
      "ok",
      "decline",
      "error_after_charge",
      "error",
      "unreachable",
      "timeout_charged",
      "timeout_late",
      "timeout_none",
    ),
    { minLength: 1, maxLength: 12 },
  ),
  lookups: fc.array(fc.constantFrom<CallFault>("ok", "ok", "blip"), { minLength: 1, maxLength: 6 }),
  refunds: fc.array(fc.constantFrom<CallFault>("ok", "ok", "blip"), { minLength: 1, maxLength: 6 }),
  turns: fc.array(fc.nat(6), { minLength: 1, maxLength: 8 }),
});

const silent = pino({ level: "silent" });
let client: ReturnType<typeof createTestDynamoClient>;
let tableName: string;

beforeAll(async () => {
  client = createTestDynamoClient(inject("dynamoEndpoint"));
  tableName = `saga_model_${randomUUID().slice(0, 8)}`;
  await ensureTable(client, tableName);
});
afterAll(() => client?.destroy());

function eventInput(now: number): EventInput {
  return {
    name: "Saga model",
    onSaleAt: new Date(now - 60_000).toISOString(),
    holdSeconds: HOLD_SECONDS,
    maxSeatsPerFan: 4,
    sections: [{ id: "A", tier: "Floor", price: PRICE, rows: 1, seatsPerRow: SEATS.length }],
    generalAdmission: [],
    waitingRoom: { admitPerSecond: 50, maxActive: 2_000, sessionSeconds: 900 },
  };
}

let runs = 0;

async function runOne(script: Script, batches: Op[][]): Promise<void> {
  const clock = manualClock(Date.parse("2031-01-01T00:00:00.000Z") + runs * 86_400_000);
  const eventId = `sm_${++runs}_${randomUUID().replaceAll("-", "").slice(0, 8)}`;
  const inventory: Inventory = createInventory({ client, tableName, clock: clock.now });
  const provider = new ScriptedProvider(script);
  // The purchases whose PutItem is slow: the store answers after the clock has passed the
  // payment timeout, and the per-event backstop has run in between.
  const slowPuts = new Set<string>();
  let backstop: () => Promise<unknown> = async () => {};
  const sagaStore: Inventory = {
    ...inventory,
    purchases: {
      ...inventory.purchases,
      createPending: async (args) => {
        const result = await inventory.purchases.createPending(args);
        if (slowPuts.delete(args.purchaseId)) {
          clock.advance(PAYMENT_TIMEOUT_MS + 1);
          await backstop();
        }
        return result;
      },
    },
  };
  const saga: PurchaseSaga = createPurchaseSaga({
    inventory: sagaStore,
    payments: provider,
    waitingRoom: { completeSession: async () => ({ ok: true }) as never },
    seatMapWrites: { sold: async () => {} },
    metrics: createMetrics(),
    logger: silent,
    paymentTimeoutMs: PAYMENT_TIMEOUT_MS,
    clock: clock.now,
  });
  const workerDeps = { inventory, purchases: saga, paymentTimeoutMs: PAYMENT_TIMEOUT_MS };
  // The per-event backstop; work it leaves (a purchase too young, a provider down) makes the job
  // fail with StillPending so that BullMQ runs it again: here the next batch does.
  const eventBackstop = () =>
    reconcileJob(workerDeps, { kind: "event", eventId }).catch((err: Error) => {
      if (err.name !== "StillPending") throw err;
    });
  backstop = eventBackstop;

  expect((await inventory.events.create({ eventId, input: eventInput(clock.now()) })).ok).toBe(true);
  const holds = await Promise.all(
    FANS.map((fan, i) =>
      inventory.holds.holdSeats({ eventId, fanId: fan, seatIds: [SEATS[i]!], holdSeconds: HOLD_SECONDS }),
    ),
  );
  const holdIds = holds.map((h) => {
    if (!h.ok) throw new Error(`hold refused: ${JSON.stringify(h)}`);
    return h.hold.holdId;
  });
  const purchaseId = (fan: number, key: number) => purchaseIdOf(eventId, FANS[fan]!, `key-${key}`);
  const delivered: WebhookEvent[] = [];

  // What the webhook route does: a delivery is remembered once settled, given back when not.
  const deliver = async (event: WebhookEvent) => {
    if (event.type === "charge.refunded") return;
    try {
      await saga.resolve(eventId, event.data.idempotencyKey);
      delivered.push(event);
    } catch {
      provider.webhooks.push(event);
    }
  };
  const reconcileOne = (id: string) =>
    reconcileJob(workerDeps, { kind: "purchase", eventId, purchaseId: id }).catch((err: Error) => {
      if (err.name !== "StillPending" && !/lookup failed/.test(err.message)) throw err;
    });

  const run = async (op: Op): Promise<void> => {
    switch (op.kind) {
      case "purchase": {
        if (op.slowPut) slowPuts.add(purchaseId(op.fan, op.key));
        await saga.purchase({
          eventId,
          fanId: FANS[op.fan]!,
          sessionId: `s-${op.fan}`,
          holdId: holdIds[op.fan]!,
          idempotencyKey: `key-${op.key}`,
          paymentToken: "tok_any",
        });
        return;
      }
      case "webhook": {
        const queue = provider.webhooks;
        if (queue.length === 0) return;
        // Out of order: any queued event; a duplicate is delivered again later.
        const [event] = queue.splice(op.pick % queue.length, 1);
        if (op.duplicate) queue.push(event!);
        await deliver(event!);
        return;
      }
      case "backstop":
        await eventBackstop();
        return;
      case "reconcile":
        await reconcileOne(purchaseId(op.fan, op.key));
        return;
      case "release":
        await inventory.holds.release({ eventId, holdId: holdIds[op.fan]!, fanId: FANS[op.fan]! });
        return;
      case "advance":
        clock.advance(op.ms);
        return;
      case "land":
        for (const charge of provider.late.splice(0)) charge();
        return;
    }
  };

  for (const batch of batches) await Promise.all(batch.map(run));

  // The provider recovers; every late charge lands; webhooks are delivered; reconcilers run.
  provider.healthy = true;
  for (const charge of provider.late.splice(0)) charge();
  const ids = FANS.flatMap((_, fan) => [0, 1].map((key) => purchaseId(fan, key)));
  for (let round = 0; round < 20; round++) {
    for (const event of provider.webhooks.splice(0)) await deliver(event);
    clock.advance(PAYMENT_TIMEOUT_MS + 1);
    await eventBackstop();
    for (const id of ids) await reconcileOne(id);
    const purchases = (await Promise.all(ids.map((id) => inventory.purchases.get({ eventId, purchaseId: id })))).filter(
      (p) => p,
    );
    const unsettled = purchases.filter(
      (p) => p!.status === "pending" || (p!.status === "failed" && p!.failureReason === "refund_due"),
    );
    if (unsettled.length === 0 && provider.webhooks.length === 0) break;
  }

  const report = await auditEvent({ inventory, payments: provider }, eventId, { recheckPasses: 0 });
  const failed = report.checks.filter((c) => c.status === "fail");
  const trail = {
    eventId,
    purchases: await Promise.all(ids.map((id) => inventory.purchases.get({ eventId, purchaseId: id }))),
    charges: provider.records,
  };
  expect(failed, JSON.stringify({ failed, trail }, null, 2)).toEqual([]);
}

describe("purchase saga model (local DynamoDB, a provider that fails in every way)", () => {
  it("every charge ends in a ticket or a refund, whatever the provider and the order of events", async () => {
    await fc.assert(
      fc.asyncProperty(
        scriptArb,
        fc.array(fc.array(opArb, { minLength: 1, maxLength: 3 }), { minLength: 3, maxLength: 14 }),
        runOne,
      ),
      { numRuns: Number(process.env.SAGA_MODEL_RUNS ?? 60) },
    );
  }, 600_000);
});
