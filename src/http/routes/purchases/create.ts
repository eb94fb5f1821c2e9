import { createRoute, OpenAPIHono, z } from "@hono/zod-openapi";
import type { Context } from "hono";
import { purchaseIdOf } from "../../../purchases/saga.js";
import type { AccessTokenClaims } from "../../../waiting-room/index.js";
import { limitRequest } from "../../client-ip.js";
import type { AppEnv } from "../../context.js";
import { ApiError, ErrorBody } from "../../errors.js";
import { accessTokenFirst, verifiedAccessToken, expiredToken } from "../../middleware/fan-auth.js";
import { bearerSecurity, HoldParams } from "../../schemas.js";
import { PurchaseView, purchaseView } from "./view.js";

const Body = z
  .strictObject({ paymentToken: z.string().min(1).max(256).openapi({ example: "tok_ok" }) })
  .openapi("PurchaseRequest");
const Headers = z.object({
  "idempotency-key": z
    .string()
    .regex(/^[\x21-\x7E]{1,128}$/, "1..128 visible ASCII characters")
    .openapi({ param: { name: "idempotency-key", in: "header" }, example: "c0ffee-42" }),
});
const Pending = z.object({ purchaseId: z.string(), status: z.literal("pending") }).openapi("PurchasePending");

const route = createRoute({
  method: "post",
  path: "/v1/events/{eventId}/holds/{holdId}/purchase",
  tags: ["purchases"],
  summary: "Pay for a hold; safe to repeat with the same Idempotency-Key",
  description:
    "The same key with the same body returns the same result however often it is sent; the same key with " +
    "another body is 422. 202 means the payment outcome is not known yet: poll GET /v1/purchases/{purchaseId}.",
  security: bearerSecurity,
  // The token first: a caller without one gets the 401, not a 400 for a missing Idempotency-Key.
  middleware: [accessTokenFirst({ endedSessionReads: true })] as const,
  request: {
    params: HoldParams,
    headers: Headers,
    body: { required: true, content: { "application/json": { schema: Body } } },
  },
  responses: {
    201: { description: "confirmed", content: { "application/json": { schema: PurchaseView } } },
    202: { description: "payment outcome pending", content: { "application/json": { schema: Pending } } },
    400: {
      description: "invalid (a missing Idempotency-Key too)",
      content: { "application/json": { schema: ErrorBody } },
    },
    401: {
      description: "missing or bad access token; a session that ended (revoked, or completed) starting a new purchase",
      content: { "application/json": { schema: ErrorBody } },
    },
    402: {
      description: "declined; the hold stays until it expires",
      content: { "application/json": { schema: ErrorBody } },
    },
    403: { description: "token of another kind or event", content: { "application/json": { schema: ErrorBody } } },
    404: { description: "unknown hold", content: { "application/json": { schema: ErrorBody } } },
    409: {
      description:
        "`hold_expired`: the hold can no longer be bought (refunded if charged); `hold_not_owned`; " +
        "`purchase_in_progress`: another purchase of this session (another hold or Idempotency-Key) is under way",
      content: { "application/json": { schema: ErrorBody } },
    },
    422: {
      description: "Idempotency-Key reused with another body",
      content: { "application/json": { schema: ErrorBody } },
    },
    429: { description: "rate limited", content: { "application/json": { schema: ErrorBody } } },
    503: {
      description: "payment provider or store unavailable",
      content: { "application/json": { schema: ErrorBody } },
    },
  },
});

