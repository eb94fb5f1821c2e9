/**
 * Answers from memory before the Hono app sees the request, when running on Node: the section seat
 * map, and (below) the queue status poll of a fan whose turn has not come and the plain join.
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
import { commitmentAtJoin } from "./join-lottery.js";
import type { IncomingMessage, ServerResponse } from "node:http";
import type { MapRefusal } from "../claims/hold-service.js";
import { MAX_SEATS_PER_FAN } from "../inventory/index.js";
import { sectionOf } from "../seatmap/cache.js";
import type { SectionFormat } from "../seatmap/formats.js";
import { type OddsFigures, oddsAt } from "../waiting-room/odds.js";
import { clientIpForwarded, enforceLineLimitsWith, lineLimitsOf } from "./client-ip.js";
import type { AppDeps } from "./context.js";
import { ApiError, errorBody } from "./errors.js";
import { isLoadTestToken, LOAD_TEST_TOKEN_HEADER } from "./load-test-token.js";
import { bearerToken } from "./middleware/admin-auth.js";
import { recordRequest, requestIdFrom } from "./request-context.js";
import { seatUnavailable } from "./routes/holds/create.js";
import { joinRefusal } from "./routes/queue/join.js";
import { placeView } from "./routes/queue/place-view.js";
import { FanId, SeatId } from "./schemas.js";
import { sectionAnswer } from "./routes/seatmap/section.js";

/**
 * Answers a request and returns true, or returns false and leaves it untouched for the app. A path
 * that must read the body before it knows (the join) returns true and, when it then declines,
 * hands the request with its body read (`rawBody`, which @hono/node-server takes as the body) to
 * `app`, the listener the app would have had.
 */
export type NodeFastPath = (
  incoming: IncomingMessage,
  outgoing: ServerResponse,
  app?: (incoming: IncomingMessage, outgoing: ServerResponse) => void,
) => boolean;

/**
 * Answers known while the server is still reading requests are written together once this turn's
 * reads are done (setImmediate runs after the event loop's poll phase), not each inside the read
 * of its own request. A write to a client asleep waiting for it wakes the client, and on one machine
 * that wakeup is paid in the writer's system call: writing each refusal as its request was read cost
 * the gateway 68-74 µs of CPU a refused hold against 32-40 written so (bench:gateway, alternating
 * runs on 2026-12-05), while the answers wait a fraction of a millisecond more. An answer that waited
 * for Redis needs none of this: its batch's answers are already written in one turn.
 */
const answersDue: (() => void)[] = [];

function answerSoon(write: () => void): void {
  answersDue.push(write);
  if (answersDue.length === 1) setImmediate(writeAnswersDue);
}

function writeAnswersDue(): void {
  // Those queued while these are written (none expected: a write reads nothing) go next turn.
  const due = answersDue.splice(0);
  for (const write of due) write();
}

/** A GET's answer, built here, written with this turn's others and then counted as the app counts it. */
function answerGetSoon(
  deps: Pick<AppDeps, "metrics" | "logger">,
  outgoing: ServerResponse,
  request: { requestId: string; route: string; started: number },
  answer: { status: number; headers: Record<string, string>; body?: string | Uint8Array | null },
): void {
  answerSoon(() => {
    try {
      outgoing.writeHead(answer.status, answer.headers);
      // A string body, not a Buffer, goes with the head in one write (a Buffer as a writev of two).
      if (answer.body) outgoing.end(answer.body);
      else outgoing.end();
    } catch {
      outgoing.destroy(); // headers this path built itself: never expected
      return;
    }
    const seconds = (performance.now() - request.started) / 1000;
    recordRequest(deps, undefined, request.requestId, {
      method: "GET",
      route: request.route,
      status: answer.status,
      seconds,
    });
  });
}

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
    answerGetSoon(deps, outgoing, { requestId, route: SECTION_ROUTE, started }, answer);
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
    // The address only matters to a per-IP limit: none set, none read (a header or two less).
    const ip = limits.ratePerIp > 0 ? clientAddress(limits, incoming) : undefined;
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
      // The route's body, keys in its order, without a copy of the place's view to spread it.
      const view: ReturnType<typeof placeView> & { odds?: typeof odds } = placeView(result.place);
      if (odds) view.odds = odds;
      body = JSON.stringify(view);
    }
    headers["content-length"] = String(Buffer.byteLength(body));
    answerGetSoon(deps, outgoing, { requestId, route: QUEUE_STATUS_ROUTE, started }, { status, headers, body });
    return true;
  };
}

