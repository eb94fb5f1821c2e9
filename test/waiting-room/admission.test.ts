import { afterAll, describe, expect, it } from "vitest";
import { createWaitingRoom, type FanPlace } from "../../src/waiting-room/index.js";
import { eventId, fanOut, fans, gateways, moved, ok, RECORDS_ON_SHARDS, SECRET, sleep, until } from "./helpers.js";

// The line's own rules, exact to the call: without the line cache, whose answers may lag the line
// by a refresh (its own tests: line-cache.test.ts).
const gw = gateways(4, undefined, { lineCache: false });
afterAll(() => gw.close());
const { room } = gw;

const past = () => Date.now() - 1_000;

/** Places the cursor passes in one script call (MAX_STEPS in lua/waiting-room/includes/admission.lua). */
const MAX_STEPS = 256;

async function place(evt: string, fanId: string): Promise<FanPlace> {
  return ok(await room.statusOf(evt, fanId)).place;
}

function admittedPlace(p: FanPlace) {
  if (p.status !== "admitted") throw new Error(`expected admitted, got ${p.status}`);
  return p;
}

/** Poll (as fans do) until `count` fans are admitted; returns the stats then. */
async function admittedCount(evt: string, ids: string[], count: number) {
  return until(async () => {
    await fanOut(gw.rooms, ids, (r, fanId) => r.statusOf(evt, fanId));
    const { stats } = ok(await room.stats(evt));
    return stats.admitted >= count ? stats : undefined;
  });
}

