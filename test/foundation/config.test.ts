import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { ConfigError, KNOWN_DEFAULT_SECRETS, loadGatewayConfig } from "../../src/config.js";
import { defaultLimits } from "../../src/gateway.js";
import { KEEP_ALIVE_TIMEOUT_MS } from "../../src/http/serve.js";

describe("config", () => {
  it("has embedded defaults for every setting", () => {
    const c = loadGatewayConfig({}, []);
    expect(c).toMatchObject({
      port: 8080,
      redisUrl: undefined,
      dynamodb: { endpoint: undefined, localPort: 8000, table: "onsale", region: "us-east-1" },
      paymentTimeoutMs: 3000,
      rateLimitPerIp: 50,
      rateLimitPerFan: 5,
      trustProxy: false,
      role: "all",
    });
  });

  it("keeps idle connections open longer than a load balancer's usual 60 s idle timeout", () => {
    const c = loadGatewayConfig({}, []);
    expect(c.httpKeepAliveTimeoutMs).toBeGreaterThan(60_000);
    // The same default whether the server is started by main.ts or by listenApp alone (tests).
    expect(c.httpKeepAliveTimeoutMs).toBe(KEEP_ALIVE_TIMEOUT_MS);
    expect(loadGatewayConfig({ HTTP_KEEP_ALIVE_TIMEOUT_MS: "75000" }, []).httpKeepAliveTimeoutMs).toBe(75_000);
    expect(() => loadGatewayConfig({ HTTP_KEEP_ALIVE_TIMEOUT_MS: "0" }, [])).toThrow(/HTTP_KEEP_ALIVE_TIMEOUT_MS/);
  });

  it("caps seat-map streams by default, with the same defaults as the gateway's own", () => {
    const { sse } = loadGatewayConfig({}, []);
    expect(sse).toEqual({
      maxStreams: defaultLimits.maxStreams,
      maxStreamsPerIp: defaultLimits.maxStreamsPerIp,
      backlogBytes: defaultLimits.streamBacklogBytes,
      writeTimeoutMs: defaultLimits.streamWriteTimeoutMs,
    });
    expect(sse).toEqual({ maxStreams: 10_000, maxStreamsPerIp: 50, backlogBytes: 65_536, writeTimeoutMs: 30_000 });
    const set = loadGatewayConfig(
      {
        SSE_MAX_STREAMS: "500",
        SSE_MAX_STREAMS_PER_IP: "4",
        SSE_MAX_BACKLOG_BYTES: "8192",
        SSE_WRITE_TIMEOUT_MS: "5000",
      },
      [],
    ).sse;
    expect(set).toEqual({ maxStreams: 500, maxStreamsPerIp: 4, backlogBytes: 8192, writeTimeoutMs: 5000 });
    expect(() => loadGatewayConfig({ SSE_MAX_STREAMS_PER_IP: "0" }, [])).toThrow(/SSE_MAX_STREAMS_PER_IP/);
  });

  it("coerces numbers and booleans, treats empty as unset, and takes --role from the command line", () => {
    const c = loadGatewayConfig({ PORT: "9000", TRUST_PROXY: "true", RATE_LIMIT_PER_IP: "0", REDIS_URL: "" }, [
      "--role=worker",
    ]);
    expect(c).toMatchObject({ port: 9000, trustProxy: true, rateLimitPerIp: 0, redisUrl: undefined, role: "worker" });
  });

  it("has no load-test token unless LOAD_TEST_TOKEN is set, and refuses a short one", () => {
    expect(loadGatewayConfig({}, []).loadTestToken).toBeUndefined();
    expect(loadGatewayConfig({ LOAD_TEST_TOKEN: "" }, []).loadTestToken).toBeUndefined();
    expect(loadGatewayConfig({ LOAD_TEST_TOKEN: "load-generator-token-01" }, []).loadTestToken).toBe(
      "load-generator-token-01",
    );
    expect(() => loadGatewayConfig({ LOAD_TEST_TOKEN: "short" }, [])).toThrow(/LOAD_TEST_TOKEN/);
  });

  it("takes the waiting rooms' fan shards (WAITING_ROOM_FAN_SHARDS): 0 by default, 0 to 256", () => {
    expect(loadGatewayConfig({}, []).fanShards).toBe(0);
    expect(loadGatewayConfig({ WAITING_ROOM_FAN_SHARDS: "12" }, []).fanShards).toBe(12);
    expect(() => loadGatewayConfig({ WAITING_ROOM_FAN_SHARDS: "257" }, [])).toThrow(/WAITING_ROOM_FAN_SHARDS/);
    expect(() => loadGatewayConfig({ WAITING_ROOM_FAN_SHARDS: "1.5" }, [])).toThrow(/WAITING_ROOM_FAN_SHARDS/);
  });

  it("takes WAITING_ROOM_CLAIMS: off by default, a boolean", () => {
    expect(loadGatewayConfig({}, []).claims).toBe(false);
    expect(loadGatewayConfig({ WAITING_ROOM_CLAIMS: "true" }, []).claims).toBe(true);
    expect(loadGatewayConfig({ WAITING_ROOM_CLAIMS: "1" }, []).claims).toBe(true);
    expect(() => loadGatewayConfig({ WAITING_ROOM_CLAIMS: "maybe" }, [])).toThrow(/WAITING_ROOM_CLAIMS/);
  });

  it("takes WAITING_ROOM_CLAIMS=shards only with fan shards to keep the records on", () => {
    const both = loadGatewayConfig({ WAITING_ROOM_CLAIMS: "shards", WAITING_ROOM_FAN_SHARDS: "3" }, []);
    expect({ claims: both.claims, fanShards: both.fanShards }).toEqual({ claims: "shards", fanShards: 3 });
    expect(() => loadGatewayConfig({ WAITING_ROOM_CLAIMS: "shards" }, [])).toThrow(
      /WAITING_ROOM_CLAIMS: shards .*set WAITING_ROOM_FAN_SHARDS too/,
    );
  });

  it("stops with a message naming each bad variable", () => {
    const bad = () => loadGatewayConfig({ PORT: "eighty", ADMIN_TOKEN: "short", REDIS_URL: "not a url" }, []);
    expect(bad).toThrow(ConfigError);
    expect(bad).toThrow(/PORT/);
    expect(bad).toThrow(/ADMIN_TOKEN/);
    expect(bad).toThrow(/REDIS_URL/);
  });
});

