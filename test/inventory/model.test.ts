/**
 * Model-based property test. fast-check generates sequences of batches; a batch is one operation
 * or up to three run at once (Promise.all, two gateways). After every batch:
 *  - a single operation's outcome must equal the model's prediction exactly;
 *  - a concurrent batch's outcomes (ok or not) must equal those of SOME order of its operations
 *    run one by one in the model (linearizability, checked by trying every order), and the store
 *    must then look like the model after that order;
 *  - the invariants hold: a seat is sold at most once and stays sold to the same purchase; every
 *    sold seat belongs to exactly one confirmed purchase; no confirmed purchase lacks a sold seat;
 *    a general-admission area never goes below zero or above capacity; no fan's live held seats
 *    plus bought seats (places count as seats) ever pass maxSeatsPerFan.
 */
import { DynamoDBDocumentClient, GetCommand } from "@aws-sdk/lib-dynamodb";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { countFan, toFanLedger } from "../../src/inventory/fans.js";
import { type Inventory, SWEEP_SHARDS } from "../../src/inventory/index.js";
import { holdOwnedBy } from "../../src/inventory/holds.js";
import { keys } from "../../src/inventory/keys.js";
import { eventInput, type InventoryFixture, manualClock, setupInventory, uniqueEventId } from "./fixtures.js";

const SEATS = ["A-1-1", "A-1-2", "A-1-3", "A-1-4"];
const FANS = ["fan-0", "fan-1", "fan-2"];
const CAPACITY = 4;
const HOLD_SECONDS = 10;
const MAX_PER_FAN = 4;

type Op =
  | { kind: "hold"; fan: number; seats: string[] }
  | { kind: "holdGA"; fan: number; quantity: number }
  | { kind: "release"; hold: number; fan: number | "owner" }
  | { kind: "confirm"; hold: number; fan: number | "owner" }
  | { kind: "repeatConfirm"; purchase: number }
  | { kind: "sweep" };
type Step = { kind: "advance"; ms: number } | { kind: "batch"; ops: Op[] };

// An op with its references resolved against the model at the start of its batch.
type Resolved =
  | { kind: "hold"; fan: string; seats: string[] }
  | { kind: "holdGA"; fan: string; quantity: number }
  | { kind: "release"; holdId: string; fan: string }
  | { kind: "confirm"; holdId: string; fan: string; purchaseId: string }
  | { kind: "repeatConfirm"; holdId: string; fan: string; purchaseId: string }
  | { kind: "sweep" };

interface Outcome {
  ok: boolean;
  reason?: string;
  lost?: string[];
  available?: number;
  holdId?: string;
}

interface MHold {
  holdId: string;
  fan: string;
  seats: string[];
  quantity: number;
  expiresAt: number;
  status: "held" | "released" | "confirmed";
}
interface Model {
  now: number;
  seats: Map<string, { status: "available" | "held" | "sold"; holdId?: string; purchaseId?: string }>;
  holds: MHold[];
  purchases: Map<string, { holdId: string; status: "confirmed" }>;
  gaSold: number;
}

const clone = (m: Model): Model => ({
  now: m.now,
  seats: new Map([...m.seats].map(([k, v]) => [k, { ...v }])),
  holds: m.holds.map((h) => ({ ...h, seats: [...h.seats] })),
  purchases: new Map([...m.purchases].map(([k, v]) => [k, { ...v }])),
  gaSold: m.gaSold,
});

const live = (m: Model, h: MHold) => h.status === "held" && h.expiresAt > m.now;

function seatFree(m: Model, id: string): boolean {
  const s = m.seats.get(id)!;
  if (s.status === "available") return true;
  if (s.status === "sold") return false;
  const h = m.holds.find((x) => x.holdId === s.holdId)!;
  return !live(m, h);
}

/** What counts against a fan's limit: seats and places of its live holds, plus what it bought. */
function fanCount(m: Model, fan: string): number {
  return m.holds
    .filter((h) => h.fan === fan && (h.status === "confirmed" || live(m, h)))
    .reduce((n, h) => n + h.seats.length + h.quantity, 0);
}

function gaAvailable(m: Model): number {
  const held = m.holds.filter((h) => h.quantity > 0 && live(m, h)).reduce((n, h) => n + h.quantity, 0);
  return CAPACITY - m.gaSold - held;
}

