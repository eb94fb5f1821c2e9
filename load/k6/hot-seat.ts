/**
 * hot-seat: everyone wants the front rows (a 2x20 FRONT section); losers fall back to the rest.
 * Most holds are 409s: the thresholds say they stay fast and that FRONT still sells out.
 *   k6 run -e BASE_URL=... -e ADMIN_TOKEN=... -e FANS=2000 -e RATE=500 load/k6/hot-seat.ts
 */
import type { Options } from "k6/options";
import { arrivalStages, FANS, fanJourney, RATE, type Setup, setupEvent, summary, withRunReport } from "./lib.ts";

export const options: Options = withRunReport({
  scenarios: {
    hot_seat: {
      executor: "ramping-arrival-rate",
      startRate: 0,
      timeUnit: "1s",
      preAllocatedVUs: Math.min(FANS, 2000),
      maxVUs: FANS,
      // Exactly FANS fans: up to RATE in 2 s, then RATE a second.
      stages: arrivalStages(FANS, RATE, 2),
      gracefulStop: "600s",
    },
  },
  thresholds: {
    "http_req_duration{endpoint:hold}": ["p(95)<300", "p(99)<1000"],
    hold_conflicts: ["count>0"],
    holds_granted: ["count>=20"],
    unexpected_responses: ["count<1"],
  },
});

export function setup(): Setup {
  return setupEvent({
    sections: [
      { id: "FRONT", tier: "Front", price: 50000, rows: 2, seatsPerRow: 20 },
      { id: "A", tier: "Floor", price: 15000, rows: Math.max(1, Math.ceil(FANS / 50)), seatsPerRow: 50 },
    ],
  });
}

export default function (data: Setup): void {
  fanJourney(data, { sections: ["FRONT", "A"] });
}

export const handleSummary = summary("hot-seat");
