/**
 * "Tell me when seats come back" (src/notify/): a fan of a sold-out event asks, cancels, or looks.
 * Asking takes an access token: a fan admitted who found the map sold out (the fan page asks from
 * the seat map). A queue token costs one join, so fan ids bought in bulk would fill the event's
 * list of requests and take its front; an admission is paced by the room (its rate, `maxActive`,
 * its bot settings), as the seats are. Looking and cancelling take either token: they only touch
 * the fan's own request. Not in the status poll: that is the hot path, and this is one DynamoDB
 * read the page makes once.
 */
import { createRoute, OpenAPIHono, z } from "@hono/zod-openapi";
import type { Context } from "hono";
import { limitRequest } from "../../client-ip.js";
import type { AppEnv } from "../../context.js";
import { ApiError, ErrorBody } from "../../errors.js";
import { bearerToken } from "../../middleware/admin-auth.js";
import { bearerSecurity, EventIdParam } from "../../schemas.js";
import { isPrintableContact, MAX_CONTACT_LENGTH } from "../../../notify/service.js";
import type { NotifyRequest } from "../../../notify/store.js";
import type { EventDefinition } from "../../../inventory/index.js";

const NotifyBody = z
  .object({
    contact: z
      .string()
      .min(1)
      .max(MAX_CONTACT_LENGTH)
      .refine(
        isPrintableContact,
        "must be printable characters: no control characters (CR, LF, NUL, C1), no U+2028/U+2029",
      )
      .openapi({
        description:
          "Opaque to the gateway: what the operator's system maps to a mail address or a push subscription. " +
          `Sent back as is in the webhook (a JSON string); 1..${MAX_CONTACT_LENGTH} printable characters: ` +
          "no control characters (CR, LF, NUL, the other C0 and C1 ones, DEL), no line or paragraph separator.",
        example: "mail:fan@example.com",
      }),
  })
  .strict()
  .openapi("NotifyRequestBody");

const NotifyView = z
  .object({
    eventId: z.string(),
    requested: z.boolean(),
    state: z.enum(["waiting", "claimed", "notified"]).optional().openapi({
      description: "waiting: in line to be told; claimed: being told now; notified: told (once, for good)",
    }),
    requestedAt: z.string().optional(),
    notifiedAt: z.string().optional(),
  })
  .openapi("NotifyRequest");

const responses = {
  400: { description: "bad body", content: { "application/json": { schema: ErrorBody } } },
  401: { description: "missing or bad token", content: { "application/json": { schema: ErrorBody } } },
  403: { description: "token of another kind or event", content: { "application/json": { schema: ErrorBody } } },
  404: {
    description: "unknown event, or notify_disabled: this gateway has no NOTIFY_WEBHOOK_URL",
    content: { "application/json": { schema: ErrorBody } },
  },
  503: { description: "DynamoDB unavailable; nothing changed", content: { "application/json": { schema: ErrorBody } } },
};

const security = bearerSecurity;
const description =
  "Asking takes an admitted fan's access token (a queue token: 403 forbidden); looking and cancelling take the " +
  "queue token or the access token. Asked once per fan and event (a repeat answers the first request, " +
  "its place in the order and its contact kept). When seats come back (holds expire or are released), about " +
  "NOTIFY_FANS_PER_SEAT fans per seat are told through the operator's webhook, in the order they asked, each once. " +
  "NOTIFY_MAX_REQUESTS_PER_EVENT bounds the requests waiting to be told: a fan told, or a waiting request " +
  "cancelled, frees a place.";

const post = createRoute({
  method: "post",
  path: "/v1/events/{eventId}/notify",
  tags: ["notify"],
  summary: "Ask to be told when seats come back to a sold-out event",
  description,
  security,
  request: { params: EventIdParam, body: { content: { "application/json": { schema: NotifyBody } }, required: true } },
  responses: {
    201: { description: "asked", content: { "application/json": { schema: NotifyView } } },
    200: { description: "asked before: the first request", content: { "application/json": { schema: NotifyView } } },
    ...responses,
    409: {
      description:
        "not_sold_out: seats are left (go and take them); notify_limit_reached: NOTIFY_MAX_REQUESTS_PER_EVENT requests wait to be told",
      content: { "application/json": { schema: ErrorBody } },
    },
  },
});

const del = createRoute({
  method: "delete",
  path: "/v1/events/{eventId}/notify",
  tags: ["notify"],
  summary: "Cancel the request (idempotent)",
  security,
  request: { params: EventIdParam },
  responses: { 204: { description: "no request any more" }, ...responses },
});

const get = createRoute({
  method: "get",
  path: "/v1/events/{eventId}/notify",
  tags: ["notify"],
  summary: "Whether this fan asked, and whether they were told",
  security,
  request: { params: EventIdParam },
  responses: {
    200: { description: "the request", content: { "application/json": { schema: NotifyView } } },
    ...responses,
  },
});

/**
 * The fan an access token names, or (`queueTokens`: to look or cancel) a queue token; both check
 * with one HMAC, no I/O.
 */
