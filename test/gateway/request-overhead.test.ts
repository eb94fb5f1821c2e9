/**
 * The per-request work cut from the hot paths (issue 14) without changing what a client sees:
 * the body limit no longer makes @hono/node-server build the full fetch Request for every
 * request (a GET never needs one; a POST with a declared length checks the header), the
 * request's logger is made only when something is logged, and the queue-token check is
 * synchronous. The gateway runs on a real socket, against real Redis and DynamoDB.
 */
import { inspect } from "node:util";
import { Hono } from "hono";
import pino from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { AppDeps, AppEnv } from "../../src/http/context.js";
import { requireQueueToken } from "../../src/http/middleware/fan-auth.js";
import { lazyRequestLog } from "../../src/http/request-log.js";
import { listenApp } from "../../src/http/serve.js";
import { createTokenService } from "../../src/waiting-room/index.js";
import { type RawResponse, sendRaw } from "../chaos/support/http.js";
import {
  type AdmittedFan,
  admitFans,
  createTable,
  type Gateway,
  putEvent,
  SECRET,
  startGateway,
  uniqueId,
} from "./harness.js";

let gw: Gateway;
let port: number;
let close: () => Promise<void>;
let eventId: string;
let fans: AdmittedFan[];
/** Every request the server handed the app, to look at after the answer. */
const seen: Request[] = [];

beforeAll(async () => {
  gw = await startGateway({ tableName: await createTable() });
  eventId = uniqueId();
  expect((await putEvent(gw, eventId)).status).toBe(201);
  fans = await admitFans(gw, eventId, ["alice", "bob", "carol"]);
  const served = await listenApp({
    // Node's {incoming, outgoing} passed on, as the gateway's own server does.
    fetch: (req, env) => {
      seen.push(req);
      return gw.app.fetch(req, env);
    },
    port: 0,
    host: "127.0.0.1",
  });
  port = served.port;
  close = () =>
    new Promise<void>((resolve) => {
      served.server.closeAllConnections();
      served.server.close(() => resolve());
    });
}, 120_000);
afterAll(async () => {
  await close?.();
  await gw?.close();
});

async function raw(head: string, body: Buffer | string = ""): Promise<RawResponse> {
  const method = head.slice(0, head.indexOf(" "));
  const bytes = Buffer.concat([Buffer.from(head, "latin1"), Buffer.from(body)]);
  const outcome = await sendRaw("127.0.0.1", port, bytes, { method, timeoutMs: 15_000 });
  if (outcome.kind !== "response") throw new Error(`no answer: ${outcome.reason}`);
  return outcome.response;
}

const json = (res: RawResponse) => JSON.parse(res.body.toString("utf8")) as Record<string, unknown>;
const code = (res: RawResponse) => (json(res).error as { code: string } | undefined)?.code;
const joinHead = (headers: string) =>
  `POST /v1/events/${eventId}/queue HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n${headers}\r\n`;
function chunked(body: string): string {
  let out = "";
  for (let i = 0; i < body.length; i += 4_000) {
    const part = body.slice(i, i + 4_000);
    out += `${Buffer.byteLength(part).toString(16)}\r\n${part}\r\n`;
  }
  return `${out}0\r\n\r\n`;
}
/** Whether @hono/node-server built the full fetch Request behind its lightweight one. */
const materialized = (req: Request) => !inspect(req, { depth: 1 }).includes("nativeRequest: undefined");

