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

/** Iterations a ramping-arrival-rate plan starts: the integral of its rate (k6 starts one per unit). */
function plannedArrivals(scenario: { startRate?: number; stages: { target: number; duration: string }[] }): number {
  let rate = scenario.startRate ?? 0;
  let total = 0;
  for (const { target, duration } of scenario.stages) {
    const m = /^(\d+(?:\.\d+)?)(ms|s)$/.exec(duration);
    if (!m) throw new Error(`unread duration ${duration}`);
    const seconds = Number(m[1]) / (m[2] === "ms" ? 1000 : 1);
    total += ((rate + target) / 2) * seconds;
    rate = target;
  }
  return total;
}

describe("k6 scripts and the load generator (issue 31)", () => {
  it("every scenario judges the test setup apart from the gateway: no dropped iteration, no request given up on", async () => {
    const k6 = await loadK6Scripts();
    for (const name of [...SCENARIOS, "line"] as const) {
      const { thresholds } = k6[name].options;
      expect(thresholds.dropped_iterations, name).toEqual(["count==0"]);
      expect(thresholds.client_timeouts, name).toEqual(["count==0"]);
    }
  });

  it("plans exactly FANS fans, however FANS and RATE compare, so a dropped iteration is the generator's", async () => {
    for (const [fans, rate] of [
      [3000, 600],
      [2000, 1000],
      [50, 1000],
      [100_000, 2000],
    ] as const) {
      const k6 = await loadK6Scripts({ FANS: String(fans), RATE: String(rate), DURATION: "20" });
      const plans = {
        spike: k6.spike.options.scenarios.spike,
        hotseat: k6.hotseat.options.scenarios.hot_seat,
        best: k6.best.options.scenarios.best,
        abandon: k6.abandon.options.scenarios.abandon,
        line: k6.line.options.scenarios.line,
      };
      for (const [name, plan] of Object.entries(plans)) {
        expect(plan.executor, name).toBe("ramping-arrival-rate");
        expect(plannedArrivals(plan), `${name} ${fans}@${rate}`).toBeCloseTo(fans, 0);
        // Never more fans than VUs: a fan is one iteration, and every one may be waiting at once.
        expect(plan.maxVUs, name).toBe(fans);
        for (const s of plan.stages) expect(s.target, name).toBeLessThanOrEqual(rate);
      }
      // The spike's peak is RATE when the fans fill its ramps.
      if (fans / rate >= 1.5)
        expect(plans.spike.stages.map((s: { target: number }) => s.target)).toEqual([rate, rate, 0]);
      // bots: FANS honest fans spread over DURATION.
      const bots = k6.bots.options.scenarios.fans;
      expect(bots).toMatchObject({ executor: "constant-arrival-rate", rate: fans, timeUnit: "20s", duration: "20s" });
    }
  });

  it("counts requests k6 gave up on (error_code 1050) in client_timeouts, and a bot's unanswered request as no breach", async () => {
    const k6 = await loadK6Scripts();
    k6.fake.answer = (_m: string, url: string) =>
      url.endsWith("/queue/status") ? { status: 0, error_code: 1050 } : { status: 201, body: { queueToken: "a.b.c" } };
    expect(k6.lib.status("ev1", "qt")).toBeNull();
    expect(k6.fake.metrics.client_timeouts).toEqual([1]);
    // A reset connection (1220) is no timeout.
    k6.fake.answer = () => ({ status: 0, error_code: 1220 });
    k6.lib.status("ev1", "qt");
    expect(k6.fake.metrics.client_timeouts).toEqual([1]);
    // Bots whose requests get no answer: counted as timeouts, never as a bot let in.
    k6.fake.answer = () => ({ status: 0, error_code: 1050 });
    for (let i = 0; i < 40; i++) k6.bots.bots({ eventId: "ev_bots", sections: [] });
    expect(k6.fake.metrics.bot_requests_accepted ?? []).toEqual([]);
    expect(k6.fake.metrics.client_timeouts!.length).toBeGreaterThan(40);
  });

  /** A k6 summary: a spike run with its thresholds, and the setup's counters as given. */
  function spikeSummary(setup: { dropped?: number; timeouts?: number; holdOk: boolean }) {
    const metrics: Record<string, unknown> = {
      http_reqs: { type: "counter", values: { count: 20_000, rate: 645 } },
      http_req_failed: { type: "rate", values: { rate: 0, passes: 0, fails: 20_000 } },
      sales_confirmed: { type: "counter", values: { count: 1500, rate: 48 } },
      "http_req_duration{endpoint:hold}": {
        type: "trend",
        values: { med: 4000, "p(95)": 9400, "p(99)": 11_000, max: 12_000 },
        thresholds: { "p(99)<1000": { ok: setup.holdOk }, "max>=0": { ok: true } },
      },
      "http_reqs{endpoint:hold}": { type: "counter", values: { count: 3000, rate: 96 } },
    };
    // k6 leaves a metric with no sample out of the summary, its threshold too.
    if (setup.dropped !== undefined) {
      metrics.dropped_iterations = {
        type: "counter",
        values: { count: setup.dropped, rate: setup.dropped / 31 },
        thresholds: { "count==0": { ok: setup.dropped === 0 } },
      };
    }
    if (setup.timeouts !== undefined) {
      metrics.client_timeouts = {
        type: "counter",
        values: { count: setup.timeouts, rate: setup.timeouts / 31 },
        thresholds: { "count==0": { ok: setup.timeouts === 0 } },
      };
    }
    return { state: { testRunDurationMs: 31_000 }, metrics };
  }

  it("says in the summary and its record when k6 did not keep up, and that the gateway's missed thresholds are not the gateway's", async () => {
    const k6 = await loadK6Scripts({ FANS: "3000", RATE: "600" });
    const out = k6.spike.handleSummary(spikeSummary({ dropped: 1288, timeouts: 3, holdOk: false })) as Record<
      string,
      string
    >;
    const file = Object.keys(out).find((k) => k !== "stdout")!;
    const { run } = JSON.parse(out[file]!);
    expect(run.generator).toEqual({
      saturated: true,
      reasons: [
        expect.stringMatching(/^1288 planned fans never started/),
        expect.stringMatching(/^3 requests k6 gave up on/),
      ],
      droppedIterations: 1288,
      clientTimeouts: 3,
    });
    const lines = out.stdout!.split("\n");
    // Said first, before any figure it puts in doubt.
    expect(lines[1]).toBe(
      "GENERATOR SATURATED: the figures measure the load generator, not the gateway (a failure of the test setup)",
    );
    expect(out.stdout).toContain("1 of the gateway's thresholds missed meanwhile: not the gateway's verdict");
    const setupAt = lines.indexOf("  thresholds of the test setup (did the generator keep up):");
    expect(lines.slice(setupAt + 1, setupAt + 3)).toEqual([
      "    FAILED client_timeouts count==0",
      "    FAILED dropped_iterations count==0",
    ]);
    const gatewayAt = lines.indexOf("  thresholds of the gateway, measured by a generator that did not keep up:");
    expect(lines[gatewayAt + 1]).toBe("    FAILED http_req_duration{endpoint:hold} p(99)<1000");
  });

  it("says k6 kept up when it dropped nothing and gave up on nothing, the setup's metrics absent as k6 leaves them", async () => {
    const k6 = await loadK6Scripts();
    for (const setup of [{ holdOk: true }, { dropped: 0, timeouts: 0, holdOk: false }]) {
      const out = k6.spike.handleSummary(spikeSummary(setup)) as Record<string, string>;
      const file = Object.keys(out).find((k) => k !== "stdout")!;
      expect(JSON.parse(out[file]!).run.generator).toEqual({
        saturated: false,
        reasons: [],
        droppedIterations: 0,
        clientTimeouts: 0,
      });
      expect(out.stdout).toMatch(/\nload generator kept up: 0 dropped iterations, 0 client-side timeouts/);
      expect(out.stdout).toContain("  thresholds of the gateway:\n");
      expect(out.stdout).not.toContain("GENERATOR SATURATED");
    }
  });
});
