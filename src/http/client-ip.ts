import { getConnInfo } from "@hono/node-server/conninfo";
import type { Context } from "hono";
import type { AppEnv } from "./context.js";
import { exemptFromIpLimit } from "./load-test-token.js";

/**
 * The client's IP: the socket's, or, when TRUST_PROXY is on, the last X-Forwarded-For hop. The
 * last hop is the one the trusted proxy in front of the gateway appended (the address it saw);
 * every earlier one is whatever the client chose to write, so taking the first would let anyone
 * rotate a fake address per request past the per-IP limits and the operator guess limit.
 */
export function clientIp(c: Context<AppEnv>): string {
  if (c.var.deps.limits.trustProxy) {
    const forwarded = c.req.header("x-forwarded-for")?.split(",").at(-1)?.trim();
    if (forwarded) return forwarded.slice(0, 64);
  }
  try {
    return getConnInfo(c).remote.address ?? "unknown";
  } catch {
    // app.request() in tests has no socket.
    return "local";
  }
}

/**
 * Enforces the per-IP limit (skipped for the operator's load generators, see load-test-token.ts)
 * and, when a fan is known, the per-fan limit of one route.
 */
export async function limitRequest(c: Context<AppEnv>, route: string, fan?: { eventId: string; fanId: string }) {
  const { rateLimiter, limits } = c.var.deps;
  if (!exemptFromIpLimit(c)) await rateLimiter.enforce(`ip:${route}`, clientIp(c), { perSecond: limits.ratePerIp });
  if (fan) {
    await rateLimiter.enforce(`fan:${route}`, `${fan.eventId}:${fan.fanId}`, { perSecond: limits.ratePerFan });
  }
}
