import { createRoute, OpenAPIHono, z } from "@hono/zod-openapi";
import type { Context } from "hono";
import { createMiddleware } from "hono/factory";
import { enforceLineLimits, limitJoinAlone, lineLimits } from "../../client-ip.js";
import type { AppEnv } from "../../context.js";
import { ApiError, ErrorBody } from "../../errors.js";
import { EventIdParam, FanId } from "../../schemas.js";
import { Advice, FanStatus, placeView } from "./place-view.js";

const JoinBody = z.strictObject({ fanId: FanId.openapi({ example: "fan_42" }) }).openapi("JoinRequest");

const Joined = z
  .object({
    queueToken: z.string(),
    position: z.number().int(),
    status: FanStatus,
    provisional: z.boolean().openapi({ description: "true before the draw: position is only the arrival number" }),
    ahead: z.number().int(),
    ...Advice,
  })
  .openapi("Joined");

const jsonMediaType = /^application\/([\w.-]+\+)?json$/i;

/** Whether the body will pass the route's validation (then the join script takes the limit). */
async function wellFormedJoin(c: Context<AppEnv>): Promise<boolean> {
  const mediaType = (c.req.header("content-type") ?? "").split(";")[0]?.trim() ?? "";
  if (!jsonMediaType.test(mediaType)) return false;
  const body: unknown = await c.req.json().catch(() => undefined);
  return JoinBody.safeParse(body).success;
}

// A well-formed join takes the per-IP limit inside the join script (one Redis round trip for the
// join). Any other body takes it here, before the validation answers 400, so a flood of malformed
// joins from one address is answered 429 like any other flood: it costs a parse of the body (the
// body is at most 16 KiB, and hono keeps the text for the validator) and a rate-limit check.
const limitJoin = createMiddleware<AppEnv>(async (c, next) => {
  if (c.get("deps").limits.ratePerIp > 0 && !(await wellFormedJoin(c))) {
    await limitJoinAlone(c, c.req.param("eventId") ?? "");
  }
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
  const limits = lineLimits(c);
  const result = await c.get("deps").waitingRoom.join(eventId, fanId, { limits });
  if (!result.ok) {
    enforceLineLimits(c, eventId, "join", limits, result);
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
  // The event's line gauges on /metrics (src/metrics-reporter.ts) start with its first join here.
  const seen = c.get("reads").seenEvents;
  if (seen.size < 1_000) seen.add(eventId);
  return c.json({ queueToken: result.queueToken, ...placeView(result.place) }, result.created ? 201 : 200);
});
