/**
 * Prometheus instruments, one registry per process (built by main.ts, or per test), never the
 * module-level default registry, so several apps in one test process do not collide.
 */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from "prom-client";

export function createMetrics(options: { defaultMetrics?: boolean } = {}) {
  const registry = new Registry();
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
    waiting: new Gauge({
      name: "gateway_waiting_fans",
      help: "Fans waiting in line, by event",
      labelNames: ["event"] as const,
      registers: [registry],
    }),
    admitted: new Gauge({
      name: "gateway_admitted_fans",
      help: "Fans admitted so far, by event",
      labelNames: ["event"] as const,
      registers: [registry],
    }),
    active: new Gauge({
      name: "gateway_active_sessions",
      help: "Active purchase sessions, by event",
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
      help: "Claims lost to another fan (409), by stage: shield or dynamodb",
      labelNames: ["stage"] as const,
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
  };
}

export type Metrics = ReturnType<typeof createMetrics>;
