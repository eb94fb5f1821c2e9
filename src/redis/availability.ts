/**
 * Failing fast while Redis is away. ioredis queues a command issued while it reconnects and
 * answers only after its retries or its command timeout: seconds per command, several commands
 * per claim. A claim must not wait for a cache, a rate limiter or a session check that cannot
 * answer, so every module on a request path asks `redisReady` first and treats "not ready"
 * exactly like a failed call, at once. A Redis that is up but silent (a partition) is still bounded
 * by the client's `commandTimeout` (src/main.ts).
 *
 * The same holds for an ioredis Cluster: its status is the cluster's, `ready` while it serves
 * its slots, and it emits the same `ready` and `close` events. A single master lost (until its
 * replica takes over) leaves the Cluster ready: commands to its slots fail (a connection error,
 * then CLUSTERDOWN, each bounded by the retries and the command timeout) and the callers treat
 * that as any failed call; the other masters' events are served as before.
 */
import type { Cluster, Redis } from "ioredis";
import type { RedisClient } from "./scripts.js";

/** Thrown instead of sending a command that cannot be answered now. Nothing was sent. */
export class RedisUnavailableError extends Error {
  override name = "RedisUnavailableError";
  constructor(what: string) {
    super(`redis is unavailable (${what})`);
  }
}

const everReady = new WeakMap<RedisClient, { ready: boolean }>();

/**
 * Starts following a client's connection (modules call it when they are built, so the state is
 * known from the start). Idempotent.
 */
export function trackRedis(client: RedisClient): void {
  if (everReady.has(client)) return;
  // A client found reconnecting was connected before (or failed its first connection): lost.
  const state = { ready: client.status !== "wait" && client.status !== "connecting" && client.status !== "connect" };
  everReady.set(client, state);
  client.on("ready", () => {
    state.ready = true;
  });
}

/**
 * True when commands may be sent now: the client is connected, or it is still making its first
 * connection (then its own options decide how long a command may wait; src/main.ts waits for the
 * first connection before serving). False once a connection was lost and is not back: callers
 * treat that as a failed call, at once.
 */
export function redisReady(client: RedisClient): boolean {
  if (client.status === "ready") return true;
  trackRedis(client);
  return client.status !== "end" && everReady.get(client)?.ready === false;
}

/** Throws RedisUnavailableError unless commands may be sent now (see redisReady). */
export function requireRedis(client: RedisClient, what: string): void {
  if (!redisReady(client)) throw new RedisUnavailableError(what);
}

/** True when `err` proves the command never left this process (so it changed nothing). */
export function neverSent(err: unknown): boolean {
  if (err instanceof RedisUnavailableError) return true;
  // ioredis with enableOfflineQueue: false refuses a command while disconnected with this message
  // (a Cluster, while it is not ready, with the second one).
  return (
    err instanceof Error &&
    (err.message.startsWith("Stream isn't writeable") || err.message.startsWith("Cluster isn't ready"))
  );
}

/** Resolves true once the client is ready, false after `timeoutMs` (it keeps reconnecting). */
export function waitForRedis(client: RedisClient, timeoutMs: number): Promise<boolean> {
  if (redisReady(client)) return Promise.resolve(true);
  return new Promise((resolve) => {
    const done = (ready: boolean) => {
      clearTimeout(timer);
      client.off("ready", onReady);
      resolve(ready);
    };
    const onReady = () => done(true);
    const timer = setTimeout(() => done(false), timeoutMs);
    client.on("ready", onReady);
  });
}

/**
 * Calls `onReconnect` each time the client becomes ready again after having lost its connection
 * (not on the first connection). Redis may have come back empty: whatever lives only in Redis and
 * can be rebuilt (job schedules, subscriptions) is rebuilt from there. Returns the unsubscriber.
 *
 * On a Cluster a lost master does not close the client, yet its slots may come back with less
 * than they held (a replica promoted before it had every write, or the master restarted empty):
 * unless `failovers` is false, `onReconnect` is also called once every master lost since the last
 * call is replaced in the slot map or connected again.
 */
export function onRedisReconnect(
  client: RedisClient,
  onReconnect: () => void,
  options: { failovers?: boolean } = {},
): () => void {
  const stopFailovers =
    client.isCluster && options.failovers !== false ? onMasterReplaced(client as Cluster, onReconnect) : () => {};
  let lost = false;
  const onClose = () => {
    lost = true;
  };
  const onReady = () => {
    if (!lost) return;
    lost = false;
    onReconnect();
  };
  client.on("close", onClose);
  client.on("ready", onReady);
  return () => {
    stopFailovers();
    client.off("close", onClose);
    client.off("ready", onReady);
  };
}

/** See onRedisReconnect: masters lost (ioredis `-node`), then replaced (`refresh`) or back (`+node`, ready). */
function onMasterReplaced(cluster: Cluster, onReplaced: () => void): () => void {
  const lost = new Set<string>();
  const keyOf = (node: Redis) => `${node.options.host}:${node.options.port}`;
  const settle = (key: string) => {
    if (lost.delete(key) && lost.size === 0) onReplaced();
  };
  const onNodeLost = (node: Redis | undefined) => {
    // A replica's connection serves no slot (scaleReads: master).
    if (node && !node.options.readOnly) lost.add(keyOf(node));
  };
  const onNodeAdded = (node: Redis | undefined) => {
    if (!node || !lost.has(keyOf(node))) return;
    // The connection object comes first (lazily); only a connection made counts.
    node.once("ready", () => settle(keyOf(node)));
  };
  const onRefresh = () => {
    if (lost.size === 0) return;
    const masters = new Set(cluster.slots.map((nodes) => nodes?.[0]));
    for (const key of [...lost]) if (!masters.has(key)) settle(key);
  };
  cluster.on("-node", onNodeLost);
  cluster.on("+node", onNodeAdded);
  cluster.on("refresh", onRefresh);
  return () => {
    cluster.off("-node", onNodeLost);
    cluster.off("+node", onNodeAdded);
    cluster.off("refresh", onRefresh);
  };
}
