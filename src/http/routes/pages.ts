/**
 * The browser pages (waiting-room/dist/, built by `npm run build:pages`): `/` is the fan's
 * waiting room, seat map and checkout, `/console` the operator console, `/lottery` the draw
 * recomputed in the browser, `/assets/<file>` their scripts and styles. The same files can be
 * deployed to a CDN; served from here they call the API on this origin.
 *
 * Only names built from a fixed alphabet are looked up, and only directly inside assets/, so no
 * request can reach a file outside the bundle. A missing bundle is a 503 that says how to build it.
 */
import { readFile, stat } from "node:fs/promises";
import { extname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { Hono } from "hono";
import type { Context } from "hono";
import type { AppEnv } from "../context.js";
import { ApiError, errorBody } from "../errors.js";

export const defaultPagesDir = fileURLToPath(new URL("../../../waiting-room/dist/", import.meta.url));

const contentTypes: Record<string, string> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".map": "application/json; charset=utf-8",
  ".json": "application/json; charset=utf-8",
  ".svg": "image/svg+xml",
  ".png": "image/png",
  ".ico": "image/x-icon",
  ".woff2": "font/woff2",
  ".txt": "text/plain; charset=utf-8",
};

/** One path segment: letters, digits, `.`, `_`, `-`, not starting with a dot (no `..`, no dotfiles). */
const ASSET_NAME = /^[A-Za-z0-9_-][A-Za-z0-9._-]{0,127}$/;

// Served by the gateway, the pages only ever talk to this origin; a `?api=` link pointing them
// elsewhere (say, to collect an operator token) is refused by the browser.
const PAGE_SECURITY_HEADERS: Record<string, string> = {
  "Content-Security-Policy":
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
    "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
  "X-Content-Type-Options": "nosniff",
  "Referrer-Policy": "no-referrer",
};

interface CachedFile {
  mtimeMs: number;
  size: number;
  body: Uint8Array<ArrayBuffer>;
}

export function createPagesRoutes(distDir: string = defaultPagesDir) {
  const cache = new Map<string, CachedFile>();

  /** The file's bytes, re-read when a rebuild changed it; null when it does not exist. */
  async function load(path: string): Promise<Uint8Array<ArrayBuffer> | null> {
    let info: Awaited<ReturnType<typeof stat>>;
    try {
      info = await stat(path);
    } catch {
      return null;
    }
    if (!info.isFile()) return null;
    const hit = cache.get(path);
    if (hit && hit.mtimeMs === info.mtimeMs && hit.size === info.size) return hit.body;
    const body = new Uint8Array(await readFile(path));
    if (cache.size >= 200) cache.clear();
    cache.set(path, { mtimeMs: info.mtimeMs, size: info.size, body });
    return body;
  }

  async function bundleMissing(c: Context<AppEnv>) {
    const built = await load(join(distDir, "index.html"));
    const err = built
      ? new ApiError("not_found", `no route for ${c.req.method} ${new URL(c.req.url).pathname}`)
      : new ApiError(
          "unavailable",
          "the browser pages are not built: run `npm run build:pages` (npm start and npm test run it for you)",
          { retryAfter: 30 },
        );
    if (err.retryAfter !== undefined) c.header("Retry-After", String(err.retryAfter));
    return c.json(errorBody(err, c.get("requestId") ?? crypto.randomUUID()), err.status);
  }

  async function page(c: Context<AppEnv>, file: string) {
    const body = await load(join(distDir, file));
    if (!body) return bundleMissing(c);
    for (const [name, value] of Object.entries(PAGE_SECURITY_HEADERS)) c.header(name, value);
    c.header("Content-Type", contentTypes[".html"]);
    // Pages name their assets by content hash: always revalidate the page, cache the assets forever.
    c.header("Cache-Control", "no-cache");
    return c.body(body);
  }

  return new Hono<AppEnv>()
    .get("/", (c) => page(c, "index.html"))
    .get("/index.html", (c) => page(c, "index.html"))
    .get("/console", (c) => page(c, "console.html"))
    .get("/console.html", (c) => page(c, "console.html"))
    .get("/console/", (c) => c.redirect("/console", 301))
    .get("/lottery", (c) => page(c, "lottery.html"))
    .get("/lottery.html", (c) => page(c, "lottery.html"))
    .get("/lottery/", (c) => c.redirect("/lottery", 301))
    .get("/assets/:name", async (c) => {
      const name = c.req.param("name");
      const type = contentTypes[extname(name)];
      if (!ASSET_NAME.test(name) || !type) return bundleMissing(c);
      const body = await load(join(distDir, "assets", name));
      if (!body) return bundleMissing(c);
      c.header("Content-Type", type);
      c.header("X-Content-Type-Options", "nosniff");
      c.header("Cache-Control", "public, max-age=31536000, immutable");
      return c.body(body);
    });
}

export const pagesRoutes = createPagesRoutes();