/** Why a hold cannot be bought; hold_released and hold_expired are one outcome ("gone"). */
function unusable(m: Model, h: MHold, fan: string): string | null {
  if (h.fan !== fan) return "hold_not_owned";
  if (h.status === "confirmed") return "hold_confirmed";
  if (h.status === "released" || h.expiresAt <= m.now) return "hold_gone";
  return null;
}

function predict(m: Model, op: Resolved): Outcome {
  switch (op.kind) {
    case "hold": {
      // The fan's limit is counted first: a refused hold says so, whatever its seats.
      if (fanCount(m, op.fan) + op.seats.length > MAX_PER_FAN) return { ok: false, reason: "seat_limit_exceeded" };
      const lost = op.seats.filter((s) => !seatFree(m, s));
      return lost.length ? { ok: false, reason: "seat_unavailable", lost } : { ok: true };
    }
    case "holdGA": {
      if (fanCount(m, op.fan) + op.quantity > MAX_PER_FAN) return { ok: false, reason: "seat_limit_exceeded" };
      const available = gaAvailable(m);
      return available >= op.quantity ? { ok: true } : { ok: false, reason: "insufficient_quantity", available };
    }
    case "release": {
      const h = m.holds.find((x) => x.holdId === op.holdId)!;
      if (h.fan !== op.fan) return { ok: false, reason: "hold_not_owned" };
      if (h.status === "confirmed") return { ok: false, reason: "hold_confirmed" };
      return { ok: true };
    }
    case "confirm": {
      const h = m.holds.find((x) => x.holdId === op.holdId)!;
      const why = unusable(m, h, op.fan);
      return why ? { ok: false, reason: why } : { ok: true };
    }
    case "repeatConfirm":
    case "sweep":
      return { ok: true };
  }
}

/** Applies an op that had `actual` as its outcome (which matched the prediction). */
function update(m: Model, op: Resolved, actual: Outcome): void {
  if (!actual.ok) return;
  switch (op.kind) {
    case "hold":
      for (const s of op.seats) m.seats.set(s, { status: "held", holdId: actual.holdId! });
      m.holds.push({
        holdId: actual.holdId!,
        fan: op.fan,
        seats: op.seats,
        quantity: 0,
        expiresAt: m.now + HOLD_SECONDS * 1000,
        status: "held",
      });
      return;
    case "holdGA":
      m.holds.push({
        holdId: actual.holdId!,
        fan: op.fan,
        seats: [],
        quantity: op.quantity,
        expiresAt: m.now + HOLD_SECONDS * 1000,
        status: "held",
      });
      return;
    case "release": {
      const h = m.holds.find((x) => x.holdId === op.holdId)!;
      if (h.status !== "held") return;
      for (const s of h.seats) {
        const seat = m.seats.get(s)!;
        if (seat.status === "held" && seat.holdId === h.holdId) m.seats.set(s, { status: "available" });
      }
      h.status = "released";
      return;
    }
    case "confirm": {
      const h = m.holds.find((x) => x.holdId === op.holdId)!;
      for (const s of h.seats) m.seats.set(s, { status: "sold", purchaseId: op.purchaseId });
      m.gaSold += h.quantity;
      h.status = "confirmed";
      m.purchases.set(op.purchaseId, { holdId: h.holdId, status: "confirmed" });
      return;
    }
    default:
      return;
  }
}

function normalize(reason: string | undefined): string | undefined {
  return reason === "hold_expired" || reason === "hold_released" ? "hold_gone" : reason;
}

function sameOutcome(predicted: Outcome, actual: Outcome, exact: boolean): boolean {
  if (predicted.ok !== actual.ok) return false;
  if (!exact || predicted.ok) return true;
  if (predicted.reason !== normalize(actual.reason)) return false;
  if (
    predicted.lost &&
    JSON.stringify([...predicted.lost].sort()) !== JSON.stringify([...(actual.lost ?? [])].sort())
  ) {
    return false;
  }
  if (predicted.available !== undefined && predicted.available !== actual.available) return false;
  return true;
}

