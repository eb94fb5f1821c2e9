/**
 * The request's logger, made on first use. A pino child per request (`logger.child({requestId})`)
 * serializes its bindings when it is made, and most requests never log: at on-sale rates the
 * eager child was work done for nothing on every poll. The child, once made, is the one the eager
 * code made, so a line logged carries the same `requestId`.
 */
import type { Bindings, Logger, LogFn } from "pino";

export type Level = "debug" | "info" | "warn" | "error";

/** What handlers may do with `c.get("log")`. */
export interface RequestLog {
  debug: LogFn;
  info: LogFn;
  warn: LogFn;
  error: LogFn;
  child(bindings: Bindings): Logger;
}

type Args = Parameters<LogFn>;

/** One object per request, its methods on the prototype (no closures made per request). */
class LazyRequestLog implements RequestLog {
  #child: Logger | undefined;
  constructor(
    private readonly parent: Logger,
    private readonly requestId: string,
  ) {}

  /** The child, made now if not yet. */
  get logger(): Logger {
    this.#child ??= this.parent.child({ requestId: this.requestId });
    return this.#child;
  }

  // A disabled level is a no-op on the child too: asking the parent first avoids making it.
  #at(level: Level, args: Args): void {
    if (this.#child || this.parent.isLevelEnabled(level)) this.logger[level](...args);
  }

  debug(...args: Args) {
    this.#at("debug", args);
  }
  info(...args: Args) {
    this.#at("info", args);
  }
  warn(...args: Args) {
    this.#at("warn", args);
  }
  error(...args: Args) {
    this.#at("error", args);
  }
  child(bindings: Bindings): Logger {
    return this.logger.child(bindings);
  }
}

export function lazyRequestLog(parent: Logger, requestId: string): RequestLog {
  return new LazyRequestLog(parent, requestId);
}
