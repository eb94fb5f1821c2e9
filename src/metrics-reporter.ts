/**
 * Which gateway process exports the event-wide gauges (fans waiting, admitted, active sessions,
 * background jobs by state). Those figures live in Redis and every gateway reads the same ones;
 * exported by every pod, a `sum()` over pods would multiply them. So one process at a time holds a
 * Redis lease and exports them, renewing it at each scrape; when it stops being scraped (it died,
 * it was drained) the lease lapses and the next process scraped takes it. It exports them for
 * every event any process served in the last hour (each scrape adds its own process's), not only
 * its own. Every other series on /metrics counts what its own process did, and sums right across
 * pods as it is.
 *
 * With Redis down nobody can know who reports, so nobody does: a gap in the gauges, never a
 * double count.
 */
import { randomUUID } from "node:crypto";
import { redisReady } from "./redis/availability.js";
import { type RedisClient, registerScripts, scriptFamily } from "./redis/scripts.js";

/** Longer than two scrape intervals (15 s is usual), so a live reporter keeps its lease. */
export const REPORTER_LEASE_MS = 45_000;
/** An event stays among the reported ones this long after a process last served it. */
export const REPORTED_EVENT_TTL_MS = 3_600_000;
/** The most events whose gauges one scrape exports (each costs a Redis read). */
export const MAX_REPORTED_EVENTS = 100;
/**
 * The lease and the served events of one deployment, named by its DynamoDB table: two deployments
 * sharing a Redis (or two test gateways) each have a reporter.
 */
export function reporterKeys(scope: string): [string, string] {
  return [`{metrics:${scope}}:event-gauges-reporter`, `{metrics:${scope}}:events`];
}

const reporterScripts = scriptFamily({ name: "metrics-reporter", files: { report: "metrics-report-2" } });

export interface MetricsReporter {
  /** This process's id in the lease. */
  readonly id: string;
  /**
   * Records `served` and answers whether this process exports the event-wide gauges now, and for
   * which events. Redis down or slow: not the reporter.
   */
  report(served: Iterable<string>): Promise<{ reporter: false } | { reporter: true; events: string[] }>;
}

export function createMetricsReporter(
  redis: RedisClient,
  options: { scope: string; leaseMs?: number; id?: string; clock?: () => number },
): MetricsReporter {
  const keys = reporterKeys(options.scope);
  const run = registerScripts(redis, reporterScripts);
  const id = options.id ?? randomUUID();
  const leaseMs = options.leaseMs ?? REPORTER_LEASE_MS;
  const clock = options.clock ?? Date.now;
  return {
    id,
    async report(served) {
      if (!redisReady(redis)) return { reporter: false };
      const args = [id, leaseMs, clock(), REPORTED_EVENT_TTL_MS, MAX_REPORTED_EVENTS, ...served];
      try {
        const [held, ...events] = await run<[number, ...string[]]>("report", keys, args);
        return held === 1 ? { reporter: true, events } : { reporter: false };
      } catch {
        return { reporter: false };
      }
    },
  };
}
