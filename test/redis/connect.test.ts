/**
 * How a Redis Cluster is named (REDIS_CLUSTER_NODES) and what each connection role gets on one.
 * No I/O: the clients are built lazily and inspected, never connected.
 */
import { Cluster, Redis } from "ioredis";
import { describe, expect, it } from "vitest";
import { ConfigError, loadGatewayConfig } from "../../src/config.js";
import { connectRedis, describeRedis, FAIL_FAST_REDIS, parseClusterNodes } from "../../src/redis/connect.js";

const load = (env: Record<string, string>) => loadGatewayConfig(env, []);

describe("REDIS_CLUSTER_NODES", () => {
  it("names the seed nodes; REDIS_URL stays unset", () => {
    const config = load({ REDIS_CLUSTER_NODES: "10.0.0.1:7000, redis-b.internal:7001,[::1]:7002" });
    expect(config.redisUrl).toBeUndefined();
    expect(config.redisCluster).toEqual({
      nodes: [
        { host: "10.0.0.1", port: 7000 },
        { host: "redis-b.internal", port: 7001 },
        { host: "::1", port: 7002 },
      ],
    });
    expect(load({}).redisCluster).toBeUndefined();
  });

  it("passes a password and TLS through", () => {
    const config = load({ REDIS_CLUSTER_NODES: "a:1", REDIS_CLUSTER_PASSWORD: "pw", REDIS_CLUSTER_TLS: "true" });
    expect(config.redisCluster).toEqual({ nodes: [{ host: "a", port: 1 }], password: "pw", tls: true });
  });

  it("refuses REDIS_URL and REDIS_CLUSTER_NODES together, naming both", () => {
    expect(() => load({ REDIS_URL: "redis://127.0.0.1:6379", REDIS_CLUSTER_NODES: "a:1" })).toThrow(ConfigError);
    expect(() => load({ REDIS_URL: "redis://127.0.0.1:6379", REDIS_CLUSTER_NODES: "a:1" })).toThrow(
      /REDIS_CLUSTER_NODES: set either REDIS_URL .* or REDIS_CLUSTER_NODES .*, not both/,
    );
  });

  it("refuses a bad entry with the variable's name and the entry", () => {
    for (const bad of ["a", "a:", "a:99999", "a:1,,b", ":1", "a b:1"]) {
      if (bad === "a:1,,b") {
        expect(() => load({ REDIS_CLUSTER_NODES: bad })).toThrow(/REDIS_CLUSTER_NODES: "b" is not host:port/);
        continue;
      }
      expect(() => load({ REDIS_CLUSTER_NODES: bad }), bad).toThrow(/REDIS_CLUSTER_NODES: .*host:port/);
    }
    expect(() => load({ REDIS_CLUSTER_NODES: " , " })).toThrow(/REDIS_CLUSTER_NODES: name at least one node/);
  });

  it("refuses cluster settings without the cluster", () => {
    expect(() => load({ REDIS_CLUSTER_PASSWORD: "pw" })).toThrow(/REDIS_CLUSTER_NODES: .*need REDIS_CLUSTER_NODES/);
    expect(() => load({ REDIS_CLUSTER_TLS: "yes" })).toThrow(ConfigError);
  });

  it("an empty variable is unset, as for every other one", () => {
    expect(load({ REDIS_CLUSTER_NODES: "", REDIS_URL: "redis://127.0.0.1:6379" }).redisCluster).toBeUndefined();
    expect(parseClusterNodes("h:6379")).toEqual([{ host: "h", port: 6379 }]);
  });
});

describe("connectRedis", () => {
  const cluster = { kind: "cluster" as const, nodes: [{ host: "127.0.0.1", port: 1 }], password: "pw" };

  it("maps the fail-fast options of the commands connection onto a cluster and its nodes", () => {
    const client = connectRedis(cluster, "commands", { ...FAIL_FAST_REDIS, lazyConnect: true });
    try {
      expect(client).toBeInstanceOf(Cluster);
      const { options } = client as Cluster;
      expect(options.enableOfflineQueue).toBe(false);
      expect(options.enableAutoPipelining).toBe(true);
      expect(options.shardedSubscribers).toBe(false);
      expect(options.redisOptions).toMatchObject({ maxRetriesPerRequest: 1, commandTimeout: 2_000, password: "pw" });
    } finally {
      client.disconnect();
    }
  });

  it("subscribes sharded on a cluster, and waits without a retry limit (subscriber, BullMQ)", () => {
    for (const role of ["subscriber", "blocking"] as const) {
      const client = connectRedis(cluster, role, { maxRetriesPerRequest: null, lazyConnect: true }) as Cluster;
      try {
        expect(client.options.shardedSubscribers).toBe(role === "subscriber");
        expect(client.options.redisOptions?.maxRetriesPerRequest).toBeNull();
        expect(client.options.enableOfflineQueue).toBe(true);
      } finally {
        client.disconnect();
      }
    }
  });

  it("opens one server by URL, and says where without the password", () => {
    const client = connectRedis({ kind: "server", url: "redis://:secret@127.0.0.1:1" }, "commands", {
      ...FAIL_FAST_REDIS,
      lazyConnect: true,
    });
    try {
      expect(client).toBeInstanceOf(Redis);
      expect(client.isCluster).toBe(false);
    } finally {
      client.disconnect();
    }
    expect(describeRedis({ kind: "server", url: "redis://:secret@h:1" })).not.toContain("secret");
    expect(describeRedis(cluster)).toBe("cluster(127.0.0.1:1)");
  });
});
