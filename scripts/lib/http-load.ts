/**
 * Closed-loop HTTP load for the benchmarks: `connections` keep-alive sockets, each sending its
 * next request when the previous answer arrives, for `seconds`. The same client measures every
 * target, so the figures can be compared as ratios.
 *
 * Two clients: wrk (Debian's `wrk`, C with LuaJIT; used when it is on the PATH, or BENCH_CLIENT=wrk)
 * and a small Node one (BENCH_CLIENT=node, on the load driver's keep-alive sockets,
 * load/driver/http.ts). A Node client on a 2-core box saturates before a bare Hono app does, so
 * its ceiling is its own, not the server's; wrk's is the server's.
 *
 * `serverPid`: the server process whose CPU time (user + system, from /proc) over the run is
 * divided by the requests answered: CPU microseconds per request, the figure that carries to
 * other machines. The client's own CPU per request is reported too (wrk: sampled from /proc
 * while it runs), since on a small machine it shares the cores with the server.
 *
 * `baseUrls`: several servers (gateways side by side); wrk gives each thread one of them in turn
 * (`threads` a multiple of their number spreads the connections evenly), the Node client each
 * connection.
 */
import { execFileSync, spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Connections } from "../../load/driver/http.js";
import { processCpuMicros, ticksPerSecond } from "../../load/driver/proc.js";

export { processCpuMicros };

export interface LoadResult {
  name: string;
  requests: number;
  seconds: number;
  perSecond: number;
  p50Ms: number;
  p99Ms: number;
  statuses: Record<string, number>;
  /** Which client measured it. */
  client?: "wrk" | "node";
  /** Response bytes (headers and body) per request, as read off the socket (wrk only). */
  bytesPerRequest?: number;
  /** Server CPU (user + system) over the run / requests, when the server's pid was given. */
  cpuMicrosPerRequest?: number;
  /** The load generator's own CPU over the run / requests (wrk's process; the Node client's is this process). */
  clientCpuMicrosPerRequest?: number;
}

export interface LoadRequest {
  method?: string;
  path: string;
  headers?: Record<string, string>;
  body?: string;
}

export interface LoadOptions {
  name: string;
  baseUrl: string;
  connections: number;
  seconds: number;
  /** The i-th request of the run. wrk cycles through the first `distinct` of them. */
  next: (i: number) => LoadRequest;
  /** How many distinct requests wrk is given (default 2,000); a join needs one per request. */
  distinct?: number;
  /**
   * wrk only: the Lua body of `request()` instead of cycling through `next`'s requests, for runs
   * where every request must differ (a join per fan). It may use `counter` (1, 2, ...) and `run`
   * (a random string per run).
   */
  wrkRequest?: string;
  /** The server's pid, for CPU microseconds per request. */
  serverPid?: number;
  client?: "wrk" | "node";
  /** Several servers instead of `baseUrl`'s alone (wrk: one per thread in turn; node: one per connection). */
  baseUrls?: string[];
  /** wrk threads (default 1). */
  threads?: number;
  /** wrk only: Lua run at the end of each thread's init() (the thread's `id`, 0.., is set). */
  wrkInit?: string;
  /** wrk only: Lua run in response(status, headers, body) after the status is counted. */
  wrkResponse?: string;
}

let wrkOnPath: boolean | undefined;
export function wrkAvailable(): boolean {
  if (wrkOnPath === undefined) {
    try {
      execFileSync("wrk", ["--version"], { stdio: "ignore" });
      wrkOnPath = true;
    } catch (err) {
      // `wrk --version` prints its banner and exits 1; only a missing binary is ENOENT.
      wrkOnPath = (err as NodeJS.ErrnoException).code !== "ENOENT";
    }
  }
  return wrkOnPath;
}

/** The client BENCH_CLIENT names, else wrk when it is installed, else the Node client. */
export function defaultClient(): "wrk" | "node" {
  const named = process.env.BENCH_CLIENT;
  if (named === "wrk" || named === "node") return named;
  return wrkAvailable() ? "wrk" : "node";
}

