/**
 * src/main.ts as a real child process, the way `npm start`, `npm run gateway` and `npm run worker`
 * run it. One place for spawning, readiness, logs and stopping, used by the foundation tests, the
 * worker crash tests (test/support/worker-process.ts) and the chaos cluster (test/chaos/support).
 *
 * Ready means: the "gateway listening" log line (with its URL) for a process that serves HTTP, or
 * "workers running" for `--role=worker`.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { createInterface } from "node:readline";

export type ProcessRole = "all" | "gateway" | "worker";

export interface MainProcess {
  /** The HTTP base URL (127.0.0.1); undefined for a worker. */
  url: string | undefined;
  child: ChildProcess;
  pid: number;
  /** stdout lines and stderr chunks, the most recent `MAX_LOG_LINES` of them. */
  logs: string[];
  /** Resolves with the exit code (null when killed by a signal). */
  exited: Promise<number | null>;
  /** True until the process has exited. */
  alive(): boolean;
  /** Sends `signal` (SIGTERM by default) unless it already exited; resolves with the exit code. */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

export interface GatewayProcess extends MainProcess {
  url: string;
}

export interface MainProcessOptions {
  /** `--role=` on the command line; none: the ROLE variable decides (default all). */
  role?: ProcessRole;
  /** Added to this process's environment (PORT=0, HOST=127.0.0.1 and LOG_LEVEL=info unless given). */
  env: Record<string, string>;
  timeoutMs?: number;
  /** Options for node before the script (`--inspect=127.0.0.1:0`, say). */
  nodeArgs?: string[];
  /** What node runs; default `--import tsx src/main.ts` (the compiled build: `dist/main.js`). */
  entry?: string[];
}

const MAX_LOG_LINES = 5_000;

export async function startMainProcess(options: MainProcessOptions): Promise<MainProcess> {
  const timeoutMs = options.timeoutMs ?? 30_000;
  const entry = options.entry ?? ["--import", "tsx", "src/main.ts"];
  const args = [...(options.nodeArgs ?? []), ...entry, ...(options.role ? [`--role=${options.role}`] : [])];
  const child = spawn(process.execPath, args, {
    env: { ...process.env, PORT: "0", HOST: "127.0.0.1", LOG_LEVEL: "info", ...options.env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const logs: string[] = [];
  const keep = (line: string) => {
    logs.push(line);
    if (logs.length > MAX_LOG_LINES) logs.splice(0, logs.length - MAX_LOG_LINES);
  };
  child.stderr?.on("data", (d: Buffer) => keep(d.toString()));
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  const servesHttp = options.role !== "worker";
  const name = options.role === "worker" ? "worker" : "gateway";

  const url = await new Promise<string | undefined>((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`${name} did not start in ${timeoutMs} ms:\n${logs.join("\n")}`));
    }, timeoutMs);
    createInterface({ input: child.stdout! }).on("line", (line) => {
      keep(line);
      try {
        const entry = JSON.parse(line) as { msg?: string; url?: string };
        if (servesHttp && entry.msg === "gateway listening" && entry.url) {
          clearTimeout(timer);
          resolve(entry.url.replace("localhost", "127.0.0.1"));
        } else if (!servesHttp && entry.msg === "workers running") {
          clearTimeout(timer);
          resolve(undefined);
        }
      } catch {
        // not a log line
      }
    });
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`${name} exited with ${code} before it was ready:\n${logs.join("\n")}`));
    });
  });
  const alive = () => child.exitCode === null && child.signalCode === null;
  return {
    url,
    child,
    pid: child.pid!,
    logs,
    exited,
    alive,
    stop: (signal = "SIGTERM") => {
      if (alive()) child.kill(signal);
      return exited;
    },
  };
}

/** The gateway (src/main.ts, ROLE from `env`, default all) as a child; ready once it listens. */
export async function startGatewayProcess(
  env: Record<string, string>,
  timeoutMs = 30_000,
  nodeArgs: string[] = [],
): Promise<GatewayProcess> {
  const started = await startMainProcess({ env, timeoutMs, nodeArgs });
  if (started.url === undefined) throw new Error("the gateway process gave no URL");
  return { ...started, url: started.url };
}

/** What `runToExit` collected: the exit code, each stream, and both in the order they arrived. */
export interface RunOutput {
  code: number | null;
  stdout: string;
  stderr: string;
  out: string;
}

/**
 * A TypeScript entry point (`scripts/audit.ts`, `src/main.ts`) run through tsx as a child process
 * with exactly `env`, to its exit: for the tests of commands that print and exit.
 */
export function runToExit(file: string, args: readonly string[], env: NodeJS.ProcessEnv): Promise<RunOutput> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ["--import", "tsx", file, ...args], {
      env,
      stdio: ["ignore", "pipe", "pipe"],
    });
    const got = { stdout: "", stderr: "", out: "" };
    child.stdout.on("data", (d: Buffer) => {
      got.stdout += d.toString();
      got.out += d.toString();
    });
    child.stderr.on("data", (d: Buffer) => {
      got.stderr += d.toString();
      got.out += d.toString();
    });
    child.once("error", reject);
    child.once("close", (code) => resolve({ code, ...got }));
  });
}
