/**
 * The section seat map answered before Hono (src/http/fast-path.ts) answers exactly as the route
 * does. Two servers on one gateway, real Redis and DynamoDB: one with the fast path, one without
 * (the app alone). Every request of a matrix (formats, queries, encodings, If-None-Match, unknown
 * sections and events, HEAD, request ids) gets the same status, headers and bytes from both, and
 * the fast path declines what it cannot answer exactly. Under many concurrent reads and holds it
 * serves each new version, never an older one after a newer.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { IncomingMessage, ServerResponse } from "node:http";
import pino from "pino";
import { sectionFastPath } from "../../src/http/fast-path.js";
import { createMetrics } from "../../src/metrics.js";
import type { SectionPages } from "../../src/seatmap/pages.js";
import {
  type AdmittedFan,
  admitFans,
  createTable,
  type Gateway,
  metricTotal,
  putEvent,
  serveWithAndWithoutFastPath,
  startGateway,
  uniqueId,
} from "./harness.js";
import { type Exchange, exchange } from "../support/exchange.js";

type Raw = Exchange;

const raw = (port: number, path: string, headers: Record<string, string> = {}, method = "GET"): Promise<Raw> =>
  exchange(`http://127.0.0.1:${port}${path}`, headers, method);

/** What a client may compare: the headers but those that differ per exchange. */
function comparable(r: Raw) {
  const { date: _d, connection: _c, "keep-alive": _k, "x-request-id": _id, ...headers } = r.headers;
  let body = r.body.toString("base64");
  if (r.status >= 400) {
    // Error bodies carry the request id: compare the rest.
    const parsed = JSON.parse(r.body.toString("utf8")) as { error: Record<string, unknown> };
    delete parsed.error.requestId;
    body = JSON.stringify(parsed);
  }
  return { status: r.status, headers, body };
}

let gw: Gateway;
let eventId: string;
let fans: AdmittedFan[];
let fastPort: number;
let appPort: number;
/** What the fast path answered: method and URL, in order. */
const fastAnswered: string[] = [];
const closers: (() => Promise<void>)[] = [];

beforeAll(async () => {
  gw = await startGateway({ tableName: await createTable() });
  eventId = uniqueId();
  expect((await putEvent(gw, eventId)).status).toBe(201);
  fans = await admitFans(gw, eventId, ["ann", "ben", "cat", "dan"]);
  const app = gw.app;
  const servers = await serveWithAndWithoutFastPath(app, fastAnswered);
  closers.push(servers.close);
  fastPort = servers.fastPort;
  appPort = servers.appPort;
}, 120_000);

afterAll(async () => {
  for (const close of closers) await close();
  await gw?.close();
});

