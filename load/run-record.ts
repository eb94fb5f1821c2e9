/**
 * One load run as a record: what ran (scenario, tool, target, settings, when) and what it measured
 * (throughput, errors, sales, p50/p95/p99 per endpoint). The k6 summary and the Node driver each
 * write one per run, to a file named after the scenario and the time, so no run overwrites
 * another; `npm run load:compare -- a.json b.json` reads two of them. No imports: it runs under
 * k6 and Node alike.
 */
export const RUN_RECORD_KIND = "onsale-load-run";

export interface EndpointFigures {
  endpoint: string;
  /** The route template (load/routes.ts), when known. */
  route?: string;
  requests: number;
  /** Requests answered with a status the scenario did not expect, or not answered. */
  errors: number;
  p50: number;
  p95: number;
  p99: number;
}

export interface RunRecord {
  kind: typeof RUN_RECORD_KIND;
  version: 1;
  tool: "k6" | "driver";
  scenario: string;
  /** ISO time the run started. */
  startedAt: string;
  /** The gateway's base URL. */
  target: string;
  /** The run's settings (fans, rate, duration, connections, ...). */
  settings: Record<string, string | number | boolean | null>;
  seconds: number;
  requests: number;
  requestsPerSecond: number;
  errors: number;
  sales: number;
  endpoints: EndpointFigures[];
}

/** `<prefix>-<scenario>-<yyyymmddThhmmssZ>.json`: one file per run, in time order when sorted. */
export function runFileName(prefix: string, scenario: string, startedAt: string): string {
  const stamp = startedAt.replace(/\.\d+Z$/, "Z").replace(/[-:]/g, "");
  return `${prefix}-${scenario}-${stamp}.json`;
}
