/**
 * The Node driver's options that need no gateway: which module speaks to a base URL (https://
 * goes over node:https, to 443 unless told), the thresholds and the exit code they give, the
 * route every request is reported under, and the compare command on two fixture runs.
 */
import { execFile } from "node:child_process";
import { request as httpRequest } from "node:http";
import { Agent as HttpsAgent, request as httpsRequest } from "node:https";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { compareRuns, readRunRecord } from "../../load/compare.js";
import { Client, transportFor } from "../../load/driver/http.js";
import {
  evaluateThresholds,
  exitCodeFor,
  parseThreshold,
  THRESHOLDS_FAILED_EXIT_CODE,
  type ThresholdInput,
} from "../../load/driver/thresholds.js";
import { routeOf } from "../../load/routes.js";

const root = fileURLToPath(new URL("../../", import.meta.url));
const fixtures = join(root, "test/load/fixtures");
const k6Run = join(fixtures, "summary-spike-20250101T120000Z.json");
const driverRun = join(fixtures, "load-spike-20250102T120000Z.json");

describe("the driver's transport", () => {
  it("speaks https to an https:// base URL, on 443 unless the URL names a port; http on 80", () => {
    const https = transportFor(new URL("https://gateway.example/"));
    expect(https).toMatchObject({ protocol: "https:", port: 443 });
    expect(https.request).toBe(httpsRequest);
    expect(transportFor(new URL("https://gateway.example:8443")).port).toBe(8443);
    const http = transportFor(new URL("http://gateway.example"));
    expect(http).toMatchObject({ protocol: "http:", port: 80 });
    expect(http.request).toBe(httpRequest);
    expect(transportFor(new URL("http://127.0.0.1:8080")).port).toBe(8080);
    expect(() => transportFor(new URL("ftp://gateway.example"))).toThrow(/unsupported protocol ftp:/);
  });

  it("a client of an https:// gateway pools its sockets in an https agent", () => {
    const client = new Client("https://gateway.example", 4);
    try {
      expect(client.agent).toBeInstanceOf(HttpsAgent);
      expect(client.port).toBe(443);
    } finally {
      client.close();
    }
  });
});

describe("routes", () => {
  it("name a request by its route template, whatever its ids", () => {
    expect(routeOf("POST", "/v1/events/e1/holds/h_abc123/purchase")).toBe(
      "POST /v1/events/{eventId}/holds/{holdId}/purchase",
    );
    expect(routeOf("delete", "/v1/events/e1/holds/h_abc123")).toBe("DELETE /v1/events/{eventId}/holds/{holdId}");
    expect(routeOf("GET", "/v1/events/e1/sections/FRONT/seats")).toBe(
      "GET /v1/events/{eventId}/sections/{sectionId}/seats",
    );
    expect(routeOf("GET", "/v1/events/e1/queue/status?x=1")).toBe("GET /v1/events/{eventId}/queue/status");
    expect(routeOf("POST", "/v1/events/e1/holds")).toBe("POST /v1/events/{eventId}/holds");
    expect(routeOf("GET", "/healthz")).toBe("GET /healthz");
  });
});

