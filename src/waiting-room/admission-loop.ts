/**
 * Closed-loop admission: the rate the line admits at follows what checkout can take, measured,
 * instead of a counter an operator raises by hand. A pure controller: one `step` per event per
 * sample slot (5 s), run by the process that claimed the slot (src/stats/loop.ts), which reads the
 * measurements and applies the rate. Nothing here does I/O, so the law is tested in a simulation
 * (test/waiting-room/admission-loop.test.ts).
 *
 * The law (AIMD around a setpoint, the family TCP's congestion control belongs to):
 * - Nothing can be admitted (before the on-sale, the pre-queue not drawn yet, paused, closed):
 *   the rate stays ("not_admitting"); what it measures then says nothing of checkout, and a rate
 *   stepped up meanwhile would be spent at once when admission starts.
 * - Nobody waits: nothing to admit, the rate stays ("idle").
 * - Overload, the claim path's p99 above its target: multiplicative decrease, by a factor that
 *   grows with the overshoot (1 - (p99 - target) / (2 p99), within [0.5, 0.9]) ("p99_over_target").
 *   DynamoDB throttles above their ceiling: times 0.8 ("throttled"). The step after a decrease
 *   only holds ("settling") unless the overload is twice the target: the sessions admitted before
 *   the decrease are still shopping, so the latency lags the rate by about a step.
 * - Near the target (p99 above 60% of it): hold ("near_target"). That band is what keeps the rate
 *   from a sawtooth: a latency knee is steep, and the band is where it has started to bend.
 * - The room full or nearly (active >= 90% of maxActive): sessions are the limit, and a rate above
 *   what they free only piles fans at a full door (and lets them in in a burst when sessions expire
 *   together). The rate tracks the finishing rate times HEADROOM ("tracking_finishes").
 * - Throttles under a non-zero ceiling: hold ("near_target").
 * - Otherwise healthy: increase in proportion to the latency margin left below the band,
 *   rate x 25% x (1 - p99 / (60% of target)), at least 2% and MIN_STEP ("increasing"): fast from a
 *   cold start, slow as the knee nears, so one step does not cross the band. Within 85% of the rate
 *   the last overload happened at (a fast step stops there), only the least increase (2%), until 10% past it (the way TCP
 *   CUBIC slows near its last loss): a throttle ceiling has no latency band to warn of it.
 * - Always: the change per step is at most +25% (+MIN_STEP) and -50%, then the rate is clamped to
 *   the operator's [minPerSecond, maxPerSecond] ("at_max", "at_min" when the clamp decided).
 * What it does not do: predict demand, admit faster than maxActive allows (the line still caps
 * active sessions), or look at payments; a p99 that has no claims behind it (none in the interval)
 * counts as healthy.
 */
import type { AutoAdmitSettings } from "./types.js";

/** The finishing rate times this is what the rate tracks while sessions are the limit. */
export const HEADROOM = 1.2;
/** The smallest change a step makes, per second. */
export const MIN_STEP = 0.5;
/** The least increase per healthy step, as a share of the rate. */
const LEAST_INCREASE = 0.02;
/** At most this much more per step (plus MIN_STEP), and at most this share less. */
const MAX_RISE = 0.25;
const MAX_FALL = 0.5;
/** p99 above this share of the target: hold. */
const NEAR_TARGET = 0.6;
/** The room counts as full from this share of maxActive. */
const NEARLY_FULL = 0.9;
const THROTTLE_FACTOR = 0.8;
/** Within this share of the last overload's rate the increase is the least one... */
const CEILING_NEAR = 0.85;
/** ...until the rate has passed it by this much (capacity grew): then it is forgotten. */
const CEILING_FORGET = 1.1;
/** A state older than this many expected intervals is stale: the loop starts again from the rate in force. */
const STALE_INTERVALS = 4;

export type LoopReason =
  | "starting"
  | "not_admitting"
  | "idle"
  | "p99_over_target"
  | "throttled"
  | "settling"
  | "near_target"
  | "tracking_finishes"
  | "increasing"
  | "at_max"
  | "at_min";

/** What one slot measured, across every gateway. */
export interface LoopMeasurements {
  /** Redis time, epoch ms. */
  at: number;
  /** Sessions ended so far (completed + expired + revoked): its slope is what checkout frees. */
  finishedTotal: number;
  active: number;
  maxActive: number;
  waiting: number;
  /**
   * Whether the line can admit anyone now: open (not paused or closed, the on-sale passed, a rate
   * above 0) and its pre-queue drawn. False: the loop holds the rate.
   */
  admitting: boolean;
  /** The claim path's p99 latency over the interval, merged across gateways; null: no claims. */
  claimP99Ms: number | null;
  /** DynamoDB attempts throttled over the interval, every gateway. */
  throttles: number;
}

