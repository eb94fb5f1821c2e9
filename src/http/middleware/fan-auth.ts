/**
 * Fan tokens. Access tokens verify without Redis (signature, kind, event, expiry); on claim paths
 * the session is also checked in Redis (revoked, completed, expired), and when Redis cannot answer
 * the claim goes ahead: DynamoDB decides, and a revoked session can do no more than hold a seat it
 * could have held a moment earlier.
 *
 * The same holds after Redis came back empty: the room is created again with a new epoch, and a
 * token from the old epoch is unknown to it, not ended. Only a room of the token's own epoch may
 * refuse it (so a replay after the session ended in this epoch is still refused).
 */
import type { Context } from "hono";
import { createMiddleware } from "hono/factory";
import type { AccessTokenClaims, QueueTokenClaims, TokenFailure } from "../../waiting-room/index.js";
import type { AppEnv } from "../context.js";
import { ApiError } from "../errors.js";
import { onceEvery } from "../../throttle.js";
import { bearerToken } from "./admin-auth.js";

function refuse(reason: TokenFailure, kind: string): ApiError {
  switch (reason) {
    case "wrong_kind":
      return new ApiError("forbidden", `this endpoint needs ${kind === "access" ? "an" : "a"} ${kind} token`);
    case "wrong_event":
      return new ApiError("forbidden", "the token belongs to another event");
    case "expired":
      return new ApiError("unauthenticated", `the ${kind} token has expired`);
    default:
      return new ApiError("unauthenticated", `the ${kind} token is not valid`);
  }
}

/** Synchronous (the check is one HMAC, no I/O): a caller need not await it. */
export function requireQueueToken(c: Context<AppEnv>, eventId: string): QueueTokenClaims {
  const token = bearerToken(c.req.header("authorization"));
  if (!token) throw new ApiError("unauthenticated", "a queue token is required (Authorization: Bearer <token>)");
  const check = c.get("deps").waitingRoom.verifyQueueToken(token, eventId);
  if (!check.ok) throw refuse(check.reason, "queue");
  return check.claims;
}

export async function requireAccessToken(
  c: Context<AppEnv>,
  eventId: string,
  options: { checkRevocation: boolean },
): Promise<AccessTokenClaims> {
  const claims = verifiedAccessToken(c, eventId);
  if (options.checkRevocation) await sessionCheck(c, eventId, claims);
  return claims;
}

/**
 * How long after its session's expiry an access token still reads what the session bought: the
 * purchase (GET /v1/purchases/{id}) and the stored answer of a purchase it made (the same
 * Idempotency-Key again). A fan whose payment was still pending as the session ran out learns the
 * outcome; nothing new can be started with it.
 */
export const ENDED_SESSION_READ_SECONDS = 24 * 3600;

/**
 * The access token's claims, checked without I/O (signature, kind, event, expiry); throws the
 * 401/403. With `endedSessionReads`, a token expired less than ENDED_SESSION_READ_SECONDS ago
 * verifies too, its claims marked `expired`: the caller allows it only what an ended session may
 * still do.
 */
export function verifiedAccessToken(
  c: Context<AppEnv>,
  eventId: string,
  options: { endedSessionReads?: boolean } = {},
): AccessTokenClaims {
  const endedSessionReads = options.endedSessionReads ?? false;
  // Checked already by accessTokenFirst, for the same event and the same reads.
  const verified = c.get("accessToken");
  if (verified && verified.eventId === eventId && verified.endedSessionReads === endedSessionReads) {
    return verified.claims;
  }
  const token = bearerToken(c.req.header("authorization"));
  if (!token) throw new ApiError("unauthenticated", "an access token is required (Authorization: Bearer <token>)");
  const grace = options.endedSessionReads ? { expiredGraceSeconds: ENDED_SESSION_READ_SECONDS } : undefined;
  const check = c.get("deps").waitingRoom.verifyAccessToken(token, eventId, grace);
  if (!check.ok) throw refuse(check.reason, "access");
  return check.claims;
}

/** An access token accessTokenFirst verified: for which event, with which reads, and its claims. */
export interface VerifiedAccess {
  eventId: string;
  endedSessionReads: boolean;
  claims: AccessTokenClaims;
}

/**
 * The access token checked as route middleware (`createRoute({ middleware: [accessTokenFirst()] })`),
 * before the request's parameters, headers and body are parsed and validated, as operatorOnly does
 * for the operator's routes: a caller without a valid token gets the 401 (or the 403 of a token of
 * another kind or event), never a 400 naming the schema's fields, and a flood without tokens costs
 * no JSON parsing. The event is the path's `eventId` as sent (a malformed one matches no token's
 * event: 403). The handler's verifiedAccessToken then returns these claims without a second check.
 */
export function accessTokenFirst(options: { endedSessionReads?: boolean } = {}) {
  const endedSessionReads = options.endedSessionReads ?? false;
  return createMiddleware<AppEnv>(async (c, next) => {
    const eventId = c.req.param("eventId") ?? "";
    const claims = verifiedAccessToken(c, eventId, { endedSessionReads });
    c.set("accessToken", { eventId, endedSessionReads, claims });
    await next();
  });
}

/**
 * For a path whose event cannot be known (a purchase id the gateway never gave): throws what
 * verifiedAccessToken would (401 without a token or with a bad one, 403 for a queue token) unless
 * the token is a genuine access token, of whichever event (checked against no event, it fails only
 * on its event), so the caller answers it as it answers any buyer.
 */
export function checkAccessTokenOfAnyEvent(c: Context<AppEnv>, options: { endedSessionReads?: boolean } = {}): void {
  const token = bearerToken(c.req.header("authorization"));
  if (!token) throw new ApiError("unauthenticated", "an access token is required (Authorization: Bearer <token>)");
  const grace = options.endedSessionReads ? { expiredGraceSeconds: ENDED_SESSION_READ_SECONDS } : undefined;
  const check = c.get("deps").waitingRoom.verifyAccessToken(token, "", grace);
  if (!check.ok && check.reason !== "wrong_event") throw refuse(check.reason, "access");
}

/** The 401 for an expired token used for anything but an ended session's reads. */
export const expiredToken = () => refuse("expired", "access");

/**
 * The claim path's check that the session is still active (one Redis call): rejects with the 401
 * when it has ended; resolves when it is active, or when Redis cannot say (DynamoDB decides). A
 * caller may start it and await it later, beside another Redis call (the hold's shield).
 */
export async function sessionCheck(c: Context<AppEnv>, eventId: string, claims: AccessTokenClaims): Promise<void> {
  const { waitingRoom, logger } = c.get("deps");
  const { sessionId, epoch, fanId } = claims;
  // With the fan id: a fan revoked before Redis lost the room is refused in the new one too.
  const active = await waitingRoom.isSessionActive(eventId, sessionId, epoch ?? "", fanId);
  if (active.ok && active.decided && !active.active) throw new ApiError("unauthenticated", "this session has ended");
  if (!active.ok) warnOnce(logger, eventId, "session check unavailable (redis); DynamoDB decides the claim");
  else if (!active.decided) warnOnce(logger, eventId, "session from another room epoch; trusted on its signature");
}

// One line per event and message every few seconds: while Redis is down every claim would log.
const warnDue = onceEvery(10_000, 1_000);
function warnOnce(logger: AppEnv["Variables"]["deps"]["logger"], eventId: string, message: string) {
  if (warnDue(`${eventId}\n${message}`)) logger.warn({ eventId }, message);
}
