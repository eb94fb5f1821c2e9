/**
 * The HTTP app, composed of small sub-apps, one per endpoint. `buildApp(deps)` takes every
 * client it needs, so a test builds one with its own Redis and DynamoDB and calls
 * `app.request()` in-process.
 */
import { OpenAPIHono } from "@hono/zod-openapi";
import { bodyLimit } from "hono/body-limit";
import { HTTPException } from "hono/http-exception";
import type { MiddlewareHandler } from "hono";
import { InventoryUnavailableError } from "../inventory/index.js";
import type { AppDeps, AppEnv, CachedReads } from "./context.js";
import { requestContext } from "./request-context.js";
import { ApiError, errorBody } from "./errors.js";
import { actionLogRoutes } from "./routes/admin/action-log.js";
import { beaconRoute } from "./routes/admin/beacon.js";
import { closeEventRoute } from "./routes/admin/close-event.js";
import { getEventRoute, listEventsRoute } from "./routes/admin/events.js";
import { settingsHistoryRoute } from "./routes/admin/history.js";
import { revokeRoute } from "./routes/admin/revoke.js";
import { saleRoutes } from "./routes/admin/sale.js";
import { putEventRoute } from "./routes/admin/put-event.js";
import { statsRoute } from "./routes/admin/stats.js";
import { statsHistoryRoute } from "./routes/admin/stats-history.js";
import { patchWaitingRoomRoute } from "./routes/admin/waiting-room.js";
import { healthRoutes } from "./routes/health.js";
import { jwksRoute } from "./routes/jwks.js";
import { createHoldRoute } from "./routes/holds/create.js";
import { purchaseRoute } from "./routes/purchases/create.js";
import { getPurchaseRoute } from "./routes/purchases/get.js";
import { webhookRoute } from "./routes/purchases/webhook.js";
import { releaseHoldRoute } from "./routes/holds/release.js";
import { notifyRoutes } from "./routes/notify/notify.js";
import { challengeRoute } from "./routes/queue/challenge.js";
import { infoRoute } from "./routes/queue/info.js";
import { lotteryRoute } from "./routes/queue/lottery.js";
import { joinRoute } from "./routes/queue/join.js";
import { statusRoute } from "./routes/queue/status.js";
import { sectionSeatsRoute } from "./routes/seatmap/section.js";
import { seatStreamRoute } from "./routes/seatmap/stream.js";
import { seatMapSummaryRoute } from "./routes/seatmap/summary.js";
import { pagesRoutes } from "./routes/pages.js";
import { serviceRoutes } from "./routes/service.js";
import { ttlCache } from "../ttl-cache.js";
import {
  fastPaths,
  holdRefusalFastPath,
  queueJoinFastPath,
  queueStatusFastPath,
  sectionFastPath,
} from "./fast-path.js";

type OpenApiOperation = { parameters?: { name?: string; in?: string }[]; responses?: Record<string, unknown> };

/**
 * The answers every route of a kind gives, which its own declaration leaves out: a malformed or
 * unknown event id in the path (400, the schema's; 404), the operator routes' limits (429,
 * src/http/routes/admin/guard.ts) and their token check (401). Added where a route does not say
 * them itself.
 */
function withSharedAnswers<D extends object>(document: D): D {
  const doc = document as { paths?: Record<string, Record<string, OpenApiOperation>> };
  const error = (description: string) => ({
    description,
    content: { "application/json": { schema: { $ref: "#/components/schemas/Error" } } },
  });
  for (const [path, operations] of Object.entries(doc.paths ?? {})) {
    for (const operation of Object.values(operations)) {
      operation.responses ??= {};
      const responses = operation.responses;
      const byEventId = operation.parameters?.some((p) => p.in === "path" && p.name === "eventId");
      if (byEventId) {
        responses["400"] ??= error("`invalid_request`: a malformed event id (or body)");
        responses["404"] ??= error("`not_found`: no such event");
      }
      if (path.startsWith("/v1/admin/")) {
        responses["401"] ??= error("`unauthenticated`: no operator token, or a wrong one");
        responses["429"] ??= error(
          "`rate_limited`: operator requests are limited per IP and over all IPs (`Retry-After`)",
        );
      }
    }
  }
  return document;
}

