/**
 * spike: N fans join within seconds (the first ones before onSaleAt, so the lottery pre-queue is
 * used), poll at the suggested interval, get admitted, hold 1-2 seats, think, buy. What must
 * hold: no unexpected answer, seats sell, the audit passes. k6: load/k6/spike.ts.
 */
import { floorOf, type Scenario, seatsFor, steadyArrivals } from "../scenario.js";

export const spike: Scenario = {
  defaults: { fans: 2_000, rate: 1_000, duration: 30 },
  arrivals: steadyArrivals,
  setup: (o, fans) => ({ sections: floorOf(seatsFor(o, fans)), holdSeconds: 120 }),
  fan: {},
  // no unexpected answer (any error, a 429 or a 5xx included); seats sell
  mustHold: () => ["http_req_failed==0", "sales_confirmed>0"],
};
