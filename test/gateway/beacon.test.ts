/**
 * The beacon over HTTP (`PUT /v1/admin/events/{id}/waiting-room/beacon`) and the sealed draw
 * surviving a Redis wipe: after the room is recreated, the queue info publishes the draw sealed in
 * DynamoDB and the membership pages serve its sealed order, so the original draw still verifies
 * from outside. Real gateway, Redis and DynamoDB.
 */
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { verifyRemoteDraw } from "../../src/lottery/verify-remote.js";
import {
  ADMIN_TOKEN,
  createTable,
  eventInput,
  type Gateway,
  listen,
  putEvent,
  startGateway,
  uniqueId,
} from "./harness.js";

let gw: Gateway;
let server: Awaited<ReturnType<typeof listen>>;
let redis: Redis;

beforeAll(async () => {
  gw = await startGateway({ tableName: await createTable() });
  server = await listen(gw);
  redis = new Redis(inject("redisUrl"));
});

afterAll(async () => {
  redis.disconnect();
  await server.close();
  await gw.close();
});

const put = (eventId: string, body: unknown, token: string | undefined = ADMIN_TOKEN) =>
  gw.request(`/v1/admin/events/${eventId}/waiting-room/beacon`, {
    method: "PUT",
    json: body,
    ...(token ? { token } : {}),
  });
const code = async (res: Response) => ((await res.json()) as { error: { code: string } }).error.code;

describe("PUT .../waiting-room/beacon", () => {
  it("takes a source and a value once each, refuses bad input with a code", async () => {
    const eventId = uniqueId("bc");
    const later = new Date(Date.now() + 3_600_000).toISOString();
    expect((await putEvent(gw, eventId, eventInput({ onSaleAt: later }))).status).toBe(201);

    expect((await put(eventId, { source: "x" }, "")).status).toBe(401);
    for (const bad of [{}, { source: "" }, { source: "x".repeat(257) }, { value: "tab\there" }, { other: 1 }]) {
      const res = await put(eventId, bad);
      expect(res.status).toBe(400);
      expect(await code(res)).toBe("invalid_request");
    }
    const missing = await put(uniqueId("none"), { source: "x" });
    expect(missing.status).toBe(404);
    expect(await code(missing)).toBe("not_found");

    const source = "drand quicknet round 20000000";
    const first = await put(eventId, { source });
    expect(first.status).toBe(200);
    expect(await first.json()).toEqual({ beaconSource: source });
    expect((await put(eventId, { source })).status).toBe(200);
    const other = await put(eventId, { source: "another" });
    expect(other.status).toBe(409);
    expect(await other.json()).toMatchObject({ error: { code: "beacon_conflict", details: { beaconSource: source } } });
    const info = (await (await gw.request(`/v1/events/${eventId}/waiting-room`)).json()) as {
      lottery: { beaconSource?: string };
    };
    expect(info.lottery.beaconSource).toBe(source);
  });

  it("a draw sealed in DynamoDB still verifies from outside after Redis lost the room", async () => {
    const eventId = uniqueId("bw");
    const later = new Date(Date.now() + 3_600_000).toISOString();
    expect((await putEvent(gw, eventId, eventInput({ onSaleAt: later }))).status).toBe(201);
    const joins = await Promise.all(
      Array.from({ length: 300 }, (_, i) =>
        gw.request(`/v1/events/${eventId}/queue`, { method: "POST", json: { fanId: `fan-${i}` } }),
      ),
    );
    expect(joins.every((r) => r.status === 201)).toBe(true);
    const value = "f".repeat(64);
    expect((await put(eventId, { source: "drand quicknet round 1", value })).status).toBe(200);
    expect(
      (await gw.request(`/v1/admin/events/${eventId}/open-now`, { method: "POST", token: ADMIN_TOKEN })).status,
    ).toBe(200);
    const before = await verifyRemoteDraw(server.url, eventId);
    expect(before.pass).toBe(true);
    expect(before).toMatchObject({ beacon: value, size: 300 });
    const tooLate = await put(eventId, { value: "0".repeat(64) });
    expect(tooLate.status).toBe(409);
    expect(await code(tooLate)).toBe("lottery_drawn");

    // Redis loses the room: every key of the event's line.
    const keys = await redis.keys(`wr:{evt:${eventId}}*`);
    expect(keys.length).toBeGreaterThan(0);
    await redis.del(...keys);

    const info = (await (await gw.request(`/v1/events/${eventId}/waiting-room`)).json()) as {
      lottery: { membershipHash?: string; size?: number; sealedOnly?: boolean; beacon?: string };
    };
    expect(info.lottery).toMatchObject({
      membershipHash: before.membershipHash,
      size: 300,
      beacon: value,
      sealedOnly: true,
    });
    const after = await verifyRemoteDraw(server.url, eventId);
    expect(after.checks).toEqual(before.checks);
    expect(after.first).toEqual(before.first);
  }, 60_000);
});
