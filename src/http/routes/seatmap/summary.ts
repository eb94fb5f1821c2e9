import { createRoute, OpenAPIHono, z } from "@hono/zod-openapi";
import type { AppEnv } from "../../context.js";
import { ApiError, ErrorBody } from "../../errors.js";
import { EventIdParam } from "../../schemas.js";

const SeatMap = z
  .object({
    eventId: z.string(),
    name: z.string(),
    onSaleAt: z.string(),
    holdSeconds: z.number(),
    maxSeatsPerFan: z.number(),
    sections: z.array(
      z.object({
        id: z.string(),
        tier: z.string(),
        price: z.number(),
        rows: z.number(),
        seatsPerRow: z.number(),
        available: z.number(),
        total: z.number(),
      }),
    ),
    generalAdmission: z.array(
      z.object({ id: z.string(), tier: z.string(), price: z.number(), available: z.number(), capacity: z.number() }),
    ),
  })
  .openapi("SeatMap");

const route = createRoute({
  method: "get",
  path: "/v1/events/{eventId}/seatmap",
  tags: ["seat map"],
  summary: "Sections and general-admission areas with availability (from cache; may lag a few seconds)",
  description: "While Redis is down, availability is counted in DynamoDB (kept a couple of seconds per gateway).",
  request: { params: EventIdParam },
  responses: {
    200: { description: "the seat map", content: { "application/json": { schema: SeatMap } } },
    404: { description: "unknown event", content: { "application/json": { schema: ErrorBody } } },
    503: {
      description: "neither the cache nor DynamoDB could answer",
      content: { "application/json": { schema: ErrorBody } },
    },
  },
});

export const seatMapSummaryRoute = new OpenAPIHono<AppEnv>().openapi(route, async (c) => {
  const { eventId } = c.req.valid("param");
  const { seatMap, waitingRoom } = c.get("deps");
  const { reads } = c.var;
  const event = await reads.event(eventId);
  if (!event) throw new ApiError("not_found", `no event ${eventId}`);
  // Fans on the seat map may be the only ones asking: bring back a room Redis lost.
  waitingRoom.ensureRoom(eventId);

  let available: Record<string, number> = {};
  try {
    available = await seatMap.availability(eventId);
    const missing = event.sections.filter((s) => available[s.id] === undefined);
    if (missing.length > 0) {
      await Promise.all(missing.map((s) => seatMap.getSection(eventId, s.id)));
      available = await seatMap.availability(eventId);
    }
  } catch (err) {
    // Redis is down: count from DynamoDB (Select COUNT on the available index), one count per
    // section at a time in this process, kept a couple of seconds.
    c.get("log").debug({ err: (err as Error).message }, "seat-map cache unavailable; counting in DynamoDB");
    available = await seatMap.availabilityFromStore(
      eventId,
      event.sections.map((s) => s.id),
    );
  }
  const areas = await Promise.all(event.generalAdmission.map((g) => reads.generalAdmission(`${eventId}/${g.id}`)));

  return c.json(
    {
      eventId,
      name: event.name,
      onSaleAt: event.onSaleAt,
      holdSeconds: event.holdSeconds,
      maxSeatsPerFan: event.maxSeatsPerFan,
      sections: event.sections.map((s) => ({
        id: s.id,
        tier: s.tier,
        price: s.price,
        rows: s.rows,
        seatsPerRow: s.seatsPerRow,
        available: available[s.id] ?? 0,
        total: s.rows * s.seatsPerRow,
      })),
      generalAdmission: event.generalAdmission.map((g, i) => ({
        id: g.id,
        tier: g.tier,
        price: g.price,
        available: areas[i]?.available ?? 0,
        capacity: g.capacity,
      })),
    },
    200,
  );
});