function fanOf(c: Context<AppEnv>, eventId: string, queueTokens: boolean): string {
  const token = bearerToken(c.req.header("authorization"));
  if (!token) {
    throw new ApiError(
      "unauthenticated",
      `${queueTokens ? "a queue or access token" : "an access token"} is required (Authorization: Bearer <token>)`,
    );
  }
  const { waitingRoom } = c.get("deps");
  const queue = waitingRoom.verifyQueueToken(token, eventId);
  if (queue.ok && queueTokens) return queue.claims.fanId;
  if (queue.ok) {
    throw new ApiError(
      "forbidden",
      "asking to be told takes an admitted fan's access token (the queue status gives it at your turn), not a queue token",
    );
  }
  const access = waitingRoom.verifyAccessToken(token, eventId);
  if (access.ok) return access.claims.fanId;
  const reason = queue.reason === "wrong_kind" ? access.reason : queue.reason;
  if (reason === "wrong_event") throw new ApiError("forbidden", "the token belongs to another event");
  if (reason === "wrong_kind") throw new ApiError("forbidden", "this endpoint needs a queue or access token");
  if (reason === "expired") throw new ApiError("unauthenticated", "the token has expired");
  throw new ApiError("unauthenticated", "the token is not valid");
}

async function enabledFan(
  c: Context<AppEnv>,
  eventId: string,
  queueTokens: boolean,
): Promise<{ fanId: string; event: EventDefinition }> {
  const fanId = fanOf(c, eventId, queueTokens);
  if (!c.get("deps").notify.enabled) {
    throw new ApiError("notify_disabled", "this gateway tells nobody when seats come back (no NOTIFY_WEBHOOK_URL)");
  }
  await limitRequest(c, "notify", { eventId, fanId });
  const event = await c.var.reads.event(eventId);
  if (!event) throw new ApiError("not_found", `no event ${eventId}`);
  return { fanId, event };
}

/**
 * Seats and places left, from the seat-map cache now (the odds' 2 s copy would refuse a fan for
 * 2 s after the last seat went) and the areas' 1 s counts. Asked once per fan: a Redis read.
 */
async function seatsLeft(c: Context<AppEnv>, eventId: string, event: EventDefinition): Promise<number> {
  const { seatMap } = c.get("deps");
  let available = await seatMap.availability(eventId);
  const missing = event.sections.filter((s) => available[s.id] === undefined);
  if (missing.length > 0) {
    await Promise.all(missing.map((s) => seatMap.getSection(eventId, s.id)));
    available = await seatMap.availability(eventId);
  }
  const areas = await Promise.all(
    event.generalAdmission.map((g) => c.var.reads.generalAdmission(`${eventId}/${g.id}`)),
  );
  return (
    event.sections.reduce((n, s) => n + (available[s.id] ?? 0), 0) + areas.reduce((n, a) => n + (a?.available ?? 0), 0)
  );
}

const view = (eventId: string, r: NotifyRequest | null) =>
  r
    ? {
        eventId,
        requested: true,
        state: r.state,
        requestedAt: r.requestedAt,
        ...(r.notifiedAt ? { notifiedAt: r.notifiedAt } : {}),
      }
    : { eventId, requested: false };

export const notifyRoutes = new OpenAPIHono<AppEnv>()
  .openapi(post, async (c) => {
    const { eventId } = c.req.valid("param");
    const { contact } = c.req.valid("json");
    const { fanId, event } = await enabledFan(c, eventId, false);
    const { notify } = c.get("deps");
    const left = await seatsLeft(c, eventId, event).catch((err: unknown) => {
      throw new ApiError("unavailable", "seat counts unavailable; retry", { retryAfter: 2, cause: err });
    });
    if (left > 0) {
      // A repeat after seats came back still answers the request made while it was sold out.
      const existing = await notify.get(eventId, fanId);
      if (existing) return c.json(view(eventId, existing), 200);
      c.get("deps").metrics.notify.inc({ outcome: "not_sold_out" });
      throw new ApiError("not_sold_out", `${left} seats or places are left: take them now`, {
        details: { seatsLeft: left },
      });
    }
    const out = await notify.request(eventId, fanId, contact);
    if (out.ok) return c.json(view(eventId, out.request), out.created ? 201 : 200);
    if (out.reason === "limit_reached") {
      throw new ApiError("notify_limit_reached", `${out.limit} requests already wait to be told at this event`, {
        details: { limit: out.limit },
      });
    }
    throw new ApiError("unavailable", "too many requests at once; retry", { retryAfter: 1 });
  })
  .openapi(del, async (c) => {
    const { eventId } = c.req.valid("param");
    const { fanId } = await enabledFan(c, eventId, true);
    await c.get("deps").notify.cancel(eventId, fanId);
    return c.body(null, 204);
  })
  .openapi(get, async (c) => {
    const { eventId } = c.req.valid("param");
    const { fanId } = await enabledFan(c, eventId, true);
    return c.json(view(eventId, await c.get("deps").notify.get(eventId, fanId)), 200);
  });
