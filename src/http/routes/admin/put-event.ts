import { createRoute, OpenAPIHono } from "@hono/zod-openapi";
// Not .openapi("EventInput"): the schema is built with plain zod, and whether zod-openapi has
// patched it depends on import order. The document inlines it instead.
import { eventInputSchema } from "../../../inventory/index.js";
import type { AppEnv } from "../../context.js";
import { ApiError, ErrorBody } from "../../errors.js";
import { bearerSecurity, EventIdParam } from "../../schemas.js";
import { StoredEvent, toStoredEvent } from "./event-view.js";
import { operatorOnly } from "./guard.js";

const route = createRoute({
  method: "put",
  path: "/v1/admin/events/{eventId}",
  tags: ["operator"],
  summary: "Create or replace an event that has not gone on sale",
  description:
    "Writes the event and every seat to DynamoDB (BatchWriteItem, progress in the log; a replacement writes the seats " +
    "of the old layout with conditional writes, never over a seat or area a fan holds or bought), configures its " +
    "waiting room (the lottery commitment is fixed at the first PUT), and refreshes the seat-map cache. A replacement " +
    "is refused once the stored event goes on sale within the event cache's life plus the DynamoDB request budget " +
    "(75 s by default).",
  security: bearerSecurity,
  middleware: [operatorOnly] as const,
  request: {
    params: EventIdParam,
    body: { required: true, content: { "application/json": { schema: eventInputSchema } } },
  },
  responses: {
    200: { description: "replaced", content: { "application/json": { schema: StoredEvent } } },
    201: { description: "created", content: { "application/json": { schema: StoredEvent } } },
    400: { description: "invalid", content: { "application/json": { schema: ErrorBody } } },
    401: { description: "no operator token", content: { "application/json": { schema: ErrorBody } } },
    409: {
      description:
        "`event_on_sale`: already on sale, or another change in progress; `replacement_closed`: on sale too soon to " +
        "replace (less than the event cache's life plus the DynamoDB request budget away; `details.replaceableUntil`)",
      content: { "application/json": { schema: ErrorBody } },
    },
  },
});

export const putEventRoute = new OpenAPIHono<AppEnv>().openapi(route, async (c) => {
  const { eventId } = c.req.valid("param");
  const input = c.req.valid("json");
  const result = await c.get("deps").events.put(eventId, input, c.get("log").child({ eventId }));
  if (!result.ok) {
    if (result.reason === "on_sale")
      throw new ApiError("event_on_sale", "the event has gone on sale; it can no longer be replaced");
    if (result.reason === "replacement_closed") {
      throw new ApiError(
        "replacement_closed",
        `the event goes on sale at ${result.event.onSaleAt}; it could be replaced until ${new Date(result.replaceableUntil).toISOString()} ` +
          "(a gateway may be selling it before a later replacement lands)",
        {
          details: {
            onSaleAt: result.event.onSaleAt,
            replaceableUntil: new Date(result.replaceableUntil).toISOString(),
          },
        },
      );
    }
    if (result.reason === "conflict")
      throw new ApiError("event_on_sale", "another change of this event is in progress; retry");
    throw new ApiError("invalid_request", "the event is not valid", { details: { issues: result.issues } });
  }

  const { room } = result;
  if (!room.ok) {
    if (room.reason === "unavailable")
      throw new ApiError("unavailable", "the waiting room is unavailable; retry", { retryAfter: 2 });
    if (room.reason === "already_open") throw new ApiError("event_on_sale", "the waiting room is already open");
    if (room.reason === "invalid")
      throw new ApiError("invalid_request", "invalid waiting-room settings", { details: { issues: room.issues } });
    throw new ApiError("not_found", "waiting room not found");
  }
  return c.json(toStoredEvent(result.event, room.info.lottery.commitment), result.created ? 201 : 200);
});
