/**
 * The one middleware every request passes: its id, what handlers reach through the context
 * (deps, cached reads, the lazy logger), and its duration in the request histogram.
 *
 * One middleware, not three (hono's requestId, a context setter and a timer): each is an async
 * frame and a `next()` per request. And the X-Request-Id response header is set on Node's
 * ServerResponse when the app runs on @hono/node-server, not with `c.header()`: that call makes
 * hono build web Headers for the response, which @hono/node-server then converts back header by
 * header through undici's validation, where a response with plain header objects is written as
 * it is (a profile of the status poll had that conversion among its largest costs). Node merges a
 * header set with `setHeader` into the `writeHead` that follows, so every answer carries it,
 * errors and streams included. Elsewhere (`app.request()` in tests, another runtime) it falls back
 * to `c.header()`.
 */
import { randomUUID } from "node:crypto";
import type { ServerResponse } from "node:http";
import type { MiddlewareHandler } from "hono";
import type { AppDeps, AppEnv, CachedReads } from "./context.js";
import { lazyRequestLog, type RequestLog } from "./request-log.js";

/** A client's X-Request-Id is echoed when it is sane: word characters, `-` and `=`, at most 128. */
const SANE_REQUEST_ID = /^[\w\-=]{1,128}$/;

/** The request's id: the client's X-Request-Id when sane, else a new one (the app and the fast path). */
export function requestIdFrom(given: string | string[] | undefined): string {
  return typeof given === "string" && SANE_REQUEST_ID.test(given) ? given : randomUUID();
}

/** Counts an answered request in the histogram, and one line at debug level (the app and the fast path). */
export function recordRequest(
  deps: Pick<AppDeps, "metrics" | "logger">,
  log: RequestLog | undefined,
  requestId: string,
  answer: { method: string; route: string; status: number; seconds: number },
): void {
  const { method, route, status, seconds } = answer;
  deps.metrics.httpDuration.observe({ method, route, status: String(status) }, seconds);
  // One line per request at debug level (LOG_LEVEL=debug): at on-sale rates info would drown the log.
  if (deps.logger.isLevelEnabled("debug")) {
    (log ?? lazyRequestLog(deps.logger, requestId)).debug(
      { method, route, status, ms: Math.round(seconds * 1000) },
      "request",
    );
  }
}

export function requestContext(deps: AppDeps, reads: CachedReads): MiddlewareHandler<AppEnv> {
  const { logger } = deps;
  return async (c, next) => {
    const requestId = requestIdFrom(c.req.header("x-request-id"));
    c.set("requestId", requestId);
    c.set("deps", deps);
    c.set("reads", reads);
    const log = lazyRequestLog(logger, requestId);
    c.set("log", log);
    const outgoing = (c.env as { outgoing?: ServerResponse } | undefined)?.outgoing;
    if (outgoing && typeof outgoing.setHeader === "function" && !outgoing.headersSent) {
      outgoing.setHeader("X-Request-Id", requestId);
    } else {
      c.header("X-Request-Id", requestId);
    }
    const started = performance.now();
    await next();
    const seconds = (performance.now() - started) / 1000;
    recordRequest(deps, log, requestId, {
      method: c.req.method,
      route: c.req.routePath,
      status: c.res.status,
      seconds,
    });
  };
}
