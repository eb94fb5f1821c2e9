/**
 * Abuse: a fan racing its own holds to get past maxSeatsPerFan (4), over HTTP, on a live on-sale.
 *
 * Several admitted fans each fire a burst of POST /v1/events/{e}/holds (1 or 2 seats, or 1-2
 * general-admission places, each request naming seats of its own), every request of every fan in
 * flight at once on real sockets, rate limits off (the limit must not depend on them). Then each
 * buys every hold it got, with double submits and a second purchase of the same hold, while it
 * fires more holds in parallel; then it queues again for a new session and fires a last burst.
 * Bystanders hold and buy alongside.
 *
 * What DynamoDB ends with (seats held by the fan, its live general-admission holds, its confirmed
 * purchases) is counted straight from the table, never from the answers: at no point more than 4
 * per fan, and the fan's ledger item agrees. Pending purchases are settled as the reconciler would
 * (purchases.resolve), then the audit runs (with the simulated provider's charges), including its
 * `fans_within_limit` check.
 */
import {
  admitFans,
  createTable,
  eventInput,
  type Gateway,
  listen,
  putEvent,
  startGateway,
  uniqueId,
} from "../gateway/harness.js";
import { DynamoDBDocumentClient, GetCommand, QueryCommand } from "@aws-sdk/lib-dynamodb";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { auditEvent } from "../../src/audit/audit.js";
import { createDynamoClient } from "../../src/dynamodb/client.js";
import { GSI2 } from "../../src/dynamodb/table.js";
import { countFan, toFanLedger } from "../../src/inventory/fans.js";
import { gaCounters, keys } from "../../src/inventory/keys.js";
import { createSimulatedProvider } from "../../src/payments/simulated.js";
import { auditFigures, recordScenario } from "./support/report.js";
import { scaled } from "./support/scale.js";

const MAX = 4;
/** Fans racing themselves, all at once. */
const ATTACKERS = scaled(3, 8);
/** Holds per attacker in the first burst; half as many in the two later ones. */
const BURST = scaled(40, 150);
const BYSTANDERS = scaled(6, 30);
const SEATS_PER_ROW = 20;
const SEATS_NEEDED = ATTACKERS * BURST * 2 * 2 + BYSTANDERS * 2 + SEATS_PER_ROW;
const SECTION = {
  id: "A",
  tier: "Floor",
  price: 9_000,
  rows: Math.ceil(SEATS_NEEDED / SEATS_PER_ROW),
  seatsPerRow: SEATS_PER_ROW,
};

let gw: Gateway;
let server: Awaited<ReturnType<typeof listen>>;
let redis: Redis;
let doc: DynamoDBDocumentClient;
let dynamo: ReturnType<typeof createDynamoClient>;
let tableName: string;

beforeAll(async () => {
  tableName = await createTable();
  // Long payment timeout: tok_ok always answers in time, so every purchase settles in its request.
  gw = await startGateway({ tableName, paymentTimeoutMs: 30_000 });
  server = await listen(gw);
  redis = new Redis(inject("redisUrl"));
  dynamo = createDynamoClient({ endpoint: inject("dynamoEndpoint"), region: "us-east-1" });
  doc = DynamoDBDocumentClient.from(dynamo);
});
afterAll(async () => {
  await server?.close();
  await gw?.close();
  redis?.disconnect();
  dynamo?.destroy();
});

interface Answer {
  status: number;
  body: {
    holdId?: string;
    seats?: string[];
    generalAdmission?: { id: string; quantity: number };
    status?: string;
    purchaseId?: string;
    error?: { code: string; details?: { limit?: number } };
  };
}

const tally = { requests: 0, byStatus: new Map<number, number>() };

/** One HTTP request over a real socket; every answer must be JSON (or an empty 204). */
async function call(
  method: string,
  path: string,
  token: string,
  json?: unknown,
  headers: Record<string, string> = {},
): Promise<Answer> {
  tally.requests++;
  const res = await fetch(`${server.url}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${token}`,
      ...(json !== undefined ? { "content-type": "application/json" } : {}),
      ...headers,
    },
    ...(json !== undefined ? { body: JSON.stringify(json) } : {}),
  });
  tally.byStatus.set(res.status, (tally.byStatus.get(res.status) ?? 0) + 1);
  const text = await res.text();
  return { status: res.status, body: text ? (JSON.parse(text) as Answer["body"]) : {} };
}

