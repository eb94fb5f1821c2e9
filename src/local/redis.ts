/**
 * A redis-server of our own, for the embedded default (no REDIS_URL and nothing on 6379) and for
 * tests that need a Redis they may kill. Nothing is persisted: it is a cache and a queue here,
 * never the authority.
 */
import { stopChild } from "./child.js";
import { setTimeout as sleep } from "node:timers/promises";
import { spawn, type ChildProcess } from "node:child_process";
import { createServer } from "node:net";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
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
    close: () => stopChild(child, 3_000),
  };
}

/** A local Redis Cluster: its masters (slots split evenly) and, when asked, one replica each. */
export interface SpawnedRedisCluster {
  masters: SpawnedRedis[];
  /** `replicas[i]` replicates `masters[i]` (at the start: after a failover it is the master). */
  replicas: SpawnedRedis[];
  /** Every node's `host:port`, as REDIS_CLUSTER_NODES takes them. */
  nodes: { host: string; port: number }[];
  /** REDIS_CLUSTER_NODES for these nodes. */
  nodeList: string;
  close(): Promise<void>;
}

function portIsFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = createServer();
    s.once("error", () => resolve(false));
    s.listen(port, "127.0.0.1", () => s.close(() => resolve(true)));
  });
}

/** A free port whose cluster bus port (port + 10000) is free too. */
async function clusterPort(taken: Set<number>): Promise<number> {
  for (;;) {
    const port = await freePort();
    if (port <= 55_000 && !taken.has(port) && (await portIsFree(port + 10_000))) {
      taken.add(port);
      return port;
    }
  }
}

async function pollUntil(what: string, timeoutMs: number, probe: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await probe().catch(() => false))) {
    if (Date.now() > deadline) throw new Error(`redis cluster: ${what} not reached in ${timeoutMs} ms`);
    await sleep(100);
  }
}

/**
 * Starts `masters` redis-servers in cluster mode (and `replicasPerMaster` replicas of each, so a
 * killed master fails over), splits the 16,384 slots evenly between the masters and waits until
 * every node says `cluster_state:ok`. Built with CLUSTER ADDSLOTSRANGE / MEET / REPLICATE rather
 * than `redis-cli --cluster create`, so it needs nothing but redis-server (7.0 or later).
 *
 * `nodeTimeoutMs` (cluster-node-timeout) is how long a silent master takes to be failed over;
 * `cluster-require-full-coverage no` keeps the other masters serving meanwhile, as a production
 * cluster for this gateway should (one event's outage is not every event's).
 */
export async function spawnRedisCluster(
  options: { masters?: number; replicasPerMaster?: 0 | 1; nodeTimeoutMs?: number; dir?: string } = {},
): Promise<SpawnedRedisCluster> {
  const masterCount = options.masters ?? 3;
  const replicaCount = options.replicasPerMaster ?? 0;
  const dir = options.dir ?? (await mkdtemp(join(tmpdir(), "redis-cluster-")));
  const taken = new Set<number>();
  const started: SpawnedRedis[] = [];
  const close = async () => {
    await Promise.all(started.map((n) => n.close()));
    if (!options.dir) await rm(dir, { recursive: true, force: true });
  };
  const admin = (port: number) => {
    const client = new Redis({ host: "127.0.0.1", port, maxRetriesPerRequest: 1, lazyConnect: true });
    client.on("error", () => {});
    return client;
  };
  try {
    const spawnNode = async () => {
      const port = await clusterPort(taken);
      const node = await spawnRedis({
        port,
        extraArgs: [
          "--cluster-enabled",
          "yes",
          "--cluster-config-file",
          join(dir, `nodes-${port}.conf`),
          "--cluster-node-timeout",
          String(options.nodeTimeoutMs ?? 5_000),
          "--cluster-require-full-coverage",
          "no",
          // A replica takes over however long it was cut off (it is a cache and a queue here).
          "--cluster-replica-validity-factor",
          "0",
          // A node learns its own address from the peers it meets; a lone master (a 1-master
          // cluster) never does and answers CLUSTER SLOTS with an empty host, which no client
          // can connect to.
          "--cluster-announce-ip",
          "127.0.0.1",
          "--dir",
          dir,
        ],
      });
      started.push(node);
      return node;
    };
    const masters: SpawnedRedis[] = [];
    for (let i = 0; i < masterCount; i++) masters.push(await spawnNode());
    const replicas: SpawnedRedis[] = [];
    for (let i = 0; i < masterCount * replicaCount; i++) replicas.push(await spawnNode());

    const clients = started.map((n) => admin(n.port));
    try {
      const per = Math.floor(16_384 / masterCount);
      await Promise.all(
        masters.map((_, i) => {
          const first = i * per;
          const last = i === masterCount - 1 ? 16_383 : first + per - 1;
          return clients[i]!.call("CLUSTER", "ADDSLOTSRANGE", String(first), String(last));
        }),
      );
      const seedPort = masters[0]!.port;
      await Promise.all(clients.slice(1).map((c) => c.call("CLUSTER", "MEET", "127.0.0.1", String(seedPort))));
      await pollUntil("every node knows every other", 20_000, async () => {
        for (const c of clients) {
          const nodes = String(await c.call("CLUSTER", "NODES"))
            .trim()
            .split("\n");
          if (nodes.length !== started.length || nodes.some((l) => l.includes("handshake"))) return false;
        }
        return true;
      });
      const masterIds = await Promise.all(masters.map((_, i) => clients[i]!.call("CLUSTER", "MYID")));
      await Promise.all(
        replicas.map((_, i) => clients[masterCount + i]!.call("CLUSTER", "REPLICATE", String(masterIds[i]))),
      );
      // With cluster-require-full-coverage off, a node says cluster_state:ok before gossip has told
      // it every master's slots: a client that loads its slot map from it then misses a master.
      await pollUntil("cluster_state:ok and every slot known on every node", 30_000, async () => {
        for (const c of clients) {
          const info = String(await c.call("CLUSTER", "INFO"));
          if (!info.includes("cluster_state:ok") || !info.includes("cluster_slots_ok:16384")) return false;
        }
        return true;
      });
      // A replica that has not synced yet could not take over: wait for every link.
      await pollUntil("every replica in sync", 30_000, async () => {
        for (const c of clients.slice(masterCount)) {
          if (!String(await c.info("replication")).includes("master_link_status:up")) return false;
        }
        return true;
      });
    } finally {
      for (const c of clients) c.disconnect();
    }
    const nodes = started.map((n) => ({ host: "127.0.0.1", port: n.port }));
    return {
      masters,
      replicas,
      nodes,
      nodeList: nodes.map((n) => `${n.host}:${n.port}`).join(","),
      close,
    };
  } catch (err) {
    await close();
    throw err;
  }
}
