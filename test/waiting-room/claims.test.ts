/**
 * Admission by claims (WAITING_ROOM_CLAIMS; lua/waiting-room/includes/admission.lua offer_places
 * and claim_passed): the cursor passes places by count and offers each a session; the fan at the
 * place claims it at its next poll. These rooms are created with claims whatever TEST_LINE_CLAIMS
 * says (the whole suite runs in that mode with it); the room's own field decides, so a process
 * without the setting serves them the same way.
 */
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from "vitest";
import { type SpawnedRedis, spawnRedis } from "../../src/local/redis.js";
import { createWaitingRoom, type FanPlace, type WaitingRoom, waitingRoomKeys } from "../../src/waiting-room/index.js";
import { eventId, fanOut, fans, ok, SECRET, sampleMax, sleep, until } from "./helpers.js";

// A Redis of this file's own: one test rewrites an offer's expiry by hand.
let server: SpawnedRedis;
let raw: Redis;
let clients: Redis[] = [];
/** Three gateways that create rooms with claims, without the line cache (exact to the call). */
let rooms: WaitingRoom[] = [];
/** A gateway without the setting: it serves a room by the room's own field. */
let plain: WaitingRoom;

beforeAll(async () => {
  server = await spawnRedis();
  raw = new Redis(server.url);
  clients = Array.from({ length: 4 }, () => new Redis(server.url, { maxRetriesPerRequest: 1 }));
  rooms = clients
    .slice(0, 3)
    .map((redis) => createWaitingRoom({ redis, secret: SECRET, claims: true, lineCache: false }));
  plain = createWaitingRoom({ redis: clients[3]!, secret: SECRET, lineCache: false });
}, 60_000);
afterAll(async () => {
  for (const r of [...rooms, plain]) await r.close();
  for (const c of clients) c.disconnect();
  raw?.disconnect();
  await server?.close();
});

const past = () => Date.now() - 1_000;
const statsOf = async (evt: string) => ok(await rooms[0]!.stats(evt)).stats;
const placeOf = async (room: WaitingRoom, evt: string, fanId: string): Promise<FanPlace> =>
  ok(await room.statusOf(evt, fanId)).place;

/**
 * A line whose fans all joined while it stood still (rate 0: nobody offered at a join), then set
 * moving at 1,000 a second, with 20 ms of budget for the next call's tick to spend.
 */
async function joinedThenMoving(evt: string, ids: string[], room: { maxActive: number; abandonSeconds?: number }) {
  ok(await rooms[0]!.configure(evt, { onSaleAt: past(), admitPerSecond: 0, sessionSeconds: 60, ...room }));
  for (const fanId of ids) ok(await rooms[0]!.join(evt, fanId));
  ok(await rooms[0]!.updateSettings(evt, { admitPerSecond: 1_000 }));
  await sleep(20);
}