let seatCursor = 0;
const nextSeats = (n: number) =>
  Array.from({ length: n }, () => {
    const k = seatCursor++;
    if (k >= SECTION.rows * SEATS_PER_ROW) throw new Error("the section is too small for the scenario");
    return `A-${Math.floor(k / SEATS_PER_ROW) + 1}-${(k % SEATS_PER_ROW) + 1}`;
  });

/** The i-th request of a burst: a quarter general admission (1 or 2 places), a quarter 2 seats, the rest 1 seat. */
function holdBody(i: number): { seats: string[] } | { generalAdmission: { id: string; quantity: number } } {
  if (i % 4 === 0) return { generalAdmission: { id: "GA", quantity: i % 8 === 0 ? 2 : 1 } };
  return { seats: nextSeats(i % 4 === 1 ? 2 : 1) };
}

const sizeOf = (a: Answer) => (a.body.seats?.length ?? 0) + (a.body.generalAdmission?.quantity ?? 0);

/** What DynamoDB says a fan has now, read from the items themselves (not from any answer). */
/** 10,000 places: 16 counters (src/inventory/keys.ts gaCounters), so holds land on many. */
const GA_CAPACITY = 10_000;

async function holdingsOf(eventId: string, fanId: string, now = Date.now()) {
  const seats = new Map<string, string>();
  let cursor: string | undefined;
  do {
    const page = await gw.deps.inventory.seats.listSection({
      eventId,
      sectionId: "A",
      consistent: true,
      ...(cursor !== undefined ? { cursor } : {}),
    });
    for (const s of page?.seats ?? []) if (s.status === "held" && s.holderId) seats.set(s.id, s.holderId);
    cursor = page?.nextCursor;
  } while (cursor !== undefined);
  const heldSeats = [...seats.values()].filter((f) => f === fanId).length;

  // A standing hold's record sits in the expiry partition of the first counter it took from.
  let gaHeld = 0;
  for (let k = 0; k < gaCounters(GA_CAPACITY); k++) {
    let start: Record<string, unknown> | undefined;
    do {
      const out = await doc.send(
        new QueryCommand({
          TableName: tableName,
          IndexName: GSI2,
          KeyConditionExpression: "GSI2PK = :pk",
          ExpressionAttributeValues: { ":pk": keys.heldAdmissionsPartition(eventId, "GA", k) },
          ...(start ? { ExclusiveStartKey: start } : {}),
        }),
      );
      for (const h of out.Items ?? []) {
        if (h.fanId === fanId && h.status === "held" && Number(h.expiresAt) > now) gaHeld += Number(h.quantity);
      }
      start = out.LastEvaluatedKey;
    } while (start);
  }

  let bought = 0;
  let purchases: string | undefined;
  do {
    const page = await gw.deps.inventory.purchases.list({
      eventId,
      status: "confirmed",
      ...(purchases !== undefined ? { cursor: purchases } : {}),
    });
    for (const p of page.purchases) {
      if (p.fanId === fanId) bought += p.seats.length + (p.generalAdmission?.quantity ?? 0);
    }
    purchases = page.nextCursor;
  } while (purchases !== undefined);

  const ledgerItem = await doc.send(
    new GetCommand({ TableName: tableName, Key: keys.fan(eventId, fanId), ConsistentRead: true }),
  );
  const ledger = countFan(toFanLedger(ledgerItem.Item), now).counted;
  return { heldSeats, gaHeld, bought, total: heldSeats + gaHeld + bought, ledger };
}

