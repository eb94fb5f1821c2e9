/**
 * Runs the k6 scripts in Node: esbuild bundles them with k6's modules (`k6`, `k6/*`) replaced by
 * small fakes that record every request and sleep and answer from a script of the test's own.
 * Nothing here is k6; it checks what the scripts ask k6 to do (tags, headers, waits, options).
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import * as esbuild from "esbuild";

export interface Recorded {
  method: string;
  url: string;
  body: unknown;
  params: { headers?: Record<string, string>; tags?: Record<string, string> } | undefined;
}

export interface FakeResponse {
  status: number;
  body?: unknown;
  /** k6's error code of a request without an answer (1050: k6 gave up on it); 0 by default. */
  error_code?: number;
}

export interface K6Fake {
  requests: Recorded[];
  sleeps: number[];
  metrics: Record<string, number[]>;
  /** Answers a request; default 200 `{}`. */
  answer: (method: string, url: string, body: unknown) => FakeResponse;
}

// biome-ignore lint/suspicious/noExplicitAny: the bundle's exports are the k6 scripts' own, typed against k6, not Node.
export type K6Module = Record<string, any>;
export type K6Scripts = { fake: K6Fake } & Record<
  "lib" | "spike" | "hotseat" | "abandon" | "bots" | "soak" | "best" | "line",
  K6Module
>;

const root = fileURLToPath(new URL("../../../", import.meta.url));

const fakes: Record<string, string> = {
  k6: `export const check = (r, checks) => Object.values(checks).every((f) => f(r));
       export const sleep = (s) => { globalThis.__k6.sleeps.push(s); };`,
  "k6/execution": `export default { test: { abort(m) { throw new Error("abort: " + m); } },
       vu: { idInTest: 1 }, scenario: { iterationInTest: 0 } };`,
  "k6/http": `const call = (method) => (url, body, params) => {
         const f = globalThis.__k6;
         if (method === "GET") { params = body; body = null; }
         f.requests.push({ method, url, body, params });
         const a = f.answer(method, url, body) ?? { status: 200, body: {} };
         const text = a.body === undefined ? "" : JSON.stringify(a.body);
         return { status: a.status, error_code: a.error_code ?? 0, body: text, json() { return JSON.parse(text); } };
       };
       export default { get: call("GET"), post: call("POST"), put: call("PUT"), patch: call("PATCH"), del: call("DELETE"),
         expectedStatuses: (...s) => ({ expected: s }) };`,
  "k6/metrics": `class M { constructor(name) { this.name = name; }
         add(v) { (globalThis.__k6.metrics[this.name] ??= []).push(Number(v)); } }
       export class Counter extends M {} export class Rate extends M {} export class Trend extends M {}`,
  "k6/encoding": `export default { b64encode: (s, enc) => Buffer.from(s).toString(enc === "rawurl" ? "base64url" : "base64") };`,
  "k6/crypto": `import { createHash } from "node:crypto";
       export default { sha256: (s, enc) => createHash("sha256").update(s).digest(enc) };`,
};

/**
 * Bundles lib.ts and every scenario with the fakes and imports them, with `env` as k6's __ENV.
 * Each call is a fresh copy (module-level options are read from __ENV at import).
 */
export async function loadK6Scripts(env: Record<string, string> = {}): Promise<K6Scripts> {
  const fake: K6Fake = { requests: [], sleeps: [], metrics: {}, answer: () => ({ status: 200, body: {} }) };
  const g = globalThis as unknown as { __k6: K6Fake; __ENV: Record<string, string> };
  g.__k6 = fake;
  g.__ENV = env;
  const k6 = join(root, "load/k6");
  const result = await esbuild.build({
    stdin: {
      contents: ["lib", "spike", "hot-seat", "abandon", "bots", "soak", "best", "line"]
        .map((n) => `export * as ${n.replace("-", "")} from ${JSON.stringify(join(k6, `${n}.ts`))};`)
        .join("\n"),
      resolveDir: k6,
      loader: "ts",
    },
    bundle: true,
    format: "esm",
    platform: "node",
    write: false,
    logLevel: "silent",
    plugins: [
      {
        name: "k6-fakes",
        setup(build) {
          build.onResolve({ filter: /^k6(\/.*)?$/ }, (a) => ({ path: a.path, namespace: "k6-fake" }));
          build.onLoad({ filter: /.*/, namespace: "k6-fake" }, (a) => {
            const contents = fakes[a.path];
            if (contents === undefined) throw new Error(`no fake for ${a.path}`);
            return { contents, loader: "js" };
          });
        },
      },
    ],
  });
  const dir = mkdtempSync(join(tmpdir(), "k6-fake-"));
  try {
    const file = join(dir, "scripts.mjs");
    writeFileSync(file, result.outputFiles[0]!.text);
    const mod = (await import(pathToFileURL(file).href)) as Omit<K6Scripts, "fake">;
    return { fake, ...mod };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
