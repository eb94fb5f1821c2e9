/**
 * The driver's verdict on itself (load/driver/generator.ts, issue 31): from the numbers it measured
 * of its own process, whether the run measured the load generator rather than the gateway; the
 * words the report gives it; and the exit code of a threshold missed while it was saturated.
 */
import { describe, expect, it } from "vitest";
import { compareRuns } from "../../load/compare.js";
import {
  GENERATOR_LIMITS,
  type GeneratorMeasurement,
  GeneratorMonitor,
  generatorLines,
  judgeGenerator,
  MACHINE_BUSY_SHARE,
} from "../../load/driver/generator.js";
import {
  evaluateThresholds,
  exitCodeFor,
  GENERATOR_SATURATED_EXIT_CODE,
  parseThreshold,
  THRESHOLDS_FAILED_EXIT_CODE,
} from "../../load/driver/thresholds.js";

/** A run the generator kept up with: a fifth of a core, a quiet loop, every fan on time. */
const calm: GeneratorMeasurement = {
  seconds: 30,
  cpuSeconds: 6,
  eventLoopDelayMs: { p50: 1, p99: 12, max: 40 },
  arrivals: { planned: 3000, late: 0, maxLateMs: 20 },
  requests: 20_000,
  clientTimeouts: 0,
};