/** The route's label in the request histogram, as Hono's routePath spells it. */
export const QUEUE_JOIN_ROUTE = "/v1/events/:eventId/queue";
/** The route's label in the request histogram, as Hono's routePath spells it. */
export const HOLDS_ROUTE = "/v1/events/:eventId/holds";

const QUEUE_JOIN_URL = /^\/v1\/events\/([A-Za-z0-9_]{1,32})\/queue$/;
const HOLDS_URL = /^\/v1\/events\/([A-Za-z0-9_]{1,32})\/holds$/;
/** The content types the fast paths take as JSON; any other goes to the app, which words the 400. */
const PLAIN_JSON = /^application\/json(?:;\s*charset="?utf-8"?)?$/i;
/** A join or hold body the fast paths read: `{"fanId": ...}` or a few seat ids, and some room. */
const SMALL_BODY_MAX_BYTES = 1_024;

/** What a fast path that read the body answers: a status and a JSON body, or an error. */
type BodyAnswer = { status: number; json: unknown } | { error: ApiError };

/**
 * For a POST whose answer depends on its body: when the body is small plain JSON (a length of at
 * most 1 KiB, no chunking), claims the request, reads the body and asks `decide`. Its answer is
 * sent (the request id, the histogram and the debug line as the app's); null hands the request to
 * the app with its body read (`rawBody`, which @hono/node-server takes as the body). Returns
 * whether it claimed the request.
 */
function answerFromBody(
  deps: Pick<AppDeps, "metrics" | "logger">,
  incoming: IncomingMessage,
  outgoing: ServerResponse,
  app: ((incoming: IncomingMessage, outgoing: ServerResponse) => void) | undefined,
  route: string,
  decide: (body: unknown, requestId: string) => BodyAnswer | null | Promise<BodyAnswer | null>,
): boolean {
  if (!app) return false;
  const length = Number(incoming.headers["content-length"]);
  if (!(length > 0 && length <= SMALL_BODY_MAX_BYTES) || incoming.headers["transfer-encoding"] !== undefined) {
    return false;
  }
  if (!PLAIN_JSON.test(incoming.headers["content-type"] ?? "")) return false;
  const started = performance.now();
  const chunks: Buffer[] = [];
  // A client gone mid-body: nothing to answer (the socket goes with it).
  incoming.once("error", () => outgoing.destroy());
  incoming.on("data", (chunk: Buffer) => chunks.push(chunk));
  // The request's own steps are the module's functions below, not closures made per request: each
  // closure named by a const cost a join a __name call under tsx (`npm start`), and an allocation.
  incoming.once("end", () => bodyRead({ deps, incoming, outgoing, app, route, started }, chunks, decide));
  return true;
}

/** A request a fast path claimed, reading its body. */
interface BodyRequest {
  deps: Pick<AppDeps, "metrics" | "logger">;
  incoming: IncomingMessage;
  outgoing: ServerResponse;
  app: (incoming: IncomingMessage, outgoing: ServerResponse) => void;
  route: string;
  started: number;
}

function bodyRead(
  req: BodyRequest,
  chunks: Buffer[],
  decide: (body: unknown, requestId: string) => BodyAnswer | null | Promise<BodyAnswer | null>,
): void {
  const raw = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
  const requestId = requestIdFrom(req.incoming.headers["x-request-id"]);
  let body: unknown;
  try {
    body = JSON.parse(raw.toString("utf8"));
  } catch {
    handToApp(req, raw);
    return;
  }
  // An answer known without waiting takes no promise hop (each showed in a refusal's profile,
  // issue 30 item 1; most refusals need none) and goes with this turn's others (answerSoon).
  let decided: BodyAnswer | null | Promise<BodyAnswer | null>;
  try {
    decided = decide(body, requestId);
  } catch (err) {
    failBodyAnswer(req, requestId, err);
    return;
  }
  if (decided instanceof Promise) {
    decided.then(
      (answer) => {
        try {
          sendBodyAnswer(req, requestId, raw, answer);
        } catch (err) {
          failBodyAnswer(req, requestId, err);
        }
      },
      (err: unknown) => failBodyAnswer(req, requestId, err),
    );
  } else {
    const now = decided;
    answerSoon(() => {
      try {
        sendBodyAnswer(req, requestId, raw, now);
      } catch (err) {
        failBodyAnswer(req, requestId, err);
      }
    });
  }
}

