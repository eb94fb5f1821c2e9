/**
 * The one test that measures time: admission at admitPerSecond over 10 s of Redis time, with
 * fans polling from several connections and sessions ending (bought, revoked, expired) all along;
 * then the same load against a room that fills up, the active count sampled the whole time
 * against maxActive.
 */
import { afterAll, describe, expect, it } from "vitest";
import type { WaitingRoom } from "../../src/waiting-room/index.js";
import { eventId, fanOut, fans, gateways, moved, occupied, ok, sleep } from "./helpers.js";

const gw = gateways(6);
afterAll(() => gw.close());

const RATE = 100;
const SESSION_SECONDS = 5;
// Every session ends within SESSION_SECONDS, so about RATE x SESSION_SECONDS are live at most (more
// only by what a stall of the test process holds back and then admits at once): this maxActive
// never holds an admission back, and the window measures the rate alone. A full room banks at most
// 1 s of budget, so a window spent partly full would lose admissions to a slow test process.
const WINDOW_MAX_ACTIVE = 1_000;
const RUN_MS = 10_000;
const POLLERS = 40;
/** After the window: maxActive this far above the sessions still live, with budget to spare. */
const CAP_HEADROOM = 40;
const CAP_MS = 1_000;
const CAP_SAMPLES = 100;

/** The largest sample. A spread (`Math.max(...xs)`) overflows the stack past ~100k samples, which a fast box takes in 10 s. */
const most = (xs: number[]) => xs.reduce((a, b) => Math.max(a, b), Number.NEGATIVE_INFINITY);

describe("admission rate", () => {
  it("admits admitPerSecond x 10 s within 5%, in line order, never more than maxActive at once", async () => {
    const evt = eventId("rate");
    ok(
      await gw.room.configure(evt, {
        onSaleAt: Date.now() - 1_000,
        admitPerSecond: 0,
        maxActive: WINDOW_MAX_ACTIVE,
        sessionSeconds: SESSION_SECONDS,
      }),
    );
    const ids = fans(1_600);
    const places = new Map<string, number>();
    for (const j of await fanOut(gw.rooms, ids, (room, fanId) => room.join(evt, fanId))) {
      const { fanId, place } = ok(j);
      places.set(fanId, place.position);
    }

    ok(await gw.room.updateSettings(evt, { admitPerSecond: RATE }));
    let deadline = Date.now() + RUN_MS;
    const waiting = [...ids];
    const seen = new Set<string>();
    const endings: Promise<void>[] = [];
    const problems: string[] = [];
    const activeSamples: number[] = [];
    const outcomes = { bought: 0, revoked: 0, left: 0 };

    // a fan who got in: checks the token, then buys, gets revoked, or lets the session run out
    async function admitted(room: WaitingRoom, fanId: string, token: string, sessionId: string) {
      const check = await room.verifyAccessToken(token, evt);
      if (!check.ok || check.claims.sessionId !== sessionId || check.claims.fanId !== fanId)
        problems.push(`token of ${fanId}`);
      const active = ok(await room.isSessionActive(evt, sessionId));
      if (!active.active) problems.push(`session of ${fanId} not active right after admission`);
      const roll = Math.random();
      await sleep(100 + Math.random() * 800);
      if (roll < 0.75) {
        outcomes.bought++;
        ok(await room.completeSession(evt, sessionId));
      } else if (roll < 0.85) {
        outcomes.revoked++;
        ok(await room.revokeSession(evt, sessionId));
        if (ok(await room.isSessionActive(evt, sessionId)).active) problems.push(`revoked ${sessionId} still active`);
      } else {
        outcomes.left++;
      }
    }

    async function poller(room: WaitingRoom) {
      while (Date.now() < deadline) {
        const fanId = waiting.shift();
        if (fanId === undefined) return;
        const s = ok(await room.statusOf(evt, fanId));
        if (s.place.status === "admitted") {
          if (seen.has(fanId)) problems.push(`${fanId} admitted twice`);
          seen.add(fanId);
          endings.push(admitted(room, fanId, s.place.accessToken, s.place.sessionId));
        } else {
          waiting.push(fanId);
        }
      }
    }

    async function sampler(samples: number[], atLeast = 0) {
      while (Date.now() < deadline || samples.length < atLeast) {
        const { stats } = ok(await gw.rooms[5]!.stats(evt));
        samples.push(occupied(stats));
      }
    }

    const load = (samples: number[], atLeast = 0) =>
      Promise.all([
        ...Array.from({ length: POLLERS }, (_, i) => poller(gw.rooms[i % 5]!)),
        sampler(samples, atLeast),
        sampler(samples, atLeast),
      ]);

    await load(activeSamples);
    ok(await gw.room.updateSettings(evt, { admitPerSecond: 0 }));
    await Promise.all(endings);

    // the window is measured in Redis time: from the change to RATE to the change back to 0
    const history = ok(await gw.room.settingsHistory(evt, 2)).changes;
    const [stop, start] = history.map((c) => Date.parse(c.at));
    const windowMs = stop! - start!;
    const { stats } = ok(await gw.room.stats(evt));
    const per10s = (moved(stats) * 10_000) / windowMs;
    console.info(
      `admission: ${moved(stats)} admitted (or offered) in ${windowMs} ms of Redis time (${per10s.toFixed(0)} per 10 s); ` +
        `max active ${most(activeSamples)}/${WINDOW_MAX_ACTIVE} over ${activeSamples.length} samples; ` +
        `bought ${outcomes.bought}, revoked ${outcomes.revoked}, let expire ${outcomes.left}`,
    );

    expect(windowMs).toBeGreaterThanOrEqual(RUN_MS);
    expect(per10s).toBeGreaterThanOrEqual(RATE * 10 * 0.95);
    expect(per10s).toBeLessThanOrEqual(RATE * 10 * 1.05);
    expect(activeSamples.length).toBeGreaterThan(100);

    // The cap, under the same load: budget to spare (1,000 a second) against a maxActive just
    // above the sessions still live, so the room fills up and must stop at maxActive however many
    // calls race for the last slots. The stats call that ends the phase admits what the budget
    // allows, so it finds the room exactly full.
    const cap = occupied(ok(await gw.room.stats(evt)).stats) + CAP_HEADROOM;
    ok(await gw.room.updateSettings(evt, { maxActive: cap, admitPerSecond: 1_000 }));
    const capSamples: number[] = [];
    deadline = Date.now() + CAP_MS;
    await load(capSamples, CAP_SAMPLES);
    const full = ok(await gw.room.stats(evt)).stats;
    ok(await gw.room.updateSettings(evt, { admitPerSecond: 0 }));
    await Promise.all(endings);
    console.info(`cap: max active ${most(capSamples)}/${cap} over ${capSamples.length} samples`);
    expect(occupied(full)).toBe(cap);
    expect(most(capSamples)).toBeLessThanOrEqual(cap);
    expect(problems).toEqual([]);

    // nobody abandoned, so admission followed the line exactly: places 1..admitted got in
    const final = await fanOut(gw.rooms, ids, (room, fanId) => room.statusOf(evt, fanId));
    const inPositions = final
      .map(ok)
      .filter((s) => s.place.status !== "waiting")
      .map((s) => s.place.position)
      .sort((a, b) => a - b);
    // Those status calls may admit a few more (admission advances whenever anyone asks): read the
    // figures again after them, not before.
    const after = ok(await gw.room.stats(evt)).stats;
    expect(inPositions).toEqual(Array.from({ length: after.admitted }, (_, i) => i + 1));
    expect(after.completed + after.revoked + after.expired + after.active).toBe(after.admitted);
  }, 60_000);
});
