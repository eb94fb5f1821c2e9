import { getConnInfo } from "@hono/node-server/conninfo";
import type { Context } from "hono";
import type { AppEnv } from "./context.js";

/** The client's IP: the socket's, or the first X-Forwarded-For hop when TRUST_PROXY is on. */
export function clientIp(c: Context<AppEnv>): string {
  if (c.var.deps.limits.trustProxy) {
    const forwarded = c.req.header("x-forwarded-for")?.split(",")[0]?.trim();
    if (forwarded) return forwarded.slice(0, 64);
  }
  try {
    return getConnInfo(c).remote.address ?? "unknown";
  } catch {
    // app.request() in tests has no socket.
    return "local";
  }
}

/** Enforces the per-IP limit and, when a fan is known, the per-fan limit of one route. */
export async function limitRequest(c: Context<AppEnv>, route: string, fan?: { eventId: string; fanId: string }) {
  const { rateLimiter, limits } = c.var.deps;
  await rateLimiter.enforce(`ip:${route}`, clientIp(c), { perSecond: limits.ratePerIp });
  if (fan) {
    await rateLimiter.enforce(`fan:${route}`, `${fan.eventId}:${fan.fanId}`, { perSecond: limits.ratePerFan });
  }
}
