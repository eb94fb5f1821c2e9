/**
 * docker-compose.yml cannot run here (no Docker engine), so it is read against the code: every
 * variable it sets is one the config knows, every command starts a file that exists, and the
 * config it describes parses.
 */
import { existsSync, readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import { loadGatewayConfig, loadLocalDynamoConfig } from "../../src/config.js";

interface Service {
  command?: string[];
  environment?: Record<string, string>;
  depends_on?: Record<string, unknown>;
}

const compose = parse(readFileSync("docker-compose.yml", "utf8")) as { services: Record<string, Service> };
// Variables the AWS SDK (not our config) reads.
const sdkVariables = new Set(["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"]);
const expand = (v: string) => v.replace(/\$\{[A-Z_]+:-([^}]*)\}/g, "$1");

describe("docker-compose.yml", () => {
  it("has Redis, a DynamoDB endpoint, a gateway and a worker", () => {
    expect(Object.keys(compose.services)).toEqual(expect.arrayContaining(["redis", "dynamodb", "gateway", "worker"]));
    expect(compose.services.gateway?.command).toContain("--role=gateway");
    expect(compose.services.worker?.command).toContain("--role=worker");
  });

  it("starts only files that exist, with environments the config accepts", () => {
    for (const [name, service] of Object.entries(compose.services)) {
      const file = service.command?.find((part) => part.endsWith(".ts"));
      if (file) expect(existsSync(file), `${name}: ${file}`).toBe(true);
      for (const dep of Object.keys(service.depends_on ?? {}))
        expect(compose.services[dep], `${name} -> ${dep}`).toBeDefined();
    }
    for (const name of ["gateway", "worker"]) {
      const env = Object.fromEntries(
        Object.entries(compose.services[name]?.environment ?? {}).map(([k, v]) => [k, expand(String(v))]),
      );
      const config = loadGatewayConfig(Object.fromEntries(Object.entries(env).filter(([k]) => !sdkVariables.has(k))), [
        "node",
        "main.ts",
        ...(compose.services[name]?.command ?? []),
      ]);
      expect(config.role).toBe(name);
      expect(config.redisUrl).toBe("redis://redis:6379");
      expect(config.dynamodb.endpoint).toBe("http://dynamodb:8000");
      expect(config.adminToken).toBeTruthy();
      expect(config.gatewaySecret?.length).toBeGreaterThanOrEqual(32);
    }
    const dynamo = loadLocalDynamoConfig([], compose.services.dynamodb?.environment ?? {});
    expect(dynamo).toMatchObject({ port: 8000, host: "0.0.0.0" });
  });
});
