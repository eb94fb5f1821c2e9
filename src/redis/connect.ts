/**
 * The one place a Redis connection is built: one Redis server (REDIS_URL) or a Redis Cluster
 * (REDIS_CLUSTER_NODES), for one of three roles. Every module takes the common `RedisClient`
 * (Redis | Cluster, src/redis/scripts.ts) and never asks which it got, except the seat-change
 * relay and its publisher, which pick the pub/sub kind (`shardedPubSub`).
 *
 *  - `commands`: fail fast (FAIL_FAST_REDIS): no offline queue, one retry, a command timeout.
 *    On a cluster the same options go to every node connection (`redisOptions`); the offline
 *    queue is the cluster's own (a node's is always on in ioredis: it sends the first command of
 *    its lazy connection), so while the cluster is not ready a command is refused at once.
 *  - `subscriber`: pub/sub, offline queue kept (a subscription asked for while Redis is away is
 *    sent when it is back) and retries without limit. On a cluster: sharded pub/sub
 *    (SSUBSCRIBE, one subscriber connection per master, resubscribed by ioredis when the slots
 *    move, see src/seatmap/relay.ts).
 *  - `blocking`: a BullMQ worker's connection (BullMQ refuses one with a retry limit).
 */
import { Cluster, type ClusterOptions, Redis, type RedisOptions } from "ioredis";
import type { RedisClient } from "./scripts.js";

/** The seed nodes of a Redis Cluster (any reachable ones: ioredis learns the rest). */
export interface RedisClusterNodes {
  nodes: { host: string; port: number }[];
  /** AUTH password of every node (REDIS_CLUSTER_PASSWORD). */
  password?: string;
  /** TLS to every node (REDIS_CLUSTER_TLS), with the system's CAs. */
  tls?: boolean;
}

/** Where Redis is: one server by URL, or a cluster by its seed nodes. */
export type RedisTarget = { kind: "server"; url: string } | ({ kind: "cluster" } & RedisClusterNodes);

export type ConnectionRole = "commands" | "subscriber" | "blocking";

/**
 * Fail fast rather than queue: a claim must answer 503 (or go to DynamoDB) while Redis is away.
 * No offline queue: a command issued while disconnected is refused at once instead of waiting for
 * a reconnect (the modules also check the connection first; see src/redis/availability.ts). A
 * Redis that is connected but silent is bounded by the command timeout.
 */
export const FAIL_FAST_REDIS: RedisOptions = {
  maxRetriesPerRequest: 1,
  commandTimeout: 2_000,
  enableAutoPipelining: true,
  enableOfflineQueue: false,
};

const WAIT_FOREVER: RedisOptions = { maxRetriesPerRequest: null };

/** `host:port,host:port` (REDIS_CLUSTER_NODES) as seed nodes; throws naming the bad entry. */
export function parseClusterNodes(list: string): RedisClusterNodes["nodes"] {
  const nodes = list
    .split(",")
    .map((s) => s.trim())
    .filter((s) => s.length > 0)
    .map((entry) => {
      const match = /^(\[[0-9a-fA-F:]+\]|[A-Za-z0-9.-]+):(\d{1,5})$/.exec(entry);
      const port = Number(match?.[2]);
      if (!match || port < 1 || port > 65_535) throw new Error(`"${entry}" is not host:port`);
      return { host: match[1]!.replace(/^\[|\]$/g, ""), port };
    });
  if (nodes.length === 0) throw new Error("name at least one node (host:port)");
  return nodes;
}

/** For logs: the URL, or `cluster(host:port,...)`; never a password. */
export function describeRedis(target: RedisTarget): string {
  if (target.kind === "server") {
    const url = new URL(target.url);
    if (url.password) url.password = "***";
    return url.toString();
  }
  return `cluster(${target.nodes.map((n) => `${n.host}:${n.port}`).join(",")})`;
}

/**
 * A connection for `role`. `options` replaces the role's defaults on a single server and, on a
 * cluster, on every node (a test may keep an offline queue).
 */
export function connectRedis(target: RedisTarget, role: ConnectionRole, options?: RedisOptions): RedisClient {
  const base = options ?? (role === "commands" ? FAIL_FAST_REDIS : WAIT_FOREVER);
  if (target.kind === "server") return new Redis(target.url, base);
  const { enableOfflineQueue, enableAutoPipelining, lazyConnect, ...perNode } = base;
  const clusterOptions: ClusterOptions = {
    redisOptions: {
      ...perNode,
      ...(target.password ? { password: target.password } : {}),
      ...(target.tls ? { tls: {} } : {}),
    },
    ...(enableOfflineQueue !== undefined ? { enableOfflineQueue } : {}),
    ...(enableAutoPipelining !== undefined ? { enableAutoPipelining } : {}),
    ...(lazyConnect !== undefined ? { lazyConnect } : {}),
    // A failover takes the cluster's node timeout plus an election: keep refreshing the slots
    // on a MOVED or a lost node rather than giving up on the first try.
    retryDelayOnFailover: 200,
    retryDelayOnClusterDown: 200,
    // Right after a failover the nodes may disagree for a moment about who owns a slot, and a
    // command bounced between them (MOVED, MOVED, ...) used up its 16 redirections in
    // milliseconds: "Too many Cluster redirections (MOVED 3033)" in a CI run's workers after a
    // master was SIGKILLed. A pause before following a MOVED lets the new owner's claim spread
    // (16 x 100 ms); outside failovers and resharding no command meets a MOVED.
    retryDelayOnMoved: 100,
    ...(role === "subscriber" ? { shardedSubscribers: true } : {}),
  };
  return new Cluster(target.nodes, clusterOptions);
}

export function isCluster(client: RedisClient): client is Cluster {
  return client.isCluster;
}
