/**
 * The beacon over HTTP (`PUT /v1/admin/events/{id}/waiting-room/beacon`): only the drand round of
 * the close, with a signature that verifies under the chain the event names (a test chain's key
 * signs); every other body is a 4xx JSON error. And the sealed draw
 * surviving a Redis wipe: after the room is recreated, the queue info publishes the draw sealed in
 * DynamoDB and the membership pages serve its sealed order, so the original draw still verifies
 * from outside. Real gateway, Redis and DynamoDB.
 */
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { randomnessOf } from "../../src/lottery/drand.js";
import { verifyRemoteDraw } from "../../src/lottery/verify-remote.js";
import { testChain } from "../support/drand-chain.js";
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

const withChain = (chain: unknown, onSaleAt: string) =>
  eventInput({
    onSaleAt,
    waitingRoom: { admitPerSecond: 10_000, maxActive: 10_000, sessionSeconds: 600, drand: chain } as never,
  });
const openNow = (eventId: string) =>
  gw.request(`/v1/admin/events/${eventId}/open-now`, { method: "POST", token: ADMIN_TOKEN });
const roundOf = async (eventId: string) =>
  ((await (await gw.request(`/v1/events/${eventId}/waiting-room`)).json()) as { lottery: { drand: { round: number } } })
    .lottery.drand.round;

describe("PUT .../waiting-room/beacon", () => {
  it("takes only the close's drand round with its chain's signature; anything else is a 4xx JSON error", async () => {
    const t = testChain();
    const eventId = uniqueId("bc");
    const later = new Date(Date.now() + 3_600_000).toISOString();
    expect((await putEvent(gw, eventId, withChain(t.chain, later))).status).toBe(201);
    const announced = await roundOf(eventId);

    expect((await put(eventId, t.sign(announced), "")).status).toBe(401);
    // What the operator could send before: a free value, a named source. Refused.
    for (const bad of [
      {},
      { value: "f".repeat(64) },
      { source: "drand quicknet round 1", value: "ab" },
      { round: announced },
      { round: announced, signature: "XYZ" },
      { ...t.sign(announced), other: 1 },
    ]) {
      const res = await put(eventId, bad);
      expect(res.status).toBe(400);
      expect(await code(res)).toBe("invalid_request");
    }
    const missing = await put(uniqueId("none"), t.sign(announced));
    expect(missing.status).toBe(404);
    // Before the close: the round is not due, not even the announced one.
    const early = await put(eventId, t.sign(announced));
    expect(early.status).toBe(409);
    expect(await code(early)).toBe("lottery_open");

    expect((await openNow(eventId)).status).toBe(200);
    const round = await roundOf(eventId);
    const wrong = await put(eventId, t.sign(round + 1));
    expect(wrong.status).toBe(409);
    expect(await wrong.json()).toMatchObject({ error: { code: "wrong_beacon_round", details: { round } } });
    const forged = await put(eventId, testChain().sign(round));
    expect(forged.status).toBe(422);
    expect(await code(forged)).toBe("invalid_beacon");

    const good = t.sign(round);
    const first = await put(eventId, good);
    expect(first.status).toBe(200);
    expect(await first.json()).toEqual({ ...good, beacon: randomnessOf(good.signature) });

    // An event that names no chain takes no beacon.
    const plain = uniqueId("bp");
    expect((await putEvent(gw, plain, eventInput({ onSaleAt: later }))).status).toBe(201);
    const none = await put(plain, good);
    expect(none.status).toBe(409);
    expect(await code(none)).toBe("no_beacon_chain");
    // A chain that is not one: refused with the event.
    const badChain = await putEvent(gw, uniqueId("bk"), withChain({ ...t.chain, publicKey: "ab".repeat(96) }, later));
    expect(badChain.status).toBe(400);
    // Nor a close in the past: its round would be published already, chosen by its date.
    const past = new Date(Date.now() - 60_000).toISOString();
    expect((await putEvent(gw, uniqueId("bpast"), withChain(t.chain, past))).status).toBe(400);
  });

  it("a replacement that leaves the chain out cannot move a chained event's close into the past: 400, nothing stored", async () => {
    const t = testChain();
    const eventId = uniqueId("bp");
    const later = new Date(Date.now() + 3_600_000).toISOString();
    expect((await putEvent(gw, eventId, withChain(t.chain, later))).status).toBe(201);
    // The same event again, its on-sale now in the past and no `drand` in the body: the lottery
    // is committed to the chain, so the close would pick a round already published.
    const past = new Date(Date.now() - 60_000).toISOString();
    const res = await putEvent(gw, eventId, eventInput({ onSaleAt: past }));
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe("invalid_request");
    const stored = (await (await gw.request(`/v1/admin/events/${eventId}`, { token: ADMIN_TOKEN })).json()) as {
      onSaleAt: string;
    };
    expect(Date.parse(stored.onSaleAt)).toBe(Date.parse(later));
    expect(await roundOf(eventId)).toBeGreaterThan(0);
    // A replacement ahead that leaves the chain out runs under the committed chain, and says so.
    const ahead = new Date(Date.now() + 7_200_000).toISOString();
    expect((await putEvent(gw, eventId, eventInput({ onSaleAt: ahead }))).status).toBe(200);
    const replaced = (await (await gw.request(`/v1/admin/events/${eventId}`, { token: ADMIN_TOKEN })).json()) as {
      waitingRoom: { drand?: { chainHash: string } };
    };
    expect(replaced.waitingRoom.drand?.chainHash).toBe(t.chain.chainHash);
  });

  it("a draw sealed in DynamoDB still verifies from outside after Redis lost the room", async () => {
    const t = testChain();
    const eventId = uniqueId("bw");
    const later = new Date(Date.now() + 3_600_000).toISOString();
    expect((await putEvent(gw, eventId, withChain(t.chain, later))).status).toBe(201);
    const joins = await Promise.all(
      Array.from({ length: 300 }, (_, i) =>
        gw.request(`/v1/events/${eventId}/queue`, { method: "POST", json: { fanId: `fan-${i}` } }),
      ),
    );
    expect(joins.every((r) => r.status === 201)).toBe(true);
    expect((await openNow(eventId)).status).toBe(200);
    const signed = t.sign(await roundOf(eventId));
    const value = randomnessOf(signed.signature);
    expect((await put(eventId, signed)).status).toBe(200);
    const before = await (async () => {
      for (;;) {
        try {
          return await verifyRemoteDraw(server.url, eventId);
        } catch {
          await new Promise((r) => setTimeout(r, 100));
        }
      }
    })();
    expect(before.pass).toBe(true);
    expect(before).toMatchObject({ beacon: value, size: 300 });
    const tooLate = await put(eventId, signed);
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