async function run(inv: Inventory, eventId: string, op: Resolved): Promise<Outcome> {
  switch (op.kind) {
    case "hold": {
      const r = await inv.holds.holdSeats({ eventId, fanId: op.fan, seatIds: op.seats, holdSeconds: HOLD_SECONDS });
      if (r.ok) return { ok: true, holdId: r.hold.holdId };
      return { ok: false, reason: r.reason, ...(r.reason === "seat_unavailable" ? { lost: r.seats } : {}) };
    }
    case "holdGA": {
      const r = await inv.holds.holdGeneralAdmission({
        eventId,
        fanId: op.fan,
        areaId: "GA",
        quantity: op.quantity,
        holdSeconds: HOLD_SECONDS,
      });
      if (r.ok) return { ok: true, holdId: r.hold.holdId };
      return {
        ok: false,
        reason: r.reason,
        ...(r.reason === "insufficient_quantity" ? { available: r.available } : {}),
      };
    }
    case "release": {
      const r = await inv.holds.release({ eventId, holdId: op.holdId, fanId: op.fan });
      return r.ok ? { ok: true } : { ok: false, reason: r.reason };
    }
    case "confirm": {
      const pending = await inv.purchases.createPending({
        eventId,
        holdId: op.holdId,
        fanId: op.fan,
        purchaseId: op.purchaseId,
      });
      if (!pending.ok) return { ok: false, reason: pending.reason };
      const r = await inv.purchases.confirm({ eventId, holdId: op.holdId, fanId: op.fan, purchaseId: op.purchaseId });
      if (!r.ok) return { ok: false, reason: r.reason };
      return { ok: !r.alreadyConfirmed };
    }
    case "repeatConfirm": {
      const r = await inv.purchases.confirm({ eventId, holdId: op.holdId, fanId: op.fan, purchaseId: op.purchaseId });
      return { ok: r.ok && r.alreadyConfirmed && r.purchase.status === "confirmed" };
    }
    case "sweep": {
      await Promise.all(Array.from({ length: SWEEP_SHARDS }, (_, s) => inv.holds.sweepExpired({ eventId, shard: s })));
      return { ok: true };
    }
  }
}

function permutations<T>(xs: T[]): T[][] {
  if (xs.length <= 1) return [xs];
  return xs.flatMap((x, i) => permutations([...xs.slice(0, i), ...xs.slice(i + 1)]).map((p) => [x, ...p]));
}

// ---- the store, read back and compared ----
interface Observed {
  seats: Map<string, { status: string; holdId?: string; purchaseId?: string }>;
  ga: { capacity: number; available: number; held: number; sold: number };
  holdStatus: Map<string, string>;
  /** Every hold read back: whose, and how many seats or places. */
  holds: Map<string, { fan: string; size: number; status: string }>;
  purchases: Map<string, { status: string; seats: string[]; quantity: number; fan: string }>;
  /** Each fan's ledger item, as the next hold would count it at the model's `now`. */
  ledgers: Map<string, number>;
}

async function observe(
  inv: Inventory,
  eventId: string,
  holdIds: string[],
  purchaseIds: string[],
  now: number,
): Promise<Observed> {
  const [page, ga, holds, bought, fanItems] = await Promise.all([
    inv.seats.listSection({ eventId, sectionId: "A", consistent: true }),
    inv.seats.generalAdmission({ eventId, areaId: "GA" }),
    Promise.all(
      holdIds.map((id) => inv.holds.get({ eventId, holdId: id, fanId: FANS.find((f) => holdOwnedBy(id, f))! })),
    ),
    Promise.all(purchaseIds.map((id) => inv.purchases.get({ eventId, purchaseId: id }))),
    Promise.all(
      FANS.map((fan) =>
        doc.send(new GetCommand({ TableName: fx.tableName, Key: keys.fan(eventId, fan), ConsistentRead: true })),
      ),
    ),
  ]);
  const ledgers = new Map(FANS.map((fan, i) => [fan, countFan(toFanLedger(fanItems[i]!.Item), now).counted]));
  const seats = new Map((page?.seats ?? []).map((s) => [s.id, s]));
  const holdStatus = new Map(holdIds.map((id, i) => [id, holds[i]?.status ?? "missing"]));
  const held = new Map<string, { fan: string; size: number; status: string }>();
  for (const h of holds) {
    if (h)
      held.set(h.holdId, {
        fan: h.fanId,
        size: h.seats.length + (h.generalAdmission?.quantity ?? 0),
        status: h.status,
      });
  }
  const purchases = new Map<string, { status: string; seats: string[]; quantity: number; fan: string }>();
  for (const p of bought) {
    if (p)
      purchases.set(p.purchaseId, {
        status: p.status,
        seats: p.seats,
        quantity: p.generalAdmission?.quantity ?? 0,
        fan: p.fanId,
      });
  }
  return { seats, ga: ga!, holdStatus, holds: held, purchases, ledgers };
}

