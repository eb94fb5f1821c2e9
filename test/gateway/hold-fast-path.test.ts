/**
 * A hold that cannot win, refused before Hono from the process's own seat map
 * (src/http/fast-path.ts holdRefusalFastPath): two servers on one gateway, real Redis and DynamoDB,
 * one with the fast paths and one without. A hold of a seat the map shows taken is refused as the
 * route refuses it, with no Redis or DynamoDB call; any hold that could win goes the whole way
 * (the shield and DynamoDB's conditional write), and the race for one seat still has one winner.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Exchange, exchange } from "../support/exchange.js";
import {
  comparable as comparableOf,
  expectRateLimited,
  type FastPathPair,
  startFastPathPair,
} from "./fast-path-harness.js";
import {
  type AdmittedFan,
  admitFans,
  createTable,
  eventInput,
  type Gateway,
  metricTotal,
  putEvent,
  uniqueId,
} from "./harness.js";

const PER_FAN = 2;

let pair: FastPathPair;
let gw: Gateway;
let eventId: string;
let fans: AdmittedFan[];
let fastPort: number;
let appPort: number;

beforeAll(async () => {
  pair = await startFastPathPair({ tableName: await createTable(), limits: { ratePerFan: PER_FAN } });
  ({ gw, fastPort, appPort } = pair);
  eventId = uniqueId("hf");
  expect((await putEvent(gw, eventId, eventInput())).status).toBe(201);
  fans = await admitFans(
    gw,
    eventId,
    Array.from({ length: 40 }, (_, i) => `hf-${i}`),
  );
}, 120_000);

afterAll(async () => {
  await pair?.close();
});

const hold = (port: number, fan: AdmittedFan, body: unknown): Promise<Exchange> =>
  exchange(
    `http://127.0.0.1:${port}/v1/events/${eventId}/holds`,
    { "content-type": "application/json", authorization: `Bearer ${fan.accessToken}` },
    "POST",
    JSON.stringify(body),
  );

/** The error body carries the request id: its length may differ. */
const comparable = (r: Exchange) => comparableOf(r, { lengthVaries: true });

/** Holds through the fast server; whether the fast path answered it (not the app behind it). */
const viaFast = (fan: AdmittedFan, body: unknown) => pair.viaFast((port) => hold(port, fan, body));

/** Until the fast server refuses `seats` for `fan` from its map (the page read, the change heard). */
const untilRefusedFast = (fan: AdmittedFan, seats: string[]) =>
  pair.untilFast((port) => hold(port, fan, { seats }), {
    pauseMs: 1_000 / PER_FAN,
    between: (answer) => {
      // refused by the app (the shield), or by the fan's limit while we wait
      expect([409, 429]).toContain(answer.status);
      // The app's read of the section brings the page into memory: the next one is answered from it.
      return exchange(`http://127.0.0.1:${fastPort}/v1/events/${eventId}/sections/A/seats`);
    },
  });

