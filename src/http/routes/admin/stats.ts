import { createRoute, OpenAPIHono, z } from "@hono/zod-openapi";
import type { AppEnv } from "../../context.js";
import { ApiError, ErrorBody } from "../../errors.js";
import { bearerSecurity, EventIdParam } from "../../schemas.js";
import { operatorOnly } from "./guard.js";

const Stats = z
  .object({
    waiting: z.number(),
    admitted: z.number(),
    active: z.number(),
    abandoned: z.number(),
    completed: z.number(),
    seats: z.object({ available: z.number(), held: z.number(), sold: z.number(), total: z.number() }),
    sections: z.array(
      z.object({ id: z.string(), available: z.number(), held: z.number(), sold: z.number(), total: z.number() }),
    ),
    generalAdmission: z.record(
      z.string(),
      z.object({ available: z.number(), held: z.number(), sold: z.number(), capacity: z.number() }),
    ),
    purchases: z.object({ confirmed: z.number(), pending: z.number(), failed: z.number(), refunded: z.number() }),
    counts: z
      .object({
        at: z.string().openapi({ description: "When seats, areas and purchases were read from the store" }),
        source: z.enum(["snapshot", "computed", "process"]).openapi({
          description:
            "`snapshot`: the latest shared one (Redis), computed by some gateway at most one interval (5 s) ago; " +
            "`computed`: computed for this request; `process`: Redis is down, this gateway's own",
        }),
      })
      .openapi({ description: "Where the seats, generalAdmission, sections and purchases figures come from" }),
    waitingRoom: z.object({
      state: z.string(),
      effectiveAdmitPerSecond: z.number(),
      servedThrough: z.number(),
      awaitingSweep: z.boolean().openapi({
        description:
          "A room with fan shards admits nobody now: its last completed sweep of lost places is over 3 s old " +
          "(a backlog of fans who left at once, or no gateway could sweep). Always false without fan shards.",
      }),
      offered: z
        .number()
        .int()
        .openapi({
          description:
            "A room with claims (WAITING_ROOM_CLAIMS): sessions offered at places the line passed and not yet claimed " +
            "by their fans, counted against maxActive beside `active`. Always 0 without claims.",
        }),
      settings: z
        .object({
          admitPerSecond: z.number(),
          maxActive: z.number(),
          sessionSeconds: z.number(),
          abandonSeconds: z.number(),
          paused: z.boolean(),
          closed: z.boolean(),
          powBits: z.number().int(),
          invites: z.boolean(),
          autoAdmit: z
            .object({
              enabled: z.boolean(),
              minPerSecond: z.number(),
              maxPerSecond: z.number(),
              targetClaimP99Ms: z.number(),
              maxThrottlesPerSecond: z.number(),
            })
            .openapi({ description: "the admission loop's settings (PATCH .../waiting-room autoAdmit)" }),
        })
        .optional(),
    }),
  })
  .openapi("EventStats");

const route = createRoute({
  method: "get",
  path: "/v1/admin/events/{eventId}/stats",
  tags: ["operator"],
  summary: "Queue and inventory figures; seats and general admission come from the authoritative store",
  description:
    "The queue figures are read from Redis on each request. Seats, areas and purchases are the " +
    "authoritative store's as of `counts.at`: counted at most once per 5 s per event across every " +
    "gateway and shared through Redis (src/stats/snapshots.ts), so a console polling every second " +
    "does not read every seat every second. Read role allowed.",
  security: bearerSecurity,
  middleware: [operatorOnly] as const,
  request: { params: EventIdParam },
  responses: {
    200: { description: "figures", content: { "application/json": { schema: Stats } } },
    401: { description: "no operator token", content: { "application/json": { schema: ErrorBody } } },
    404: { description: "unknown event", content: { "application/json": { schema: ErrorBody } } },
    503: { description: "the store cannot count now", content: { "application/json": { schema: ErrorBody } } },
  },
});

/**
 * The figures: the queue live from Redis, the counts from the shared snapshot (src/stats/
 * snapshots.ts), which reads the event's seats from DynamoDB at most once per interval per event
 * whatever the number of readers. A read also marks the event as watched, so the sampler keeps its
 * history while an operator looks at it.
 */
export const statsRoute = new OpenAPIHono<AppEnv>().openapi(route, async (c) => {
  const { eventId } = c.req.valid("param");
  const { waitingRoom, stats } = c.get("deps");
  const [snapshot, room] = await Promise.all([stats.counts.latest(eventId), waitingRoom.stats(eventId)]);
  if (!snapshot) throw new ApiError("not_found", `no event ${eventId}`);
  stats.sampler.watch(eventId);
  const counts = snapshot.seats;
  const queue = room.ok ? room.stats : undefined;
  return c.json(
    {
      waiting: queue?.waiting ?? 0,
      admitted: queue?.admitted ?? 0,
      active: queue?.active ?? 0,
      abandoned: queue?.abandoned ?? 0,
      completed: queue?.completed ?? 0,
      // An expired hold not yet swept is available to the next fan.
      seats: {
        available: counts.seats.available + counts.seats.expiredHolds,
        held: counts.seats.held,
        sold: counts.seats.sold,
        total: counts.seats.total,
      },
      sections: counts.sections.map((s) => ({
        id: s.sectionId,
        available: s.available + s.expiredHolds,
        held: s.held,
        sold: s.sold,
        total: s.total,
      })),
      generalAdmission: Object.fromEntries(
        Object.entries(counts.generalAdmission).map(([id, g]) => [
          id,
          { available: g.available, held: g.held, sold: g.sold, capacity: g.capacity },
        ]),
      ),
      purchases: snapshot.purchases,
      counts: { at: new Date(snapshot.at).toISOString(), source: snapshot.source },
      waitingRoom: {
        state: queue?.state ?? "unavailable",
        effectiveAdmitPerSecond: queue?.effectiveAdmitPerSecond ?? 0,
        servedThrough: queue?.servedThrough ?? 0,
        awaitingSweep: queue?.awaitingSweep ?? false,
        offered: queue?.offered ?? 0,
        ...(room.ok
          ? {
              settings: {
                admitPerSecond: room.settings.admitPerSecond,
                maxActive: room.settings.maxActive,
                sessionSeconds: room.settings.sessionSeconds,
                abandonSeconds: room.settings.abandonSeconds,
                paused: room.settings.paused,
                closed: room.settings.closed,
                powBits: room.settings.powBits,
                invites: room.settings.invites,
                autoAdmit: room.settings.autoAdmit,
              },
            }
          : {}),
      },
    },
    200,
  );
});
