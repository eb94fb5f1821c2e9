/**
 * The operator's load-test token (LOAD_TEST_TOKEN, header X-Load-Test-Token) lifts the per-IP
 * limit for the load generators and nothing else: the per-fan limit still refuses a flood of one
 * fan, and a request without the token, or with a wrong one, meets the per-IP limit as before.
 * Every request here comes from one address (in-process requests share the client IP "local").
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { isLoadTestToken, LOAD_TEST_TOKEN_HEADER } from "../../src/http/load-test-token.js";
import { admitFans, createTable, type Gateway, putEvent, startGateway, uniqueId } from "./harness.js";

const TOKEN = "load-generator-token-0123456789";

interface ErrorBody {
  error: { code: string; message: string; details?: { limit?: string } };
}

let gw: Gateway;
let eventId: string;

/** The same gateway, every request of which carries `token` as the load-test token. */
function withToken(g: Gateway, token: string): Gateway {
  return {
    ...g,
    request: (path, init = {}) =>
      g.request(path, {
        ...init,
        headers: { ...(init.headers as Record<string, string>), [LOAD_TEST_TOKEN_HEADER]: token },
      }),
  };
}

async function limitsHit(answers: Response[]): Promise<string[]> {
  const limited = answers.filter((r) => r.status === 429);
  const bodies = await Promise.all(limited.map(async (r) => (await r.json()) as ErrorBody));
  for (const b of bodies) expect(b.error.code).toBe("rate_limited");
  return bodies.map((b) => b.error.details?.limit ?? "?");
}

beforeAll(async () => {
  gw = await startGateway({
    tableName: await createTable(),
    limits: { ratePerIp: 2, ratePerFan: 2, loadTestToken: TOKEN },
  });
  eventId = uniqueId();
  expect((await putEvent(gw, eventId)).status).toBe(201);
});
afterAll(async () => {
  await gw?.close();
});

describe("the load-test token", () => {
  it("compares the whole token: a prefix, a longer value, another token and no token are refused", () => {
    expect(isLoadTestToken(TOKEN, TOKEN)).toBe(true);
    expect(isLoadTestToken(TOKEN, TOKEN.slice(0, -1))).toBe(false);
    expect(isLoadTestToken(TOKEN, `${TOKEN}x`)).toBe(false);
    expect(isLoadTestToken(TOKEN, "load-generator-token-0123456780")).toBe(false);
    expect(isLoadTestToken(TOKEN, undefined)).toBe(false);
    expect(isLoadTestToken(undefined, TOKEN)).toBe(false);
  });

  it("with the token, a flood of joins from one address is not refused by the per-IP limit", async () => {
    const loadGen = withToken(gw, TOKEN);
    const answers = await Promise.all(
      Array.from({ length: 40 }, (_, i) =>
        loadGen.request(`/v1/events/${eventId}/queue`, { method: "POST", json: { fanId: `gen-${i}` } }),
      ),
    );
    expect(answers.map((r) => r.status).filter((s) => s !== 201)).toEqual([]);
  });

  it("without it, or with a wrong one, the same flood is 429 by the per-IP limit", async () => {
    for (const g of [gw, withToken(gw, "not-the-load-test-token-000000")]) {
      const tag = uniqueId("f");
      const answers = await Promise.all(
        Array.from({ length: 40 }, (_, i) =>
          g.request(`/v1/events/${eventId}/queue`, { method: "POST", json: { fanId: `${tag}-${i}` } }),
        ),
      );
      expect(answers.map((r) => r.status).filter((s) => s !== 201 && s !== 429)).toEqual([]);
      // A burst of 2 x 2 and the refill while the 40 run get through; the rest stop at the limit.
      expect(answers.filter((r) => r.status === 201).length).toBeLessThan(10);
      const limits = await limitsHit(answers);
      expect(new Set(limits)).toEqual(new Set(["ip:join"]));
    }
  });

  it("never lifts the per-fan limit: one fan polling in a flood is 429, many fans at once are not", async () => {
    const loadGen = withToken(gw, TOKEN);
    const fans = await admitFans(
      loadGen,
      eventId,
      Array.from({ length: 30 }, (_, i) => `poller-${i}`),
    );
    // Each fan polled once to be admitted: one more poll each, all at once, is within each fan's
    // bucket, and 30 from one address is far over the per-IP one.
    const spread = await Promise.all(
      fans.map((f) => loadGen.request(`/v1/events/${eventId}/queue/status`, { token: f.queueToken })),
    );
    expect(spread.map((r) => r.status).filter((s) => s !== 200)).toEqual([]);

    const one = fans[0]!;
    const flood = await Promise.all(
      Array.from({ length: 30 }, () =>
        loadGen.request(`/v1/events/${eventId}/queue/status`, { token: one.queueToken }),
      ),
    );
    expect(flood.map((r) => r.status).filter((s) => s !== 200 && s !== 429)).toEqual([]);
    const limits = await limitsHit(flood);
    expect(limits.length).toBeGreaterThan(20);
    expect(limits.filter((l) => l.startsWith("ip:"))).toEqual([]);
  });
});