export const purchaseRoute = new OpenAPIHono<AppEnv>().openapi(route, async (c) => {
  const { eventId, holdId } = c.req.valid("param");
  const key = c.req.valid("header")["idempotency-key"];
  const { paymentToken } = c.req.valid("json");
  // A repeat after the purchase ended the session must still get its stored answer, so the
  // session is checked below, knowing the key, not by the token check.
  const claims = verifiedAccessToken(c, eventId, { endedSessionReads: true });
  await limitRequest(c, "purchase", { eventId, fanId: claims.fanId });
  if (claims.expired) await replayOnly(c, claims, key);
  else await refuseEndedSession(c, claims, key);

  const outcome = await c.get("deps").purchases.purchase({
    eventId,
    fanId: claims.fanId,
    sessionId: claims.sessionId,
    holdId,
    idempotencyKey: key,
    paymentToken,
  });
  switch (outcome.kind) {
    case "confirmed":
      return c.json(purchaseView(outcome.purchase), 201);
    case "pending":
      c.header("Location", `/v1/purchases/${outcome.purchase.purchaseId}`);
      return c.json({ purchaseId: outcome.purchase.purchaseId, status: "pending" as const }, 202);
    case "declined":
      throw new ApiError("payment_declined", "the payment was declined; the hold stays until it expires", {
        details: { purchaseId: outcome.purchase.purchaseId, reason: outcome.reason },
      });
    case "refunded":
      throw new ApiError("hold_expired", refundedMessage(outcome.purchase.failureReason), {
        details: {
          purchaseId: outcome.purchase.purchaseId,
          refunded: true,
          ...(outcome.purchase.failureReason ? { reason: outcome.purchase.failureReason } : {}),
        },
      });
    case "in_progress":
      throw new ApiError(
        "purchase_in_progress",
        "another purchase of this session is under way (another hold, or another Idempotency-Key); " +
          "nothing was charged. Repeat that purchase's request to learn its outcome",
      );
    case "provider_error":
      throw new ApiError(
        "unavailable",
        "the payment provider failed and has no charge under this key; nothing was charged. Retry with a new Idempotency-Key",
        {
          retryAfter: 2,
          details: { purchaseId: outcome.purchase.purchaseId },
        },
      );
    case "key_reused":
      throw new ApiError("idempotency_key_reused", "this Idempotency-Key was used with a different request");
    case "hold_not_found":
      throw new ApiError("not_found", `no hold ${holdId}`);
    case "hold_unusable":
      if (outcome.reason === "hold_not_owned") throw new ApiError("hold_not_owned", "this hold belongs to another fan");
      throw new ApiError("hold_expired", `the hold can no longer be bought (${outcome.reason.replace("hold_", "")})`, {
        details: { reason: outcome.reason },
      });
  }
});

/**
 * An expired session (its token past its expiry, by less than a day) starts no new purchase; the
 * same Idempotency-Key again gets the stored answer, so a fan whose payment was still pending as
 * the session ran out learns how it ended.
 */
async function replayOnly(c: Context<AppEnv>, claims: AccessTokenClaims, key: string): Promise<void> {
  const { eventId, fanId } = claims;
  if (await c.get("deps").purchases.find(eventId, purchaseIdOf(eventId, fanId, key))) return;
  throw expiredToken();
}

/**
 * A session that ended (revoked by the operator, or completed by a purchase) starts no new
 * purchase: without this, a revoked fan could still buy the seats held before the revocation. A
 * purchase already made under this key is answered as always (a replay gets its stored result).
 * An expired session is replayOnly's. When Redis cannot say,
 * the purchase goes ahead, as a claim does (the hold, in DynamoDB, decides).
 */
async function refuseEndedSession(c: Context<AppEnv>, claims: AccessTokenClaims, key: string): Promise<void> {
  const { waitingRoom, purchases } = c.get("deps");
  const { eventId, fanId, sessionId, epoch } = claims;
  const active = await waitingRoom.isSessionActive(eventId, sessionId, epoch ?? "", fanId);
  if (!active.ok || !active.decided || active.active) return;
  if (await purchases.find(eventId, purchaseIdOf(eventId, fanId, key))) return;
  throw new ApiError("unauthenticated", "this session has ended; it can start no new purchase");
}

/** Why a charged purchase was refunded, in the fan's words. */
function refundedMessage(reason: string | undefined): string {
  switch (reason) {
    case "hold_confirmed":
      return "the hold was bought by another purchase; this charge was refunded";
    case "hold_released":
      return "the hold was released before the payment completed; the charge was refunded";
    case "hold_expired":
      return "the hold expired before the payment completed; the charge was refunded";
    default:
      return "the purchase could not be completed; the charge was refunded";
  }
}