/** Differences between the store and a model state, empty when they agree. */
function differences(obs: Observed, m: Model): string[] {
  const diffs: string[] = [];
  for (const id of SEATS) {
    const want = m.seats.get(id)!;
    const got = obs.seats.get(id);
    const wantStatus = want.status === "held" && seatFree(m, id) ? "available" : want.status;
    if (got?.status !== wantStatus) diffs.push(`${id}: ${got?.status} != ${wantStatus}`);
    else if (wantStatus === "held" && got.holdId !== want.holdId)
      diffs.push(`${id}: held by ${got.holdId} != ${want.holdId}`);
    else if (wantStatus === "sold" && got.purchaseId !== want.purchaseId) {
      diffs.push(`${id}: sold to ${got.purchaseId} != ${want.purchaseId}`);
    }
  }
  // Effective GA availability: stored available plus expired holds nobody has returned yet.
  const liveHeld = m.holds.filter((h) => h.quantity > 0 && live(m, h)).reduce((n, h) => n + h.quantity, 0);
  if (obs.ga.sold !== m.gaSold) diffs.push(`GA sold ${obs.ga.sold} != ${m.gaSold}`);
  if (obs.ga.held < liveHeld) diffs.push(`GA held ${obs.ga.held} < live ${liveHeld}`);
  if (obs.ga.available + (obs.ga.held - liveHeld) !== gaAvailable(m)) {
    diffs.push(`GA effective available ${obs.ga.available + obs.ga.held - liveHeld} != ${gaAvailable(m)}`);
  }
  for (const h of m.holds) {
    const got = obs.holdStatus.get(h.holdId);
    const want = h.status === "held" ? (h.expiresAt > m.now ? "held" : "expired") : h.status;
    const ok = got === want || (want === "released" && got === "expired") || (want === "expired" && got === "released");
    if (!ok) diffs.push(`hold ${h.holdId}: ${got} != ${want}`);
  }
  // The ledger counts exactly what the fan holds and bought: nothing lingers, nothing is missed.
  for (const fan of FANS) {
    if (obs.ledgers.get(fan) !== fanCount(m, fan))
      diffs.push(`${fan} ledger ${obs.ledgers.get(fan)} != ${fanCount(m, fan)}`);
  }
  return diffs;
}

function checkInvariants(obs: Observed, soldTo: Map<string, string>): void {
  const soldSeats = [...obs.seats.values()].filter((s) => s.status === "sold");
  for (const seat of soldSeats) {
    const [id] = [...obs.seats].find(([, v]) => v === seat)!;
    // Sold at most once: a sold seat never changes purchase.
    const before = soldTo.get(id);
    expect(before === undefined || before === seat.purchaseId, `${id} resold`).toBe(true);
    soldTo.set(id, seat.purchaseId!);
    // Every sold seat belongs to exactly one confirmed purchase.
    const owners = [...obs.purchases].filter(([, p]) => p.status === "confirmed" && p.seats.includes(id));
    expect(
      owners.map(([pid]) => pid),
      `${id} owners`,
    ).toEqual([seat.purchaseId]);
  }
  for (const [id] of soldTo) expect(obs.seats.get(id)?.status, `${id} unsold`).toBe("sold");
  // No confirmed purchase lacks a sold seat.
  for (const [pid, p] of obs.purchases) {
    if (p.status !== "confirmed") continue;
    for (const s of p.seats) expect(obs.seats.get(s)).toMatchObject({ status: "sold", purchaseId: pid });
  }
  // General admission stays within [0, capacity] and adds up.
  const { available, held, sold, capacity } = obs.ga;
  expect(available).toBeGreaterThanOrEqual(0);
  expect(available).toBeLessThanOrEqual(capacity);
  expect(held).toBeGreaterThanOrEqual(0);
  expect(available + held + sold).toBe(capacity);
  const gaBought = [...obs.purchases.values()]
    .filter((p) => p.status === "confirmed")
    .reduce((n, p) => n + p.quantity, 0);
  expect(sold).toBe(gaBought);
  // No fan past its limit: live holds (read back as `held`, so unexpired) plus confirmed purchases.
  for (const fan of FANS) {
    const holding = [...obs.holds.values()]
      .filter((h) => h.fan === fan && h.status === "held")
      .reduce((n, h) => n + h.size, 0);
    const bought = [...obs.purchases.values()]
      .filter((p) => p.fan === fan && p.status === "confirmed")
      .reduce((n, p) => n + p.seats.length + p.quantity, 0);
    expect(holding + bought, `${fan}: ${holding} held + ${bought} bought`).toBeLessThanOrEqual(MAX_PER_FAN);
  }
}