interface SchemaIssue {
  code: string;
  path: PropertyKey[];
  message: string;
  errors?: SchemaIssue[][];
}

/**
 * A schema issue as `{path, message}`, naming the field. A union's own issue says only "Invalid
 * input" at the union's path: its alternatives' issues say what is wrong. The alternative the body
 * meant is the one with fewest keys it does not know (`{"seats": "A-1-1"}` meant the seats form);
 * its issues are given. When no alternative stands out (`{}`), the issue names every form's key.
 */
function namedIssues(issue: SchemaIssue, prefix: PropertyKey[]): { path: string; message: string }[] {
  const path = [...prefix, ...issue.path];
  if (issue.code === "invalid_union" && issue.errors && issue.errors.length > 0) {
    const strangers = issue.errors.map((branch) => branch.filter((i) => i.code === "unrecognized_keys").length);
    const fewest = Math.min(...strangers);
    const meant = issue.errors.filter((_, b) => strangers[b] === fewest);
    if (meant.length === 1) return meant[0]!.flatMap((i) => namedIssues(i, path));
    const keys = [...new Set(issue.errors.map((branch) => branch[0]?.path[0]).filter((k) => k !== undefined))];
    if (keys.length > 0) {
      return [{ path: path.join("."), message: `expected one of: ${keys.map(String).join(", ")}` }];
    }
  }
  return [{ path: path.join("."), message: issue.message }];
}

