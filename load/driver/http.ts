/**
 * The driver's HTTP client: node:http keep-alive sockets (at most `connections`), JSON in and
 * out, and per-endpoint counts, statuses and latencies.
 */
import { Agent, request } from "node:http";

export interface Reply<T = unknown> {
  status: number;
  body: T;
  ms: number;
}

export interface EndpointStats {
  requests: number;
  errors: number;
  statuses: Record<string, number>;
  latencies: number[];
}

export class Client {
  readonly url: URL;
  readonly agent: Agent;
  readonly endpoints = new Map<string, EndpointStats>();
  requests = 0;
  errors = 0;

  constructor(baseUrl: string, connections: number) {
    this.url = new URL(baseUrl);
    // An idle timeout of the agent's own turns on Node's use of the server's `Keep-Alive:
    // timeout=N` hint (an idle socket is closed 1 s before N; without a timeout the hint is
    // ignored and idle sockets are kept forever): the driver never sends on a socket the server is
    // closing, which it would count as the gateway's error. 60 s: under any load balancer's.
    this.agent = new Agent({ keepAlive: true, maxSockets: connections, maxFreeSockets: connections, timeout: 60_000 });
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
      const req = request(
        {
          agent: this.agent,
          host: this.url.hostname,
          port: this.url.port,
          method,
          path,
          headers: {
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
