import { createRoute, OpenAPIHono, z } from "@hono/zod-openapi";
import type { AppEnv } from "../../context.js";
import { ApiError, ErrorBody } from "../../errors.js";
import { SectionParams } from "../../schemas.js";

const Seats = z
  .object({
    sectionId: z.string(),
    version: z.string(),
    seats: z.array(z.object({ id: z.string(), status: z.enum(["available", "held", "sold"]) })),
  })
  .openapi("SectionSeats");

const route = createRoute({
  method: "get",
  path: "/v1/events/{eventId}/sections/{sectionId}/seats",
  tags: ["seat map"],
  summary: "Every seat of a section with its status (from cache; ETag / If-None-Match)",
  description:
    "Served from the Redis cache; while Redis is down, from DynamoDB (the version then starts with `db.`). " +
    "A version is never reused, even after the cache was lost, so an ETag never matches other content.",
  request: { params: SectionParams },
  responses: {
    200: { description: "the seats", content: { "application/json": { schema: Seats } } },
    304: { description: "unchanged since the ETag sent" },
    404: { description: "unknown event or section", content: { "application/json": { schema: ErrorBody } } },
    503: {
      description: "neither the cache nor DynamoDB could answer",
      content: { "application/json": { schema: ErrorBody } },
    },
  },
});

export const sectionSeatsRoute = new OpenAPIHono<AppEnv>().openapi(route, async (c) => {
  const { eventId, sectionId } = c.req.valid("param");
  const event = await c.var.reads.event(eventId);
  if (!event) throw new ApiError("not_found", `no event ${eventId}`);
  if (!event.sections.some((s) => s.id === sectionId)) {
    throw new ApiError("not_found", `event ${eventId} has no section ${sectionId}`);
  }

  const { seatMap, waitingRoom } = c.var.deps;
  // Fans on the seat map may be the only ones asking: bring back a room Redis lost.
  waitingRoom.ensureRoom(eventId);
  const key = `${eventId}/${sectionId}`;
  const bodies = c.var.reads.sectionBodies;
  const ifNoneMatch = c.req.header("if-none-match");
  const notModified = (version: string) =>
    ifNoneMatch?.split(",").some((t) => t.trim().replace(/^W\//, "") === `"${version}"`) ?? false;
  const send = (version: string, body: string) => {
    c.header("ETag", `"${version}"`);
    c.header("Cache-Control", "no-cache");
    if (notModified(version)) return c.body(null, 304);
    c.header("Content-Type", "application/json");
    return c.body(body, 200);
  };

  try {
    // Hot path: one small read of the version; the body is serialized once per version.
    const version = await seatMap.version(eventId, sectionId);
    const memo = bodies.get(key);
    if (version && memo?.version === version) return send(version, memo.body);
    const section = await seatMap.getSection(eventId, sectionId);
    if (!section) throw new ApiError("not_found", `event ${eventId} has no section ${sectionId}`);
    const body = JSON.stringify(section);
    if (bodies.size >= 1_000) bodies.clear();
    bodies.set(key, { version: section.version, body });
    return send(section.version, body);
  } catch (err) {
    if (err instanceof ApiError) throw err;
    // Redis is down: read the authoritative store directly (slower, still correct). One load per
    // section at a time in this process, kept a couple of seconds, so a rush is no stampede.
    c.var.log.debug({ err: (err as Error).message }, "seat-map cache unavailable; reading DynamoDB");
    const section = await seatMap.sectionFromStore(eventId, sectionId);
    if (!section) throw new ApiError("not_found", `event ${eventId} has no section ${sectionId}`);
    return send(section.version, JSON.stringify(section));
  }
});
