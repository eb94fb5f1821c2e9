/**
 * The load kit's HTTP client: keep-alive sockets (at most `connections`) over node:http, or
 * node:https for an `https://` base URL (`Connections`, which the benchmarks' Node client uses
 * too), and the driver's `Client` on top: JSON in and out, and per-endpoint counts, statuses and
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

/** A request as sent: a JSON body, when there is one, goes with its content type. */
export interface Outgoing {
  method: string;
  path: string;
  headers?: Record<string, string>;
  body?: string;
}

/**
 * Keep-alive sockets to one base URL, at most `connections` of them: the transport of the driver's
 * Client and of the benchmarks' Node client (scripts/lib/http-load.ts).
 */
export class Connections {
  readonly url: URL;
  readonly agent: HttpAgent;
  readonly port: number;
  /** Requests that got no answer within 60 s: the client gave up on them (status 0). */
  timeouts = 0;
  private readonly request: typeof httpRequest;

  constructor(baseUrl: string, connections: number) {
    this.url = new URL(baseUrl);
    const transport = transportFor(this.url);
    this.port = transport.port;
    this.request = transport.request;
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
   * One request: its status (0 when it got no answer: a network failure, 60 s without one) and,
   * when `read`, its body as text; else the body is drained unread (a benchmark's client).
   */
  send(req: Outgoing, read = true): Promise<{ status: number; text: string }> {
    return new Promise((resolve) => {
      let settled = false;
      const finish = (status: number, text: string) => {
        if (settled) return;
        settled = true;
        resolve({ status, text });
      };
      const r = this.request(
        {
          agent: this.agent,
          host: this.url.hostname,
          port: this.port,
          method: req.method,
          path: req.path,
          headers: { ...(req.body ? { "content-type": "application/json" } : {}), ...req.headers },
        },
        (res) => {
          const chunks: Buffer[] = [];
          if (read) res.on("data", (c: Buffer) => chunks.push(c));
          else res.resume();
          res.on("end", () => finish(res.statusCode ?? 0, read ? Buffer.concat(chunks).toString("utf8") : ""));
          res.on("error", () => finish(0, ""));
        },
      );
      r.setTimeout(60_000, () => {
        this.timeouts++;
        r.destroy(new Error("timeout"));
      });
      r.on("error", () => finish(0, ""));
      r.end(req.body);
    });
  }

  close(): void {
    this.agent.destroy();
  }
}

/**
 * The base URLs of a target: one, or several separated by commas (`http://a:8080,http://b:8080`),
 * for gateways run side by side without a load balancer in front.
 */
export function targetUrls(baseUrl: string): string[] {
  const urls = baseUrl
    .split(",")
    .map((u) => u.trim())
    .filter(Boolean);
  if (urls.length === 0) throw new Error(`no base URL in ${JSON.stringify(baseUrl)}`);
  for (const u of urls) transportFor(new URL(u));
  return urls;
}

/**
 * The driver's client: JSON in and out over `Connections`, with counts, statuses and latencies per
 * endpoint. Given several base URLs (comma-separated) it sends each request to the next one in
 * turn, each over its own sockets (`connections` split between them): a fan's join, polls, hold
 * and purchase land on different gateways, as behind a round-robin load balancer, so every
 * gateway must accept the tokens another issued.
 */
export class Client extends Connections {
  /** Sent on every request (the load-test token). */
  private readonly headers: Record<string, string>;
  /** Every target's sockets, this client's own (the first URL's) first. */
  private readonly targets: Connections[];
  private turn = 0;
  readonly endpoints = new Map<string, EndpointStats>();
  /** Requests sent to each base URL, in the order given. */
  readonly perTarget: number[];
  requests = 0;
  errors = 0;

  constructor(baseUrl: string, connections: number, options: { headers?: Record<string, string> } = {}) {
    const urls = targetUrls(baseUrl);
    const each = Math.max(1, Math.ceil(connections / urls.length));
    super(urls[0]!, each);
    this.headers = options.headers ?? {};
    this.targets = [this, ...urls.slice(1).map((u) => new Connections(u, each))];
    this.perTarget = urls.map(() => 0);
  }

  override send(req: Outgoing, read = true): Promise<{ status: number; text: string }> {
    const at = this.turn++ % this.targets.length;
    this.perTarget[at]!++;
    const target = this.targets[at]!;
    return target === this ? super.send(req, read) : target.send(req, read);
  }

  /** Requests to any of its base URLs that got no answer within 60 s. */
  get clientTimeouts(): number {
    return this.targets.reduce((n, t) => n + t.timeouts, 0);
  }

  override close(): void {
    super.close();
    for (const t of this.targets) if (t !== this) t.close();
  }

  /**
   * One request. `ok` lists the statuses that are expected answers for this call (anything else,
   * and any network failure, counts as an error of the endpoint).
   */
  async call<T>(
    endpoint: string,
    method: string,
    path: string,
    options: { token?: string; json?: unknown; headers?: Record<string, string>; ok?: readonly number[] } = {},
  ): Promise<Reply<T>> {
    const started = performance.now();
    const { status, text } = await this.send({
      method,
      path,
      headers: {
        ...this.headers,
        ...(options.token ? { authorization: `Bearer ${options.token}` } : {}),
        ...options.headers,
      },
      ...(options.json !== undefined ? { body: JSON.stringify(options.json) } : {}),
    });
    const ms = performance.now() - started;
    const stats = this.stats(endpoint);
    stats.route ??= routeOf(method, path);
    stats.requests++;
    this.requests++;
    stats.statuses[status] = (stats.statuses[status] ?? 0) + 1;
    stats.latencies.push(ms);
    if (!(options.ok ?? [200, 201, 204]).includes(status)) {
      stats.errors++;
      this.errors++;
    }
    let body: unknown = null;
    try {
      body = text ? JSON.parse(text) : null;
    } catch {
      body = text;
    }
    return { status, body: body as T, ms };
  }

  stats(endpoint: string): EndpointStats {
    let s = this.endpoints.get(endpoint);
    if (!s) {
      s = { requests: 0, errors: 0, statuses: {}, latencies: [] };
      this.endpoints.set(endpoint, s);
    }
    return s;
  }
}
