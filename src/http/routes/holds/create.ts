import { createRoute, OpenAPIHono, z } from "@hono/zod-openapi";
import { type BestRequest as BestInput, MAX_SEATS_PER_FAN } from "../../../inventory/index.js";
import { limitRequest } from "../../client-ip.js";
import type { AppEnv } from "../../context.js";
import { ApiError, ErrorBody } from "../../errors.js";
import { accessTokenFirst, sessionCheck, verifiedAccessToken } from "../../middleware/fan-auth.js";
import { bearerSecurity, EventIdParam, ID, SeatId } from "../../schemas.js";

/** Best available together: the order is src/inventory/best.ts's (docs/API.md "Best available"). */
const BestRequest = z
  .strictObject({
    quantity: z.number().int().min(1).max(MAX_SEATS_PER_FAN),
    tier: z.string().min(1).max(64).optional(),
    section: z.string().regex(ID).optional(),
    maxPrice: z.number().int().min(0).optional(),
    splitRows: z.boolean().optional(),
  })
  .refine((b) => b.tier === undefined || b.section === undefined, { message: "name a tier or a section, not both" })
  .openapi("BestAvailable", {
    description:
      "`quantity` adjacent seats in one row (two adjacent rows only with `splitRows`), in `tier` or " +
      "`section` (at most one; neither: any section), at most `maxPrice` (minor units) a seat.",
  });

// MAX_SEATS_PER_FAN is a coarse syntactic bound (no event allows more): how many a fan may take
// at this event, a seat named twice included, is the inventory's one rule (src/inventory/limits.ts).
const HoldRequest = z
  .union([
    z.strictObject({ seats: z.array(SeatId).min(1).max(MAX_SEATS_PER_FAN) }),
    z.strictObject({
      generalAdmission: z.strictObject({
        id: z.string().regex(ID),
        quantity: z.number().int().min(1).max(MAX_SEATS_PER_FAN),
      }),
    }),
    z.strictObject({ best: BestRequest }),
  ])
  .openapi("HoldRequest", {
    description: "Either `seats`, `generalAdmission` or `best` (best available together). All or nothing.",
  });

const Hold = z
  .object({
    holdId: z.string(),
    seats: z.array(z.string()),
    generalAdmission: z.object({ id: z.string(), quantity: z.number() }).optional(),
    expiresAt: z.string(),
    amount: z.number().int(),
  })
  .openapi("Hold");

const route = createRoute({
  method: "post",
  path: "/v1/events/{eventId}/holds",
  tags: ["holds"],
  summary: "Hold seats (or general-admission places) for the fan; DynamoDB decides",
  security: bearerSecurity,
  middleware: [accessTokenFirst()] as const,
  request: { params: EventIdParam, body: { required: true, content: { "application/json": { schema: HoldRequest } } } },
  responses: {
    201: { description: "held", content: { "application/json": { schema: Hold } } },
    400: { description: "invalid", content: { "application/json": { schema: ErrorBody } } },
    401: { description: "missing, bad or ended access token", content: { "application/json": { schema: ErrorBody } } },
    403: { description: "token of another kind or event", content: { "application/json": { schema: ErrorBody } } },
    404: { description: "unknown event, seat or area", content: { "application/json": { schema: ErrorBody } } },
    409: {
      description:
        "lost: `details.seats` names the seats; best available: `no_block_available` (`details.available`: free seats left where asked)",
      content: { "application/json": { schema: ErrorBody } },
    },
    422: {
      description: "more than maxSeatsPerFan, counting what the fan already holds and bought (`details.limit`)",
      content: { "application/json": { schema: ErrorBody } },
    },
    429: { description: "rate limited", content: { "application/json": { schema: ErrorBody } } },
    503: {
      description: "DynamoDB unavailable; nothing changed",
      content: { "application/json": { schema: ErrorBody } },
    },
  },
});