describe("the section fast path", () => {
  it("declines a first read (the event not yet in this process's cache), then answers from memory", async () => {
    const path = `/v1/events/${eventId}/sections/A/seats`;
    const first = await raw(fastPort, path);
    expect(first.status).toBe(200);
    expect(fastAnswered).toEqual([]);
    // Once the event is cached and the page trusted (its change feed live), reads are answered
    // from memory; a page due for its re-check (every 250 ms without a change heard) goes to the app.
    const deadline = Date.now() + 5_000;
    let answer = first;
    while (fastAnswered.length === 0 && Date.now() < deadline) answer = await raw(fastPort, path);
    expect(fastAnswered).toEqual([`GET ${path}`]);
    expect(answer.body.equals(first.body)).toBe(true);
  });

  it("answers every request of the matrix as the app does: status, headers, bytes", async () => {
    const section = `/v1/events/${eventId}/sections/A/seats`;
    const probe = await raw(appPort, section);
    const tag = String(probe.headers.etag);
    const paths = [
      section,
      `${section}?format=json`,
      `${section}?format=compact`,
      `${section}?format=bogus`,
      `${section}?format=compact&x=1`,
      `${section}?`,
      `${section}/`,
      `/v1/events/${eventId}/sections/Z/seats`,
      `/v1/events/${uniqueId()}/sections/A/seats`,
      `/v1/events/bad-id!/sections/A/seats`,
    ];
    const headerSets: Record<string, string>[] = [
      {},
      { "accept-encoding": "gzip" },
      { "accept-encoding": "br" },
      { "accept-encoding": "gzip, br" },
      { "accept-encoding": "br;q=0, gzip;q=0.5" },
      { "accept-encoding": "*;q=0" },
      { "if-none-match": tag },
      { "if-none-match": `W/${tag}`, "accept-encoding": "br" },
      { "if-none-match": `"nope", ${tag}`, "accept-encoding": "gzip" },
      { "if-none-match": `${tag.slice(0, -1)}.c"` },
      { "if-none-match": "*" },
      { "x-request-id": "echo-me" },
    ];
    // Warm both: the fast path needs the event in the cache.
    await raw(fastPort, section);
    const before = fastAnswered.length;
    const cases = paths.flatMap((path) => headerSets.map((headers) => ({ path, headers })));
    cases.push({ path: section, headers: {} }, { path: `${section}?format=compact`, headers: {} });
    const pairs = await Promise.all(
      cases.map(async ({ path, headers }) => ({
        path,
        headers,
        fast: await raw(fastPort, path, headers),
        app: await raw(appPort, path, headers),
      })),
    );
    for (const { path, headers, fast, app } of pairs) {
      expect(comparable(fast), `${path} ${JSON.stringify(headers)}`).toEqual(comparable(app));
      if (headers["x-request-id"]) expect(fast.headers["x-request-id"]).toBe("echo-me");
      else expect(fast.headers["x-request-id"]).toMatch(/^[0-9a-f-]{36}$/);
    }
    // Only the section's own forms went the fast way (most of them: a page due for its re-check
    // goes to the app); nothing else did.
    const fast = fastAnswered.slice(before);
    expect(fast.length).toBeGreaterThan(0);
    expect(fast.filter((a) => !paths.slice(0, 3).some((p) => a === `GET ${p}`))).toEqual([]);
    expect(pairs.filter((p) => p.fast.status === 304).length).toBeGreaterThan(0);
    // `*` matches any current representation of a section that exists (RFC 9110 §13.1.2)
    const star = pairs.find((p) => p.path === section && p.headers["if-none-match"] === "*");
    expect(star?.app.status).toBe(304);
  });

  it("declines HEAD and leaves it to the app", async () => {
    const before = fastAnswered.length;
    const head = await raw(fastPort, `/v1/events/${eventId}/sections/A/seats`, {}, "HEAD");
    const app = await raw(appPort, `/v1/events/${eventId}/sections/A/seats`, {}, "HEAD");
    expect(fastAnswered.length).toBe(before);
    expect(comparable(head)).toEqual(comparable(app));
  });

  it("counts its answers in the request histogram under the route's own label", async () => {
    const labels = { route: "/v1/events/:eventId/sections/:sectionId/seats", status: "200" };
    const before = await metricTotal(gw, "gateway_http_request_duration_seconds_count", labels);
    const path = `/v1/events/${eventId}/sections/B/seats`;
    const fastBefore = fastAnswered.length;
    // Sequential reads until the page is trusted, then 20 at once.
    const deadline = Date.now() + 5_000;
    let warmed = 0;
    while (fastAnswered.length === fastBefore && Date.now() < deadline) {
      await raw(fastPort, path);
      warmed++;
    }
    await Promise.all(Array.from({ length: 20 }, () => raw(fastPort, path)));
    expect(fastAnswered.length - fastBefore).toBeGreaterThan(1);
    // Every read counted once, whichever way it was answered.
    expect(await metricTotal(gw, "gateway_http_request_duration_seconds_count", labels)).toBe(before + warmed + 20);
  });

  it("under concurrent reads and holds, serves each new version and never an older one after a newer", async () => {
    const section = `/v1/events/${eventId}/sections/B/seats`;
    await raw(fastPort, section);
    const versionsSeen: string[][] = Array.from({ length: 8 }, () => []);
    let holding = true;
    const readers = versionsSeen.map(async (seen) => {
      while (holding) {
        const r = await raw(fastPort, `${section}?format=compact`);
        expect(r.status).toBe(200);
        const { version } = JSON.parse(r.body.toString("utf8")) as { version: string };
        if (seen.at(-1) !== version) seen.push(version);
      }
    });
    const seats = ["B-1-1", "B-1-2", "B-1-3", "B-1-4", "B-2-1", "B-2-2", "B-2-3", "B-2-4"];
    const holds = await Promise.all(
      seats.map((seat, i) =>
        gw.request(`/v1/events/${eventId}/holds`, {
          method: "POST",
          json: { seats: [seat] },
          token: fans[i % fans.length]!.accessToken,
        }),
      ),
    );
    expect(holds.filter((h) => h.status === 201).length).toBeGreaterThan(0);
    // Until a read shows every granted seat held, through the fast path.
    const granted = (
      await Promise.all(
        holds.map(async (h) => (h.status === 201 ? ((await h.json()) as { seats: string[] }).seats : [])),
      )
    ).flat();
    const deadline = Date.now() + 10_000;
    let statuses: Record<string, string> = {};
    while (Date.now() < deadline) {
      const r = await raw(fastPort, section);
      const body = JSON.parse(r.body.toString("utf8")) as { seats: { id: string; status: string }[] };
      statuses = Object.fromEntries(body.seats.map((s) => [s.id, s.status]));
      if (granted.every((id) => statuses[id] === "held")) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    holding = false;
    await Promise.all(readers);
    expect(granted.map((id) => statuses[id])).toEqual(granted.map(() => "held"));
    // Versions only move forward for each reader (a version seen again after a newer one would repeat).
    for (const seen of versionsSeen) expect(new Set(seen).size).toBe(seen.length);
  });
});

describe("the section fast path, on its own", () => {
  it("declines a page that is still being read and leaves no rejection behind when that read fails", async () => {
    const failed: unknown[] = [];
    const onUnhandled = (reason: unknown) => failed.push(reason);
    process.on("unhandledRejection", onUnhandled);
    try {
      const pages: SectionPages = {
        get: () => Promise.reject(new Error("neither the cache nor DynamoDB answered")),
        peek: () => null,
        stats: () => ({ pages: 0, events: 0 }),
        close: () => undefined,
      };
      const fast = sectionFastPath({
        deps: {
          sectionPages: pages,
          waitingRoom: { ensureRoom: () => undefined } as never,
          metrics: createMetrics(),
          logger: pino({ level: "silent" }),
        },
        knownSection: () => true,
      });
      const incoming = { method: "GET", url: "/v1/events/e1/sections/A/seats", headers: {} } as IncomingMessage;
      const outgoing = {
        writeHead: () => {
          throw new Error("the fast path wrote an answer");
        },
      } as unknown as ServerResponse;
      expect(fast(incoming, outgoing)).toBe(false);
      // Long enough for an unhandled rejection to be reported.
      await new Promise((r) => setTimeout(r, 50));
      expect(failed).toEqual([]);
    } finally {
      process.off("unhandledRejection", onUnhandled);
    }
  });
});
