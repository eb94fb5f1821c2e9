import { createRoute, OpenAPIHono, z } from "@hono/zod-openapi";
import { limitRequest } from "../../client-ip.js";
import type { AppEnv } from "../../context.js";
import { ApiError, ErrorBody } from "../../errors.js";
import { EventIdParam, FanId } from "../../schemas.js";

const Query = z.object({
  fanId: FanId.optional().openapi({
    param: { name: "fanId", in: "query" },
    example: "fan_42",
    description: "absent: the gateway issues a fan id (the answer's `fanId`) and binds the challenge to it",
  }),
});

const Challenge = z
  .object({
    challenge: z.string().openapi({ description: "signed, bound to this fan and event; the gateway keeps no copy" }),
    fanId: z.string().openapi({ description: "the fan id the challenge is bound to: join with it" }),
    bits: z.number().int().openapi({ description: "leading zero bits SHA-256(challenge + ':' + nonce) must have" }),
    expiresAt: z.string().openapi({ description: "after this the join refuses the proof (invalid_proof)" }),
  })
  .openapi("ProofOfWorkChallenge");

const route = createRoute({
  method: "get",
  path: "/v1/events/{eventId}/queue/challenge",
  tags: ["waiting room"],
  summary: "A proof-of-work challenge for this fan, at the room's current powBits",
  description:
    "Stateless: the challenge is HMAC-signed by the gateway and checked on join without a lookup. Solve it " +
    "(find a nonce such that SHA-256(challenge + ':' + nonce) has `bits` leading zero bits) and join with " +
    '`{"fanId", "pow": {"challenge", "nonce"}}` (the answer\'s `fanId`). With powBits 0 the challenge has 0 bits (any nonce).',
  request: { params: EventIdParam, query: Query },
  responses: {
    200: { description: "a challenge", content: { "application/json": { schema: Challenge } } },
    400: { description: "invalid", content: { "application/json": { schema: ErrorBody } } },
    404: { description: "unknown event", content: { "application/json": { schema: ErrorBody } } },
    429: { description: "rate limited (per client IP)", content: { "application/json": { schema: ErrorBody } } },
    503: { description: "the waiting room is unavailable", content: { "application/json": { schema: ErrorBody } } },
  },
});

export const challengeRoute = new OpenAPIHono<AppEnv>().openapi(route, async (c) => {
  const { eventId } = c.req.valid("param");
  const query = c.req.valid("query");
  const { waitingRoom, bots } = c.get("deps");
  // Issuing costs a Redis read: a flood of challenge requests meets the per-IP limit first.
  await limitRequest(c, "challenge");
  const result = await waitingRoom.info(eventId);
  if (!result.ok) {
    if (result.reason === "not_found") throw new ApiError("not_found", `no event ${eventId}`);
    throw new ApiError("unavailable", "the waiting room is unavailable; retry", { retryAfter: 2 });
  }
  const fanId = query.fanId ?? bots.fanIds.issue(eventId);
  const issued = bots.pow.issueChallenge(eventId, fanId, result.info.powBits);
  c.header("Cache-Control", "no-store");
  return c.json(
    { challenge: issued.challenge, fanId, bits: issued.bits, expiresAt: new Date(issued.expiresAt).toISOString() },
    200,
  );
});
