/**
 * The workers' health, for a process that serves no app (`--role=worker`; WORKER_HEALTH_PORT):
 * `/livez` (the process runs; nothing asked) and `/readyz` (Redis and DynamoDB answer and every
 * worker runs). A worker without Redis takes no job at all, so unlike the gateway's readiness a
 * Redis outage is unready here; no traffic is routed by it, it tells a rollout and an operator
 * whether this pod works. Bodies follow the gateway's: `{status, checks}`, and the error model on
 * 503. `/metrics` serves this process's Prometheus series (job run times, DynamoDB commands;
 * docs/observability.md), behind METRICS_TOKEN when it is set, as the gateway's.
 */
import { randomUUID } from "node:crypto";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { type HealthDeps, probe } from "../health.js";
import { bearerMatches } from "../http/middleware/admin-auth.js";
import type { Metrics } from "../metrics.js";

export interface WorkerHealthServer {
  server: Server;
  port: number;
  close(): Promise<void>;
}

export interface WorkerHealthDeps {
  health: HealthDeps;
  /** True while every worker of this process runs (BullMQ's isRunning). */
  workersRunning(): boolean;
  /** The process's series for `/metrics`; `token`: the bearer token it asks for (METRICS_TOKEN). */
  metrics?: { registry: Metrics["registry"]; token?: string | undefined };
}

export async function workerReadiness(deps: WorkerHealthDeps): Promise<{ status: 200 | 503; body: unknown }> {
  if (deps.health.lifecycle.draining) {
    return unavailable("draining: this process is shutting down", { draining: true });
  }
  const [redis, dynamodb] = await Promise.all([
    probe("redis", () => deps.health.redis.check()),
    probe("dynamodb", () => deps.health.dynamodb.check()),
  ]);
  const running = deps.workersRunning();
  const checks = {
    redis: redis ? "down" : "ok",
    dynamodb: dynamodb ? "down" : "ok",
    workers: running ? "running" : "stopped",
  };
  const failures = [redis, dynamodb, running ? null : "workers: not running"].filter((f): f is string => f !== null);
  if (failures.length > 0) return unavailable("not ready", { failures, checks });
  return { status: 200, body: { status: "ready", checks } };
}

function unavailable(message: string, details: Record<string, unknown>) {
  return {
    status: 503 as const,
    body: { error: { code: "unavailable", message, requestId: randomUUID(), details } },
  };
}

export async function startWorkerHealthServer(
  deps: WorkerHealthDeps,
  options: { port: number; host: string },
): Promise<WorkerHealthServer> {
  const server = createServer((req, res) => {
    const path = (req.url ?? "/").split("?")[0];
    const send = (status: number, body: unknown, extra: Record<string, string> = {}) => {
      const text = JSON.stringify(body);
      res.writeHead(status, {
        "Content-Type": "application/json",
        "Content-Length": Buffer.byteLength(text),
        ...extra,
      });
      res.end(text);
    };
    if (req.method !== "GET" && req.method !== "HEAD") {
      send(405, unavailableBody("method_not_allowed", `${req.method} is not served here`), { Allow: "GET, HEAD" });
      return;
    }
    if (path === "/livez" || path === "/healthz") {
      send(200, { status: "ok" });
      return;
    }
    if (path === "/readyz") {
      workerReadiness(deps).then(
        (r) => send(r.status, r.body, r.status === 503 ? { "Retry-After": "1" } : {}),
        () => send(503, unavailableBody("unavailable", "readiness check failed")),
      );
      return;
    }
    const metrics = deps.metrics;
    if (path === "/metrics" && metrics) {
      if (metrics.token && !bearerMatches(req.headers.authorization, metrics.token)) {
        send(401, unavailableBody("unauthenticated", "/metrics asks for the METRICS_TOKEN bearer token"));
        return;
      }
      metrics.registry.metrics().then(
        (text) => {
          res.writeHead(200, {
            "Content-Type": metrics.registry.contentType,
            "Content-Length": Buffer.byteLength(text),
          });
          res.end(text);
        },
        () => send(503, unavailableBody("unavailable", "metrics could not be collected")),
      );
      return;
    }
    send(404, unavailableBody("not_found", `no route for ${req.method} ${path}`));
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen({ port: options.port, host: options.host }, () => {
      server.off("error", reject);
      resolve();
    });
  });
  return {
    server,
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

function unavailableBody(code: string, message: string) {
  return { error: { code, message, requestId: randomUUID() } };
}