/** What the loop keeps between steps (src/stats/loop.ts keeps it in Redis). */
export interface LoopState {
  at: number;
  finishedTotal: number;
  /** The last step decreased the rate. */
  decreased: boolean;
  /** The rate at the last overload (0: none yet, or left well behind). */
  ceiling: number;
}

export interface LoopStep {
  rate: number;
  state: LoopState;
  reason: LoopReason;
  /** Sessions ended per second over the interval (null on a starting step). */
  finishingPerSecond: number | null;
  throttlesPerSecond: number | null;
}

const round = (n: number) => Math.round(n * 100) / 100;

/**
 * One step: `rate` is the admitPerSecond in force (the loop's last, or the operator's when the loop
 * was just turned on); `intervalMs` the expected time between steps.
 */
export function step(
  state: LoopState | null,
  m: LoopMeasurements,
  settings: AutoAdmitSettings & { rate: number; intervalMs: number },
): LoopStep {
  const { minPerSecond: lo, maxPerSecond: hi, rate } = settings;
  /** Within the bounds; the clamp names itself the reason when it decided. */
  const clamp = (r: number, reason: LoopReason): { rate: number; reason: LoopReason } => {
    if (r > hi) return { rate: round(hi), reason: "at_max" };
    if (r < lo) return { rate: round(lo), reason: "at_min" };
    return { rate: round(r), reason };
  };
  const dtMs = state ? m.at - state.at : 0;
  if (!state || dtMs <= 0 || dtMs > settings.intervalMs * STALE_INTERVALS || m.finishedTotal < state.finishedTotal) {
    const c = clamp(rate, "starting");
    return {
      rate: c.rate,
      state: { at: m.at, finishedTotal: m.finishedTotal, decreased: false, ceiling: 0 },
      reason: c.reason,
      finishingPerSecond: null,
      throttlesPerSecond: null,
    };
  }
  const dt = dtMs / 1000;
  const finishing = (m.finishedTotal - state.finishedTotal) / dt;
  const throttling = m.throttles / dt;
  const next = (r: number, reason: LoopReason, decreased = false): LoopStep => {
    const bounded = Math.min(rate * (1 + MAX_RISE) + MIN_STEP, Math.max(rate * (1 - MAX_FALL), r));
    const c = clamp(bounded, reason);
    // Remembered while the rate is near it: the next approach slows there.
    const ceiling = decreased ? rate : c.rate > state.ceiling * CEILING_FORGET ? 0 : state.ceiling;
    return {
      rate: c.rate,
      state: { at: m.at, finishedTotal: m.finishedTotal, decreased, ceiling },
      reason: c.reason,
      finishingPerSecond: round(finishing),
      throttlesPerSecond: round(throttling),
    };
  };

  if (!m.admitting) return next(rate, "not_admitting");
  if (m.waiting <= 0) return next(rate, "idle");
  const target = settings.targetClaimP99Ms;
  const p99 = m.claimP99Ms;
  const overP99 = p99 !== null && p99 > target;
  const throttled = throttling > settings.maxThrottlesPerSecond;
  if (overP99 || throttled) {
    const severe = (p99 !== null && p99 > 2 * target) || throttling > 2 * settings.maxThrottlesPerSecond + 1;
    if (state.decreased && !severe) return next(rate, "settling");
    const latencyFactor = p99 !== null && overP99 ? Math.min(0.9, Math.max(0.5, 1 - (p99 - target) / (2 * p99))) : 1;
    const throttleFactor = throttled ? THROTTLE_FACTOR : 1;
    const reason = latencyFactor <= throttleFactor ? "p99_over_target" : "throttled";
    return next(rate * Math.min(latencyFactor, throttleFactor), reason, true);
  }
  if (p99 !== null && p99 > NEAR_TARGET * target) return next(rate, "near_target");
  if (throttling > 0 && settings.maxThrottlesPerSecond > 0) return next(rate, "near_target");
  if (m.maxActive > 0 && m.active >= NEARLY_FULL * m.maxActive) {
    return next(Math.max(lo, HEADROOM * finishing), "tracking_finishes");
  }
  const margin = p99 === null ? 1 : 1 - p99 / (NEAR_TARGET * target);
  const slowFrom = state.ceiling > 0 ? CEILING_NEAR * state.ceiling : Number.POSITIVE_INFINITY;
  const slow = rate + Math.max(MIN_STEP, LEAST_INCREASE * rate);
  if (rate >= slowFrom) return next(slow, "increasing");
  const fast = rate + Math.max(MIN_STEP, Math.max(LEAST_INCREASE, MAX_RISE * margin) * rate);
  return next(Math.max(slow, Math.min(fast, slowFrom)), "increasing");
}
