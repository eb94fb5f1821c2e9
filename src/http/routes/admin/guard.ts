import type { Context } from "hono";
import { createMiddleware } from "hono/factory";
import { clientIp } from "../../client-ip.js";
import type { AppEnv } from "../../context.js";
import { createAdminCheck } from "../../middleware/admin-auth.js";

const checks = new WeakMap<object, ReturnType<typeof createAdminCheck>>();

/** The operator limit of all addresses together, as a multiple of the per-IP one. */
export const OPERATOR_ALL_IPS_FACTOR = 5;

/**
 * Operator endpoints: rate-limited before the token is even looked at, so every guess, right or
 * wrong, costs a request from the bucket and a wrong one learns nothing from a different answer;
 * then the token compared in constant time. Two buckets: one per IP, and one for every IP and
 * every gateway instance together (Redis), so a guesser spread over many addresses (or spoofing
 * X-Forwarded-For where TRUST_PROXY is on) is still held to OPERATOR_ALL_IPS_FACTOR x the per-IP
 * rate: at the default 20/s, at most 100 guesses a second (plus a burst of 200) cluster-wide. The
 * price: while such an attack runs, the real operator is refused (429) too.
 */
export async function requireOperator(c: Context<AppEnv>): Promise<void> {
  const { deps } = c.var;
  const perSecond = deps.limits.ratePerOperatorIp;
  await deps.rateLimiter.enforce("ip:admin", clientIp(c), { perSecond });
  await deps.rateLimiter.enforce("admin", "all", { perSecond: perSecond * OPERATOR_ALL_IPS_FACTOR });
  let check = checks.get(deps);
  if (!check) {
    check = createAdminCheck(deps.adminToken);
    checks.set(deps, check);
  }
  check(c.req.header("authorization"));
}

/**
 * requireOperator as route middleware (`createRoute({ middleware: [operatorOnly] })`): it runs
 * before the request is parsed and validated, so a caller without the token learns nothing of the
 * schema (a 401, never a 400 naming fields) and a flood costs no JSON parsing.
 */
export const operatorOnly = createMiddleware<AppEnv>(async (c, next) => {
  await requireOperator(c);
  await next();
});
