/**
 * The Grafana dashboard in the repository (grafana/onsale-gateway.json) draws only series the
 * gateway exports: every metric name in every panel's query is one the registry of a real process
 * (src/metrics.ts, default metrics on, as src/main.ts builds it) knows, and the panels the
 * operators read in an on-sale are all there.
 */
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { createMetrics } from "../../src/metrics.js";

interface Panel {
  title: string;
  datasource?: { uid?: string };
  targets?: { expr: string }[];
}
const dashboard = JSON.parse(readFileSync("grafana/onsale-gateway.json", "utf8")) as {
  uid: string;
  panels: Panel[];
  templating: { list: { name: string; type: string }[] };
};

/** Metric names in a PromQL expression: its identifiers less strings, label sets, ranges, groupings and functions. */
function metricNames(expr: string): string[] {
  const withoutStrings = expr.replace(/"[^"]*"/g, '""');
  const withoutLabelSets = withoutStrings.replace(/\{[^}]*\}/g, "{}").replace(/\[[^\]]*\]/g, "[]");
  const withoutGrouping = withoutLabelSets.replace(/\b(by|without)\s*\([^)]*\)/g, "");
  const names = withoutGrouping.match(/[a-zA-Z_:][a-zA-Z0-9_:]*/g) ?? [];
  const functions = new Set(["sum", "rate", "deriv", "histogram_quantile", "max", "min", "avg", "increase", "irate"]);
  return names.filter((n) => !functions.has(n) && !/^\d/.test(n));
}

describe("the Grafana dashboard", () => {
  it("queries only series the gateway exports", async () => {
    const metrics = createMetrics({ defaultMetrics: true });
    const exported = new Set((await metrics.registry.getMetricsAsJSON()).map((m) => m.name));
    const histograms = new Set(
      (await metrics.registry.getMetricsAsJSON()).filter((m) => String(m.type) === "histogram").map((m) => m.name),
    );
    const known = (name: string) => {
      if (exported.has(name)) return true;
      const base = name.replace(/_(bucket|count|sum)$/, "");
      return base !== name && histograms.has(base);
    };
    const unknown: string[] = [];
    let queried = 0;
    for (const panel of dashboard.panels) {
      for (const target of panel.targets ?? []) {
        for (const name of metricNames(target.expr)) {
          queried++;
          if (!known(name)) unknown.push(`${panel.title}: ${name}`);
        }
      }
    }
    expect(queried).toBeGreaterThanOrEqual(dashboard.panels.length);
    expect(unknown).toEqual([]);
  });

  it("finds the names it checks (a misspelt series is caught)", async () => {
    expect(
      metricNames('sum by (le, route) (rate(gateway_http_request_duration_seconds_bucket{status=~"5.."}[5m]))'),
    ).toEqual(["gateway_http_request_duration_seconds_bucket"]);
    const exported = new Set((await createMetrics().registry.getMetricsAsJSON()).map((m) => m.name));
    expect(exported.has("gateway_holds_totl")).toBe(false);
  });

  it("has the panels an on-sale is watched by, each on the dashboard's Prometheus variable", () => {
    const titles = dashboard.panels.map((p) => p.title.toLowerCase());
    for (const wanted of [
      "waiting",
      "admissions",
      "sessions",
      "holds",
      "sales",
      "conflicts",
      "4xx and 5xx",
      "p99 latency per route",
      "throttled",
      "dynamodb p99",
      "background jobs",
    ]) {
      expect(
        titles.some((t) => t.includes(wanted)),
        wanted,
      ).toBe(true);
    }
    expect(dashboard.templating.list).toContainEqual(
      expect.objectContaining({ name: "datasource", type: "datasource" }),
    );
    for (const panel of dashboard.panels) expect(panel.datasource?.uid, panel.title).toBe("${datasource}");
    expect(new Set(dashboard.panels.map((p) => p.title)).size).toBe(dashboard.panels.length);
  });
});
