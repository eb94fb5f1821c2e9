/**
 * The admission loop's law (src/waiting-room/admission-loop.ts) against a fake checkout, pure and
 * deterministic: checkout takes C sessions a second; each admitted fan shops SHOP_SECONDS, then
 * claims and leaves as checkout lets them; the claim path's p99 follows a queue's knee, base / (1 - ρ)
 * with ρ = claims / C (250 ms at ρ = 0.92, unbounded past 1), with a seeded ±10% jitter; DynamoDB
 * throttles what goes past a write ceiling. The loop steps every 5 s as the sampler's claimer runs it.
 *
 * Stated bounds (what "converges" and "does not oscillate" mean here): after 5 minutes the rate
 * stays within [0.7 C, 1.0 C], its swing (highest / lowest over the last 20 steps) under 1.35 (under a throttle ceiling too: within [0.7, 1.15] of it), never
 * more than +25% (+0.5/s) or -50% in one step, and always within [minPerSecond, maxPerSecond].
 */
import { describe, expect, it } from "vitest";
import { type LoopMeasurements, type LoopState, step } from "../../src/waiting-room/admission-loop.js";
import type { AutoAdmitSettings } from "../../src/waiting-room/types.js";

const STEP_MS = 5_000;
const SHOP_SECONDS = 20;
const BASE_P99_MS = 20;

interface Run {
  rates: number[];
  reasons: string[];
  p99s: number[];
}

/** A seeded generator (mulberry32): the same jitter every run. */
function random(seed: number) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

function simulate(options: {
  steps: number;
  capacity: (step: number) => number;
  settings: Partial<AutoAdmitSettings>;
  startRate?: number;
  maxActive?: number;
  writeCeiling?: number;
  waiting?: (step: number) => number;
}): Run {
  const settings: AutoAdmitSettings = {
    enabled: true,
    minPerSecond: 1,
    maxPerSecond: 1_000,
    targetClaimP99Ms: 250,
    maxThrottlesPerSecond: 0,
    ...options.settings,
  };
  const maxActive = options.maxActive ?? 100_000;
  const jitter = random(18);
  let rate = options.startRate ?? 5;
  let state: LoopState | null = null;
  let active = 0;
  let finished = 0;
  let waiting = 0;
  const run: Run = { rates: [], reasons: [], p99s: [] };
  for (let s = 0; s < options.steps; s++) {
    const capacity = options.capacity(s);
    waiting = options.waiting ? options.waiting(s) : 1_000_000;
    let worstRho = 0;
    let throttles = 0;
    for (let second = 0; second < STEP_MS / 1000; second++) {
      const admitted = Math.max(0, Math.min(rate, maxActive - active, waiting));
      active += admitted;
      waiting -= admitted;
      const claims = active / SHOP_SECONDS;
      const done = Math.min(claims, capacity, active);
      active -= done;
      finished += done;
      worstRho = Math.max(worstRho, claims / capacity);
      if (options.writeCeiling !== undefined) throttles += Math.max(0, claims - options.writeCeiling) * 2;
    }
    const p99 = worstRho >= 0.98 ? 5_000 : (BASE_P99_MS / (1 - worstRho)) * (0.9 + 0.2 * jitter());
    const m: LoopMeasurements = {
      at: 1_000_000 + (s + 1) * STEP_MS,
      finishedTotal: Math.floor(finished),
      active: Math.floor(active),
      maxActive,
      waiting: Math.floor(waiting),
      admitting: true,
      claimP99Ms: active > 0 ? Math.round(p99) : null,
      throttles: Math.round(throttles),
    };
    const out = step(state, m, { ...settings, rate, intervalMs: STEP_MS });
    expect(out.rate).toBeGreaterThanOrEqual(settings.minPerSecond);
    expect(out.rate).toBeLessThanOrEqual(settings.maxPerSecond);
    expect(out.rate).toBeLessThanOrEqual(rate * 1.25 + 0.5 + 0.005);
    expect(out.rate).toBeGreaterThanOrEqual(Math.min(rate * 0.5, settings.minPerSecond) - 0.005);
    state = out.state;
    rate = out.rate;
    run.rates.push(rate);
    run.reasons.push(out.reason);
    run.p99s.push(m.claimP99Ms ?? 0);
  }
  return run;
}

const window = (xs: number[], end: number, n = 20) => xs.slice(end - n, end);
const swing = (xs: number[]) => Math.max(...xs) / Math.min(...xs);

