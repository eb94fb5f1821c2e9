/**
 * Serves the app on a port with a listen backlog deep enough for an on-sale spike: Node's default
 * (511) makes the kernel drop the connections of a burst of fans arriving at once, which they see
 * as resets. The kernel caps it at net.core.somaxconn.
 *
 * Requests that never reach the app still get the one error model, `{"error": {code, message,
 * requestId}}` as JSON: those Node's HTTP parser refuses (a header over 16 KiB, a bad request line,
 * a conflicting Content-Length, a byte not allowed in a header; `clientError`), those the adapter
 * cannot turn into a Request (a bad Host, a request target that is not a path), an `Expect` other
 * than 100-continue, and CONNECT. Left to Node's defaults they are answered with an empty body, or
 * (CONNECT) not at all.
 */
import { randomUUID } from "node:crypto";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import type { Duplex } from "node:stream";
import { getRequestListener, type Http2Bindings, type HttpBindings } from "@hono/node-server";
import { ApiError, type ErrorCode, errorBody } from "./errors.js";
import type { NodeFastPath } from "./fast-path.js";

export const LISTEN_BACKLOG = 4_096;

/**
 * A whole request (headers and body) must arrive within this; a client trickling a body it
 * announced but never sends (a Content-Length larger than the body) holds a socket no longer.
 * Responses are not bound by it: a seat-map stream stays open.
 */
export const REQUEST_TIMEOUT_MS = 30_000;
export const HEADERS_TIMEOUT_MS = 20_000;
/**
 * How often Node checks the two timeouts above (its default is 30 s, so a slow client was cut off
 * only at the next check: 42 s for a 20 s bound). Each check walks the open connections once.
 */
export const TIMEOUT_CHECK_INTERVAL_MS = 1_000;

/**
 * How long an idle kept-alive socket stays open (HTTP_KEEP_ALIVE_TIMEOUT_MS). It must outlast the
 * idle timeout of whatever reuses connections to us: a load balancer's pool (60 s is the usual
 * default) or a fan polling every few seconds. When the server closes first, the client's next
 * request races the close and gets EOF or a reset, and a POST cannot safely be retried. Node's
 * default is 5 s.
 *
 * It is independent of the two timeouts above. Since Node 18 they run only while a request is
 * being received: from the accept (a new connection) or the first byte of the next request (a
 * kept-alive one) until it has fully arrived; the idle time between requests is not counted. So
 * the old advice (headersTimeout above keepAliveTimeout, when Node counted the idle time against
 * headersTimeout) does not apply, and raising the keep-alive timeout gives a slow client no more
 * time to trickle its headers or body.
 */
export const KEEP_ALIVE_TIMEOUT_MS = 65_000;

/** The answer to a request Node's parser refused, written straight to the socket. */
function rawErrorResponse(code: ErrorCode, message: string, extraHeaders: string[] = []): string {
  const err = new ApiError(code, message);
  const requestId = randomUUID();
  const body = JSON.stringify(errorBody(err, requestId));
  return [
    `HTTP/1.1 ${err.status} ${reasonPhrase[err.status] ?? "Error"}`,
    "Content-Type: application/json",
    `Content-Length: ${Buffer.byteLength(body)}`,
    `X-Request-Id: ${requestId}`,
    ...extraHeaders,
    "Connection: close",
    "",
    body,
  ].join("\r\n");
}

const reasonPhrase: Record<number, string> = {
  400: "Bad Request",
  405: "Method Not Allowed",
  408: "Request Timeout",
  417: "Expectation Failed",
  413: "Payload Too Large",
  431: "Request Header Fields Too Large",
};

/** What Node's parser error means for the client (codes from llhttp and node:http). */
function parserErrorAnswer(err: NodeJS.ErrnoException): { code: ErrorCode; message: string } {
  switch (err.code) {
    case "HPE_HEADER_OVERFLOW":
      return { code: "headers_too_large", message: "the request headers are larger than 16 KiB" };
    case "ERR_HTTP_REQUEST_TIMEOUT":
      return { code: "request_timeout", message: "the request did not arrive in time" };
    case "HPE_INVALID_CONTENT_LENGTH":
    case "HPE_UNEXPECTED_CONTENT_LENGTH":
      return { code: "invalid_request", message: "the Content-Length header is not valid" };
    case "HPE_INVALID_HEADER_TOKEN":
    case "HPE_INVALID_HEADER_VALUE":
    case "HPE_LF_EXPECTED":
    case "HPE_CR_EXPECTED":
      return { code: "invalid_request", message: "a request header is not valid HTTP" };
    case "HPE_INVALID_CHUNK_SIZE":
    case "HPE_INVALID_TRANSFER_ENCODING":
      return { code: "invalid_request", message: "the chunked body is not valid" };
    default:
      return { code: "invalid_request", message: "the request is not valid HTTP/1.1" };
  }
}

/**
 * How long a socket answered from `clientError` stays open to read (and discard) what the client
 * still sends: the rest of a request we refused. Closing at once would reset the connection while
 * the client is still writing, and a reset can erase our answer from the client's receive buffer
 * before it reads it (RFC 9112, section 9.6). Most clients finish and close much sooner.
 */
export const LINGER_MS = 5_000;

/** Sockets answered from `clientError`, lingering until the client closes or LINGER_MS is over. */
const lingering = new WeakSet<Socket>();

/**
 * Answers a request Node's parser refused, then closes in stages: our answer and a FIN, then the
 * rest of the client's bytes read and dropped until it closes too (or `lingerMs` is over), so the
 * client gets the answer rather than a reset while it writes a body (a 1 MB header with a large
 * body is one). Node's own default writes the answer and destroys the socket at once, and the
 * parser, once failed, reports the same error on every later chunk: destroying there is the reset.
 */
