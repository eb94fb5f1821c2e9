import { createRoute, OpenAPIHono, z } from "@hono/zod-openapi";
import type { AppEnv } from "../context.js";
import { ErrorBody } from "../errors.js";
import { ApiError } from "../errors.js";

const Healthy = z.object({ status: z.literal("ok") }).openapi("Healthy");
const Ready = z
  .object({
    status: z.literal("ready"),
    checks: z.object({ redis: z.literal("ok"), dynamodb: z.literal("ok") }),
  })
  .openapi("Ready");

const healthz = createRoute({
  method: "get",
  path: "/healthz",
  tags: ["service"],
  summary: "The process is up",
  responses: { 200: { description: "up", content: { "application/json": { schema: Healthy } } } },
});

const readyz = createRoute({
  method: "get",
  path: "/readyz",
  tags: ["service"],
  summary: "Redis and DynamoDB are reachable",
  responses: {
    200: { description: "ready", content: { "application/json": { schema: Ready } } },
    503: { description: "a dependency is down", content: { "application/json": { schema: ErrorBody } } },
  },
});

const CHECK_TIMEOUT_MS = 2_000;

async function probe(name: string, check: () => Promise<void>): Promise<string | null> {
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      check(),
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error("timed out")), CHECK_TIMEOUT_MS);
      }),
    ]);
    return null;
  } catch (err) {
    return `${name}: ${err instanceof Error ? err.message : String(err)}`;
  } finally {
    clearTimeout(timer);
  }
}

export const healthRoutes = new OpenAPIHono<AppEnv>()
  .openapi(healthz, (c) => c.json({ status: "ok" as const }, 200))
  .openapi(readyz, async (c) => {
    const { health } = c.get("deps");
    const failures = (
      await Promise.all([probe("redis", () => health.redis.check()), probe("dynamodb", () => health.dynamodb.check())])
    ).filter((f): f is string => f !== null);
    if (failures.length > 0) {
      throw new ApiError("unavailable", "not ready", { details: { failures }, retryAfter: 1 });
    }
    return c.json({ status: "ready" as const, checks: { redis: "ok" as const, dynamodb: "ok" as const } }, 200);
  });
