/**
 * Whether the load generator kept up (issue 31). A generator that runs out of CPU answers late:
 * its requests leave late, its fans arrive late and the replies wait in its event loop, so the
 * latencies it reports are its own, not the gateway's. Under a real k6 0.44 the spike scenario
 * breached its thresholds while k6 used a whole core of the two, and nothing said so. The driver
 * measures itself over the fans' window: its process's CPU (a Node process runs its JavaScript on
 * one core), its event loop's delay (perf_hooks), and how late each planned arrival started; and
 * `judgeGenerator` says, from those numbers alone, whether the run measured the generator.
 */
import { availableParallelism } from "node:os";
import { type IntervalHistogram, monitorEventLoopDelay } from "node:perf_hooks";
import { machineCpuTicks } from "./proc.js";

/** When the figures are the generator's. */
export const GENERATOR_LIMITS = {
  /** Its CPU over the window, in cores: near one whole core, its JavaScript has no time to spare. */
  cpuCores: 0.85,
  /** Its event loop's delay, p99, ms: a reply waits this long before it is even read. */
  eventLoopDelayP99Ms: 100,
  /**
   * An arrival started this many ms after it was due is late: a whole second, the planned rate
   * was not delivered. (A single short stall, a few hundred ms, shows in the loop's delay max
   * without making the run another load than the one planned.)
   */
  lateArrivalMs: 1000,
  /** More than this share of the planned arrivals late, and the run is not the load it planned. */
  lateArrivalShare: 0.01,
} as const;

export type GeneratorLimits = { readonly [K in keyof typeof GENERATOR_LIMITS]: number };

/** What the driver measured of itself over the fans' window. */
export interface GeneratorMeasurement {
  /** The window: from the first arrival to the last journey's end. */
  seconds: number;
  /** Its process's CPU over the window (user + system), seconds. */
  cpuSeconds: number;
  /** Its event loop's delay over the window, ms (monitorEventLoopDelay). */
  eventLoopDelayMs: { p50: number; p99: number; max: number };
  /**
   * The fans it planned and how many started late (`lateArrivalMs` or more after they were due),
   * the latest by how much. The driver drops no arrival: it starts every one, late when it must.
   */
  arrivals: { planned: number; late: number; maxLateMs: number };
  /** Requests sent over the window. */
  requests: number;
  /** Requests that got no answer within the client's 60 s (status 0): reported, not judged. */
  clientTimeouts: number;
  /**
   * The whole machine's CPU over the window (Linux /proc/stat; absent elsewhere): the share of all
   * its cores busy, and how many. Reported, not judged: a driver that runs its own gateway shares
   * the machine with it and its stores, and a machine near 100% answers late whoever's fault it is.
   */
  machine?: { busyShare: number; cores: number };
}

/** The measurement, per request and per fan, and the verdict. */
export interface GeneratorFigures extends GeneratorMeasurement {
  /** cpuSeconds / seconds: 1 is one whole core. */
  cpuCores: number;
  cpuMicrosPerRequest: number;
  cpuMicrosPerFan: number;
  /** True when the figures measure the load generator, not the gateway. */
  saturated: boolean;
  /** Why, each with its numbers; empty when it kept up. */
  reasons: string[];
}

/** The verdict on what the driver measured of itself: a pure function of the numbers. */
export function judgeGenerator(m: GeneratorMeasurement, limits: GeneratorLimits = GENERATOR_LIMITS): GeneratorFigures {
  const cpuCores = m.seconds > 0 ? m.cpuSeconds / m.seconds : 0;
  const reasons: string[] = [];
  if (cpuCores >= limits.cpuCores) {
    reasons.push(
      `its CPU was ${pct(cpuCores)} of a core over ${m.seconds.toFixed(1)} s (limit ${pct(limits.cpuCores)})`,
    );
  }
  if (m.eventLoopDelayMs.p99 > limits.eventLoopDelayP99Ms) {
    reasons.push(
      `its event loop's delay p99 was ${m.eventLoopDelayMs.p99.toFixed(0)} ms (max ${m.eventLoopDelayMs.max.toFixed(0)} ms; limit ${limits.eventLoopDelayP99Ms} ms)`,
    );
  }
  const { planned, late, maxLateMs } = m.arrivals;
  if (planned > 0 && late / planned > limits.lateArrivalShare) {
    reasons.push(
      `${late} of ${planned} arrivals started ${limits.lateArrivalMs / 1000} s or more late (${pct(late / planned)}; the latest ${(maxLateMs / 1000).toFixed(1)} s; limit ${pct(limits.lateArrivalShare)})`,
    );
  }
  const micros = m.cpuSeconds * 1e6;
  return {
    ...m,
    cpuCores,
    cpuMicrosPerRequest: m.requests > 0 ? micros / m.requests : 0,
    cpuMicrosPerFan: planned > 0 ? micros / planned : 0,
    saturated: reasons.length > 0,
    reasons,
  };
}

