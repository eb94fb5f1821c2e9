import { createRoute, OpenAPIHono, z } from "@hono/zod-openapi";
import { commitmentAtJoin } from "../../join-lottery.js";
import type { Context } from "hono";
import { createMiddleware } from "hono/factory";
import { enforceLineLimits, limitJoinAlone, lineLimits } from "../../client-ip.js";
import type { AppEnv } from "../../context.js";
import { ApiError, ErrorBody } from "../../errors.js";
import { EventIdParam, FanId } from "../../schemas.js";
import type { JoinResult } from "../../../waiting-room/index.js";
import type { FanIdMode } from "../../../waiting-room/fan-ids.js";
import { Advice, FanStatus, placeView } from "./place-view.js";

const Proof = z
  .strictObject({
    challenge: z.string().min(1).max(512).openapi({ description: "from GET .../queue/challenge for this fan" }),
    nonce: z
      .string()
      .min(1)
      .max(64)
      .openapi({ description: 'SHA-256(challenge + ":" + nonce) starts with the challenge\'s bits of zeros' }),
  })
  .openapi("ProofOfWork");

const JoinBody = z
  .strictObject({
    fanId: FanId.optional().openapi({
      example: "fan_42",
      description:
        "absent: the gateway issues the fan an unguessable id (the answer's `fanId`: keep it to rejoin); an event " +
        'with `waitingRoom.fanIds: "issued"` takes no other',
    }),
    pow: Proof.optional().openapi({ description: "required for a new place while the room's powBits > 0" }),
    invite: z.string().min(1).max(4_096).optional().openapi({
      description: "the operator's invite token (a JWT; docs/waiting-room.md), required while invites is on",
    }),
  })
  .openapi("JoinRequest");

export type RefusalReason =
  | "pow_missing"
  | "pow_invalid"
  | "invite_missing"
  | "invite_invalid"
  | "identity_taken"
  | "fan_id_not_issued";

function refuse(c: Context<AppEnv>, reason: RefusalReason, error: ApiError): never {
  // (the join's fast path counts its refusals the same way: src/http/fast-path.ts)
  c.get("deps").metrics.joinRefused.inc({ reason });
  throw error;
}

/**
 * A refusal decided before the join script runs (a proof or an invite that does not check, an
 * identity held by another fan) takes the per-IP join limit first, as a malformed body does, so a
 * flood of forged proofs from one address meets 429 like any other flood.
 */
async function refuseBeforeJoin(c: Context<AppEnv>, reason: RefusalReason, error: ApiError): Promise<never> {
  if (c.get("deps").limits.ratePerIp > 0) await limitJoinAlone(c, c.req.param("eventId") ?? "");
  return refuse(c, reason, error);
}

const Joined = z
  .object({
    queueToken: z.string(),
    fanId: z
      .string()
      .openapi({ description: "the fan id the place is held under (issued by the gateway when none came)" }),
    position: z.number().int(),
    status: FanStatus,
    provisional: z.boolean().openapi({ description: "true before the draw: position is only the arrival number" }),
    ahead: z.number().int(),
    ...Advice,
    lottery: z
      .object({
        commitment: z.string().openapi({
          description:
            "SHA-256 (hex) of the draw's seed, as committed when the fan joined: keep it to check the seed against",
        }),
      })
      .optional(),
  })
  .openapi("Joined");

const jsonMediaType = /^application\/([\w.-]+\+)?json$/i;

/** Whether the body will pass the route's validation (then the join script takes the limit). */
async function wellFormedJoin(c: Context<AppEnv>): Promise<boolean> {
  const mediaType = (c.req.header("content-type") ?? "").split(";")[0]?.trim() ?? "";
  if (!jsonMediaType.test(mediaType)) return false;
  const body: unknown = await c.req.json().catch(() => undefined);
  return JoinBody.safeParse(body).success;
}

// A well-formed join takes the per-IP limit inside the join script (one Redis round trip for the
// join). Any other body takes it here, before the validation answers 400, so a flood of malformed
// joins from one address is answered 429 like any other flood: it costs a parse of the body (the
// body is at most 16 KiB, and hono keeps the text for the validator) and a rate-limit check.
const limitJoin = createMiddleware<AppEnv>(async (c, next) => {
  if (c.get("deps").limits.ratePerIp > 0 && !(await wellFormedJoin(c))) {
    await limitJoinAlone(c, c.req.param("eventId") ?? "");
  }
  await next();
});