export function buildApp(deps: AppDeps) {
  const app = new OpenAPIHono<AppEnv>({
    // A schema violation is a 400 with the fields named, in the one error model.
    defaultHook: (result) => {
      if (!result.success) {
        throw new ApiError("invalid_request", "the request does not match the schema", {
          details: { issues: result.error.issues.flatMap((i) => namedIssues(i, [])).slice(0, 20) },
        });
      }
    },
  });

  const reads: CachedReads = {
    // The process's one event cache (src/inventory/events.ts): the claim path reads it too.
    event: async (eventId) => {
      const event = await deps.events.cached(eventId);
      if (event && reads.seenEvents.size < 1_000) reads.seenEvents.add(eventId);
      return event;
    },
    generalAdmission: ttlCache(1_000, (key) => {
      const [eventId = "", areaId = ""] = key.split("/");
      return deps.events.generalAdmission(eventId, areaId);
    }),
    // The stats sampler's (src/stats/sampler.ts): the events served lately are the ones it samples.
    seenEvents: deps.stats.served,
    // Every poll of a waiting fan carries the odds: two Redis reads per event per 2 s per process.
    oddsFigures: ttlCache(2_000, async (eventId) => {
      const event = await reads.event(eventId);
      if (!event) return null;
      const [firstRead, areas, room] = await Promise.all([
        deps.seatMap.availability(eventId),
        Promise.all(event.generalAdmission.map((g) => reads.generalAdmission(`${eventId}/${g.id}`))),
        deps.waitingRoom.stats(eventId),
      ]);
      if (!room.ok) return null;
      let available = firstRead;
      // Sections nobody has read yet are loaded into the cache, as the seat map's summary does.
      const missing = event.sections.filter((s) => available[s.id] === undefined);
      if (missing.length > 0) {
        await Promise.all(missing.map((s) => deps.seatMap.getSection(eventId, s.id)));
        available = await deps.seatMap.availability(eventId);
      }
      return {
        left:
          event.sections.reduce((n, s) => n + (available[s.id] ?? 0), 0) +
          areas.reduce((n, a) => n + (a?.available ?? 0), 0),
        capacity:
          event.sections.reduce((n, s) => n + s.rows * s.seatsPerRow, 0) +
          event.generalAdmission.reduce((n, g) => n + g.capacity, 0),
        admitted: room.stats.admitted,
        maxSeatsPerFan: event.maxSeatsPerFan,
      };
    }),
  };

  // The request's id, context and duration (src/http/request-context.ts), then the body limit.
  app.use(requestContext(deps, reads));
  app.use(requestBodyLimit(deps.limits.maxBodyBytes));

  // Plain Hono routes (not zod-openapi ones) are described here so the document lists them too.
  app.openAPIRegistry.registerPath({
    method: "get",
    path: "/metrics",
    tags: ["service"],
    summary: "Prometheus metrics (text exposition format)",
    responses: { 200: { description: "metrics", content: { "text/plain": { schema: { type: "string" } } } } },
  });
  app.openAPIRegistry.registerPath({
    method: "get",
    path: "/openapi.json",
    tags: ["service"],
    summary: "This document",
    responses: { 200: { description: "OpenAPI 3.1", content: { "application/json": { schema: { type: "object" } } } } },
  });

  app.openAPIRegistry.registerComponent("securitySchemes", "bearer", {
    type: "http",
    scheme: "bearer",
    description:
      "A queue token, an access token or an operator token (ADMIN_TOKEN, ADMIN_TOKENS), as each endpoint says",
  });

  for (const routes of [
    healthRoutes,
    serviceRoutes,
    jwksRoute,
    listEventsRoute,
    getEventRoute,
    putEventRoute,
    closeEventRoute,
    saleRoutes,
    patchWaitingRoomRoute,
    beaconRoute,
    settingsHistoryRoute,
    revokeRoute,
    statsRoute,
    statsHistoryRoute,
    actionLogRoutes,
    challengeRoute,
    joinRoute,
    statusRoute,
    infoRoute,
    lotteryRoute,
    notifyRoutes,
    seatMapSummaryRoute,
    sectionSeatsRoute,
    seatStreamRoute,
    createHoldRoute,
    releaseHoldRoute,
    purchaseRoute,
    getPurchaseRoute,
    webhookRoute,
    pagesRoutes,
  ]) {
    app.route("/", routes);
  }

  const openApiConfig = {
    openapi: "3.1.0",
    info: {
      title: "On-sale gateway",
      version: "1",
      description:
        "Waiting room, seat map and claims for ticket on-sales. Errors: {error: {code, message, requestId}}.",
    },
  };
  // Built once, on first ask (the routes do not change once the app is built).
  let openApiDocument: unknown;
  app.get("/openapi.json", (c) => {
    openApiDocument ??= withSharedAnswers(app.getOpenAPI31Document(openApiConfig));
    return c.json(openApiDocument as Record<string, unknown>);
  });

  const allowedMethods = methodsByPath(app.routes);
  app.notFound((c) => {
    const path = new URL(c.req.url).pathname;
    const allowed = allowedMethods(path);
    const method = c.req.method === "HEAD" ? "GET" : c.req.method;
    if (allowed.length > 0 && !allowed.includes(method)) {
      // A known path asked with the wrong method: say which ones it takes (RFC 9110, 405 + Allow).
      const err = new ApiError(
        "method_not_allowed",
        `${path} does not take ${c.req.method}; it takes ${allowed.join(", ")}`,
        {
          details: { allow: allowed },
        },
      );
      c.header("Allow", allowed.join(", "));
      return c.json(errorBody(err, c.get("requestId")), err.status);
    }
    const err = new ApiError("not_found", `no route for ${c.req.method} ${path}`);
    return c.json(errorBody(err, c.get("requestId")), err.status);
  });

  app.onError((thrown, c) => {
    const id = c.get("requestId") ?? crypto.randomUUID();
    let err: ApiError;
    if (thrown instanceof ApiError) err = thrown;
    else if (clientWentAway(thrown, c.req.raw)) {
      // The client closed the connection while its body was being read: nobody reads this answer,
      // and it is no server error.
      c.get("log")?.debug({ err: (thrown as Error).message }, "client closed the connection mid-request");
      err = new ApiError("invalid_request", "the connection closed before the request body arrived");
    } else if (thrown instanceof InventoryUnavailableError) {
      err = new ApiError("unavailable", "seat inventory unavailable; retry", { retryAfter: 1 });
    } else if (thrown instanceof HTTPException && thrown.status < 500) {
      // Hono's own 4xx (malformed JSON, a missing body, a bad content type).
      err = new ApiError(
        thrown.status === 413 ? "payload_too_large" : "invalid_request",
        thrown.message || "bad request",
      );
    } else {
      // Never a stack trace to the client; the log keeps it.
      (c.get("log") ?? deps.logger).error({ err: thrown }, "unhandled error");
      err = new ApiError("internal_error", "internal error");
    }
    if (err.retryAfter !== undefined) c.header("Retry-After", String(err.retryAfter));
    if (err.status >= 500) c.get("log")?.warn({ code: err.code, details: err.details }, err.message);
    return c.json(errorBody(err, id), err.status);
  });

  // The section seat map, a waiting fan's poll, a plain join and a hold that cannot win answered
  // before Hono when they can be
  // (src/http/fast-path.ts).
  const fastPath = fastPaths(
    sectionFastPath({
      deps,
      knownSection: (eventId, sectionId) => deps.events.hasSection(eventId, sectionId),
    }),
    queueStatusFastPath({ deps, oddsFigures: (eventId) => reads.oddsFigures.peek(eventId) }),
    queueJoinFastPath({ deps, seenEvents: reads.seenEvents }),
    holdRefusalFastPath({ deps }),
  );

  return Object.assign(app, { fastPath });
}

