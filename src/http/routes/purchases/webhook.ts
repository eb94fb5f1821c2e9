import { createRoute, OpenAPIHono, z } from "@hono/zod-openapi";
import { readWebhook, WEBHOOK_SIGNATURE_HEADER } from "../../../payments/webhook.js";
import { eventOfPurchase } from "../../../purchases/saga.js";
import type { AppEnv } from "../../context.js";
import { ApiError, ErrorBody } from "../../errors.js";

const Received = z.object({ received: z.literal(true), duplicate: z.boolean() }).openapi("WebhookReceived");

const route = createRoute({
  method: "post",
  path: "/v1/payments/webhook",
  tags: ["payments"],
  summary: "Payment provider events, HMAC-SHA256 signed (`Payment-Signature: t=<unix>,v1=<hex>`)",
  description: "A duplicate event id has no second effect. Events: charge.succeeded, charge.failed, charge.refunded.",
  responses: {
    200: { description: "accepted", content: { "application/json": { schema: Received } } },
    400: { description: "bad body", content: { "application/json": { schema: ErrorBody } } },
    401: { description: "bad or missing signature", content: { "application/json": { schema: ErrorBody } } },
    503: {
      description: "the payment lookup or the store is unavailable; deliver again after Retry-After",
      content: { "application/json": { schema: ErrorBody } },
    },
  },
});

export const webhookRoute = new OpenAPIHono<AppEnv>().openapi(route, async (c) => {
  const { webhooks, purchases } = c.get("deps");
  const raw = await c.req.text();
  const reading = readWebhook(webhooks.secret, raw, c.req.header(WEBHOOK_SIGNATURE_HEADER));
  if (!reading.ok) {
    if (reading.reason === "invalid_body")
      throw new ApiError("invalid_request", "the webhook body is not a payment event");
    throw new ApiError("unauthenticated", `webhook signature refused: ${reading.reason}`);
  }
  const event = reading.event;
  const delivery = await webhooks.firstDelivery(event.id);
  if (delivery === "unknown") {
    // Without the dedup record a delivery cannot be told from a repeat: the provider retries.
    throw new ApiError("unavailable", "webhook deduplication unavailable; deliver again later", { retryAfter: 5 });
  }
  if (delivery === "duplicate") return c.json({ received: true as const, duplicate: true }, 200);

  try {
    const purchaseId = event.data.idempotencyKey;
    const eventId = eventOfPurchase(purchaseId);
    // The lookup inside resolve is the source of truth; the webhook only says "look now".
    if (eventId && event.type !== "charge.refunded") await purchases.resolve(eventId, purchaseId);
  } catch (err) {
    // Let the provider deliver it again: forget that we saw it, and say when to come back. The
    // lookup or the store failing is a dependency down, not a fault of ours or the provider's.
    await webhooks.forget(event.id);
    if (err instanceof ApiError) throw err;
    c.get("log")?.warn({ err: (err as Error).message, eventId: event.id }, "payment webhook not settled; asked again");
    throw new ApiError("unavailable", "the payment could not be settled now; deliver the event again later", {
      retryAfter: 5,
      cause: err,
    });
  }
  return c.json({ received: true as const, duplicate: false }, 200);
});
