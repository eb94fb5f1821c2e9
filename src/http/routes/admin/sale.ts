import { createRoute, OpenAPIHono, z } from "@hono/zod-openapi";
import type { AppEnv } from "../../context.js";
import { ApiError, ErrorBody } from "../../errors.js";
import { bearerSecurity, EventIdParam } from "../../schemas.js";
import { operatorOnly } from "./guard.js";
import { SaleState, saleStateOf } from "./sale-state.js";

const SaleClosed = z.object({ eventId: z.string(), changed: z.boolean(), sale: SaleState }).openapi("SaleClosed");

const closeSaleRoute = createRoute({
  method: "post",
  path: "/v1/admin/events/{eventId}/close-sale",
  tags: ["operator"],
  summary: "Close the sale: no new places in line and no more admissions; admitted fans may finish their checkout",
  description:
    "The waiting room closes on every gateway at once: a join is refused (403 `forbidden`), nobody else is " +
    "admitted, fans still in line are told the room is closed. Sessions already admitted keep their access " +
    "token until it expires: they may still hold and buy. Holds stay allowed for them (the event is not " +
    "ended; `POST .../end` refuses every hold). `PATCH .../waiting-room` with `closed: false` opens the room " +
    "again. The event keeps the room paused, so a room Redis loses comes back admitting nobody. A repeat " +
    "answers `changed: false`.",
  security: bearerSecurity,
  middleware: [operatorOnly] as const,
  request: { params: EventIdParam },
  responses: {
    200: { description: "closed", content: { "application/json": { schema: SaleClosed } } },
    400: {
      description: "the room refused the change (`invalid_request`)",
      content: { "application/json": { schema: ErrorBody } },
    },
    401: { description: "no operator token", content: { "application/json": { schema: ErrorBody } } },
    403: { description: "a read-only operator token", content: { "application/json": { schema: ErrorBody } } },
    404: { description: "unknown event", content: { "application/json": { schema: ErrorBody } } },
    503: { description: "Redis unavailable; nothing changed", content: { "application/json": { schema: ErrorBody } } },
  },
});

const OpenedNow = z
  .object({
    eventId: z.string(),
    onSaleAt: z.string(),
    changed: z.boolean().openapi({ description: "false when the event was on sale already" }),
    sale: SaleState,
    lottery: z.object({
      commitment: z.string(),
      seed: z.string().optional(),
      membershipHash: z.string().optional(),
      beacon: z.string().optional(),
      size: z.number().int().optional(),
    }),
  })
  .openapi("OpenedNow");

const openNowRoute = createRoute({
  method: "post",
  path: "/v1/admin/events/{eventId}/open-now",
  tags: ["operator"],
  summary: "Open the sale now: onSaleAt becomes now, the pre-queue is drawn and admission starts",
  description:
    "The stored event's `onSaleAt` becomes now (holds are taken from now on: by this gateway at once, by the " +
    "others within 2 s; the event can no longer be replaced), then the waiting room draws the pre-queue in " +
    "its committed lottery order and opens, and the event's background jobs are armed. On an event already " +
    "on sale nothing changes (`changed: false`), and a room not yet open is opened (a retry after a 503). " +
    "An ended event is refused (403).",
  security: bearerSecurity,
  middleware: [operatorOnly] as const,
  request: { params: EventIdParam },
  responses: {
    200: { description: "open", content: { "application/json": { schema: OpenedNow } } },
    401: { description: "no operator token", content: { "application/json": { schema: ErrorBody } } },
    403: {
      description: "a read-only token, or an ended event",
      content: { "application/json": { schema: ErrorBody } },
    },
    404: { description: "unknown event", content: { "application/json": { schema: ErrorBody } } },
    503: {
      description: "Redis unavailable: the event is on sale in DynamoDB, the room not open yet; retry",
      content: { "application/json": { schema: ErrorBody } },
    },
  },
});

export const saleRoutes = new OpenAPIHono<AppEnv>()
  .openapi(closeSaleRoute, async (c) => {
    const { eventId } = c.req.valid("param");
    const { waitingRoom, events } = c.get("deps");
    const by = c.get("operator")?.name;
    const result = await waitingRoom.updateSettings(eventId, { closed: true }, by ? { by } : {});
    if (!result.ok) {
      if (result.reason === "not_found") throw new ApiError("not_found", `no event ${eventId}`);
      // Not reachable with `{ closed: true }`; were the patch ever refused, it is the request's 400, never a 500.
      if (result.reason === "invalid") {
        throw new ApiError("invalid_request", "closing the room was refused", { details: { issues: result.issues } });
      }
      throw new ApiError("unavailable", "the waiting room is unavailable; retry", { retryAfter: 1 });
    }
    // The waiting room kept the closed room on the event as paused (src/gateway.ts roomKeeper): a
    // room Redis loses comes back admitting nobody.
    const event = await events.get(eventId);
    if (!event) throw new ApiError("not_found", `no event ${eventId}`);
    return c.json({ eventId, changed: result.changed > 0, sale: saleStateOf(event, "closed") }, 200);
  })
  .openapi(openNowRoute, async (c) => {
    const { eventId } = c.req.valid("param");
    const opened = await c.get("deps").events.openNow(eventId, c.get("log").child({ eventId }));
    if (opened === null) throw new ApiError("not_found", `no event ${eventId}`);
    if (opened === "closed") throw new ApiError("forbidden", "the event has ended; it cannot be opened");
    const { event, room } = opened;
    if (!room.ok) {
      if (room.reason === "not_found") throw new ApiError("not_found", `no waiting room for ${eventId}`);
      throw new ApiError("unavailable", "the event is on sale; its waiting room is unavailable: retry", {
        retryAfter: 1,
      });
    }
    return c.json(
      {
        eventId,
        onSaleAt: event.onSaleAt,
        changed: opened.changed,
        sale: saleStateOf(event, room.info.state),
        lottery: room.info.lottery,
      },
      200,
    );
  });
