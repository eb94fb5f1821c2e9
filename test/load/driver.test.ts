/**
 * The Node load driver end to end, at its smallest: it starts a gateway child process against
 * the suite's Redis and DynamoDB, runs the spike scenario (50 fans, 40 seats), and audits.
 */
import { describe, expect, inject, it } from "vitest";
import { renderResult, runScenario } from "../../load/driver/run.js";
import { claimRedisDatabase } from "../support/worker-process.js";

describe("load driver", () => {
  it("runs a tiny spike end to end: the audit passes, seats sell, tau is a correlation", async () => {
    // The gateway child runs workers: on a Redis database of its own, so it takes no other file's jobs.
    const db = await claimRedisDatabase();
    const result = await runScenario({
      scenario: "spike",
      fans: 50,
      seats: 40,
      rate: 50,
      duration: 5,
      // Long enough for the cold child's first joins to land before the draw.
      onSaleDelaySeconds: 4,
      maxPollSeconds: 0.5,
      thinkMs: 50,
      connections: 32,
      redisUrl: db.url,
      dynamoEndpoint: inject("dynamoEndpoint"),
    }).finally(() => db.release());
    const text = renderResult(result);
    expect(result.audit?.ok, text).toBe(true);
    expect(result.sales, text).toBeGreaterThan(0);
    expect(result.seatsSold).toBeLessThanOrEqual(40);
    expect(result.admitted).toBe(50);
    expect(result.prequeued).toBeGreaterThan(0);
    expect(result.tau).toBeGreaterThanOrEqual(-1);
    expect(result.tau).toBeLessThanOrEqual(1);
    expect(text).toContain("audit: PASS");
  }, 120_000);
});

// The root tsconfig does not include load/: this type reference has the CLI type-checked too.
type Usage = typeof import("../../load/driver/cli.js").USAGE;
const usagePrefix: Usage extends string ? "usage" : never = "usage";
describe("load driver CLI", () => {
  it("is type-checked through this file", () => {
    expect(usagePrefix).toBe("usage");
  });
});