/**
 * hono's bodyLimit, without its cost on the requests that need none of it. It begins with
 * `c.req.raw.body`, and on @hono/node-server that builds the full fetch Request (AbortController,
 * Headers, a body stream) for every request, GETs included: ~10% of a status poll's CPU in a
 * profile. A GET or HEAD has no body (the fetch Request never carries one), and a declared
 * Content-Length without Transfer-Encoding is checked as hono checks it, from the header; only a
 * body of unknown length goes through hono's, which counts it as it streams.
 */
export function requestBodyLimit(maxSize: number): MiddlewareHandler<AppEnv> {
  const tooLarge = () => {
    throw new ApiError("payload_too_large", `request bodies are limited to ${maxSize} bytes`);
  };
  const streamed = bodyLimit({ maxSize, onError: tooLarge });
  return (c, next) => {
    const method = c.req.method;
    if (method === "GET" || method === "HEAD") return next();
    const length = c.req.header("content-length");
    if (length !== undefined && c.req.header("transfer-encoding") === undefined) {
      return Number.parseInt(length, 10) > maxSize ? tooLarge() : next();
    }
    return streamed(c, next);
  };
}

/** A body read that failed because the client went away (Node's `aborted`, a premature close). */
function clientWentAway(thrown: unknown, request: Request): boolean {
  if (request.signal?.aborted) return true;
  if (!(thrown instanceof Error)) return false;
  const code = (thrown as NodeJS.ErrnoException).code;
  return (code === "ECONNRESET" && thrown.message === "aborted") || code === "ERR_STREAM_PREMATURE_CLOSE";
}

/**
 * The methods each path of the app takes, from its route table (Hono paths: `:param` is one
 * segment). HEAD is served wherever GET is.
 */
function methodsByPath(routes: readonly { method: string; path: string }[]): (path: string) => string[] {
  const table = new Map<string, { pattern: RegExp; methods: Set<string> }>();
  for (const route of routes) {
    if (route.method === "ALL" || route.path.includes("*")) continue;
    const source = route.path
      .split("/")
      .map((segment) => (segment.startsWith(":") ? "[^/]+" : segment.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")))
      .join("/");
    const entry = table.get(route.path) ?? { pattern: new RegExp(`^${source}$`), methods: new Set<string>() };
    entry.methods.add(route.method.toUpperCase());
    table.set(route.path, entry);
  }
  const entries = [...table.values()];
  return (path) => {
    const methods = new Set<string>();
    for (const entry of entries) if (entry.pattern.test(path)) for (const m of entry.methods) methods.add(m);
    if (methods.has("GET")) methods.add("HEAD");
    return [...methods].sort();
  };
}
