/**
 * Service endpoints that are not part of the fan or operator API: Prometheus metrics and the
 * interactive API docs (Swagger UI, served from the installed swagger-ui-dist package, so the
 * page works with no internet).
 */
import { readFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { Hono } from "hono";
import type { AppEnv } from "../context.js";
import { ApiError } from "../errors.js";
import { bearerMatches } from "../middleware/admin-auth.js";

const require = createRequire(import.meta.url);
const swaggerDir = dirname(require.resolve("swagger-ui-dist/package.json"));
const assets: Record<string, string> = {
  "swagger-ui.css": "text/css; charset=utf-8",
  "swagger-ui-bundle.js": "text/javascript; charset=utf-8",
};
const assetCache = new Map<string, Buffer>();

const docsPage = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>On-sale gateway API</title>
<link rel="stylesheet" href="/docs/assets/swagger-ui.css">
</head>
<body>
<div id="ui"></div>
<script src="/docs/assets/swagger-ui-bundle.js"></script>
<script src="/docs/assets/init.js"></script>
</body>
</html>`;

const initScript = `window.ui = SwaggerUIBundle({ url: "/openapi.json", dom_id: "#ui", deepLinking: true });`;

export const serviceRoutes = new Hono<AppEnv>()
  .get("/metrics", async (c) => {
    const deps = c.get("deps");
    const { metrics, waitingRoom } = deps;
    if (deps.metricsToken && !bearerMatches(c.req.header("authorization"), deps.metricsToken)) {
      throw new ApiError("unauthenticated", "/metrics asks for the METRICS_TOKEN bearer token");
    }
    // The event-wide gauges come from Redis, the same for every process: exported by one of them
    // (src/metrics-reporter.ts), for every event any process served lately.
    const report = await deps.metricsReporter.report(c.get("reads").seenEvents);
    metrics.reporter.set(report.reporter ? 1 : 0);
    metrics.waiting.reset();
    metrics.admitted.reset();
    metrics.active.reset();
    metrics.queueJobs.reset();
    if (report.reporter) {
      await Promise.all([
        ...report.events.map(async (event) => {
          const room = await waitingRoom.stats(event);
          if (!room.ok) return;
          metrics.waiting.set({ event }, room.stats.waiting);
          metrics.admitted.set({ event }, room.stats.admitted);
          metrics.active.set({ event }, room.stats.active);
        }),
        (async () => {
          const counts = await deps.queueJobCounts?.().catch(() => undefined);
          for (const [queue, states] of Object.entries(counts ?? {})) {
            for (const [state, n] of Object.entries(states)) metrics.queueJobs.set({ queue, state }, n);
          }
        })(),
      ]);
    }
    c.header("Content-Type", metrics.registry.contentType);
    return c.body(await metrics.registry.metrics());
  })
  .get("/docs", (c) => c.html(docsPage))
  // One route for every asset, init.js included: a static path beside a parameter in the same
  // segment is one Hono's RegExpRouter refuses, and the app then falls back to the TrieRouter for
  // every route (its matching was ~3% of a status poll's CPU).
  .get("/docs/assets/:name", async (c) => {
    const name = c.req.param("name");
    if (name === "init.js") {
      c.header("Content-Type", "text/javascript; charset=utf-8");
      return c.body(initScript);
    }
    const type = assets[name];
    if (!type) return c.notFound();
    let body = assetCache.get(name);
    if (!body) {
      body = await readFile(join(swaggerDir, name));
      assetCache.set(name, body);
    }
    c.header("Content-Type", type);
    c.header("Cache-Control", "public, max-age=86400");
    return c.body(new Uint8Array(body));
  });