describe("the hold refusal fast path", () => {
  it("refuses a seat the map shows taken as the route does, with no Redis or DynamoDB call", async () => {
    const [owner, other, third] = fans as [AdmittedFan, AdmittedFan, AdmittedFan];
    expect((await hold(appPort, owner, { seats: ["A-1-1"] })).status).toBe(201);
    const shieldBefore = await metricTotal(gw, "gateway_conflicts_total", { stage: "shield" });
    const writesBefore = await metricTotal(gw, "gateway_dynamodb_requests_total", { operation: "hold" });
    const fast = await untilRefusedFast(other, ["A-1-1"]);
    const fromApp = await hold(appPort, third, { seats: ["A-1-1"] });
    expect(comparable(fast)).toEqual(comparable(fromApp));
    expect(comparable(fast).body).toEqual({
      error: {
        code: "seat_unavailable",
        message: "these seats are already held or sold",
        details: { seats: ["A-1-1"] },
      },
    });
    // One taken, one free: refused, naming the taken one, as the shield names it.
    const mixed = await viaFast(third, { seats: ["A-1-2", "A-1-1"] });
    expect(mixed.fast).toBe(true);
    expect(comparable(mixed.answer)).toEqual(comparable(await hold(appPort, other, { seats: ["A-1-2", "A-1-1"] })));
    expect(await metricTotal(gw, "gateway_conflicts_total", { stage: "seat_map" })).toBeGreaterThanOrEqual(2);
    // The app's refusals went through the shield; no refusal reached DynamoDB.
    expect(await metricTotal(gw, "gateway_conflicts_total", { stage: "shield" })).toBe(shieldBefore + 2);
    expect(await metricTotal(gw, "gateway_dynamodb_requests_total", { operation: "hold" })).toBe(writesBefore);
  });

  it("leaves to the app every hold it cannot refuse: a free seat, a bad token, a seat twice, best available", async () => {
    const [, , , a, b] = fans as AdmittedFan[];
    await untilRefusedFast(b!, ["A-1-1"]);
    const free = await viaFast(a!, { seats: ["A-2-1"] });
    expect(free.fast).toBe(false);
    expect(free.answer.status).toBe(201);
    const twice = await viaFast(b!, { seats: ["A-1-1", "A-1-1"] });
    expect(twice.fast).toBe(false);
    expect(twice.answer.status).toBe(400);
    const unknown = await viaFast(b!, { seats: ["A-99-1", "A-1-1"] });
    expect(unknown.fast).toBe(false);
    expect(unknown.answer.status).toBe(404);
    const best = await viaFast(b!, { best: { quantity: 1, section: "B" } });
    expect(best.fast).toBe(false);
    expect(best.answer.status).toBe(201);
    const forged = await exchange(
      `http://127.0.0.1:${fastPort}/v1/events/${eventId}/holds`,
      { "content-type": "application/json", authorization: "Bearer not-a-token" },
      "POST",
      JSON.stringify({ seats: ["A-1-1"] }),
    );
    expect(forged.status).toBe(401);
  });

  it("one free seat, 30 fans in flight through the fast server: exactly one wins, the rest are refused", async () => {
    const crowd = fans.slice(8, 38);
    const answers = await Promise.all(crowd.map((fan) => hold(fastPort, fan, { seats: ["A-3-3"] })));
    const statuses = answers.map((a) => a.status);
    expect(statuses.filter((s) => s === 201)).toHaveLength(1);
    expect(statuses.filter((s) => s !== 201 && s !== 409)).toEqual([]);
    // Later ones are refused from the map once the hold is heard of.
    const late = await untilRefusedFast(fans[39]!, ["A-3-3"]);
    expect(late.status).toBe(409);
  });

  it("a seat whose hold expired is free to the next fan, as the shield and DynamoDB have it", async () => {
    const shortEvent = uniqueId("hx");
    expect((await putEvent(gw, shortEvent, eventInput({ holdSeconds: 2 }))).status).toBe(201);
    const [first, second] = await admitFans(gw, shortEvent, ["hx-1", "hx-2"]);
    const at = (port: number, fan: AdmittedFan) =>
      exchange(
        `http://127.0.0.1:${port}/v1/events/${shortEvent}/holds`,
        { "content-type": "application/json", authorization: `Bearer ${fan.accessToken}` },
        "POST",
        JSON.stringify({ seats: ["A-1-1"] }),
      );
    expect((await at(appPort, first!)).status).toBe(201);
    // Held: refused (from the map once it is read).
    await exchange(`http://127.0.0.1:${fastPort}/v1/events/${shortEvent}/sections/A/seats`);
    expect((await at(fastPort, second!)).status).toBe(409);
    await new Promise((resolve) => setTimeout(resolve, 2_300));
    // Past its expiry, whatever the map still shows: the claim path grants it.
    await exchange(`http://127.0.0.1:${fastPort}/v1/events/${shortEvent}/sections/A/seats`);
    expect((await at(fastPort, second!)).status).toBe(201);
  });

  it("takes the fan's limit in the route's bucket: a flood of refused holds meets the app's 429", async () => {
    const fan = fans[6]!;
    await untilRefusedFast(fans[7]!, ["A-1-1"]);
    await new Promise((resolve) => setTimeout(resolve, 1_500)); // the fan's bucket full
    const started = performance.now();
    const answers = await Promise.all(Array.from({ length: 12 }, () => hold(fastPort, fan, { seats: ["A-1-1"] })));
    const seconds = (performance.now() - started) / 1000;
    const statuses = answers.map((a) => a.status);
    expect(statuses.filter((s) => s !== 409 && s !== 429)).toEqual([]);
    expect(statuses.filter((s) => s === 409).length).toBeGreaterThanOrEqual(PER_FAN * 2);
    // the burst, and what the bucket refilled while the requests were answered
    expect(statuses.filter((s) => s === 409).length).toBeLessThanOrEqual(
      PER_FAN * 2 + Math.ceil(PER_FAN * seconds) + 1,
    );
    const limited = comparable(answers.find((a) => a.status === 429)!);
    expectRateLimited(limited, "fan:hold");
  });
});

