/**
 * The chaos scenarios' HTTP client: every request any fan (or the test) sends goes through one
 * `Traffic`, which counts the answers by status class (2xx, 4xx, 503, any other 5xx, and requests
 * that got no HTTP answer at all because the process died under them), keeps their latencies by
 * kind of request and phase, and notes every answer that breaks the contract's form: a 503
 * without Retry-After, an error without the JSON error body, a 5xx other than 503.
 */

export type RequestKind =
  | "join"
  | "status"
  | "hold"
  | "purchase"
  | "purchase-get"
  | "release"
  | "seatmap"
  | "admin"
  | "other";

export interface Answer {
  /** 0 when no HTTP answer came (connection refused or reset, no gateway up, client timeout). */
  status: number;
  body: unknown;
  headers: Headers;
  startedAt: number;
  endedAt: number;
  ms: number;
  /** Why there was no answer, when status is 0. */
  error?: string;
}

export interface RequestOptions {
  method?: string;
  json?: unknown;
  token?: string;
  headers?: Record<string, string>;
  kind?: RequestKind;
  /** The client gives up after this long (default 30 s). */
  timeoutMs?: number;
}

export interface TrafficCounts {
  total: number;
  ok: number;
  clientErrors: number;
  /** 503: a dependency down, honest and retryable. */
  unavailable: number;
  /** Any 5xx other than 503. */
  serverErrors: number;
  /** No HTTP answer (the process was killed under the request, or none was up). */
  noAnswer: number;
  /** By kind of request, then by status ("0" = no answer). */
  byKind: Record<string, Record<string, number>>;
}

export interface Violation {
  kind: RequestKind;
  status: number;
  problem: string;
}

/** p-th percentile (0..100) of `values`, nearest rank; NaN when empty. */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[rank]!;
}

export class Traffic {
  readonly counts: TrafficCounts = {
    total: 0,
    ok: 0,
    clientErrors: 0,
    unavailable: 0,
    serverErrors: 0,
    noAnswer: 0,
    byKind: {},
  };
  readonly violations: Violation[] = [];
  /** Latencies (ms) of answered requests, by `${phase}/${kind}`. */
  readonly latencies = new Map<string, number[]>();
  private phase = "sale";

  /** `baseUrl()` picks the gateway for each request (undefined: none is up). */
  constructor(private readonly baseUrl: () => string | undefined) {}

  /** Latencies recorded from now on are filed under `phase`. */
  setPhase(phase: string): void {
    this.phase = phase;
  }

  latency(phase: string, kind: RequestKind): { n: number; p50: number; p95: number } {
    const values = this.latencies.get(`${phase}/${kind}`) ?? [];
    return { n: values.length, p50: percentile(values, 50), p95: percentile(values, 95) };
  }

  async request(path: string, options: RequestOptions = {}): Promise<Answer> {
    const kind = options.kind ?? "other";
    const startedAt = Date.now();
    const base = this.baseUrl();
    let answer: Answer;
    if (base === undefined) {
      answer = {
        status: 0,
        body: null,
        headers: new Headers(),
        startedAt,
        endedAt: startedAt,
        ms: 0,
        error: "no gateway",
      };
    } else {
      const headers = new Headers(options.headers);
      if (options.json !== undefined) headers.set("content-type", "application/json");
      if (options.token) headers.set("authorization", `Bearer ${options.token}`);
      try {
        const res = await fetch(`${base}${path}`, {
          method: options.method ?? "GET",
          headers,
          ...(options.json !== undefined ? { body: JSON.stringify(options.json) } : {}),
          signal: AbortSignal.timeout(options.timeoutMs ?? 30_000),
        });
        const text = await res.text();
        let body: unknown = text;
        try {
          body = text ? JSON.parse(text) : null;
        } catch {
          // not JSON: kept as text, and judged below if it is an error
        }
        const endedAt = Date.now();
        answer = { status: res.status, body, headers: res.headers, startedAt, endedAt, ms: endedAt - startedAt };
      } catch (err) {
        const endedAt = Date.now();
        const cause = (err as { cause?: { code?: string; message?: string } }).cause;
        answer = {
          status: 0,
          body: null,
          headers: new Headers(),
          startedAt,
          endedAt,
          ms: endedAt - startedAt,
          error: cause?.code ?? cause?.message ?? (err as Error).message,
        };
      }
    }
    this.record(kind, answer);
    return answer;
  }

  private record(kind: RequestKind, answer: Answer): void {
    const c = this.counts;
    c.total++;
    const byKind = c.byKind[kind] ?? {};
    c.byKind[kind] = byKind;
    byKind[String(answer.status)] = (byKind[String(answer.status)] ?? 0) + 1;
    const s = answer.status;
    if (s === 0) {
      c.noAnswer++;
      return;
    }
    const key = `${this.phase}/${kind}`;
    const list = this.latencies.get(key) ?? [];
    list.push(answer.ms);
    this.latencies.set(key, list);
    if (s < 400) c.ok++;
    else if (s < 500) c.clientErrors++;
    else if (s === 503) c.unavailable++;
    else c.serverErrors++;
    if (s >= 500 && s !== 503)
      this.violations.push({ kind, status: s, problem: `a ${s}: ${JSON.stringify(answer.body)}` });
    if (s === 503 && !answer.headers.get("retry-after")) {
      this.violations.push({ kind, status: s, problem: "a 503 without Retry-After" });
    }
    if (s >= 400 && !isErrorBody(answer.body)) {
      this.violations.push({
        kind,
        status: s,
        problem: `an error without the JSON error body: ${String(answer.body)}`,
      });
    }
  }

  /** One line for a report's notes. */
  summary(): string {
    const c = this.counts;
    return `${c.total} requests: ${c.ok} 2xx/3xx, ${c.clientErrors} 4xx, ${c.unavailable} 503, ${c.serverErrors} other 5xx, ${c.noAnswer} without answer`;
  }
}

function isErrorBody(body: unknown): boolean {
  if (typeof body !== "object" || body === null) return false;
  const error = (body as { error?: { code?: unknown; message?: unknown; requestId?: unknown } }).error;
  return (
    typeof error === "object" &&
    error !== null &&
    typeof error.code === "string" &&
    typeof error.message === "string" &&
    typeof error.requestId === "string"
  );
}
