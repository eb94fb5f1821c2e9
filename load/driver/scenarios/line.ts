/**
 * line: a crowd for one event's line and nothing else. FANS fans (default 100,000) join at RATE a
 * second and poll as told (`pollAfterMs`) until admitted, then leave: no seat map, no hold, so the
 * run measures the waiting room alone. Admission runs at a hundredth of the crowd a second (1,000/s
 * for 100,000: the line drains in about 100 s, a compressed on-sale), with room for everyone. The
 * report adds what it cost (costs.ts): gateway and Redis CPU per request, each master's share, and
 * how many polls the gateways answered from their line cache. k6: load/k6/line.ts.
 */
import { type Scenario, sectionsOf, steadyArrivals } from "../scenario.js";

export const line: Scenario = {
  // duration: at least this long before a fan still waiting gives up (the line drains in ~100 s)
  defaults: { fans: 100_000, rate: 2_000, duration: 180 },
  arrivals: steadyArrivals,
  setup: (o, fans) => ({
    // nobody shops: a token section, or the seats asked for
    sections: sectionsOf(["A"], o.seats || 10),
    holdSeconds: 120,
    waitingRoom: { admitPerSecond: lineAdmitPerSecond(fans) },
  }),
  fan: { shops: () => false },
  // no unexpected answer; every fan admitted
  mustHold: (fans) => ["http_req_failed==0", `fans_admitted>=${fans}`],
};

/** A hundredth of the crowd a second, at least 50. */
export const lineAdmitPerSecond = (fans: number): number => Math.max(50, Math.round(fans / 100));
