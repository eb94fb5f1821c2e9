import { createRoute, OpenAPIHono, z } from "@hono/zod-openapi";
import { streamSSE } from "hono/streaming";
import type { AppEnv } from "../../context.js";
import { ApiError, ErrorBody } from "../../errors.js";
import { EventIdParam } from "../../schemas.js";

const HEARTBEAT_MS = 15_000;

const route = createRoute({
  method: "get",
  path: "/v1/events/{eventId}/seatmap/stream",
  tags: ["seat map"],
  summary: "Server-Sent Events: one `seat` event `{id, status}` per seat change, from every gateway instance",
  request: { params: EventIdParam },
  responses: {
    200: {
      description:
        "an event stream; a `ready` event first (and again, with `resumed: true`, after the gateway lost and " +
        "regained Redis: read the seat map again), comments as heartbeats",
      content: { "text/event-stream": { schema: z.string() } },
    },
    404: { description: "unknown event", content: { "application/json": { schema: ErrorBody } } },
    503: { description: "live updates unavailable", content: { "application/json": { schema: ErrorBody } } },
  },
});

export const seatStreamRoute = new OpenAPIHono<AppEnv>().openapi(route, async (c) => {
  const { eventId } = c.req.valid("param");
  if (!(await c.var.reads.event(eventId))) throw new ApiError("not_found", `no event ${eventId}`);
  const { relay } = c.var.deps;
  let queue: Promise<unknown> = Promise.resolve();
  let stop: (() => void) | undefined;

  return streamSSE(c, async (stream) => {
    const closed = new Promise<void>((resolve) => stream.onAbort(resolve));
    try {
      stop = await relay.watch(
        eventId,
        (changes) => {
          // Writes are chained so events keep their order on this connection.
          queue = queue
            .then(async () => {
              for (const change of changes) {
                await stream.writeSSE({
                  event: "seat",
                  data: JSON.stringify({ id: change.id, status: change.status }),
                });
              }
            })
            .catch(() => {});
        },
        {
          // Redis came back: changes made while it was away were not relayed. A second `ready`
          // tells the client to read the seat map again (as after a reconnect of its own).
          onResume: () => {
            queue = queue
              .then(() => stream.writeSSE({ event: "ready", data: JSON.stringify({ eventId, resumed: true }) }))
              .catch(() => {});
          },
        },
      );
    } catch {
      await stream.writeSSE({ event: "error", data: JSON.stringify({ code: "unavailable" }) });
      return;
    }
    await stream.writeSSE({ event: "ready", data: JSON.stringify({ eventId }), retry: 3_000 });
    const heartbeat = setInterval(() => {
      queue = queue.then(() => stream.write(": heartbeat\n\n")).catch(() => {});
    }, HEARTBEAT_MS);
    try {
      await closed;
    } finally {
      clearInterval(heartbeat);
      stop?.();
    }
  });
});
