/**
 * Prometheus instruments, one registry per process (built by main.ts, or per test), never the
 * module-level default registry, so several apps in one test process do not collide.
 *
 * Every series sums right across pods: counters and histograms count what their own process did,
 * and the gauges of figures every process can read alike (an event's line, sessions, queue
 * depths, all in Redis) are exported by one process at a time (src/metrics-reporter.ts), marked
 * by `gateway_event_gauges_reporter` = 1. docs/observability.md lists the series and the
 * dashboard (grafana/onsale-gateway.json) built on them.
 */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from "prom-client";

/** The line view's counters as `WaitingRoom.lineCacheCounters()` gives them (since the process began). */
export type LineViewCounts = Record<(typeof LINE_VIEW_COUNTS)[number], number>;
const LINE_VIEW_COUNTS = [
  "refreshes",
  "beats",
  "missing",
  "lookups",
  "found",
  "staleAsked",
  "failedRefreshes",
  "goneKept",
  "beatsHeld",
  "fromCopy",
  "asAdmitter",
] as const;

export function createMetrics(options: { defaultMetrics?: boolean } = {}) {
  const registry = new Registry();
  let lineViewSource: (() => LineViewCounts) | undefined;
  let lineViewSeen: Partial<LineViewCounts> = {};
  if (options.defaultMetrics) collectDefaultMetrics({ register: registry });

  return {
    registry,
    httpDuration: new Histogram({
      name: "gateway_http_request_duration_seconds",
      help: "HTTP request latency by route and status",
      labelNames: ["method", "route", "status"] as const,
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
      registers: [registry],
    }),
    reporter: new Gauge({
      name: "gateway_event_gauges_reporter",
      help: "1 in the one process that exports the event-wide gauges (waiting, admitted, active sessions, queue jobs)",
      registers: [registry],
    }),
    waiting: new Gauge({
      name: "gateway_waiting_fans",
      help: "Fans waiting in line, by event (exported by the reporter process only)",
      labelNames: ["event"] as const,
      registers: [registry],
    }),
    admitted: new Gauge({
      name: "gateway_admitted_fans",
      help: "Fans admitted so far, by event (exported by the reporter process only)",
      labelNames: ["event"] as const,
      registers: [registry],
    }),
    active: new Gauge({
      name: "gateway_active_sessions",
      help: "Active purchase sessions, by event (exported by the reporter process only)",
      labelNames: ["event"] as const,
      registers: [registry],
    }),
    holds: new Counter({
      name: "gateway_holds_total",
      help: "Hold attempts by outcome (granted, conflict, not_found, ...)",
      labelNames: ["outcome"] as const,
      registers: [registry],
    }),
    conflicts: new Counter({
      name: "gateway_conflicts_total",
      help: "Claims lost to another fan (409), by stage: seat_map (this process's in-memory seat map), shield or dynamodb",
      labelNames: ["stage"] as const,
      registers: [registry],
    }),
    joinRefused: new Counter({
      name: "gateway_queue_join_refused_total",
      help: "Joins refused for a missing or bad proof of work or invite, or an identity already in line, by reason",
      labelNames: ["reason"] as const,
      registers: [registry],
    }),
    shieldRejections: new Counter({
      name: "gateway_shield_rejections_total",
      help: "Holds refused by the hot-seat shield without a DynamoDB request",
      registers: [registry],
    }),
    dynamoRequests: new Counter({
      name: "gateway_dynamodb_requests_total",
      help: "Claim-path DynamoDB writes by operation (hold, release) and outcome",
      labelNames: ["operation", "outcome"] as const,
      registers: [registry],
    }),
    dynamoCommands: new Counter({
      name: "gateway_dynamodb_commands_total",
      help: "Every DynamoDB command sent, by command and outcome (ok, or the error name)",
      labelNames: ["command", "outcome"] as const,
      registers: [registry],
    }),
    dynamoDuration: new Histogram({
      name: "gateway_dynamodb_command_duration_seconds",
      help: "DynamoDB command latency, the SDK's retries included, by command and outcome (ok, error)",
      labelNames: ["command", "outcome"] as const,
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
      registers: [registry],
    }),
    dynamoAttemptErrors: new Counter({
      name: "gateway_dynamodb_attempt_errors_total",
      help: "DynamoDB attempts that failed, retried by the SDK or not, by command and error (ThrottlingException, ...)",
      labelNames: ["command", "error"] as const,
      registers: [registry],
    }),
    jobDuration: new Histogram({
      name: "gateway_job_duration_seconds",
      help: "Background job run time by queue and outcome (ok, error)",
      labelNames: ["queue", "outcome"] as const,
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers: [registry],
    }),
    workerRestarts: new Counter({
      name: "gateway_worker_restarts_total",
      help: "Workers replaced by the watchdog: jobs waited while the worker took none (src/workers/watchdog.ts)",
      labelNames: ["queue"] as const,
      registers: [registry],
    }),
    queueJobs: new Gauge({
      name: "gateway_queue_jobs",
      help: "Background jobs by queue and state (waiting, delayed, active, failed; exported by the reporter process only)",
      labelNames: ["queue", "state"] as const,
      registers: [registry],
    }),
    queuePolls: new Counter({
      name: "gateway_queue_polls_total",
      help: "Queue status polls answered, by where from: cache (this process's view of the line, no Redis call) or redis",
      labelNames: ["answered"] as const,
      registers: [registry],
    }),
    lineView: new Counter({
      name: "gateway_queue_line_view_total",
      help:
        "This process's view of the line (src/waiting-room/line-view.ts), read at each scrape: refreshes " +
        "(line-view-8.lua calls, or copies read), beats (heartbeats of cache-answered polls sent with them), missing (fans a " +
        "refresh found no longer in line: their next poll goes to Redis), lookups (fans this process did not " +
        "know, looked up by a refresh: polls spread over gateways), found (of those, answered from the view), " +
        "staleAsked (polls of known fans sent to Redis because the view was older than a second), " +
        "failedRefreshes (refreshes that failed on the event's slot: the view was dropped), goneKept " +
        "(refreshes that kept their vacated places: Redis did not send the list again), beatsHeld " +
        "(refreshes of a room with fan shards that held their few heartbeats for a later one), fromCopy " +
        "(refreshes answered by the view's copy on a fan shard, no call on the event's slot) and asAdmitter " +
        "(refreshes made as the room's admitter, which writes those copies)",
      labelNames: ["what"] as const,
      registers: [registry],
      collect() {
        const counts = lineViewSource?.();
        if (!counts) return;
        for (const what of LINE_VIEW_COUNTS) this.inc({ what }, counts[what] - (lineViewSeen[what] ?? 0));
        lineViewSeen = { ...counts };
      },
    }),
    /** Names the process's line counters for `gateway_queue_line_view_total` (buildServices does). */
    readLineViewFrom(source: () => LineViewCounts) {
      lineViewSource = source;
      lineViewSeen = {};
    },
    joinBatchSize: new Histogram({
      name: "gateway_queue_join_batch_size",
      help: "Joins per join-batch-n.lua call: what arrived for one event while this process's previous batch was in Redis",
      buckets: [1, 2, 4, 8, 16, 32, 64, 128, 256],
      registers: [registry],
    }),
    redisScripts: new Counter({
      name: "gateway_redis_script_calls_total",
      help: "Redis Lua script calls by script and outcome",
      labelNames: ["script", "outcome"] as const,
      registers: [registry],
    }),
    purchases: new Counter({
      name: "gateway_purchases_total",
      help: "Purchase saga steps by outcome (started, confirmed, declined, pending, refunded, provider_error)",
      labelNames: ["outcome"] as const,
      registers: [registry],
    }),
    sseStreams: new Gauge({
      name: "gateway_sse_streams",
      help: "Open seat-map streams (Server-Sent Events) in this process",
      registers: [registry],
    }),
    sseBacklog: new Gauge({
      name: "gateway_sse_backlog_bytes",
      help: "Seat-map stream bytes queued and not yet handed to a socket, over all streams",
      registers: [registry],
    }),
    sseOverflows: new Counter({
      name: "gateway_sse_overflows_total",
      help: "Seat-map streams whose client did not keep up: resync (backlog dropped, ready resumed) or closed (write timeout)",
      labelNames: ["action"] as const,
      registers: [registry],
    }),
    sseRefused: new Counter({
      name: "gateway_sse_refused_total",
      help: "Seat-map streams refused by a cap: ip (429) or process (503)",
      labelNames: ["limit"] as const,
      registers: [registry],
    }),
    rateLimited: new Counter({
      name: "gateway_rate_limited_total",
      help: "Requests refused with 429, by limit",
      labelNames: ["limit"] as const,
      registers: [registry],
    }),
    notify: new Counter({
      name: "gateway_notify_total",
      help:
        "Seats-back notifications (src/notify/): requested, repeated, cancelled, limit_reached, not_sold_out (requests); " +
        "claimed, notified, redelivered, reconciled (fans; reconciled: claimed by the backstop for seats back that " +
        "nobody was told of); delivery_failed (attempts)",
      labelNames: ["outcome"] as const,
      registers: [registry],
    }),
  };
}

export type Metrics = ReturnType<typeof createMetrics>;
