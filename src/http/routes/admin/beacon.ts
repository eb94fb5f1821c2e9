/**
 * `PUT /v1/admin/events/{eventId}/waiting-room/beacon`: the draw's public beacon, recorded in
 * DynamoDB with the lottery's commitment (src/waiting-room/beacon.ts has the rules).
 */
import { createRoute, OpenAPIHono, z } from "@hono/zod-openapi";
import type { AppEnv } from "../../context.js";
import { ApiError, ErrorBody } from "../../errors.js";
import { bearerSecurity, EventIdParam } from "../../schemas.js";
import { operatorOnly } from "./guard.js";

/** Printable ASCII, so what is published reads the same everywhere. */
const printable = (what: string) =>
  z
    .string()
    .min(1)
    .max(256)
    .regex(/^[\x20-\x7e]+$/, `${what}: printable ASCII only`);

const Beacon = z
  .strictObject({
    source: printable("source")
      .optional()
      .openapi({
        description:
          "Where the value will come from, named so anyone can look it up (e.g. `drand quicknet round 12345678`, " +
          "a round published after the close). Only before the pre-queue closes; recorded once.",
        example: "drand quicknet round 12345678",
      }),
    value: printable("value")
      .optional()
      .openapi({
        description:
          "The beacon value (e.g. the round's randomness, hex). Until the draw, for a source recorded before the " +
          "close (or, with no source, before the close too); recorded once.",
      }),
  })
  .refine((b) => b.source !== undefined || b.value !== undefined, "name a source, a value or both")
  .openapi("LotteryBeacon");

const Recorded = z
  .object({
    beaconSource: z.string().optional(),
    beacon: z.string().optional(),
  })
  .openapi("LotteryBeaconRecorded");

const route = createRoute({
  method: "put",
  path: "/v1/admin/events/{eventId}/waiting-room/beacon",
  tags: ["operator"],
  summary: "Record the lottery draw's public beacon: its source before the close, its value before the draw",
  description:
    "The draw key mixes in a beacon value nobody inside controls (src/lottery/draw.ts). Name its source before " +
    "the pre-queue closes; send the value once it is published. While a named source has no value the draw " +
    "waits, at most 10 minutes after the close; then it draws with none and the queue info says `beaconMissed`. " +
    "Each part is recorded once: the same again answers 200, another answers 409 `beacon_conflict`.",
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
      description: "`lottery_closed` (too late for this part), `lottery_drawn`, or `beacon_conflict`",
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
      case "lottery_closed":
        throw new ApiError(
          "lottery_closed",
          "the pre-queue has closed: a beacon source (or a value with none named) is only taken before the close",
        );
      case "lottery_drawn":
        throw new ApiError("lottery_drawn", "the draw is sealed: its beacon can no longer change");
      case "beacon_conflict":
        throw new ApiError("beacon_conflict", "another beacon is recorded; each part is recorded once", {
          details: {
            ...(result.beaconSource === undefined ? {} : { beaconSource: result.beaconSource }),
            ...(result.beacon === undefined ? {} : { beacon: result.beacon }),
          },
        });
      default:
        throw new ApiError("unavailable", "the lottery store is unavailable; retry", { retryAfter: 1 });
    }
  }
  c.get("log").info({ eventId, by: c.get("operator")?.name, ...body }, "lottery beacon recorded");
  return c.json(
    {
      ...(result.beaconSource === undefined ? {} : { beaconSource: result.beaconSource }),
      ...(result.beacon === undefined ? {} : { beacon: result.beacon }),
    },
    200,
  );
});