// ---- generators ----
const fan = fc.integer({ min: 0, max: FANS.length - 1 });
const actor = fc.oneof({ arbitrary: fc.constant("owner" as const), weight: 4 }, { arbitrary: fan, weight: 1 });
/** Which hold, counted back from the newest: ops crowd on the same few holds, where races are. */
const recent = fc.nat({ max: 3 });
const opArb: fc.Arbitrary<Op> = fc.oneof(
  {
    arbitrary: fc.record({
      kind: fc.constant("hold" as const),
      fan,
      seats: fc.subarray(SEATS, { minLength: 1, maxLength: 3 }),
    }),
    weight: 4,
  },
  {
    arbitrary: fc.record({ kind: fc.constant("holdGA" as const), fan, quantity: fc.integer({ min: 1, max: 3 }) }),
    weight: 2,
  },
  { arbitrary: fc.record({ kind: fc.constant("release" as const), hold: recent, fan: actor }), weight: 2 },
  { arbitrary: fc.record({ kind: fc.constant("confirm" as const), hold: recent, fan: actor }), weight: 3 },
  { arbitrary: fc.record({ kind: fc.constant("repeatConfirm" as const), purchase: fc.nat() }), weight: 1 },
  { arbitrary: fc.constant({ kind: "sweep" as const }), weight: 1 },
);
const stepArb: fc.Arbitrary<Step> = fc.oneof(
  {
    arbitrary: fc.record({ kind: fc.constant("batch" as const), ops: fc.array(opArb, { minLength: 1, maxLength: 3 }) }),
    weight: 3,
  },
  {
    arbitrary: fc.record({
      kind: fc.constant("advance" as const),
      ms: fc.constantFrom(1_000, 5_000, 9_999, 10_000, 15_000),
    }),
    weight: 1,
  },
);

const STATS = new Map<string, number>();
afterAll(() =>
  console.info(
    [...STATS]
      .sort()
      .map(([k, v]) => `${k}=${v}`)
      .join(" "),
  ),
);
let fx: InventoryFixture;
let doc: DynamoDBDocumentClient;
beforeAll(async () => {
  fx = await setupInventory("model");
  doc = DynamoDBDocumentClient.from(fx.client);
});
afterAll(() => fx.close());

