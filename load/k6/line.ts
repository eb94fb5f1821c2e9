/**
 * line: a crowd for one event's line and nothing else (the driver's `line`): FANS fans join at
 * RATE a second and poll as told (`pollAfterMs`) until admitted, then leave, with no seat map or
 * hold, so the run measures the waiting room alone. Admission runs at a hundredth of the crowd a
 * second (at least 50), with room for everyone: the line drains in about 100 s. The gateway's
 * `gateway_queue_polls_total{answered}` says how many polls it answered from its line cache.
 *   k6 run -e BASE_URL=... -e ADMIN_TOKEN=... -e LOAD_TEST_TOKEN=... -e FANS=100000 -e RATE=2000 load/k6/line.ts
 */
import exec from "k6/execution";
import type { Options } from "k6/options";
import {
  arrivalStages,
  FANS,
  join,
  RATE,
  type Setup,
  setupEvent,
  summary,
  waitForAdmission,
  withRunReport,
} from "./lib.ts";

export const options: Options = withRunReport({
  scenarios: {
    line: {
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
    "http_req_failed{endpoint:join}": ["rate<0.01"],
    "http_req_failed{endpoint:status}": ["rate<0.01"],
    unexpected_responses: ["count<1"],
    fans_admitted: ["count>0"],
  },
});

export function setup(): Setup {
  return setupEvent({ sections: [{ id: "A", tier: "Floor", price: 15000, rows: 1, seatsPerRow: 10 }] }, 5, {
    admitPerSecond: Math.max(50, Math.round(FANS / 100)),
  });
}

export default function (data: Setup): void {
  const joined = join(
    data.eventId,
    `k6-line-${exec.scenario.iterationInTest}-${Math.random().toString(36).slice(2, 8)}`,
  );
  if (joined) waitForAdmission(data.eventId, joined.queueToken);
}

export const handleSummary = summary("line");
