// Bundles each k6 scenario (load/k6/*.ts but lib.ts) to one plain JavaScript file in load/dist/
// (gitignored), for a k6 older than 0.57 (the first that runs TypeScript by default) and for
// copying a scenario to a load generator elsewhere: `k6 run load/dist/spike.js`. k6's own modules
// (`k6`, `k6/*`) stay imports, for k6 to resolve; everything else is inlined.
//   npm run build:k6 [-- --outdir DIR]
// Plain JavaScript so it runs with nothing but node and esbuild.
import { readdirSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import * as esbuild from "esbuild";

const root = dirname(fileURLToPath(import.meta.url));
const k6Dir = join(root, "k6");

/** The scenarios: every k6 file but the shared library. */
export const scenarios = () =>
  readdirSync(k6Dir)
    .filter((f) => f.endsWith(".ts") && f !== "lib.ts")
    .map((f) => f.slice(0, -".ts".length))
    .sort();

/** Builds every scenario into `outdir`; returns the files written. */
export async function buildK6({ outdir = join(root, "dist") } = {}) {
  const names = scenarios();
  await esbuild.build({
    entryPoints: names.map((n) => join(k6Dir, `${n}.ts`)),
    outdir,
    bundle: true,
    format: "esm",
    splitting: false,
    platform: "neutral",
    // k6's goja runtime before 0.52 understood ES2015 only (later ones more); esbuild lowers
    // spread, optional chaining and `??` to it.
    target: "es2015",
    external: ["k6", "k6/*"],
    logLevel: "warning",
  });
  return names.map((n) => join(outdir, `${n}.js`));
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const { values } = parseArgs({ options: { outdir: { type: "string" } } });
  const files = await buildK6(values.outdir ? { outdir: resolve(values.outdir) } : {});
  process.stdout.write(`${files.map((f) => `built ${f}`).join("\n")}\n`);
}
