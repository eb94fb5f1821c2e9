import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createSimulatedProvider } from "../../src/payments/simulated.js";
import { purchaseFenceKey, STALE_CLAIM_MS } from "../../src/purchases/fence.js";
import {
  ADMIN_TOKEN,
  type AdmittedFan,
  admitFans,
  createTable,
  eventInput,
  type Gateway,
  putEvent,
  expectAuditPasses,
  startGateway,
  uniqueId,
} from "../gateway/harness.js";
import { createBookingsQueue, bookingJobId } from "../../src/workers/outbox.js";
import { type ClaimedDatabase, claimRedisDatabase } from "../support/worker-process.js";

let gw: Gateway;
let redis: Redis;
let db: ClaimedDatabase;
const charges = () => createSimulatedProvider({ redis }).listCharges();

// A Redis database of its own: the queue names are fixed, so another file's workers on the shared
// database would take this file's reconcile jobs (and this file's workers theirs). The payment
// timeout leaves room for a loaded machine: only tok_timeout (10 s) should outlast it.
beforeAll(async () => {
  db = await claimRedisDatabase();
  redis = new Redis(db.url);
  gw = await startGateway({ tableName: await createTable(), redisUrl: db.url, paymentTimeoutMs: 3_000, workers: true });
});
afterAll(async () => {
  await gw?.close();
  redis?.disconnect();
  await db?.release();
});

async function holdSeats(fan: AdmittedFan, eventId: string, seats: string[]) {
  const res = await gw.request(`/v1/events/${eventId}/holds`, {
    method: "POST",
    token: fan.accessToken,
    json: { seats },
  });
  expect(res.status).toBe(201);
  return (await res.json()) as { holdId: string; amount: number };
}

/** The purchase fence of the fan's session (src/purchases/fence.ts). */
function fenceOf(eventId: string, fan: AdmittedFan): string {
  const check = gw.deps.waitingRoom.verifyAccessToken(fan.accessToken, eventId);
  if (!check.ok) throw new Error(`token: ${check.reason}`);
  return purchaseFenceKey({ eventId, holdId: "", fanId: fan.fanId, sessionId: check.claims.sessionId });
}

function buy(fan: AdmittedFan, eventId: string, holdId: string, key: string, paymentToken: string) {
  return gw.request(`/v1/events/${eventId}/holds/${holdId}/purchase`, {
    method: "POST",
    token: fan.accessToken,
    headers: { "idempotency-key": key },
    json: { paymentToken },
  });
}

async function pollPurchase(fan: AdmittedFan, purchaseId: string, until: (status: string) => boolean) {
  for (let i = 0; i < 200; i++) {
    const body = (await (await gw.request(`/v1/purchases/${purchaseId}`, { token: fan.accessToken })).json()) as {
      status: string;
    };
    if (until(body.status)) return body;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`purchase ${purchaseId} never reached the expected status`);
}

