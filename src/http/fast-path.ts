/**
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
import type { AppDeps } from "./context.js";
import { recordRequest, requestIdFrom } from "./request-context.js";
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
