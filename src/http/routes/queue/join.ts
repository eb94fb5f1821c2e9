import { createRoute, OpenAPIHono, z } from "@hono/zod-openapi";
import { createMiddleware } from "hono/factory";
import { limitRequest } from "../../client-ip.js";
import type { AppEnv } from "../../context.js";
import { ApiError, ErrorBody } from "../../errors.js";
import { EventIdParam, FanId } from "../../schemas.js";
import { FanStatus, placeView } from "./place-view.js";

const JoinBody = z.strictObject({ fanId: FanId.openapi({ example: "fan_42" }) }).openapi("JoinRequest");

const Joined = z
  .object({
    queueToken: z.string(),
    position: z.number().int(),
    status: FanStatus,
    provisional: z.boolean().openapi({ description: "true before the draw: position is only the arrival number" }),
    ahead: z.number().int(),
    etaSeconds: z.number().nullable(),
    pollAfterSeconds: z.number(),
  })
  .openapi("Joined");

// The per-IP limit comes before the body is read and validated, so a flood of joins from one
// address costs a rate-limit check each, not a JSON parse.
const limitJoin = createMiddleware<AppEnv>(async (c, next) => {
  await limitRequest(c, "join");
  await next();
});

const route = createRoute({
  middleware: [limitJoin] as const,
  method: "post",
  path: "/v1/events/{eventId}/queue",
  tags: ["waiting room"],
  summary: "Join the line (idempotent per fan)",
  request: { params: EventIdParam, body: { required: true, content: { "application/json": { schema: JoinBody } } } },
  responses: {
    200: { description: "already in line: the same place", content: { "application/json": { schema: Joined } } },
    201: { description: "joined", content: { "application/json": { schema: Joined } } },
    400: { description: "invalid", content: { "application/json": { schema: ErrorBody } } },
    403: { description: "revoked fan or closed line", content: { "application/json": { schema: ErrorBody } } },
    404: { description: "unknown event", content: { "application/json": { schema: ErrorBody } } },
    429: { description: "rate limited", content: { "application/json": { schema: ErrorBody } } },
    503: { description: "the waiting room is unavailable", content: { "application/json": { schema: ErrorBody } } },
  },
});

export const joinRoute = new OpenAPIHono<AppEnv>().openapi(route, async (c) => {
  const { eventId } = c.req.valid("param");
  const { fanId } = c.req.valid("json");
  const result = await c.var.deps.waitingRoom.join(eventId, fanId);
  if (!result.ok) {
    switch (result.reason) {
      case "not_found":
        throw new ApiError("not_found", `no event ${eventId}`);
      case "closed":
        throw new ApiError("forbidden", "the line is closed");
      case "revoked":
        throw new ApiError("forbidden", "this fan's session was revoked by the operator");
      case "invalid_fan":
        throw new ApiError("invalid_request", "fanId must be 1..128 printable characters", {
          details: { field: "fanId" },
        });
      default:
        throw new ApiError("unavailable", "the waiting room is unavailable; retry shortly", { retryAfter: 2 });
    }
  }
  return c.json({ queueToken: result.queueToken, ...placeView(result.place) }, result.created ? 201 : 200);
});
