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

/**
 * Whether the load generator kept up: when it did not, the run's figures are the generator's, not
 * the gateway's. The driver measures itself (its CPU, its event loop, its late arrivals); k6 does
 * not report its own CPU, so its record says what k6 can tell: the iterations it dropped and the
 * requests it gave up on.
 */
export interface GeneratorRecord {
  saturated: boolean;
  /** Why, each with its numbers; empty when it kept up. */
  reasons: string[];
  /** The driver: its process's CPU over the fans' window, in cores (1 = one whole core). */
  cpuCores?: number;
  cpuMicrosPerRequest?: number;
  cpuMicrosPerFan?: number;
  eventLoopDelayP99Ms?: number;
  /** The driver: fans it started late, of those planned. */
  lateArrivals?: number;
  plannedArrivals?: number;
  /** k6: iterations (fans) it planned and never started (`dropped_iterations`). */
  droppedIterations?: number;
  /** Requests the generator gave up on, unanswered (k6: error_code 1050 or 1211; the driver: 60 s). */
  clientTimeouts?: number;
  /** The driver on Linux: the share of the whole machine's CPU busy over the window (0..1). */
  machineBusyShare?: number;
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
  /** Whether the generator kept up (absent in records written before issue 31). */
  generator?: GeneratorRecord;
}

/** `<prefix>-<scenario>-<yyyymmddThhmmssZ>.json`: one file per run, in time order when sorted. */
export function runFileName(prefix: string, scenario: string, startedAt: string): string {
  const stamp = startedAt.replace(/\.\d+Z$/, "Z").replace(/[-:]/g, "");
  return `${prefix}-${scenario}-${stamp}.json`;
}
