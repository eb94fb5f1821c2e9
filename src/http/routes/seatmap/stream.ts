import type { IncomingMessage } from "node:http";
import { createRoute, OpenAPIHono, z } from "@hono/zod-openapi";
import { streamSSE } from "hono/streaming";
import { clientIp } from "../../client-ip.js";
import type { AppEnv } from "../../context.js";
import { ApiError, ErrorBody } from "../../errors.js";
import { EventIdParam } from "../../schemas.js";
import { createSseBacklog } from "../../sse-backlog.js";

const HEARTBEAT_MS = 15_000;
/** Seconds a refused client is told to wait before it opens a stream again. */
const RETRY_AFTER_S = 5;

const route = createRoute({
  method: "get",
  path: "/v1/events/{eventId}/seatmap/stream",
  tags: ["seat map"],
  summary: "Server-Sent Events: one `seat` event `{id, status}` per seat change, from every gateway instance",
  request: { params: EventIdParam },
  responses: {
    200: {
      description:
        "an event stream; a `ready` event first, and again with `resumed: true` when changes were missed " +
        "(the gateway lost and regained Redis, or the client fell more than SSE_MAX_BACKLOG_BYTES behind): " +
        "read the seat map again. Comments as heartbeats. A client that takes nothing for SSE_WRITE_TIMEOUT_MS " +
        "is disconnected (EventSource reconnects).",
      content: { "text/event-stream": { schema: z.string() } },
    },
    404: { description: "unknown event", content: { "application/json": { schema: ErrorBody } } },
    429: {
      description: "`rate_limited`: this client IP has SSE_MAX_STREAMS_PER_IP streams open (`Retry-After`)",
      content: { "application/json": { schema: ErrorBody } },
    },
    503: {
      description:
        "`unavailable`: this gateway has SSE_MAX_STREAMS streams open (`Retry-After`), or live updates are unavailable",
      content: { "application/json": { schema: ErrorBody } },
    },
  },
});

export const seatStreamRoute = new OpenAPIHono<AppEnv>().openapi(route, async (c) => {
  const { eventId } = c.req.valid("param");
  if (!(await c.get("reads").event(eventId))) throw new ApiError("not_found", `no event ${eventId}`);
  const { relay, streams, limits, metrics } = c.get("deps");
  // HEAD: the stream's headers and nothing else. No slot and no subscription: a HEAD response
  // ends at once, and a stream begun for it would hold its client's slot until a write timed out.
  if (c.req.method === "HEAD") {
    return c.body(null, 200, { "Content-Type": "text/event-stream", "Cache-Control": "no-cache" });
  }
  const slot = streams.acquire(clientIp(c));
  if (slot.kind === "ip_full") {
    metrics.sseRefused.inc({ limit: "ip" });
    metrics.rateLimited.inc({ limit: "sse_streams_per_ip" });
    throw new ApiError("rate_limited", `at most ${limits.maxStreamsPerIp} seat-map streams per client`, {
      retryAfter: RETRY_AFTER_S,
    });
  }
  if (slot.kind === "process_full") {
    metrics.sseRefused.inc({ limit: "process" });
    throw new ApiError("unavailable", "this gateway serves as many seat-map streams as it can; retry", {
      retryAfter: RETRY_AFTER_S,
    });
  }
  metrics.sseStreams.inc();
  // The socket under the response (served by @hono/node-server); absent under app.request().
  const socket = (c.env as { incoming?: IncomingMessage } | undefined)?.incoming?.socket;

  return streamSSE(c, async (stream) => {
    const closed = new Promise<void>((resolve) => stream.onAbort(resolve));
    const frames = createSseBacklog(
      {
        write: (chunk) => stream.write(chunk),
        // Destroying the socket is what frees a connection whose writes never complete; the abort
        // ends this handler (and its slot) even where there is no socket.
        close: () => {
          socket?.destroy();
          stream.abort();
        },
      },
      {
        maxBacklogBytes: limits.streamBacklogBytes,
        writeTimeoutMs: limits.streamWriteTimeoutMs,
        resyncFrame: sseFrame("ready", JSON.stringify({ eventId, resumed: true })),
        onBacklog: (delta) => metrics.sseBacklog.inc(delta),
        onOverflow: (action) => metrics.sseOverflows.inc({ action }),
      },
    );
    let stop: (() => void) | undefined;
    let heartbeat: ReturnType<typeof setInterval> | undefined;
    try {
      try {
        stop = await relay.watch(
          eventId,
          (changes) => {
            let message = "";
            for (const change of changes) {
              message += sseFrame("seat", JSON.stringify({ id: change.id, status: change.status }));
            }
            frames.send(message);
          },
          {
            // Redis came back: changes made while it was away were not relayed. A second `ready`
            // tells the client to read the seat map again (as after a reconnect of its own).
            onResume: () => frames.send(sseFrame("ready", JSON.stringify({ eventId, resumed: true }))),
          },
        );
      } catch {
        await stream.writeSSE({ event: "error", data: JSON.stringify({ code: "unavailable" }) });
        return;
      }
      // Changes relayed while the subscription was being made wait behind this first ready.
      frames.start(sseFrame("ready", JSON.stringify({ eventId }), 3_000));
      heartbeat = setInterval(() => frames.send(": heartbeat\n\n"), HEARTBEAT_MS);
      await closed;
    } finally {
      clearInterval(heartbeat);
      stop?.();
      frames.stop();
      slot.release();
      metrics.sseStreams.dec();
    }
  });
});

/** One SSE message; `data` is JSON (one line); `retryMs` sets the client's reconnection delay. */
function sseFrame(event: string, data: string, retryMs?: number): string {
  return `event: ${event}\ndata: ${data}\n${retryMs === undefined ? "" : `retry: ${retryMs}\n`}\n`;
}
