/** The driver's scenarios by name, as the CLI takes them (`npm run load -- <name>`). */
import type { Scenario } from "../scenario.js";
import { abandon } from "./abandon.js";
import { best } from "./best.js";
import { bots } from "./bots.js";
import { hotSeat } from "./hot-seat.js";
import { line } from "./line.js";
import { soak } from "./soak.js";
import { spike } from "./spike.js";

export const SCENARIOS = {
  spike,
  "hot-seat": hotSeat,
  abandon,
  bots,
  soak,
  best,
  line,
} as const satisfies Record<string, Scenario>;

export type ScenarioName = keyof typeof SCENARIOS;

export const SCENARIO_NAMES = Object.keys(SCENARIOS) as ScenarioName[];

export const isScenarioName = (name: string): name is ScenarioName => Object.hasOwn(SCENARIOS, name);
