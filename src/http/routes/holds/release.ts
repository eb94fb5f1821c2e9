import { createRoute, OpenAPIHono } from "@hono/zod-openapi";
import { limitRequest } from "../../client-ip.js";
import type { AppEnv } from "../../context.js";
import { ApiError, ErrorBody } from "../../errors.js";
import { accessTokenFirst, requireAccessToken } from "../../middleware/fan-auth.js";
import { bearerSecurity, HoldParams } from "../../schemas.js";

const route = createRoute({
  method: "delete",
  path: "/v1/events/{eventId}/holds/{holdId}",
  tags: ["holds"],
  summary: "Release a hold (idempotent)",
  security: bearerSecurity,
  middleware: [accessTokenFirst()] as const,
  request: { params: HoldParams },
  responses: {
    204: { description: "released (or already released or expired)" },
    401: { description: "missing or bad access token", content: { "application/json": { schema: ErrorBody } } },
    404: { description: "unknown hold", content: { "application/json": { schema: ErrorBody } } },
    409: {
      description: "another fan's hold, or already bought",
      content: { "application/json": { schema: ErrorBody } },
    },
    503: {
      description: "DynamoDB unavailable; nothing changed",
      content: { "application/json": { schema: ErrorBody } },
    },
  },
});

export const releaseHoldRoute = new OpenAPIHono<AppEnv>().openapi(route, async (c) => {
  const { eventId, holdId } = c.req.valid("param");
  // Releasing gives seats back, so an ended session may still do it.
  const claims = await requireAccessToken(c, eventId, { checkRevocation: false });
  await limitRequest(c, "hold", { eventId, fanId: claims.fanId });
  // A store that cannot answer is the one 503 of app.ts: nothing was released, retry.
  const result = await c.get("deps").holds.release({ eventId, holdId, fanId: claims.fanId });
  if (result.ok) return c.body(null, 204);
  if (result.reason === "not_found") throw new ApiError("not_found", `no hold ${holdId}`);
  if (result.reason === "hold_not_owned") throw new ApiError("hold_not_owned", "this hold belongs to another fan");
  throw new ApiError("hold_not_owned", "this hold was bought; sold seats cannot be released");
});
