/**
 * A redis-server of our own, for the embedded default (no REDIS_URL and nothing on 6379) and for
 * tests that need a Redis they may kill. Nothing is persisted: it is a cache and a queue here,
 * never the authority.
 */
import { setTimeout as sleep } from "node:timers/promises";
import { spawn, type ChildProcess } from "node:child_process";
import { createServer } from "node:net";
import { Redis } from "ioredis";

export interface SpawnedRedis {
  url: string;
  port: number;
  child: ChildProcess;
  close(): Promise<void>;
}

export async function freePort(host = "127.0.0.1"): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, host, () => {
      const address = server.address();
      const port = typeof address === "object" && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

/** True when a Redis answers PING at `url` within `timeoutMs`. */
export async function redisAnswers(url: string, timeoutMs = 1_000): Promise<boolean> {
  const client = new Redis(url, {
    lazyConnect: true,
    connectTimeout: timeoutMs,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
    enableOfflineQueue: false,
  });
  client.on("error", () => {});
  try {
    await client.connect();
    return (await client.ping()) === "PONG";
  } catch {
    return false;
  } finally {
    client.disconnect();
  }
}

export async function spawnRedis(
  options: { port?: number; bin?: string; extraArgs?: string[]; startTimeoutMs?: number } = {},
): Promise<SpawnedRedis> {
  const port = options.port || (await freePort());
  const args = [
    "--port",
    String(port),
    "--bind",
    "127.0.0.1",
    "--save",
    "",
    "--appendonly",
    "no",
    "--protected-mode",
    "no",
    ...(options.extraArgs ?? []),
  ];
  const child = spawn(options.bin ?? "redis-server", args, { stdio: ["ignore", "ignore", "pipe"] });
  const spawnError = new Promise<never>((_, reject) => {
    child.once("error", (err) =>
      reject(new Error(`cannot start redis-server (${err.message}); install it or set REDIS_URL`)),
    );
    child.once("exit", (code) => reject(new Error(`redis-server exited with code ${code} at start`)));
  });
  spawnError.catch(() => {});
  const url = `redis://127.0.0.1:${port}`;
  const deadline = Date.now() + (options.startTimeoutMs ?? 10_000);
  for (;;) {
    const ready = await Promise.race([redisAnswers(url, 500), spawnError]);
    if (ready) break;
    if (Date.now() > deadline) {
      child.kill("SIGKILL");
      throw new Error(`redis-server on port ${port} did not answer PING in time`);
    }
    await sleep(50);
  }
  return {
    url,
    port,
    child,
    close: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null || child.signalCode !== null) return resolve();
        child.once("exit", () => resolve());
        child.kill("SIGTERM");
        setTimeout(() => child.kill("SIGKILL"), 3_000).unref();
      }),
  };
}