export function clientErrorHandler(lingerMs = LINGER_MS): (err: NodeJS.ErrnoException, socket: Socket) => void {
  return (err, socket) => {
    if (lingering.has(socket)) {
      // The parser repeats its error for each chunk still arriving: those bytes are dropped. A
      // client that went away ends the lingering at once.
      if (err.code === "ECONNRESET") socket.destroy();
      return;
    }
    // A client that went away (or a socket someone else already ended) gets nothing more.
    if (err.code === "ECONNRESET" || !socket.writable) {
      socket.destroy();
      return;
    }
    const answer = parserErrorAnswer(err);
    lingering.add(socket);
    const timer = setTimeout(() => socket.destroy(), lingerMs);
    timer.unref();
    socket.once("close", () => clearTimeout(timer));
    // The client's FIN (it sent all it will) completes the close once our answer is flushed:
    // nothing unread is left, so no reset.
    socket.once("end", () => {
      if (socket.writableFinished) socket.destroy();
      else socket.once("finish", () => socket.destroy());
    });
    socket.end(rawErrorResponse(answer.code, answer.message));
  };
}

/** CONNECT (a proxy tunnel) is nothing this server does; without a listener Node drops the socket. */
function onConnect(_req: IncomingMessage, socket: Duplex): void {
  const refusal = rawErrorResponse("method_not_allowed", "CONNECT is not served here", [
    "Allow: DELETE, GET, HEAD, PATCH, POST, PUT",
  ]);
  socket.on("error", () => socket.destroy());
  socket.end(refusal);
}

/**
 * An `Expect` other than 100-continue: 417 as Node would, but with the error body. The body the
 * client sends anyway is read and dropped and the connection kept: closing it as soon as the answer
 * was written (`Connection: close`) reset it while megabytes of body were still arriving, and the
 * client saw the reset instead of the 417 (a fuzzer's case in CI). The request timeout bounds a
 * body that never ends.
 */
function onCheckExpectation(req: IncomingMessage, res: ServerResponse): void {
  const err = new ApiError("expectation_failed", "only Expect: 100-continue is supported");
  const requestId = randomUUID();
  const body = JSON.stringify(errorBody(err, requestId));
  req.resume();
  res.writeHead(err.status, {
    "Content-Type": "application/json",
    "Content-Length": Buffer.byteLength(body),
    "X-Request-Id": requestId,
  });
  res.end(body);
}

/** The adapter's own failures (no Request could be built), in the one error model. */
function adapterError(err: unknown): Response {
  const built = err instanceof Error && err.name === "RequestError";
  const apiError = built
    ? new ApiError("invalid_request", `the request cannot be served: ${(err as Error).message}`)
    : new ApiError("internal_error", "internal error");
  const requestId = randomUUID();
  return new Response(JSON.stringify(errorBody(apiError, requestId)), {
    status: apiError.status,
    headers: { "Content-Type": "application/json", "X-Request-Id": requestId },
  });
}

export async function listenApp(options: {
  /** The app's fetch; `env` carries Node's `{incoming, outgoing}` (src/http/request-context.ts uses it). */
  fetch: (request: Request, env: HttpBindings | Http2Bindings) => Response | Promise<Response>;
  port: number;
  host: string;
  /** Default KEEP_ALIVE_TIMEOUT_MS. */
  keepAliveTimeoutMs?: number;
  /** Answers some requests before the app (src/http/fast-path.ts); what it declines goes to the app. */
  fastPath?: NodeFastPath;
  /** How long a socket refused by the parser keeps draining the client's bytes; default LINGER_MS. */
  lingerMs?: number;
  /** Defaults HEADERS_TIMEOUT_MS and REQUEST_TIMEOUT_MS (shorter in tests of slow clients). */
  headersTimeoutMs?: number;
  requestTimeoutMs?: number;
}): Promise<{ server: Server; port: number }> {
  const appListener = getRequestListener(options.fetch, {
    // HTTP/1.0 clients may send no Host: they are served as if they had named this one.
    hostname: "localhost",
    errorHandler: adapterError,
  });
  const { fastPath } = options;
  const listener = !fastPath
    ? appListener
    : (incoming: IncomingMessage, outgoing: ServerResponse) => {
        try {
          if (fastPath(incoming, outgoing, appListener)) return;
        } catch {
          // Never half an answer: before its first byte the app answers instead, after it the
          // connection goes (the client sees a reset, not a truncated body it could trust).
          if (outgoing.headersSent) {
            outgoing.destroy();
            return;
          }
        }
        void appListener(incoming, outgoing);
      };
  const server = createServer(
    {
      requestTimeout: options.requestTimeoutMs ?? REQUEST_TIMEOUT_MS,
      headersTimeout: options.headersTimeoutMs ?? HEADERS_TIMEOUT_MS,
      connectionsCheckingInterval: TIMEOUT_CHECK_INTERVAL_MS,
      keepAliveTimeout: options.keepAliveTimeoutMs ?? KEEP_ALIVE_TIMEOUT_MS,
      requireHostHeader: false,
    },
    listener,
  );
  server.on("clientError", clientErrorHandler(options.lingerMs));
  server.on("connect", onConnect);
  server.on("checkExpectation", onCheckExpectation);
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen({ port: options.port, host: options.host, backlog: LISTEN_BACKLOG }, () => {
      server.off("error", reject);
      resolve();
    });
  });
  return { server, port: (server.address() as AddressInfo).port };
}
