/**
 * A small HTTP proxy in front of a DynamoDB endpoint, for the chaos scenarios and the worker crash
 * tests: the network between a process and its store, made slow or lossy on purpose.
 *
 *  - latency: a fixed delay, or one chosen per request, added before the request is forwarded.
 *    The request is forwarded after the delay even if the client gave up meanwhile (its SDK timed
 *    out): a request already on the wire still reaches the server and may still apply, which is
 *    exactly the ambiguity a timeout leaves;
 *  - stall: requests matching a predicate (by X-Amz-Target and/or body) are kept, neither
 *    forwarded nor answered, until the test drops them (the client's socket is destroyed, the
 *    server never sees them) or releases them (forwarded now, however late);
 *  - counts: requests by target, and how many were stalled, dropped, released and failed upstream.
 *
 * When the upstream is down, the client's socket is destroyed: the SDK sees a network error, as
 * it would talking to a dead endpoint directly.
 */
import { Agent, createServer, type IncomingMessage, request as httpRequest, type ServerResponse } from "node:http";
import type { AddressInfo, Socket } from "node:net";

export interface ProxiedRequest {
  /** The operation, from X-Amz-Target without its prefix: "TransactWriteItems", "GetItem", ... */
  target: string;
  /** The raw JSON body. */
  body: string;
}

export type RequestPredicate = (request: ProxiedRequest) => boolean;

export interface StalledRequest extends ProxiedRequest {
  stalledAt: number;
  /** The client is still waiting for an answer (its SDK has not timed out). */
  clientWaiting(): boolean;
}

export interface ProxyCounts {
  /** Requests received, by target. */
  byTarget: Record<string, number>;
  total: number;
  stalled: number;
  dropped: number;
  released: number;
  /** Forwarded, but the upstream could not be reached or broke the connection. */
  upstreamErrors: number;
  /** Answered upstream after the client had gone (its SDK timed out): the effect may still have happened. */
  answeredAfterClientLeft: number;
}

export interface DynamoProxy {
  endpoint: string;
  port: number;
  /** Added latency: a fixed number of ms, a function of the request, or 0 to turn it off. */
  setLatency(latency: number | ((request: ProxiedRequest) => number)): void;
  /** From now on, requests matching `predicate` are stalled (null stops stalling new ones). */
  stall(predicate: RequestPredicate | null): void;
  /** The requests stalled now. */
  stalled(): StalledRequest[];
  /** Destroys the client sockets of the stalled requests matching `which` (all by default); never forwards them. */
  dropStalled(which?: RequestPredicate): number;
  /** Forwards the stalled requests matching `which` (all by default), now. */
  releaseStalled(which?: RequestPredicate): number;
  counts(): ProxyCounts;
  close(): Promise<void>;
}

/** The operation of a DynamoDB JSON request: `DynamoDB_20120810.TransactWriteItems` -> `TransactWriteItems`. */
function targetOf(req: IncomingMessage): string {
  const raw = req.headers["x-amz-target"];
  const value = Array.isArray(raw) ? raw[0] : raw;
  if (!value) return "(none)";
  const dot = value.lastIndexOf(".");
  return dot === -1 ? value : value.slice(dot + 1);
}

interface Held extends StalledRequest {
  forward(): void;
  drop(): void;
}

export async function startDynamoProxy(upstream: string, options: { port?: number } = {}): Promise<DynamoProxy> {
  const target = new URL(upstream);
  const agent = new Agent({ keepAlive: true, maxSockets: 512 });
  let latency: number | ((request: ProxiedRequest) => number) = 0;
  let stallWhen: RequestPredicate | null = null;
  const held = new Set<Held>();
  const sockets = new Set<Socket>();
  const counts: ProxyCounts = {
    byTarget: {},
    total: 0,
    stalled: 0,
    dropped: 0,
    released: 0,
    upstreamErrors: 0,
    answeredAfterClientLeft: 0,
  };

  const forward = (req: IncomingMessage, res: ServerResponse, body: Buffer) => {
    const headers = { ...req.headers, host: target.host, "content-length": String(body.length) };
    const out = httpRequest(
      {
        protocol: target.protocol,
        hostname: target.hostname,
        port: target.port,
        method: req.method,
        path: req.url,
        headers,
        agent,
      },
      (answer) => {
        if (res.destroyed || res.writableEnded) {
          counts.answeredAfterClientLeft++;
          answer.resume();
          return;
        }
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    out.on("error", () => {
      counts.upstreamErrors++;
      // As if the store itself had died under the client: no answer, a broken connection.
      req.socket.destroy();
    });
    out.end(body);
  };

  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("error", () => undefined);
    req.on("end", () => {
      const body = Buffer.concat(chunks);
      const request: ProxiedRequest = { target: targetOf(req), body: body.toString("utf8") };
      counts.total++;
      counts.byTarget[request.target] = (counts.byTarget[request.target] ?? 0) + 1;
      const clientWaiting = () => !req.socket.destroyed && !res.writableEnded;
      if (stallWhen?.(request)) {
        counts.stalled++;
        const entry: Held = {
          ...request,
          stalledAt: Date.now(),
          clientWaiting,
          forward: () => forward(req, res, body),
          drop: () => req.socket.destroy(),
        };
        held.add(entry);
        return;
      }
      const delay = typeof latency === "function" ? latency(request) : latency;
      if (delay > 0) setTimeout(() => forward(req, res, body), delay);
      else forward(req, res, body);
    });
  });
  server.keepAliveTimeout = 65_000;
  server.on("connection", (socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port ?? 0, "127.0.0.1", () => {
      server.off("error", reject);
      resolve();
    });
  });
  const { port } = server.address() as AddressInfo;

  const take = (which: RequestPredicate | undefined): Held[] => {
    const chosen = [...held].filter((h) => !which || which(h));
    for (const h of chosen) held.delete(h);
    return chosen;
  };

  return {
    endpoint: `http://127.0.0.1:${port}`,
    port,
    setLatency: (value) => {
      latency = value;
    },
    stall: (predicate) => {
      stallWhen = predicate;
    },
    stalled: () => [...held],
    dropStalled: (which) => {
      const chosen = take(which);
      for (const h of chosen) h.drop();
      counts.dropped += chosen.length;
      return chosen.length;
    },
    releaseStalled: (which) => {
      const chosen = take(which);
      for (const h of chosen) h.forward();
      counts.released += chosen.length;
      return chosen.length;
    },
    counts: () => ({ ...counts, byTarget: { ...counts.byTarget } }),
    close: () =>
      new Promise<void>((resolve) => {
        for (const h of take(undefined)) h.drop();
        for (const s of sockets) s.destroy();
        agent.destroy();
        server.close(() => resolve());
      }),
  };
}

/** The confirm transaction of a purchase (src/inventory/purchases.ts confirm): it makes the purchase its BookingConfirmed outbox record, unsent. */
export const isConfirmTransaction: RequestPredicate = (r) =>
  r.target === "TransactWriteItems" && r.body.includes('":outboxUnsent":{"S":"unsent"}');

/** The purchase id a confirm transaction confirms (the key of its purchase update), or null. */
export function purchaseOfConfirm(r: ProxiedRequest): string | null {
  if (!isConfirmTransaction(r)) return null;
  const m = /"PK":\{"S":"EVT#[^#"]+#PURCHASE#([^"]+)"\}/.exec(r.body);
  return m?.[1] ?? null;
}
