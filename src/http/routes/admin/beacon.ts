/**
 * `PUT /v1/admin/events/{eventId}/waiting-room/beacon`: the draw's beacon, a drand round of the
 * chain the event names, taken only with its BLS signature (src/waiting-room/beacon.ts has the rules).
 */
import { createRoute, OpenAPIHono, z } from "@hono/zod-openapi";
import type { AppEnv } from "../../context.js";
import { ApiError, ErrorBody } from "../../errors.js";
import { bearerSecurity, EventIdParam } from "../../schemas.js";
import { operatorOnly } from "./guard.js";

const hex = z
  .string()
  .min(1)
  .max(512)
  .regex(/^[0-9a-f]+$/, "lowercase hex");

/** A drand round as a relay serves it (`GET https://api.drand.sh/<chain>/public/<round>`), nothing else. */
const Beacon = z
  .strictObject({
    round: z.number().int().min(1).max(Number.MAX_SAFE_INTEGER).openapi({
      description:
        "The drand round: the first published at or after the pre-queue's close (the info's `lottery.drand.round`).",
      example: 12345678,
    }),
    signature: hex.openapi({
      description: "The round's BLS signature, compressed, lowercase hex (48 bytes on quicknet).",
    }),
    previousSignature: hex.optional().openapi({
      description: "The previous round's signature, for a chained scheme (`pedersen-bls-chained`) only.",
    }),
  })
  .openapi("LotteryBeacon");

const Recorded = z
  .object({
    round: z.number().int(),
    signature: z.string(),
    previousSignature: z.string().optional(),
    beacon: z
      .string()
      .openapi({ description: "The value the draw takes: SHA-256 of the signature (drand's randomness)." }),
  })
  .openapi("LotteryBeaconRecorded");

const route = createRoute({
  method: "put",
  path: "/v1/admin/events/{eventId}/waiting-room/beacon",
  tags: ["operator"],
  summary: "Record the lottery draw's beacon: the drand round of the close, with its signature",
  description:
    "The draw key mixes in the randomness of a drand round (src/lottery/drand.ts): the first round of the chain the " +
    "event's `waitingRoom.drand` names that is published at or after the pre-queue closes. It is taken only once " +
    "the pre-queue has closed, only for that round, and only with a BLS signature that verifies under the chain's " +
    "public key. Until it is recorded the draw waits (no fallback). The same round again answers 200.",
  security: bearerSecurity,
  middleware: [operatorOnly] as const,
  request: { params: EventIdParam, body: { required: true, content: { "application/json": { schema: Beacon } } } },
  responses: {
    200: { description: "what is recorded", content: { "application/json": { schema: Recorded } } },
    400: { description: "invalid", content: { "application/json": { schema: ErrorBody } } },
    401: { description: "no operator token", content: { "application/json": { schema: ErrorBody } } },
    403: { description: "a read-only operator token", content: { "application/json": { schema: ErrorBody } } },
    404: { description: "unknown event, or no lottery", content: { "application/json": { schema: ErrorBody } } },
    409: {
      description:
        "`lottery_open` (the pre-queue has not closed), `wrong_beacon_round` (not the round of this draw; " +
        "`details.round`), `lottery_drawn`, or `no_beacon_chain` (the event names no drand chain)",
      content: { "application/json": { schema: ErrorBody } },
    },
    422: {
      description: "`invalid_beacon`: the signature does not verify under the chain's public key",
      content: { "application/json": { schema: ErrorBody } },
    },
    503: { description: "unavailable", content: { "application/json": { schema: ErrorBody } } },
  },
});

export const beaconRoute = new OpenAPIHono<AppEnv>().openapi(route, async (c) => {
  const { eventId } = c.req.valid("param");
  const body = c.req.valid("json");
  const result = await c.get("deps").waitingRoom.recordBeacon(eventId, body);
  if (!result.ok) {
    switch (result.reason) {
      case "not_found":
        throw new ApiError("not_found", `no event ${eventId}`);
      case "no_lottery":
        throw new ApiError("not_found", `event ${eventId} has no lottery commitment`);
      case "no_beacon_chain":
        throw new ApiError("no_beacon_chain", "the event names no drand chain: its draw takes no beacon");
      case "lottery_open":
        throw new ApiError(
          "lottery_open",
          `the pre-queue has not closed: the draw takes round ${result.round}, published at ${result.roundAt}`,
          { details: { round: result.round, roundAt: result.roundAt } },
        );
      case "wrong_round":
        throw new ApiError(
          "wrong_beacon_round",
          `the draw takes round ${result.round}, the first published at or after the close (${result.roundAt})`,
          { details: { round: result.round, roundAt: result.roundAt } },
        );
      case "invalid_beacon":
        throw new ApiError("invalid_beacon", `not this chain's round: ${result.message}`);
      case "lottery_drawn":
        throw new ApiError("lottery_drawn", "the draw is sealed: its beacon can no longer change");
      default:
        throw new ApiError("unavailable", "the lottery store is unavailable; retry", { retryAfter: 1 });
    }
  }
  c.get("log").info({ eventId, by: c.get("operator")?.name, round: body.round }, "lottery beacon recorded");
  return c.json({ ...result.round, beacon: result.beacon }, 200);
});
