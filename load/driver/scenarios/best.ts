/**
 * best: every fan asks for "2 best in Floor" (best available together, docs/API.md) instead of
 * picking seats off the map, so the whole crowd meets on the same few best blocks at once. The
 * layout's rows are of even length: a sale of pairs then strands no seat (the audit's `stranded`
 * figure). What must hold: holds stay fast, Floor sells, no seat sold twice. k6: load/k6/best.ts.
 */
import { type Scenario, seatsFor, steadyArrivals } from "../scenario.js";

/** Seats a row: even, so that pairs fill rows exactly. */
const ROW = 20;

export const best: Scenario = {
  defaults: { fans: 1_000, rate: 500, duration: 30 },
  arrivals: steadyArrivals,
  setup: (o, fans) => {
    const seats = seatsFor(o, fans);
    const seatsPerRow = Math.min(ROW, seats);
    // The driver's events put every section but FRONT in tier Floor (load/driver/event.ts).
    return { sections: [{ id: "A", rows: Math.ceil(seats / seatsPerRow), seatsPerRow }], holdSeconds: 120 };
  },
  fan: {
    best: () => ({ quantity: 2, tier: "Floor" }),
  },
};
