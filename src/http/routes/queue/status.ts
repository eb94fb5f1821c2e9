import { createRoute, OpenAPIHono, z } from "@hono/zod-openapi";
import type { Context } from "hono";
import { enforceLineLimits, lineLimits } from "../../client-ip.js";
import type { AppEnv } from "../../context.js";
import { ApiError, ErrorBody } from "../../errors.js";
import { requireQueueToken } from "../../middleware/fan-auth.js";
import { bearerSecurity, EventIdParam } from "../../schemas.js";
import { oddsAt } from "../../../waiting-room/odds.js";
import { Advice, FanStatus, placeView } from "./place-view.js";

const Odds = z
  .object({
    chance: z.number().min(0).max(1).openapi({ description: "0..1: seats left against what the fans ahead take" }),
    seatsLeft: z.number().int().openapi({ description: "Seats and standing places left (the cached map)" }),
    fansAhead: z.number().int(),
    seatsPerFan: z.number().openapi({ description: "Seats a fan takes, as used in the estimate" }),
    basis: z.enum(["conversion", "limit"]).openapi({
      description:
        "conversion: seats taken per fan admitted so far (20 or more admitted); limit: too early to tell, so the " +
        "worst case, every fan ahead taking maxSeatsPerFan",
    }),
  })
  .openapi("SeatOdds", {
    description:
      "An estimate, refreshed every 2 s per gateway: holds that lapse come back and fans ahead leave, so it moves. " +
      "Waiting and pre-queued fans only (pre-queued: provisional like the position); absent when unknown.",
  });

const Status = z
  .object({
    status: FanStatus,
    position: z.number().int(),
    provisional: z.boolean(),
    ahead: z.number().int(),
    ...Advice,
    accessToken: z.string().optional(),
    accessExpiresAt: z.string().optional(),
    admittedAt: z
      .string()
      .optional()
      .openapi({ description: "When the line admitted the fan (admitted only): the decision this poll reports" }),
    canRejoin: z.boolean().optional(),
    odds: Odds.optional(),
    queueToken: z
      .string()
      .optional()
      .openapi({
        description:
          "Only when the line was lost (Redis restarted empty) and this poll gave the fan a place in the new line: " +
          "the queue token to use from now on (the old one keeps working)",
      }),
  })
  .openapi("QueueStatus");

const route = createRoute({
  method: "get",
  path: "/v1/events/{eventId}/queue/status",
  tags: ["waiting room"],
  summary: "A fan's place; carries the access token once admitted",
  description:
    "Poll at `pollAfterMs` when given (scheduled on the fan's ETA), else no sooner than `pollAfterSeconds`. A fan who stops polling for the abandon time loses the place. " +
    "If the line was lost (Redis restarted empty), the poll places the fan in the new line, at the back in order " +
    "of return, and says so with a new `queueToken`.",
  security: bearerSecurity,
  request: { params: EventIdParam },
  responses: {
    200: { description: "the place", content: { "application/json": { schema: Status } } },
    401: { description: "missing or bad queue token", content: { "application/json": { schema: ErrorBody } } },
    403: { description: "token of another kind or event", content: { "application/json": { schema: ErrorBody } } },
    429: { description: "rate limited", content: { "application/json": { schema: ErrorBody } } },
    503: { description: "the waiting room is unavailable", content: { "application/json": { schema: ErrorBody } } },
  },
});

export const statusRoute = new OpenAPIHono<AppEnv>().openapi(route, async (c) => {
  const { eventId } = c.req.valid("param");
  const claims = requireQueueToken(c, eventId);
  // The per-IP and per-fan limits are taken by the status script itself: one Redis round trip.
  const limits = lineLimits(c, claims.fanId);
  const result = await c.get("deps").waitingRoom.statusOf(eventId, claims.fanId, {
    rejoin: { epoch: claims.epoch },
    limits,
  });
  if (!result.ok) {
    enforceLineLimits(c, eventId, "status", limits, result);
    if (result.reason === "not_found") throw new ApiError("not_found", `no event ${eventId}`);
    if (result.reason === "not_joined") throw new ApiError("not_found", "this fan is not in line; join first");
    if (result.reason === "token") throw new ApiError("unauthenticated", "the queue token is not valid");
    throw new ApiError("unavailable", "the waiting room is unavailable; keep your token and retry", { retryAfter: 2 });
  }
  c.get("deps").metrics.queuePolls.inc({ answered: result.cached ? "cache" : "redis" });
  const place = result.place;
  const odds =
    place.status === "waiting" || place.status === "prequeue" ? await oddsFor(c, eventId, place.ahead) : null;
  return c.json(
    {
      ...placeView(place),
      ...(place.status === "admitted"
        ? { accessToken: place.accessToken, accessExpiresAt: place.accessExpiresAt, admittedAt: place.admittedAt }
        : {}),
      ...("canRejoin" in place ? { canRejoin: place.canRejoin } : {}),
      ...(odds ? { odds } : {}),
      ...(result.replaced ? { queueToken: result.replaced.queueToken } : {}),
    },
    200,
  );
});

/** The odds at `ahead`, or null when they cannot be had now (the poll never fails for them). */
async function oddsFor(c: Context<AppEnv>, eventId: string, ahead: number) {
  try {
    const figures = await c.var.reads.oddsFigures(eventId);
    return figures ? oddsAt(ahead, figures) : null;
  } catch (err) {
    c.get("log").debug({ err: (err as Error).message, eventId }, "no odds for this poll");
    return null;
  }
}
