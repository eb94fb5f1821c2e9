/**
 * The local DynamoDB: dynalite, extended by patches/dynalite+4.0.0.patch with transactions,
 * ReturnValuesOnConditionCheckFailure, atomic item+index writes, exact ConsumedCapacity and an
 * AWS mode (TransactionConflict, per-partition throughput, a per-partition report): see
 * docs/local-dynamodb.md.
 *
 * `startLocalDynamoDB` runs it in this process (the `npm run dynamodb` CLI does that).
 * `spawnLocalDynamoDB` runs it as a child process, which the gateway (embedded default) and the
 * test harness use: the store gets its own core and event loop, and a test can kill it.
 */
import { stopChild } from "./child.js";
import { spawn, type ChildProcess } from "node:child_process";
import { mkdirSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { dirname, join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import dynalite from "dynalite";
import type { LocalDynamoMode } from "../config.js";

export interface LocalDynamoDBOptions {
  /** 0 picks a free port. */
  port: number;
  host?: string;
  /** LevelDB directory; in memory when absent. */
  path?: string;
  /**
   * `aws`: transactions conflict and partitions throttle as in DynamoDB. Default `default`;
   * spawnLocalDynamoDB leaves it (and the three below) to the child's LOCAL_DYNAMODB_* environment
   * when absent.
   */
  mode?: LocalDynamoMode;
  /** A TransactWriteItems stays in flight at least this long (models DynamoDB's two phases). */
  transactionMs?: number;
  /** aws mode: write units/s per partition (1,000). */
  partitionWcu?: number;
  /** aws mode: read units/s per partition (3,000). */
  partitionRcu?: number;
}

export interface LocalDynamoDB {
  endpoint: string;
  port: number;
  close(): Promise<void>;
}

export async function startLocalDynamoDB(options: LocalDynamoDBOptions): Promise<LocalDynamoDB> {
  if (options.path) mkdirSync(options.path, { recursive: true });
  const server = dynalite({
    ...(options.path ? { path: options.path } : {}),
    createTableMs: 0,
    deleteTableMs: 0,
    updateTableMs: 0,
    mode: options.mode ?? "default",
    ...(options.transactionMs !== undefined ? { transactionMs: options.transactionMs } : {}),
    ...(options.partitionWcu !== undefined ? { partitionWcu: options.partitionWcu } : {}),
    ...(options.partitionRcu !== undefined ? { partitionRcu: options.partitionRcu } : {}),
  });
  const host = options.host ?? "127.0.0.1";
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port, host, () => {
      server.off("error", reject);
      resolve();
    });
  });
  // The AWS SDK keeps sockets alive; dynalite's default timeouts would otherwise cut them.
  server.keepAliveTimeout = 65_000;
  const { port } = server.address() as AddressInfo;
  return {
    endpoint: `http://${host}:${port}`,
    port,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections?.();
        server.close(() => resolve());
      }),
  };
}

export interface SpawnedDynamoDB extends LocalDynamoDB {
  child: ChildProcess;
}

// Next to this module: dynamodb-cli.ts under tsx (src/), dynamodb-cli.js when compiled (dist/).
const here = fileURLToPath(import.meta.url);
const compiled = here.endsWith(".js");
const cliPath = join(dirname(here), compiled ? "dynamodb-cli.js" : "dynamodb-cli.ts");

/**
 * Starts the local DynamoDB in a child process and resolves once it listens. The child prints
 * one JSON line with `"listening":<port>` on stdout when it is ready.
 */
export async function spawnLocalDynamoDB(
  options: LocalDynamoDBOptions & { startTimeoutMs?: number },
): Promise<SpawnedDynamoDB> {
  const host = options.host ?? "127.0.0.1";
  const args = [
    ...(compiled ? [] : ["--import", "tsx"]),
    cliPath,
    "--port",
    String(options.port),
    "--host",
    host,
    "--exit-with-parent",
    "yes",
  ];
  if (options.path) args.push("--path", options.path);
  // Absent options are left to the environment the child inherits (LOCAL_DYNAMODB_MODE and the
  // like), so whatever starts the local DynamoDB honours them.
  if (options.mode) args.push("--mode", options.mode);
  if (options.transactionMs !== undefined) args.push("--transaction-ms", String(options.transactionMs));
  if (options.partitionWcu !== undefined) args.push("--partition-wcu", String(options.partitionWcu));
  if (options.partitionRcu !== undefined) args.push("--partition-rcu", String(options.partitionRcu));
  // stdin stays a pipe from us: when this process dies, even by SIGKILL, the pipe closes and the
  // child exits instead of living on as an orphan holding the port and the LevelDB lock.
  // No `env`: the child inherits ours.
  const child = spawn(process.execPath, args, { stdio: ["pipe", "pipe", "inherit"] });

  const port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`local DynamoDB did not start within ${options.startTimeoutMs ?? 20_000} ms`));
    }, options.startTimeoutMs ?? 20_000);
    const lines = createInterface({ input: child.stdout! });
    lines.on("line", (line) => {
      try {
        const parsed = JSON.parse(line) as { listening?: number };
        if (typeof parsed.listening === "number") {
          clearTimeout(timer);
          resolve(parsed.listening);
        }
      } catch {
        // a non-JSON line is not the readiness line
      }
    });
    child.once("exit", (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`local DynamoDB exited before it listened (code ${code}, signal ${signal})`));
    });
  });
  // Keep draining stdout so the child never blocks on a full pipe.
  child.stdout?.resume();

  return {
    endpoint: `http://${host}:${port}`,
    port,
    child,
    close: () => stopChild(child, 5_000),
  };
}
