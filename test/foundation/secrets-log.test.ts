/**
 * The operator token in the gateway's log (issue 13, item 7), on the real process: a token the
 * operator supplied (ADMIN_TOKEN) is never printed; a generated one is printed once, on the start
 * that generated it, and a later start that reuses DATA_DIR/secrets.json says where it is kept
 * instead of printing it again.
 */
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, inject, it } from "vitest";
import { type GatewayProcess, startGatewayProcess } from "../support/processes.js";

const started: GatewayProcess[] = [];
afterAll(async () => {
  await Promise.all(started.map((g) => g.stop("SIGKILL")));
});

/** Starts the gateway, stops it cleanly, and returns everything it wrote. */
async function runOnce(env: Record<string, string>): Promise<string> {
  const gw = await startGatewayProcess({
    REDIS_URL: inject("redisUrl"),
    DYNAMODB_ENDPOINT: inject("dynamoEndpoint"),
    DYNAMODB_TABLE: `secrets_${Date.now()}`,
    DEMO_EVENT: "false",
    // Serving only: no workers taking other test files' jobs from the shared Redis.
    ROLE: "gateway",
    GATEWAY_SECRET: "",
    ...env,
  });
  started.push(gw);
  // An answer comes from the event loop, so main() has finished starting (its signal handlers too).
  expect((await fetch(`${gw.url}/healthz`)).status).toBe(200);
  expect(await gw.stop("SIGTERM")).toBe(0);
  return gw.logs.join("\n");
}

const occurrences = (text: string, needle: string) => text.split(needle).length - 1;

describe("the operator token in the log", () => {
  it("never prints a token supplied in ADMIN_TOKEN", { timeout: 120_000 }, async () => {
    const token = `supplied-operator-token-${Date.now()}`;
    const dataDir = mkdtempSync(join(tmpdir(), "gw-secrets-"));
    const logs = await runOnce({ ADMIN_TOKEN: token, DATA_DIR: dataDir });
    expect(logs).toContain("gateway listening");
    expect(occurrences(logs, token)).toBe(0);
    // Nor the generated signing secret, whichever way.
    const stored = JSON.parse(readFileSync(join(dataDir, "secrets.json"), "utf8")) as { gatewaySecret: string };
    expect(occurrences(logs, stored.gatewaySecret)).toBe(0);
  });

  it("prints a generated token once, on the start that generated it; later starts say where it is kept", {
    timeout: 180_000,
  }, async () => {
    const dataDir = mkdtempSync(join(tmpdir(), "gw-secrets-"));
    const first = await runOnce({ ADMIN_TOKEN: "", DATA_DIR: dataDir });
    const file = join(dataDir, "secrets.json");
    const { adminToken } = JSON.parse(readFileSync(file, "utf8")) as { adminToken: string };
    expect(adminToken).toMatch(/^adm_/);
    expect(occurrences(first, adminToken)).toBe(1);

    const second = await runOnce({ ADMIN_TOKEN: "", DATA_DIR: dataDir });
    expect(second).toContain("gateway listening");
    expect(occurrences(second, adminToken)).toBe(0);
    expect(second).toContain(file);
  });
});
