import { createRoute, OpenAPIHono, z } from "@hono/zod-openapi";
import type { AppEnv } from "../../context.js";
import { ApiError, ErrorBody } from "../../errors.js";
import { bearerSecurity, EventIdParam, FanId } from "../../schemas.js";
import { operatorOnly } from "./guard.js";

const Revocation = z.strictObject({ fanId: FanId }).openapi("Revocation");

const Revoked = z
  .object({
    fanId: z.string(),
    sessionId: z.string(),
    freed: z.boolean().openapi({ description: "false when the session had ended already (expired, bought)" }),
    status: z.string().openapi({ description: "The fan's status now: revoked" }),
  })
  .openapi("Revoked");

const route = createRoute({
  method: "post",
  path: "/v1/admin/events/{eventId}/revocations",
  tags: ["operator"],
  summary: "Revoke a fan's session: its access token stops working at once, its slot goes to the next fan",
  description:
    "The fan's session ends in Redis: every claim path (holds, releases, purchases) checks it on each call, so " +
    "the access token is refused (401 `unauthenticated`: this session has ended) from the next request on, on every gateway; the slot is " +
    "freed for the next fan in line, and the fan may not join this event again. Holds the fan made stay until " +
    "they expire or are released (they are not bought: a purchase needs an active session). A fan still in " +
    "line has no session: 404 with `details.status`. A repeat answers `freed: false`.",
  security: bearerSecurity,
  middleware: [operatorOnly] as const,
  request: {
    params: EventIdParam,
    body: { required: true, content: { "application/json": { schema: Revocation } } },
  },
  responses: {
    200: { description: "revoked", content: { "application/json": { schema: Revoked } } },
    400: { description: "invalid", content: { "application/json": { schema: ErrorBody } } },
    401: { description: "no operator token", content: { "application/json": { schema: ErrorBody } } },
    403: { description: "a read-only operator token", content: { "application/json": { schema: ErrorBody } } },
    404: {
      description: "unknown event, a fan the room does not know, or one with no session",
      content: { "application/json": { schema: ErrorBody } },
    },
    503: { description: "Redis unavailable; nothing changed", content: { "application/json": { schema: ErrorBody } } },
  },
});

export const revokeRoute = new OpenAPIHono<AppEnv>().openapi(route, async (c) => {
  const { eventId } = c.req.valid("param");
  const { fanId } = c.req.valid("json");
  const result = await c.get("deps").waitingRoom.revokeFan(eventId, fanId);
  if (!result.ok) {
    if (result.reason === "not_found") throw new ApiError("not_found", `no event ${eventId}`);
    if (result.reason === "unknown_fan")
      throw new ApiError("not_found", "the waiting room of this event does not know that fan");
    if (result.reason === "no_session") {
      throw new ApiError("not_found", `the fan has no session to revoke (status ${result.status})`, {
        details: { status: result.status },
      });
    }
    throw new ApiError("unavailable", "the waiting room is unavailable; retry", { retryAfter: 1 });
  }
  return c.json({ fanId, sessionId: result.sessionId, freed: result.freed, status: result.status }, 200);
});
