import type { Context } from "hono";
import { createMiddleware } from "hono/factory";
import type { OperatorAction } from "../../../operators/action-log.js";
import { clientIp } from "../../client-ip.js";
import type { AppEnv } from "../../context.js";
import { ApiError } from "../../errors.js";
import { createOperatorCheck, type Operator, operatorTokens } from "../../middleware/admin-auth.js";

const checks = new WeakMap<object, ReturnType<typeof createOperatorCheck>>();

/** The operator limit of all addresses together, as a multiple of the per-IP one. */
export const OPERATOR_ALL_IPS_FACTOR = 5;

/**
 * Operator endpoints: rate-limited before the token is even looked at, so every guess, right or
 * wrong, costs a request from the bucket and a wrong one learns nothing from a different answer;
 * then the token compared in constant time with every operator token (ADMIN_TOKEN, named
 * "default", and ADMIN_TOKENS). Two buckets: one per IP, and one for every IP and every gateway
 * instance together (Redis), so a guesser spread over many addresses (or spoofing
 * X-Forwarded-For where TRUST_PROXY is on) is still held to OPERATOR_ALL_IPS_FACTOR x the per-IP
 * rate: at the default 20/s, at most 100 guesses a second (plus a burst of 200) cluster-wide. The
 * price: while such an attack runs, the real operator is refused (429) too.
 */
export async function requireOperator(c: Context<AppEnv>): Promise<Operator> {
  const { deps } = c.var;
  const perSecond = deps.limits.ratePerOperatorIp;
  await deps.rateLimiter.enforce("ip:admin", clientIp(c), { perSecond });
  await deps.rateLimiter.enforce("admin", "all", { perSecond: perSecond * OPERATOR_ALL_IPS_FACTOR });
  let check = checks.get(deps);
  if (!check) {
    check = createOperatorCheck(operatorTokens(deps.adminToken, deps.operatorTokens));
    checks.set(deps, check);
  }
  return check(c.req.header("authorization"));
}

const reads = (method: string) => method === "GET" || method === "HEAD";

/**
 * requireOperator as route middleware (`createRoute({ middleware: [operatorOnly] })`): it runs
 * before the request is parsed and validated, so a caller without the token learns nothing of the
 * schema (a 401, never a 400 naming fields) and a flood costs no JSON parsing. A `read` token may
 * only GET (403 `forbidden` otherwise). Every request that is not a read is an action: logged
 * (which token, what, when, the answer's status) in the process log and in DynamoDB once it has
 * answered (src/operators/action-log.ts), refusals of a known token included. Reads are not
 * logged there: a dashboard polls every second.
 */
export const operatorOnly = createMiddleware<AppEnv>(async (c, next) => {
  const operator = await requireOperator(c);
  c.set("operator", operator);
  if (reads(c.req.method)) return next();
  if (operator.role !== "admin") {
    await recordAction(c, operator, 403, "forbidden");
    throw new ApiError("forbidden", `the operator token ${operator.name} may only read (role ${operator.role})`);
  }
  await next();
  const code = c.error instanceof ApiError ? c.error.code : c.res.status >= 500 ? "internal_error" : undefined;
  await recordAction(c, operator, c.res.status, code);
});

async function recordAction(c: Context<AppEnv>, operator: Operator, status: number, code: string | undefined) {
  const eventId = c.req.param("eventId");
  const action: OperatorAction = {
    at: new Date().toISOString(),
    operator: operator.name,
    role: operator.role,
    method: c.req.method,
    route: c.req.routePath.replace(/:([A-Za-z0-9_]+)/g, "{$1}"),
    path: new URL(c.req.url).pathname,
    ...(eventId ? { eventId } : {}),
    status,
    ...(code ? { code } : {}),
    requestId: c.get("requestId"),
  };
  const summary = await bodySummary(c);
  if (summary) action.summary = summary;
  c.get("log").info({ operatorAction: action }, "operator action");
  // The action has answered already: a log DynamoDB cannot take now is in the process log only.
  await c
    .get("deps")
    .actionLog.record(action)
    .catch((err: unknown) =>
      c.get("log").warn({ err: (err as Error).message, requestId: action.requestId }, "operator action not stored"),
    );
}

/** The JSON body in brief: scalars kept (long strings cut), lists counted, objects two levels deep. */
async function bodySummary(c: Context<AppEnv>): Promise<Record<string, unknown> | undefined> {
  if (!c.req.header("content-type")?.includes("json")) return undefined;
  let body: unknown;
  try {
    body = await c.req.json();
  } catch {
    return { unreadable: true };
  }
  const brief = summarize(body, 2);
  return typeof brief === "object" && brief !== null && !Array.isArray(brief)
    ? (brief as Record<string, unknown>)
    : { body: brief };
}

export function summarize(value: unknown, depth: number): unknown {
  if (typeof value === "string") return value.length > 200 ? `${value.slice(0, 200)}...` : value;
  if (typeof value === "number" || typeof value === "boolean" || value === null) return value;
  if (Array.isArray(value)) return `[${value.length} items]`;
  if (typeof value === "object") {
    if (depth <= 0) return "{...}";
    const entries = Object.entries(value as Record<string, unknown>).slice(0, 20);
    return Object.fromEntries(entries.map(([k, v]) => [k.slice(0, 64), summarize(v, depth - 1)]));
  }
  return String(value);
}
