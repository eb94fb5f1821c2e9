/**
 * What the fast-path test files (join, hold, poll) share: one gateway served twice, with the fast
 * paths and without (the app alone), so each answer of the fast server can be compared with the
 * app's for the same request; whether the fast path answered a request itself; and the part of an
 * answer both servers must agree on.
 */
import { expect } from "vitest";
import type { Exchange } from "../support/exchange.js";
import { type Gateway, serveWithAndWithoutFastPath, startGateway } from "./harness.js";

export interface FastPathPair {
  gw: Gateway;
  /** The server with the fast paths in front of the app. */
  fastPort: number;
  /** The app alone. */
  appPort: number;
  /** What the fast paths answered themselves ("METHOD url"), in order. */
  fastAnswered: readonly string[];
  /** Sends through the fast server; whether the fast path answered it (not the app behind it). */
  viaFast(send: (port: number) => Promise<Exchange>): Promise<{ answer: Exchange; fast: boolean }>;
  /**
   * Sends through the fast server until the fast path answers (its view read, the change heard),
   * at most 10 s; `between` runs after each answer the app gave, before a pause of `pauseMs`.
   */
  untilFast(
    send: (port: number) => Promise<Exchange>,
    options: { pauseMs: number; between?: (answer: Exchange) => unknown },
  ): Promise<Exchange>;
  close(): Promise<void>;
}

export async function startFastPathPair(options: Parameters<typeof startGateway>[0]): Promise<FastPathPair> {
  const gw = await startGateway(options);
  const fastAnswered: string[] = [];
  let servers: Awaited<ReturnType<typeof serveWithAndWithoutFastPath>>;
  try {
    servers = await serveWithAndWithoutFastPath(gw.app, fastAnswered);
  } catch (err) {
    await gw.close();
    throw err;
  }
  const viaFast: FastPathPair["viaFast"] = async (send) => {
    const before = fastAnswered.length;
    const answer = await send(servers.fastPort);
    return { answer, fast: fastAnswered.length > before };
  };
  return {
    gw,
    fastPort: servers.fastPort,
    appPort: servers.appPort,
    fastAnswered,
    viaFast,
    async untilFast(send, { pauseMs, between }) {
      const deadline = Date.now() + 10_000;
      for (;;) {
        const { answer, fast } = await viaFast(send);
        if (fast) return answer;
        if (Date.now() > deadline) throw new Error("the fast path never answered");
        await between?.(answer);
        await new Promise((resolve) => setTimeout(resolve, pauseMs));
      }
    },
    async close() {
      await servers.close();
      await gw.close();
    },
  };
}

export type ComparableBody = Record<string, unknown> & { error?: Record<string, unknown> };

/**
 * What both servers must agree on: status, headers but those of each exchange, and the JSON body
 * but the request id of an error. `own`: body fields that are each caller's own (a fan's token and
 * place), compared by type only; `lengthVaries`: the body's length is not compared either (it
 * varies with those fields, or with an error's request id).
 */
export function comparable(r: Exchange, options: { own?: readonly string[]; lengthVaries?: boolean } = {}) {
  const { date: _d, connection: _c, "keep-alive": _k, "x-request-id": _id, ...headers } = r.headers;
  if (options.lengthVaries) delete headers["content-length"];
  const body = JSON.parse(r.body.toString("utf8")) as ComparableBody;
  if (body.error) delete body.error.requestId;
  for (const own of options.own ?? []) {
    if (own in body) body[own] = typeof body[own];
  }
  return { status: r.status, headers, body };
}

/** `answer` is the app's 429 for `limit`, as the fast path must give it too. */
export function expectRateLimited(answer: { headers: Exchange["headers"]; body: ComparableBody }, limit: string) {
  expect(answer.body).toEqual({
    error: { code: "rate_limited", message: "too many requests; slow down", details: { limit } },
  });
  expect(Number(answer.headers["retry-after"])).toBeGreaterThanOrEqual(1);
}
