/**
 * Liveness and readiness, as an orchestrator reads them.
 *
 * - `/livez` (and `/healthz`, its older name): the process runs and its event loop answers. No
 *   dependency is asked: a liveness probe that failed with Redis would restart every pod at once
 *   during a Redis outage, which cures nothing.
 * - `/readyz`: this gateway can sell. DynamoDB decides who owns a seat, so without it nothing can
 *   be sold: 503. Without Redis the gateway still serves held fans (holds and purchases go to
 *   DynamoDB; joins answer 503), so it stays in the load balancer: 200 with `status: "degraded"`.
 *   Draining on SIGTERM answers 503 without asking anything, so the load balancer stops sending
 *   new connections before the server closes. The rule is src/health.ts's.
 */
import { createRoute, OpenAPIHono, z } from "@hono/zod-openapi";
import { gatewayReadiness } from "../../health.js";
import type { AppEnv } from "../context.js";
import { ApiError, ErrorBody } from "../errors.js";

const Healthy = z.object({ status: z.literal("ok") }).openapi("Healthy");
const Ready = z
  .object({
    status: z.enum(["ready", "degraded"]),
    checks: z.object({ redis: z.enum(["ok", "down"]), dynamodb: z.literal("ok") }),
    /** What failed, when degraded. */
    failures: z.array(z.string()).optional(),
  })
  .openapi("Ready");

const liveness = (path: "/livez" | "/healthz") =>
  createRoute({
    method: "get",
    path,
    tags: ["service"],
    summary:
      path === "/livez" ? "The process is up (no dependency asked)" : "The process is up (the older name of /livez)",
    responses: { 200: { description: "up", content: { "application/json": { schema: Healthy } } } },
  });

const readyz = createRoute({
  method: "get",
  path: "/readyz",
  tags: ["service"],
  summary: "This gateway can sell: DynamoDB reachable (Redis down is degraded, not unready)",
  responses: {
    200: {
      description: "ready, or degraded (Redis down: held fans can still buy)",
      content: { "application/json": { schema: Ready } },
    },
    503: {
      description: "DynamoDB is down, or the process is draining before shutdown",
      content: { "application/json": { schema: ErrorBody } },
    },
  },
});

const up = () => ({ status: "ok" as const });

export const healthRoutes = new OpenAPIHono<AppEnv>()
  .openapi(liveness("/livez"), (c) => c.json(up(), 200))
  .openapi(liveness("/healthz"), (c) => c.json(up(), 200))
  .openapi(readyz, async (c) => {
    const readiness = await gatewayReadiness(c.get("deps").health);
    if (!readiness.ready) {
      throw new ApiError("unavailable", readiness.message, { details: readiness.details, retryAfter: 1 });
    }
    return c.json(readiness.body, 200);
  });