describe("chaos: one fan racing its own holds past maxSeatsPerFan", () => {
  it("never holds plus buys more than 4, over every burst, purchase race and new session", async () => {
    const started = Date.now();
    const eventId = uniqueId("fl");
    const put = await putEvent(
      gw,
      eventId,
      eventInput({
        holdSeconds: 600,
        maxSeatsPerFan: MAX,
        sections: [SECTION],
        generalAdmission: [{ id: "GA", tier: "Standing", price: 4_000, capacity: GA_CAPACITY }],
      }),
    );
    expect(put.status).toBe(201);
    const attackers = Array.from({ length: ATTACKERS }, (_, i) => `racer${i}`);
    const bystanders = Array.from({ length: BYSTANDERS }, (_, i) => `calm${i}`);
    const admitted = await admitFans(gw, eventId, [...attackers, ...bystanders]);
    const tokenOf = new Map(admitted.map((f) => [f.fanId, f.accessToken]));
    const holdsPath = `/v1/events/${eventId}/holds`;

    // --- Burst 1: every attacker's holds and every bystander's, all in flight at once ---
    const burst1 = await Promise.all([
      ...attackers.flatMap((fan) =>
        Array.from({ length: BURST }, (_, i) =>
          call("POST", holdsPath, tokenOf.get(fan)!, holdBody(i)).then((a) => ({ fan, i, a })),
        ),
      ),
      ...bystanders.map((fan) =>
        call("POST", holdsPath, tokenOf.get(fan)!, { seats: nextSeats(2) }).then((a) => ({ fan, i: 1, a })),
      ),
    ]);
    const grantedOf = new Map<string, Answer[]>();
    for (const { fan, i, a } of burst1) {
      if (a.status === 201) grantedOf.set(fan, [...(grantedOf.get(fan) ?? []), a]);
      else if (a.status === 422) {
        expect(a.body.error).toMatchObject({ code: "seat_limit_exceeded", details: { limit: MAX } });
      } else expect(a.status, `${fan} request ${i}: ${JSON.stringify(a.body)}`).toBe(503);
    }
    for (const fan of bystanders) expect(grantedOf.get(fan)?.length ?? 0, fan).toBeLessThanOrEqual(1);
    const afterBurst = new Map<string, number>();
    for (const fan of attackers) {
      const granted = (grantedOf.get(fan) ?? []).reduce((n, a) => n + sizeOf(a), 0);
      expect(granted, `${fan} granted by the answers`).toBeLessThanOrEqual(MAX);
      const db = await holdingsOf(eventId, fan);
      expect(db.total, `${fan} in DynamoDB: ${JSON.stringify(db)}`).toBeLessThanOrEqual(MAX);
      expect(db.ledger, `${fan} ledger`).toBe(db.total);
      // A 503 may have held something its fan was not told about; the table can only have more.
      expect(db.total).toBeGreaterThanOrEqual(granted);
      afterBurst.set(fan, db.total);
    }

    // --- Burst 2: buy every hold (double submit + a second purchase of the same hold) while the
    // same fans fire more holds; bystanders buy theirs ---
    const purchase = (fan: string, holdId: string, key: string) =>
      call(
        "POST",
        `/v1/events/${eventId}/holds/${holdId}/purchase`,
        tokenOf.get(fan)!,
        { paymentToken: "tok_ok" },
        { "idempotency-key": key },
      ).then((a) => ({ fan, a, kind: "purchase" as const }));
    const burst2 = await Promise.all([
      ...[...grantedOf].flatMap(([fan, holds]) =>
        holds.flatMap((h) => [
          purchase(fan, h.body.holdId!, `k-${h.body.holdId}`),
          purchase(fan, h.body.holdId!, `k-${h.body.holdId}`),
          purchase(fan, h.body.holdId!, `k2-${h.body.holdId}`),
        ]),
      ),
      ...attackers.flatMap((fan) =>
        Array.from({ length: BURST / 2 }, (_, i) =>
          call("POST", holdsPath, tokenOf.get(fan)!, holdBody(i + 1)).then((a) => ({ fan, a, kind: "hold" as const })),
        ),
      ),
    ]);
    const lateHolds = new Map<string, Answer[]>();
    for (const { fan, a, kind } of burst2) {
      if (kind === "hold") {
        if (a.status === 201) lateHolds.set(fan, [...(lateHolds.get(fan) ?? []), a]);
        // Refused by the limit, or by the session the fan's first confirmed purchase ended.
        else expect([401, 422, 503], JSON.stringify(a.body)).toContain(a.status);
      } else {
        // Confirmed (201), or the other purchase of the same hold won (409), or pending (202).
        expect([201, 202, 409, 503], JSON.stringify(a.body)).toContain(a.status);
      }
    }
    const afterRace = new Map<string, number>();
    for (const fan of attackers) {
      const db = await holdingsOf(eventId, fan);
      afterRace.set(fan, db.total);
      expect(db.total, `${fan} after the purchase race: ${JSON.stringify(db)}`).toBeLessThanOrEqual(MAX);
      expect(db.ledger, `${fan} ledger`).toBe(db.total);
      // Nobody who was at the limit got anything more.
      if (afterBurst.get(fan) === MAX) expect(lateHolds.get(fan) ?? [], fan).toEqual([]);
    }

    // --- Burst 3: a new session (queue again) changes nothing: the ledger is per fan and event ---
    const rejoined = await admitFans(gw, eventId, attackers);
    for (const f of rejoined) tokenOf.set(f.fanId, f.accessToken);
    const burst3 = await Promise.all(
      attackers.flatMap((fan) =>
        Array.from({ length: BURST / 2 }, (_, i) =>
          call("POST", holdsPath, tokenOf.get(fan)!, holdBody(i + 2)).then((a) => ({ fan, a })),
        ),
      ),
    );
    for (const { fan, a } of burst3) {
      expect([201, 422, 503], JSON.stringify(a.body)).toContain(a.status);
      // A fan at its limit (bought, or still holding) gets nothing more in a new session.
      if (afterRace.get(fan) === MAX) expect(a.status, `${fan}: ${JSON.stringify(a.body)}`).not.toBe(201);
      if (a.status === 422) expect(a.body.error?.details?.limit).toBe(MAX);
    }
    for (const fan of attackers) {
      const db = await holdingsOf(eventId, fan);
      expect(db.total, `${fan} after a new session: ${JSON.stringify(db)}`).toBeLessThanOrEqual(MAX);
      expect(db.ledger, `${fan} ledger`).toBe(db.total);
    }

    // --- Bystanders were not limited by anyone: each got and bought its two seats ---
    for (const fan of bystanders) {
      const db = await holdingsOf(eventId, fan);
      if ((grantedOf.get(fan)?.length ?? 0) === 1) expect(db.bought + db.heldSeats, fan).toBe(2);
    }

    // --- Settle what is still pending, as the reconciler would, then audit ---
    const pending = await gw.deps.inventory.purchases.list({ eventId, status: "pending" });
    for (const p of pending.purchases) await gw.deps.purchases.resolve(eventId, p.purchaseId);
    const report = await auditEvent(
      { inventory: gw.deps.inventory, payments: createSimulatedProvider({ redis }) },
      eventId,
    );
    const { oversells, lostPurchases } = auditFigures(report);
    const fanCheck = report.checks.find((c) => c.name === "fans_within_limit");
    let serverErrors = 0;
    let unavailable = 0;
    for (const [status, n] of tally.byStatus) {
      if (status === 503) unavailable += n;
      else if (status >= 500) serverErrors += n;
    }
    const attackerHolds = attackers.length * BURST * 2;
    recordScenario({
      scenario: "fan limit: parallel holds",
      faults: `${ATTACKERS} fans x ${attackerHolds / ATTACKERS} parallel holds (max ${MAX}), purchases racing holds, new sessions; rate limits off`,
      requests: tally.requests,
      // auditFigures counts a fan past its limit as an oversell: seats sold beyond what the event allows.
      oversells,
      lostPurchases,
      serverErrors,
      unavailable,
      notes: `${[...tally.byStatus].map(([s, n]) => `${s}: ${n}`).join(", ")}; ${report.totals.purchases.confirmed.count} confirmed; ${((Date.now() - started) / 1000).toFixed(1)} s`,
    });
    if (!report.ok)
      throw new Error(
        JSON.stringify(
          report.checks.filter((c) => c.status === "fail"),
          null,
          2,
        ),
      );
    expect(fanCheck?.status).toBe("pass");
    expect(oversells).toBe(0);
    expect(lostPurchases).toBe(0);
    expect(serverErrors).toBe(0);
  }, 600_000);
});
