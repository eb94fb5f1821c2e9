/**
 * The plain join (`{"fanId": ...}`) answered before Hono (src/http/fast-path.ts queueJoinFastPath)
 * answers as the route does: two servers on one gateway, real Redis and DynamoDB, one with the
 * fast path, one without. Same status, headers (but those of each exchange) and body (but the
 * queue token and the place, which are each fan's own); every other join goes to the app with its
 * body, and the app answers it as if no fast path had looked.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Exchange, exchange } from "../support/exchange.js";
import {
  comparable as comparableOf,
  expectRateLimited,
  type FastPathPair,
  startFastPathPair,
} from "./fast-path-harness.js";
import { ADMIN_TOKEN, createTable, eventInput, type Gateway, putEvent, uniqueId } from "./harness.js";

const PER_IP = 20;

let pair: FastPathPair;
let gw: Gateway;
let fastPort: number;
let appPort: number;

beforeAll(async () => {
  pair = await startFastPathPair({ tableName: await createTable(), limits: { ratePerIp: PER_IP } });
  ({ gw, fastPort, appPort } = pair);
}, 120_000);

afterAll(async () => {
  await pair?.close();
});

async function newEvent(settings: Record<string, unknown> = {}): Promise<string> {
  const eventId = uniqueId("jf");
  const put = await putEvent(
    gw,
    eventId,
    eventInput({ waitingRoom: { admitPerSecond: 1, maxActive: 1, sessionSeconds: 600 } }),
  );
  expect(put.status).toBe(201);
  // The room's one session taken: every fan after waits, whichever server answers.
  expect((await gw.request(`/v1/events/${eventId}/queue`, { method: "POST", json: { fanId: "opener" } })).status).toBe(
    201,
  );
  if (Object.keys(settings).length > 0) {
    const patched = await gw.request(`/v1/admin/events/${eventId}/waiting-room`, {
      method: "PATCH",
      json: settings,
      token: ADMIN_TOKEN,
    });
    expect(patched.status).toBe(200);
  }
  return eventId;
}

const join = (port: number, eventId: string, body: unknown, headers: Record<string, string> = {}): Promise<Exchange> =>
  exchange(
    `http://127.0.0.1:${port}/v1/events/${eventId}/queue`,
    { "content-type": "application/json", ...headers },
    "POST",
    typeof body === "string" ? body : JSON.stringify(body),
  );

/** What both servers must agree on: the fan's own token and place aside. */
const comparable = (r: Exchange) =>
  comparableOf(r, {
    own: ["queueToken", "fanId", "position", "ahead", "etaSeconds", "pollAfterMs"],
    lengthVaries: true,
  });

/** Joins through the fast server; says whether the fast path answered it (not the app behind it). */
const viaFast = (eventId: string, body: unknown, headers?: Record<string, string>) =>
  pair.viaFast((port) => join(port, eventId, body, headers));