describe("judgeGenerator", () => {
  it("keeps up with a fifth of a core, a quiet loop and fans on time; figures per request and per fan", () => {
    const g = judgeGenerator(calm);
    expect(g.saturated).toBe(false);
    expect(g.reasons).toEqual([]);
    expect(g.cpuCores).toBeCloseTo(0.2);
    expect(g.cpuMicrosPerRequest).toBeCloseTo(300);
    expect(g.cpuMicrosPerFan).toBeCloseTo(2000);
  });

  it("flags a generator near one whole core over the window (the issue's k6: 30.7 CPU-s in 31 s)", () => {
    const g = judgeGenerator({ ...calm, seconds: 31, cpuSeconds: 30.7 });
    expect(g.saturated).toBe(true);
    expect(g.reasons).toHaveLength(1);
    expect(g.reasons[0]).toMatch(/CPU was 99% of a core over 31\.0 s \(limit 85%\)/);
    // At the limit it counts; just under, it does not.
    expect(judgeGenerator({ ...calm, seconds: 100, cpuSeconds: 85 }).saturated).toBe(true);
    expect(judgeGenerator({ ...calm, seconds: 100, cpuSeconds: 84.9 }).saturated).toBe(false);
  });

  it("flags an event loop whose delay p99 is over 100 ms, whatever its CPU (shared cores delay it too)", () => {
    const g = judgeGenerator({ ...calm, eventLoopDelayMs: { p50: 30, p99: 180, max: 900 } });
    expect(g.saturated).toBe(true);
    expect(g.reasons).toEqual([expect.stringMatching(/delay p99 was 180 ms \(max 900 ms; limit 100 ms\)/)]);
    expect(judgeGenerator({ ...calm, eventLoopDelayMs: { p50: 30, p99: 100, max: 900 } }).saturated).toBe(false);
  });

  it("flags more than 1% of the planned arrivals started late", () => {
    const late = judgeGenerator({ ...calm, arrivals: { planned: 3000, late: 31, maxLateMs: 2400 } });
    expect(late.saturated).toBe(true);
    expect(late.reasons[0]).toMatch(/31 of 3000 arrivals started 1 s or more late \(1\.0%; the latest 2\.4 s/);
    expect(judgeGenerator({ ...calm, arrivals: { planned: 3000, late: 30, maxLateMs: 2400 } }).saturated).toBe(false);
  });

  it("gives every reason that holds, and takes other limits", () => {
    const g = judgeGenerator({
      ...calm,
      cpuSeconds: 29,
      eventLoopDelayMs: { p50: 50, p99: 400, max: 1200 },
      arrivals: { planned: 3000, late: 900, maxLateMs: 5000 },
    });
    expect(g.reasons).toHaveLength(3);
    expect(judgeGenerator(calm, { ...GENERATOR_LIMITS, cpuCores: 0.1 }).saturated).toBe(true);
  });

  it("reads an empty window as nothing to judge, not as a division by zero", () => {
    const g = judgeGenerator({
      seconds: 0,
      cpuSeconds: 0,
      eventLoopDelayMs: { p50: 0, p99: 0, max: 0 },
      arrivals: { planned: 0, late: 0, maxLateMs: 0 },
      requests: 0,
      clientTimeouts: 0,
    });
    expect(g).toMatchObject({ saturated: false, cpuCores: 0, cpuMicrosPerRequest: 0, cpuMicrosPerFan: 0 });
  });
});

describe("the report's words for the generator", () => {
  it("one line of figures when it kept up; the banner first, with its reasons, when it did not", () => {
    const kept = generatorLines(judgeGenerator(calm));
    expect(kept).toHaveLength(1);
    expect(kept[0]).toMatch(
      /^load generator kept up: the driver's CPU 6\.0 s over 30\.0 s \(20% of a core; 300 µs\/request, 2\.00 ms\/fan\)/,
    );
    const saturated = generatorLines(judgeGenerator({ ...calm, cpuSeconds: 29.5 }));
    expect(saturated[0]).toBe("GENERATOR SATURATED: the figures measure the load generator, not the gateway");
    expect(saturated[1]).toMatch(/CPU was 98% of a core/);
    expect(saturated.join("\n")).toContain("µs/request");
  });

  it("the machine's CPU after the driver's: one line, and the warning when it was near full", () => {
    const calmMachine = generatorLines(judgeGenerator({ ...calm, machine: { busyShare: 0.5, cores: 2 } }));
    expect(calmMachine).toHaveLength(2);
    expect(calmMachine[1]).toBe("the machine: 50% of its 2 cores busy over the window");
    const full = generatorLines(judgeGenerator({ ...calm, machine: { busyShare: MACHINE_BUSY_SHARE, cores: 2 } }));
    expect(full[1]).toMatch(/^the machine: 90% of its 2 cores busy over the window: MACHINE NEAR FULL/);
    expect(full[2]).toMatch(/the line.s own order, under fairness, is what the line decided$/);
    // off Linux there is no figure, and no line
    expect(generatorLines(judgeGenerator(calm))).toHaveLength(1);
  });
});

describe("GeneratorMonitor", () => {
  it("sees a blocked event loop and late arrivals, and counts its window's requests", async () => {
    const monitor = new GeneratorMonitor(4);
    monitor.arrived(0);
    monitor.arrived(GENERATOR_LIMITS.lateArrivalMs - 1);
    monitor.arrived(GENERATOR_LIMITS.lateArrivalMs);
    monitor.arrived(1500);
    // Let the sampler run, then hold the loop: one sample, at least as long as the hold.
    await new Promise((resolve) => setTimeout(resolve, 100));
    const until = performance.now() + 400;
    while (performance.now() < until);
    await new Promise((resolve) => setTimeout(resolve, 50));
    const g = monitor.stop(123, 2);
    expect(g.arrivals).toEqual({ planned: 4, late: 2, maxLateMs: 1500 });
    expect(g.eventLoopDelayMs.max).toBeGreaterThanOrEqual(300);
    expect(g.cpuSeconds).toBeGreaterThan(0);
    expect(g.requests).toBe(123);
    expect(g.clientTimeouts).toBe(2);
    // the machine was busy at least while this process held the loop (400 of ~550 ms, on one of its cores)
    expect(g.machine?.cores).toBeGreaterThanOrEqual(1);
    expect(g.machine?.busyShare).toBeGreaterThan(0.3 / (g.machine?.cores ?? 1));
    expect(g.machine?.busyShare).toBeLessThanOrEqual(1);
    // Two of four arrivals late: saturated, whatever the loop and the CPU measured on a shared box.
    expect(g.saturated).toBe(true);
    expect(g.reasons.join("\n")).toMatch(/2 of 4 arrivals started 1 s or more late/);
  });
});

describe("the exit code of a run whose generator was saturated", () => {
  const input = {
    seconds: 10,
    endpoints: new Map([["hold", { requests: 10, errors: 0, latencies: Array.from({ length: 10 }, () => 900) }]]),
    counters: {},
  };
  const missed = evaluateThresholds([parseThreshold("http_req_duration{endpoint:hold} p(95)<300")], input);
  const met = evaluateThresholds([parseThreshold("http_req_duration{endpoint:hold} p(95)<1000")], input);
  const saturated = { saturated: true };
  const keptUp = { saturated: false };

  it("is 3 for a threshold missed while saturated (the setup failed), 99 when the generator kept up", () => {
    expect(GENERATOR_SATURATED_EXIT_CODE).toBe(3);
    expect(exitCodeFor({ botAccepted: 0, thresholds: missed, generator: saturated })).toBe(3);
    expect(exitCodeFor({ botAccepted: 0, thresholds: missed, generator: keptUp })).toBe(THRESHOLDS_FAILED_EXIT_CODE);
  });

  it("is 0 for thresholds met while saturated, and 1 for a broken guarantee whatever the generator", () => {
    expect(exitCodeFor({ botAccepted: 0, thresholds: met, generator: saturated })).toBe(0);
    expect(exitCodeFor({ botAccepted: 0, audit: { ok: false }, thresholds: missed, generator: saturated })).toBe(1);
    expect(exitCodeFor({ botAccepted: 1, thresholds: met, generator: saturated })).toBe(1);
  });
});

describe("npm run load:compare with the generator's figures", () => {
  it("says which run measured its generator, and sets their figures side by side", () => {
    const base = {
      kind: "onsale-load-run" as const,
      version: 1 as const,
      scenario: "spike",
      startedAt: "2026-12-04T07:00:00.000Z",
      target: "http://127.0.0.1:8080",
      settings: { fans: 3000 },
      seconds: 31,
      requests: 20_000,
      requestsPerSecond: 645,
      errors: 0,
      sales: 100,
      endpoints: [],
    };
    const text = compareRuns(
      {
        ...base,
        tool: "k6",
        generator: {
          saturated: true,
          reasons: ["1288 planned fans never started"],
          droppedIterations: 1288,
          clientTimeouts: 0,
        },
      },
      {
        ...base,
        tool: "driver",
        generator: { saturated: false, reasons: [], cpuCores: 0.21, cpuMicrosPerRequest: 280, clientTimeouts: 0 },
      },
    );
    const lines = text.split("\n");
    expect(lines[1]).toBe(
      "  GENERATOR SATURATED: its figures measure the load generator, not the gateway (1288 planned fans never started)",
    );
    expect(lines.filter((l) => l.includes("GENERATOR SATURATED"))).toHaveLength(1);
    const row = (label: string) =>
      lines
        .find((l) => l.startsWith(label))
        ?.trim()
        .split(/\s{2,}/);
    expect(row("generator CPU, cores")).toEqual(["generator CPU, cores", "-", "0.21", "-"]);
    expect(row("dropped iterations")).toEqual(["dropped iterations", "1288", "-", "-"]);
  });
});
