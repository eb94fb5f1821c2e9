/**
 * Stand-ins for what the page models talk to, so they run under plain Node: an API whose answers
 * a test gives per request (and may hold back, to order them), and a seat stream the test drives.
 * The models see the same `call`/`url`/`now` and stream handlers the browser gives them.
 */
import type { ApiErrorBody, ApiResult, CallOptions } from "../../waiting-room/src/api.js";
import type { OpenStream, StreamHandlers } from "../../waiting-room/src/seatmap-model.js";

export interface Call {
  method: string;
  path: string;
  options: CallOptions;
  answer(result: ApiResult<unknown>): void;
}

export const ok = <T>(body: T, status = 200): ApiResult<T> => ({ ok: true, status, body });
export const refused = (status: number, error: ApiErrorBody, retryAfter: number | null = null): ApiResult<never> => ({
  ok: false,
  status,
  error,
  retryAfter,
});
export const noAnswer = (): ApiResult<never> =>
  refused(0, { code: "network", message: "could not reach the box office" });

type Responder = (call: Omit<Call, "answer">) => ApiResult<unknown> | undefined;

/**
 * Answers at once through `respond` when it returns a result; otherwise the call waits in
 * `pending` until the test answers it.
 */
export class FakeApi {
  readonly calls: Omit<Call, "answer">[] = [];
  readonly pending: Call[] = [];
  private clock = 0;

  constructor(private readonly respond: Responder = () => undefined) {}

  url(path: string): string {
    return `http://gateway.test${path}`;
  }

  now(): number {
    return this.clock;
  }

  setNow(ms: number): void {
    this.clock = ms;
  }

  call<T>(method: string, path: string, options: CallOptions = {}): Promise<ApiResult<T>> {
    const call = { method, path, options };
    this.calls.push(call);
    const now = this.respond(call);
    if (now) return Promise.resolve(now as ApiResult<T>);
    return new Promise((resolve) => this.pending.push({ ...call, answer: (r) => resolve(r as ApiResult<T>) }));
  }

  /** The oldest unanswered call whose path contains `fragment`, taken off the list. */
  take(fragment: string): Call {
    const i = this.pending.findIndex((c) => c.path.includes(fragment));
    if (i < 0)
      throw new Error(`no pending call to ${fragment}; pending: ${this.pending.map((c) => c.path).join(", ")}`);
    return this.pending.splice(i, 1)[0]!;
  }

  count(fragment: string): number {
    return this.calls.filter((c) => c.path.includes(fragment)).length;
  }
}

export class FakeStream {
  handlers: StreamHandlers | null = null;
  url = "";
  opened = 0;
  closed = 0;

  readonly open: OpenStream = (url, on) => {
    this.url = url;
    this.handlers = on;
    this.opened++;
    return { close: () => this.closed++ };
  };

  seat(id: string, status: string): void {
    this.handlers?.seat(JSON.stringify({ id, status }));
  }
}

/** Lets every settled promise's continuation run. */
export const settle = () => new Promise<void>((resolve) => setImmediate(resolve));