const route = createRoute({
  middleware: [limitJoin] as const,
  method: "post",
  path: "/v1/events/{eventId}/queue",
  tags: ["waiting room"],
  summary: "Join the line (idempotent per fan)",
  request: { params: EventIdParam, body: { required: true, content: { "application/json": { schema: JoinBody } } } },
  responses: {
    200: { description: "already in line: the same place", content: { "application/json": { schema: Joined } } },
    201: { description: "joined", content: { "application/json": { schema: Joined } } },
    400: {
      description: "invalid, or `invalid_proof`: the proof of work does not check",
      content: { "application/json": { schema: ErrorBody } },
    },
    403: {
      description: "revoked fan, closed line, or `invalid_invite`",
      content: { "application/json": { schema: ErrorBody } },
    },
    404: { description: "unknown event", content: { "application/json": { schema: ErrorBody } } },
    409: {
      description: "`identity_already_queued`: another fan id holds this invite's identity",
      content: { "application/json": { schema: ErrorBody } },
    },
    428: {
      description:
        "`proof_of_work_required` (details.powBits: solve a challenge of that many bits) or `invite_required`",
      content: { "application/json": { schema: ErrorBody } },
    },
    429: { description: "rate limited", content: { "application/json": { schema: ErrorBody } } },
    503: { description: "the waiting room is unavailable", content: { "application/json": { schema: ErrorBody } } },
  },
});

export const joinRoute = new OpenAPIHono<AppEnv>().openapi(route, async (c) => {
  const { eventId } = c.req.valid("param");
  const body = c.req.valid("json");
  const { pow, invite } = body;
  const { bots, waitingRoom } = c.get("deps");
  let fanId = body.fanId;
  const issuedNow = fanId === undefined;
  if (fanId === undefined) {
    if (pow) {
      throw new ApiError("invalid_request", "a proof of work is bound to a fan id: send the challenge's fanId", {
        details: { field: "fanId" },
      });
    }
    fanId = bots.fanIds.issue(eventId);
  } else if (!bots.fanIds.isIssued(eventId, fanId) && (await fanIdModeOf(c, eventId)) === "issued") {
    return refuseBeforeJoin(c, "fan_id_not_issued", notIssued());
  }
  let proofBits = 0;
  if (pow) {
    const check = bots.pow.checkProof(pow.challenge, pow.nonce, fanId, eventId);
    if (!check.ok) {
      return refuseBeforeJoin(
        c,
        "pow_invalid",
        new ApiError("invalid_proof", `the proof of work does not check (${check.reason}); fetch a new challenge`, {
          details: { field: "pow", reason: check.reason },
        }),
      );
    }
    proofBits = check.bits;
  }
  let invited = false;
  /** The invite's identity, when this join made its claim for a fan id the client named. */
  let freshClaim: string | undefined;
  // An invite is checked whenever one comes with a key to check it; without a key it is ignored
  // (a room with invites on then refuses the join as if none came).
  if (invite && bots.invites.configured) {
    const check = bots.invites.verify(invite, eventId);
    if (!check.ok) {
      return refuseBeforeJoin(
        c,
        "invite_invalid",
        new ApiError("invalid_invite", `the invite does not check (${check.reason})`, {
          details: { field: "invite", reason: check.reason },
        }),
      );
    }
    const claimed = await waitingRoom.claimIdentity(eventId, check.claims.identity, fanId);
    if (!claimed.ok) {
      if (claimed.reason === "not_found") throw new ApiError("not_found", `no event ${eventId}`);
      throw new ApiError("unavailable", "the waiting room is unavailable; retry shortly", { retryAfter: 2 });
    }
    // The invite names the person: one who comes back without a fan id gets the place it holds.
    if (claimed.holder !== fanId && issuedNow) fanId = claimed.holder;
    else if (claimed.fresh && !issuedNow) freshClaim = check.claims.identity;
    else if (claimed.holder !== fanId) {
      return refuseBeforeJoin(
        c,
        "identity_taken",
        new ApiError("identity_already_queued", "this invite's identity already holds a place in this line"),
      );
    }
    invited = true;
  }
  const limits = lineLimits(c);
  const result = await waitingRoom.join(eventId, fanId, { limits, credentials: { proofBits, invite: invited } });
  if (!result.ok) {
    enforceLineLimits(c, eventId, "join", limits, result);
    const { error, refused } = joinRefusal(result, eventId, pow !== undefined);
    // A fan id the gateway chose here (issued, or the one an invite's person is held under) is
    // named in a 428: the proof asked for must be bound to it (GET .../queue/challenge?fanId=).
    const answer =
      issuedNow && error.status === 428
        ? new ApiError(error.code, error.message, { details: { ...error.details, fanId } })
        : error;
    if (refused) refuse(c, refused, answer);
    throw answer;
  }
  // An invite claimed just now for a fan id whose place was already there (made by another
  // invite, or before invites): the place is not this invite's to give. The claim is taken back,
  // so a retry meets the same refusal and the identity stays free for its own fan id.
  if (freshClaim !== undefined && !result.created) {
    await waitingRoom.releaseIdentity(eventId, freshClaim, fanId);
    refuse(
      c,
      "identity_taken",
      new ApiError("invalid_invite", "this fan id holds a place this invite did not make", {
        details: { field: "invite", reason: "fan_id_held" },
      }),
    );
  }
  // A place given back in a line for invited fans only goes with the invite: a fan id alone (the
  // site's user id, say) is a name others can say (docs/waiting-room.md "Whose place").
  if (!result.created && !invited && result.invites) {
    refuse(
      c,
      "invite_missing",
      new ApiError("invite_required", "this line admits fans with an invite only: join again with yours"),
    );
  }
  // The event's line gauges on /metrics (src/metrics-reporter.ts) start with its first join here.
  const seen = c.get("reads").seenEvents;
  if (seen.size < 1_000) seen.add(eventId);
  const lottery = await commitmentAtJoin(waitingRoom, eventId);
  return c.json(
    { queueToken: result.queueToken, fanId, ...placeView(result.place), ...(lottery ? { lottery } : {}) },
    result.created ? 201 : 200,
  );
});