describe("the join fast path", () => {
  it("answers a plain join and a repeat join as the route does", async () => {
    const eventId = await newEvent();
    const first = await viaFast(eventId, { fanId: "fast-1" });
    expect(first.fast).toBe(true);
    const fromApp = await join(appPort, eventId, { fanId: "app-1" });
    expect(first.answer.status).toBe(201);
    expect(comparable(first.answer)).toEqual(comparable(fromApp));
    expect(first.answer.headers["x-request-id"]).toBeTruthy();

    // A repeat join is answered by the fast path too (the join's script says the room asks no invite).
    const again = await viaFast(eventId, { fanId: "app-1" });
    expect(again.fast).toBe(true);
    const appAgain = await join(appPort, eventId, { fanId: "fast-1" });
    expect(again.answer.status).toBe(200);
    expect(comparable(again.answer)).toEqual(comparable(appAgain));
    expect(JSON.parse(again.answer.body.toString()).position).toBe(JSON.parse(fromApp.body.toString()).position);

    const echoed = await join(fastPort, eventId, { fanId: "fast-2" }, { "x-request-id": "echo-me-please" });
    expect(echoed.headers["x-request-id"]).toBe("echo-me-please");
    expect(
      await join(fastPort, eventId, { fanId: "fast-3" }, { "content-type": "application/json; charset=utf-8" }),
    ).toMatchObject({ status: 201 });
  });

  it("hands a place given back in a line for invited fans only to the app, which asks for the invite", async () => {
    // Places made before the operator turned invites on: given back only with an invite from then.
    const eventId = await newEvent();
    expect((await join(fastPort, eventId, { fanId: "early-1" })).status).toBe(201);
    expect((await join(appPort, eventId, { fanId: "early-2" })).status).toBe(201);
    const patched = await gw.request(`/v1/admin/events/${eventId}/waiting-room`, {
      method: "PATCH",
      json: { invites: true },
      token: ADMIN_TOKEN,
    });
    expect(patched.status).toBe(200);
    const again = await viaFast(eventId, { fanId: "early-1" });
    expect(again.fast).toBe(false);
    expect(again.answer.status).toBe(428);
    expect(JSON.parse(again.answer.body.toString()).error.code).toBe("invite_required");
    expect(comparable(again.answer)).toEqual(comparable(await join(appPort, eventId, { fanId: "early-2" })));
  });

  it("answers the route's errors: unknown event, closed line, proof of work or invite asked", async () => {
    const unknown = uniqueId("nope");
    const gone = await viaFast(unknown, { fanId: "f" });
    expect(gone.fast).toBe(true);
    expect(comparable(gone.answer)).toEqual(comparable(await join(appPort, unknown, { fanId: "f" })));
    expect(gone.answer.status).toBe(404);

    const pow = await newEvent({ powBits: 8 });
    const asked = await viaFast(pow, { fanId: "f1" });
    expect(asked.fast).toBe(true);
    expect(asked.answer.status).toBe(428);
    expect(comparable(asked.answer)).toEqual(comparable(await join(appPort, pow, { fanId: "f2" })));

    const invites = await newEvent({ invites: true });
    const uninvited = await viaFast(invites, { fanId: "f1" });
    expect(uninvited.answer.status).toBe(428);
    expect(comparable(uninvited.answer)).toEqual(comparable(await join(appPort, invites, { fanId: "f2" })));

    const closed = await newEvent({ closed: true });
    const late = await viaFast(closed, { fanId: "f1" });
    expect(late.answer.status).toBe(403);
    expect(comparable(late.answer)).toEqual(comparable(await join(appPort, closed, { fanId: "f2" })));
  });

  it("hands every other join to the app with its body: a proof, an extra key, bad JSON, a bad fan id, another type", async () => {
    const eventId = await newEvent();
    // Each body for each server (a fan id the app would place must be new to each).
    const cases: [(server: string) => unknown, Record<string, string>?][] = [
      [(t) => ({ fanId: `p1${t}`, pow: { challenge: "c", nonce: "n" } })],
      [(t) => ({ fanId: `p2${t}`, extra: 1 })],
      [(t) => `{"fanId": "p3${t}"`],
      [(t) => ({ fanId: `tab\there${t}` })],
      [() => ({ fanId: "" })],
      [() => ({ fanId: 42 })],
      [() => ["fanId"]],
      [(t) => ({ fanId: `p4${t}` }), { "content-type": "text/plain" }],
      [(t) => ({ fanId: `p5${t}` }), { "content-type": "application/vnd.api+json" }],
    ];
    for (const [body, headers] of cases) {
      const fast = await viaFast(eventId, body("f"), headers);
      expect(fast.fast, JSON.stringify(body("f"))).toBe(false);
      const fromApp = await join(appPort, eventId, body("a"), headers);
      expect(comparable(fast.answer), JSON.stringify(body("f"))).toEqual(comparable(fromApp));
    }
    // The app did read the body the fast path had read: a proof that does not check is its 400.
    const proof = await join(fastPort, eventId, { fanId: "p6", pow: { challenge: "c", nonce: "n" } });
    expect(JSON.parse(proof.body.toString()).error.code).toBe("invalid_proof");
  });

  it("refuses past the per-IP limit with the app's 429, 3x the burst in flight", async () => {
    const eventId = await newEvent();
    // Both servers at once (one gateway, one bucket per IP and event): 3/4 of the joins fast.
    const sent = Array.from({ length: PER_IP * 2 * 3 }, (_, i) => ({ port: i % 4 === 0 ? appPort : fastPort, i }));
    const started = performance.now();
    const answers = await Promise.all(sent.map(({ port, i }) => join(port, eventId, { fanId: `burst-${i}` })));
    const seconds = (performance.now() - started) / 1000;
    const statuses = answers.map((a) => a.status);
    expect(statuses.filter((s) => s !== 201 && s !== 429)).toEqual([]);
    expect(statuses.filter((s) => s === 201).length).toBeGreaterThanOrEqual(PER_IP * 2);
    // the burst, and what the bucket refilled while the requests were answered
    expect(statuses.filter((s) => s === 201).length).toBeLessThanOrEqual(PER_IP * 2 + Math.ceil(PER_IP * seconds) + 1);
    const refusedBy = (port: number) => answers.find((a, n) => a.status === 429 && sent[n]!.port === port);
    const refused = comparable(refusedBy(fastPort)!);
    expect(refused).toEqual(comparable(refusedBy(appPort)!));
    expectRateLimited(refused, "ip:join");
  });
});
