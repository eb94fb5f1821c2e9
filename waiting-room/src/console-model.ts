/**
 * The operator console's state, with no DOM: the connection to one event, the stats poll (with
 * its back-off), the rates taken over a few seconds of counter samples, the charts' history (the
 * last hour the gateway kept, loaded on connect, then this console's own polls appended), what
 * the waiting room is doing, and the settings changes (checked and described before the operator
 * confirms them). console.ts draws what it is told and asks the operator to confirm.
 */
import { Observed } from "./observed.js";
import type { Api } from "./api.js";
import { type BoundsPlan, type BoundsText, planBounds } from "./console-bounds.js";
import { type Message, message } from "./format.js";
import type { Stats, StatsHistory, StatsSample, WaitingRoomInfo, WaitingRoomSettings } from "./types.js";

export const POLL_MS = 1_000;
/** While the admission loop is on, the gateway's new samples (one per 5 s) are read this often at most. */
const LOOP_READ_MS = 2_500;
/** Rates are taken over this window of samples, not over one noisy poll. */
export const RATE_WINDOW_MS = 5_000;
/** The charts show at most this much: the hour the gateway keeps. */
export const HISTORY_MS = 3_600_000;
/** ... and at least this much, so the first minutes of a sale do not fill the whole width. */
export const MIN_SPAN_MS = 120_000;
/** Two samples further apart than this have no rate between them (a gap in the history). */
const MAX_RATE_GAP_MS = 30_000;
/** Pages of history read on connect at most (1,000 samples each; an hour at 5 s is 720). */
const HISTORY_PAGES = 4;

export const rate = (v: number): string => (v >= 10 ? Math.round(v).toLocaleString() : v.toFixed(1));

/** The sum of a Prometheus counter's series in a /metrics text; 0 when it has none. */
export function sumMetric(text: string, name: string): number {
  let total = 0;
  for (const line of text.split("\n")) {
    if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue;
    const value = Number(line.slice(line.lastIndexOf(" ") + 1));
    if (Number.isFinite(value)) total += value;
  }
  return total;
}

interface Sample {
  at: number;
  admitted: number;
  sold: number;
  conflicts: number | null;
}

export interface Rates {
  admissions: number;
  sales: number;
  /** null while either end of the window could not read /metrics. */
  conflicts: number | null;
}

/** Counter samples of the last few seconds, and the per-second rates between them. */
export class RateWindow {
  private samples: Sample[] = [];

  clear(): void {
    this.samples = [];
  }

  /** Adds a sample; the rates since the oldest one still in the window (null for the first). */
  add(current: Sample): Rates | null {
    const inWindow = (s: Sample) => current.at - s.at <= RATE_WINDOW_MS + 500;
    const base = this.samples.find(inWindow) ?? this.samples[this.samples.length - 1];
    this.samples = [...this.samples.filter(inWindow), current];
    if (!base) return null;
    const dt = Math.max(0.001, (current.at - base.at) / 1000);
    return {
      admissions: Math.max(0, current.admitted - base.admitted) / dt,
      sales: Math.max(0, current.sold - base.sold) / dt,
      conflicts:
        current.conflicts !== null && base.conflicts !== null
          ? Math.max(0, current.conflicts - base.conflicts) / dt
          : null,
    };
  }
}

/** One point of the charts' history: a sample the gateway kept, or one of this console's polls. */
export interface ChartSample {
  /** Epoch ms, by the gateway's clock. */
  at: number;
  waiting: number;
  active: number;
  held: number;
  /** Counters: their slopes are the admission and sales rates. */
  admitted: number;
  sold: number;
  /** This gateway's conflicts counter (only the console's own polls have it; null: unread). */
  conflicts?: number | null;
}

export type ChartName = "waiting" | "admissions" | "active" | "holds" | "sales" | "conflicts";

export interface ChartPoint {
  at: number;
  value: number;
}

/**
 * The samples behind the charts, oldest first, at most HISTORY_MS: the gateway's history (one
 * sample per 5 s, src/stats/sampler.ts) followed by this console's polls. Rates are slopes of the
 * counters over RATE_WINDOW_MS, whatever the samples' spacing.
 */