describe("admission", () => {
  it("never lets more than maxActive in, and an ended session frees exactly one slot", async () => {
    const evt = eventId("slots");
    ok(await room.configure(evt, { onSaleAt: past(), admitPerSecond: 1_000, maxActive: 3, sessionSeconds: 60 }));
    const ids = fans(8);
    for (const fanId of ids) ok(await room.join(evt, fanId));
    await admittedCount(evt, ids, 3);
    await sleep(100); // a hundred admissions' worth of budget, and still only three slots
    const places = await Promise.all(ids.map((f) => place(evt, f)));
    expect(places.map((p) => p.status)).toEqual([
      "admitted",
      "admitted",
      "admitted",
      "waiting",
      "waiting",
      "waiting",
      "waiting",
      "waiting",
    ]);
    expect(places[3]).toMatchObject({ position: 4, ahead: 0 });
    expect(places[7]).toMatchObject({ position: 8, ahead: 4 });
    expect(ok(await room.stats(evt)).stats).toMatchObject({ active: 3, admitted: 3, waiting: 5 });

    const first = admittedPlace(places[0]!);
    expect(ok(await room.completeSession(evt, first.sessionId))).toMatchObject({
      freed: true,
      fanId: "fan-1",
      status: "completed",
    });
    expect(admittedPlace(await place(evt, "fan-4")).position).toBe(4);
    expect((await place(evt, "fan-5")).status).toBe("waiting");
    expect((await place(evt, "fan-1")).status).toBe("completed");
    // completing again changes nothing
    expect(ok(await room.completeSession(evt, first.sessionId))).toMatchObject({ freed: false, status: "completed" });
    expect((await place(evt, "fan-5")).status).toBe("waiting");
    expect(ok(await room.stats(evt)).stats).toMatchObject({ active: 3, admitted: 4, completed: 1 });
  });

  it("a session that runs out frees its slot; the fan sees it expired and may join again", async () => {
    const evt = eventId("expiry");
    ok(await room.configure(evt, { onSaleAt: past(), admitPerSecond: 1_000, maxActive: 1, sessionSeconds: 3 }));
    ok(await room.join(evt, "first"));
    ok(await room.join(evt, "second"));
    await admittedCount(evt, ["first", "second"], 1);
    const first = admittedPlace(await place(evt, "first"));
    expect(new Date(first.accessExpiresAt).getTime() - Date.now()).toBeLessThanOrEqual(3_000);
    expect((await place(evt, "second")).status).toBe("waiting");
    await until(async () => (ok(await room.isSessionActive(evt, first.sessionId)).active ? undefined : true), 15_000);
    expect(admittedPlace(await place(evt, "second")).position).toBe(2);
    expect(await place(evt, "first")).toMatchObject({ status: "expired", canRejoin: true });
    const again = ok(await room.join(evt, "first"));
    expect(again).toMatchObject({ created: true, place: { position: 3 } });
    expect(ok(await room.stats(evt)).stats.expired).toBe(1);
  });

  it("a revoked session is refused at once and its fan cannot take a new place", async () => {
    const evt = eventId("revoke");
    ok(await room.configure(evt, { onSaleAt: past(), admitPerSecond: 1_000, maxActive: 1, sessionSeconds: 300 }));
    ok(await room.join(evt, "bot"));
    ok(await room.join(evt, "fan"));
    await admittedCount(evt, ["bot", "fan"], 1);
    const bot = admittedPlace(await place(evt, "bot"));
    expect(ok(await room.isSessionActive(evt, bot.sessionId)).active).toBe(true);

    expect(ok(await gw.rooms[2]!.revokeSession(evt, bot.sessionId))).toMatchObject({
      freed: true,
      fanId: "bot",
      status: "revoked",
    });
    // every gateway sees it on the next claim: the token still verifies, the session does not
    for (const r of gw.rooms) expect(ok(await r.isSessionActive(evt, bot.sessionId)).active).toBe(false);
    expect((await room.verifyAccessToken(bot.accessToken, evt)).ok).toBe(true);
    expect(await place(evt, "bot")).toMatchObject({ status: "revoked", canRejoin: false });
    expect(await room.join(evt, "bot")).toEqual({ ok: false, reason: "revoked" });
    expect(ok(await room.completeSession(evt, bot.sessionId)).freed).toBe(false);
    expect((await place(evt, "fan")).status).toBe("admitted"); // the freed slot went to the next fan
    expect(ok(await room.stats(evt)).stats).toMatchObject({ revoked: 1, active: 1 });
  });

  it("skips abandoned places: they use no budget or slot, and a returning fan joins at the back", async () => {
    const evt = eventId("abandon");
    ok(
      await room.configure(evt, {
        onSaleAt: past(),
        admitPerSecond: 0,
        maxActive: 100,
        sessionSeconds: 60,
        abandonSeconds: 3,
      }),
    );
    const [a, b, c, d, e] = ["a", "b", "c", "d", "e"];
    for (const fanId of [a, b, c, d, e]) ok(await room.join(evt, fanId!));
    // b, d and e keep polling (every 200 ms, inside abandonSeconds); a and c stop
    const stats = await until(
      async () => {
        for (const fanId of [b, d, e]) await room.statusOf(evt, fanId!);
        const s = ok(await room.stats(evt)).stats;
        return s.abandoned === 2 ? s : undefined;
      },
      15_000,
      200,
    );
    expect(stats).toMatchObject({ waiting: 3, admitted: 0 });
    expect(await place(evt, b!)).toMatchObject({ status: "waiting", position: 2, ahead: 0 });
    expect(await place(evt, e!)).toMatchObject({ status: "waiting", position: 5, ahead: 2 });

    // 2 admissions a second: every stats call finds as many of b, d and e (still polling) moved as the
    // Redis time since the change has paid for, all three from 1.5 s on. Had the two dead places
    // ahead of them used budget, every poll from 0.5 s to 2.5 s would find one or two fewer.
    // (The elapsed time less 1 ms: the budget is summed in decimals, an exact second may fall short.)
    ok(await room.updateSettings(evt, { admitPerSecond: 2 }));
    const changedAt = Date.parse(ok(await room.settingsHistory(evt, 1)).changes[0]!.at);
    await until(
      async () => {
        for (const fanId of [b, d, e]) await room.statusOf(evt, fanId!);
        const s = ok(await room.stats(evt)).stats;
        const elapsed = Date.parse(s.at) - changedAt;
        const paidFor = Math.min(3, Math.floor((2 * (elapsed - 1)) / 1000));
        // (a room with claims: the stats call's own tick may offer a place its fan claims at the
        // next poll, so the places moved are what the budget paid for)
        expect(moved(s), `moved ${elapsed} ms after the change`).toBeGreaterThanOrEqual(paidFor);
        return s.admitted === 3 ? s : undefined;
      },
      15_000,
      100,
    );
    for (const fanId of [b, d, e]) expect((await place(evt, fanId!)).status).toBe("admitted");
    expect(ok(await room.stats(evt)).stats).toMatchObject({ admitted: 3, abandoned: 2, waiting: 0 });

    expect(await place(evt, a!)).toMatchObject({ status: "abandoned", position: 1, canRejoin: true });
    const back = ok(await room.join(evt, a!));
    expect(back.created).toBe(true);
    expect(back.place.position).toBe(6);
  });

  it("gets past hundreds of dead places in bounded calls, admitting only the fan still there", async () => {
    const evt = eventId("deadline");
    ok(
      await room.configure(evt, {
        onSaleAt: past(),
        admitPerSecond: 0,
        maxActive: 100,
        sessionSeconds: 60,
        abandonSeconds: 3,
      }),
    );
    const joined = (await fanOut(gw.rooms, fans(700), (r, fanId) => r.join(evt, fanId))).map(ok);
    const last = joined.find((j) => j.place.position === 700)!.fanId;
    // only the last fan keeps polling while abandonSeconds runs out for the 699 ahead
    const deadline = Date.now() + 3_500;
    while (Date.now() < deadline) {
      ok(await room.statusOf(evt, last));
      await sleep(200);
    }
    ok(await room.updateSettings(evt, { admitPerSecond: 1_000 }));
    const end = await until(async () => {
      const s = ok(await room.statusOf(evt, last)).place;
      return s.status === "admitted" ? s : undefined;
    });
    expect(end.position).toBe(700);
    expect(ok(await room.stats(evt)).stats).toMatchObject({
      admitted: 1,
      abandoned: 699,
      waiting: 0,
      servedThrough: 700,
    });
  });

  it("a change of admitPerSecond applies from that instant, never to the time before it", async () => {
    const evt = eventId("retro");
    ok(await room.configure(evt, { onSaleAt: past(), admitPerSecond: 2, maxActive: 10_000, sessionSeconds: 300 }));
    await fanOut(gw.rooms, fans(600), (r, fanId) => r.join(evt, fanId));
    const before = ok(await room.stats(evt)).stats;
    await sleep(1_500); // nobody asks; 3 admissions are owed at the old rate
    ok(await room.updateSettings(evt, { admitPerSecond: 100 }));
    const after = ok(await room.stats(evt)).stats;
    const changedAt = Date.parse(ok(await room.settingsHistory(evt, 1)).changes[0]!.at);

    const owedOld = (2 * (changedAt - Date.parse(before.at))) / 1000;
    const owedNew = (100 * (Date.parse(after.at) - changedAt)) / 1000;
    const got = moved(after) - moved(before);
    expect(got).toBeGreaterThanOrEqual(Math.floor(owedOld) - 1);
    expect(got).toBeLessThanOrEqual(Math.ceil(owedOld + owedNew) + 1);
    // what the 1.5 s before the change paid: ~3 at the old rate, ~150 had the new rate applied to it
    expect(got - owedNew).toBeLessThan(50);

    await sleep(400);
    const later = ok(await room.stats(evt)).stats;
    // one call admits at most MAX_STEPS (lua/waiting-room/includes/admission.lua), should the sleep run long
    const expected = Math.min(MAX_STEPS, (100 * (Date.parse(later.at) - Date.parse(after.at))) / 1000);
    expect(Math.abs(moved(later) - moved(after) - expected)).toBeLessThanOrEqual(expected * 0.1 + 2);
  });

  it("a rate is 0 or 0.001..100000 a second; a room restored from a rate stored out of range comes back within it", async () => {
    const evt = eventId("rate");
    const input = { onSaleAt: past(), admitPerSecond: 5, maxActive: 100, sessionSeconds: 300 };
    for (const admitPerSecond of [1e-300, 0.0009, 100_000.5, -1, Number.NaN, Number.POSITIVE_INFINITY]) {
      const configured = await room.configure(evt, { ...input, admitPerSecond });
      expect(configured.ok === false && configured.reason, String(admitPerSecond)).toBe("invalid");
    }
    ok(await room.configure(evt, input));
    for (const admitPerSecond of [1e-300, 0.0009, 100_000.5]) {
      const patched = await room.updateSettings(evt, { admitPerSecond });
      expect(patched.ok === false && patched.reason, String(admitPerSecond)).toBe("invalid");
      for (const bound of ["minPerSecond", "maxPerSecond"] as const) {
        const loop = await room.updateSettings(evt, { autoAdmit: { [bound]: admitPerSecond } });
        expect(loop.ok === false && loop.reason, `${bound} ${admitPerSecond}`).toBe("invalid");
      }
    }
    for (const admitPerSecond of [0, 0.001, 100_000]) {
      expect(ok(await room.updateSettings(evt, { admitPerSecond })).settings.admitPerSecond).toBe(admitPerSecond);
    }
    // An event stored before the range held (the PUT took 0.0005 then, and had no maximum).
    for (const [stored, restored] of [
      [0.0005, 0.001],
      [250_000, 100_000],
      [0, 0],
    ] as const) {
      const lost = eventId("rateloss");
      const [redis] = gw.clients;
      const restoring = createWaitingRoom({
        redis: redis!,
        secret: SECRET,
        lineCache: false,
        restore: async (id) => (id === lost ? { ...input, admitPerSecond: stored } : null),
      });
      expect(await restoring.restoreRoom(lost)).toBe("restored");
      expect(ok(await restoring.stats(lost)).settings.admitPerSecond).toBe(restored);
      await restoring.close();
    }
  });

  it("paused admits nobody, and unpausing does not pay out the paused time", async () => {
    const evt = eventId("paused");
    ok(await room.configure(evt, { onSaleAt: past(), admitPerSecond: 1_000, maxActive: 10_000, sessionSeconds: 300 }));
    ok(await room.updateSettings(evt, { paused: true }));
    const ids = fans(2_000);
    await fanOut(gw.rooms, ids, (r, fanId) => r.join(evt, fanId));
    for (let i = 0; i < 5; i++) {
      const polled = await fanOut(gw.rooms, ids.slice(0, 200), (r, fanId) => r.statusOf(evt, fanId));
      expect(polled.every((p) => ok(p).place.status === "waiting" && ok(p).place.etaSeconds === null)).toBe(true);
      await sleep(200);
    }
    const paused = ok(await room.stats(evt));
    expect(paused.stats).toMatchObject({ admitted: 0, state: "paused", effectiveAdmitPerSecond: 0 });
    expect(ok(await room.info(evt)).info.state).toBe("paused");

    ok(await room.updateSettings(evt, { paused: false }));
    const resumed = ok(await room.stats(evt)).stats;
    const changedAt = Date.parse(ok(await room.settingsHistory(evt, 1)).changes[0]!.at);
    // only the time since the change is paid for; ~1 s paused at 1,000/s paid out would be
    // hundreds more (256 a call)
    expect(resumed.admitted).toBeLessThanOrEqual(Math.ceil((1_000 * (Date.parse(resumed.at) - changedAt)) / 1000) + 1);
    expect(resumed.state).toBe("open");
  });

  it("bounds the work of one call and carries the rest to the next", async () => {
    const evt = eventId("bounded");
    ok(await room.configure(evt, { onSaleAt: past(), admitPerSecond: 0, maxActive: 100_000, sessionSeconds: 300 }));
    await fanOut(gw.rooms, fans(1_000), (r, fanId) => r.join(evt, fanId));
    ok(await room.updateSettings(evt, { admitPerSecond: 100_000 }));
    await sleep(100); // ~10,000 admissions owed, 1,000 fans waiting
    const steps: number[] = [];
    let admitted = 0;
    while (admitted < 1_000) {
      const now = moved(ok(await room.stats(evt)).stats);
      steps.push(now - admitted);
      admitted = now;
    }
    if (!RECORDS_ON_SHARDS) expect(steps).toEqual([256, 256, 256, 232]);
    else {
      // With the records on the fan shards the gateways' sweep ticks too (its `gone` call, about
      // once a second): the first step may hold that call's work beside the stats call's, each
      // bounded. The calls after it move 256 each until the line is passed.
      expect(steps[0]).toBeGreaterThanOrEqual(256);
      expect(steps[0]).toBeLessThanOrEqual(512);
      expect(steps.slice(1, -1).every((n) => n === 256)).toBe(true);
      expect(steps.at(-1)).toBe(1_000 - steps[0]! - 256 * (steps.length - 2));
      expect(steps.at(-1)).toBeLessThanOrEqual(256);
    }
  });

  it("a fan who polls at pollAfterMs is admitted at that poll, each fan of a line joining at once", async () => {
    // The poll scheduled on the ETA never comes before the turn: every fan is admitted by the
    // first poll it was told to make after joining (one poll, none for the fan the join admits).
    const evt = eventId("etapolls");
    ok(await room.configure(evt, { onSaleAt: past(), admitPerSecond: 10, maxActive: 1_000, sessionSeconds: 60 }));
    const ids = fans(10);
    const started = Date.now();
    let joinedBy = started;
    const journeys = await Promise.all(
      ids.map(async (fanId, i) => {
        const joined = ok(await gw.rooms[i % gw.rooms.length]!.join(evt, fanId)).place;
        joinedBy = Math.max(joinedBy, Date.now());
        let place: FanPlace = joined;
        let polls = 0;
        while (place.status !== "admitted") {
          expect(place.status).toBe("waiting");
          expect(place.pollAfterMs).toBeGreaterThan(0);
          await sleep(place.pollAfterMs!);
          place = ok(await gw.rooms[(i + polls + 1) % gw.rooms.length]!.statusOf(evt, fanId)).place;
          polls++;
        }
        return { position: joined.position, polls };
      }),
    );
    expect(journeys.map((j) => j.polls).filter((n) => n > 1)).toEqual([]);
    // A join answers admitted only a place the cursor had passed: the first place, and one more for
    // each tenth of a second (10/s) the joins took on a loaded machine (with the records on the
    // shards a join is answered by a poll after its shard's call, so a slow join can find its place passed).
    const passedWhileJoining = 1 + Math.floor(((joinedBy - started) / 1000) * 10);
    expect(journeys.filter((j) => j.polls === 0).length).toBeLessThanOrEqual(passedWhileJoining);
  });
});