/** The whole machine's CPU time, busy and in all, in microseconds of CPU (Linux /proc/stat). */
export function machineCpuMicros(): { busy: number; total: number } | undefined {
  try {
    const line = readFileSync("/proc/stat", "utf8").split("\n")[0]!;
    const f = line.trim().split(/\s+/).slice(1).map(Number);
    const total = f.slice(0, 8).reduce((a, b) => a + b, 0);
    // idle and iowait are not busy.
    const busy = total - (f[3] ?? 0) - (f[4] ?? 0);
    const us = 1e6 / ticksPerSecond();
    return { busy: busy * us, total: total * us };
  } catch {
    return undefined;
  }
}

export async function runLoad(options: LoadOptions): Promise<LoadResult> {
  const client = options.client ?? defaultClient();
  const cpuBefore = options.serverPid ? processCpuMicros(options.serverPid) : undefined;
  const result = client === "wrk" ? await runWrk(options) : await runNode(options);
  const cpuAfter = options.serverPid ? processCpuMicros(options.serverPid) : undefined;
  if (cpuBefore !== undefined && cpuAfter !== undefined && result.requests > 0) {
    result.cpuMicrosPerRequest = (cpuAfter - cpuBefore) / result.requests;
  }
  return result;
}

const luaString = (s: string) => `"${s.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n")}"`;

/**
 * The Lua script wrk runs: the requests as a table it cycles through (or `wrkRequest`'s body), a
 * count per status, and at the end the figures as one JSON object written to `out`.
 */
function wrkScript(options: LoadOptions, out: string): string {
  const distinct = options.wrkRequest ? 0 : (options.distinct ?? 2_000);
  const host = new URL(options.baseUrl).host;
  const targets = (options.baseUrls ?? [options.baseUrl]).map((u) => {
    const url = new URL(u);
    return `{${luaString(url.hostname)},${luaString(url.port || "80")}}`;
  });
  const lines: string[] = [];
  for (let i = 0; i < distinct; i++) {
    const r = options.next(i);
    // wrk.format sends only the headers it is given: Host too (Node refuses HTTP/1.1 without it).
    const headers = { host, ...(r.body ? { "content-type": "application/json" } : {}), ...r.headers };
    const h = Object.entries(headers)
      .map(([k, v]) => `[${luaString(k)}]=${luaString(v)}`)
      .join(",");
    lines.push(
      `wrk.format(${luaString(r.method ?? "GET")},${luaString(r.path)},{${h}},${r.body ? luaString(r.body) : "nil"})`,
    );
  }
  return `local reqs = {\n${lines.join(",\n")}\n}
local n = #reqs
local threads = {}
local targets = {${targets.join(",")}}
function setup(thread)
  local t = targets[(#threads % #targets) + 1]
  thread.addr = wrk.lookup(t[1], t[2])[1]
  thread:set("id", #threads)
  table.insert(threads, thread)
end
function init(args) idx = n > 0 and math.random(n) - 1 or 0; statuses = {}; counter = 0; run = tostring(os.time()) .. tostring(math.random(1e9)); ${options.wrkInit ?? ""} end
${
  options.wrkRequest
    ? `function request() counter = counter + 1; ${options.wrkRequest} end`
    : "function request() idx = idx + 1; if idx > n then idx = 1 end; return reqs[idx] end"
}
function response(status, headers, body) statuses[status] = (statuses[status] or 0) + 1; ${options.wrkResponse ?? ""} end
function done(summary, latency, requests)
  local agg = {}
  for _, t in ipairs(threads) do
    local s = t:get("statuses")
    for k, v in pairs(s) do agg[k] = (agg[k] or 0) + v end
  end
  local parts = {}
  for k, v in pairs(agg) do table.insert(parts, string.format('"%d":%d', k, v)) end
  local f = io.open(${luaString(out)}, "w")
  f:write(string.format('{"requests":%d,"micros":%d,"bytes":%d,"p50":%f,"p99":%f,"socketErrors":%d,"statuses":{%s}}',
    summary.requests, summary.duration, summary.bytes, latency:percentile(50), latency:percentile(99),
    summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout,
    table.concat(parts, ",")))
  f:close()
end
`;
}