describe("purchases over HTTP (real Redis, local DynamoDB, BullMQ workers)", () => {
  it("the whole fan journey ends in a confirmed purchase, the seat sold and the session ended", async () => {
    const eventId = uniqueId();
    expect((await putEvent(gw, eventId)).status).toBe(201);
    const [fan] = await admitFans(gw, eventId, ["buyer"]);
    const hold = await holdSeats(fan!, eventId, ["A-3-4", "A-3-5"]);

    const res = await buy(fan!, eventId, hold.holdId, "key-1", "tok_ok");
    expect(res.status).toBe(201);
    const purchase = (await res.json()) as { purchaseId: string; status: string; seats: string[]; amount: number };
    expect(purchase).toMatchObject({ status: "confirmed", seats: ["A-3-4", "A-3-5"], amount: 30000 });

    const again = await buy(fan!, eventId, hold.holdId, "key-1", "tok_ok");
    expect(again.status).toBe(201);
    expect(((await again.json()) as { purchaseId: string }).purchaseId).toBe(purchase.purchaseId);

    const got = await gw.request(`/v1/purchases/${purchase.purchaseId}`, { token: fan!.accessToken });
    expect(got.status).toBe(200);
    expect(await got.json()).toMatchObject({ purchaseId: purchase.purchaseId, status: "confirmed" });

    const seats = (await (await gw.request(`/v1/events/${eventId}/sections/A/seats`)).json()) as {
      seats: { id: string; status: string }[];
    };
    expect(seats.seats.filter((s) => s.status === "sold").map((s) => s.id)).toEqual(["A-3-4", "A-3-5"]);

    const stats = (await (
      await gw.request(`/v1/admin/events/${eventId}/stats`, { token: ADMIN_TOKEN })
    ).json()) as Record<string, unknown>;
    expect(stats).toMatchObject({
      completed: 1,
      active: 0,
      seats: { sold: 2 },
      purchases: { confirmed: 1, pending: 0 },
    });
    // The session ended with the purchase: the same token can no longer hold.
    const after = await gw.request(`/v1/events/${eventId}/holds`, {
      method: "POST",
      token: fan!.accessToken,
      json: { seats: ["A-4-1"] },
    });
    expect(after.status).toBe(401);
  });

  it("the same purchase sent 10 times at once with one key makes one charge and one purchase", async () => {
    const eventId = uniqueId();
    expect((await putEvent(gw, eventId)).status).toBe(201);
    const [fan] = await admitFans(gw, eventId, ["eager"]);
    const hold = await holdSeats(fan!, eventId, ["B-1-1"]);
    const responses = await Promise.all(
      Array.from({ length: 10 }, () => buy(fan!, eventId, hold.holdId, "double-click", "tok_ok")),
    );
    const bodies = (await Promise.all(responses.map((r) => r.json()))) as { purchaseId: string; status: string }[];
    expect(responses.map((r) => r.status)).toEqual(Array(10).fill(201));
    expect(new Set(bodies.map((b) => b.purchaseId)).size).toBe(1);
    const mine = (await charges()).filter((c) => c.idempotencyKey.startsWith(`${eventId}-`));
    expect(mine).toHaveLength(1);
    const stats = (await (await gw.request(`/v1/admin/events/${eventId}/stats`, { token: ADMIN_TOKEN })).json()) as {
      purchases: Record<string, number>;
    };
    expect(stats.purchases).toMatchObject({ confirmed: 1, pending: 0, failed: 0 });

    // The outbox publisher (a worker) emits exactly one BookingConfirmed for it.
    const bookings = createBookingsQueue(redis);
    try {
      const jobId = bookingJobId(bodies[0]!.purchaseId);
      let job = await bookings.getJob(jobId);
      for (let i = 0; !job && i < 100; i++) {
        await new Promise((r) => setTimeout(r, 100));
        job = await bookings.getJob(jobId);
      }
      expect(job?.data).toMatchObject({ payload: { purchaseId: bodies[0]!.purchaseId, seats: ["B-1-1"] } });
    } finally {
      await bookings.close();
    }
    await expectAuditPasses(gw, eventId, redis);
  });

  it("one hold bought 10 times at once under 10 keys: one charge, no refund; the others 409 and charged nothing", async () => {
    const eventId = uniqueId();
    expect((await putEvent(gw, eventId)).status).toBe(201);
    const [fan] = await admitFans(gw, eventId, ["clicker"]);
    const hold = await holdSeats(fan!, eventId, ["B-1-2"]);
    const responses = await Promise.all(
      Array.from({ length: 10 }, (_, i) => buy(fan!, eventId, hold.holdId, `click-${i}`, "tok_ok")),
    );
    const bodies = (await Promise.all(responses.map((r) => r.json()))) as {
      purchaseId?: string;
      error?: { code: string; details?: { refunded?: boolean } };
    }[];
    const statuses = responses.map((r) => r.status);
    expect(statuses.filter((s) => s === 201)).toHaveLength(1);
    for (const [i, body] of bodies.entries()) {
      if (statuses[i] === 201) continue;
      // Turned away while the first was under way (409), or after it had bought the hold and so
      // ended the session (401): never charged, so never refunded.
      expect([`409 purchase_in_progress`, `409 hold_expired`, `401 unauthenticated`]).toContain(
        `${statuses[i]} ${body.error?.code}`,
      );
      expect(body.error?.details?.refunded).toBeUndefined();
    }
    const mine = (await charges()).filter((c) => c.idempotencyKey.startsWith(`${eventId}-`));
    expect(mine).toHaveLength(1);
    expect(mine[0]!.refunded).toBe(false);

    // Once the hold is bought (the session ended with it), another key starts nothing.
    const later = await buy(fan!, eventId, hold.holdId, "click-later", "tok_ok");
    expect(later.status).toBe(401);
    expect((await charges()).filter((c) => c.idempotencyKey.startsWith(`${eventId}-`))).toHaveLength(1);
    await expectAuditPasses(gw, eventId, redis);
  });

  it("another fan naming the hold's id never holds its fence: the owner buys while they are refused", async () => {
    const eventId = uniqueId();
    expect((await putEvent(gw, eventId)).status).toBe(201);
    const [owner, other] = await admitFans(gw, eventId, ["owner", "other"]);
    const hold = await holdSeats(owner!, eventId, ["A-4-4"]);
    const [mine, ...theirs] = await Promise.all([
      buy(owner!, eventId, hold.holdId, "mine", "tok_ok"),
      ...Array.from({ length: 10 }, (_, i) => buy(other!, eventId, hold.holdId, `theirs-${i}`, "tok_ok")),
    ]);
    expect(mine!.status).toBe(201);
    // Theirs meet the store's refusal, or their own fence (their ten keys at once): never the owner's.
    for (const res of theirs) {
      expect(res.status).toBe(409);
      expect(["hold_not_owned", "purchase_in_progress"]).toContain(
        ((await res.json()) as { error: { code: string } }).error.code,
      );
    }
    expect((await charges()).filter((c) => c.idempotencyKey.startsWith(`${eventId}-`))).toHaveLength(1);
  });

  it("two holds bought at once in one session: one sale, the other 409 purchase_in_progress or 401, one charge", async () => {
    const eventId = uniqueId();
    expect((await putEvent(gw, eventId)).status).toBe(201);
    const [fan] = await admitFans(gw, eventId, ["two-holds"]);
    const first = await holdSeats(fan!, eventId, ["A-4-1"]);
    const second = await holdSeats(fan!, eventId, ["A-4-9"]);
    // Both at once, each under its own key (two tabs' checkouts).
    const answers = await Promise.all([
      buy(fan!, eventId, first.holdId, "tab-1", "tok_ok"),
      buy(fan!, eventId, second.holdId, "tab-2", "tok_ok"),
    ]);
    const statuses = answers.map((r) => r.status).sort();
    expect(statuses[0]).toBe(201);
    expect([401, 409]).toContain(statuses[1]);
    const refused = answers.find((r) => r.status !== 201)!;
    const code = ((await refused.json()) as { error: { code: string } }).error.code;
    expect(code).toBe(refused.status === 409 ? "purchase_in_progress" : "unauthenticated");
    // The session ended with the sale: the other hold cannot be bought with it afterwards either.
    const other = answers[0]!.status === 201 ? second : first;
    expect((await buy(fan!, eventId, other.holdId, "tab-again", "tok_ok")).status).toBe(401);
    const mine = (await charges()).filter((c) => c.idempotencyKey.startsWith(`${eventId}-`));
    expect(mine.map((c) => c.refunded)).toEqual([false]);
    await expectAuditPasses(gw, eventId, redis);
  });

  it("a purchase left pending keeps its hold: another key is 409 purchase_in_progress until it ends", async () => {
    const eventId = uniqueId();
    expect((await putEvent(gw, eventId)).status).toBe(201);
    const [fan] = await admitFans(gw, eventId, ["waiter"]);
    const hold = await holdSeats(fan!, eventId, ["A-5-5"]);
    const slow = await buy(fan!, eventId, hold.holdId, "slow-first", "tok_timeout");
    expect(slow.status).toBe(202);
    const { purchaseId } = (await slow.json()) as { purchaseId: string };
    const second = await buy(fan!, eventId, hold.holdId, "impatient", "tok_ok");
    expect(second.status).toBe(409);
    expect(((await second.json()) as { error: { code: string } }).error.code).toBe("purchase_in_progress");
    // Repeating the first request is how to learn its outcome, as the 409 says.
    expect((await buy(fan!, eventId, hold.holdId, "slow-first", "tok_timeout")).status).toBe(202);
    // The first ends (the reconciler confirms it, the session with it): a new key starts nothing.
    expect((await pollPurchase(fan!, purchaseId, (s) => s !== "pending")).status).toBe("confirmed");
    // The reconciler that ended it gave the hold's fence back too.
    const fence = fenceOf(eventId, fan!);
    for (let i = 0; i < 50 && (await redis.exists(fence)) === 1; i++) await new Promise((r) => setTimeout(r, 20));
    expect(await redis.exists(fence)).toBe(0);
    const third = await buy(fan!, eventId, hold.holdId, "after", "tok_ok");
    expect(third.status).toBe(401);
    const mine = (await charges()).filter((c) => c.idempotencyKey.startsWith(`${eventId}-`));
    expect(mine.map((c) => c.refunded)).toEqual([false]);
  });

  it("a fence left by a request that died before writing its purchase: turned away at first, taken over once stale", async () => {
    const eventId = uniqueId();
    expect((await putEvent(gw, eventId)).status).toBe(201);
    const [fan] = await admitFans(gw, eventId, ["survivor"]);
    const hold = await holdSeats(fan!, eventId, ["A-5-6"]);
    const fence = fenceOf(eventId, fan!);
    // A claim just made, by a purchase that was never written: it may still be on its way.
    await redis.set(fence, `${eventId}-ghost|${Date.now()}`, "PX", 60_000);
    const early = await buy(fan!, eventId, hold.holdId, "early", "tok_ok");
    expect(early.status).toBe(409);
    expect(((await early.json()) as { error: { code: string } }).error.code).toBe("purchase_in_progress");
    // The same claim, older than STALE_CLAIM_MS: its request died; the fence is taken over.
    await redis.set(fence, `${eventId}-ghost|${Date.now() - STALE_CLAIM_MS - 1_000}`, "PX", 60_000);
    expect((await buy(fan!, eventId, hold.holdId, "after-the-ghost", "tok_ok")).status).toBe(201);
    // Given back once the purchase ended (after the answer: the release is not awaited).
    for (let i = 0; i < 50 && (await redis.exists(fence)) === 1; i++) await new Promise((r) => setTimeout(r, 20));
    expect(await redis.exists(fence)).toBe(0);
  });

  it("after the session expired: the same key still gets its stored answer and the purchase reads; a new key is 401", async () => {
    const eventId = uniqueId();
    const input = eventInput();
    expect(
      (await putEvent(gw, eventId, { ...input, waitingRoom: { ...input.waitingRoom, sessionSeconds: 2 } })).status,
    ).toBe(201);
    const [fan] = await admitFans(gw, eventId, ["expiring"]);
    const hold = await holdSeats(fan!, eventId, ["B-2-5"]);
    const declined = await buy(fan!, eventId, hold.holdId, "before-expiry", "tok_decline");
    expect(declined.status).toBe(402);
    const { purchaseId } = ((await declined.json()) as { error: { details: { purchaseId: string } } }).error.details;
    // Past the token's expiry (the session's, rounded up to the second).
    const claims = gw.deps.waitingRoom.verifyAccessToken(fan!.accessToken, eventId);
    if (!claims.ok) throw new Error(`token: ${claims.reason}`);
    await new Promise((r) => setTimeout(r, Math.max(0, claims.claims.expiresAt.getTime() - Date.now()) + 1_100));
    expect(gw.deps.waitingRoom.verifyAccessToken(fan!.accessToken, eventId)).toEqual({ ok: false, reason: "expired" });

    const replay = await buy(fan!, eventId, hold.holdId, "before-expiry", "tok_decline");
    expect(replay.status).toBe(402);
    const read = await gw.request(`/v1/purchases/${purchaseId}`, { token: fan!.accessToken });
    expect(read.status).toBe(200);
    expect(((await read.json()) as { status: string }).status).toBe("failed");
    const fresh = await buy(fan!, eventId, hold.holdId, "after-expiry", "tok_ok");
    expect(fresh.status).toBe(401);
    expect(((await fresh.json()) as { error: { message: string } }).error.message).toMatch(/expired/);
    // Nor does an expired token hold anything.
    const held = await gw.request(`/v1/events/${eventId}/holds`, {
      method: "POST",
      token: fan!.accessToken,
      json: { seats: ["B-2-6"] },
    });
    expect(held.status).toBe(401);
    expect((await charges()).filter((c) => c.idempotencyKey.startsWith(`${eventId}-`))).toHaveLength(0);
  });

  it("the same key with another body is 422; a declined card is 402 and the hold stays; a provider error charges nothing", async () => {
    const eventId = uniqueId();
    expect((await putEvent(gw, eventId)).status).toBe(201);
    const [fan, rival] = await admitFans(gw, eventId, ["decliner", "rival"]);
    const hold = await holdSeats(fan!, eventId, ["B-2-1"]);

    const declined = await buy(fan!, eventId, hold.holdId, "k1", "tok_decline");
    expect(declined.status).toBe(402);
    expect(((await declined.json()) as { error: { code: string } }).error.code).toBe("payment_declined");
    expect((await buy(fan!, eventId, hold.holdId, "k1", "tok_decline")).status).toBe(402);
    const reused = await buy(fan!, eventId, hold.holdId, "k1", "tok_ok");
    expect(reused.status).toBe(422);
    expect(((await reused.json()) as { error: { code: string } }).error.code).toBe("idempotency_key_reused");

    // The hold stays after a decline: the rival still cannot take the seat.
    const stolen = await gw.request(`/v1/events/${eventId}/holds`, {
      method: "POST",
      token: rival!.accessToken,
      json: { seats: ["B-2-1"] },
    });
    expect(stolen.status).toBe(409);

    const error = await buy(fan!, eventId, hold.holdId, "k2", "tok_error");
    expect(error.status).toBe(503);
    const ok = await buy(fan!, eventId, hold.holdId, "k3", "tok_ok");
    expect(ok.status).toBe(201);
    const mine = (await charges()).filter((c) => c.idempotencyKey.startsWith(`${eventId}-`));
    expect(mine).toHaveLength(1);
  });

  it("tok_timeout answers 202 pending, then the reconciler confirms it", async () => {
    const eventId = uniqueId();
    expect((await putEvent(gw, eventId)).status).toBe(201);
    const [fan] = await admitFans(gw, eventId, ["patient"]);
    const hold = await holdSeats(fan!, eventId, ["A-5-1"]);
    const res = await buy(fan!, eventId, hold.holdId, "slow", "tok_timeout");
    expect(res.status).toBe(202);
    const { purchaseId, status } = (await res.json()) as { purchaseId: string; status: string };
    expect(status).toBe("pending");
    const done = await pollPurchase(fan!, purchaseId, (s) => s !== "pending");
    expect(done.status).toBe("confirmed");
    const mine = (await charges()).filter((c) => c.idempotencyKey === purchaseId);
    expect(mine).toHaveLength(1);
    expect(mine[0]!.refunded).toBe(false);
  });

  it("tok_timeout with the hold expiring meanwhile ends refunded, and the seat is free again", async () => {
    const eventId = uniqueId();
    expect((await putEvent(gw, eventId, eventInput({ holdSeconds: 1 }))).status).toBe(201);
    const [fan, next] = await admitFans(gw, eventId, ["late", "next"]);
    const hold = await holdSeats(fan!, eventId, ["A-5-2"]);
    const res = await buy(fan!, eventId, hold.holdId, "slow-late", "tok_timeout");
    expect(res.status).toBe(202);
    const { purchaseId } = (await res.json()) as { purchaseId: string };
    const done = await pollPurchase(fan!, purchaseId, (s) => s !== "pending");
    expect(done.status).toBe("refunded");
    const mine = (await charges()).filter((c) => c.idempotencyKey === purchaseId);
    expect(mine).toHaveLength(1);
    expect(mine[0]!.refunded).toBe(true);
    const retake = await gw.request(`/v1/events/${eventId}/holds`, {
      method: "POST",
      token: next!.accessToken,
      json: { seats: ["A-5-2"] },
    });
    expect(retake.status).toBe(201);
  });
});