/** One step of the admission loop, as its chart reads it (the gateway's samples only). */
export interface LoopPoint {
  at: number;
  rate: number;
  finishing: number | null;
  p99: number | null;
  target: number;
  reason: string;
}

export interface LoopSeries {
  rate: ChartPoint[];
  finishing: ChartPoint[];
  p99: ChartPoint[];
  target: ChartPoint[];
  latest: LoopPoint | undefined;
}

export class ChartHistory {
  private samples: ChartSample[] = [];
  private loopPoints: LoopPoint[] = [];
  /** The newest gateway sample read (what the next history read starts after). */
  lastGatewayAt = 0;

  get size(): number {
    return this.samples.length;
  }

  /** The newest sample's time; 0 when there is none. */
  get end(): number {
    return this.samples[this.samples.length - 1]?.at ?? 0;
  }

  /** The width the charts show: what there is, between MIN_SPAN_MS and HISTORY_MS. */
  get span(): number {
    const first = this.samples[0]?.at ?? this.end;
    return Math.min(HISTORY_MS, Math.max(MIN_SPAN_MS, this.end - first));
  }

  clear(): void {
    this.samples = [];
    this.loopPoints = [];
    this.lastGatewayAt = 0;
  }

  /** The gateway's samples: those with a loop step become the loop chart's points. */
  addGateway(samples: readonly StatsSample[]): void {
    this.add(samples.map(chartSample));
    const known = new Set(this.loopPoints.map((p) => p.at));
    for (const s of samples) {
      this.lastGatewayAt = Math.max(this.lastGatewayAt, s.at);
      if (!s.loop || known.has(s.at)) continue;
      this.loopPoints.push({
        at: s.at,
        rate: s.loop.rate,
        finishing: s.loop.finishingPerSecond,
        p99: s.claimP99Ms ?? null,
        target: s.loop.targetClaimP99Ms,
        reason: s.loop.reason,
      });
    }
    this.loopPoints.sort((a, b) => a.at - b.at);
    this.loopPoints = this.loopPoints.filter((p) => p.at >= this.lastGatewayAt - HISTORY_MS);
  }

  /** The loop chart: the rate it set, what sessions freed, the claim p99 and its target. */
  loop(): LoopSeries {
    const pts = this.loopPoints;
    const of = (pick: (p: LoopPoint) => number | null) =>
      pts.flatMap((p) => {
        const value = pick(p);
        return value === null ? [] : [{ at: p.at, value }];
      });
    return {
      rate: of((p) => p.rate),
      finishing: of((p) => p.finishing),
      p99: of((p) => p.p99),
      target: of((p) => p.target),
      latest: pts[pts.length - 1],
    };
  }

  /** Adds samples (any order; one already there, by time, is kept once) and drops what is too old. */
  add(samples: readonly ChartSample[]): void {
    if (samples.length === 0) return;
    const byTime = new Map(this.samples.map((s) => [s.at, s]));
    for (const s of samples) if (!byTime.has(s.at)) byTime.set(s.at, s);
    const sorted = [...byTime.values()].sort((a, b) => a.at - b.at);
    const newest = sorted[sorted.length - 1]?.at ?? 0;
    this.samples = sorted.filter((s) => s.at >= newest - HISTORY_MS);
  }

  series(name: ChartName): ChartPoint[] {
    switch (name) {
      case "waiting":
        return this.samples.map((s) => ({ at: s.at, value: s.waiting }));
      case "active":
        return this.samples.map((s) => ({ at: s.at, value: s.active }));
      case "holds":
        return this.samples.map((s) => ({ at: s.at, value: s.held }));
      case "admissions":
        return this.slope((s) => s.admitted);
      case "sales":
        return this.slope((s) => s.sold);
      case "conflicts":
        return this.slope((s) => (s.conflicts === undefined ? null : s.conflicts));
    }
  }

