import { createRoute, OpenAPIHono, z } from "@hono/zod-openapi";
import type { AppEnv } from "../../context.js";
import { ApiError, ErrorBody } from "../../errors.js";
import { EventIdParam } from "../../schemas.js";

const PAGE = 1_000;

const Query = z.object({
  cursor: z
    .string()
    .regex(/^\d{1,9}$/)
    .optional()
    .openapi({ description: "`next` of the previous page; absent for the first" }),
});

const Membership = z
  .object({
    size: z.number().int().openapi({ description: "fans in the pre-queue at its close" }),
    entries: z.array(z.string()).openapi({
      description:
        "SHA-256 (hex) of each pre-queued fan id, in draw order: entries[i] of the page starting at place p has place p + i. Hashes, not fan ids: a fan id lets anyone take that fan's place",
    }),
    firstPosition: z.number().int(),
    next: z.string().optional().openapi({ description: "the cursor of the next page; absent on the last" }),
  })
  .openapi("LotteryMembership");

const route = createRoute({
  method: "get",
  path: "/v1/events/{eventId}/queue/lottery",
  tags: ["waiting room"],
  summary: "The drawn pre-queue, a page at a time, for anyone to verify the draw",
  request: { params: EventIdParam, query: Query },
  responses: {
    200: { description: "a page of the membership", content: { "application/json": { schema: Membership } } },
    400: { description: "invalid cursor", content: { "application/json": { schema: ErrorBody } } },
    404: { description: "unknown event", content: { "application/json": { schema: ErrorBody } } },
    409: { description: "not drawn yet", content: { "application/json": { schema: ErrorBody } } },
    503: { description: "the waiting room is unavailable", content: { "application/json": { schema: ErrorBody } } },
  },
});

export const lotteryRoute = new OpenAPIHono<AppEnv>().openapi(route, async (c) => {
  const { eventId } = c.req.valid("param");
  const offset = Number(c.req.valid("query").cursor ?? "0");
  const result = await c.get("deps").waitingRoom.lotteryPage(eventId, { offset, limit: PAGE });
  if (!result.ok) {
    if (result.reason === "not_found") throw new ApiError("not_found", `no event ${eventId}`);
    if (result.reason === "not_drawn") throw new ApiError("not_drawn", "the pre-queue has not been drawn yet");
    if (result.reason === "invalid") throw new ApiError("invalid_request", "invalid cursor");
    throw new ApiError("unavailable", "the waiting room is unavailable; retry", { retryAfter: 2 });
  }
  const end = offset + result.entries.length;
  return c.json(
    {
      size: result.preQueued,
      entries: result.entries,
      firstPosition: offset + 1,
      ...(result.entries.length === PAGE && end < result.preQueued ? { next: String(end) } : {}),
    },
    200,
  );
});
