import type { Context } from "hono";
import { clientIp } from "../../client-ip.js";
import type { AppEnv } from "../../context.js";
import { createAdminCheck } from "../../middleware/admin-auth.js";

const checks = new WeakMap<object, ReturnType<typeof createAdminCheck>>();

/**
 * Operator endpoints: rate-limited per IP before the token is even looked at (so guessing is
 * slow), then the token compared in constant time.
 */
export async function requireOperator(c: Context<AppEnv>): Promise<void> {
  const { deps } = c.var;
  await deps.rateLimiter.enforce("ip:admin", clientIp(c), { perSecond: deps.limits.ratePerOperatorIp });
  let check = checks.get(deps);
  if (!check) {
    check = createAdminCheck(deps.adminToken);
    checks.set(deps, check);
  }
  check(c.req.header("authorization"));
}