  private slope(value: (s: ChartSample) => number | null): ChartPoint[] {
    const known = this.samples.filter((s) => value(s) !== null);
    const points: ChartPoint[] = [];
    let base = 0;
    for (let i = 1; i < known.length; i++) {
      const current = known[i]!;
      // The oldest sample within the window before this one; else the one just before it.
      while (base < i - 1 && current.at - known[base]!.at > RATE_WINDOW_MS + 500) base++;
      const from = known[base]!;
      const dt = current.at - from.at;
      if (dt <= 0 || dt > MAX_RATE_GAP_MS) continue;
      points.push({ at: current.at, value: Math.max(0, (value(current)! - value(from)!) / (dt / 1000)) });
    }
    return points;
  }
}

/** A gateway's sample as the charts read it. */
export const chartSample = (s: StatsSample): ChartSample => ({
  at: s.at,
  waiting: s.waiting,
  active: s.active,
  held: s.held,
  admitted: s.admitted,
  sold: s.sold,
});

export interface Change {
  field: string;
  from: string;
  to: string;
}

/** A settings change ready to confirm, or why there is none. */
export type SettingsPlan =
  | { ok: true; patch: Partial<WaitingRoomSettings>; changes: Change[]; warning: string }
  | { ok: false; field: "rate" | "max" | null; message: Message };

/** Checks the typed values against what is in force; empty means unchanged. */
export function planSettings(rateText: string, maxText: string, inForce: Partial<WaitingRoomSettings>): SettingsPlan {
  const patch: Partial<WaitingRoomSettings> = {};
  const changes: Change[] = [];
  if (rateText.trim() !== "") {
    const value = Number(rateText);
    if (!Number.isFinite(value) || value < 0 || value > 100_000) {
      return {
        ok: false,
        field: "rate",
        message: message("warning", "Admissions per second must be a number from 0 to 100,000."),
      };
    }
    if (value !== inForce.admitPerSecond) {
      patch.admitPerSecond = value;
      changes.push({ field: "Admissions per second", from: String(inForce.admitPerSecond ?? "?"), to: String(value) });
    }
  }
  if (maxText.trim() !== "") {
    const value = Number(maxText);
    if (!Number.isInteger(value) || value < 1) {
      return {
        ok: false,
        field: "max",
        message: message("warning", "Max active sessions must be a whole number, at least 1."),
      };
    }
    if (value !== inForce.maxActive) {
      patch.maxActive = value;
      changes.push({ field: "Max active sessions", from: String(inForce.maxActive ?? "unknown"), to: String(value) });
    }
  }
  if (changes.length === 0)
    return { ok: false, field: null, message: message("info", "Nothing to change.", "Edit a value first.") };
  const warning =
    patch.admitPerSecond === 0
      ? "A rate of 0 stops admissions until it is raised again."
      : "Takes effect at once on every gateway. It is not retroactive: the new rate counts from now.";
  return { ok: true, patch, changes, warning };
}

/** What the waiting room is doing, as the console shows it. */
export interface RoomStatus {
  state: string;
  label: string;
  /** The pause switch (not a rate of 0): what the pause button toggles. */
  paused: boolean;
  inForce: string;
}

export interface ConsoleView {
  connected(eventId: string): void;
  /** The first poll after connecting is in: move the focus to the dashboard. */
  ready(): void;
  disconnected(): void;
  /** One poll's figures: counters to chart, rates (null on the first poll), the room, the stats. */
  polled(stats: Stats, rates: Rates | null, room: RoomStatus): void;
  /** The charts' history changed (loaded on connect, or a poll appended to it). */
  charted(history: ChartHistory): void;
  stale(reason: string): void;
  applied(settings: WaitingRoomSettings): void;
  message(m: Message): void;
  clearMessage(): void;
}

export class ConsoleModel extends Observed<ConsoleView> {
  eventId: string;
  token: string | null;
  connected = false;
  inForce: Partial<WaitingRoomSettings> = {};
  private state = "";
  private failures = 0;
  private pollTimer: ReturnType<typeof setTimeout> | undefined;
  private readonly rates = new RateWindow();
  readonly history = new ChartHistory();

  constructor(
    private readonly api: Pick<Api, "call" | "now">,
    initial: { eventId: string; token: string | null },
  ) {
    super();
    this.eventId = initial.eventId;
    this.token = initial.token;
  }

