/**
 * The k6 scripts, run in Node against fakes of k6's modules (test/load/support/k6-stub.ts): the
 * options they hand k6, the tags and headers of their requests, how long they wait between polls,
 * and the record of the run their summary writes.
 */
import { describe, expect, it } from "vitest";
import { loadK6Scripts } from "./support/k6-stub.js";

const SCENARIOS = ["spike", "hotseat", "abandon", "bots", "soak", "best"] as const;

describe("k6 scripts", () => {
  it("every scenario's summary has p(99) among its trend stats, and the scenario's own thresholds are kept", async () => {
    const k6 = await loadK6Scripts();
    for (const name of SCENARIOS) {
      const options = k6[name].options;
      expect(options.summaryTrendStats, name).toEqual(expect.arrayContaining(["med", "p(95)", "p(99)"]));
      // A submetric per endpoint, so the summary (and load:compare) has per-endpoint figures.
      expect(options.thresholds["http_req_duration{endpoint:hold}"], name).toBeDefined();
      expect(options.thresholds["http_reqs{endpoint:purchase}"], name).toBeDefined();
    }
    expect(k6.spike.options.thresholds["http_req_duration{endpoint:status}"]).toEqual(["p(99)<500"]);
    expect(k6.soak.options.thresholds.http_req_failed).toEqual(["rate<0.01"]);
  });

  it("waits as long as the gateway says between polls (30 s), not at most 10 s", async () => {
    const k6 = await loadK6Scripts();
    let polls = 0;
    k6.fake.answer = () =>
      ++polls < 3
        ? { status: 200, body: { status: "waiting", position: 9000, pollAfterSeconds: 30 } }
        : { status: 200, body: { status: "admitted", position: 9000, pollAfterSeconds: 2, accessToken: "at" } };
    expect(k6.lib.waitForAdmission("ev1", "qt")).toBe("at");
    expect(k6.fake.sleeps).toHaveLength(2);
    for (const s of k6.fake.sleeps) {
      expect(s).toBeGreaterThanOrEqual(30);
      expect(s).toBeLessThanOrEqual(32);
    }
    // A failed poll (no advice) waits 1 s, plus a little.
    expect(k6.lib.pollDelaySeconds(undefined, 0)).toBe(1);
    expect(k6.lib.pollDelaySeconds(4, 1)).toBeCloseTo(4.4);
  });

  it("names every request of a fan's journey by its route, never by its hold id, and sends the load-test token", async () => {
    const k6 = await loadK6Scripts({ LOAD_TEST_TOKEN: "load-generator-token-0123456789" });
    let hold = 0;
    k6.fake.answer = (method: string, url: string) => {
      if (url.endsWith("/queue")) return { status: 201, body: { queueToken: "qt", position: 1, status: "waiting" } };
      if (url.endsWith("/queue/status")) return { status: 200, body: { status: "admitted", accessToken: "at" } };
      if (/\/seats(\?|$)/.test(url)) {
        // The compact form the scripts read: one run of one seat, available.
        return { status: 200, body: { sectionId: "A", version: "1", layout: [[1, 1, 1]], status: "a" } };
      }
      if (method === "POST" && url.endsWith("/holds")) return { status: 201, body: { holdId: `h_${++hold}xyz` } };
      if (url.endsWith("/purchase")) return { status: 201, body: { status: "confirmed" } };
      return { status: 204 };
    };
    const setup = { eventId: "ev_named", sections: [{ id: "A", rows: 1, seatsPerRow: 1 }] };
    for (let i = 0; i < 4; i++) k6.lib.fanJourney(setup, { abandonHold: i % 2 });
    const names = new Set(k6.fake.requests.map((r) => r.params?.tags?.name));
    expect(names).toEqual(
      new Set([
        "/v1/events/{eventId}/queue",
        "/v1/events/{eventId}/queue/status",
        "/v1/events/{eventId}/sections/{sectionId}/seats",
        "/v1/events/{eventId}/holds",
        "/v1/events/{eventId}/holds/{holdId}",
        "/v1/events/{eventId}/holds/{holdId}/purchase",
      ]),
    );
    // The per-hold URLs were really used, under one name each.
    expect(k6.fake.requests.some((r) => r.url.includes("/holds/h_1xyz"))).toBe(true);
    for (const r of k6.fake.requests) {
      expect(r.params?.headers?.["x-load-test-token"], r.url).toBe("load-generator-token-0123456789");
    }
  });

  it("best's fans ask for 2 best in Floor, named as holds, and stop once nothing is left together", async () => {
    const k6 = await loadK6Scripts();
    let holdCalls = 0;
    k6.fake.answer = (method: string, url: string) => {
      if (url.endsWith("/queue")) return { status: 201, body: { queueToken: "qt", position: 1, status: "waiting" } };
      if (url.endsWith("/queue/status")) return { status: 200, body: { status: "admitted", accessToken: "at" } };
      if (method === "POST" && url.endsWith("/holds")) {
        holdCalls++;
        // The first fan wins after one contended try; the second finds nothing left.
        if (holdCalls === 1) return { status: 409, body: { error: { details: { available: 8 } } } };
        if (holdCalls === 2) return { status: 201, body: { holdId: "h_best" } };
        return { status: 409, body: { error: { code: "no_block_available", details: { available: 0 } } } };
      }
      if (url.endsWith("/purchase")) return { status: 201, body: { status: "confirmed" } };
      return { status: 204 };
    };
    const setup = { eventId: "ev_best", sections: [{ id: "FLOOR", rows: 4, seatsPerRow: 20 }] };
    k6.best.default(setup);
    k6.best.default(setup);
    const holds = k6.fake.requests.filter((r) => r.method === "POST" && r.url.endsWith("/holds"));
    expect(holds).toHaveLength(3);
    for (const r of holds) {
      expect(JSON.parse(String(r.body))).toEqual({ best: { quantity: 2, tier: "Floor" } });
      expect(r.params?.tags?.name).toBe("/v1/events/{eventId}/holds");
    }
    expect(k6.fake.requests.filter((r) => r.url.endsWith("/purchase"))).toHaveLength(1);
    // No seat map read: the gateway proposes.
    expect(k6.fake.requests.some((r) => /\/seats(\?|$)/.test(r.url))).toBe(false);
  });

  it("names the bots' requests by route too, made-up hold ids included", async () => {
    const k6 = await loadK6Scripts();
    k6.fake.answer = (_m: string, url: string) =>
      url.endsWith("/queue") ? { status: 201, body: { queueToken: "a.b.c" } } : { status: 401, body: {} };
    for (let i = 0; i < 60; i++) k6.bots.bots({ eventId: "ev_bots", sections: [] });
    const purchases = k6.fake.requests.filter((r) => r.url.endsWith("/purchase"));
    expect(purchases.length).toBeGreaterThan(0);
    expect(new Set(purchases.map((r) => r.url)).size).toBeGreaterThan(1);
    expect(new Set(purchases.map((r) => r.params?.tags?.name))).toEqual(
      new Set(["/v1/events/{eventId}/holds/{holdId}/purchase"]),
    );
    for (const r of k6.fake.requests) expect(r.params?.tags?.name, r.url).toMatch(/^\/v1\/[a-z/{}-]+$/i);
    expect(k6.fake.requests.some((r) => r.params?.headers?.["x-load-test-token"])).toBe(false);
  });

  it("solves the proof of work when the join asks one, with the gateway's check; the bots' no-proof joins are refused", async () => {
    const { createProofOfWork } = await import("../../src/waiting-room/proof-of-work.js");
    const pow = createProofOfWork("k6-test-gateway-secret-0123456789-abcdef");
    const k6 = await loadK6Scripts();
    const bits = 8;
    let checked = 0;
    k6.fake.answer = (_m: string, url: string, body: unknown) => {
      if (url.includes("/queue/challenge")) {
        const fanId = decodeURIComponent(url.split("fanId=")[1] ?? "");
        return { status: 200, body: pow.issueChallenge("ev_pow", fanId, bits) };
      }
      // every other bot request is refused, as the gateway refuses it
      if (!url.endsWith("/queue")) return { status: 401, body: {} };
      const join = JSON.parse(String(body)) as { fanId: string; pow?: { challenge: string; nonce: string } };
      if (!join.pow) return { status: 428, body: { error: { code: "proof_of_work_required" } } };
      const check = pow.checkProof(join.pow.challenge, join.pow.nonce, join.fanId, "ev_pow");
      if (!check.ok) return { status: 400, body: { error: { code: "invalid_proof" } } };
      checked++;
      return { status: 201, body: { queueToken: "a.b.c", position: 1, status: "waiting" } };
    };
    expect(k6.lib.join("ev_pow", "fan_k6")).toMatchObject({ queueToken: "a.b.c" });
    expect(checked).toBe(1);
    expect(k6.fake.metrics.pow_solve_ms).toHaveLength(1);
    for (let i = 0; i < 80; i++) k6.bots.bots({ eventId: "ev_pow", sections: [] });
    expect(k6.fake.metrics.bot_requests_accepted ?? []).toEqual([]);
    const forged = k6.fake.requests.filter((r) => String(r.body ?? "").includes("forged"));
    expect(forged.length).toBeGreaterThan(0);
  });

  it("writes one summary file per run, named by scenario and time, with the run's record in it", async () => {
    const k6 = await loadK6Scripts({ FANS: "500", RATE: "100", BASE_URL: "http://gw.test:8080" });
    const trend = (med: number, p95: number, p99: number) => ({
      type: "trend",
      values: { med, "p(95)": p95, "p(99)": p99, max: p99 + 1 },
    });
    const data = {
      state: { testRunDurationMs: 12_000 },
      metrics: {
        http_reqs: { type: "counter", values: { count: 1200, rate: 100 } },
        http_req_failed: { type: "rate", values: { rate: 0.005, passes: 6, fails: 1194 } },
        sales_confirmed: { type: "counter", values: { count: 180, rate: 15 } },
        http_req_duration: trend(8, 40, 95),
        "http_req_duration{endpoint:status}": {
          ...trend(3, 12, 31.5),
          thresholds: { "p(99)<500": { ok: true }, "max>=0": { ok: true } },
        },
        "http_reqs{endpoint:status}": { type: "counter", values: { count: 900, rate: 75 } },
        "http_req_failed{endpoint:status}": { type: "rate", values: { rate: 0, passes: 0, fails: 900 } },
        "http_req_duration{endpoint:hold}": trend(20, 70, 140),
        "http_reqs{endpoint:hold}": { type: "counter", values: { count: 300, rate: 25 } },
        "http_req_failed{endpoint:hold}": { type: "rate", values: { rate: 0.02, passes: 6, fails: 294 } },
        "http_reqs{endpoint:release}": { type: "counter", values: { count: 0, rate: 0 } },
      },
    };
    const out = k6.spike.handleSummary(data) as Record<string, string>;
    const files = Object.keys(out).filter((k) => k !== "stdout");
    expect(files).toHaveLength(1);
    expect(files[0]).toMatch(/^summary-spike-\d{8}T\d{6}Z\.json$/);
    const written = JSON.parse(out[files[0]!]!);
    expect(written.metrics).toEqual(data.metrics);
    expect(written.run).toMatchObject({
      kind: "onsale-load-run",
      tool: "k6",
      scenario: "spike",
      target: "http://gw.test:8080",
      settings: { fans: "500", rate: "100", loadTestToken: false },
      seconds: 12,
      requests: 1200,
      requestsPerSecond: 100,
      errors: 6,
      sales: 180,
      endpoints: [
        { endpoint: "status", requests: 900, errors: 0, p50: 3, p95: 12, p99: 31.5 },
        { endpoint: "hold", requests: 300, errors: 6, p50: 20, p95: 70, p99: 140 },
      ],
    });
    expect(Date.parse(written.run.startedAt)).toBeLessThanOrEqual(Date.now() - 12_000);
    expect(out.stdout).toContain("p99=31.5");
    expect(out.stdout).toContain("ok p(99)<500");
    expect(out.stdout).not.toContain("max>=0");
  });
});