const pct = (x: number) => `${(x * 100).toFixed(x < 0.1 ? 1 : 0)}%`;

/** The event-loop sampler's interval, ms: each sample is the interval plus the delay, so it is taken out. */
const DELAY_RESOLUTION_MS = 10;

/** Measures the driver over the fans' window: started with the first arrival, stopped after the last journey. */
export class GeneratorMonitor {
  private readonly delay: IntervalHistogram = monitorEventLoopDelay({ resolution: DELAY_RESOLUTION_MS });
  private readonly cpuAtStart = process.cpuUsage();
  private readonly machineAtStart = machineCpuTicks();
  private readonly startedAt = performance.now();
  private late = 0;
  private maxLateMs = 0;

  constructor(
    private readonly plannedArrivals: number,
    private readonly limits: GeneratorLimits = GENERATOR_LIMITS,
  ) {
    this.delay.enable();
  }

  /** An arrival started `lateMs` after it was due. */
  arrived(lateMs: number): void {
    if (lateMs >= this.limits.lateArrivalMs) this.late++;
    if (lateMs > this.maxLateMs) this.maxLateMs = lateMs;
  }

  stop(requests: number, clientTimeouts: number): GeneratorFigures {
    this.delay.disable();
    const cpu = process.cpuUsage(this.cpuAtStart);
    const ms = (ns: number) => (Number.isFinite(ns) ? Math.max(0, ns / 1e6 - DELAY_RESOLUTION_MS) : 0);
    // The histogram's values are ns; with no sample at all its percentiles are NaN or huge.
    const sampled = this.delay.count > 0;
    const machineNow = machineCpuTicks();
    const start = this.machineAtStart;
    const machine =
      start && machineNow && machineNow.total > start.total
        ? {
            busyShare: (machineNow.busy - start.busy) / (machineNow.total - start.total),
            cores: availableParallelism(),
          }
        : undefined;
    return judgeGenerator(
      {
        seconds: (performance.now() - this.startedAt) / 1000,
        cpuSeconds: (cpu.user + cpu.system) / 1e6,
        eventLoopDelayMs: sampled
          ? { p50: ms(this.delay.percentile(50)), p99: ms(this.delay.percentile(99)), max: ms(this.delay.max) }
          : { p50: 0, p99: 0, max: 0 },
        arrivals: { planned: this.plannedArrivals, late: this.late, maxLateMs: this.maxLateMs },
        requests,
        clientTimeouts,
        ...(machine ? { machine } : {}),
      },
      this.limits,
    );
  }
}

/** The report's words for the generator: the banner when it was saturated, else one line of figures. */
export function generatorLines(g: GeneratorFigures): string[] {
  const figures = `the driver's CPU ${g.cpuSeconds.toFixed(1)} s over ${g.seconds.toFixed(1)} s (${pct(g.cpuCores)} of a core; ${g.cpuMicrosPerRequest.toFixed(0)} µs/request, ${(g.cpuMicrosPerFan / 1000).toFixed(2)} ms/fan), event-loop delay p99 ${g.eventLoopDelayMs.p99.toFixed(0)} ms, arrivals late ${g.arrivals.late} of ${g.arrivals.planned} (latest ${g.arrivals.maxLateMs.toFixed(0)} ms), client timeouts ${g.clientTimeouts}`;
  if (!g.saturated) return [`load generator kept up: ${figures}`, ...machineLines(g)];
  return [
    "GENERATOR SATURATED: the figures measure the load generator, not the gateway",
    ...g.reasons.map((r) => `  ${r}`),
    `  ${figures}`,
    "  run the driver on a machine of its own, or with fewer fans a second (load/README.md, where to run the load)",
    ...machineLines(g),
  ];
}

/** At or above this share of the machine's CPU busy, the report says the machine was the limit. */
export const MACHINE_BUSY_SHARE = 0.9;

/** The machine's CPU over the window, and a warning when it was near full. */
function machineLines(g: GeneratorFigures): string[] {
  if (!g.machine) return [];
  const { busyShare, cores } = g.machine;
  const line = `the machine: ${pct(busyShare)} of its ${cores} cores busy over the window`;
  if (busyShare < MACHINE_BUSY_SHARE) return [line];
  return [
    `${line}: MACHINE NEAR FULL. Everything on it (gateways, stores, driver) queued for CPU, so latencies and`,
    "  the order fans saw their admission in are the machine's; the line's own order, under fairness, is what the line decided",
  ];
}
