import { createRoute, OpenAPIHono, z } from "@hono/zod-openapi";
import type { ActionPage } from "../../../operators/action-log.js";
import { InvalidCursorError } from "../../../operators/action-log.js";
import type { AppEnv } from "../../context.js";
import { ApiError, ErrorBody } from "../../errors.js";
import { bearerSecurity, EventIdParam } from "../../schemas.js";
import { operatorOnly } from "./guard.js";

const Action = z
  .object({
    at: z.string(),
    operator: z.string().openapi({ description: "The token's name (ADMIN_TOKEN is `default`)" }),
    role: z.enum(["admin", "read"]),
    method: z.string(),
    route: z.string(),
    path: z.string(),
    eventId: z.string().optional(),
    summary: z.record(z.string(), z.unknown()).optional().openapi({ description: "The request body in brief" }),
    status: z.number(),
    code: z.string().optional().openapi({ description: "The error code of a refusal" }),
    requestId: z.string(),
  })
  .openapi("OperatorAction");

const ActionLogPage = z.object({ actions: z.array(Action), cursor: z.string().optional() }).openapi("OperatorActions");

const page = {
  limit: z.coerce
    .number()
    .int()
    .min(1)
    .max(200)
    .default(50)
    .openapi({ param: { name: "limit", in: "query" } }),
  cursor: z
    .string()
    .max(2_000)
    .optional()
    .openapi({ param: { name: "cursor", in: "query" }, description: "The `cursor` of the previous page" }),
};

const responses = {
  200: { description: "newest first", content: { "application/json": { schema: ActionLogPage } } },
  400: { description: "a bad cursor or day", content: { "application/json": { schema: ErrorBody } } },
  401: { description: "no operator token", content: { "application/json": { schema: ErrorBody } } },
} as const;

const description =
  "Every operator request that is not a read (PUT, PATCH, POST), refusals of a known token included: which token " +
  "(its name), what (method, route, a summary of the body), when, and the answer's status. One DynamoDB item " +
  "per action, kept for good; written once the action has answered. Read role allowed.";

const eventRoute = createRoute({
  method: "get",
  path: "/v1/admin/events/{eventId}/action-log",
  tags: ["operator"],
  summary: "The operator actions on one event, newest first, a page at a time",
  description,
  security: bearerSecurity,
  middleware: [operatorOnly] as const,
  request: { params: EventIdParam, query: z.object(page) },
  responses,
});

const dayRoute = createRoute({
  method: "get",
  path: "/v1/admin/action-log",
  tags: ["operator"],
  summary: "Every operator action of a UTC day (default today), newest first, a page at a time",
  description,
  security: bearerSecurity,
  middleware: [operatorOnly] as const,
  request: {
    query: z.object({
      day: z
        .string()
        .regex(/^\d{4}-\d{2}-\d{2}$/, "must be YYYY-MM-DD")
        .refine((day) => realDay(day), "must be a date that exists (YYYY-MM-DD)")
        .optional()
        .openapi({ param: { name: "day", in: "query" } }),
      ...page,
    }),
  },
  responses,
});

async function answer(read: () => Promise<ActionPage>): Promise<ActionPage> {
  try {
    return await read();
  } catch (err) {
    if (err instanceof InvalidCursorError) throw new ApiError("invalid_request", err.message);
    throw err;
  }
}

export const actionLogRoutes = new OpenAPIHono<AppEnv>()
  .openapi(eventRoute, async (c) => {
    const { eventId } = c.req.valid("param");
    const { limit, cursor } = c.req.valid("query");
    return c.json(await answer(() => c.get("deps").actionLog.forEvent(eventId, { limit, cursor })), 200);
  })
  .openapi(dayRoute, async (c) => {
    const { day, limit, cursor } = c.req.valid("query");
    const today = new Date().toISOString().slice(0, 10);
    return c.json(await answer(() => c.get("deps").actionLog.forDay(day ?? today, { limit, cursor })), 200);
  });

/** A calendar day that exists: 2026-02-30 and 2026-13-01 do not (Date would roll them over). */
function realDay(day: string): boolean {
  const date = new Date(`${day}T00:00:00Z`);
  return !Number.isNaN(date.getTime()) && date.toISOString().slice(0, 10) === day;
}