/** The event's `waitingRoom.fanIds`; `any` for an unknown event (the room answers its 404). */
async function fanIdModeOf(c: Context<AppEnv>, eventId: string): Promise<FanIdMode> {
  const event = await c.get("reads").event(eventId);
  return event?.waitingRoom.fanIds ?? "any";
}

/** The refusal of a fan id the gateway did not issue, on an event that takes only issued ones. */
export function notIssued(): ApiError {
  return new ApiError(
    "invalid_request",
    "this line takes only fan ids the gateway issued: join without a fanId to be given one",
    { details: { field: "fanId", reason: "not_issued" } },
  );
}

/**
 * The error a join the waiting room did not grant answers (after its limits: enforceLineLimits),
 * and the refusal it counts when the room asked for more than came. The route and the join's fast
 * path (src/http/fast-path.ts) both answer with it.
 */
export function joinRefusal(
  result: Extract<JoinResult, { ok: false }>,
  eventId: string,
  hadProof: boolean,
): { error: ApiError; refused?: RefusalReason } {
  switch (result.reason) {
    case "pow_required":
      return {
        refused: hadProof ? "pow_invalid" : "pow_missing",
        error: new ApiError(
          "proof_of_work_required",
          hadProof
            ? `the room now asks ${result.powBits} bits; solve a new challenge`
            : `a proof of work of ${result.powBits} bits is required; GET .../queue/challenge`,
          { details: { powBits: result.powBits } },
        ),
      };
    case "invite_required":
      return {
        refused: "invite_missing",
        error: new ApiError("invite_required", "this line admits fans with an invite only"),
      };
    case "not_found":
      return { error: new ApiError("not_found", `no event ${eventId}`) };
    case "closed":
      return { error: new ApiError("forbidden", "the line is closed") };
    case "revoked":
      return { error: new ApiError("forbidden", "this fan's session was revoked by the operator") };
    case "invalid_fan":
      return {
        error: new ApiError("invalid_request", "fanId must be 1..128 printable characters", {
          details: { field: "fanId" },
        }),
      };
    default:
      return {
        error: new ApiError("unavailable", "the waiting room is unavailable; retry shortly", { retryAfter: 2 }),
      };
  }
}
