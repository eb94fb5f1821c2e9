import { createRoute, OpenAPIHono, z } from "@hono/zod-openapi";
import type { Context } from "hono";
import type { AppEnv } from "../../context.js";
import { ApiError, ErrorBody } from "../../errors.js";
import { bearerSecurity, EventIdParam } from "../../schemas.js";
import { operatorOnly } from "./guard.js";

const EndedEvent = z
  .object({
    eventId: z.string(),
    name: z.string(),
    onSaleAt: z.string(),
    holdSeconds: z.number(),
    closedAt: z.string().openapi({ description: "When the event was ended (a repeat answers the first)" }),
    jobsEndAt: z.string().openapi({
      description:
        "When the event's last hold can have expired: its remaining work (pending purchases, unacknowledged " +
        "bookings) is finished from then on, and then every background job of it is removed",
    }),
    jobsEndedAt: z.string().optional().openapi({ description: "Set once every job of the event is gone" }),
    roomClosed: z.boolean().openapi({
      description:
        "Whether the waiting room was closed too (no new places, no admissions); false while Redis is unavailable " +
        "(holds are refused all the same; repeat the call to close the room)",
    }),
  })
  .openapi("EndedEvent");

const description =
  "Ends the event: holds are refused (403 `forbidden`, the event is not on sale, as before its on-sale) from " +
  "then on (by this gateway at once, by the others within their event cache's 60 s); holds made before may " +
  "still be bought until they expire. The waiting room is closed (no new places, no admissions), and once the " +
  "last hold can have expired the event's background jobs are removed. Purchases, stats and the audit stay " +
  "readable. A repeat answers the same closing time.";

const responses = {
  200: { description: "ended", content: { "application/json": { schema: EndedEvent } } },
  401: { description: "no operator token", content: { "application/json": { schema: ErrorBody } } },
  403: { description: "a read-only operator token", content: { "application/json": { schema: ErrorBody } } },
  404: { description: "unknown event", content: { "application/json": { schema: ErrorBody } } },
} as const;

const endRoute = createRoute({
  method: "post",
  path: "/v1/admin/events/{eventId}/end",
  tags: ["operator"],
  summary: "End the event: no more holds nor admissions; its background jobs end once its remaining work is done",
  description,
  security: bearerSecurity,
  middleware: [operatorOnly] as const,
  request: { params: EventIdParam },
  responses,
});

/** The route's first name: the same action as /end (kept for the callers that know it). */
const closeRoute = createRoute({
  ...endRoute,
  path: "/v1/admin/events/{eventId}/close",
  summary: "The first name of POST .../end, the same action",
  description: `The same as \`POST /v1/admin/events/{eventId}/end\`. ${description}`,
});

async function endEvent(c: Context<AppEnv>, eventId: string) {
  const { events, waitingRoom } = c.get("deps");
  const log = c.get("log").child({ eventId });
  const closed = await events.close(eventId, log);
  if (!closed) throw new ApiError("not_found", `no event ${eventId}`);
  // DynamoDB, the authority on holds, first; the room after (admission is moot once holds are refused).
  const by = c.get("operator")?.name;
  const room = await waitingRoom.updateSettings(eventId, { closed: true }, by ? { by } : {});
  if (!room.ok) log.warn({ reason: room.reason }, "event ended; its waiting room is not closed yet");
  const { event, jobsEndAt } = closed;
  return c.json(
    {
      eventId: event.eventId,
      name: event.name,
      onSaleAt: event.onSaleAt,
      holdSeconds: event.holdSeconds,
      closedAt: event.closedAt ?? jobsEndAt,
      jobsEndAt,
      ...(event.jobsEndedAt ? { jobsEndedAt: event.jobsEndedAt } : {}),
      roomClosed: room.ok,
    },
    200,
  );
}

export const closeEventRoute = new OpenAPIHono<AppEnv>()
  .openapi(endRoute, (c) => endEvent(c, c.req.valid("param").eventId))
  .openapi(closeRoute, (c) => endEvent(c, c.req.valid("param").eventId));
