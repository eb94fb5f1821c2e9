/**
 * `npm run build:k6` bundles each k6 scenario to one plain JavaScript file, for a k6 older than
 * 0.57 (which does not run TypeScript): no TypeScript left, the shared library inlined, and only
 * k6's own modules imported.
 */
import { execFile } from "node:child_process";
import { copyFileSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { afterAll, describe, expect, it } from "vitest";

const run = promisify(execFile);
const root = fileURLToPath(new URL("../../", import.meta.url));
const out = mkdtempSync(join(tmpdir(), "k6-build-"));
afterAll(() => rmSync(out, { recursive: true, force: true }));

describe("npm run build:k6", () => {
  it("writes one plain-JS bundle per scenario, importing nothing but k6's modules", async () => {
    const { stdout } = await run(process.execPath, [join(root, "load/build-k6.mjs"), "--outdir", out], { cwd: root });
    const scenarios = readdirSync(join(root, "load/k6"))
      .filter((f) => f.endsWith(".ts") && f !== "lib.ts")
      .map((f) => f.replace(/\.ts$/, ".js"))
      .sort();
    expect(scenarios).toEqual(["abandon.js", "best.js", "bots.js", "hot-seat.js", "line.js", "soak.js", "spike.js"]);
    expect(readdirSync(out).sort()).toEqual(scenarios);
    expect(stdout.trim().split("\n")).toHaveLength(scenarios.length);

    for (const file of scenarios) {
      const js = readFileSync(join(out, file), "utf8");
      const imports = [...js.matchAll(/^\s*import\b[^"']*["']([^"']+)["']/gm)].map((m) => m[1]);
      expect(imports.length, file).toBeGreaterThan(0);
      expect(
        imports.filter((m) => m !== "k6" && !m?.startsWith("k6/")),
        file,
      ).toEqual([]);
      expect(js, file).not.toMatch(/\brequire\(/);
      // k6 finds the scenario's exports in the bundle.
      expect(js, file).toMatch(/export\s*\{[^}]*\boptions\b[^}]*\}/);
      expect(js, file).toMatch(/\bhandleSummary\b/);
      // Node's own parser (no type stripping in Node 20) takes it as a JavaScript module: any
      // TypeScript left (a type annotation, `as`, an interface) is a syntax error here.
      const copy = join(out, `${file}.check.mjs`);
      copyFileSync(join(out, file), copy);
      try {
        await expect(run(process.execPath, ["--check", copy]), file).resolves.toBeDefined();
      } finally {
        rmSync(copy);
      }
    }
  }, 60_000);

  it("builds into load/dist/ by default, which git ignores", async () => {
    const { stdout } = await run("git", ["check-ignore", "load/dist/spike.js"], { cwd: root });
    expect(stdout.trim()).toBe("load/dist/spike.js");
    const pkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as { scripts: Record<string, string> };
    expect(pkg.scripts["build:k6"]).toBe("node load/build-k6.mjs");
  });
});
