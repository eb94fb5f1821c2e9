/**
 * The operator console's model without a browser: rates over a window of samples, the metric
 * sum, the settings checks and the confirmation texts, and the poll's reactions to the gateway.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import {
  ConsoleModel,
  type ConsoleView,
  planSettings,
  RateWindow,
  type Rates,
  type RoomStatus,
  sumMetric,
} from "../../waiting-room/src/console-model.js";
import type { Message } from "../../waiting-room/src/format.js";
import type { Stats, WaitingRoomInfo } from "../../waiting-room/src/types.js";
import { FakeApi, ok, refused } from "./fakes.js";

describe("the console's figures", () => {
  it("sums a counter's series from the /metrics text", () => {
    const text = [
      "# TYPE gateway_conflicts_total counter",
      'gateway_conflicts_total{event="a"} 3',
      'gateway_conflicts_total{event="b"} 4',
      "gateway_conflicts_total_created 99",
      'gateway_requests_total{route="x"} 100',
    ].join("\n");
    expect(sumMetric(text, "gateway_conflicts_total")).toBe(7);
    expect(sumMetric(text, "nothing_total")).toBe(0);
  });

  it("takes rates over the window, not over one poll, and never below zero", () => {
    const w = new RateWindow();
    expect(w.add({ at: 0, admitted: 0, sold: 0, conflicts: 0 })).toBeNull();
    expect(w.add({ at: 1_000, admitted: 10, sold: 2, conflicts: null })).toEqual({
      admissions: 10,
      sales: 2,
      conflicts: null,
    });
    // A sample that could not read /metrics gives no conflict rate; the others still count.
    expect(w.add({ at: 2_000, admitted: 20, sold: 4, conflicts: 1 })).toEqual({
      admissions: 10,
      sales: 2,
      conflicts: 0.5,
    });
    // 5.4 s after the first sample it is still in the window (5 s and a poll's slack): the base.
    expect(w.add({ at: 5_400, admitted: 54, sold: 0, conflicts: 5.4 })).toEqual({
      admissions: 10,
      sales: 0,
      conflicts: 1,
    });
    // Later, the samples older than the window are gone: the oldest one left is the base.
    expect(w.add({ at: 9_400, admitted: 94, sold: 8, conflicts: 13.4 })).toEqual({
      admissions: 10,
      sales: 2,
      conflicts: 2,
    });
  });
});

describe("settings changes", () => {
  const inForce = { admitPerSecond: 5, maxActive: 100 };

  it("refuses values out of range and names the field", () => {
    expect(planSettings("-1", "", inForce)).toMatchObject({ ok: false, field: "rate" });
    expect(planSettings("100001", "", inForce)).toMatchObject({ ok: false, field: "rate" });
    expect(planSettings("", "1.5", inForce)).toMatchObject({ ok: false, field: "max" });
    expect(planSettings("5", "100", inForce)).toMatchObject({ ok: false, field: null });
  });

  it("lists what changes from what is in force, and warns that 0 stops admissions", () => {
    expect(planSettings("0", "200", inForce)).toEqual({
      ok: true,
      patch: { admitPerSecond: 0, maxActive: 200 },
      changes: [
        { field: "Admissions per second", from: "5", to: "0" },
        { field: "Max active sessions", from: "100", to: "200" },
      ],
      warning: "A rate of 0 stops admissions until it is raised again.",
    });
    const plan = planSettings("3", "", {});
    expect(plan.ok && plan.changes).toEqual([{ field: "Admissions per second", from: "?", to: "3" }]);
  });
});

describe("the console's poll", () => {
  const STATS: Stats = {
    waiting: 6,
    admitted: 0,
    active: 0,
    seats: { available: 30, held: 0, sold: 0 },
    generalAdmission: {},
    purchases: { confirmed: 0, pending: 0, failed: 0 },
  };
  const INFO: WaitingRoomInfo = {
    onSaleAt: "",
    state: "paused",
    waiting: 6,
    admitPerSecond: 0,
    lottery: { commitment: "c" },
  };

  class Recorder implements ConsoleView {
    readonly log: string[] = [];
    readonly messages: Message[] = [];
    readonly rooms: RoomStatus[] = [];
    readonly rates: (Rates | null)[] = [];
    connected = () => void this.log.push("connected");
    ready = () => void this.log.push("ready");
    disconnected = () => void this.log.push("disconnected");
    polled = (_s: Stats, rates: Rates | null, room: RoomStatus) => {
      this.rates.push(rates);
      this.rooms.push(room);
    };
    stale = (reason: string) => void this.log.push(`stale:${reason}`);
    applied = () => void this.log.push("applied");
    message = (m: Message) => void this.messages.push(m);
    clearMessage = () => {};
  }

  beforeEach(() => void vi.useFakeTimers());
  afterEach(() => void vi.useRealTimers());

  function setup(stats: () => ReturnType<typeof ok<Stats>> | ReturnType<typeof refused>) {
    let info: WaitingRoomInfo = INFO;
    const api = new FakeApi(({ path, method }) => {
      if (path.endsWith("/stats")) return stats();
      if (path.endsWith("/waiting-room") && method === "GET") return ok(info);
      if (path === "/metrics") return ok("gateway_conflicts_total 2\n");
      return undefined;
    });
    const model = new ConsoleModel(api, { eventId: "evt", token: "admin" });
    const view = new Recorder();
    model.observe(view);
    return { api, model, view, setInfo: (next: WaitingRoomInfo) => (info = next) };
  }

  it("a rate of 0 reads as paused (rate 0), not as the pause switch; a refused token disconnects", async () => {
    let answer: ReturnType<typeof ok<Stats>> | ReturnType<typeof refused> = ok(STATS);
    const s = setup(() => answer);
    await s.model.connect("evt");
    expect(s.view.log).toEqual(["connected", "ready"]);
    expect(s.view.rooms[0]).toMatchObject({
      label: "paused (rate 0)",
      paused: false,
      inForce: "In force: admitPerSecond 0",
    });
    expect(s.api.calls[0]?.options.token).toBe("admin");

    await vi.advanceTimersByTimeAsync(1_000);
    expect(s.view.rooms).toHaveLength(2);
    expect(s.view.rates[1]).toMatchObject({ admissions: 0, conflicts: 0 });

    answer = refused(503, { code: "unavailable", message: "down" });
    await vi.advanceTimersByTimeAsync(1_000);
    expect(s.view.log.at(-1)).toBe("stale:Can't reach the gateway (down); retrying…");
    // One failure: the next poll waits twice as long.
    await vi.advanceTimersByTimeAsync(1_500);
    expect(s.api.count("/stats")).toBe(3);
    answer = refused(401, { code: "unauthenticated", message: "no" });
    await vi.advanceTimersByTimeAsync(600);
    expect(s.view.log.at(-1)).toBe("disconnected");
    expect(s.view.messages.at(-1)?.title).toBe("The operator token was refused.");
    await vi.advanceTimersByTimeAsync(10_000);
    expect(s.api.count("/stats")).toBe(4);
  });

  it("applies a change, keeps what is in force, and describes pause and resume", async () => {
    const s = setup(() => ok(STATS));
    await s.model.connect("evt");
    expect(s.model.planPause(true).warning).toBe("The rate is 0: nobody is admitted until you also raise it.");
    const applying = s.model.apply({ admitPerSecond: 3 });
    const call = s.api.take("/waiting-room");
    expect(call).toMatchObject({ method: "PATCH", options: { token: "admin", json: { admitPerSecond: 3 } } });
    s.setInfo({ ...INFO, state: "open", admitPerSecond: 3 });
    call.answer(ok({ onSaleAt: "", admitPerSecond: 3, maxActive: 100, sessionSeconds: 600, paused: false }));
    await applying;
    expect(s.view.log).toContain("applied");
    expect(s.view.messages.at(-1)?.text).toBe("admitPerSecond 3 · maxActive 100 · not paused");
    expect(s.view.rooms.at(-1)).toMatchObject({
      label: "open",
      paused: false,
      inForce: "In force: admitPerSecond 3 · maxActive 100",
    });
    expect(s.model.planPause(false)).toMatchObject({ title: "Pause admission?", patch: { paused: true } });
    s.model.disconnect();
  });
});