describe("the body limit, over a socket", () => {
  it("413 for a declared Content-Length over the limit, before the body is sent", async () => {
    const res = await raw(joinHead("Content-Length: 20000\r\n"));
    expect({ status: res.status, code: code(res) }).toEqual({ status: 413, code: "payload_too_large" });
  });

  it("413 for a chunked body that grows past the limit; a small chunked body and a small declared one are served", async () => {
    const big = JSON.stringify({ fanId: "x".repeat(20_000) });
    const over = await raw(joinHead("Transfer-Encoding: chunked\r\n"), chunked(big));
    expect({ status: over.status, code: code(over) }).toEqual({ status: 413, code: "payload_too_large" });

    const small = await raw(joinHead("Transfer-Encoding: chunked\r\n"), chunked(JSON.stringify({ fanId: "dave" })));
    expect(small.status, small.body.toString()).toBe(201);
    const declared = JSON.stringify({ fanId: "erin" });
    const plain = await raw(joinHead(`Content-Length: ${Buffer.byteLength(declared)}\r\n`), declared);
    expect(plain.status, plain.body.toString()).toBe(201);
    expect(json(plain).queueToken).toEqual(expect.any(String));
    // A declared length at the limit exactly is no overflow (the limit is inclusive, as hono's).
    const atLimit = await raw(
      joinHead(`Content-Length: ${16 * 1024}\r\n`),
      " ".repeat(16 * 1024 - 12) + '{"fanId":""}',
    );
    expect(atLimit.status).toBe(400);
    expect(code(atLimit)).toBe("invalid_request");
  });

  it("a GET, even one announcing a body, is served and never builds the full fetch Request", async () => {
    const alice = fans[0]!;
    const from = seen.length;
    const polled = await raw(
      `GET /v1/events/${eventId}/queue/status HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${alice.queueToken}\r\nContent-Length: 20000\r\n\r\n`,
      "x".repeat(20_000),
    );
    expect(polled.status, polled.body.toString()).toBe(200);
    expect(json(polled)).toMatchObject({ status: "admitted", accessToken: alice.accessToken });
    const requests = seen.slice(from);
    expect(requests).toHaveLength(1);
    expect(materialized(requests[0]!)).toBe(false);
  });

  it("status polls, seat maps and holds, many at once, build no full Request", async () => {
    const from = seen.length;
    const results = await Promise.all(
      Array.from({ length: 60 }, (_, i) => {
        const fan = fans[i % fans.length]!;
        if (i % 3 === 0) {
          return raw(
            `GET /v1/events/${eventId}/queue/status HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${fan.queueToken}\r\n\r\n`,
          );
        }
        if (i % 3 === 1) return raw(`GET /v1/events/${eventId}/sections/A/seats HTTP/1.1\r\nHost: x\r\n\r\n`);
        const body = JSON.stringify({ seats: [`B-1-${(i % 10) + 1}`] });
        return raw(
          `POST /v1/events/${eventId}/holds HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${fan.accessToken}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`,
          body,
        );
      }),
    );
    const statuses = results.map((r) => r.status);
    expect(statuses.filter((s) => s === 200)).toHaveLength(40);
    // 20 holds on 10 seats by 3 fans: each answered, as a hold or a refusal, none a server error.
    expect(statuses.filter((s) => s >= 500)).toEqual([]);
    expect(statuses.filter((s) => s === 201).length).toBeGreaterThan(0);
    const requests = seen.slice(from);
    expect(requests).toHaveLength(60);
    expect(requests.filter(materialized)).toHaveLength(0);
  });
});

describe("routing", () => {
  it("every route fits Hono's RegExpRouter (one refused path sends the whole app to the slower TrieRouter)", async () => {
    expect((await gw.app.request("/docs/assets/init.js")).status).toBe(200);
    const router = gw.app.router as unknown as { name: string; activeRouter: { name: string } };
    expect(router.name).toContain("SmartRouter");
    expect(router.activeRouter.name).toBe("RegExpRouter");
  });
});

