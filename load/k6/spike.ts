/**
 * spike: FANS fans arrive within seconds (ramping-arrival-rate up to RATE joins/s), poll at the
 * suggested interval, get admitted, hold two seats, think, buy.
 *   k6 run -e BASE_URL=http://127.0.0.1:8080 -e ADMIN_TOKEN=... -e FANS=5000 -e RATE=1000 load/k6/spike.ts
 */
import type { Options } from "k6/options";
import { arrivalStages, FANS, fanJourney, RATE, type Setup, setupEvent, summary, withRunReport } from "./lib.ts";

export const options: Options = withRunReport({
  scenarios: {
    spike: {
      executor: "ramping-arrival-rate",
      startRate: 0,
      timeUnit: "1s",
      preAllocatedVUs: Math.min(FANS, 2000),
      maxVUs: FANS,
      // Exactly FANS fans: up to RATE in 2 s, RATE a second, down in 1 s.
      stages: arrivalStages(FANS, RATE, 2, 1),
      gracefulStop: "600s",
    },
  },
  thresholds: {
    "http_req_failed{endpoint:join}": ["rate<0.01"],
    "http_req_duration{endpoint:status}": ["p(99)<500"],
    "http_req_duration{endpoint:hold}": ["p(99)<1000"],
    unexpected_responses: ["count<1"],
    sales_confirmed: ["count>0"],
  },
});

const rows = Math.max(1, Math.ceil((FANS * 1.6) / 50 / 2));

export function setup(): Setup {
  return setupEvent({
    sections: [
      { id: "A", tier: "Floor", price: 15000, rows, seatsPerRow: 50 },
      { id: "B", tier: "Upper", price: 6000, rows, seatsPerRow: 50 },
    ],
  });
}

export default function (data: Setup): void {
  fanJourney(data);
}

export const handleSummary = summary("spike");
