/**
 * The queue status poll of a fan whose turn has not come, answered before Hono
 * (src/http/fast-path.ts queueStatusFastPath) from the gateway's view of the line, answers as the
 * route does: two servers on one gateway, real Redis and DynamoDB, one with the fast path, one
 * without. Same status, headers (but those of each exchange) and body; what it cannot answer
 * (a bad token, a fan at the front, an admitted fan) goes to the app; its 429 is the app's.
 */
import { connect } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Exchange, exchange } from "../support/exchange.js";
import { comparable, expectRateLimited, type FastPathPair, startFastPathPair } from "./fast-path-harness.js";
import { createTable, eventInput, type Gateway, metricTotal, putEvent, uniqueId } from "./harness.js";

const PER_FAN = 2;

let pair: FastPathPair;
let gw: Gateway;
let eventId: string;
let fastPort: number;
let appPort: number;
const tokens = new Map<string, string>();

beforeAll(async () => {
  pair = await startFastPathPair({ tableName: await createTable(), limits: { ratePerFan: PER_FAN } });
  ({ gw, fastPort, appPort } = pair);
  eventId = uniqueId("pf");
  // One session, taken by the first fan: everyone else waits and the line stands still.
  const put = await putEvent(
    gw,
    eventId,
    eventInput({ waitingRoom: { admitPerSecond: 1, maxActive: 1, sessionSeconds: 600 } }),
  );
  expect(put.status).toBe(201);
  for (const fanId of ["f00", "f01", "f02", "f03", "f04", "f05", "f06", "f07", "f08", "f09", "f10", "f11"]) {
    const res = await gw.request(`/v1/events/${eventId}/queue`, { method: "POST", json: { fanId } });
    expect(res.status).toBe(201);
    tokens.set(fanId, ((await res.json()) as { queueToken: string }).queueToken);
  }
}, 120_000);

afterAll(async () => {
  await pair?.close();
});

const poll = (port: number, fanId: string, headers: Record<string, string> = {}): Promise<Exchange> =>
  exchange(`http://127.0.0.1:${port}/v1/events/${eventId}/queue/status`, {
    authorization: `Bearer ${tokens.get(fanId)}`,
    ...headers,
  });

/** Polls `fanId` through the fast server until the fast path answers (view read, odds loaded). */
const untilFast = (fanId: string): Promise<Exchange> =>
  pair.untilFast((port) => poll(port, fanId), { pauseMs: 1_000 / PER_FAN });

describe("the queue status fast path", () => {
  it("answers a waiting fan's poll as the route does, with no Redis call, and counts it", async () => {
    const cachedBefore = await metricTotal(gw, "gateway_queue_polls_total", { answered: "cache" });
    const fast = await untilFast("f10");
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    const fromApp = await poll(appPort, "f10");
    expect(comparable(fast)).toEqual(comparable(fromApp));
    expect(comparable(fast).body).toMatchObject({ status: "waiting", position: 11, ahead: 9, provisional: false });
    expect(comparable(fast).body.odds).toBeDefined();
    expect(fast.headers["x-request-id"]).toBeTruthy();
    // Both answers came from the line cache (the app's route asks it too); the histogram has the fast one.
    expect(await metricTotal(gw, "gateway_queue_polls_total", { answered: "cache" })).toBeGreaterThanOrEqual(
      cachedBefore + 2,
    );
    const echoed = await poll(fastPort, "f11", { "x-request-id": "echo-me-please" });
    expect(echoed.headers["x-request-id"]).toBe("echo-me-please");
  });

  it("leaves to the app what it cannot answer exactly: a bad token, a fan at the front, an admitted fan", async () => {
    await untilFast("f09");
    const before = pair.fastAnswered.length;
    const bad = await exchange(`http://127.0.0.1:${fastPort}/v1/events/${eventId}/queue/status`, {
      authorization: "Bearer not-a-token",
    });
    expect(bad.status).toBe(401);
    const wrongEvent = await exchange(`http://127.0.0.1:${fastPort}/v1/events/${uniqueId()}/queue/status`, {
      authorization: `Bearer ${tokens.get("f09")}`,
    });
    expect(wrongEvent.status).toBe(403);
    const admitted = await poll(fastPort, "f00");
    expect(JSON.parse(admitted.body.toString("utf8"))).toMatchObject({ status: "admitted" });
    const front = await poll(fastPort, "f01");
    expect(JSON.parse(front.body.toString("utf8"))).toMatchObject({ status: "waiting", ahead: 0 });
    expect(pair.fastAnswered.length).toBe(before);
  });

  it("refuses past the fan's limit with the app's 429, 12 polls in flight", async () => {
    await untilFast("f08");
    await new Promise((resolve) => setTimeout(resolve, 2_500)); // the bucket full again
    const answers = await Promise.all(Array.from({ length: 12 }, () => poll(fastPort, "f08")));
    const statuses = answers.map((a) => a.status);
    expect(statuses.filter((s) => s !== 200 && s !== 429)).toEqual([]);
    expect(statuses.filter((s) => s === 200).length).toBeGreaterThanOrEqual(PER_FAN * 2);
    expect(statuses.filter((s) => s === 200).length).toBeLessThanOrEqual(PER_FAN * 2 + 2);
    const refused = comparable(answers.find((a) => a.status === 429)!);
    expectRateLimited(refused, "fan:status");
    expect(refused.headers["content-type"]).toMatch(/^application\/json/);
  });
  it("answers pipelined polls on one connection in order, each its own; a client gone first costs nothing", async () => {
    // Answers known at once are written together after the server's reads (answerSoon): the order
    // of one connection's answers is still the order of its requests.
    const fans = ["f05", "f06", "f07"];
    for (const fanId of fans) await untilFast(fanId);
    const before = pair.fastAnswered.length;
    const request = (fanId: string, last: boolean) =>
      `GET /v1/events/${eventId}/queue/status HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${tokens.get(fanId)}\r\n${last ? "connection: close\r\n" : ""}\r\n`;
    const raw = await new Promise<string>((resolve, reject) => {
      const socket = connect(fastPort, "127.0.0.1", () => {
        socket.write(fans.map((fanId, i) => request(fanId, i === fans.length - 1)).join(""));
      });
      let text = "";
      socket.setEncoding("utf8");
      socket.on("data", (chunk: string) => {
        text += chunk;
      });
      socket.once("end", () => resolve(text));
      socket.once("error", reject);
    });
    const bodies = raw
      .split(/HTTP\/1\.1 /)
      .slice(1)
      .map((answer) => {
        expect(answer.startsWith("200")).toBe(true);
        return JSON.parse(answer.slice(answer.indexOf("\r\n\r\n") + 4)) as { position: number };
      });
    expect(bodies.map((b) => b.position)).toEqual([6, 7, 8]);
    expect(pair.fastAnswered.length - before).toBe(3);
    // A client that sends its poll and is gone before the answer is written: nothing thrown, and the
    // server answers the next poll as before.
    await new Promise<void>((resolve) => {
      const socket = connect(fastPort, "127.0.0.1", () => {
        socket.write(request("f03", false));
        socket.destroy();
        resolve();
      });
    });
    // (Another fan: each fan may poll twice a second here.)
    const after = await untilFast("f04");
    expect(after.status).toBe(200);
  });
});
