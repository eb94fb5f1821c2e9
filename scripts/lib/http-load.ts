/**
 * A small closed-loop HTTP load generator for the benchmarks: `connections` keep-alive sockets,
 * each sending its next request when the previous answer arrives, for `seconds`. The same
 * client measures every target, so the figures can be compared as ratios.
 */
import { Agent, request } from "node:http";

export interface LoadResult {
  name: string;
  requests: number;
  seconds: number;
  perSecond: number;
  p50Ms: number;
  p99Ms: number;
  statuses: Record<string, number>;
}

export interface LoadRequest {
  method?: string;
  path: string;
  headers?: Record<string, string>;
  body?: string;
}

export async function runLoad(options: {
  name: string;
  baseUrl: string;
  connections: number;
  seconds: number;
  /** The i-th request of the run. */
  next: (i: number) => LoadRequest;
}): Promise<LoadResult> {
  const url = new URL(options.baseUrl);
  const agent = new Agent({ keepAlive: true, maxSockets: options.connections });
  const latencies: number[] = [];
  const statuses: Record<string, number> = {};
  let i = 0;
  const deadline = performance.now() + options.seconds * 1000;

  const one = (req: LoadRequest) =>
    new Promise<number>((resolve, reject) => {
      const r = request(
        {
          agent,
          host: url.hostname,
          port: url.port,
          method: req.method ?? "GET",
          path: req.path,
          headers: { ...(req.body ? { "content-type": "application/json" } : {}), ...req.headers },
        },
        (res) => {
          res.resume();
          res.on("end", () => resolve(res.statusCode ?? 0));
        },
      );
      r.on("error", reject);
      r.end(req.body);
    });

  const start = performance.now();
  await Promise.all(
    Array.from({ length: options.connections }, async () => {
      while (performance.now() < deadline) {
        const req = options.next(i++);
        const t = performance.now();
        const status = await one(req).catch(() => 0);
        latencies.push(performance.now() - t);
        statuses[status] = (statuses[status] ?? 0) + 1;
      }
    }),
  );
  const seconds = (performance.now() - start) / 1000;
  agent.destroy();
  latencies.sort((a, b) => a - b);
  const at = (q: number) => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))] ?? 0;
  return {
    name: options.name,
    requests: latencies.length,
    seconds,
    perSecond: latencies.length / seconds,
    p50Ms: at(0.5),
    p99Ms: at(0.99),
    statuses,
  };
}
