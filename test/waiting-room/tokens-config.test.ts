/**
 * TOKEN_ALG and TOKEN_SIGNING_KEYS as src/config.ts reads them (JSON in the variable, or a file's
 * path; each fault named), and the key a dev start keeps in DATA_DIR/secrets.json when no keys
 * are configured (src/bootstrap.ts): generated once per algorithm, the same on the next start.
 */
import { mkdtempSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pino from "pino";
import { describe, expect, inject, it } from "vitest";
import { startInfrastructure } from "../../src/bootstrap.js";
import { ConfigError, loadGatewayConfig } from "../../src/config.js";
import { createTokenService, generateSigningKey } from "../../src/waiting-room/index.js";

const active = generateSigningKey("EdDSA", "ed-1");
const retired = { ...generateSigningKey("ES256", "es-0"), state: "verify-only" as const };
const load = (env: Record<string, string>) => loadGatewayConfig(env, []);

describe("TOKEN_ALG and TOKEN_SIGNING_KEYS", () => {
  it("default to HS256 with no keys", () => {
    expect(load({}).tokens).toEqual({ alg: "HS256", signingKeys: undefined, source: undefined });
    expect(load({ TOKEN_ALG: "" }).tokens.alg).toBe("HS256");
  });

  it("take the keys as JSON in the variable or from a file, the algorithm from the active key", () => {
    const json = JSON.stringify([active, retired]);
    const inline = load({ TOKEN_SIGNING_KEYS: json }).tokens;
    expect(inline).toMatchObject({ alg: "EdDSA", source: "inline" });
    expect(inline.signingKeys?.map((k) => k.kid)).toEqual(["ed-1", "es-0"]);
    const file = join(mkdtempSync(join(tmpdir(), "token-keys-")), "keys.json");
    writeFileSync(file, json);
    const fromFile = load({ TOKEN_ALG: "EdDSA", TOKEN_SIGNING_KEYS: file }).tokens;
    expect(fromFile).toMatchObject({ alg: "EdDSA", source: file });
    // the keys sign: a token of the configured set verifies with a service built from it
    const tokens = createTokenService({ keys: fromFile.signingKeys });
    const token = tokens.signQueueToken({ fanId: "alice", eventId: "finals" });
    expect(tokens.verifyQueueToken(token, "finals").ok).toBe(true);
  });

  it.each([
    [{ TOKEN_ALG: "RS256" }, /TOKEN_ALG: one of HS256, ES256, EdDSA, not RS256/],
    [{ TOKEN_ALG: "HS256", TOKEN_SIGNING_KEYS: "[]" }, /TOKEN_SIGNING_KEYS: keys sign ES256 or EdDSA tokens/],
    [
      { TOKEN_ALG: "ES256", TOKEN_SIGNING_KEYS: JSON.stringify([active]) },
      /TOKEN_SIGNING_KEYS: the active key ed-1 is EdDSA, not ES256/,
    ],
    [{ TOKEN_SIGNING_KEYS: "[{" }, /TOKEN_SIGNING_KEYS: not JSON/],
    [{ TOKEN_SIGNING_KEYS: JSON.stringify([retired]) }, /TOKEN_SIGNING_KEYS: exactly one key must be active/],
    [{ TOKEN_SIGNING_KEYS: JSON.stringify([{ ...active, privateKeyPem: "x" }]) }, /not a private key in PEM/],
    [{ TOKEN_SIGNING_KEYS: "/nonexistent/keys.json" }, /TOKEN_SIGNING_KEYS: cannot read \/nonexistent\/keys.json/],
  ])("refuse %j at start, naming the variable", (env, message) => {
    expect(() => load(env)).toThrow(ConfigError);
    expect(() => load(env)).toThrow(message);
  });
});

describe("a dev start without TOKEN_SIGNING_KEYS", () => {
  const log = pino({ level: "silent" });
  const start = (dataDir: string, alg: string | undefined) =>
    startInfrastructure(
      load({
        DATA_DIR: dataDir,
        REDIS_URL: inject("redisUrl"),
        DYNAMODB_ENDPOINT: inject("dynamoEndpoint"),
        ...(alg ? { TOKEN_ALG: alg } : {}),
      }),
      log,
    );

  it("keeps a generated key per algorithm in DATA_DIR/secrets.json, the same across starts", async () => {
    const dataDir = mkdtempSync(join(tmpdir(), "token-keys-dev-"));
    const hs = await start(dataDir, undefined);
    expect(hs.tokenSigningKeys).toBeUndefined();
    await hs.stop();

    const first = await start(dataDir, "ES256");
    expect(first.tokenSigningKeys).toHaveLength(1);
    expect(first.tokenSigningKeys?.[0]).toMatchObject({ alg: "ES256", state: "active" });
    await first.stop();
    const file = join(dataDir, "secrets.json");
    expect(statSync(file).mode & 0o777).toBe(0o600);
    const stored = JSON.parse(readFileSync(file, "utf8"));
    // the HS secret and the operator token made on the first start are still there
    expect(stored.gatewaySecret).toBe(hs.gatewaySecret);
    expect(stored.adminToken).toBe(hs.adminToken);

    const second = await start(dataDir, "ES256");
    expect(second.tokenSigningKeys).toEqual(first.tokenSigningKeys);
    await second.stop();
    const ed = await start(dataDir, "EdDSA");
    expect(ed.tokenSigningKeys?.[0]).toMatchObject({ alg: "EdDSA" });
    await ed.stop();
    const back = await start(dataDir, "ES256");
    expect(back.tokenSigningKeys).toEqual(first.tokenSigningKeys);
    expect(back.gatewaySecret).toBe(hs.gatewaySecret);
    await back.stop();
    // a token signed before a restart verifies after it
    const before = createTokenService({ keys: first.tokenSigningKeys });
    const after = createTokenService({ keys: back.tokenSigningKeys });
    expect(after.verifyQueueToken(before.signQueueToken({ fanId: "a", eventId: "e" }), "e").ok).toBe(true);
  });

  it("uses the configured keys and writes none", async () => {
    const dataDir = mkdtempSync(join(tmpdir(), "token-keys-given-"));
    const infra = await startInfrastructure(
      load({
        DATA_DIR: dataDir,
        REDIS_URL: inject("redisUrl"),
        DYNAMODB_ENDPOINT: inject("dynamoEndpoint"),
        ADMIN_TOKEN: "operator-token-0123456789",
        GATEWAY_SECRET: "gateway-secret-0123456789-0123456789",
        TOKEN_SIGNING_KEYS: JSON.stringify([active]),
      }),
      log,
    );
    expect(infra.tokenSigningKeys?.map((k) => k.kid)).toEqual(["ed-1"]);
    await infra.stop();
    expect(() => statSync(join(dataDir, "secrets.json"))).toThrow();
  });
});
