/**
 * How the gateway serves the built pages (src/http/routes/pages.ts), in-process: pages, assets
 * and their content types, caching, no way out of the bundle, and a clear 503 when it is not built.
 */
import { readdirSync } from "node:fs";
import { join } from "node:path";
import { Hono } from "hono";
import { beforeAll, describe, expect, it } from "vitest";
import { createPagesRoutes, defaultPagesDir } from "../../src/http/routes/pages.js";
import { ensurePagesBuilt } from "./browser.js";

let app: Hono;
let assets: string[];

beforeAll(() => {
  ensurePagesBuilt();
  app = new Hono().route("/", createPagesRoutes());
  assets = readdirSync(join(defaultPagesDir, "assets"));
});

const asset = (prefix: string, ext: string) => {
  const name = assets.find((a) => a.startsWith(prefix) && a.endsWith(ext));
  if (!name) throw new Error(`no ${prefix}*${ext} in the bundle: ${assets.join(", ")}`);
  return name;
};

describe("serving the browser pages", () => {
  it("serves the fan page at / and the console at /console, as HTML that only talks to this origin", async () => {
    const fan = await app.request("/");
    expect(fan.status).toBe(200);
    expect(fan.headers.get("content-type")).toBe("text/html; charset=utf-8");
    expect(fan.headers.get("cache-control")).toBe("no-cache");
    expect(fan.headers.get("content-security-policy")).toContain("connect-src 'self'");
    const html = await fan.text();
    expect(html).toContain(`<script type="module" src="assets/${asset("fan-", ".js")}"></script>`);
    expect(html).toContain(`href="assets/${asset("styles-", ".css")}"`);
    // Nothing is fetched from anywhere else at run time.
    expect(html).not.toMatch(/(src|href)="(https?:)?\/\//);

    const console = await app.request("/console");
    expect(console.status).toBe(200);
    expect(await console.text()).toContain(`src="assets/${asset("console-", ".js")}"`);
    expect((await app.request("/console/")).headers.get("location")).toBe("/console");
  });

  it("serves the assets with their content types, cached for good (their names carry a content hash)", async () => {
    for (const [name, type] of [
      [asset("fan-", ".js"), "text/javascript; charset=utf-8"],
      [asset("console-", ".js"), "text/javascript; charset=utf-8"],
      [asset("styles-", ".css"), "text/css; charset=utf-8"],
      [asset("fan-", ".js.map"), "application/json; charset=utf-8"],
    ] as const) {
      const res = await app.request(`/assets/${name}`);
      expect(res.status, name).toBe(200);
      expect(res.headers.get("content-type")).toBe(type);
      expect(res.headers.get("cache-control")).toBe("public, max-age=31536000, immutable");
      expect((await res.arrayBuffer()).byteLength).toBeGreaterThan(100);
    }
    const bundle = await (await app.request(`/assets/${asset("fan-", ".js")}`)).text();
    expect(bundle).not.toMatch(/https?:\/\/(?!www\.w3\.org)/);
  });

  it("never serves a file outside the bundle's assets", async () => {
    for (const path of [
      "/assets/..%2Fbuild.mjs",
      "/assets/%2e%2e%2f%2e%2e%2fpackage.json",
      "/assets/..%5C..%5Cpackage.json",
      "/assets/.hidden.js",
      "/assets/nope.js",
      "/assets/fan.exe",
      "/assets/%00.js",
    ]) {
      const res = await app.request(path);
      expect(res.status, path).toBe(404);
      expect(res.headers.get("content-type")).toContain("application/json");
      expect(((await res.json()) as { error: { code: string } }).error.code).toBe("not_found");
    }
  });

  it("answers 503 with how to build when the bundle is missing", async () => {
    const unbuilt = new Hono().route("/", createPagesRoutes(join(defaultPagesDir, "..", "no-such-dist")));
    for (const path of ["/", "/console", "/assets/fan-ABC.js"]) {
      const res = await unbuilt.request(path);
      expect(res.status, path).toBe(503);
      expect(res.headers.get("retry-after")).toBe("30");
      const body = (await res.json()) as { error: { code: string; message: string; requestId: string } };
      expect(body.error.code).toBe("unavailable");
      expect(body.error.message).toContain("npm run build:pages");
      expect(body.error.requestId).toBeTruthy();
    }
  });
});
