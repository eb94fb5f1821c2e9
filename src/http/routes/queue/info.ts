import { createRoute, OpenAPIHono, z } from "@hono/zod-openapi";
import type { AppEnv } from "../../context.js";
import { ApiError, ErrorBody } from "../../errors.js";
import { EventIdParam } from "../../schemas.js";
import { FAN_ID_MODES } from "../../../waiting-room/fan-ids.js";

const Info = z
  .object({
    onSaleAt: z.string(),
    state: z.enum(["prequeue", "open", "paused", "closed"]),
    waiting: z.number().int(),
    admitPerSecond: z.number(),
    powBits: z.number().int().openapi({
      description: "a join for a new place brings a proof of work of this many bits (GET .../queue/challenge); 0: none",
    }),
    invites: z.boolean().openapi({ description: "a join for a new place brings the operator's invite token" }),
    fanIds: z.enum(FAN_ID_MODES).optional().openapi({
      description:
        "which fan ids a join may name: `any`, or `issued` (only ids the gateway issued: join without one); absent while the event cannot be read",
    }),
    lottery: z.object({
      commitment: z
        .string()
        .openapi({ description: "SHA-256 (hex) of the shuffle seed, published before the on-sale" }),
      seed: z.string().optional().openapi({ description: "revealed once the pre-queue has been drawn" }),
      membershipHash: z.string().optional().openapi({
        description:
          "once drawn: M, SHA-256 (hex) over the closed pre-queue's entries (SHA-256 hex of each fan id), ascending, each followed by a newline",
      }),
      beacon: z.string().optional().openapi({
        description: "the drand round's randomness the draw key includes, once recorded (events with a chain)",
      }),
      size: z
        .number()
        .int()
        .optional()
        .openapi({ description: "once drawn: how many fans the pre-queue held at its close" }),
      drand: z
        .object({
          chainHash: z.string(),
          publicKey: z.string(),
          genesisTime: z.number().int(),
          period: z.number().int(),
          scheme: z.enum(["bls-unchained-g1-rfc9380", "pedersen-bls-chained"]),
          round: z.number().int().openapi({
            description: "the round the draw takes: the first published at or after the pre-queue's close",
          }),
          roundAt: z.string().openapi({ description: "when that round is published" }),
          knownAs: z.string().optional().openapi({ description: "the League of Entropy chain these parameters are" }),
        })
        .optional()
        .openapi({
          description:
            "the drand chain the event names for its beacon, and the round of the draw, announced from the start",
        }),
      beaconRound: z
        .object({ round: z.number().int(), signature: z.string(), previousSignature: z.string().optional() })
        .optional()
        .openapi({
          description:
            "the drand round recorded as the beacon, with its BLS signature (beacon = SHA-256 of the signature)",
        }),
      awaitingBeacon: z.boolean().optional().openapi({
        description: "true: the pre-queue has closed and the draw waits for its drand round to be recorded",
      }),
      closedAt: z.string().optional().openapi({ description: "once drawn: when the pre-queue closed" }),
      sealedOnly: z.boolean().optional().openapi({
        description:
          "true: the waiting room was recreated after its Redis data was lost; these are the draw's inputs as sealed in DynamoDB, and the membership pages serve the sealed order",
      }),
    }),
  })
  .openapi("WaitingRoomInfo");

const route = createRoute({
  method: "get",
  path: "/v1/events/{eventId}/waiting-room",
  tags: ["waiting room"],
  summary: "Public state of the line and the lottery commitment",
  request: { params: EventIdParam },
  responses: {
    200: { description: "info", content: { "application/json": { schema: Info } } },
    404: { description: "unknown event", content: { "application/json": { schema: ErrorBody } } },
    503: { description: "the waiting room is unavailable", content: { "application/json": { schema: ErrorBody } } },
  },
});

export const infoRoute = new OpenAPIHono<AppEnv>().openapi(route, async (c) => {
  const { eventId } = c.req.valid("param");
  const result = await c.get("deps").waitingRoom.info(eventId);
  if (!result.ok) {
    if (result.reason === "not_found") throw new ApiError("not_found", `no event ${eventId}`);
    throw new ApiError("unavailable", "the waiting room is unavailable; retry", { retryAfter: 2 });
  }
  // From the process's event cache; a store that cannot answer only leaves the field out.
  const event = await c
    .get("reads")
    .event(eventId)
    .catch(() => null);
  return c.json(event ? { ...result.info, fanIds: event.waitingRoom.fanIds ?? "any" } : result.info, 200);
});
