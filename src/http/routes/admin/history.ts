import { createRoute, OpenAPIHono, z } from "@hono/zod-openapi";
import type { SettingsChange } from "../../../waiting-room/index.js";
import type { AppEnv } from "../../context.js";
import { ApiError, ErrorBody } from "../../errors.js";
import { bearerSecurity, EventIdParam } from "../../schemas.js";
import { operatorOnly } from "./guard.js";

const Change = z
  .object({
    id: z.string(),
    at: z.string(),
    kind: z.enum(["create", "configure", "settings", "open", "restore"]).openapi({
      description:
        "`create`/`configure`: a PUT; `settings`: a PATCH, a close-sale or an end; `open`: the room opened (at " +
        "onSaleAt or an open-now); `restore`: created again from the stored event after Redis lost it",
    }),
    by: z.string().optional().openapi({ description: "The operator token's name, for changes made over HTTP" }),
    settings: z.record(z.string(), z.object({ from: z.string().optional(), to: z.string() })).openapi({
      description: "Each setting the change set: its new value, and the old one (`from`) for `settings` changes",
    }),
  })
  .openapi("SettingsChange");

const route = createRoute({
  method: "get",
  path: "/v1/admin/events/{eventId}/waiting-room/history",
  tags: ["operator"],
  summary: "The waiting room's settings history, newest first: every change, its old and new values, who, when",
  description:
    "Kept in Redis beside the room (its last 1,000 changes, Redis time); the action log keeps every operator " +
    "call in DynamoDB for good. Read role allowed.",
  security: bearerSecurity,
  middleware: [operatorOnly] as const,
  request: {
    params: EventIdParam,
    query: z.object({
      limit: z.coerce
        .number()
        .int()
        .min(1)
        .max(1_000)
        .default(50)
        .openapi({ param: { name: "limit", in: "query" } }),
    }),
  },
  responses: {
    200: {
      description: "changes",
      content: { "application/json": { schema: z.object({ changes: z.array(Change) }).openapi("SettingsHistory") } },
    },
    401: { description: "no operator token", content: { "application/json": { schema: ErrorBody } } },
    404: { description: "unknown event", content: { "application/json": { schema: ErrorBody } } },
    503: { description: "Redis unavailable", content: { "application/json": { schema: ErrorBody } } },
  },
});

/** Times the room keeps in epoch ms, shown as ISO like every time of the API. */
const asTime = (name: string, value: string | undefined) =>
  value !== undefined && name === "onSaleAt" && /^\d+$/.test(value) ? new Date(Number(value)).toISOString() : value;

export function readChange(change: SettingsChange): z.infer<typeof Change> {
  const settings: Record<string, { from?: string; to: string }> = {};
  let by: string | undefined;
  for (const [name, value] of Object.entries(change.fields)) {
    if (name === "by") by = value;
    else if (!name.endsWith(".was")) {
      const was = asTime(name, change.fields[`${name}.was`]);
      const to = asTime(name, value) ?? value;
      settings[name] = was === undefined ? { to } : { from: was, to };
    }
  }
  return { id: change.id, at: change.at, kind: change.kind, ...(by ? { by } : {}), settings };
}

export const settingsHistoryRoute = new OpenAPIHono<AppEnv>().openapi(route, async (c) => {
  const { eventId } = c.req.valid("param");
  const { limit } = c.req.valid("query");
  const result = await c.get("deps").waitingRoom.settingsHistory(eventId, limit);
  if (!result.ok) {
    if (result.reason === "not_found") throw new ApiError("not_found", `no event ${eventId}`);
    throw new ApiError("unavailable", "the waiting room is unavailable; retry", { retryAfter: 1 });
  }
  return c.json({ changes: result.changes.map(readChange) }, 200);
});
