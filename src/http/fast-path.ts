/**
 * Answers from memory before the Hono app sees the request, when running on Node: the section seat
 * map, and (below) the queue status poll of a fan whose turn has not come.
 *
 * The section seat map answered from memory before the Hono app sees the request, when running
 * on Node. Every admitted fan loads a section, and its page is already serialized and compressed
 * in memory (src/seatmap/pages.ts): what is left of such a request is the HTTP stack. Hono's
 * part of it (the adapter's Request, the context, routing, the request middleware, zod's async
 * validation of the path and the query, the conversion of the Response back to Node) cost several
 * times the page lookup itself.
 *
 * It answers only what it can answer exactly as the route would (src/http/routes/seatmap/section.ts,
 * whose `sectionAnswer` builds both answers): a GET of `/v1/events/<id>/sections/<id>/seats`,
 * without a query or with `?format=json|compact` alone, ids matching the route's pattern, the event
 * already in this process's event cache with that section, and the page and its body in memory
 * without waiting. Anything else (a first read, a page being loaded or compressed, Redis down, a
 * HEAD, another query, a bad id) goes to the app, which answers it, errors included. The request
 * id, the request histogram and the debug line are the app's (src/http/request-context.ts).
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import type { SectionFormat } from "../seatmap/formats.js";
import { type OddsFigures, oddsAt } from "../waiting-room/odds.js";
import { clientIpForwarded, lineLimitsOf } from "./client-ip.js";
import type { AppDeps } from "./context.js";
import { errorBody } from "./errors.js";
import { isLoadTestToken, LOAD_TEST_TOKEN_HEADER } from "./load-test-token.js";
import { bearerToken } from "./middleware/admin-auth.js";
import { recordRequest, requestIdFrom } from "./request-context.js";
import { placeView } from "./routes/queue/place-view.js";
import { sectionAnswer } from "./routes/seatmap/section.js";

/** Answers a request and returns true, or returns false and leaves it untouched for the app. */
export type NodeFastPath = (incoming: IncomingMessage, outgoing: ServerResponse) => boolean;

/** The route's label in the request histogram, as Hono's routePath spells it. */
export const SECTION_ROUTE = "/v1/events/:eventId/sections/:sectionId/seats";

// The ids as src/http/schemas.ts's ID; the query exactly one of the formats the route takes.
const SECTION_URL =
  /^\/v1\/events\/([A-Za-z0-9_]{1,32})\/sections\/([A-Za-z0-9_]{1,32})\/seats(?:\?format=(json|compact))?$/;

export interface FastPathDeps {
  deps: Pick<AppDeps, "sectionPages" | "waitingRoom" | "metrics" | "logger">;
  /** Whether the event is known to have the section: undefined when this process cannot say without waiting. */
  knownSection(eventId: string, sectionId: string): boolean | undefined;
}

export function sectionFastPath({ deps, knownSection }: FastPathDeps): NodeFastPath {
  const { sectionPages, waitingRoom } = deps;
  return (incoming, outgoing) => {
    if (incoming.method !== "GET") return false;
    const match = SECTION_URL.exec(incoming.url ?? "");
    if (!match) return false;
    const started = performance.now();
    const eventId = match[1]!;
    const sectionId = match[2]!;
    const format: SectionFormat = match[3] === "compact" ? "compact" : "json";
    if (knownSection(eventId, sectionId) !== true) return false;
    const page = sectionPages.get(eventId, sectionId);
    if (page instanceof Promise) {
      // A page being read: the app answers (its read shares this one). This promise is dropped,
      // so a failure of it must not surface as an unhandled rejection: the app's read reports it.
      page.catch(() => undefined);
      return false;
    }
    if (!page) return false;
    const requestId = requestIdFrom(incoming.headers["x-request-id"]);
    const answer = sectionAnswer(page, format, {
      acceptEncoding: joined(incoming.headers["accept-encoding"]),
      ifNoneMatch: joined(incoming.headers["if-none-match"]),
      requestId,
    });
    if (answer instanceof Promise) {
      // A body being compressed for the first time: the same, the app awaits the same body.
      answer.catch(() => undefined);
      return false;
    }
    // As the route: fans on the seat map may be the only ones asking for a room Redis lost.
    waitingRoom.ensureRoom(eventId);
    outgoing.writeHead(answer.status, answer.headers);
    if (answer.body) outgoing.end(answer.body);
    else outgoing.end();
    const seconds = (performance.now() - started) / 1000;
    recordRequest(deps, undefined, requestId, { method: "GET", route: SECTION_ROUTE, status: answer.status, seconds });
    return true;
  };
}

