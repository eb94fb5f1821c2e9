/**
 * A payment webhook delivered again and again, concurrently (providers deliver at least once, and
 * retry): one effect. Through the gateway app, with a tok_timeout purchase that only the webhook
 * resolves (no workers, so no reconciler).
 */
import {
  type AdmittedFan,
  admitFans,
  createTable,
  eventInput,
  expectAuditPasses,
  type Gateway,
  metricTotal,
  putEvent,
  SECRET,
  startGateway,
  uniqueId,
} from "../gateway/harness.js";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { derivedWebhookSecret } from "../../src/gateway.js";
import { createSimulatedProvider } from "../../src/payments/simulated.js";
import {
  signWebhook,
  signWebhookEvent,
  WEBHOOK_SIGNATURE_HEADER,
  type WebhookEvent,
} from "../../src/payments/webhook.js";

let gw: Gateway;
let redis: Redis;

beforeAll(async () => {
  redis = new Redis(inject("redisUrl"));
  gw = await startGateway({ tableName: await createTable(), paymentTimeoutMs: 300, workers: false });
});
afterAll(async () => {
  await gw?.close();
  redis?.disconnect();
});

const secret = derivedWebhookSecret(SECRET);

function deliver(body: string, signature: string) {
  return gw.request("/v1/payments/webhook", {
    method: "POST",
    headers: { "content-type": "application/json", [WEBHOOK_SIGNATURE_HEADER]: signature },
    body,
  });
}

async function deliverEvent(event: WebhookEvent) {
  const { body, signature } = signWebhookEvent(secret, event);
  const res = await deliver(body, signature);
  return { status: res.status, body: (await res.json()) as { received?: boolean; duplicate?: boolean } };
}

async function pendingPurchase(eventId: string, fan: AdmittedFan, seats: string[]) {
  const held = await gw.request(`/v1/events/${eventId}/holds`, {
    method: "POST",
    token: fan.accessToken,
    json: { seats },
  });
  expect(held.status).toBe(201);
  const { holdId } = (await held.json()) as { holdId: string };
  const res = await gw.request(`/v1/events/${eventId}/holds/${holdId}/purchase`, {
    method: "POST",
    token: fan.accessToken,
    headers: { "idempotency-key": "checkout-1" },
    json: { paymentToken: "tok_timeout" },
  });
  expect(res.status).toBe(202);
  return (await res.json()) as { purchaseId: string; status: string };
}

