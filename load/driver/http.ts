/**
 * The driver's HTTP client: keep-alive sockets (at most `connections`) over node:http, or
 * node:https for an `https://` base URL, JSON in and out, and per-endpoint counts, statuses and
 * latencies.
 */
import { Agent as HttpAgent, request as httpRequest } from "node:http";
import { Agent as HttpsAgent, request as httpsRequest } from "node:https";
import { routeOf } from "../routes.js";

/** The module a base URL is spoken with, and the port it means when it names none. */
export function transportFor(url: URL): {
  protocol: "http:" | "https:";
  port: number;
  request: typeof httpRequest;
  Agent: typeof HttpAgent;
} {
  if (url.protocol === "https:") {
    return { protocol: "https:", port: Number(url.port || 443), request: httpsRequest, Agent: HttpsAgent };
  }
  if (url.protocol === "http:") {
    return { protocol: "http:", port: Number(url.port || 80), request: httpRequest, Agent: HttpAgent };
  }
  throw new Error(`unsupported protocol ${url.protocol} in ${url.href}: use http:// or https://`);
}

export interface Reply<T = unknown> {
  status: number;
  body: T;
  ms: number;
}

export interface EndpointStats {
  /** The route template of its requests (load/routes.ts): one row per route, not per hold id. */
  route?: string;
  requests: number;
  errors: number;
  statuses: Record<string, number>;
  latencies: number[];
}

export class Client {
  readonly url: URL;
  readonly agent: HttpAgent;
  readonly port: number;
  private readonly send: typeof httpRequest;
  /** Sent on every request (the load-test token). */
  private readonly headers: Record<string, string>;
  readonly endpoints = new Map<string, EndpointStats>();
  requests = 0;
  errors = 0;

  constructor(baseUrl: string, connections: number, options: { headers?: Record<string, string> } = {}) {
    this.url = new URL(baseUrl);
    const transport = transportFor(this.url);
    this.port = transport.port;
    this.send = transport.request;
    this.headers = options.headers ?? {};
    // An idle timeout of the agent's own turns on Node's use of the server's `Keep-Alive:
    // timeout=N` hint (an idle socket is closed 1 s before N; without a timeout the hint is
    // ignored and idle sockets are kept forever): the driver never sends on a socket the server is
    // closing, which it would count as the gateway's error. 60 s: under any load balancer's.
    this.agent = new transport.Agent({
      keepAlive: true,
      maxSockets: connections,
      maxFreeSockets: connections,
      timeout: 60_000,
    });
  }

  /**
   * One request. `ok` lists the statuses that are expected answers for this call (anything else,
   * and any network failure, counts as an error of the endpoint).
   */
  call<T>(
    endpoint: string,
    method: string,
    path: string,
    options: { token?: string; json?: unknown; headers?: Record<string, string>; ok?: readonly number[] } = {},
  ): Promise<Reply<T>> {
    const started = performance.now();
    const body = options.json === undefined ? undefined : JSON.stringify(options.json);
    return new Promise<Reply<T>>((resolve) => {
      const finish = (status: number, text: string) => {
        const ms = performance.now() - started;
        const stats = this.stats(endpoint);
        stats.route ??= routeOf(method, path);
        stats.requests++;
        this.requests++;
        stats.statuses[status] = (stats.statuses[status] ?? 0) + 1;
        stats.latencies.push(ms);
        const expected = options.ok ?? [200, 201, 204];
        if (!expected.includes(status)) {
          stats.errors++;
          this.errors++;
        }
        let parsed: unknown = null;
        try {
          parsed = text ? JSON.parse(text) : null;
        } catch {
          parsed = text;
        }
        resolve({ status, body: parsed as T, ms });
      };
      const req = this.send(
        {
          agent: this.agent,
          host: this.url.hostname,
          port: this.port,
          method,
          path,
          headers: {
            ...this.headers,
            ...(body !== undefined ? { "content-type": "application/json" } : {}),
            ...(options.token ? { authorization: `Bearer ${options.token}` } : {}),
            ...options.headers,
          },
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on("data", (c: Buffer) => chunks.push(c));
          res.on("end", () => finish(res.statusCode ?? 0, Buffer.concat(chunks).toString("utf8")));
          res.on("error", () => finish(0, ""));
        },
      );
      req.setTimeout(60_000, () => req.destroy(new Error("timeout")));
      req.on("error", () => finish(0, ""));
      req.end(body);
    });
  }

  stats(endpoint: string): EndpointStats {
    let s = this.endpoints.get(endpoint);
    if (!s) {
      s = { requests: 0, errors: 0, statuses: {}, latencies: [] };
      this.endpoints.set(endpoint, s);
    }
    return s;
  }

  close(): void {
    this.agent.destroy();
  }
}
