import { afterAll, describe, expect, it } from "vitest";
import { eventId, fanOut, fans, gateways, ok, RECORDS_ON_SHARDS, until } from "./helpers.js";

const gw = gateways(8);
afterAll(() => gw.close());

const open = { onSaleAt: Date.now() - 1_000, admitPerSecond: 0, maxActive: 100, sessionSeconds: 60 };

describe("join", () => {
  it("10,000 concurrent joins over 8 connections get places 1..10,000, each once; a repeat join returns the same place", async () => {
    const evt = eventId("join10k");
    ok(await gw.room.configure(evt, open));
    const ids = fans(10_000);

    const first = await fanOut(gw.rooms, ids, (room, fanId) => room.join(evt, fanId));
    const positions = first.map((r) => ok(r).place.position);
    expect(first.every((r) => ok(r).created)).toBe(true);
    expect([...positions].sort((a, b) => a - b)).toEqual(ids.map((_, i) => i + 1));

    // repeat every join, again all at once and through other connections
    const again = await fanOut([...gw.rooms].reverse(), ids, (room, fanId) => room.join(evt, fanId));
    again.forEach((r, i) => {
      const j = ok(r);
      expect(j.created).toBe(false);
      expect(j.place.position).toBe(positions[i]);
    });

    // With the records on the fan shards each repeat join reserved a place the shard gave back:
    // `joined` counts it until the sweep takes it out, and the tail moved past it for good.
    const stats = await until(async () => {
      const s = ok(await gw.room.stats(evt)).stats;
      return s.joined === 10_000 ? s : undefined;
    });
    expect(stats).toMatchObject({
      joined: 10_000,
      waiting: 10_000,
      lastPosition: RECORDS_ON_SHARDS ? 20_000 : 10_000,
      admitted: 0,
    });
    ok(await gw.room.remove(evt));
  });

  it("before the on-sale a fan enters the pre-queue with a provisional arrival number", async () => {
    const evt = eventId("prejoin");
    ok(await gw.room.configure(evt, { ...open, onSaleAt: Date.now() + 3_600_000, admitPerSecond: 10 }));
    const ids = fans(300);
    const joined = (await fanOut(gw.rooms, ids, (room, fanId) => room.join(evt, fanId))).map(ok);
    expect(joined.every((j) => j.place.status === "prequeue" && j.place.provisional)).toBe(true);
    expect(joined.map((j) => j.place.position).sort((a, b) => a - b)).toEqual(ids.map((_, i) => i + 1));

    // The fans joined through eight gateways; the polled one answers from its line view, which may
    // be a refresh behind the others' joins (the view's documented lag): wait for it to see them all.
    const fan = await until(async () => {
      const place = ok(await gw.room.statusOf(evt, "fan-7")).place;
      return place.ahead === 299 ? place : undefined;
    });
    expect(fan.status).toBe("prequeue");
    expect(fan.etaSeconds).toBeGreaterThan(3_500);
    expect(fan.pollAfterSeconds).toBe(30);

    const { info } = ok(await gw.room.info(evt));
    expect(info.state).toBe("prequeue");
    expect(info.waiting).toBe(300);
    expect(info.lottery.seed).toBeUndefined();
    expect(info.lottery.commitment).toMatch(/^[0-9a-f]{64}$/);
    expect(await gw.room.lotteryPage(evt, { offset: 0, limit: 10 })).toEqual({ ok: false, reason: "not_drawn" });
  });

  it("a queue token names the fan's place; status by token equals status by fan", async () => {
    const evt = eventId("token");
    ok(await gw.room.configure(evt, open));
    const a = ok(await gw.room.join(evt, "alice"));
    ok(await gw.room.join(evt, "bob"));
    const bob = ok(await gw.rooms[3]!.join(evt, "bob"));
    expect(bob.place.position).toBe(2);
    const byToken = ok(await gw.rooms[5]!.status(evt, bob.queueToken));
    expect(byToken.fanId).toBe("bob");
    expect(byToken.place).toMatchObject({ status: "waiting", position: 2, ahead: 1 });
    expect(byToken.place.etaSeconds).toBeNull(); // admitPerSecond 0: nothing is being admitted
    expect(ok(await gw.room.status(evt, a.queueToken)).place.position).toBe(1);
  });

  it("unknown events, malformed ids and fans without a place get typed outcomes", async () => {
    expect(await gw.room.join(eventId("nope"), "alice")).toEqual({ ok: false, reason: "not_found" });
    expect(await gw.room.join("bad id!", "alice")).toEqual({ ok: false, reason: "not_found" });
    expect(await gw.room.info(eventId("nope"))).toEqual({ ok: false, reason: "not_found" });
    expect(await gw.room.stats(eventId("nope"))).toEqual({ ok: false, reason: "not_found" });
    expect(await gw.room.updateSettings(eventId("nope"), { paused: true })).toEqual({ ok: false, reason: "not_found" });
    expect(await gw.room.openNow(eventId("nope"))).toEqual({ ok: false, reason: "not_found" });
    expect(await gw.room.completeSession(eventId("nope"), "x.1")).toEqual({ ok: false, reason: "not_found" });
    const evt = eventId("outcomes");
    ok(await gw.room.configure(evt, open));
    expect(await gw.room.join(evt, "")).toEqual({ ok: false, reason: "invalid_fan" });
    expect(await gw.room.join(evt, "x".repeat(129))).toEqual({ ok: false, reason: "invalid_fan" });
    expect(await gw.room.statusOf(evt, "never-joined")).toEqual({ ok: false, reason: "not_joined" });
    expect(await gw.room.completeSession(evt, "x.1")).toEqual({ ok: false, reason: "unknown_session" });
    expect(await gw.room.isSessionActive(evt, "x.1")).toEqual({ ok: true, active: false, decided: true });
  });

  it("a closed room gives no new places and keeps the ones it gave", async () => {
    const evt = eventId("closed");
    ok(await gw.room.configure(evt, open));
    ok(await gw.room.join(evt, "early"));
    const s = ok(await gw.room.updateSettings(evt, { closed: true }));
    expect(s.settings.closed).toBe(true);
    expect(await gw.room.join(evt, "late")).toEqual({ ok: false, reason: "closed" });
    const early = ok(await gw.room.join(evt, "early"));
    expect(early.created).toBe(false);
    expect(early.place.position).toBe(1);
    expect(ok(await gw.room.info(evt)).info.state).toBe("closed");
  });

  it("configure is idempotent, keeps the committed seed, and refuses to move an opened on-sale", async () => {
    const evt = eventId("configure");
    const input = {
      onSaleAt: new Date(Date.now() + 60_000).toISOString(),
      admitPerSecond: 5,
      maxActive: 10,
      sessionSeconds: 300,
    };
    const created = ok(await gw.room.configure(evt, input));
    expect(created).toMatchObject({ created: true, changed: true });
    const commitment = created.info.lottery.commitment;

    const same = ok(await gw.rooms[1]!.configure(evt, input));
    expect(same).toMatchObject({ created: false, changed: false });
    expect(same.info.lottery.commitment).toBe(commitment);

    const moved = ok(await gw.room.configure(evt, { ...input, onSaleAt: Date.now() + 120_000, admitPerSecond: 7.5 }));
    expect(moved).toMatchObject({ created: false, changed: true });
    expect(moved.settings).toMatchObject({ admitPerSecond: 7.5, abandonSeconds: 60 });
    expect(moved.info.lottery.commitment).toBe(commitment);

    const opened = ok(await gw.room.openNow(evt));
    expect(opened.changed).toBe(true);
    expect(ok(await gw.room.openNow(evt)).changed).toBe(false);
    expect(await gw.room.configure(evt, { ...input, onSaleAt: Date.now() + 500_000 })).toEqual({
      ok: false,
      reason: "already_open",
    });

    const invalid = await gw.room.configure(evt, { ...input, maxActive: -1, onSaleAt: "not a date" });
    expect(invalid.ok).toBe(false);
    expect(invalid.ok === false && invalid.reason).toBe("invalid");

    const history = ok(await gw.room.settingsHistory(evt));
    expect(history.changes.map((c) => c.kind)).toEqual(["open", "configure", "create"]);
  });
});