describe("a duplicated payment webhook", () => {
  it("confirms the purchase once: one outbox record, the seat sold once, duplicates answered as such", async () => {
    const eventId = uniqueId("wh");
    expect((await putEvent(gw, eventId)).status).toBe(201);
    const [fan] = await admitFans(gw, eventId, ["webhook-fan"]);
    const purchase = await pendingPurchase(eventId, fan!, ["A-2-3", "A-2-4"]);
    expect(purchase.status).toBe("pending");

    // The provider charged at once; only its answer was late. The webhook names that charge.
    const charges = (await createSimulatedProvider({ redis }).listCharges()).filter(
      (c) => c.idempotencyKey === purchase.purchaseId,
    );
    expect(charges).toHaveLength(1);
    const charge = charges[0]!;
    const confirmedBefore = await metricTotal(gw, "gateway_purchases_total", { outcome: "confirmed" });
    const event: WebhookEvent = {
      id: uniqueId("evt_"),
      type: "charge.succeeded",
      data: { idempotencyKey: purchase.purchaseId, chargeId: charge.chargeId, amount: charge.amount },
    };

    // The provider's event, five copies at once, and at the same moment five copies of a second
    // event for the same charge (another id, as a provider's resend may carry): one of each is
    // processed, and the two that are race to confirm.
    const resent: WebhookEvent = { ...event, id: uniqueId("evt_") };
    const burst = await Promise.all(
      [event, resent].flatMap((e) =>
        Array.from({ length: 5 }, () => deliverEvent(e).then((r) => ({ ...r, id: e.id }))),
      ),
    );
    expect(burst.map((r) => r.status)).toEqual(Array(10).fill(200));
    for (const id of [event.id, resent.id]) {
      const mine = burst.filter((r) => r.id === id);
      expect(
        mine.filter((r) => r.body.duplicate === false),
        id,
      ).toHaveLength(1);
      expect(
        mine.filter((r) => r.body.duplicate === true),
        id,
      ).toHaveLength(4);
    }
    // And once more later, signed again (a provider's retry carries a fresh timestamp).
    expect(await deliverEvent(event)).toEqual({ status: 200, body: { received: true, duplicate: true } });

    // One effect: the purchase confirmed, one outbox record, both seats sold once, to it.
    const stored = (await gw.deps.inventory.purchases.get({ eventId, purchaseId: purchase.purchaseId }))!;
    expect(stored).toMatchObject({ status: "confirmed", seats: ["A-2-3", "A-2-4"] });
    const outbox = await gw.deps.inventory.outbox.listUnsent({ eventId });
    expect(outbox.map((o) => o.purchaseId)).toEqual([purchase.purchaseId]);
    const sold = (await gw.deps.inventory.seats.listSection({ eventId, sectionId: "A" }))!.seats.filter(
      (s) => s.status === "sold",
    );
    expect(sold.map((s) => [s.id, s.purchaseId])).toEqual([
      ["A-2-3", purchase.purchaseId],
      ["A-2-4", purchase.purchaseId],
    ]);
    expect(await gw.deps.inventory.purchases.count({ eventId })).toEqual({
      pending: 0,
      confirmed: 1,
      failed: 0,
      refunded: 0,
    });
    expect(await metricTotal(gw, "gateway_purchases_total", { outcome: "confirmed" })).toBe(confirmedBefore + 1);
    const after = (await createSimulatedProvider({ redis }).listCharges()).filter(
      (c) => c.idempotencyKey === purchase.purchaseId,
    );
    expect(after).toEqual([charge]);

    // The fan's view agrees.
    const view = await gw.request(`/v1/purchases/${purchase.purchaseId}`, { token: fan!.accessToken });
    expect(view.status).toBe(200);
    expect(await view.json()).toMatchObject({ purchaseId: purchase.purchaseId, status: "confirmed" });
    await expectAuditPasses(gw, eventId, redis);
  });

  it("refuses a bad signature with 401 and a body that is not a payment event with 400, without remembering them", async () => {
    const eventId = uniqueId("wh");
    expect((await putEvent(gw, eventId)).status).toBe(201);
    const [fan] = await admitFans(gw, eventId, ["unsigned-fan"]);
    const purchase = await pendingPurchase(eventId, fan!, ["B-1-5"]);
    const event: WebhookEvent = {
      id: uniqueId("evt_"),
      type: "charge.succeeded",
      data: { idempotencyKey: purchase.purchaseId },
    };
    const { body, signature } = signWebhookEvent(secret, event);

    const errorOf = async (res: Response) => ((await res.json()) as { error: { code: string } }).error.code;
    // Signed with another secret, a tampered body, no header, a malformed header: 401, no effect.
    const refused = await Promise.all([
      deliver(body, signWebhookEvent("not-the-webhook-secret-at-all", event).signature),
      deliver(body.replace(purchase.purchaseId, `${eventId}-aaaaaaaaaaaaaaaaaaaaaaaaaa`), signature),
      gw.request("/v1/payments/webhook", { method: "POST", headers: { "content-type": "application/json" }, body }),
      deliver(body, "t=abc,v1=xyz"),
    ]);
    expect(refused.map((r) => r.status)).toEqual([401, 401, 401, 401]);
    for (const res of refused) expect(await errorOf(res)).toBe("unauthenticated");

    // Genuinely signed, but not a payment event: 400.
    for (const notAnEvent of [
      '{"hello":"world"}',
      "not json at all",
      JSON.stringify({ ...event, type: "charge.maybe" }),
    ]) {
      const res = await deliver(notAnEvent, signWebhook(secret, notAnEvent));
      expect(res.status, notAnEvent).toBe(400);
      expect(await errorOf(res)).toBe("invalid_request");
    }

    // None of those was remembered or acted on: the genuine delivery is the first, and confirms.
    expect((await gw.deps.inventory.purchases.get({ eventId, purchaseId: purchase.purchaseId }))?.status).toBe(
      "pending",
    );
    expect(await deliverEvent(event)).toEqual({ status: 200, body: { received: true, duplicate: false } });
    expect((await gw.deps.inventory.purchases.get({ eventId, purchaseId: purchase.purchaseId }))?.status).toBe(
      "confirmed",
    );
    await expectAuditPasses(gw, eventId, redis);
  });

  it("the webhook's confirmation ends the buyer's session: the next fan in line is admitted, the buyer can hold nothing more", async () => {
    const eventId = uniqueId("whs");
    const input = eventInput();
    expect(
      (await putEvent(gw, eventId, { ...input, waitingRoom: { ...input.waitingRoom, maxActive: 1 } })).status,
    ).toBe(201);
    const [buyer] = await admitFans(gw, eventId, ["whs-buyer"]);
    // The next fan waits: the one slot is the buyer's.
    const joined = await gw.request(`/v1/events/${eventId}/queue`, { method: "POST", json: { fanId: "whs-next" } });
    const { queueToken } = (await joined.json()) as { queueToken: string };
    const statusOfNext = async () =>
      (
        (await (await gw.request(`/v1/events/${eventId}/queue/status`, { token: queueToken })).json()) as {
          status: string;
        }
      ).status;
    expect(await statusOfNext()).toBe("waiting");

    const purchase = await pendingPurchase(eventId, buyer!, ["B-1-1"]);
    const charge = (await createSimulatedProvider({ redis }).listCharges()).find(
      (c) => c.idempotencyKey === purchase.purchaseId,
    )!;
    // Only the webhook confirms it (no workers here): it knows the purchase, not the session.
    const event: WebhookEvent = {
      id: uniqueId("evt_"),
      type: "charge.succeeded",
      data: { idempotencyKey: purchase.purchaseId, chargeId: charge.chargeId, amount: charge.amount },
    };
    expect((await deliverEvent(event)).status).toBe(200);
    expect((await gw.deps.inventory.purchases.get({ eventId, purchaseId: purchase.purchaseId }))?.status).toBe(
      "confirmed",
    );
    // The session ended with it: its slot went to the next fan, and its token holds nothing more.
    let next = "waiting";
    for (let i = 0; i < 50 && next !== "admitted"; i++) {
      next = await statusOfNext();
      if (next !== "admitted") await new Promise((r) => setTimeout(r, 100));
    }
    expect(next).toBe("admitted");
    const again = await gw.request(`/v1/events/${eventId}/holds`, {
      method: "POST",
      token: buyer!.accessToken,
      json: { seats: ["B-1-2"] },
    });
    expect(again.status).toBe(401);
    await expectAuditPasses(gw, eventId, redis);
  });
});