describe("the request id, set on Node's response", () => {
  const id = (res: RawResponse) => res.headers["x-request-id"];
  it("every kind of answer carries exactly one X-Request-Id, the client's when sane, and the body's", async () => {
    const alice = fans[0]!;
    const holdBody = JSON.stringify({ seats: ["B-1-1", "B-1-1"] });
    const heads = [
      `GET /v1/events/${eventId}/queue/status HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${alice.queueToken}\r\n`,
      `GET /v1/events/${eventId}/sections/A/seats HTTP/1.1\r\nHost: x\r\nAccept-Encoding: br\r\n`,
      `GET /v1/events/${eventId}/sections/Z/seats HTTP/1.1\r\nHost: x\r\n`,
      `DELETE /v1/events/${eventId}/queue/status HTTP/1.1\r\nHost: x\r\n`,
      `GET /v1/events/${eventId}/queue/status HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer nope\r\n`,
      `POST /v1/events/${eventId}/holds HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${alice.accessToken}\r\nContent-Type: application/json\r\nContent-Length: ${holdBody.length}\r\n`,
    ];
    const answers = await Promise.all(
      heads.flatMap((head) => [
        raw(`${head}X-Request-Id: given-${heads.indexOf(head)}\r\n\r\n`, head.startsWith("POST") ? holdBody : ""),
        raw(`${head}X-Request-Id: not sane!\r\n\r\n`, head.startsWith("POST") ? holdBody : ""),
        raw(`${head}\r\n`, head.startsWith("POST") ? holdBody : ""),
      ]),
    );
    expect(answers.map((a) => a.status)).toEqual([
      200, 200, 200, 200, 200, 200, 404, 404, 404, 405, 405, 405, 401, 401, 401, 400, 400, 400,
    ]);
    for (const [n, answer] of answers.entries()) {
      const header = id(answer);
      // Joined with ", " had it been sent twice.
      expect(header, `answer ${n}`).toMatch(/^[\w\-=]{1,128}$/);
      if (n % 3 === 0) expect(header).toBe(`given-${n / 3}`);
      else expect(header).not.toContain("sane");
      if (answer.status >= 400) expect((json(answer).error as { requestId: string }).requestId).toBe(header);
    }
    expect(new Set(answers.filter((_, n) => n % 3 !== 0).map(id)).size).toBe(12);
  });
});

describe("the request's logger", () => {
  function logged(level: string) {
    const lines: Record<string, unknown>[] = [];
    let children = 0;
    const parent = pino(
      { level, onChild: () => children++ },
      { write: (line: string) => lines.push(JSON.parse(line)) },
    );
    return { parent, lines, children: () => children };
  }

  it("makes no child for a request that logs nothing, or only below the level", () => {
    const { parent, lines, children } = logged("info");
    const log = lazyRequestLog(parent, "req-1");
    log.debug({ a: 1 }, "not at info");
    expect(children()).toBe(0);
    expect(lines).toEqual([]);
  });

  it("makes one child, with the request id, for a request that logs; its own children carry both", () => {
    const { parent, lines, children } = logged("debug");
    const log = lazyRequestLog(parent, "req-2");
    log.debug({ a: 1 }, "first");
    log.info("second");
    log.warn({ b: 2 }, "third");
    log.error(new Error("boom"), "fourth");
    log.child({ eventId: "e1" }).info("fifth");
    expect(children()).toBe(2); // the request's, then the event's below it
    expect(lines.map((l) => [l.msg, l.requestId, l.level])).toEqual([
      ["first", "req-2", 20],
      ["second", "req-2", 30],
      ["third", "req-2", 40],
      ["fourth", "req-2", 50],
      ["fifth", "req-2", 30],
    ]);
    expect(lines[0]).toMatchObject({ a: 1 });
    expect(lines[3]).toMatchObject({ err: { message: "boom" } });
    expect(lines[4]).toMatchObject({ eventId: "e1" });
  });
});

describe("the queue-token check", () => {
  it("answers synchronously: claims, or a thrown 401/403, never a promise", async () => {
    const tokens = createTokenService({ secret: SECRET });
    const token = tokens.signQueueToken({ fanId: "alice", eventId: "finals" });
    const app = new Hono<AppEnv>().get("/:eventId", (c) => {
      c.set("deps", { waitingRoom: tokens } as unknown as AppDeps);
      const claims = requireQueueToken(c, c.req.param("eventId"));
      return c.json({ promise: (claims as unknown) instanceof Promise, fanId: claims.fanId });
    });
    app.onError((err, c) => c.json({ error: err.message }, 401));
    const ok = await app.request("/finals", { headers: { authorization: `Bearer ${token}` } });
    expect(await ok.json()).toEqual({ promise: false, fanId: "alice" });
    const other = await app.request("/semis", { headers: { authorization: `Bearer ${token}` } });
    expect(await other.json()).toEqual({ error: "the token belongs to another event" });
  });
});