/** A production environment that passes, for tests to break one setting at a time. */
const production = {
  NODE_ENV: "production",
  REDIS_URL: "redis://redis.internal:6379",
  AWS_REGION: "eu-west-1",
  ADMIN_TOKEN: "adm_8c1d5b0e4f2a9d7c6b3e",
  GATEWAY_SECRET: "gws_0f4b8e2d6a1c9e7b5d3f0a2c4e6b8d1f",
};

function messageOf(env: Record<string, string>): string {
  try {
    loadGatewayConfig(env, []);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as Error).message;
  }
  throw new Error("the configuration was accepted");
}

describe("production mode (NODE_ENV=production)", () => {
  it("starts with explicit DynamoDB, Redis and secrets: DynamoDB of AWS_REGION, nothing embedded, no demo", () => {
    const c = loadGatewayConfig(production, []);
    expect(c.production).toBe(true);
    expect(c.dynamodb).toMatchObject({ endpoint: undefined, embedded: false, region: "eu-west-1" });
    expect(c.demoEvent).toBe(false);
    expect(c.shutdownDrainMs).toBe(5_000);
    const endpoint = loadGatewayConfig(
      { ...production, AWS_REGION: "", DYNAMODB_ENDPOINT: "http://dynamodb.internal:8000", DEMO_EVENT: "true" },
      [],
    );
    expect(endpoint.dynamodb).toMatchObject({ endpoint: "http://dynamodb.internal:8000", embedded: false });
    expect(endpoint.demoEvent).toBe(true);
    const cluster = loadGatewayConfig({ ...production, REDIS_URL: "", REDIS_CLUSTER_NODES: "r1:6379,r2:6379" }, []);
    expect(cluster.redisCluster?.nodes).toHaveLength(2);
  });

  it("names every missing setting in one error", () => {
    const message = messageOf({ NODE_ENV: "production" });
    expect(message).toMatch(/^invalid configuration for production \(NODE_ENV=production\):/);
    for (const name of ["DYNAMODB_ENDPOINT", "REDIS_URL", "GATEWAY_SECRET", "ADMIN_TOKEN"]) {
      expect(message).toContain(`  ${name}: `);
    }
    expect(message).toContain("AWS_REGION");
    expect(message).toContain("REDIS_CLUSTER_NODES");
    expect(message.split("\n")).toHaveLength(5);
  });

  it("names bad values and missing ones together, and treats an empty variable as missing", () => {
    const message = messageOf({
      ...production,
      PORT: "eighty",
      ADMIN_TOKEN: "",
      GATEWAY_SECRET: "short",
      AWS_REGION: "",
    });
    expect(message).toMatch(/PORT: /);
    expect(message).toMatch(/GATEWAY_SECRET: /);
    expect(message).toMatch(/ADMIN_TOKEN: required in production/);
    expect(message).toMatch(/DYNAMODB_ENDPOINT: production needs an explicit DynamoDB/);
    expect(message).not.toMatch(/REDIS_URL: /);
  });

  it("refuses every secret published in the repository, whatever variable carries it", () => {
    for (const secret of KNOWN_DEFAULT_SECRETS) {
      for (const name of ["ADMIN_TOKEN", "GATEWAY_SECRET", "PAYMENT_WEBHOOK_SECRET", "LOAD_TEST_TOKEN"]) {
        expect(messageOf({ ...production, [name]: secret }), `${name}=${secret}`).toContain(
          `${name}: a value published in this repository's examples`,
        );
      }
    }
    expect(messageOf({ ...production, ADMIN_TOKEN: "please-changeme-0123456789" })).toMatch(/ADMIN_TOKEN: a value/);
    // The named operator tokens and the metrics token too.
    expect(
      messageOf({
        ...production,
        ADMIN_TOKENS: "dash:read:own-dashboard-token-0001,ci:admin:change-me-operator-token",
      }),
    ).toMatch(/ADMIN_TOKENS: a value published/);
    expect(messageOf({ ...production, METRICS_TOKEN: "change-me-load-test-token" })).toMatch(/METRICS_TOKEN: a value/);
  });

  it("asks for the shared key set in production when tokens are signed with a private key", () => {
    for (const alg of ["ES256", "EdDSA"]) {
      expect(messageOf({ ...production, TOKEN_ALG: alg })).toMatch(/TOKEN_SIGNING_KEYS: required in production/);
    }
    expect(loadGatewayConfig({ ...production, TOKEN_ALG: "HS256" }, []).production).toBe(true);
  });

  it("keeps the embedded defaults without NODE_ENV=production, published secrets included", () => {
    for (const env of [{}, { NODE_ENV: "development" }, { NODE_ENV: "test" }]) {
      const c = loadGatewayConfig(env, []);
      expect(c).toMatchObject({ production: false, demoEvent: true, shutdownDrainMs: 0 });
      expect(c.dynamodb).toMatchObject({ endpoint: undefined, embedded: true, region: "us-east-1" });
    }
    const c = loadGatewayConfig({ ADMIN_TOKEN: "change-me-operator-token" }, []);
    expect(c.adminToken).toBe("change-me-operator-token");
  });

  it("knows every secret the repository publishes (README, docs, compose, deploy/, load kit, .env examples)", () => {
    const published = publishedSecrets();
    // The scan finds what it is meant to find: the load kit's examples are there today.
    expect(published.map((p) => p.value)).toContain("load-generator-token-0001");
    expect(published).toContainEqual({
      file: "deploy/k8s/secret.example.yaml",
      name: "GATEWAY_SECRET",
      value: "change-me-gateway-secret-at-least-32-chars",
    });
    for (const { file, name, value } of published) {
      expect(KNOWN_DEFAULT_SECRETS, `${file}: ${name}=${value}`).toContain(value);
      expect(messageOf({ ...production, [name]: value })).toContain(`${name}: a value published`);
    }
  });
});

