/**
 * soak: a steady RATE fans/s for DURATION seconds, each through the whole journey. Thresholds
 * watch that latency does not drift (p99) and nothing unexpected is answered.
 *   k6 run -e BASE_URL=... -e ADMIN_TOKEN=... -e RATE=20 -e DURATION=3600 load/k6/soak.ts
 */
import type { Options } from "k6/options";
import { DURATION, fanJourney, RATE, type Setup, setupEvent, summary, withRunReport } from "./lib.ts";

export const options: Options = withRunReport({
  scenarios: {
    soak: {
      executor: "constant-arrival-rate",
      rate: RATE,
      timeUnit: "1s",
      duration: `${DURATION}s`,
      preAllocatedVUs: Math.max(10, RATE * 20),
      maxVUs: Math.max(100, RATE * 120),
      gracefulStop: "120s",
    },
  },
  thresholds: {
    "http_req_duration{endpoint:status}": ["p(99)<300"],
    "http_req_duration{endpoint:hold}": ["p(99)<1000"],
    "http_req_duration{endpoint:purchase}": ["p(99)<3000"],
    http_req_failed: ["rate<0.01"],
    unexpected_responses: ["count<1"],
  },
});

export function setup(): Setup {
  // Enough seats for everyone who arrives (two each).
  const rows = Math.max(1, Math.ceil((RATE * DURATION * 2) / 50 / 4));
  return setupEvent({
    sections: ["A", "B", "C", "D"].map((id) => ({ id, tier: "Any", price: 5000, rows, seatsPerRow: 50 })),
  });
}

export default function (data: Setup): void {
  fanJourney(data);
}

export const handleSummary = summary("soak");
