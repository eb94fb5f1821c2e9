/**
 * best: every fan asks for "2 best in Floor" (best available together, docs/API.md) instead of
 * picking seats off the map; Floor has rows of even length and fewer seats than the fans want.
 * What must hold: holds stay fast while the crowd meets on the same best blocks, Floor sells,
 * nothing unexpected (the audit afterwards: no seat twice, its `stranded` figure 0).
 *   k6 run -e BASE_URL=... -e ADMIN_TOKEN=... -e FANS=2000 -e RATE=500 load/k6/best.ts
 */
import type { Options } from "k6/options";
import { arrivalStages, FANS, fanJourney, RATE, type Setup, setupEvent, summary, withRunReport } from "./lib.ts";

export const options: Options = withRunReport({
  scenarios: {
    best: {
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
    holds_granted: ["count>=10"],
    unexpected_responses: ["count<1"],
  },
});

export function setup(): Setup {
  // 0.8 seats a fan, in rows of 20 (even: pairs strand no seat).
  const rows = Math.max(1, Math.ceil((FANS * 0.8) / 20));
  return setupEvent({
    sections: [
      { id: "FLOOR", tier: "Floor", price: 15000, rows, seatsPerRow: 20 },
      { id: "UPPER", tier: "Upper", price: 5000, rows: 2, seatsPerRow: 20 },
    ],
  });
}

export default function (data: Setup): void {
  fanJourney(data, { best: { quantity: 2, tier: "Floor" } });
}

export const handleSummary = summary("best");
