import { createRoute, OpenAPIHono, z } from "@hono/zod-openapi";
import type { AppEnv } from "../../context.js";
import { ApiError, ErrorBody } from "../../errors.js";
import { bearerSecurity, EventIdParam } from "../../schemas.js";
import { operatorOnly } from "./guard.js";

const ClosedEvent = z
  .object({
    eventId: z.string(),
    name: z.string(),
    onSaleAt: z.string(),
    holdSeconds: z.number(),
    closedAt: z.string(),
    jobsEndAt: z.string().openapi({
      description:
        "When the event's last hold can have expired: its remaining work (pending purchases, unacknowledged " +
        "bookings) is finished from then on, and then every background job of it is removed",
    }),
    jobsEndedAt: z.string().optional().openapi({ description: "Set once every job of the event is gone" }),
  })
  .openapi("ClosedEvent");

const route = createRoute({
  method: "post",
  path: "/v1/admin/events/{eventId}/close",
  tags: ["operator"],
  summary: "Close the sale: no more holds; the event's background jobs end once its remaining work is done",
  description:
    "Holds are refused (403 `forbidden`, the event is not on sale, as before its on-sale) from then on (by this gateway at once, by the others within their " +
    "event cache's 60 s); holds made before may still be bought until they expire. A repeat answers the same " +
    "closing time.",
  security: bearerSecurity,
  middleware: [operatorOnly] as const,
  request: { params: EventIdParam },
  responses: {
    200: { description: "closed", content: { "application/json": { schema: ClosedEvent } } },
    401: { description: "no operator token", content: { "application/json": { schema: ErrorBody } } },
    404: { description: "unknown event", content: { "application/json": { schema: ErrorBody } } },
  },
});

export const closeEventRoute = new OpenAPIHono<AppEnv>().openapi(route, async (c) => {
  const { eventId } = c.req.valid("param");
  const closed = await c.get("deps").events.close(eventId, c.get("log").child({ eventId }));
  if (!closed) throw new ApiError("not_found", `no event ${eventId}`);
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
    },
    200,
  );
});