describe("admission loop (simulated checkout)", () => {
  it("converges near capacity from a low start, within the stated band", () => {
    const C = 100;
    const run = simulate({ steps: 120, capacity: () => C, settings: {} });
    const tail = window(run.rates, 120);
    for (const r of tail) {
      expect(r).toBeGreaterThanOrEqual(0.7 * C);
      expect(r).toBeLessThanOrEqual(1.0 * C);
    }
    expect(swing(tail)).toBeLessThan(1.35);
  });

  it("backs off when capacity halves mid-run, and recovers when it comes back", () => {
    const C = 200;
    const capacity = (s: number) => (s >= 80 && s < 160 ? C / 2 : C);
    const run = simulate({ steps: 240, capacity, settings: { minPerSecond: 5, maxPerSecond: 2_000 } });
    for (const r of window(run.rates, 80)) expect(r).toBeGreaterThanOrEqual(0.7 * C);
    // within a minute (12 steps) of the halving the rate is under the new capacity...
    expect(Math.min(...run.rates.slice(80, 92))).toBeLessThanOrEqual(C / 2);
    expect(run.reasons.slice(80, 92)).toContain("p99_over_target");
    // ...and settles in the band of the new one
    const halved = window(run.rates, 160);
    for (const r of halved) {
      expect(r).toBeGreaterThanOrEqual(0.7 * (C / 2));
      expect(r).toBeLessThanOrEqual(1.0 * (C / 2));
    }
    expect(swing(halved)).toBeLessThan(1.35);
    // capacity back: the rate climbs back into the full band
    const recovered = window(run.rates, 240);
    for (const r of recovered) {
      expect(r).toBeGreaterThanOrEqual(0.7 * C);
      expect(r).toBeLessThanOrEqual(1.0 * C);
    }
    expect(swing(recovered)).toBeLessThan(1.35);
  });

  it("stays under a DynamoDB write ceiling below the latency knee", () => {
    const C = 100;
    const ceiling = 60;
    const run = simulate({
      steps: 120,
      capacity: () => C,
      writeCeiling: ceiling,
      settings: { maxThrottlesPerSecond: 1 },
    });
    expect(run.reasons).toContain("throttled");
    const tail = window(run.rates, 120);
    for (const r of tail) {
      expect(r).toBeLessThanOrEqual(ceiling * 1.15);
      expect(r).toBeGreaterThanOrEqual(ceiling * 0.7);
    }
    expect(swing(tail)).toBeLessThan(1.35);
  });

  it("never leaves the operator's bounds: at_max under capacity, at_min over it", () => {
    const capped = simulate({ steps: 60, capacity: () => 100, settings: { minPerSecond: 2, maxPerSecond: 40 } });
    expect(Math.max(...capped.rates)).toBe(40);
    expect(capped.reasons.slice(-10).every((r) => r === "at_max")).toBe(true);
    // a floor above capacity: the loop backs off to it and no further
    const floored = simulate({ steps: 60, capacity: () => 20, startRate: 80, settings: { minPerSecond: 30 } });
    expect(Math.min(...floored.rates)).toBe(30);
    expect(floored.reasons).toContain("at_min");
  });

  it("changes nothing while nobody waits", () => {
    const run = simulate({ steps: 30, capacity: () => 100, startRate: 12, waiting: () => 0, settings: {} });
    expect(new Set(run.rates)).toEqual(new Set([12]));
    expect(run.reasons.slice(1).every((r) => r === "idle")).toBe(true);
  });

  it("tracks what sessions free while the room is full", () => {
    // checkout wide open, but the room holds 400 sessions of 20 s: 20 finish a second at most
    const run = simulate({ steps: 80, capacity: () => 1_000, maxActive: 400, startRate: 5, settings: {} });
    expect(run.reasons).toContain("tracking_finishes");
    for (const r of window(run.rates, 80)) {
      expect(r).toBeGreaterThanOrEqual(15);
      expect(r).toBeLessThanOrEqual(20 * 1.2 * 1.1);
    }
  });

  it("holds the rate while nothing can be admitted, however fast the claims and long the line", () => {
    const settings = {
      enabled: true,
      minPerSecond: 5,
      maxPerSecond: 400,
      targetClaimP99Ms: 250,
      maxThrottlesPerSecond: 0,
    };
    const m: LoopMeasurements = {
      at: 10_000,
      finishedTotal: 0,
      active: 0,
      maxActive: 10_000,
      waiting: 50_000,
      admitting: false,
      claimP99Ms: 5,
      throttles: 0,
    };
    let out = step(null, m, { ...settings, rate: 50, intervalMs: STEP_MS });
    // Six slots (30 s) before the draw: before issue 28 the rate went 50, 62.5, 78, 98, 122, 152.
    for (let i = 1; i <= 6; i++) {
      out = step(out.state, { ...m, at: 10_000 + i * STEP_MS }, { ...settings, rate: out.rate, intervalMs: STEP_MS });
      expect(out).toMatchObject({ rate: 50, reason: "not_admitting" });
    }
    // Admission starts: from the held rate, one bounded step at a time.
    const next = step(
      out.state,
      { ...m, admitting: true, at: 10_000 + 7 * STEP_MS },
      { ...settings, rate: 50, intervalMs: STEP_MS },
    );
    expect(next.rate).toBeLessThanOrEqual(50 * 1.25 + 0.5);
  });

  it("starts from the rate in force, clamped, and starts again after a gap", () => {
    const settings = {
      enabled: true,
      minPerSecond: 10,
      maxPerSecond: 50,
      targetClaimP99Ms: 250,
      maxThrottlesPerSecond: 0,
    };
    const m: LoopMeasurements = {
      at: 10_000,
      finishedTotal: 0,
      active: 0,
      maxActive: 100,
      waiting: 5,
      admitting: true,
      claimP99Ms: null,
      throttles: 0,
    };
    const first = step(null, m, { ...settings, rate: 200, intervalMs: STEP_MS });
    expect(first).toMatchObject({ rate: 50, reason: "at_max", finishingPerSecond: null });
    const second = step(
      first.state,
      { ...m, at: 15_000, finishedTotal: 10 },
      { ...settings, rate: 20, intervalMs: STEP_MS },
    );
    expect(second.finishingPerSecond).toBe(2);
    expect(second.rate).toBeGreaterThan(20);
    const late = step(second.state, { ...m, at: 15_000 + 5 * STEP_MS }, { ...settings, rate: 20, intervalMs: STEP_MS });
    expect(late).toMatchObject({ rate: 20, reason: "starting" });
  });
});
