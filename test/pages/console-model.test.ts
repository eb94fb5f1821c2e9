/**
 * The operator console's model without a browser: rates over a window of samples, the metric
 * sum, the charts' history (the gateway's hour loaded on connect, the polls appended, rates as
 * slopes), the settings and loop-bounds checks and the confirmation texts, and the poll's reactions
 * to the gateway.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import {
  type ChartHistory as ChartHistoryType,
  ChartHistory,
  type ChartSample,
  ConsoleModel,
  type ConsoleView,
  HISTORY_MS,
  MIN_SPAN_MS,
  planSettings,
  RateWindow,
  type Rates,
  type RoomStatus,
  sumMetric,
} from "../../waiting-room/src/console-model.js";
import { type BoundsText, planBounds } from "../../waiting-room/src/console-bounds.js";
import type { Message } from "../../waiting-room/src/format.js";
import type { Stats, StatsHistory, StatsSample, WaitingRoomInfo } from "../../waiting-room/src/types.js";
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

describe("the charts' history", () => {
  const sample = (at: number, over: Partial<ChartSample> = {}): ChartSample => ({
    at,
    waiting: 0,
    active: 0,
    held: 0,
    admitted: 0,
    sold: 0,
    ...over,
  });

  it("keeps samples in time order, each once, and no more than the hour before the newest", () => {
    const h = new ChartHistory();
    expect([h.size, h.end, h.span]).toEqual([0, 0, MIN_SPAN_MS]);
    h.add([sample(10_000, { waiting: 2 }), sample(5_000, { waiting: 1 })]);
    h.add([sample(10_000, { waiting: 99 }), sample(15_000, { waiting: 3 })]);
    expect(h.series("waiting")).toEqual([
      { at: 5_000, value: 1 },
      { at: 10_000, value: 2 },
      { at: 15_000, value: 3 },
    ]);
    // Ten seconds of samples still show two minutes; an hour and more shows the hour.
    expect(h.span).toBe(MIN_SPAN_MS);
    h.add([sample(5_000 + HISTORY_MS + 1, { waiting: 4 })]);
    expect(h.series("waiting").map((p) => p.at)).toEqual([10_000, 15_000, 5_000 + HISTORY_MS + 1]);
    expect(h.span).toBe(HISTORY_MS - 5_000 + 1);
    expect(h.end).toBe(5_000 + HISTORY_MS + 1);
  });

  it("charts rates as the counters' slopes over the window, whatever the spacing, with no rate across a gap", () => {
    const h = new ChartHistory();
    // The gateway's samples, 5 s apart; then the console's polls, 1 s apart.
    h.add([0, 5_000, 10_000].map((at) => sample(at, { admitted: at / 100, sold: at / 1_000 })));
    h.add([11_000, 12_000, 13_000].map((at) => sample(at, { admitted: at / 100, sold: 10, conflicts: at / 1_000 })));
    expect(h.series("admissions")).toEqual([
      { at: 5_000, value: 10 },
      { at: 10_000, value: 10 },
      { at: 11_000, value: 10 },
      { at: 12_000, value: 10 },
      { at: 13_000, value: 10 },
    ]);
    // Sold stays at 10 from 10 s: from 11 s on, the oldest sample within the window is the 10 s one.
    expect(h.series("sales").map((p) => p.value)).toEqual([1, 1, 0, 0, 0]);
    // Conflicts only where the console read /metrics: never below zero.
    expect(h.series("conflicts")).toEqual([
      { at: 12_000, value: 1 },
      { at: 13_000, value: 1 },
    ]);
    // Forty seconds with no sample: no slope drawn across it; counters that fell give 0, not less.
    h.add([sample(53_000, { admitted: 0 })]);
    expect(h.series("admissions").at(-1)).toEqual({ at: 13_000, value: 10 });
    h.add([sample(54_000, { admitted: 0 })]);
    expect(h.series("admissions").at(-1)).toEqual({ at: 54_000, value: 0 });
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

describe("the admission loop's bounds", () => {
  const loop = { enabled: true, minPerSecond: 1, maxPerSecond: 20, targetClaimP99Ms: 250, maxThrottlesPerSecond: 0 };
  const typed = (t: Partial<BoundsText>): BoundsText => ({ min: "1", max: "20", p99: "250", throttles: "0", ...t });

  it("patches only the bounds that change, never `enabled`, with from → to rows", () => {
    expect(planBounds(typed({ min: "2", max: "9", p99: "150" }), loop)).toEqual({
      ok: true,
      patch: { autoAdmit: { minPerSecond: 2, maxPerSecond: 9, targetClaimP99Ms: 150 } },
      changes: [
        { field: "Min admissions /s", from: "1", to: "2" },
        { field: "Max admissions /s", from: "20", to: "9" },
        { field: "Claim p99 target (ms)", from: "250", to: "150" },
      ],
      warning: "The loop keeps to them from its next step (within 5 s); it stays on.",
    });
    // An empty field keeps its value; fractional rates are the gateway's too.
    const off = planBounds(typed({ min: "", max: "", p99: "", throttles: "0.5" }), { ...loop, enabled: false });
    expect(off).toMatchObject({ ok: true, patch: { autoAdmit: { maxThrottlesPerSecond: 0.5 } } });
    expect(off.ok && off.warning).toMatch(/^The loop is off/);
    expect(planBounds(typed({}), loop)).toMatchObject({
      ok: false,
      errors: {},
      message: { title: "Nothing to change." },
    });
    expect(planBounds(typed({ min: "2" }), undefined)).toMatchObject({ ok: false, errors: {} });
  });

  it("holds each field to the gateway's limits and says so beside it", () => {
    const errors = (t: Partial<BoundsText>) => {
      const plan = planBounds(typed(t), loop);
      return plan.ok ? null : plan.errors;
    };
    expect(errors({ min: "-1", p99: "150.5", throttles: "x" })).toEqual({
      min: "A number from 0 to 100,000.",
      p99: "A whole number from 1 to 60,000.",
      throttles: "A number from 0 to 100,000.",
    });
    expect(errors({ max: "100001", p99: "0" })).toEqual({
      max: "A number from 0 to 100,000.",
      p99: "A whole number from 1 to 60,000.",
    });
    expect(errors({ p99: "60001" })).toEqual({ p99: "A whole number from 1 to 60,000." });
    expect(errors({ min: "0", max: "0", p99: "60000", throttles: "100000" })).toBeNull();
  });

  it("keeps min ≤ max against the bound in force too, naming the one that moved", () => {
    const errorsOf = (t: Partial<BoundsText>) => {
      const plan = planBounds(typed(t), loop);
      return plan.ok ? null : plan.errors;
    };
    expect(errorsOf({ min: "10", max: "9" })).toEqual({ min: "Must not be above the max (9)." });
    expect(errorsOf({ min: "21", max: "" })).toEqual({ min: "Must not be above the max (20)." });
    expect(errorsOf({ max: "0.5" })).toEqual({ max: "Must not be below the min (1)." });
    expect(errorsOf({ min: "9", max: "9" })).toBeNull();
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
    readonly charts: { size: number; waiting: number[] }[] = [];
    connected = () => void this.log.push("connected");
    ready = () => void this.log.push("ready");
    disconnected = () => void this.log.push("disconnected");
    polled = (_s: Stats, rates: Rates | null, room: RoomStatus) => {
      this.rates.push(rates);
      this.rooms.push(room);
    };
    charted = (h: ChartHistoryType) =>
      void this.charts.push({ size: h.size, waiting: h.series("waiting").map((p) => p.value) });
    stale = (reason: string) => void this.log.push(`stale:${reason}`);
    applied = () => void this.log.push("applied");
    message = (m: Message) => void this.messages.push(m);
    clearMessage = () => {};
  }

  beforeEach(() => void vi.useFakeTimers());
  afterEach(() => void vi.useRealTimers());

  const historyOf = (samples: StatsSample[], more = false): StatsHistory => ({
    eventId: "evt",
    intervalSeconds: 5,
    windowSeconds: 3_600,
    samples,
    more,
  });

  function setup(
    stats: () => ReturnType<typeof ok<Stats>> | ReturnType<typeof refused>,
    history: (path: string) => ReturnType<typeof ok<StatsHistory>> | ReturnType<typeof refused> | undefined = () =>
      ok(historyOf([])),
  ) {
    let info: WaitingRoomInfo = INFO;
    const api = new FakeApi(({ path, method }) => {
      if (path.includes("/stats/history")) return history(path);
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

  const statsPolls = (api: FakeApi) => api.calls.filter((c) => c.path.endsWith("/stats")).length;

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
    expect(statsPolls(s.api)).toBe(3);
    answer = refused(401, { code: "unauthenticated", message: "no" });
    await vi.advanceTimersByTimeAsync(600);
    expect(s.view.log.at(-1)).toBe("disconnected");
    expect(s.view.messages.at(-1)?.title).toBe("The operator token was refused.");
    await vi.advanceTimersByTimeAsync(10_000);
    expect(statsPolls(s.api)).toBe(4);
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

  it("says when admission waits for the sweep of fans who left (a room with fan shards)", async () => {
    const waiting = (awaitingSweep: boolean): Stats => ({
      ...STATS,
      waitingRoom: { state: "open", effectiveAdmitPerSecond: 0, servedThrough: 10, awaitingSweep },
    });
    let polled = waiting(true);
    const s = setup(() => ok(polled));
    await s.model.connect("evt");
    expect(s.view.rooms.at(-1)?.inForce).toContain("admission waits for the sweep of fans who left");
    polled = waiting(false);
    await vi.advanceTimersByTimeAsync(2_000);
    expect(s.view.rooms.at(-1)?.inForce).not.toContain("sweep");
    s.model.disconnect();
  });

  it("says how many sessions are offered and not yet claimed (a room with claims)", async () => {
    const polledWith = (offered: number): Stats => ({
      ...STATS,
      waitingRoom: { state: "open", effectiveAdmitPerSecond: 5, servedThrough: 10, offered },
    });
    let polled = polledWith(3);
    const s = setup(() => ok(polled));
    await s.model.connect("evt");
    expect(s.view.rooms.at(-1)?.inForce).toContain("3 offered, not yet claimed");
    polled = polledWith(0);
    await vi.advanceTimersByTimeAsync(2_000);
    expect(s.view.rooms.at(-1)?.inForce).not.toContain("offered");
    s.model.disconnect();
  });

  it("plans the loop's bounds against the last poll's, and says what they are once applied", async () => {
    const autoAdmit = {
      enabled: true,
      minPerSecond: 1,
      maxPerSecond: 20,
      targetClaimP99Ms: 250,
      maxThrottlesPerSecond: 0,
    };
    const polled: Stats = {
      ...STATS,
      waitingRoom: {
        state: "open",
        effectiveAdmitPerSecond: 5,
        servedThrough: 0,
        settings: { admitPerSecond: 5, maxActive: 100, autoAdmit },
      },
    };
    const s = setup(() => ok(polled));
    await s.model.connect("evt");
    const plan = s.model.planBounds({ min: "2", max: "9", p99: "150", throttles: "" });
    expect(plan.ok && plan.patch).toEqual({ autoAdmit: { minPerSecond: 2, maxPerSecond: 9, targetClaimP99Ms: 150 } });
    if (!plan.ok) return;
    const applying = s.model.apply(plan.patch);
    const call = s.api.take("/waiting-room");
    expect(call).toMatchObject({ method: "PATCH", options: { json: plan.patch } });
    const now = { ...autoAdmit, minPerSecond: 2, maxPerSecond: 9, targetClaimP99Ms: 150 };
    call.answer(
      ok({ onSaleAt: "", admitPerSecond: 5, maxActive: 100, sessionSeconds: 600, paused: false, autoAdmit: now }),
    );
    expect(await applying).toBe(true);
    expect(s.view.messages.at(-1)?.text).toBe("loop on · 2–9/s · claim p99 target 150 ms · 0 throttles/s");

    // A refusal is the existing error message, and apply says it was not applied.
    const refusedApply = s.model.apply({ autoAdmit: { minPerSecond: 30 } });
    s.api.take("/waiting-room").answer(refused(400, { code: "invalid_request", message: "invalid settings" }));
    expect(await refusedApply).toBe(false);
    expect(s.view.messages.at(-1)).toMatchObject({ title: "The change was not applied.", text: "invalid settings" });
    s.model.disconnect();
  });

  const serverSample = (at: number, waiting: number): StatsSample => ({
    at,
    countsAt: at,
    state: "open",
    waiting,
    admitted: 0,
    active: 0,
    available: 30,
    held: 0,
    sold: 0,
    purchases: { confirmed: 0, pending: 0, failed: 0 },
    admitPerSecond: 0,
    effectiveAdmitPerSecond: 0,
  });

  it("loads the gateway's hour on connect, a page at a time, before the first poll, then appends each poll", async () => {
    const hour = Array.from({ length: 720 }, (_, i) => serverSample(1_000_000 + i * 5_000, i % 7));
    const s = setup(
      () => ok(STATS),
      (path) => {
        const since = Number(new URL(`http://x${path}`).searchParams.get("since"));
        const page = hour.filter((x) => x.at > since).slice(0, 500);
        return ok(historyOf(page, page.at(-1) !== hour.at(-1)));
      },
    );
    s.api.setNow(hour.at(-1)!.at + 2_000);
    await s.model.connect("evt");
    const historyCalls = s.api.calls.filter((c) => c.path.includes("/stats/history"));
    expect(historyCalls.map((c) => c.path.split("?")[1])).toEqual(["since=0", `since=${hour[499]!.at}`]);
    expect(historyCalls.every((c) => c.options.token === "admin")).toBe(true);
    // Loaded before the first poll: the charts showed the whole hour, then the poll's point after it.
    expect(s.view.charts[0]).toEqual({ size: 720, waiting: hour.map((x) => x.waiting) });
    expect(s.view.charts[1]?.size).toBe(721);
    expect(s.view.charts[1]?.waiting.at(-1)).toBe(STATS.waiting);
    expect(s.model.history.end).toBe(hour.at(-1)!.at + 2_000);
    s.api.setNow(hour.at(-1)!.at + 3_000);
    await vi.advanceTimersByTimeAsync(1_000);
    expect(s.view.charts.at(-1)?.size).toBe(722);

    // A reloaded console (a new model) shows the same hour at once.
    const again = setup(
      () => ok(STATS),
      (path) => ok(historyOf(hour.filter((x) => x.at > Number(path.split("since=")[1])).slice(0, 1_000))),
    );
    await again.model.connect("evt");
    expect(again.api.count("/stats/history")).toBe(1);
    expect(again.view.charts[0]).toEqual(s.view.charts[0]);
    s.model.disconnect();
    again.model.disconnect();
  });

  it("keeps working with no history: empty, or refused (the charts fill from the polls)", async () => {
    for (const history of [() => ok(historyOf([])), () => refused(503, { code: "unavailable", message: "down" })]) {
      const s = setup(() => ok(STATS), history);
      s.api.setNow(50_000);
      await s.model.connect("evt");
      expect(s.view.log).toEqual(["connected", "ready"]);
      expect(s.view.rooms).toHaveLength(1);
      expect(s.view.charts.at(-1)).toEqual({ size: 1, waiting: [6] });
      s.api.setNow(51_000);
      await vi.advanceTimersByTimeAsync(1_000);
      expect(s.view.charts.at(-1)).toEqual({ size: 2, waiting: [6, 6] });
      s.model.disconnect();
    }
  });
});
