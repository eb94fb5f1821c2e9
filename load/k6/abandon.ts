/**
 * abandon: a third of the fans stop polling while they wait; a third of those who hold release
 * their seats instead of buying. Released seats return to sale (fewer seats than fans, so they
 * are bought again by later fans).
 *   k6 run -e BASE_URL=... -e ADMIN_TOKEN=... -e FANS=2000 -e RATE=200 load/k6/abandon.ts
 */
import type { Options } from "k6/options";
import { arrivalStages, FANS, fanJourney, RATE, type Setup, setupEvent, summary, withRunReport } from "./lib.ts";

export const options: Options = withRunReport({
  scenarios: {
    abandon: {
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
    fans_abandoned: ["count>0"],
    holds_released: ["count>0"],
    sales_confirmed: ["count>0"],
    unexpected_responses: ["count<1"],
  },
});

export function setup(): Setup {
  return setupEvent({
    sections: [{ id: "A", tier: "Floor", price: 15000, rows: Math.max(1, Math.ceil(FANS / 100)), seatsPerRow: 50 }],
  });
}

export default function (data: Setup): void {
  fanJourney(data, { abandonWaiting: 0.33, abandonHold: 0.33 });
}

export const handleSummary = summary("abandon");
