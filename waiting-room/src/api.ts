/**
 * A small client for the gateway's JSON API. Every call resolves (never throws) to either the
 * body or the API's error (`{code, message, details}`); a request that got no answer at all is
 * status 0, code `network`. It also tracks how far the server clock is from ours, so countdowns
 * (on-sale, hold, session) follow the server.
 */
export interface ApiErrorBody {
  code: string;
  message: string;
  details?: Record<string, unknown>;
}

export type ApiResult<T> =
  | { ok: true; status: number; body: T }
  | { ok: false; status: number; error: ApiErrorBody; retryAfter: number | null };

export interface CallOptions {
  token?: string | undefined;
  json?: unknown;
  headers?: Record<string, string>;
  /** Give up waiting after this long (the request may still have been processed). */
  timeoutMs?: number;
  /** Read the body as text instead of JSON. */
  text?: boolean;
}

export class Api {
  /** Server clock minus local clock, in ms, from the Date headers seen so far. */
  private skewMs = 0;
  private skewKnown = false;

  constructor(readonly base: string) {}

  /** Now, by the server's clock (to about a second). */
  now(): number {
    return Date.now() + this.skewMs;
  }

  url(path: string): string {
    return `${this.base}${path}`;
  }

  async call<T>(method: string, path: string, options: CallOptions = {}): Promise<ApiResult<T>> {
    const headers: Record<string, string> = { accept: "application/json", ...options.headers };
    if (options.token) headers.authorization = `Bearer ${options.token}`;
    let body: string | undefined;
    if (options.json !== undefined) {
      headers["content-type"] = "application/json";
      body = JSON.stringify(options.json);
    }
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(), options.timeoutMs ?? 15_000);
    const sentAt = Date.now();
    let res: Response;
    try {
      res = await fetch(this.url(path), { method, headers, body: body ?? null, signal: controller.signal });
    } catch {
      clearTimeout(timer);
      return {
        ok: false,
        status: 0,
        error: { code: "network", message: "could not reach the box office" },
        retryAfter: null,
      };
    }
    this.learnClock(res.headers.get("date"), sentAt, Date.now());
    try {
      const raw = res.status === 204 || res.status === 304 ? "" : await res.text();
      clearTimeout(timer);
      if (res.ok) {
        const parsed = options.text ? raw : raw ? JSON.parse(raw) : undefined;
        return { ok: true, status: res.status, body: parsed as T };
      }
      let error: ApiErrorBody = { code: "http_error", message: `the server answered ${res.status}` };
      try {
        const parsed = JSON.parse(raw) as { error?: ApiErrorBody };
        if (parsed.error && typeof parsed.error.code === "string") error = parsed.error;
      } catch {
        // not the API's JSON (a proxy's page): keep the generic error
      }
      const retry = Number(res.headers.get("retry-after"));
      return { ok: false, status: res.status, error, retryAfter: Number.isFinite(retry) && retry > 0 ? retry : null };
    } catch {
      clearTimeout(timer);
      return {
        ok: false,
        status: 0,
        error: { code: "network", message: "the answer was cut off" },
        retryAfter: null,
      };
    }
  }

  private learnClock(date: string | null, sentAt: number, receivedAt: number) {
    const server = date ? Date.parse(date) : Number.NaN;
    if (!Number.isFinite(server)) return;
    // The header has whole seconds: the server's clock was somewhere in [server, server + 1 s).
    const skew = server + 500 - (sentAt + receivedAt) / 2;
    // Ignore sub-second wobble; follow real differences.
    if (!this.skewKnown || Math.abs(skew - this.skewMs) > 1_000) this.skewMs = skew;
    this.skewKnown = true;
  }
}