describe("the hold refusal fast path with no limit set", () => {
  // No limit to take: the refusal is answered in the tick its body arrived (the event and the page
  // in memory), by a path of its own; it must still be the route's answer.
  let open: FastPathPair;
  let openEvent: string;
  let openFans: AdmittedFan[];
  beforeAll(async () => {
    open = await startFastPathPair({ tableName: await createTable(), limits: { ratePerIp: 0, ratePerFan: 0 } });
    openEvent = uniqueId("hn");
    expect((await putEvent(open.gw, openEvent, eventInput())).status).toBe(201);
    openFans = await admitFans(
      open.gw,
      openEvent,
      Array.from({ length: 4 }, (_, i) => `hn-${i}`),
    );
  }, 120_000);
  afterAll(async () => {
    await open?.close();
  });

  const holdAt = (port: number, fan: AdmittedFan, body: unknown) =>
    exchange(
      `http://127.0.0.1:${port}/v1/events/${openEvent}/holds`,
      { "content-type": "application/json", authorization: `Bearer ${fan.accessToken}` },
      "POST",
      JSON.stringify(body),
    );

  it("refuses as the route does, and leaves a free seat, an unknown one and a seat twice to the app", async () => {
    const [owner, other, third] = openFans as [AdmittedFan, AdmittedFan, AdmittedFan];
    expect((await holdAt(open.appPort, owner, { seats: ["A-1-1"] })).status).toBe(201);
    const fast = await open.untilFast((port) => holdAt(port, other, { seats: ["A-1-1"] }), {
      pauseMs: 100,
      between: (answer) => {
        expect(answer.status).toBe(409);
        return exchange(`http://127.0.0.1:${open.fastPort}/v1/events/${openEvent}/sections/A/seats`);
      },
    });
    expect(comparable(fast)).toEqual(comparable(await holdAt(open.appPort, third, { seats: ["A-1-1"] })));
    const mixed = await open.viaFast((port) => holdAt(port, third, { seats: ["A-1-2", "A-1-1"] }));
    expect(mixed.fast).toBe(true);
    expect(comparable(mixed.answer)).toEqual(
      comparable(await holdAt(open.appPort, other, { seats: ["A-1-2", "A-1-1"] })),
    );
    const unknown = await open.viaFast((port) => holdAt(port, other, { seats: ["A-99-1", "A-1-1"] }));
    expect(unknown.fast).toBe(false);
    expect(unknown.answer.status).toBe(404);
    const twice = await open.viaFast((port) => holdAt(port, other, { seats: ["A-1-1", "A-1-1"] }));
    expect(twice.fast).toBe(false);
    expect(twice.answer.status).toBe(400);
    const free = await open.viaFast((port) => holdAt(port, other, { seats: ["A-2-1"] }));
    expect(free.fast).toBe(false);
    expect(free.answer.status).toBe(201);
  });
});