  async connect(eventId: string): Promise<void> {
    this.eventId = eventId;
    this.connected = true;
    this.rates.clear();
    this.history.clear();
    this.view.connected(eventId);
    this.view.clearMessage();
    // The last hour at once (a reloaded console loses nothing); then the polls append to it.
    await this.loadHistory();
    await this.pollOnce();
    if (this.connected) {
      this.view.ready();
      this.schedule();
    }
  }

  disconnect(): void {
    this.connected = false;
    clearTimeout(this.pollTimer);
    this.view.disconnected();
  }

  /**
   * The gateway's history of the event, a page at a time. Without one (an older gateway, Redis
   * down, a refused token: the poll says why) the charts start empty and fill from the polls.
   */
  async loadHistory(): Promise<void> {
    const token = this.token;
    if (!token) return;
    let since = 0;
    for (let page = 0; page < HISTORY_PAGES; page++) {
      const res = await this.api.call<StatsHistory>(
        "GET",
        `/v1/admin/events/${encodeURIComponent(this.eventId)}/stats/history?since=${since}`,
        { token },
      );
      if (!res.ok) return;
      this.history.addGateway(res.body.samples);
      const last = res.body.samples[res.body.samples.length - 1];
      if (!res.body.more || !last) break;
      since = last.at;
    }
    this.view.charted(this.history);
  }

  private async loadLoopSteps(token: string): Promise<void> {
    const since = this.history.lastGatewayAt;
    const res = await this.api.call<StatsHistory>(
      "GET",
      `/v1/admin/events/${encodeURIComponent(this.eventId)}/stats/history?since=${since}`,
      { token },
    );
    if (res.ok) this.history.addGateway(res.body.samples);
  }

  private schedule() {
    clearTimeout(this.pollTimer);
    this.pollTimer = setTimeout(
      async () => {
        await this.pollOnce();
        if (this.connected) this.schedule();
      },
      this.failures > 0 ? Math.min(10_000, POLL_MS * 2 ** this.failures) : POLL_MS,
    );
  }

  async pollOnce(): Promise<void> {
    const token = this.token;
    if (!token) return;
    const [statsRes, infoRes, metricsRes] = await Promise.all([
      this.api.call<Stats>("GET", `/v1/admin/events/${encodeURIComponent(this.eventId)}/stats`, { token }),
      this.api.call<WaitingRoomInfo>("GET", `/v1/events/${encodeURIComponent(this.eventId)}/waiting-room`),
      this.api.call<string>("GET", "/metrics", { text: true }),
    ]);
    if (!statsRes.ok) {
      if (statsRes.status === 401 || statsRes.status === 403) {
        this.disconnect();
        this.view.message(message("error", "The operator token was refused.", "Check it and connect again."));
      } else if (statsRes.status === 404) {
        this.disconnect();
        this.view.message(message("error", `There is no event "${this.eventId}".`));
      } else {
        this.failures++;
        this.view.stale(`Can't reach the gateway (${statsRes.error.message}); retrying…`);
      }
      return;
    }
    this.failures = 0;
    const stats = statsRes.body;
    const sold = stats.seats.sold + Object.values(stats.generalAdmission).reduce((n, g) => n + g.sold, 0);
    const conflicts = metricsRes.ok ? sumMetric(metricsRes.body, "gateway_conflicts_total") : null;
    const rates = this.rates.add({ at: performance.now(), admitted: stats.admitted, sold, conflicts });
    const held = stats.seats.held + Object.values(stats.generalAdmission).reduce((n, g) => n + (g.held ?? 0), 0);
    // On the gateway's clock (from its Date headers), as the history's samples are.
    const at = Math.max(Math.round(this.api.now()), this.history.end + 1);
    this.history.add([
      { at, waiting: stats.waiting, active: stats.active, held, admitted: stats.admitted, sold, conflicts },
    ]);
    // The loop's steps are in the gateway's samples only: while it is on, read the new ones.
    if (stats.waitingRoom?.settings?.autoAdmit?.enabled && this.api.now() - this.history.lastGatewayAt > LOOP_READ_MS) {
      await this.loadLoopSteps(token);
    }
    const loop = stats.waitingRoom?.settings?.autoAdmit;
    if (loop) this.inForce.autoAdmit = loop;
    if (infoRes.ok) {
      this.inForce.admitPerSecond = infoRes.body.admitPerSecond;
      this.state = infoRes.body.state;
    } else if (stats.waitingRoom) {
      this.state = stats.waitingRoom.state;
    }
    this.view.polled(stats, rates, this.room(stats));
    this.view.charted(this.history);
  }