describe("inventory against a model", () => {
  it("random concurrent hold / release / confirm / expire / sweep keep every invariant", async () => {
    let purchaseSeq = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(stepArb, { minLength: 4, maxLength: 16, size: "max" }), async (steps) => {
        const clock = manualClock();
        const gateways = [fx.newInstance(clock), fx.newInstance(clock)];
        const eventId = uniqueEventId("model");
        const created = await gateways[0]!.events.create({
          eventId,
          input: eventInput(clock, {
            holdSeconds: HOLD_SECONDS,
            maxSeatsPerFan: MAX_PER_FAN,
            sections: [{ id: "A", tier: "Floor", price: 100, rows: 1, seatsPerRow: SEATS.length }],
            generalAdmission: [{ id: "GA", tier: "Standing", price: 10, capacity: CAPACITY }],
          }),
        });
        expect(created.ok).toBe(true);

        let model: Model = {
          now: clock.now(),
          seats: new Map(SEATS.map((s) => [s, { status: "available" as const }])),
          holds: [],
          purchases: new Map(),
          gaSold: 0,
        };
        const soldTo = new Map<string, string>();

        for (const step of steps) {
          if (step.kind === "advance") {
            clock.advance(step.ms);
            model.now = clock.now();
            continue;
          }
          const resolved: Resolved[] = [];
          for (const op of step.ops) {
            if (op.kind === "hold") resolved.push({ kind: "hold", fan: FANS[op.fan]!, seats: op.seats });
            else if (op.kind === "holdGA") resolved.push({ kind: "holdGA", fan: FANS[op.fan]!, quantity: op.quantity });
            else if (op.kind === "sweep") resolved.push({ kind: "sweep" });
            else if (op.kind === "repeatConfirm") {
              const bought = [...model.purchases];
              if (bought.length === 0) continue;
              const [purchaseId, p] = bought[op.purchase % bought.length]!;
              const h = model.holds.find((x) => x.holdId === p.holdId)!;
              resolved.push({ kind: "repeatConfirm", holdId: h.holdId, fan: h.fan, purchaseId });
            } else {
              if (model.holds.length === 0) continue;
              const h = model.holds[model.holds.length - 1 - (op.hold % model.holds.length)]!;
              const who = op.fan === "owner" ? h.fan : FANS[op.fan]!;
              if (op.kind === "release") resolved.push({ kind: "release", holdId: h.holdId, fan: who });
              else resolved.push({ kind: "confirm", holdId: h.holdId, fan: who, purchaseId: `pur_${++purchaseSeq}` });
            }
          }
          if (resolved.length === 0) continue;

          const actual = await Promise.all(resolved.map((op, i) => run(gateways[i % 2]!, eventId, op)));
          resolved.forEach((op, i) => {
            const k = `${op.kind}${resolved.length > 1 ? "*" : ""}:${actual[i]!.ok ? "ok" : actual[i]!.reason}`;
            STATS.set(k, (STATS.get(k) ?? 0) + 1);
          });
          const obs = await observe(
            gateways[0]!,
            eventId,
            [...model.holds.map((h) => h.holdId), ...actual.flatMap((a) => (a.holdId ? [a.holdId] : []))],
            [...model.purchases.keys(), ...resolved.flatMap((op) => (op.kind === "confirm" ? [op.purchaseId] : []))],
            clock.now(),
          );
          checkInvariants(obs, soldTo);

          // Find an order of the batch that explains every outcome and the store afterwards.
          const exact = resolved.length === 1;
          const tried: string[] = [];
          let next: Model | null = null;
          for (const order of permutations(resolved.map((_, i) => i))) {
            const m = clone(model);
            let fits = true;
            for (const i of order) {
              const predicted = predict(m, resolved[i]!);
              if (!sameOutcome(predicted, actual[i]!, exact)) {
                fits = false;
                tried.push(
                  `order ${order}: op ${i} predicted ${JSON.stringify(predicted)} got ${JSON.stringify(actual[i])}`,
                );
                break;
              }
              update(m, resolved[i]!, actual[i]!);
            }
            if (!fits) continue;
            const diffs = differences(obs, m);
            if (diffs.length === 0) {
              next = m;
              break;
            }
            tried.push(`order ${order}: store differs: ${diffs.join("; ")}`);
          }
          if (!next) {
            throw new Error(
              `no order of ${JSON.stringify(resolved)} explains ${JSON.stringify(actual)}:\n${tried.join("\n")}`,
            );
          }
          model = next;
        }
      }),
      {
        numRuns: Number(process.env.INVENTORY_MODEL_RUNS ?? 50),
        // Shrinking a failure can outlast the test's time: stop then and report the smallest
        // failing case found so far, rather than a bare timeout that hides it (CI met one).
        interruptAfterTimeLimit: Number(process.env.INVENTORY_MODEL_TIME_MS ?? 75_000),
        // Replays a reported failure: INVENTORY_MODEL_SEED and INVENTORY_MODEL_PATH from its report.
        ...(process.env.INVENTORY_MODEL_SEED ? { seed: Number(process.env.INVENTORY_MODEL_SEED) } : {}),
        ...(process.env.INVENTORY_MODEL_PATH ? { path: process.env.INVENTORY_MODEL_PATH } : {}),
      },
    );
  }, 120_000);
});