/** The request with its body read (`rawBody`, which @hono/node-server takes as the body), to the app. */
function handToApp(req: BodyRequest, raw: Buffer): void {
  (req.incoming as IncomingMessage & { rawBody?: Buffer }).rawBody = raw;
  req.app(req.incoming, req.outgoing);
}

function sendBodyAnswer(req: BodyRequest, requestId: string, raw: Buffer, answer: BodyAnswer | null): void {
  if (!answer) {
    handToApp(req, raw);
    return;
  }
  const { deps, outgoing } = req;
  let status: number;
  let text: string;
  const headers: Record<string, string> = { "content-type": "application/json", "x-request-id": requestId };
  if ("error" in answer) {
    const err = answer.error;
    status = err.status;
    text = JSON.stringify(errorBody(err, requestId));
    if (err.retryAfter !== undefined) headers["retry-after"] = String(err.retryAfter);
    if (err.status >= 500) deps.logger.warn({ requestId, code: err.code, details: err.details }, err.message);
  } else {
    status = answer.status;
    text = JSON.stringify(answer.json);
  }
  headers["content-length"] = String(Buffer.byteLength(text));
  outgoing.writeHead(status, headers);
  outgoing.end(text); // one write with the head, as the poll's
  const seconds = (performance.now() - req.started) / 1000;
  recordRequest(deps, undefined, requestId, { method: "POST", route: req.route, status, seconds });
}

function failBodyAnswer(req: BodyRequest, requestId: string, err: unknown): void {
  const { deps, outgoing } = req;
  // Never a stack trace to the client; the log keeps it (as the app's onError).
  deps.logger.error({ err, requestId }, "unhandled error");
  if (outgoing.headersSent) {
    outgoing.destroy();
    return;
  }
  const text = JSON.stringify(errorBody(new ApiError("internal_error", "internal error"), requestId));
  outgoing.writeHead(500, { "content-type": "application/json", "x-request-id": requestId });
  outgoing.end(text);
}

/** The client's address as the app's clientIp sees it; undefined for a load generator's exempt request. */
function clientAddress(limits: AppDeps["limits"], incoming: IncomingMessage): string | undefined {
  const exempt =
    limits.loadTestToken !== undefined &&
    isLoadTestToken(limits.loadTestToken, joined(incoming.headers[LOAD_TEST_TOKEN_HEADER]));
  if (exempt) return undefined;
  return (
    clientIpForwarded(limits.trustProxy, joined(incoming.headers["x-forwarded-for"])) ??
    incoming.socket.remoteAddress ??
    "unknown"
  );
}

export interface QueueJoinFastPathDeps {
  deps: Pick<AppDeps, "waitingRoom" | "metrics" | "logger" | "limits" | "rateLimiter" | "bots" | "events">;
  /** The events served lately (the route adds the event on its first join: src/metrics-reporter.ts). */
  seenEvents: Set<string>;
}

/**
 * The join of a fan new to the line, or back to it, with nothing but a fan id (the body is exactly
 * `{"fanId": ...}`, or `{}` for a fan id the gateway issues: src/waiting-room/fan-ids.ts): answered before the Hono app sees it, as src/http/routes/queue/join.ts does,
 * errors included (joinRefusal, the line limits' 429, the 503). With the joins batched per event
 * (src/waiting-room/join-batch.ts), Hono's part of a join (the adapter's Request, the context,
 * routing, the middleware, the body read twice, zod's async validation) cost more than the join.
 *
 * A fan id the client chose is taken here only once the event (the process's event cache) says
 * `waitingRoom.fanIds` is `any`; otherwise the app answers it. A join with a proof of work or an invite, any other key, a body that is not exactly such JSON, a
 * content type other than plain JSON, a body over 1 KiB or without a length goes to the app with
 * its body (the app validates and words the 4xx).
 */
