import { describe, expect, it } from "vitest";
import { ConfigError, loadGatewayConfig } from "../../src/config.js";
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

  it("coerces numbers and booleans, treats empty as unset, and takes --role from the command line", () => {
    const c = loadGatewayConfig({ PORT: "9000", TRUST_PROXY: "true", RATE_LIMIT_PER_IP: "0", REDIS_URL: "" }, [
      "--role=worker",
    ]);
    expect(c).toMatchObject({ port: 9000, trustProxy: true, rateLimitPerIp: 0, redisUrl: undefined, role: "worker" });
  });

  it("stops with a message naming each bad variable", () => {
    const bad = () => loadGatewayConfig({ PORT: "eighty", ADMIN_TOKEN: "short", REDIS_URL: "not a url" }, []);
    expect(bad).toThrow(ConfigError);
    expect(bad).toThrow(/PORT/);
    expect(bad).toThrow(/ADMIN_TOKEN/);
    expect(bad).toThrow(/REDIS_URL/);
  });
});
