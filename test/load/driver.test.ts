/**
 * The Node load driver end to end, at its smallest: it starts a gateway child process against
 * the suite's Redis and DynamoDB, runs the spike scenario (50 fans, 40 seats), and audits. The
 * gateway's rate limits are on (defaults: 50/s per IP, 5/s per fan): the driver's load-test token
 * lets 50 fans polling twice a second from one address past the per-IP one.
 */
import { describe, expect, inject, it } from "vitest";
import { type RunOptions, renderResult, runScenario, toRunRecord } from "../../load/driver/run.js";
import { exitCodeFor, parseThreshold } from "../../load/driver/thresholds.js";
import { claimRedisDatabase } from "../support/worker-process.js";

/**
 * A small run on a Redis database of its own (the gateway child runs workers: so it takes no other
 * file's jobs), with the polls capped and short thinks: what every run here shares.
 */
async function smallRun(
  options: Pick<RunOptions, "scenario" | "fans" | "seats" | "rate" | "duration" | "onSaleDelaySeconds" | "thresholds"> &
    Partial<RunOptions>,
) {
  const db = await claimRedisDatabase();
  return runScenario({
    maxPollSeconds: 0.5,
    thinkMs: 50,
    connections: 32,
    redisUrl: db.url,
    dynamoEndpoint: inject("dynamoEndpoint"),
    ...options,
  }).finally(() => db.release());
}

