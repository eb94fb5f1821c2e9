/**
 * The one test that measures time: admission at admitPerSecond over 10 s of Redis time, with
 * fans polling from several connections, sessions ending (bought, revoked, expired) all along,
 * and the active count sampled the whole time against maxActive.
 */
import { afterAll, describe, expect, it } from "vitest";
import type { WaitingRoom } from "../../src/waiting-room/index.js";
import { eventId, fanOut, fans, gateways, ok, sleep } from "./helpers.js";

const gw = gateways(6);
afterAll(() => gw.close());

const RATE = 100;
const MAX_ACTIVE = 120;
const RUN_MS = 10_000;
const POLLERS = 40;

describe("admission rate", () => {
  it("admits admitPerSecond x 10 s within 5%, in line order, never more than maxActive at once", async () => {
    const evt = eventId("rate");
    ok(
      await gw.room.configure(evt, {
        onSaleAt: Date.now() - 1_000,
        admitPerSecond: 0,
        maxActive: MAX_ACTIVE,
        sessionSeconds: 2,
      }),
    );
    const ids = fans(1_600);
    const places = new Map<string, number>();
    for (const j of await fanOut(gw.rooms, ids, (room, fanId) => room.join(evt, fanId))) {
      const { fanId, place } = ok(j);
      places.set(fanId, place.position);
    }

    ok(await gw.room.updateSettings(evt, { admitPerSecond: RATE }));
    const deadline = Date.now() + RUN_MS;
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

    async function sampler() {
      while (Date.now() < deadline) {
        const { stats } = ok(await gw.rooms[5]!.stats(evt));
        activeSamples.push(stats.active);
      }
    }

    await Promise.all([...Array.from({ length: POLLERS }, (_, i) => poller(gw.rooms[i % 5]!)), sampler(), sampler()]);
    ok(await gw.room.updateSettings(evt, { admitPerSecond: 0 }));
    await Promise.all(endings);

    // the window is measured in Redis time: from the change to RATE to the change back to 0
    const history = ok(await gw.room.settingsHistory(evt, 2)).changes;
    const [stop, start] = history.map((c) => Date.parse(c.at));
    const windowMs = stop! - start!;
    const { stats } = ok(await gw.room.stats(evt));
    const per10s = (stats.admitted * 10_000) / windowMs;
    console.info(
      `admission: ${stats.admitted} admitted in ${windowMs} ms of Redis time (${per10s.toFixed(0)} per 10 s); ` +
        `max active ${Math.max(...activeSamples)}/${MAX_ACTIVE} over ${activeSamples.length} samples; ` +
        `bought ${outcomes.bought}, revoked ${outcomes.revoked}, let expire ${outcomes.left}`,
    );

    expect(problems).toEqual([]);
    expect(windowMs).toBeGreaterThanOrEqual(RUN_MS);
    expect(per10s).toBeGreaterThanOrEqual(RATE * 10 * 0.95);
    expect(per10s).toBeLessThanOrEqual(RATE * 10 * 1.05);
    expect(activeSamples.length).toBeGreaterThan(100);
    expect(Math.max(...activeSamples)).toBeLessThanOrEqual(MAX_ACTIVE);

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
  }, 40_000);
});
