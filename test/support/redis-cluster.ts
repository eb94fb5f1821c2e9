/**
 * A local Redis Cluster for tests (src/local/redis.ts starts it: the load driver shares it) and
 * what a test asks of it: which master serves a key, ids whose keys land on distinct masters, and
 * a master killed and failed over.
 */
import { setTimeout as sleep } from "node:timers/promises";
import { Cluster, Redis } from "ioredis";
import { type SpawnedRedis, type SpawnedRedisCluster, spawnRedisCluster } from "../../src/local/redis.js";

export { spawnRedisCluster, type SpawnedRedisCluster };

/** A plain client of the cluster (the test's own), ready. */
export async function clusterClient(cluster: SpawnedRedisCluster): Promise<Cluster> {
  const client = new Cluster(cluster.nodes, { redisOptions: { maxRetriesPerRequest: 1 } });
  client.on("error", () => {});
  await new Promise<void>((resolve, reject) => {
    client.once("ready", () => resolve());
    client.once("error", reject);
  });
  return client;
}

/** The master ("host:port") serving `key`'s slot, as the cluster says now. */
export async function ownerOf(client: Cluster, key: string): Promise<string> {
  const slot = Number(await client.cluster("KEYSLOT", key));
  const range = (await client.cluster("SLOTS")).find(([from, to]) => slot >= from && slot <= to);
  const master = range?.[2];
  if (!master) throw new Error(`slot ${slot} of ${key} is not served`);
  return `${master[0]}:${master[1]}`;
}

/**
 * `count` ids from `make`, each one's key (`keyOf`) served by a different master, and none by a
 * master in `avoid`; or, with `on`, ids whose key is served by that master.
 */
export async function idsOnMasters(
  client: Cluster,
  options: { count: number; make: () => string; keyOf: (id: string) => string; avoid?: string[]; on?: string },
): Promise<string[]> {
  const owners = new Map<string, string>();
  for (let tries = 0; owners.size < options.count; tries++) {
    if (tries > 10_000) throw new Error("no ids found on distinct masters");
    const id = options.make();
    const owner = await ownerOf(client, options.keyOf(id));
    if (options.on && owner !== options.on) continue;
    if (options.avoid?.includes(owner)) continue;
    if (!options.on && [...owners.values()].includes(owner)) continue;
    owners.set(id, owner);
  }
  return [...owners.keys()];
}

/** The spawned node listening on "host:port". */
export function nodeAt(cluster: SpawnedRedisCluster, hostPort: string): SpawnedRedis {
  const port = Number(hostPort.split(":").at(-1));
  const node = [...cluster.masters, ...cluster.replicas].find((n) => n.port === port);
  if (!node) throw new Error(`no node of the cluster on ${hostPort}`);
  return node;
}

/** SIGKILL, and wait for the exit (no shutdown: a crash, as a lost machine is). */
export async function killNode(node: SpawnedRedis): Promise<void> {
  const { child } = node;
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  child.kill("SIGKILL");
  await exited;
}

/**
 * Waits until the slot of `key` is served by a master other than `dead`, and every live node
 * says `cluster_state:ok`; returns the new master ("host:port").
 */
export async function waitForFailover(
  cluster: SpawnedRedisCluster,
  key: string,
  dead: string,
  timeoutMs = 30_000,
): Promise<string> {
  const live = [...cluster.masters, ...cluster.replicas].filter(
    (n) => n.child.exitCode === null && n.child.signalCode === null && `127.0.0.1:${n.port}` !== dead,
  );
  const admins = live.map((n) => {
    const c = new Redis(n.url, { maxRetriesPerRequest: 1, lazyConnect: true });
    c.on("error", () => {});
    return c;
  });
  try {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const probe = await Promise.all(
        admins.map(async (c) => String(await c.call("CLUSTER", "INFO")).includes("cluster_state:ok")),
      ).catch(() => [false]);
      if (probe.every(Boolean)) {
        const slot = Number(await admins[0]!.call("CLUSTER", "KEYSLOT", key));
        const shards = (await admins[0]!.call("CLUSTER", "SLOTS")) as [number, number, [string, number]][];
        const range = shards.find(([from, to]) => slot >= from && slot <= to);
        const owner = range ? `${range[2][0]}:${range[2][1]}` : undefined;
        if (owner && owner !== dead) return owner;
      }
      if (Date.now() > deadline) throw new Error(`no failover of ${dead} within ${timeoutMs} ms`);
      await sleep(100);
    }
  } finally {
    for (const c of admins) c.disconnect();
  }
}