/** Node joins most repeated request headers with ", " itself; a list is joined the same way. */
function joined(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value.join(", ") : value;
}

/** The route's label in the request histogram, as Hono's routePath spells it. */
export const QUEUE_STATUS_ROUTE = "/v1/events/:eventId/queue/status";

const QUEUE_STATUS_URL = /^\/v1\/events\/([A-Za-z0-9_]{1,32})\/queue\/status$/;

export interface QueueStatusFastPathDeps {
  deps: Pick<AppDeps, "waitingRoom" | "metrics" | "logger" | "limits" | "rateLimiter">;
  /** The odds' figures if this process has them loaded and fresh (src/http/app.ts), else undefined. */
  oddsFigures(eventId: string): { value: OddsFigures | null } | undefined;
}

/**
 * The queue status poll of a fan whose turn has not come, answered before the Hono app sees it:
 * the place comes from this process's view of the line (src/waiting-room/line-view.ts) with no
 * Redis call, so what is left is the token check and the HTTP stack, and Hono's part of the
 * latter cost more than everything else of such a poll. The answer is the route's
 * (src/http/routes/queue/status.ts), odds included, byte for byte in shape.
 *
 * Declines (the app answers) anything it cannot answer exactly so: another method or query, no
 * or a bad token (the app words the 401/403), odds not loaded in this process yet, and every poll
 * the line cache cannot answer (a fan near the front, unknown here, not seen lately...). A poll
 * its limits refuse is answered 429, as the app would, from the same in-process buckets.
 */
export function queueStatusFastPath({ deps, oddsFigures }: QueueStatusFastPathDeps): NodeFastPath {
  const { waitingRoom, limits, rateLimiter } = deps;
  return (incoming, outgoing) => {
    if (incoming.method !== "GET") return false;
    const match = QUEUE_STATUS_URL.exec(incoming.url ?? "");
    if (!match) return false;
    const started = performance.now();
    const eventId = match[1]!;
    const token = bearerToken(joined(incoming.headers.authorization));
    if (!token) return false;
    const check = waitingRoom.verifyQueueToken(token, eventId);
    if (!check.ok) return false;
    // Before the line is asked (which records the poll): without the figures the app answers.
    const figures = oddsFigures(eventId);
    if (!figures) return false;
    const exempt =
      limits.loadTestToken !== undefined &&
      isLoadTestToken(limits.loadTestToken, joined(incoming.headers[LOAD_TEST_TOKEN_HEADER]));
    const ip = exempt
      ? undefined
      : (clientIpForwarded(limits.trustProxy, joined(incoming.headers["x-forwarded-for"])) ??
        incoming.socket.remoteAddress ??
        "unknown");
    const result = waitingRoom.cachedStatus(eventId, check.claims.fanId, lineLimitsOf(limits, ip, check.claims.fanId));
    if (!result) return false;
    const requestId = requestIdFrom(incoming.headers["x-request-id"]);
    let status: number;
    let body: string;
    const headers: Record<string, string> = { "content-type": "application/json", "x-request-id": requestId };
    if (!result.ok) {
      const err = rateLimiter.refusal(`${result.limit}:status`, result.retryAfterMs);
      status = err.status;
      body = JSON.stringify(errorBody(err, requestId));
      if (err.retryAfter !== undefined) headers["retry-after"] = String(err.retryAfter);
    } else {
      deps.metrics.queuePolls.inc({ answered: "cache" });
      const odds = figures.value ? oddsAt(result.place.ahead, figures.value) : null;
      status = 200;
      body = JSON.stringify({ ...placeView(result.place), ...(odds ? { odds } : {}) });
    }
    headers["content-length"] = String(Buffer.byteLength(body));
    outgoing.writeHead(status, headers);
    outgoing.end(Buffer.from(body));
    const seconds = (performance.now() - started) / 1000;
    recordRequest(deps, undefined, requestId, { method: "GET", route: QUEUE_STATUS_ROUTE, status, seconds });
    return true;
  };
}

/** The first fast path that answers, else the app. */
export function fastPaths(...paths: NodeFastPath[]): NodeFastPath {
  return (incoming, outgoing) => paths.some((path) => path(incoming, outgoing));
}