  private room(stats: Stats): RoomStatus {
    // "paused" is either the pause switch or a rate of 0; the button is about the switch.
    const rateZero = this.inForce.admitPerSecond === 0;
    const paused = this.inForce.paused ?? (this.state === "paused" && !rateZero);
    const parts = [`admitPerSecond ${this.inForce.admitPerSecond ?? "?"}`];
    if (this.inForce.maxActive !== undefined) parts.push(`maxActive ${this.inForce.maxActive}`);
    if (stats.waitingRoom) parts.push(`effective ${rate(stats.waitingRoom.effectiveAdmitPerSecond)}/s`);
    if (stats.waitingRoom?.awaitingSweep) parts.push("admission waits for the sweep of fans who left");
    if (stats.waitingRoom?.offered) parts.push(`${stats.waitingRoom.offered} offered, not yet claimed`);
    return {
      state: this.state,
      label: this.state === "paused" && rateZero && !paused ? "paused (rate 0)" : this.state || "unknown",
      paused,
      inForce: `In force: ${parts.join(" · ")}`,
    };
  }

  planSettings(rateText: string, maxText: string): SettingsPlan {
    return planSettings(rateText, maxText, this.inForce);
  }

  /** The loop's bounds and targets as typed, against those the last poll (or change) read. */
  planBounds(typed: BoundsText): BoundsPlan {
    return planBounds(typed, this.inForce.autoAdmit);
  }

  /** The confirmation for pausing (or, with `resume`, resuming) admission. */
  planPause(resume: boolean): {
    title: string;
    changes: Change[];
    warning: string;
    patch: Partial<WaitingRoomSettings>;
  } {
    const warning = resume
      ? this.inForce.admitPerSecond === 0
        ? "The rate is 0: nobody is admitted until you also raise it."
        : "Fans are admitted again at the set rate from now on."
      : "Nobody is admitted while paused; fans in line keep their places.";
    return {
      title: resume ? "Resume admission?" : "Pause admission?",
      changes: [{ field: "Admission", from: resume ? "paused" : "running", to: resume ? "running" : "paused" }],
      warning,
      patch: { paused: !resume },
    };
  }

  /** Sends a change; true when the gateway applied it (a refusal is told to the view). */
  async apply(patch: Partial<WaitingRoomSettings>): Promise<boolean> {
    const token = this.token;
    if (!token) return false;
    const res = await this.api.call<WaitingRoomSettings>(
      "PATCH",
      `/v1/admin/events/${encodeURIComponent(this.eventId)}/waiting-room`,
      { token, json: patch },
    );
    if (!res.ok) {
      this.view.message(message("error", "The change was not applied.", res.error.message));
      return false;
    }
    this.inForce = { ...this.inForce, ...res.body };
    this.view.applied(res.body);
    const a = res.body.autoAdmit;
    // A change of the loop's bounds says what they are now; any other, what admission is.
    const detail =
      patch.autoAdmit && a
        ? `loop ${a.enabled ? "on" : "off"} · ${a.minPerSecond}–${a.maxPerSecond}/s · ` +
          `claim p99 target ${a.targetClaimP99Ms} ms · ${a.maxThrottlesPerSecond} throttles/s`
        : `admitPerSecond ${res.body.admitPerSecond} · maxActive ${res.body.maxActive} · ${res.body.paused ? "paused" : "not paused"}`;
    this.view.message(message("success", "Applied on every gateway.", detail));
    await this.pollOnce();
    return true;
  }
}
