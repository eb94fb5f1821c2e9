// Builds the browser pages into waiting-room/dist/: index.html (the fan's waiting room, seat map
// and checkout), console.html (the operator console), lottery.html (anyone checks the draw) and
// content-hashed assets under assets/.
// Run by `npm run build:pages`, itself run before `npm start` and `npm test`.
//
// The pages talk to the API at their own origin unless told otherwise: `?api=<url>` at run time,
// or ONSALE_API_BASE at build time (baked in as a constant, for a CDN deployment).
// Plain JavaScript so it runs with nothing but node and esbuild.
import { mkdir, readFile, rename, rm, writeFile } from "node:fs/promises";
import { basename, dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import * as esbuild from "esbuild";

const root = dirname(fileURLToPath(import.meta.url));
const src = join(root, "src");
const dist = join(root, "dist");
// Built next to dist and swapped in with renames, so a running gateway never serves half a build.
const staging = join(root, `.dist-${process.pid}`);
const retired = join(root, `.dist-old-${process.pid}`);

const pages = [
  { html: "index.html", entry: "fan.ts" },
  { html: "console.html", entry: "console.ts" },
  { html: "lottery.html", entry: "lottery.ts" },
];

async function build() {
  const started = Date.now();
  await rm(staging, { recursive: true, force: true });
  await mkdir(join(staging, "assets"), { recursive: true });

  // The workers first: the pages name their hashed assets (__POW_WORKER__, __LOTTERY_WORKER__).
  const workerBuild = await esbuild.build({
    entryPoints: [join(src, "pow-worker.ts"), join(src, "lottery-worker.ts")],
    outdir: join(staging, "assets"),
    entryNames: "[name]-[hash]",
    bundle: true,
    format: "esm",
    minify: true,
    target: ["chrome100", "firefox100", "safari15", "edge100"],
    metafile: true,
    logLevel: "warning",
  });
  const workerOf = new Map();
  for (const [out, meta] of Object.entries(workerBuild.metafile.outputs)) {
    if (meta.entryPoint) workerOf.set(basename(meta.entryPoint), basename(out));
  }
  const powWorker = workerOf.get("pow-worker.ts");
  if (!powWorker) throw new Error("esbuild produced no proof-of-work worker");
  const lotteryWorker = workerOf.get("lottery-worker.ts");
  if (!lotteryWorker) throw new Error("esbuild produced no lottery worker");

  const result = await esbuild.build({
    entryPoints: [...pages.map((p) => join(src, p.entry)), join(src, "styles.css")],
    outdir: join(staging, "assets"),
    entryNames: "[name]-[hash]",
    bundle: true,
    format: "esm",
    splitting: false,
    minify: true,
    sourcemap: "linked",
    target: ["chrome100", "firefox100", "safari15", "edge100"],
    define: {
      __API_BASE__: JSON.stringify(process.env.ONSALE_API_BASE ?? ""),
      __POW_WORKER__: JSON.stringify(powWorker),
      __LOTTERY_WORKER__: JSON.stringify(lotteryWorker),
    },
    metafile: true,
    logLevel: "warning",
  });

  // entry file -> the hashed asset name it became
  const assetOf = new Map();
  for (const [out, meta] of Object.entries(result.metafile.outputs)) {
    if (meta.entryPoint) assetOf.set(basename(meta.entryPoint), basename(out));
  }
  const css = assetOf.get("styles.css");
  if (!css) throw new Error("esbuild produced no stylesheet");

  for (const page of pages) {
    const script = assetOf.get(page.entry);
    if (!script) throw new Error(`esbuild produced nothing for ${page.entry}`);
    const template = await readFile(join(src, page.html), "utf8");
    // Relative URLs, so the same files work from the gateway and from any CDN path.
    const html = template.replaceAll("%STYLES%", `assets/${css}`).replaceAll("%SCRIPT%", `assets/${script}`);
    const left = html.match(/%[A-Z_]+%/);
    if (left) throw new Error(`${page.html}: unknown placeholder ${left[0]}`);
    await writeFile(join(staging, page.html), html);
  }

  await rm(retired, { recursive: true, force: true });
  await rename(dist, retired).catch((err) => {
    if (err.code !== "ENOENT") throw err;
  });
  try {
    await rename(staging, dist);
  } catch (err) {
    // Another build swapped its own output in at the same moment: same sources, same files.
    if (err.code !== "ENOTEMPTY" && err.code !== "EEXIST") throw err;
    await rm(staging, { recursive: true, force: true });
  }
  await rm(retired, { recursive: true, force: true });
  process.stdout.write(`pages built into ${relative(process.cwd(), dist) || "."} in ${Date.now() - started} ms\n`);
}

build().catch(async (err) => {
  await rm(staging, { recursive: true, force: true });
  process.stderr.write(`page build failed: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
