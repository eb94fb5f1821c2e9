import { createRoute, OpenAPIHono, z } from "@hono/zod-openapi";
import type { AppEnv } from "../../context.js";
import { ApiError, ErrorBody } from "../../errors.js";
import { bearerSecurity, EventIdParam } from "../../schemas.js";
import { operatorOnly } from "./guard.js";

const Sample = z
  .object({
    at: z.number().int().openapi({ description: "When the sample was taken, epoch ms (Redis time)" }),
    countsAt: z
      .number()
      .int()
      .openapi({ description: "When its seat, area and purchase figures were read from the store, epoch ms" }),
    state: z.string().openapi({ description: "The waiting room's state: prequeue, open, paused, closed" }),
    waiting: z.number(),
    admitted: z.number().openapi({ description: "Fans admitted so far: a counter, its slope the admission rate" }),
    active: z.number(),
    available: z.number().openapi({ description: "Seats and standing places" }),
    held: z.number(),
    sold: z.number().openapi({ description: "Seats and standing places sold: a counter, its slope the sales rate" }),
    purchases: z.object({ confirmed: z.number(), pending: z.number(), failed: z.number() }),
    admitPerSecond: z.number().nullable().openapi({ description: "The operator's rate in force" }),
    effectiveAdmitPerSecond: z
      .number()
      .nullable()
      .openapi({ description: "The rate the room admits at now (0 when paused)" }),
    claimP99Ms: z.number().nullable().optional().openapi({
      description: "The hold path's p99 latency over the slot, merged across gateways, ms; null: no holds",
    }),
    claims: z.number().optional().openapi({ description: "Holds counted over the slot, every gateway" }),
    throttles: z.number().optional().openapi({
      description: "DynamoDB attempts throttled over the slot, every gateway (the table's, not only this event's)",
    }),
    finished: z.number().optional().openapi({
      description: "Sessions ended so far (completed, expired, revoked): a counter, its slope what checkout frees",
    }),
    loop: z
      .object({
        rate: z.number().openapi({ description: "The admitPerSecond the step set (or kept)" }),
        was: z.number().openapi({ description: "The rate before the step" }),
        reason: z.enum([
          "starting",
          "not_admitting",
          "idle",
          "p99_over_target",
          "throttled",
          "settling",
          "near_target",
          "tracking_finishes",
          "increasing",
          "at_max",
          "at_min",
        ]),
        finishingPerSecond: z.number().nullable(),
        throttlesPerSecond: z.number().nullable(),
        targetClaimP99Ms: z.number(),
        minPerSecond: z.number(),
        maxPerSecond: z.number(),
      })
      .optional()
      .openapi({ description: "The admission loop's step in this slot, when the loop is on (autoAdmit)" }),
  })
  .openapi("StatsSample");

const History = z
  .object({
    eventId: z.string(),
    intervalSeconds: z.number().openapi({ description: "One sample per this many seconds" }),
    windowSeconds: z.number().openapi({ description: "How far back the history goes" }),
    samples: z.array(Sample).openapi({ description: "Oldest first" }),
    more: z.boolean().openapi({ description: "More samples follow: ask again with `since` = the last one's `at`" }),
  })
  .openapi("StatsHistory");

const route = createRoute({
  method: "get",
  path: "/v1/admin/events/{eventId}/stats/history",
  tags: ["operator"],
  summary: "The event's figures over the last hour, one sample per 5 s, oldest first (the console's charts)",
  description:
    "Kept in Redis by the gateways' stats samplers (src/stats/sampler.ts): one sample per event per 5 s, " +
    "written by exactly one gateway, for each event served or watched within the last hour, trimmed to one " +
    "hour. Conflicts are not in it (each gateway counts its own; see gateway_conflicts_total). Read role allowed.",
  security: bearerSecurity,
  middleware: [operatorOnly] as const,
  request: {
    params: EventIdParam,
    query: z.object({
      since: z.coerce
        .number()
        .int()
        .min(0)
        .default(0)
        .openapi({
          param: { name: "since", in: "query" },
          description: "Only samples taken after this time, epoch ms (exclusive); default all",
        }),
      limit: z.coerce
        .number()
        .int()
        .min(1)
        .max(1_000)
        .default(1_000)
        .openapi({ param: { name: "limit", in: "query" } }),
    }),
  },
  responses: {
    200: { description: "samples", content: { "application/json": { schema: History } } },
    400: { description: "a bad since or limit", content: { "application/json": { schema: ErrorBody } } },
    401: { description: "no operator token", content: { "application/json": { schema: ErrorBody } } },
    404: { description: "unknown event", content: { "application/json": { schema: ErrorBody } } },
    503: { description: "Redis unavailable", content: { "application/json": { schema: ErrorBody } } },
  },
});

export const statsHistoryRoute = new OpenAPIHono<AppEnv>().openapi(route, async (c) => {
  const { eventId } = c.req.valid("param");
  const { since, limit } = c.req.valid("query");
  const { events, stats } = c.get("deps");
  if (!(await events.cached(eventId))) throw new ApiError("not_found", `no event ${eventId}`);
  stats.sampler.watch(eventId);
  const page = await stats.sampler.history(eventId, { since, limit }).catch(() => {
    throw new ApiError("unavailable", "the history is kept in Redis, unavailable now; retry", { retryAfter: 1 });
  });
  return c.json(
    {
      eventId,
      intervalSeconds: stats.sampler.intervalMs / 1000,
      windowSeconds: stats.sampler.windowMs / 1000,
      samples: page.samples,
      more: page.more,
    },
    200,
  );
});
