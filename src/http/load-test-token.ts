/**
 * The operator's load-test token (LOAD_TEST_TOKEN, sent as `X-Load-Test-Token`): a load test
 * comes from a handful of hosts, so the per-IP limit would refuse it long before the gateway is
 * loaded. Like a CDN's bypass rule, the token lifts that one limit for the load generators and
 * nothing else: the per-fan limits, the operator limit and every token claim still apply, so a
 * spike measures the gateway with its limits on.
 */
import { createHash, timingSafeEqual } from "node:crypto";
import type { Context } from "hono";
import type { AppEnv } from "./context.js";

export const LOAD_TEST_TOKEN_HEADER = "x-load-test-token";

// Both sides are hashed so the comparison is over equal lengths and takes the same time whatever
// the presented value; the configured token's digest is computed once, not per request.
const digest = (value: string) => createHash("sha256").update(value).digest();
const expectedDigests = new Map<string, Buffer>();

/** True when `presented` is the configured token; false when none is configured or it differs. */
export function isLoadTestToken(configured: string | undefined, presented: string | undefined): boolean {
  if (!configured || presented === undefined) return false;
  let expected = expectedDigests.get(configured);
  if (!expected) {
    expected = digest(configured);
    expectedDigests.set(configured, expected);
  }
  return timingSafeEqual(digest(presented), expected);
}

/** Whether this request skips the per-IP bucket (never the per-fan one). */
export function exemptFromIpLimit(c: Context<AppEnv>): boolean {
  const configured = c.get("deps").limits.loadTestToken;
  // No header lookup on the hot path when the gateway has no load-test token.
  return configured !== undefined && isLoadTestToken(configured, c.req.header(LOAD_TEST_TOKEN_HEADER));
}