describe("thresholds", () => {
  const input: ThresholdInput = {
    seconds: 10,
    endpoints: new Map([
      ["join", { requests: 100, errors: 2, latencies: Array.from({ length: 100 }, (_, i) => i + 1) }],
      ["status", { requests: 100, errors: 0, latencies: Array.from({ length: 100 }, () => 5) }],
    ]),
    counters: { sales_confirmed: 40, bot_requests_accepted: 0 },
  };
  const check = (...exprs: string[]) => evaluateThresholds(exprs.map(parseThreshold), input);

  it("are read as k6 writes them and measured on the run", () => {
    expect(check("http_req_failed<0.01", "http_req_failed<0.011")).toEqual([
      { threshold: "http_req_failed<0.01", ok: false, actual: 0.01 },
      { threshold: "http_req_failed<0.011", ok: true, actual: 0.01 },
    ]);
    expect(check("http_req_failed{endpoint:status}<0.01")[0]).toMatchObject({ ok: true, actual: 0 });
    expect(check("http_req_failed{endpoint:join} rate<0.01")[0]).toMatchObject({ ok: false, actual: 0.02 });
    // 200 latencies: 1..100 (join) and a hundred 5s (status); nearest rank 198 is 98.
    expect(check("p(99)<500")[0]).toMatchObject({ ok: true, actual: 98 });
    expect(check("http_req_duration{endpoint:join} p(99)<50")[0]).toMatchObject({ ok: false, actual: 99 });
    expect(check("http_req_duration{endpoint:status} p(99)<=5")[0]).toMatchObject({ ok: true, actual: 5 });
    expect(check("max<100")[0]).toMatchObject({ ok: false, actual: 100 });
    expect(check("http_reqs rate>=20", "http_reqs count==200").map((r) => r.ok)).toEqual([true, true]);
    expect(check("sales_confirmed>0", "bot_requests_accepted<1").map((r) => r.ok)).toEqual([true, true]);
  });

  it("fail when there is nothing to measure (an endpoint without a request)", () => {
    expect(check("http_req_duration{endpoint:purchase} p(99)<500")[0]).toMatchObject({ ok: false });
  });

  it("refuse what they cannot read", () => {
    for (const bad of ["p99<500", "http_req_failed", "latency<5", "http_req_failed p(99)<5", "p(120)<5", "x"]) {
      expect(() => parseThreshold(bad), bad).toThrow(/bad threshold/);
    }
  });

  it("give the exit code: 1 for a broken guarantee, 99 for a missed threshold (as k6), else 0", () => {
    const met = check("p(99)<500");
    const missed = check("p(99)<10");
    expect(exitCodeFor({ botAccepted: 0, thresholds: met })).toBe(0);
    expect(exitCodeFor({ botAccepted: 0 })).toBe(0);
    expect(exitCodeFor({ botAccepted: 0, thresholds: missed })).toBe(THRESHOLDS_FAILED_EXIT_CODE);
    expect(THRESHOLDS_FAILED_EXIT_CODE).toBe(99);
    expect(exitCodeFor({ botAccepted: 0, audit: { ok: true }, thresholds: missed })).toBe(99);
    expect(exitCodeFor({ botAccepted: 0, audit: { ok: false }, thresholds: met })).toBe(1);
    expect(exitCodeFor({ botAccepted: 1, thresholds: missed })).toBe(1);
  });
});

describe("npm run load:compare", () => {
  it("puts two runs side by side: throughput, errors, sales, p50/p95/p99 per endpoint, b/a", () => {
    const text = compareRuns(readRunRecord(k6Run), readRunRecord(driverRun), ["a.json", "b.json"]);
    const line = (label: string, after = 0) => {
      const lines = text.split("\n");
      const i = lines.findIndex((l, n) => n >= after && l.startsWith(label));
      return { cells: lines[i]?.trim().split(/\s{2,}/), at: i };
    };
    expect(text).toMatch(/^a = a\.json: k6 spike at http:\/\/127\.0\.0\.1:8080, 2025-01-01T12:00:00\.000Z, fans=500/);
    expect(text).toMatch(/\nb = b\.json: driver spike at .*connections=256/);
    expect(line("requests/s").cells).toEqual(["requests/s", "100.0", "150.0", "1.50x"]);
    expect(line("errors").cells).toEqual(["errors", "6", "0", "0.00x"]);
    expect(line("sales").cells).toEqual(["sales", "180", "200", "1.11x"]);
    const status = line("status").at;
    expect(line("  p99 ms", status).cells).toEqual(["p99 ms", "31.5", "63.0", "2.00x"]);
    // An endpoint in one run only: shown, with a dash for the other.
    const purchase = line("purchase").at;
    expect(line("  p95 ms", purchase).cells).toEqual(["p95 ms", "-", "90.0", "-"]);
  });

  it("runs as a command, and refuses a file that is not a run record (exit 2)", async () => {
    const run = promisify(execFile);
    const tsx = join(root, "node_modules/.bin/tsx");
    const { stdout } = await run(tsx, ["load/compare.ts", k6Run, driverRun], { cwd: root });
    expect(stdout).toContain("requests/s");
    expect(stdout).toContain("hold");
    await expect(run(tsx, ["load/compare.ts", k6Run, join(root, "package.json")], { cwd: root })).rejects.toMatchObject(
      {
        code: 2,
        stderr: expect.stringContaining("not a load run record"),
      },
    );
  }, 60_000);
});
