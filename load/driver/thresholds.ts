/**
 * Pass/fail criteria of a driver run, written as k6 writes them, and the exit code they give: a
 * CI job or a script can tell a run that missed its targets from one that met them.
 *
 *   http_req_failed<0.01                              failed fraction of every request
 *   http_req_failed{endpoint:join}<0.01               ... of one endpoint's
 *   p(99)<500                                         latency (ms) of every request; also p(N), med, max, avg
 *   http_req_duration{endpoint:status} p(99)<500      ... of one endpoint's
 *   http_reqs rate>100                                requests per second (count: requests)
 *   sales_confirmed>0                                 a counter (also fans_admitted, holds_granted,
 *                                                     hold_conflicts, bot_requests_accepted)
 */
import { quantile } from "./stats.js";

export type Aggregate = "rate" | "count" | "med" | "max" | "min" | "avg" | `p(${number})`;

export interface Threshold {
  source: string;
  metric: string;
  endpoint?: string;
  aggregate: Aggregate;
  op: "<" | "<=" | ">" | ">=" | "==" | "!=";
  value: number;
}

export interface ThresholdResult {
  threshold: string;
  ok: boolean;
  /** The measured value; NaN when there was nothing to measure (no request to that endpoint). */
  actual: number;
}

/** What thresholds are measured on: per-endpoint latencies and errors, the run's counters. */
export interface ThresholdInput {
  seconds: number;
  endpoints: ReadonlyMap<string, { requests: number; errors: number; latencies: readonly number[] }>;
  counters: Record<string, number>;
}

export const COUNTERS = [
  "sales_confirmed",
  "fans_admitted",
  "holds_granted",
  "hold_conflicts",
  "bot_requests_accepted",
] as const;

/** k6's exit code when a threshold failed. */
export const THRESHOLDS_FAILED_EXIT_CODE = 99;

/**
 * The driver's exit code when a threshold failed while the generator was saturated (generator.ts):
 * a failure of the test setup, not of the gateway, since what missed the target was the driver's
 * own time. k6 has no such code (its codes are 97 to 110); 3 is free in the driver (2 is a bad
 * command line).
 */
export const GENERATOR_SATURATED_EXIT_CODE = 3;

const LATENCY = new Set(["med", "max", "min", "avg"]);
const defaultAggregate: Record<string, Aggregate> = {
  http_req_failed: "rate",
  http_reqs: "count",
  ...Object.fromEntries(COUNTERS.map((c) => [c, "count" as const])),
};
const allowed: Record<string, (a: string) => boolean> = {
  http_req_duration: (a) => LATENCY.has(a) || a.startsWith("p("),
  http_req_failed: (a) => a === "rate",
  http_reqs: (a) => a === "count" || a === "rate",
  ...Object.fromEntries(COUNTERS.map((c) => [c, (a: string) => a === "count"])),
};

const PATTERN =
  /^(?:([a-z_]+)(?:\{endpoint:([^}]+)\})?\s*)?(p\((?:\d+(?:\.\d+)?)\)|med|max|min|avg|rate|count)?\s*(<=|>=|==|!=|<|>)\s*(-?\d+(?:\.\d+)?)$/;

