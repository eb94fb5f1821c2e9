/**
 * soak: a steady RATE fans a second for DURATION seconds, each through the whole journey, on an
 * event with two seats a fan (it does not sell out). What must hold: latency does not drift, no
 * errors. k6: load/k6/soak.ts.
 */
import { floorOf, type Scenario } from "../scenario.js";

export const soak: Scenario = {
  defaults: { fans: 0, rate: 20, duration: 300 },
  arrivals: (o) => {
    const fans = o.fans || Math.ceil(o.rate * o.duration);
    return { fans, perSecond: fans / o.duration };
  },
  setup: (o, fans) => ({ sections: floorOf(o.seats || Math.max(20, fans * 2)), holdSeconds: 120 }),
  fan: {},
};
