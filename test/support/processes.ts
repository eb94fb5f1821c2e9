/**
 * Starts the gateway (src/main.ts) as a real child process, the way `npm start` does, and waits
 * for its "gateway listening" log line.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { createInterface } from "node:readline";

export interface GatewayProcess {
  url: string;
  child: ChildProcess;
  logs: string[];
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

export async function startGatewayProcess(env: Record<string, string>, timeoutMs = 30_000): Promise<GatewayProcess> {
  const child = spawn(process.execPath, ["--import", "tsx", "src/main.ts"], {
    env: { ...process.env, PORT: "0", HOST: "127.0.0.1", LOG_LEVEL: "info", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const logs: string[] = [];
  child.stderr?.on("data", (d: Buffer) => logs.push(d.toString()));
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`gateway did not start in ${timeoutMs} ms:\n${logs.join("\n")}`));
    }, timeoutMs);
    createInterface({ input: child.stdout! }).on("line", (line) => {
      logs.push(line);
      try {
        const entry = JSON.parse(line) as { msg?: string; url?: string };
        if (entry.msg === "gateway listening" && entry.url) {
          clearTimeout(timer);
          resolve(entry.url.replace("localhost", "127.0.0.1"));
        }
      } catch {
        // not a log line
      }
    });
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`gateway exited with ${code} before listening:\n${logs.join("\n")}`));
    });
  });
  return {
    url,
    child,
    logs,
    stop: (signal = "SIGTERM") =>
      new Promise((resolve) => {
        if (child.exitCode !== null) return resolve(child.exitCode);
        child.once("exit", (code) => resolve(code));
        child.kill(signal);
      }),
  };
}
