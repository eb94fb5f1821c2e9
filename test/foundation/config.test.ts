import { describe, expect, it } from "vitest";
import { ConfigError, loadGatewayConfig } from "../../src/config.js";

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