/**
 * wrk, one thread by default (the server has the other core), the requests cycled from a Lua
 * table. Its CPU is sampled every 50 ms while it runs (its /proc entry goes when it exits).
 */
async function runWrk(options: LoadOptions): Promise<LoadResult> {
  const dir = mkdtempSync(join(tmpdir(), "bench-wrk-"));
  const script = join(dir, "run.lua");
  const out = join(dir, "out.json");
  writeFileSync(script, wrkScript(options, out));
  let clientCpu: number | undefined;
  try {
    await new Promise<void>((resolve, reject) => {
      const child = spawn(
        "wrk",
        [
          `-t${options.threads ?? 1}`,
          `-c${options.connections}`,
          `-d${options.seconds}s`,
          "--timeout",
          "10s",
          "-s",
          script,
          options.baseUrl,
        ],
        { stdio: ["ignore", "ignore", "inherit"] },
      );
      const sampler = setInterval(() => {
        const cpu = child.pid ? processCpuMicros(child.pid) : undefined;
        if (cpu !== undefined) clientCpu = cpu;
      }, 50);
      child.once("error", (err) => {
        clearInterval(sampler);
        reject(err);
      });
      child.once("exit", (code) => {
        clearInterval(sampler);
        if (code === 0) resolve();
        else reject(new Error(`wrk exited with ${code}`));
      });
    });
    const r = JSON.parse(readFileSync(out, "utf8")) as {
      requests: number;
      micros: number;
      bytes: number;
      p50: number;
      p99: number;
      socketErrors: number;
      statuses: Record<string, number>;
    };
    const seconds = r.micros / 1e6;
    const statuses = { ...r.statuses, ...(r.socketErrors ? { "0": r.socketErrors } : {}) };
    return {
      name: options.name,
      requests: r.requests,
      seconds,
      perSecond: r.requests / seconds,
      p50Ms: r.p50 / 1000,
      p99Ms: r.p99 / 1000,
      statuses,
      client: "wrk",
      bytesPerRequest: r.requests ? r.bytes / r.requests : 0,
      ...(clientCpu !== undefined && r.requests ? { clientCpuMicrosPerRequest: clientCpu / r.requests } : {}),
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The Node client: the load driver's keep-alive sockets (load/driver/http.ts), bodies drained unread. */
async function runNode(options: LoadOptions): Promise<LoadResult> {
  const urls = options.baseUrls ?? [options.baseUrl];
  const pools = urls.map((u) => new Connections(u, Math.ceil(options.connections / urls.length)));
  const latencies: number[] = [];
  const statuses: Record<string, number> = {};
  let i = 0;
  const deadline = performance.now() + options.seconds * 1000;

  const start = performance.now();
  try {
    await Promise.all(
      Array.from({ length: options.connections }, async (_, c) => {
        const connections = pools[c % pools.length]!;
        while (performance.now() < deadline) {
          const { method = "GET", ...req } = options.next(i++);
          const t = performance.now();
          const { status } = await connections.send({ method, ...req }, false);
          latencies.push(performance.now() - t);
          statuses[status] = (statuses[status] ?? 0) + 1;
        }
      }),
    );
  } finally {
    for (const p of pools) p.close();
  }
  const seconds = (performance.now() - start) / 1000;
  latencies.sort((a, b) => a - b);
  const at = (q: number) => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))] ?? 0;
  return {
    name: options.name,
    requests: latencies.length,
    seconds,
    perSecond: latencies.length / seconds,
    p50Ms: at(0.5),
    p99Ms: at(0.99),
    statuses,
    client: "node",
  };
}