export function queueJoinFastPath({ deps, seenEvents }: QueueJoinFastPathDeps): NodeFastPath {
  const { waitingRoom, limits, rateLimiter, metrics, bots, events } = deps;
  return (incoming, outgoing, app) => {
    if (incoming.method !== "POST") return false;
    const match = QUEUE_JOIN_URL.exec(incoming.url ?? "");
    if (!match) return false;
    const eventId = match[1]!;
    return answerFromBody(deps, incoming, outgoing, app, QUEUE_JOIN_ROUTE, async (body) => {
      const named = onlyFanId(body);
      if (named === undefined) return null;
      let fanId: string;
      if (named === NO_FAN_ID) fanId = bots.fanIds.issue(eventId);
      else if (bots.fanIds.isIssued(eventId, named)) fanId = named;
      else {
        // A fan id the client chose: taken here only where the event is known to take any (the app
        // refuses it elsewhere, after the per-IP limit, as it refuses every other bad join).
        let event = events.peek(eventId);
        if (event === undefined) event = await events.cached(eventId).catch(() => undefined);
        if (event === undefined || event?.waitingRoom.fanIds === "issued") return null;
        fanId = named;
      }
      const lineLimits = lineLimitsOf(limits, clientAddress(limits, incoming));
      const result = await waitingRoom.join(eventId, fanId, {
        limits: lineLimits,
        credentials: { proofBits: 0, invite: false },
      });
      if (result.ok) {
        // A place given back in a line for invited fans only: the app answers (it asks for the
        // invite); the join is idempotent, so the app's join finds the same place. Anywhere else a
        // repeat join is answered here, 200, as the route would.
        if (!result.created && result.invites) return null;
        if (seenEvents.size < 1_000) seenEvents.add(eventId);
        const commitment = commitmentAtJoin(waitingRoom, eventId);
        const lottery = commitment instanceof Promise ? await commitment : commitment;
        return {
          status: result.created ? 201 : 200,
          json: { queueToken: result.queueToken, fanId, ...placeView(result.place), ...(lottery ? { lottery } : {}) },
        };
      }
      try {
        enforceLineLimitsWith(rateLimiter, eventId, "join", lineLimits, result);
      } catch (thrown) {
        if (thrown instanceof ApiError) return { error: thrown };
        throw thrown;
      }
      const { error, refused } = joinRefusal(result, eventId, false);
      if (refused) metrics.joinRefused.inc({ reason: refused });
      return { error };
    });
  };
}

/** A body of exactly `{}`: the gateway issues the fan id. */
const NO_FAN_ID = Symbol("no fan id");

/**
 * The fan id of a body that is exactly `{"fanId": <a fan id>}`, NO_FAN_ID for exactly `{}`, else
 * undefined (the app answers).
 */
function onlyFanId(value: unknown): string | typeof NO_FAN_ID | undefined {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return undefined;
  const keys = Object.keys(value);
  if (keys.length === 0) return NO_FAN_ID;
  if (keys.length !== 1 || keys[0] !== "fanId") return undefined;
  const parsed = FanId.safeParse((value as { fanId: unknown }).fanId);
  return parsed.success ? parsed.data : undefined;
}

export interface HoldRefusalFastPathDeps {
  deps: Pick<AppDeps, "waitingRoom" | "metrics" | "logger" | "limits" | "rateLimiter" | "sectionPages" | "holds">;
}

/**
 * The hold that cannot win, refused before the Hono app sees it (issue 30): when the front row goes
 * on sale, thousands of admitted fans click seats already taken, and each such hold was a session
 * check and a shield call in Redis before its 409. Here a hold of named seats (the body exactly
 * `{"seats": [...]}`) with a valid access token is refused 409 `seat_unavailable`, as the route
 * words it, when this process's seat map (src/seatmap/pages.ts: pages kept current by the event's
 * seat-change channel, trusted only while that channel is up, at most 250 ms without a check) shows
 * one of its seats sold, or held by a hold not yet expired (the shield's rule), after the hold's own checks (src/claims/hold-service.ts
 * refuseFromMap: the event's cached definition). No session check, shield or DynamoDB call; the
 * page is read again past its 250 ms (one small read of its version, shared by the process's
 * requests); the fan's and the IP's limits are taken in the route's own buckets (one Redis call
 * when limits are set), so a flood meets one limit whichever path answers it.
 *
 * What it does not do: it does not ask whether the session was revoked (a revoked session's hold of
 * a taken seat is refused 409 here, where the route says 401: it learns only what the public seat
 * map shows). Anything it cannot answer so goes to the app with its body: a section the map cannot
 * read, no seat known taken (a claim that could win always goes to the shield and DynamoDB's
 * conditional write), best available, general admission, a bad token.
 */
