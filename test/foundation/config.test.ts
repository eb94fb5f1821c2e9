import { describe, expect, it } from "vitest";
import { ConfigError, loadGatewayConfig } from "../../src/config.js";
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

  it("stops with a message naming each bad variable", () => {
    const bad = () => loadGatewayConfig({ PORT: "eighty", ADMIN_TOKEN: "short", REDIS_URL: "not a url" }, []);
    expect(bad).toThrow(ConfigError);
    expect(bad).toThrow(/PORT/);
    expect(bad).toThrow(/ADMIN_TOKEN/);
    expect(bad).toThrow(/REDIS_URL/);
  });
});