describe("admission by claims", () => {
  it("offers the places in order without opening a session; each fan's next poll claims its own", async () => {
    const evt = eventId("offer");
    await joinedThenMoving(evt, fans(5, "of"), { maxActive: 100 });
    // The stats call ticks: every place passed and offered, no session opened, no record read.
    const offering = Date.now();
    expect(await statsOf(evt)).toMatchObject({ offered: 5, admitted: 0, active: 0, servedThrough: 5, waiting: 0 });
    const offered = Date.now();
    const k = waitingRoomKeys(evt);
    expect(await raw.zrange(k.active, "0", "-1")).toEqual(["offer:1", "offer:2", "offer:3", "offer:4", "offer:5"]);
    // Records untouched until the fans poll: each still waiting at its place. No `fifo`: nothing
    // reads a place's fan any more, so the joins did not write it.
    expect((await raw.hget(k.fans, "of-3"))?.startsWith("w|3|")).toBe(true);
    expect(await raw.exists(k.fifo)).toBe(0);

    await sleep(300);
    const claiming = Date.now();
    const third = await placeOf(rooms[1]!, evt, "of-3");
    expect(third).toMatchObject({ status: "admitted", position: 3 });
    // admittedAt is the line's decision (the offer), not the claim; the session runs from the claim.
    if (third.status !== "admitted") throw new Error("unreachable");
    expect(Date.parse(third.admittedAt)).toBeGreaterThanOrEqual(offering - 50);
    expect(Date.parse(third.admittedAt)).toBeLessThanOrEqual(offered + 50);
    expect(Date.parse(third.accessExpiresAt)).toBeGreaterThanOrEqual(claiming + 60_000 - 50);
    expect(await statsOf(evt)).toMatchObject({ offered: 4, admitted: 1, active: 1 });
    // A repeat poll answers the same session; the offer is not taken twice.
    const again = await placeOf(rooms[2]!, evt, "of-3");
    expect(again).toMatchObject({ status: "admitted", sessionId: (third as { sessionId: string }).sessionId });
    // A process without the setting claims the same way (the room's field decides).
    expect(await placeOf(plain, evt, "of-1")).toMatchObject({ status: "admitted", position: 1 });
    // A join of a fan whose place was passed claims too.
    const joined = ok(await rooms[0]!.join(evt, "of-5")).place;
    expect(joined).toMatchObject({ status: "admitted", position: 5 });
    expect(await statsOf(evt)).toMatchObject({ offered: 2, admitted: 3, active: 3 });
    const sessions = await raw.zrange(k.active, "0", "-1");
    expect(sessions.filter((m) => m.startsWith("offer:")).sort()).toEqual(["offer:2", "offer:4"]);
  });

  it("counts offers against maxActive: a slot freed by an ended session is offered to the next place", async () => {
    const evt = eventId("cap");
    await joinedThenMoving(evt, fans(5, "cp"), { maxActive: 2 });
    expect(await statsOf(evt)).toMatchObject({ offered: 2, admitted: 0, servedThrough: 2 });
    const first = await placeOf(rooms[0]!, evt, "cp-1");
    const second = await placeOf(rooms[1]!, evt, "cp-2");
    expect([first.status, second.status]).toEqual(["admitted", "admitted"]);
    await sleep(20);
    expect(await placeOf(rooms[2]!, evt, "cp-3")).toMatchObject({ status: "waiting", ahead: 0 });
    expect(await statsOf(evt)).toMatchObject({ offered: 0, admitted: 2, active: 2, servedThrough: 2 });
    if (first.status !== "admitted") throw new Error("unreachable");
    ok(await rooms[0]!.completeSession(evt, first.sessionId));
    // The ended session's slot is offered at once (end-session serves), to place 3.
    expect(await statsOf(evt)).toMatchObject({ offered: 1, active: 1, servedThrough: 3 });
    expect(await placeOf(rooms[2]!, evt, "cp-3")).toMatchObject({ status: "admitted", position: 3 });
  });

  it("a fan given up after its place was passed gives its offer back at once, and learns the loss", async () => {
    const evt = eventId("gone");
    await joinedThenMoving(evt, ["gn-1", "gn-2"], { maxActive: 1, abandonSeconds: 2 });
    expect(await statsOf(evt)).toMatchObject({ offered: 1, servedThrough: 1 });
    // gn-2 keeps polling; gn-1 never comes back for its offer.
    const k = waitingRoomKeys(evt);
    let polling = true;
    onTestFinished(() => {
      polling = false;
    });
    const second = (async () => {
      for (;;) {
        const p = await placeOf(rooms[1]!, evt, "gn-2");
        if (p.status === "admitted" || !polling) return p;
        await sleep(100);
      }
    })();
    // The sweep gives gn-1 up once its 2 s have passed, and its offer with it, at once: long before
    // the offer's own expiry (abandonSeconds and 4 s).
    await until(async () => ((await raw.hget(k.fans, "gn-1"))?.startsWith("x|") ? true : undefined), 5_000, 20);
    expect(await raw.zscore(k.active, "offer:1")).toBeNull();
    expect(await second).toMatchObject({ status: "admitted", position: 2 });
    polling = false;
    expect(await statsOf(evt)).toMatchObject({ offered: 0, admitted: 1, abandoned: 1, active: 1 });
    expect(await placeOf(rooms[0]!, evt, "gn-1")).toMatchObject({ status: "abandoned", position: 1 });
  });

  it("an offer nobody claims is given back at its expiry: the slot goes to the next place, the late fan learns the loss", async () => {
    const evt = eventId("expiry");
    await joinedThenMoving(evt, ["ex-1", "ex-2"], { maxActive: 1 });
    expect(await statsOf(evt)).toMatchObject({ offered: 1, servedThrough: 1 });
    // The offer's expiry (abandonSeconds and the grace, 34 s here) brought forward by hand: this
    // is the backstop for a place whose fan no sweep gave up (its heartbeat lives on, unclaimed).
    const k = waitingRoomKeys(evt);
    expect(await raw.zadd(k.active, "XX", "CH", Date.now() - 1, "offer:1")).toBe(1);
    expect(await statsOf(evt)).toMatchObject({ offered: 1, servedThrough: 2, admitted: 0, expired: 0 });
    expect(await raw.zrange(k.active, "0", "-1")).toEqual(["offer:2"]);
    expect(await placeOf(rooms[1]!, evt, "ex-2")).toMatchObject({ status: "admitted", position: 2 });
    expect(await placeOf(rooms[2]!, evt, "ex-1")).toMatchObject({ status: "abandoned", position: 1 });
    expect(await statsOf(evt)).toMatchObject({ offered: 0, admitted: 1, abandoned: 1, active: 1 });
  });

  it("a lone arrival at an empty line is admitted by its own join", async () => {
    const evt = eventId("lone");
    ok(await rooms[0]!.configure(evt, { onSaleAt: past(), admitPerSecond: 5, maxActive: 10, sessionSeconds: 60 }));
    await sleep(250); // a credit accrued
    expect(ok(await rooms[1]!.join(evt, "ln-1")).place).toMatchObject({ status: "admitted", position: 1 });
    expect(await statsOf(evt)).toMatchObject({ offered: 0, admitted: 1, active: 1 });
  });

  it("pre-queued fans are offered their drawn places in order, after the draw", async () => {
    const evt = eventId("drawn");
    const onSaleAt = Date.now() + 1_500;
    ok(await rooms[0]!.configure(evt, { onSaleAt, admitPerSecond: 1_000, maxActive: 100, sessionSeconds: 60 }));
    const ids = fans(12, "pq");
    await fanOut(rooms, ids, (r, fanId) => r.join(evt, fanId));
    await sleep(onSaleAt - Date.now() + 100);
    const placed = await until(async () => {
      const all = await fanOut(rooms, ids, (r, fanId) => r.statusOf(evt, fanId));
      const places = all.map((p) => ok(p).place);
      return places.every((p) => p.status === "admitted") ? places : undefined;
    }, 15_000);
    expect(placed.map((p) => p.position).sort((a, b) => a - b)).toEqual(ids.map((_, i) => i + 1));
    expect(await statsOf(evt)).toMatchObject({ offered: 0, admitted: 12, preQueued: 12 });
  });

  it("never exceeds maxActive with three gateways offering and claiming at once; every fan admitted once", async () => {
    const evt = eventId("three");
    const maxActive = 6;
    ok(await rooms[0]!.configure(evt, { onSaleAt: past(), admitPerSecond: 200, maxActive, sessionSeconds: 300 }));
    const ids = fans(90, "tc");
    await fanOut(rooms, ids, (r, fanId) => r.join(evt, fanId));
    const k = waitingRoomKeys(evt);
    // sessions and offers, as Redis holds them: what maxActive bounds
    const sampler = sampleMax(() => raw.zcard(k.active), 2);
    const sessions = new Map<string, string>();
    await Promise.all(
      ids.map(async (fanId, i) => {
        for (let turn = i; ; turn++) {
          const p = await placeOf(rooms[turn % 3]!, evt, fanId);
          if (p.status === "admitted") {
            sessions.set(fanId, p.sessionId);
            await sleep(10 + (i % 5) * 10);
            ok(await rooms[(turn + 1) % 3]!.completeSession(evt, p.sessionId));
            return;
          }
          expect(p.status).toBe("waiting");
          await sleep(Math.min(p.pollAfterMs ?? 200, 200));
        }
      }),
    );
    const maxSeen = await sampler.stop();
    expect(sessions.size).toBe(ids.length);
    expect(new Set(sessions.values()).size).toBe(ids.length);
    expect(maxSeen).toBeLessThanOrEqual(maxActive);
    expect(maxSeen).toBeGreaterThan(0);
    expect(await statsOf(evt)).toMatchObject({ admitted: ids.length, completed: ids.length, offered: 0, abandoned: 0 });
  });
});
