/**
 * The HTTP app, composed of small sub-apps. `buildApp(deps)` takes every client it needs, so a
 * test builds one with its own Redis and DynamoDB and calls `app.request()` in-process.
 */
import { OpenAPIHono } from "@hono/zod-openapi";
import { requestId } from "hono/request-id";
import type { AppDeps, AppEnv } from "./context.js";
import { ApiError, errorBody } from "./errors.js";
import { healthRoutes } from "./routes/health.js";

export function buildApp(deps: AppDeps) {
  const app = new OpenAPIHono<AppEnv>({
    // A schema violation is a 400 with the fields named, in the one error model.
    defaultHook: (result) => {
      if (!result.success) {
        throw new ApiError("invalid_request", "the request does not match the schema", {
          details: {
            issues: result.error.issues.map((i) => ({ path: i.path.join("."), message: i.message })),
          },
        });
      }
    },
  });

  // Echoes a client's X-Request-Id when it is sane (word characters, at most 128), else makes one.
  app.use(requestId({ limitLength: 128 }));
  app.use(async (c, next) => {
    c.set("deps", deps);
    c.set("log", deps.logger.child({ requestId: c.get("requestId") }));
    await next();
  });

  app.route("/", healthRoutes);

  app.doc31("/openapi.json", {
    openapi: "3.1.0",
    info: { title: "On-sale gateway", version: "1" },
  });

  app.notFound((c) => {
    const err = new ApiError("not_found", `no route for ${c.req.method} ${new URL(c.req.url).pathname}`);
    return c.json(errorBody(err, c.get("requestId")), err.status);
  });

  app.onError((err, c) => {
    const id = c.get("requestId") ?? crypto.randomUUID();
    if (err instanceof ApiError) {
      if (err.retryAfter !== undefined) c.header("Retry-After", String(err.retryAfter));
      if (err.status >= 500) c.var.log?.warn({ code: err.code, details: err.details }, err.message);
      return c.json(errorBody(err, id), err.status);
    }
    // Never a stack trace to the client; the log keeps it.
    (c.var.log ?? deps.logger).error({ err }, "unhandled error");
    const internal = new ApiError("internal_error", "internal error");
    return c.json(errorBody(internal, id), internal.status);
  });

  return app;
}