export const createHoldRoute = new OpenAPIHono<AppEnv>().openapi(route, async (c) => {
  const { eventId } = c.req.valid("param");
  const body = c.req.valid("json");
  const claims = verifiedAccessToken(c, eventId);
  // The session check (one Redis call) is started now and awaited beside the hold's shield, so a
  // hold of named seats goes to Redis once before DynamoDB, not twice; its 401 still comes first.
  const session = sessionCheck(c, eventId, claims);
  session.catch(() => {}); // awaited below; a limit's 429 must not leave it unhandled
  try {
    await limitRequest(c, "hold", { eventId, fanId: claims.fanId });
  } catch (limited) {
    await session;
    throw limited;
  }

  // The event, the seat limit and the seats are the claim path's to decide (one read of the event,
  // in the inventory). A store that cannot answer is one 503 for every route (app.ts): refused
  // or unreachable, nothing was held; timed out, the write may still land under a hold id nobody
  // was told, and then expires unclaimed (RELIABILITY.md). Either way the fan retries.
  const { holds } = c.get("deps");
  // An ended session's 401 before a store's 503.
  const sessionFirst = async (err: unknown): Promise<never> => {
    await session;
    throw err;
  };
  // General admission: the session check is its only Redis call before DynamoDB.
  if ("generalAdmission" in body) await session;
  const result =
    "seats" in body
      ? await holds.holdSeats({ eventId, fanId: claims.fanId, seatIds: body.seats, gate: session }).catch(sessionFirst)
      : "best" in body
        ? await holds
            .holdBest({ eventId, fanId: claims.fanId, best: withoutUndefined(body.best), gate: session })
            .catch(sessionFirst)
        : await holds.holdGeneralAdmission({
            eventId,
            fanId: claims.fanId,
            areaId: body.generalAdmission.id,
            quantity: body.generalAdmission.quantity,
          });

  if (result.ok) {
    const h = result.hold;
    return c.json(
      {
        holdId: h.holdId,
        seats: h.seats,
        ...(h.generalAdmission
          ? { generalAdmission: { id: h.generalAdmission.areaId, quantity: h.generalAdmission.quantity } }
          : {}),
        expiresAt: h.expiresAt,
        amount: h.amount,
      },
      201,
    );
  }
  switch (result.reason) {
    case "seat_unavailable":
      throw seatUnavailable(result.seats);
    case "insufficient_quantity":
      throw new ApiError("seat_unavailable", `only ${result.available} places left`, {
        details: { available: result.available },
      });
    case "not_found":
      throw new ApiError("not_found", `unknown ${result.what}`, {
        details: result.seats ? { seats: result.seats } : {},
      });
    case "not_on_sale":
      throw new ApiError("forbidden", "the event is not on sale");
    case "seat_limit_exceeded":
      throw new ApiError("seat_limit_exceeded", `at most ${result.limit} seats per fan`, {
        details: { limit: result.limit },
      });
    case "invalid_request":
      throw new ApiError("invalid_request", result.message);
    case "no_block_available":
      throw new ApiError("no_block_available", "no seats together left where asked", {
        details: { available: result.available },
      });
    case "contention":
      throw new ApiError("unavailable", "too much contention on these seats; retry", { retryAfter: 1 });
  }
});

/** The request as the claim path takes it (exactOptionalPropertyTypes: no key set to undefined). */
function withoutUndefined(best: z.infer<typeof BestRequest>): BestInput {
  const { quantity, tier, section, maxPrice, splitRows } = best;
  return {
    quantity,
    ...(tier !== undefined ? { tier } : {}),
    ...(section !== undefined ? { section } : {}),
    ...(maxPrice !== undefined ? { maxPrice } : {}),
    ...(splitRows !== undefined ? { splitRows } : {}),
  };
}

/** The 409 of a hold lost to another fan (the route's, and the hold's fast path: src/http/fast-path.ts). */
export function seatUnavailable(seats: string[]): ApiError {
  return new ApiError("seat_unavailable", "these seats are already held or sold", { details: { seats } });
}
