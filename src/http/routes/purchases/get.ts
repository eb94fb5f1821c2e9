import { createRoute, OpenAPIHono, z } from "@hono/zod-openapi";
import { eventOfPurchase } from "../../../purchases/saga.js";
import type { AppEnv } from "../../context.js";
import { ApiError, ErrorBody } from "../../errors.js";
import { checkAccessTokenOfAnyEvent, verifiedAccessToken } from "../../middleware/fan-auth.js";
import { bearerSecurity } from "../../schemas.js";
import { PurchaseView, purchaseView } from "./view.js";

const route = createRoute({
  method: "get",
  path: "/v1/purchases/{purchaseId}",
  tags: ["purchases"],
  summary: "A purchase, for its buyer (access token of the purchase's event)",
  security: bearerSecurity,
  request: {
    params: z.object({
      purchaseId: z
        .string()
        .min(1)
        .max(160)
        .openapi({ param: { name: "purchaseId", in: "path" } }),
    }),
  },
  responses: {
    200: { description: "the purchase", content: { "application/json": { schema: PurchaseView } } },
    401: {
      description: "missing or bad access token (one expired more than a day ago)",
      content: { "application/json": { schema: ErrorBody } },
    },
    403: { description: "token of another event", content: { "application/json": { schema: ErrorBody } } },
    404: { description: "no such purchase for this fan", content: { "application/json": { schema: ErrorBody } } },
  },
});

export const getPurchaseRoute = new OpenAPIHono<AppEnv>().openapi(route, async (c) => {
  const { purchaseId } = c.req.valid("param");
  const eventId = eventOfPurchase(purchaseId);
  if (!eventId) {
    // Not an id the gateway gives: the token is still checked first, as for any purchase (401
    // without one), then a buyer learns it is unknown.
    checkAccessTokenOfAnyEvent(c, { endedSessionReads: true });
    throw new ApiError("not_found", `no purchase ${purchaseId}`);
  }
  // The buyer's token, even a day past its session: a purchase still pending as the session ran
  // out must be readable to the end.
  const claims = verifiedAccessToken(c, eventId, { endedSessionReads: true });
  const purchase = await c.get("deps").purchases.find(eventId, purchaseId);
  // Another fan's purchase is as unknown as a missing one.
  if (!purchase || purchase.fanId !== claims.fanId) throw new ApiError("not_found", `no purchase ${purchaseId}`);
  return c.json(purchaseView(purchase), 200);
});
