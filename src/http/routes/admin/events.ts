import { createRoute, OpenAPIHono, z } from "@hono/zod-openapi";
import type { AppEnv } from "../../context.js";
import { ApiError, ErrorBody } from "../../errors.js";
import { bearerSecurity, EventIdParam } from "../../schemas.js";
import { StoredEvent, toStoredEvent } from "./event-view.js";
import { operatorOnly } from "./guard.js";
import { SaleState, saleStateOf } from "./sale-state.js";

const EventSummary = z
  .object({
    eventId: z.string(),
    name: z.string(),
    onSaleAt: z.string(),
    totalSeats: z.number(),
    sale: SaleState,
  })
  .openapi("EventSummary");

const ListQuery = z.object({
  limit: z.coerce
    .number()
    .int()
    .min(1)
    .max(100)
    .default(25)
    .openapi({ param: { name: "limit", in: "query" } }),
  cursor: z
    .string()
    .max(1_000)
    .optional()
    .openapi({ param: { name: "cursor", in: "query" }, description: "The `cursor` of the previous page" }),
});

const listRoute = createRoute({
  method: "get",
  path: "/v1/admin/events",
  tags: ["operator"],
  summary: "The events, latest on-sale first, a page at a time, each with where its sale stands",
  description:
    "One Query of the events index per page (eventually consistent: an event just stored may show a second later). " +
    "An event whose first PUT is still writing its seats is not listed, so a page may hold fewer than `limit`; " +
    "`cursor` is absent on the last page. Read role allowed.",
  security: bearerSecurity,
  middleware: [operatorOnly] as const,
  request: { query: ListQuery },
  responses: {
    200: {
      description: "a page",
      content: {
        "application/json": {
          schema: z.object({ events: z.array(EventSummary), cursor: z.string().optional() }).openapi("EventPage"),
        },
      },
    },
    400: { description: "a cursor this never gave", content: { "application/json": { schema: ErrorBody } } },
    401: { description: "no operator token", content: { "application/json": { schema: ErrorBody } } },
  },
});

export const listEventsRoute = new OpenAPIHono<AppEnv>().openapi(listRoute, async (c) => {
  const { limit, cursor } = c.req.valid("query");
  const { events, waitingRoom } = c.get("deps");
  const page = await events.list({ limit, cursor });
  if (!page) throw new ApiError("invalid_request", "the cursor is not one this list gave", { details: { cursor } });
  const rooms = await Promise.all(page.events.map((e) => waitingRoom.info(e.eventId)));
  const now = Date.now();
  return c.json(
    {
      events: page.events.map((event, i) => {
        const room = rooms[i];
        return {
          eventId: event.eventId,
          name: event.name,
          onSaleAt: event.onSaleAt,
          totalSeats: event.totalSeats,
          sale: saleStateOf(event, room?.ok ? room.info.state : "unavailable", now),
        };
      }),
      ...(page.cursor ? { cursor: page.cursor } : {}),
    },
    200,
  );
});

const OperatorEvent = StoredEvent.extend({
  sale: SaleState,
  roomSettings: z
    .object({
      admitPerSecond: z.number(),
      maxActive: z.number(),
      sessionSeconds: z.number(),
      abandonSeconds: z.number(),
      paused: z.boolean(),
      closed: z.boolean(),
      powBits: z.number().int(),
      invites: z.boolean(),
      autoAdmit: z.object({
        enabled: z.boolean(),
        minPerSecond: z.number(),
        maxPerSecond: z.number(),
        targetClaimP99Ms: z.number(),
        maxThrottlesPerSecond: z.number(),
      }),
    })
    .optional()
    .openapi({
      description:
        "Every setting the waiting room runs with (as PATCH .../waiting-room answers them; absent while Redis is unavailable)",
    }),
}).openapi("OperatorEvent");

const getRoute = createRoute({
  method: "get",
  path: "/v1/admin/events/{eventId}",
  tags: ["operator"],
  summary: "One event as stored (a consistent read), with where its sale stands and its room's settings",
  description: "Read role allowed.",
  security: bearerSecurity,
  middleware: [operatorOnly] as const,
  request: { params: EventIdParam },
  responses: {
    200: { description: "the event", content: { "application/json": { schema: OperatorEvent } } },
    401: { description: "no operator token", content: { "application/json": { schema: ErrorBody } } },
    404: { description: "unknown event", content: { "application/json": { schema: ErrorBody } } },
  },
});

export const getEventRoute = new OpenAPIHono<AppEnv>().openapi(getRoute, async (c) => {
  const { eventId } = c.req.valid("param");
  const { events, waitingRoom } = c.get("deps");
  const [event, room, info] = await Promise.all([
    events.get(eventId),
    waitingRoom.stats(eventId),
    waitingRoom.info(eventId),
  ]);
  if (!event?.layoutComplete) throw new ApiError("not_found", `no event ${eventId}`);
  const s = room.ok ? room.settings : undefined;
  return c.json(
    {
      ...toStoredEvent(event, info.ok ? info.info.lottery.commitment : ""),
      sale: saleStateOf(event, room.ok ? room.stats.state : "unavailable"),
      ...(s
        ? {
            roomSettings: {
              admitPerSecond: s.admitPerSecond,
              maxActive: s.maxActive,
              sessionSeconds: s.sessionSeconds,
              abandonSeconds: s.abandonSeconds,
              paused: s.paused,
              closed: s.closed,
              powBits: s.powBits,
              invites: s.invites,
              autoAdmit: s.autoAdmit,
            },
          }
        : {}),
    },
    200,
  );
});
