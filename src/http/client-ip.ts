import { getConnInfo } from "@hono/node-server/conninfo";
import type { Context } from "hono";
import { EVENT_ID_PATTERN, type LineLimit, limitKey, type StatusLimits } from "../waiting-room/index.js";
import type { AppDeps, AppEnv } from "./context.js";
import { exemptFromIpLimit } from "./load-test-token.js";
import { burstOf } from "./middleware/rate-limit.js";

/**
 * The client's IP: the socket's, or, when TRUST_PROXY is on, the last X-Forwarded-For hop. The
 * last hop is the one the trusted proxy in front of the gateway appended (the address it saw);
 * every earlier one is whatever the client chose to write, so taking the first would let anyone
 * rotate a fake address per request past the per-IP limits and the operator guess limit.
 */
export function clientIp(c: Context<AppEnv>): string {
  const forwarded = clientIpForwarded(c.get("deps").limits.trustProxy, c.req.header("x-forwarded-for"));
  if (forwarded) return forwarded;
  try {
    return getConnInfo(c).remote.address ?? "unknown";
  } catch {
    // app.request() in tests has no socket.
    return "local";
  }
}

/** The forwarded address clientIp takes when TRUST_PROXY is on (the fast path reads it from Node's request). */
export function clientIpForwarded(trustProxy: boolean, forwardedFor: string | undefined): string | undefined {
  if (!trustProxy) return undefined;
  const forwarded = forwardedFor?.split(",").at(-1)?.trim();
  return forwarded ? forwarded.slice(0, 64) : undefined;
}

/**
 * Enforces the per-IP limit (skipped for the operator's load generators, see load-test-token.ts)
 * and, when a fan is known, the per-fan limit of one route.
 */
export async function limitRequest(c: Context<AppEnv>, route: string, fan?: { eventId: string; fanId: string }) {
  const { rateLimiter, limits } = c.get("deps");
  if (!exemptFromIpLimit(c)) await rateLimiter.enforce(`ip:${route}`, clientIp(c), { perSecond: limits.ratePerIp });
  if (fan) {
    await rateLimiter.enforce(`fan:${route}`, `${fan.eventId}:${fan.fanId}`, { perSecond: limits.ratePerFan });
  }
}

/** The waiting room's routes, whose limits its scripts take in the same call as the line. */
export type LineRoute = "join" | "status";

const isEventId = (eventId: string) => EVENT_ID_PATTERN.test(eventId);

const lineLimit = (perSecond: number, subject: string): LineLimit | undefined =>
  perSecond > 0 ? { subject, perSecond, burst: burstOf({ perSecond }) } : undefined;

/**
 * The limits of a join or a poll, for the waiting room to take inside its script, so the request
 * is one Redis round trip instead of one per limit. Same rates and bursts as `limitRequest`; the
 * buckets are per event (a script's keys share the event's hash tag, for Redis Cluster), so the
 * per-IP limit of these two routes counts one address's requests to one event's line.
 */
export function lineLimits(c: Context<AppEnv>, fanId?: string): StatusLimits {
  // The operator's load generators skip the per-IP limit, never the per-fan one.
  return lineLimitsOf(c.get("deps").limits, exemptFromIpLimit(c) ? undefined : clientIp(c), fanId);
}

/** The same from the parts: `ip` undefined when the request skips the per-IP limit. */
export function lineLimitsOf(
  limits: { ratePerIp: number; ratePerFan: number },
  ip: string | undefined,
  fanId?: string,
): StatusLimits {
  return {
    ip: ip === undefined ? undefined : lineLimit(limits.ratePerIp, ip),
    fan: fanId === undefined ? undefined : lineLimit(limits.ratePerFan, fanId),
  };
}

/**
 * Throws the 429 when the waiting room's call was refused by a limit it took. When the call could
 * not run (Redis away: `unavailable`), counts the same limits in this process, as every limit is
 * counted while Redis is away, so a flood still meets 429 before the route answers 503.
 */
export function enforceLineLimits(
  c: Context<AppEnv>,
  eventId: string,
  route: LineRoute,
  limits: StatusLimits,
  result: { ok: false; reason: string; limit?: "ip" | "fan"; retryAfterMs?: number },
): void {
  enforceLineLimitsWith(c.get("deps").rateLimiter, eventId, route, limits, result);
}

/** The same, given the rate limiter (the fast paths have no Hono context: src/http/fast-path.ts). */
export function enforceLineLimitsWith(
  rateLimiter: AppDeps["rateLimiter"],
  eventId: string,
  route: LineRoute,
  limits: StatusLimits,
  result: { ok: false; reason: string; limit?: "ip" | "fan"; retryAfterMs?: number },
): void {
  if (result.reason === "rate_limited") {
    throw rateLimiter.refusal(`${result.limit ?? "ip"}:${route}`, result.retryAfterMs ?? 1000);
  }
  if (result.reason !== "unavailable") return;
  for (const [kind, limit] of [
    ["ip", limits.ip],
    ["fan", limits.fan],
  ] as const) {
    if (!limit) continue;
    const name = `${kind}:${route}`;
    rateLimiter.enforceLocally(name, limitKey(eventId, name, limit.subject), limit);
  }
}

/**
 * The per-IP join limit on its own, on the bucket the join script takes: for a join refused before
 * it reaches the script (a malformed body), so a flood of those is 429 before it is 400.
 */
export async function limitJoinAlone(c: Context<AppEnv>, eventId: string): Promise<void> {
  const { rateLimiter, limits } = c.get("deps");
  const ip = exemptFromIpLimit(c) ? undefined : lineLimit(limits.ratePerIp, clientIp(c));
  if (!ip) return;
  // A malformed event id is refused by the route's validation and never reaches a script.
  if (!isEventId(eventId)) return rateLimiter.enforce("ip:join", ip.subject, ip);
  // the bucket the join batch takes (on a fan shard, for a room with fan shards)
  await rateLimiter.enforceKey("ip:join", c.get("deps").waitingRoom.joinBucketKey(eventId, ip.subject), ip);
}