describe("load driver", () => {
  it("runs a tiny spike end to end: the audit passes, seats sell, tau is a correlation", async () => {
    const result = await smallRun({
      scenario: "spike",
      fans: 50,
      seats: 40,
      rate: 50,
      duration: 5,
      // Long enough for the cold child's first joins to land before the draw, with other test
      // files busy on the same cores (4 s was not, three files at a time).
      onSaleDelaySeconds: 8,
      thresholds: ["sales_confirmed>0", "http_req_failed{endpoint:join}<0.01", "http_req_duration p(99)<60000"].map(
        parseThreshold,
      ),
    });
    const text = renderResult(result);
    expect(result.audit?.ok, text).toBe(true);
    expect(result.sales, text).toBeGreaterThan(0);
    expect(result.seatsSold).toBeLessThanOrEqual(40);
    expect(result.admitted).toBe(50);
    expect(result.prequeued).toBeGreaterThan(0);
    expect(result.tau).toBeGreaterThanOrEqual(-1);
    expect(result.tau).toBeLessThanOrEqual(1);
    // The line's own decisions (admittedAt) follow the places, whatever the answers' delays did to
    // the order the fans saw them in.
    expect(result.decided).toBe(50);
    expect(result.decidedOutOfOrder, text).toBe(0);
    // tau-b over the decisions is below 1 even in order when batches tie (CI saw 0.985 for 50
    // fans): the count above is the check, tau only a correlation
    expect(result.tauDecided, text).toBeGreaterThan(0.9);
    expect(result.tauDecided, text).toBeLessThanOrEqual(1);
    expect(text).toContain(
      "the line's own order (position vs its decision, admittedAt): 0 of 50 admitted before a fan ahead of them",
    );
    expect(text).toContain("audit: PASS");
    expect(result.loadTestToken).toBe(true);
    // Limits on, and none hit: the per-IP one is lifted by the token, the per-fan one not reached.
    expect(
      result.endpoints.filter((e) => e.statuses["429"]),
      text,
    ).toEqual([]);
    // The run's own three, and spike's "what must hold" (load/README.md), checked on every run.
    expect(
      result.thresholds?.map((t) => [t.threshold, t.ok]),
      text,
    ).toEqual([
      ["http_req_failed==0", true],
      ["sales_confirmed>0", true],
      ["sales_confirmed>0", true],
      ["http_req_failed{endpoint:join}<0.01", true],
      ["http_req_duration p(99)<60000", true],
    ]);
    expect(text).toContain("thresholds:");
    // One row per route, whatever the hold ids.
    const routes = Object.fromEntries(result.endpoints.map((e) => [e.endpoint, e.route]));
    expect(routes).toMatchObject({
      join: "POST /v1/events/{eventId}/queue",
      status: "GET /v1/events/{eventId}/queue/status",
      hold: "POST /v1/events/{eventId}/holds",
      purchase: "POST /v1/events/{eventId}/holds/{holdId}/purchase",
    });
    const record = toRunRecord(result, { rate: 50 });
    expect(record).toMatchObject({ kind: "onsale-load-run", tool: "driver", scenario: "spike", sales: result.sales });
    expect(record.settings).toMatchObject({ fans: 50, rate: 50, loadTestToken: true });
    expect(record.requests).toBe(result.endpoints.reduce((n, e) => n + e.requests, 0));

    // The driver's own figures over the fans' window (issue 31): measured, per request and per fan,
    // judged, and carried by the report and the record. Whether it was saturated depends on the box
    // (others' benchmarks share it): the verdict is checked against its own numbers, not assumed.
    const g = result.generator;
    expect(g.arrivals.planned).toBe(50);
    expect(g.requests, text).toBeGreaterThan(0);
    expect(g.requests).toBeLessThanOrEqual(record.requests);
    expect(g.cpuSeconds).toBeGreaterThan(0);
    expect(g.cpuCores).toBeCloseTo(g.cpuSeconds / g.seconds, 6);
    expect(g.cpuMicrosPerRequest).toBeCloseTo((g.cpuSeconds * 1e6) / g.requests, 3);
    expect(g.cpuMicrosPerFan).toBeCloseTo((g.cpuSeconds * 1e6) / 50, 3);
    expect(g.clientTimeouts).toBe(0);
    expect(g.saturated).toBe(g.reasons.length > 0);
    expect(text).toContain(
      g.saturated
        ? "GENERATOR SATURATED: the figures measure the load generator, not the gateway"
        : "load generator kept up",
    );
    expect(record.generator).toEqual({
      saturated: g.saturated,
      reasons: g.reasons,
      cpuCores: g.cpuCores,
      cpuMicrosPerRequest: g.cpuMicrosPerRequest,
      cpuMicrosPerFan: g.cpuMicrosPerFan,
      eventLoopDelayP99Ms: g.eventLoopDelayMs.p99,
      lateArrivals: g.arrivals.late,
      plannedArrivals: 50,
      clientTimeouts: 0,
      machineBusyShare: g.machine?.busyShare,
    });
    // Linux: the whole machine's CPU over the window, a share
    expect(g.machine?.busyShare).toBeGreaterThan(0);
    expect(g.machine?.busyShare).toBeLessThanOrEqual(1);
    // Thresholds met: exit 0 whether or not the generator kept up.
    expect(exitCodeFor(result)).toBe(0);
  }, 120_000);

  it("runs best available end to end: every fan asks for 2 best in Floor, the audit passes, no seat stranded", async () => {
    const result = await smallRun({
      scenario: "best",
      fans: 60,
      seats: 40,
      rate: 60,
      duration: 5,
      onSaleDelaySeconds: 4,
      thresholds: ["sales_confirmed>0"].map(parseThreshold),
    });
    const text = renderResult(result);
    expect(result.audit?.ok, text).toBe(true);
    expect(result.sales, text).toBeGreaterThan(0);
    // Pairs only: every seat sold is one of a pair.
    expect(result.seatsSold % 2, text).toBe(0);
    expect(result.audit?.stranded, text).toBe(0);
    expect(
      result.endpoints.find((e) => e.endpoint === "section seats"),
      text,
    ).toBeUndefined();
  }, 120_000);

  it("runs a spike on two gateways of its own (--gateways 2): each takes every other request, the costs count both, the audit passes", async () => {
    const result = await smallRun({
      scenario: "spike",
      fans: 40,
      seats: 30,
      rate: 40,
      duration: 5,
      onSaleDelaySeconds: 8,
      gateways: 2,
      thresholds: ["sales_confirmed>0"].map(parseThreshold),
    });
    const text = renderResult(result);
    expect(result.audit?.ok, text).toBe(true);
    expect(result.sales, text).toBeGreaterThan(0);
    expect(result.admitted, text).toBe(40);
    // Two gateways, each taking every other request (a fan's join, polls and purchase on both).
    const targets = result.targets ?? [];
    expect(targets.length, text).toBe(2);
    const [a, b] = targets.map((t) => t.requests);
    expect(Math.abs((a ?? 0) - (b ?? 0)), text).toBeLessThanOrEqual(1);
    expect(new Set(targets.map((t) => t.url)).size).toBe(2);
    // Both gateways' polls counted: every status poll was answered by one of them.
    const polls = result.endpoints.find((e) => e.endpoint === "status")?.requests ?? 0;
    expect((result.costs?.pollsFromCache ?? 0) + (result.costs?.pollsByRedis ?? 0), text).toBe(polls);
  }, 120_000);
});

// The root tsconfig does not include load/: this type reference has the CLI type-checked too.
type Usage = typeof import("../../load/driver/cli.js").USAGE;
const usagePrefix: Usage extends string ? "usage" : never = "usage";
describe("load driver CLI", () => {
  it("is type-checked through this file", () => {
    expect(usagePrefix).toBe("usage");
  });
});
