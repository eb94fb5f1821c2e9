/**
 * abandon: a third of the fans stop polling while they wait; of those who hold, one in five
 * releases (DELETE) and one in five walks away (the hold, 20 s, expires). What must hold: the
 * released and expired seats return to sale and are bought by others. k6: load/k6/abandon.ts.
 */
import { floorOf, type Scenario, seatsFor, steadyArrivals } from "../scenario.js";

export const abandon: Scenario = {
  defaults: { fans: 1_000, rate: 200, duration: 30 },
  arrivals: steadyArrivals,
  // Holds short enough to lapse within the run, so their seats are sold again.
  setup: (o, fans) => ({ sections: floorOf(seatsFor(o, fans)), holdSeconds: 20 }),
  fan: {
    // Spread over two seconds, the same for the same fan in every run.
    leavesAfterMs: (i) => (i % 3 === 0 ? 200 + ((i * 7919) % 2_000) : undefined),
    afterHold: (i) => (i % 5 === 1 ? "release" : i % 5 === 2 ? "lapse" : "buy"),
  },
  report: {
    lines: (t) => [
      `abandoned while waiting ${t.abandonedWaiting}   holds released ${t.released}   holds left to expire ${t.lapsed}   released seats sold again ${t.releasedSeatsResold}`,
    ],
  },
};