export function holdRefusalFastPath({ deps }: HoldRefusalFastPathDeps): NodeFastPath {
  const { waitingRoom, limits, rateLimiter, sectionPages, holds } = deps;
  return (incoming, outgoing, app) => {
    if (incoming.method !== "POST") return false;
    const match = HOLDS_URL.exec(incoming.url ?? "");
    if (!match) return false;
    const eventId = match[1]!;
    const token = bearerToken(joined(incoming.headers.authorization));
    if (!token) return false;
    const check = waitingRoom.verifyAccessToken(token, eventId);
    if (!check.ok) return false;
    const { fanId } = check.claims;
    return answerFromBody(deps, incoming, outgoing, app, HOLDS_ROUTE, (body) => {
      const seatIds = onlySeats(body);
      if (!seatIds) return null;
      const taken = (seatId: string) => {
        // A page not trusted right now is read (one small read of its version, shared by every
        // request of this process that needs it; the section map's own path does the same). A
        // page in memory answers in this tick: no promise per seat.
        const page = sectionPages.get(eventId, sectionOf(seatId));
        if (page instanceof Promise) return page.then((read) => (read ? read.taken(seatId, Date.now()) : undefined));
        return page ? page.taken(seatId, Date.now()) : undefined;
      };
      const refused = holds.refuseFromMap({ eventId, fanId, seatIds }, taken);
      if (refused instanceof Promise) return refused.then(answerRefusal);
      return answerRefusal(refused);
    });

    /** The 409 of a refusal, after the route's limits; null (no refusal): the app answers. */
    function answerRefusal(refused: MapRefusal | null): BodyAnswer | null | Promise<BodyAnswer | null> {
      if (!refused) return null;
      // No limit set (the bench; a gateway behind a limiting proxy): the 409 in this tick.
      if (!(limits.ratePerIp > 0) && !(limits.ratePerFan > 0)) return { error: seatUnavailable(refused.seats) };
      return limited(refused);
    }
    async function limited(refused: MapRefusal): Promise<BodyAnswer> {
      // The route's limits (src/http/client-ip.ts limitRequest), in the same buckets: one fan's
      // flood meets one limit whichever path answers it (in this process's buckets only while
      // Redis is away, as for every limit). No limit set: no call, and no await either.
      try {
        if (limits.ratePerIp > 0) {
          const ip = clientAddress(limits, incoming);
          if (ip !== undefined) await rateLimiter.enforce("ip:hold", ip, { perSecond: limits.ratePerIp });
        }
        if (limits.ratePerFan > 0) {
          await rateLimiter.enforce("fan:hold", `${eventId}:${fanId}`, { perSecond: limits.ratePerFan });
        }
      } catch (thrown) {
        if (thrown instanceof ApiError) return { error: thrown };
        throw thrown;
      }
      return { error: seatUnavailable(refused.seats) };
    }
  };
}

/** The seat ids of a body that is exactly `{"seats": [<1..MAX_SEATS_PER_FAN seat ids>]}`, else undefined. */
function onlySeats(value: unknown): string[] | undefined {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return undefined;
  const keys = Object.keys(value);
  if (keys.length !== 1 || keys[0] !== "seats") return undefined;
  const seats = (value as { seats: unknown }).seats;
  if (!Array.isArray(seats) || seats.length === 0 || seats.length > MAX_SEATS_PER_FAN) return undefined;
  if (!seats.every((seat) => SeatId.safeParse(seat).success)) return undefined;
  return seats as string[];
}

/** The first fast path that answers, else the app. */
export function fastPaths(...paths: NodeFastPath[]): NodeFastPath {
  return (incoming, outgoing, app) => paths.some((path) => path(incoming, outgoing, app));
}
