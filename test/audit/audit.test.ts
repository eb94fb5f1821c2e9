/**
 * The audit against the real Redis and DynamoDB endpoint of the test run: a clean sale driven
 * through the inventory API passes, and each corruption written straight into the table (or the
 * provider) fails the check that names it. Every test has its own table, event and payment
 * namespace; nothing is flushed.
 */
import { randomUUID } from "node:crypto";
import type { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { DynamoDBDocumentClient, PutCommand, UpdateCommand } from "@aws-sdk/lib-dynamodb";
import { Redis } from "ioredis";
import { afterAll, afterEach, describe, expect, inject, it } from "vitest";
import { type AuditCheckName, type AuditReport, auditEvent } from "../../src/audit/audit.js";
import { ensureTable } from "../../src/dynamodb/table.js";
import { createInventory, type Hold, type HoldResult, type Inventory } from "../../src/inventory/index.js";
import { keys, parseSeatId, purchaseShard } from "../../src/inventory/keys.js";
import { type SpawnedRedis, spawnRedis } from "../../src/local/redis.js";
import { type RunOutput, runToExit } from "../support/processes.js";
import { createSimulatedProvider, type SimulatedPaymentProvider } from "../../src/payments/simulated.js";
import { eventInput, type ManualClock, manualClock, uniqueEventId } from "../inventory/fixtures.js";
import { createTestDynamoClient } from "../support/dynamo.js";

const redis = new Redis(inject("redisUrl"));
const clients: DynamoDBClient[] = [];
afterAll(() => {
  redis.disconnect();
});
afterEach(() => {
  for (const c of clients.splice(0)) c.destroy();
});

interface Sale {
  tableName: string;
  eventId: string;
  namespace: string;
  clock: ManualClock;
  client: DynamoDBClient;
  doc: DynamoDBDocumentClient;
  inventory: Inventory;
  payments: SimulatedPaymentProvider;
  /** Purchase ids by role in the sale. */
  ids: { seats2: string; seats1: string; ga: string; declined: string; refunded: string };
  chargeOf: Map<string, string>;
}

function held(r: HoldResult): Hold {
  if (!r.ok) throw new Error(`expected a hold, got ${JSON.stringify(r)}`);
  return r.hold;
}

/** A fresh table, event and payment namespace; the provider's ledger in `ledger`. */
async function setup(ledger: Redis = redis): Promise<Omit<Sale, "ids" | "chargeOf">> {
  const client = createTestDynamoClient(inject("dynamoEndpoint"));
  clients.push(client);
  const tableName = `audit_${randomUUID().slice(0, 8)}`;
  await ensureTable(client, tableName);
  const clock = manualClock();
  const inventory = createInventory({ client, tableName, clock: clock.now });
  const eventId = uniqueEventId("aud");
  const created = await inventory.events.create({
    eventId,
    input: eventInput(clock, {
      sections: [
        { id: "A", tier: "Floor", price: 15_000, rows: 4, seatsPerRow: 5 },
        { id: "B", tier: "Upper", price: 5_000, rows: 2, seatsPerRow: 5 },
      ],
      generalAdmission: [{ id: "GA", tier: "Standing", price: 6_000, capacity: 10 }],
    }),
  });
  expect(created.ok).toBe(true);
  const namespace = `aud${randomUUID().slice(0, 12)}`;
  return {
    tableName,
    eventId,
    namespace,
    clock,
    client,
    doc: DynamoDBDocumentClient.from(client),
    inventory,
    payments: createSimulatedProvider({ redis: ledger, namespace }),
  };
}

/** Pending purchase of a hold, charged with `token`; the purchase id is `<eventId>-<name>`. */
async function buy(
  s: Omit<Sale, "ids" | "chargeOf">,
  hold: Hold,
  name: string,
  token = "tok_ok",
): Promise<{ purchaseId: string; chargeId?: string }> {
  const purchaseId = `${s.eventId}-${name}`;
  const pending = await s.inventory.purchases.createPending({
    eventId: s.eventId,
    holdId: hold.holdId,
    fanId: hold.fanId,
    purchaseId,
  });
  expect(pending.ok).toBe(true);
  const charge = await s.payments.charge(purchaseId, hold.amount, token);
  if (charge.kind !== "charged") return { purchaseId };
  expect(await s.inventory.purchases.recordCharge({ eventId: s.eventId, purchaseId, chargeId: charge.chargeId })).toBe(
    true,
  );
  return { purchaseId, chargeId: charge.chargeId };
}

async function confirmed(s: Omit<Sale, "ids" | "chargeOf">, hold: Hold, name: string): Promise<string> {
  const { purchaseId } = await buy(s, hold, name);
  const out = await s.inventory.purchases.confirm({
    eventId: s.eventId,
    holdId: hold.holdId,
    fanId: hold.fanId,
    purchaseId,
  });
  expect(out.ok).toBe(true);
  return purchaseId;
}

/**
 * Every way a purchase ends: two seat purchases and one general-admission purchase confirmed, one
 * declined (failed, never charged), one charged whose hold expired first (refunded), and a seat
 * and some standing places still held by fans who have not paid yet.
 */
async function cleanSale(ledger: Redis = redis): Promise<Sale> {
  const s = await setup(ledger);
  const chargeOf = new Map<string, string>();
  const { eventId, inventory } = s;

  // Charged, but the hold expired before the confirmation: the saga refunds.
  const late = held(
    await inventory.holds.holdSeats({ eventId, fanId: "fan-late", seatIds: ["B-1-1"], holdSeconds: 60 }),
  );
  const refunded = await buy(s, late, "late");
  s.clock.advance(61_000);
  expect(
    await inventory.purchases.confirm({
      eventId,
      holdId: late.holdId,
      fanId: "fan-late",
      purchaseId: refunded.purchaseId,
    }),
  ).toMatchObject({
    ok: false,
    reason: "hold_expired",
  });
  expect(await s.payments.refund(refunded.chargeId!, `refund-${refunded.purchaseId}`)).toMatchObject({
    kind: "refunded",
  });
  expect(
    await inventory.purchases.markRefunded({
      eventId,
      purchaseId: refunded.purchaseId,
      reason: "hold_expired",
      chargeId: refunded.chargeId,
    }),
  ).toMatchObject({ ok: true });

  const seats2 = await confirmed(
    s,
    held(await inventory.holds.holdSeats({ eventId, fanId: "fan-1", seatIds: ["A-1-1", "A-1-2"], holdSeconds: 480 })),
    "two",
  );
  const seats1 = await confirmed(
    s,
    held(await inventory.holds.holdSeats({ eventId, fanId: "fan-2", seatIds: ["A-2-1"], holdSeconds: 480 })),
    "one",
  );
  const ga = await confirmed(
    s,
    held(
      await inventory.holds.holdGeneralAdmission({
        eventId,
        fanId: "fan-3",
        areaId: "GA",
        quantity: 3,
        holdSeconds: 480,
      }),
    ),
    "ga",
  );

  const declinedHold = held(
    await inventory.holds.holdSeats({ eventId, fanId: "fan-4", seatIds: ["A-3-1"], holdSeconds: 480 }),
  );
  const declined = await buy(s, declinedHold, "declined", "tok_decline");
  expect(declined.chargeId).toBeUndefined();
  expect(
    await inventory.purchases.markFailed({ eventId, purchaseId: declined.purchaseId, reason: "card_declined" }),
  ).toMatchObject({ ok: true });

  // Fans still deciding.
  held(await inventory.holds.holdSeats({ eventId, fanId: "fan-5", seatIds: ["A-4-1"], holdSeconds: 480 }));
  held(
    await inventory.holds.holdGeneralAdmission({
      eventId,
      fanId: "fan-6",
      areaId: "GA",
      quantity: 2,
      holdSeconds: 480,
    }),
  );

  for (const c of await s.payments.listCharges()) chargeOf.set(c.idempotencyKey, c.chargeId);
  return {
    ...s,
    ids: { seats2, seats1, ga, declined: declined.purchaseId, refunded: refunded.purchaseId },
    chargeOf,
  };
}

const audit = (s: Sale, options: { allowPending?: boolean } = {}) =>
  auditEvent({ inventory: s.inventory, payments: s.payments }, s.eventId, {
    recheckPasses: 1,
    recheckDelayMs: 0,
    ...options,
  });

function check(report: AuditReport, name: AuditCheckName) {
  const found = report.checks.find((c) => c.name === name);
  if (!found) throw new Error(`no check ${name}`);
  return found;
}

function failing(report: AuditReport): AuditCheckName[] {
  return report.checks.filter((c) => c.status === "fail").map((c) => c.name);
}

/** Writes straight to the table, past every condition the inventory keeps. */
async function updateItem(
  s: Sale,
  key: { PK: string; SK: string },
  update: string,
  values: Record<string, unknown> = {},
  names: Record<string, string> = {},
): Promise<void> {
  await s.doc.send(
    new UpdateCommand({
      TableName: s.tableName,
      Key: key,
      UpdateExpression: update,
      ...(Object.keys(values).length ? { ExpressionAttributeValues: values } : {}),
      ...(Object.keys(names).length ? { ExpressionAttributeNames: names } : {}),
    }),
  );
}

const seatKey = (s: Sale, seatId: string) => keys.seat(s.eventId, parseSeatId(seatId)!);

describe("audit of a clean sale", () => {
  it("passes every check and adds up the totals", async () => {
    const s = await cleanSale();
    const report = await audit(s);
    expect(failing(report)).toEqual([]);
    expect(report).toMatchObject({ eventId: s.eventId, eventFound: true, ok: true, passes: 1, paymentsChecked: true });
    expect(report.checks.map((c) => c.status)).toEqual(Array(9).fill("pass"));
    // Held: the unpaid fan's seat, and the declined fan's (a declined hold stays until it expires).
    expect(report.totals.seats).toEqual({ expected: 30, total: 30, available: 25, held: 2, sold: 3 });
    expect(report.totals.generalAdmission).toMatchObject({ capacity: 10, available: 5, held: 2, sold: 3 });
    // The purchases the sale names: sold seats and the area's confirmed holds, the open index, the
    // charges. The declined one (no seat, no charge, out of the open index) is read by none: no
    // index of purchases by status is kept (docs/audit.md).
    expect(report.totals.purchases).toEqual({
      total: 4,
      pending: { count: 0, amount: 0 },
      confirmed: { count: 3, amount: 30_000 + 15_000 + 18_000 },
      failed: { count: 0, amount: 0 },
      refunded: { count: 1, amount: 5_000 },
    });
    expect(report.totals.charges).toEqual({
      captured: { count: 3, amount: 63_000 },
      refunded: { count: 1, amount: 5_000 },
    });
  });

  it("ignores charges of other events in the same provider", async () => {
    const s = await cleanSale();
    // Another event whose id starts with this one's: its keys are `<other>-...`, not `<eventId>-...`.
    await s.payments.charge(`${s.eventId}x-stray`, 100, "tok_ok");
    await s.payments.charge(`other-${s.eventId}`, 100, "tok_ok");
    expect(failing(await audit(s))).toEqual([]);
  });

  it("skips the charge checks without a payment provider", async () => {
    const s = await cleanSale();
    const report = await auditEvent({ inventory: s.inventory }, s.eventId);
    expect(report.ok).toBe(true);
    expect(report.paymentsChecked).toBe(false);
    expect(report.totals.charges).toBeUndefined();
    expect(report.checks.filter((c) => c.status === "skip").map((c) => c.name)).toEqual([
      "captured_charges_confirmed",
      "refunds_match_purchases",
      "confirmed_purchases_charged",
    ]);
  });

  it("reports an unknown event as not found", async () => {
    const s = await setup();
    const report = await auditEvent({ inventory: s.inventory }, "nosuchevent");
    expect(report).toMatchObject({ eventFound: false, ok: false, checks: [] });
  });

  it("fails on a purchase left pending, unless the sale is still running", async () => {
    const s = await cleanSale();
    const hold = held(
      await s.inventory.holds.holdSeats({ eventId: s.eventId, fanId: "fan-9", seatIds: ["A-3-5"], holdSeconds: 480 }),
    );
    const { purchaseId, chargeId } = await buy(s, hold, "inflight");

    const strict = await audit(s);
    expect(failing(strict)).toEqual(["captured_charges_confirmed", "no_pending_purchases"]);
    expect(check(strict, "no_pending_purchases").offenders.map((o) => o.id)).toEqual([purchaseId]);
    expect(check(strict, "captured_charges_confirmed").offenders.map((o) => o.id)).toEqual([chargeId]);

    const running = await audit(s, { allowPending: true });
    expect(running.ok).toBe(true);
    expect(check(running, "no_pending_purchases")).toMatchObject({ status: "pass", offenderCount: 1 });
  });

  it("re-reads what the lagging purchase index showed before reporting it", async () => {
    const s = await cleanSale();
    let calls = 0;
    // The first listing is stale, as GSI1 can be for a moment: it still shows a confirmed purchase pending.
    const stale: Inventory = {
      ...s.inventory,
      purchases: {
        ...s.inventory.purchases,
        list: async (args) => {
          const page = await s.inventory.purchases.list(args);
          if (calls++ > 0) return page;
          return {
            ...page,
            purchases: page.purchases.map((p) => (p.purchaseId === s.ids.seats1 ? { ...p, status: "pending" } : p)),
          };
        },
      },
    };
    const report = await auditEvent({ inventory: stale, payments: s.payments }, s.eventId, { recheckDelayMs: 0 });
    expect(failing(report)).toEqual([]);
    expect(report.passes).toBe(2);
  });
});

interface Corruption {
  name: string;
  corrupt(s: Sale): Promise<string>;
  check: AuditCheckName;
}

const corruptions: Corruption[] = [
  {
    name: "a sold seat with no confirmed purchase",
    check: "sold_seats_match_purchases",
    corrupt: async (s) => {
      await updateItem(
        s,
        seatKey(s, "A-3-2"),
        "SET #status = :sold, purchaseId = :pid, holderId = :fan REMOVE GSI1PK, GSI1SK",
        { ":sold": "sold", ":pid": `${s.eventId}-ghost`, ":fan": "fan-ghost" },
        { "#status": "status" },
      );
      return "A-3-2";
    },
  },
  {
    name: "a sold seat sold to a failed purchase",
    check: "sold_seats_match_purchases",
    corrupt: async (s) => {
      await updateItem(
        s,
        seatKey(s, "A-3-1"),
        "SET #status = :sold, purchaseId = :pid REMOVE GSI2PK, GSI2SK, holdExpiresAt",
        { ":sold": "sold", ":pid": s.ids.declined },
        { "#status": "status" },
      );
      return "A-3-1";
    },
  },
  {
    name: "a sold seat that names no purchase",
    check: "seats_sold_once",
    corrupt: async (s) => {
      await updateItem(
        s,
        seatKey(s, "A-3-3"),
        "SET #status = :sold REMOVE GSI1PK, GSI1SK",
        { ":sold": "sold" },
        {
          "#status": "status",
        },
      );
      return "A-3-3";
    },
  },
  {
    name: "a confirmed purchase whose seat is not sold",
    check: "sold_seats_match_purchases",
    corrupt: async (s) => {
      await updateItem(
        s,
        seatKey(s, "A-1-2"),
        "SET #status = :available REMOVE purchaseId, soldAt",
        { ":available": "available" },
        { "#status": "status" },
      );
      return s.ids.seats2;
    },
  },
  {
    name: "two confirmed purchases naming the same seat",
    check: "seats_sold_once",
    corrupt: async (s) => {
      const purchaseId = `${s.eventId}-twin`;
      await s.doc.send(
        new PutCommand({
          TableName: s.tableName,
          Item: {
            ...keys.purchase(s.eventId, purchaseId),
            entity: "PURCHASE",
            eventId: s.eventId,
            purchaseId,
            holdId: "f".repeat(32),
            fanId: "fan-twin",
            status: "confirmed",
            seats: ["A-2-1"],
            amount: 15_000,
            createdAt: new Date().toISOString(),
            confirmedAt: new Date().toISOString(),
            // Confirmed, its booking not acknowledged yet: among the open purchases.
            outboxState: "unsent",
            GSI3PK: keys.openPurchasesPartition(s.eventId, purchaseShard(purchaseId)),
            GSI3SK: keys.openPurchaseSortKey(new Date().toISOString(), purchaseId),
          },
        }),
      );
      return "A-2-1";
    },
  },
  {
    name: "a general-admission area whose counts do not add up",
    check: "general_admission_bounds",
    corrupt: async (s) => {
      await updateItem(s, keys.generalAdmission(s.eventId, "GA"), "SET available = available + :one", { ":one": 1 });
      return "GA";
    },
  },
  {
    name: "a general-admission area with a negative count",
    check: "general_admission_bounds",
    corrupt: async (s) => {
      await updateItem(s, keys.generalAdmission(s.eventId, "GA"), "SET held = :minus, available = available + :two", {
        ":minus": -1,
        ":two": 3,
      });
      return "GA";
    },
  },
  {
    name: "general admission sold that no confirmed purchase bought",
    check: "general_admission_sold",
    corrupt: async (s) => {
      await updateItem(
        s,
        keys.generalAdmission(s.eventId, "GA"),
        "SET available = available - :one, sold = sold + :one",
        {
          ":one": 1,
        },
      );
      return "GA";
    },
  },
  {
    name: "a fan who bought more than maxSeatsPerFan",
    check: "fans_within_limit",
    corrupt: async (s) => {
      // fan-3 bought 3 places; an event that allows 2 per fan makes that one too many.
      await updateItem(s, keys.event(s.eventId), "SET maxSeatsPerFan = :two", { ":two": 2 });
      return "fan-3";
    },
  },
  {
    name: "a captured charge with no confirmed purchase",
    check: "captured_charges_confirmed",
    corrupt: async (s) => {
      const charge = await s.payments.charge(`${s.eventId}-stray`, 15_000, "tok_ok");
      if (charge.kind !== "charged") throw new Error("stray charge was not taken");
      return charge.chargeId;
    },
  },
  {
    name: "a captured charge for a failed purchase",
    check: "captured_charges_confirmed",
    corrupt: async (s) => {
      // A charged purchase written failed: the money is kept for nothing.
      await updateItem(
        s,
        keys.purchase(s.eventId, s.ids.seats1),
        "SET #status = :failed, GSI1SK = :sk",
        { ":failed": "failed", ":sk": keys.purchaseSortKey("failed", s.ids.seats1) },
        { "#status": "status" },
      );
      return s.chargeOf.get(s.ids.seats1)!;
    },
  },
  {
    name: "a captured charge of another amount than its purchase",
    check: "captured_charges_confirmed",
    corrupt: async (s) => {
      await updateItem(s, keys.purchase(s.eventId, s.ids.seats1), "SET amount = :amount", { ":amount": 14_999 });
      return s.chargeOf.get(s.ids.seats1)!;
    },
  },
  {
    name: "a refunded purchase whose charge was not refunded",
    check: "refunds_match_purchases",
    corrupt: async (s) => {
      const hold = held(
        await s.inventory.holds.holdSeats({ eventId: s.eventId, fanId: "fan-7", seatIds: ["B-2-1"], holdSeconds: 480 }),
      );
      const { purchaseId } = await buy(s, hold, "unrefunded");
      await updateItem(
        s,
        keys.purchase(s.eventId, purchaseId),
        "SET #status = :refunded, GSI1SK = :sk",
        { ":refunded": "refunded", ":sk": keys.purchaseSortKey("refunded", purchaseId) },
        { "#status": "status" },
      );
      return purchaseId;
    },
  },
  {
    name: "a refunded charge of a confirmed purchase",
    check: "refunds_match_purchases",
    corrupt: async (s) => {
      const chargeId = s.chargeOf.get(s.ids.seats2)!;
      expect(await s.payments.refund(chargeId)).toMatchObject({ kind: "refunded" });
      return chargeId;
    },
  },
  {
    name: "a confirmed purchase that was never charged",
    check: "confirmed_purchases_charged",
    corrupt: async (s) => {
      const hold = held(
        await s.inventory.holds.holdSeats({ eventId: s.eventId, fanId: "fan-8", seatIds: ["B-2-2"], holdSeconds: 480 }),
      );
      const purchaseId = `${s.eventId}-free`;
      expect(
        await s.inventory.purchases.createPending({
          eventId: s.eventId,
          holdId: hold.holdId,
          fanId: "fan-8",
          purchaseId,
        }),
      ).toMatchObject({
        ok: true,
      });
      expect(
        await s.inventory.purchases.confirm({ eventId: s.eventId, holdId: hold.holdId, fanId: "fan-8", purchaseId }),
      ).toMatchObject({ ok: true });
      return purchaseId;
    },
  },
];

describe("audit of a corrupted sale", () => {
  it.each(corruptions)("fails on $name, naming it", async ({ corrupt, check: name }) => {
    const s = await cleanSale();
    expect((await audit(s)).ok).toBe(true);
    const offender = await corrupt(s);
    const report = await audit(s);
    expect(report.ok).toBe(false);
    // Still there when read again: a finding, not a lagging index.
    expect(report.passes).toBe(2);
    const c = check(report, name);
    expect(c.status).toBe("fail");
    expect(c.offenders.map((o) => o.id)).toContain(offender);
    expect(c.offenderCount).toBeGreaterThanOrEqual(1);
  });

  it("caps the offenders it lists but counts them all", async () => {
    const s = await cleanSale();
    const free = ["B-1-2", "B-1-3", "B-1-4", "B-1-5", "B-2-3", "B-2-4"];
    for (const id of free) {
      await updateItem(
        s,
        seatKey(s, id),
        "SET #status = :sold, purchaseId = :pid REMOVE GSI1PK, GSI1SK",
        { ":sold": "sold", ":pid": `${s.eventId}-ghost` },
        { "#status": "status" },
      );
    }
    const report = await auditEvent({ inventory: s.inventory, payments: s.payments }, s.eventId, {
      maxOffenders: 4,
      recheckPasses: 0,
    });
    const c = check(report, "sold_seats_match_purchases");
    expect(c.offenders).toHaveLength(4);
    expect(c.offenderCount).toBe(free.length);
  });
});

function runCli(args: string[], env: Record<string, string>): Promise<RunOutput> {
  return runToExit("scripts/audit.ts", args, { ...process.env, LOG_LEVEL: "silent", ...env });
}

describe("npm run audit (the CLI, as a child process)", () => {
  // Five CLI runs, each a child Node loading tsx and the audit: ~2-5 s each alone, past the default
  // 60 s in a CI run whose box was loaded by another suite.
  it("exits 0 on a clean sale, 1 once it is corrupted, 2 on bad usage", { timeout: 180_000 }, async () => {
    const s = await cleanSale();
    const env = {
      DYNAMODB_ENDPOINT: inject("dynamoEndpoint"),
      DYNAMODB_TABLE: s.tableName,
      REDIS_URL: inject("redisUrl"),
    };
    const args = ["--event", s.eventId, "--payment-namespace", s.namespace];

    const clean = await runCli(args, env);
    expect(clean.stderr).not.toContain("could not");
    expect(clean.code).toBe(0);
    expect(clean.stdout).toContain("RESULT: PASS");
    expect(clean.stdout).toMatch(/No seat sold twice\s+PASS/);
    // the stranded figure the load kit's best scenario asks for, in the table too
    expect(clean.stdout).toMatch(/stranded seats\s+\d+/);

    const json = await runCli([...args, "--json", "--quiet"], env);
    expect(json.code).toBe(0);
    const report = JSON.parse(json.stdout) as AuditReport;
    expect(report).toMatchObject({ eventId: s.eventId, ok: true, paymentsChecked: true });
    expect(report.totals.charges?.captured.count).toBe(3);

    await updateItem(
      s,
      seatKey(s, "A-3-2"),
      "SET #status = :sold, purchaseId = :pid REMOVE GSI1PK, GSI1SK",
      { ":sold": "sold", ":pid": `${s.eventId}-ghost` },
      { "#status": "status" },
    );
    const corrupted = await runCli(args, env);
    expect(corrupted.code).toBe(1);
    expect(corrupted.stdout).toMatch(/Sold seats = seats of confirmed purchases\s+FAIL/);
    expect(corrupted.stdout).toContain(`A-3-2: sold to ${s.eventId}-ghost, which does not exist`);
    expect(corrupted.stdout).toContain("RESULT: FAIL");
    expect(corrupted.stderr).toContain("audit: seats");

    const noEvent = await runCli([], env);
    expect(noEvent.code).toBe(2);
    expect(noEvent.stderr).toContain("--event <eventId> is required");
    expect((await runCli([...args, "--bogus"], env)).code).toBe(2);
    expect((await runCli(["--event", "bad-id!"], env)).code).toBe(2);
    const unknown = await runCli(["--event", "nosuchevent", "--no-payments"], env);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain("no event nosuchevent");
    const noTable = await runCli(args, { ...env, DYNAMODB_TABLE: `missing_${randomUUID().slice(0, 8)}` });
    expect(noTable.code).toBe(2);
    expect(noTable.stderr).toContain("no table");
  });
});

describe("npm run audit with the provider's ledger in PAYMENT_REDIS_URL", () => {
  let ledgerRedis: SpawnedRedis | undefined;
  let ledger: Redis | undefined;
  afterAll(async () => {
    ledger?.disconnect();
    await ledgerRedis?.close();
  });

  it("reads the charges where the gateway keeps them, not from REDIS_URL", { timeout: 120_000 }, async () => {
    ledgerRedis = await spawnRedis();
    ledger = new Redis(ledgerRedis.url);
    const s = await cleanSale(ledger);
    const env = {
      DYNAMODB_ENDPOINT: inject("dynamoEndpoint"),
      DYNAMODB_TABLE: s.tableName,
      REDIS_URL: inject("redisUrl"),
      PAYMENT_REDIS_URL: ledgerRedis.url,
    };
    const out = await runCli(["--event", s.eventId, "--payment-namespace", s.namespace, "--json", "--quiet"], env);
    expect(out.stderr).toBe("");
    const report = JSON.parse(out.stdout) as AuditReport;
    expect(report.totals.charges?.captured.count).toBe(3);
    expect(failing(report)).toEqual([]);
    expect(out.code).toBe(0);
  });
});