/** Parses one threshold; throws with the reason when it is not one. */
export function parseThreshold(source: string): Threshold {
  const m = PATTERN.exec(source.trim());
  if (!m) throw new Error(`bad threshold "${source}": expected e.g. "http_req_failed<0.01" or "p(99)<500"`);
  let [, metric, endpoint, aggregate] = m;
  const [, , , , op, value] = m;
  // "max<1000": the aggregate alone, read as the metric's name by the pattern.
  if (metric && !aggregate && !(metric in allowed) && (LATENCY.has(metric) || metric === "count")) {
    aggregate = metric;
    metric = undefined;
  }
  metric ??= "http_req_duration";
  if (!(metric in allowed)) throw new Error(`bad threshold "${source}": unknown metric ${metric}`);
  aggregate ??= defaultAggregate[metric];
  if (!aggregate) throw new Error(`bad threshold "${source}": ${metric} needs an aggregate such as p(99)`);
  if (!allowed[metric]!(aggregate)) throw new Error(`bad threshold "${source}": ${metric} has no ${aggregate}`);
  if (endpoint !== undefined && COUNTERS.includes(metric as (typeof COUNTERS)[number])) {
    throw new Error(`bad threshold "${source}": ${metric} is not per endpoint`);
  }
  const p = /^p\((.+)\)$/.exec(aggregate)?.[1];
  if (p !== undefined && !(Number(p) >= 0 && Number(p) <= 100)) {
    throw new Error(`bad threshold "${source}": percentile ${p} is not within 0..100`);
  }
  return {
    source,
    metric,
    ...(endpoint !== undefined ? { endpoint } : {}),
    aggregate: aggregate as Aggregate,
    op: op as Threshold["op"],
    value: Number(value),
  };
}

function measure(t: Threshold, input: ThresholdInput): number {
  if (t.metric in defaultAggregate && !t.metric.startsWith("http_")) return input.counters[t.metric] ?? 0;
  const rows =
    t.endpoint === undefined ? [...input.endpoints.values()] : [input.endpoints.get(t.endpoint)].filter(Boolean);
  const requests = rows.reduce((n, r) => n + r!.requests, 0);
  if (t.metric === "http_reqs") return t.aggregate === "count" ? requests : requests / Math.max(input.seconds, 1e-9);
  if (requests === 0) return Number.NaN;
  if (t.metric === "http_req_failed") return rows.reduce((n, r) => n + r!.errors, 0) / requests;
  const sorted = rows.flatMap((r) => r!.latencies).sort((a, b) => a - b);
  switch (t.aggregate) {
    case "med":
      return quantile(sorted, 0.5);
    case "max":
      return sorted.at(-1)!;
    case "min":
      return sorted[0]!;
    case "avg":
      return sorted.reduce((a, b) => a + b, 0) / sorted.length;
    default:
      return quantile(sorted, Number(t.aggregate.slice(2, -1)) / 100);
  }
}

const compare: Record<Threshold["op"], (a: number, b: number) => boolean> = {
  "<": (a, b) => a < b,
  "<=": (a, b) => a <= b,
  ">": (a, b) => a > b,
  ">=": (a, b) => a >= b,
  "==": (a, b) => a === b,
  "!=": (a, b) => a !== b,
};

/** Each threshold against the run. Nothing to measure (NaN) fails it: a target not shown is not met. */
export function evaluateThresholds(thresholds: readonly Threshold[], input: ThresholdInput): ThresholdResult[] {
  return thresholds.map((t) => {
    const actual = measure(t, input);
    return { threshold: t.source, ok: !Number.isNaN(actual) && compare[t.op](actual, t.value), actual };
  });
}

/**
 * The driver's exit code: 1 when the audit failed or a bot was let in (the gateway broke a
 * guarantee, however slow the generator: these do not depend on its speed), else, when a
 * threshold failed, 3 if the generator was saturated (the setup failed: the run measured the
 * driver) or 99 if not (the gateway missed it, as k6 says), else 0. Thresholds met under a
 * saturated generator still give 0: the gateway met them with the generator's delays added; the
 * report says it was saturated.
 */
export function exitCodeFor(result: {
  audit?: { ok: boolean };
  botAccepted: number;
  thresholds?: readonly ThresholdResult[];
  generator?: { saturated: boolean };
}): number {
  if ((result.audit && !result.audit.ok) || result.botAccepted > 0) return 1;
  if (result.thresholds?.some((t) => !t.ok)) {
    return result.generator?.saturated ? GENERATOR_SATURATED_EXIT_CODE : THRESHOLDS_FAILED_EXIT_CODE;
  }
  return 0;
}