const SECRET_NAMES = "ADMIN_TOKEN|GATEWAY_SECRET|PAYMENT_WEBHOOK_SECRET|LOAD_TEST_TOKEN";

/** Files a reader copies settings from. */
function publishedFiles(): string[] {
  const files = ["README.md", "RELIABILITY.md", "BENCHMARKS.md", "docker-compose.yml", "load/README.md"];
  const walk = (dir: string, keep: (f: string) => boolean) => {
    let names: string[] = [];
    try {
      names = readdirSync(dir);
    } catch {
      return;
    }
    for (const n of names) {
      const path = join(dir, n);
      if (statSync(path).isDirectory()) walk(path, keep);
      else if (keep(n)) files.push(path);
    }
  };
  walk("docs", (n) => n.endsWith(".md"));
  walk("deploy", (n) => /\.(ya?ml|md|env)$/.test(n));
  for (const n of readdirSync(".")) if (/^\.env/.test(n)) files.push(n);
  return files;
}

/**
 * Every literal value given to a secret variable: `NAME=value` (shell, .env, `-e`,
 * `--from-literal=`), `${NAME:-value}` (compose), and in YAML `NAME: value`. Placeholders (`...`,
 * `$VAR`, `<yours>`) are not values; prose (`NAME: required ...` in Markdown) is not YAML.
 */
function publishedSecrets(): { file: string; name: string; value: string }[] {
  const found: { file: string; name: string; value: string }[] = [];
  const value = "[\"']?([^\\s\"'`|,)}]+)";
  const shell = new RegExp(`\\b(${SECRET_NAMES})=${value}`, "g");
  const yaml = new RegExp(`^\\s*["']?(${SECRET_NAMES})["']?\\s*:\\s*${value}`, "gm");
  const fallback = new RegExp(`\\$\\{(${SECRET_NAMES}):-([^}]+)\\}`, "g");
  for (const file of publishedFiles()) {
    const text = readFileSync(file, "utf8");
    const forms = /\.ya?ml$/.test(file) ? [shell, yaml, fallback] : [shell, fallback];
    for (const re of forms) {
      for (const m of text.matchAll(re)) {
        const [, name, literal] = m as unknown as [string, string, string];
        if (/^(\.\.\.|\$|<)/.test(literal) || literal.length < 8) continue;
        found.push({ file, name, value: literal });
      }
    }
  }
  return found;
}
