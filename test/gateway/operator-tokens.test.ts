/** ADMIN_TOKENS parsing (src/config.ts) and the operator check (src/http/middleware/admin-auth.ts); no I/O. */
import { describe, expect, it } from "vitest";
import { ConfigError, loadGatewayConfig } from "../../src/config.js";
import { createOperatorCheck, operatorTokens } from "../../src/http/middleware/admin-auth.js";

const load = (ADMIN_TOKENS: string) => loadGatewayConfig({ ADMIN_TOKENS }, []);

describe("ADMIN_TOKENS", () => {
  it("parses name:role:token entries; a token may hold ':'", () => {
    expect(load("alice:admin:alice-token-0123456789, board:read:board:token:0123456789").operatorTokens).toEqual([
      { name: "alice", role: "admin", token: "alice-token-0123456789" },
      { name: "board", role: "read", token: "board:token:0123456789" },
    ]);
    expect(loadGatewayConfig({}, []).operatorTokens).toEqual([]);
  });

  it.each([
    ["alice:owner:alice-token-0123456789", /role "owner"/],
    ["alice:admin:short", /at least 16/],
    ["default:admin:alice-token-0123456789", /ADMIN_TOKEN's name/],
    ["al ice:admin:alice-token-0123456789", /a name of/],
    ["a:admin:alice-token-0123456789,a:read:other-token-0123456789", /named twice/],
    ["a:admin:alice-token-0123456789,b:read:alice-token-0123456789", /token of another name/],
  ])("refuses %s, naming the variable and never printing a token", (value, why) => {
    let error: unknown;
    try {
      load(value);
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as Error).message).toMatch(/ADMIN_TOKENS/);
    expect((error as Error).message).toMatch(why);
    expect((error as Error).message).not.toContain("0123456789");
  });
});

describe("the operator check", () => {
  const check = createOperatorCheck(
    operatorTokens("default-token-0123456789", [
      { name: "alice", role: "admin", token: "alice-token-0123456789" },
      { name: "board", role: "read", token: "board-token-0123456789" },
    ]),
  );
  it("names the token's operator and role; ADMIN_TOKEN is the admin 'default'", () => {
    expect(check("Bearer default-token-0123456789")).toEqual({ name: "default", role: "admin" });
    expect(check("Bearer alice-token-0123456789")).toEqual({ name: "alice", role: "admin" });
    expect(check("bearer board-token-0123456789")).toEqual({ name: "board", role: "read" });
  });
  it("refuses a missing, malformed or unknown token with 401", () => {
    for (const header of [
      undefined,
      "",
      "Basic x",
      "Bearer",
      "Bearer alice-token-012345678",
      "Bearer alice-token-0123456789x",
    ]) {
      expect(() => check(header)).toThrow(expect.objectContaining({ code: "unauthenticated", status: 401 }));
    }
  });
});
