/**
 * What a scenario of the Node driver is, one object per file in scenarios/ as the k6 side has one
 * script per scenario (load/k6/*.ts): the options it takes, the event it sets up, how its fans
 * behave where they differ from the plain journey (journey.ts), what it adds to the report, and
 * the thresholds it always checks. run.ts drives every scenario through this and nothing else.
 */
import type { RunFigures, Tally } from "./figures.js";
import type { Client } from "./http.js";

export interface Section {
  id: string;
  rows: number;
  seatsPerRow: number;
}

/** The options of a run a scenario reads. */
export interface ScenarioOptions {
  /** Fans in the run; 0 lets the scenario decide (soak: rate x duration). */
  fans: number;
  /** Arrivals per second (bots: bot requests per second). */
  rate: number;
  /** Seconds (soak and bots run this long). */
  duration: number;
  /** Seats of the event the driver creates; unset: the scenario's default. */
  seats?: number;
  /** The join's proof-of-work cost the driver sets on its event (bots); unset: the scenario's default. */
  powBits?: number;
}

/** What a fan does with a hold: buys it, releases it (DELETE), or walks away and lets it expire. */
export type AfterHold = "buy" | "release" | "lapse";

/** Where the i-th fan's journey departs from the plain one (join, wait, hold 1-2 seats, buy). */
export interface FanBehaviour {
  /** After how many ms in the line this fan stops polling and leaves; undefined: it waits. */
  leavesAfterMs?(i: number): number | undefined;
  /** The sections to look in, in order, on the attempt-th try to hold (default: all, shuffled). */
  sectionOrder?(sections: readonly Section[], attempt: number): string[];
  /** The seats to ask for among those available (default: `want` of them at random). */
  choose?(available: readonly string[], want: number, attempt: number): string[];
  /**
   * The best-available request the i-th fan sends instead of picking seats off the map (docs/API.md
   * "Best available together"); undefined: it picks seats.
   */
  best?(i: number): BestAsk | undefined;
  /** Whether the i-th fan goes on to the seat map once admitted (default true; line: it leaves). */
  shops?(i: number): boolean;
  /** What the i-th fan does once it holds seats (default: buys). */
  afterHold?(i: number): AfterHold;
}

/** The body of a best-available hold: `{"best": ...}`. */
export interface BestAsk {
  quantity: number;
  tier?: string;
  section?: string;
  maxPrice?: number;
  splitRows?: boolean;
}

/** The event the driver creates for a scenario. */
export interface EventPlan {
  sections: Section[];
  holdSeconds: number;
  /** Waiting-room settings PATCHed once the event is stored (bots: powBits). */
  waitingRoom?: Record<string, unknown>;
}

/** What a fan's journey (and a bot) plays on. */
export interface FanRun {
  client: Client;
  eventId: string;
  sections: readonly Section[];
  figures: RunFigures;
  /** Epoch ms past which every journey stops where it is. */
  hardStop: number;
  /** The longest wait between two polls, seconds, whatever the gateway suggests (unset: no cap). */
  maxPollSeconds?: number;
  /** Ignore `pollAfterMs` (RunOptions.coarsePolls). */
  coarsePolls?: boolean;
  /** A fan's time between hold and purchase, ms (unset: 300-800). */
  thinkMs?: number;
}

/** A scenario; scenarios/index.ts names them. */
export interface Scenario {
  /** The CLI's defaults for it. */
  defaults: { fans: number; rate: number; duration: number };
  /** How many fans come, and how many a second. */
  arrivals(o: ScenarioOptions): { fans: number; perSecond: number };
  /** The event it plays on, when the driver creates one. */
  setup(o: ScenarioOptions, fans: number): EventPlan;
  /** Its fans' behaviour where it differs from the plain journey. */
  fan: FanBehaviour;
  /** Traffic beside the fans (the bots), started with the first fan, awaited with the last. */
  beside?(run: FanRun, o: ScenarioOptions): Promise<void>;
  /** What it adds to the progress line (`progress`) and to the end report (`lines`). */
  report?: { progress?(t: Tally): string; lines?(t: Tally): string[] };
  /** Thresholds it always checks, beside the ones given, as k6 writes them (thresholds.ts). */
  thresholds?: readonly string[];
  /**
   * What must hold (load/README.md's column), as thresholds on this run of `fans` fans: checked
   * always, beside `thresholds`, so a run that broke them exits 99 (k6's code), not 0.
   */
  mustHold?(fans: number): string[];
}

/** Seats for a layout of `n`: up to 50 a row, spread evenly over the sections named. */
export function sectionsOf(ids: readonly string[], n: number): Section[] {
  const perRow = Math.min(50, Math.max(1, n));
  const perSection = Math.ceil(n / ids.length / perRow) * perRow;
  let left = n;
  const out: Section[] = [];
  for (const id of ids) {
    if (left <= 0) break;
    const take = Math.min(perSection, left);
    out.push({ id, rows: Math.ceil(take / perRow), seatsPerRow: Math.min(perRow, take) });
    left -= Math.ceil(take / perRow) * Math.min(perRow, take);
  }
  return out;
}

/** The floor of a plain scenario: one section, four past 4,000 seats. */
export const floorOf = (seats: number): Section[] => sectionsOf(seats > 4000 ? ["A", "B", "C", "D"] : ["A"], seats);

/** The seats given, else about 0.8 per fan (fewer seats than fans: the sale sells out). */
export const seatsFor = (o: ScenarioOptions, fans: number): number => o.seats || Math.max(10, Math.round(fans * 0.8));

/** The plain arrivals: the fans given, `rate` a second. */
export const steadyArrivals = (o: ScenarioOptions) => ({ fans: o.fans, perSecond: o.rate });
