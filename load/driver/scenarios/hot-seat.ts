/**
 * hot-seat: everyone goes for the front row first (FRONT, 20 seats, the lowest numbers first),
 * then, after three lost races, anywhere else. What must hold: 409s stay fast, FRONT sells, no
 * seat sold twice. k6: load/k6/hot-seat.ts.
 */
import { randomSeats } from "../journey.js";
import { type Scenario, type Section, sectionsOf, seatsFor, steadyArrivals } from "../scenario.js";

const FRONT = "FRONT";
/** Tries at the front row before a fan looks anywhere else. */
const FRONT_TRIES = 3;

const others = (sections: readonly Section[]) => sections.filter((s) => s.id !== FRONT).map((s) => s.id);

export const hotSeat: Scenario = {
  defaults: { fans: 1_000, rate: 500, duration: 30 },
  arrivals: steadyArrivals,
  setup: (o, fans) => {
    const seats = seatsFor(o, fans);
    const front = Math.min(20, seats);
    return {
      sections: [
        { id: FRONT, rows: 1, seatsPerRow: front },
        ...(seats > front ? sectionsOf(["A"], seats - front) : []),
      ],
      holdSeconds: 120,
    };
  },
  fan: {
    sectionOrder: (sections, attempt) =>
      attempt < FRONT_TRIES ? [FRONT, ...others(sections)] : others(sections).sort(() => Math.random() - 0.5),
    choose: (available, want, attempt) =>
      attempt < FRONT_TRIES ? available.slice(0, want) : randomSeats(available, want),
  },
};
