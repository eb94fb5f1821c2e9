/**
 * /metrics across pods: what every process exports sums right over them. The event-wide gauges
 * (read from Redis, the same for every process) come from exactly one process at a time, the
 * holder of a lease; the DynamoDB and job series count each process's own work; METRICS_TOKEN
 * closes the endpoint. Real Redis and the local DynamoDB.
 */
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { createMetricsReporter } from "../../src/metrics-reporter.js";
import { buildApp } from "../../src/http/app.js";
import { buildServices } from "../../src/services.js";
import {
  admitFans,
  createTable,
  eventInput,
  type Gateway,
  gatewayOf,
  putEvent,
  startGateway,
  testServicesConfig,
  uniqueId,
} from "./harness.js";

const scrape = async (gw: Gateway) => (await gw.request("/metrics")).text();
/** The value of one series (exact labels as Prometheus prints them), or undefined when absent. */
const series = (text: string, name: string, labels = "") => {
  const line = text.split("\n").find((l) => l.startsWith(`${name}${labels ? `{${labels}}` : ""} `));
  return line === undefined ? undefined : Number(line.slice(line.lastIndexOf(" ") + 1));
};

let tableName: string;
const gateways: Gateway[] = [];
let redis: Redis;

beforeAll(async () => {
  tableName = await createTable();
  for (let i = 0; i < 3; i++) gateways.push(await startGateway({ tableName, workers: i === 0 }));
  redis = new Redis(inject("redisUrl"));
});
afterAll(async () => {
  await Promise.all(gateways.map((g) => g.close()));
  redis.disconnect();
});

describe("/metrics summed over gateway processes", () => {
  it("exports the event-wide gauges from exactly one process, so their sum over pods is the truth", async () => {
    const eventId = uniqueId("m");
    expect((await putEvent(gateways[1]!, eventId, eventInput())).status).toBe(201);
    // Fans admitted through two different processes; the third never served the event.
    await admitFans(gateways[1]!, eventId, ["m1", "m2"]);
    await admitFans(gateways[2]!, eventId, ["m3"]);

    // Every process scraped at once, as Prometheus does; an event one process served reaches the
    // reporter with that process's scrape, so the second round has them all.
    await Promise.all(gateways.map(scrape));
    const texts = await Promise.all(gateways.map(scrape));
    const reporters = texts.map((t) => series(t, "gateway_event_gauges_reporter"));
    expect(reporters.filter((r) => r === 1)).toHaveLength(1);
    expect(reporters.filter((r) => r === 0)).toHaveLength(2);
    const admitted = texts.map((t) => series(t, "gateway_admitted_fans", `event="${eventId}"`) ?? 0);
    expect(admitted.reduce((a, b) => a + b, 0)).toBe(3);
    // The reporter knows the event even if it never served it (gateway 0 did not).
    const reporter = reporters.indexOf(1);
    expect(series(texts[reporter]!, "gateway_admitted_fans", `event="${eventId}"`)).toBe(3);
    for (const [i, t] of texts.entries()) if (i !== reporter) expect(t).not.toContain("gateway_admitted_fans{");

    // The next scrapes keep the same reporter (its lease renewed at each scrape).
    const again = await Promise.all(gateways.map(scrape));
    expect(again.map((t) => series(t, "gateway_event_gauges_reporter"))).toEqual(reporters);
  });

  it("hands the lease over when its holder stops renewing it, and never to two at once", async () => {
    const scope = `t${uniqueId()}`;
    const processes = Array.from({ length: 20 }, (_, i) =>
      createMetricsReporter(redis, { scope, leaseMs: 300, id: `p${i}` }),
    );
    const first = await Promise.all(processes.map((p) => p.report(["e1"])));
    const holders = first.flatMap((r, i) => (r.reporter ? [i] : []));
    expect(holders).toHaveLength(1);
    expect(first[holders[0]!]).toEqual({ reporter: true, events: ["e1"] });

    // The holder goes quiet; the others keep scraping and one of them takes over.
    const others = processes.filter((_, i) => i !== holders[0]);
    let next: number[] = [];
    const deadline = Date.now() + 5_000;
    while (next.length === 0 && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 100));
      const round = await Promise.all(others.map((p) => p.report([])));
      next = round.flatMap((r, i) => (r.reporter ? [i] : []));
      expect(next.length).toBeLessThanOrEqual(1);
    }
    expect(next).toHaveLength(1);
    // And the old holder, back, is not a second reporter.
    expect((await processes[holders[0]!]!.report([])).reporter).toBe(false);
  });

  it("times DynamoDB commands, counts every failed attempt by error, and times background jobs", async () => {
    const gw = gateways[0]!;
    const eventId = uniqueId("d");
    expect((await putEvent(gw, eventId, eventInput())).status).toBe(201);
    const [a, b] = await admitFans(gw, eventId, ["d1", "d2"]);
    // Two fans at once for one seat: one wins, the other is refused (the shield, or the reads and writes).
    const results = await Promise.all(
      [a!, b!].map((f) =>
        gw.request(`/v1/events/${eventId}/holds`, {
          method: "POST",
          token: f.accessToken,
          json: { seats: ["A-1-1"] },
        }),
      ),
    );
    expect(results.map((r) => r.status).sort()).toEqual([201, 409]);
    const text = await scrape(gw);
    expect(text).toMatch(
      // A seat hold is the ledger's write and then the seat's, each an UpdateItem (or PutItem).
      /gateway_dynamodb_command_duration_seconds_count\{command="UpdateItem",outcome="ok"\} [1-9]/,
    );
    expect(text).toMatch(
      /gateway_dynamodb_command_duration_seconds_bucket\{le="0\.005",command="\w+",outcome="ok"\} \d+/,
    );

    // Background jobs of the new event ran in this process's workers and were timed.
    let jobs = 0;
    const deadline = Date.now() + 20_000;
    while (jobs === 0 && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 200));
      const t = await scrape(gw);
      jobs = t
        .split("\n")
        .filter((l) => l.startsWith("gateway_job_duration_seconds_count{"))
        .reduce((n, l) => n + Number(l.slice(l.lastIndexOf(" ") + 1)), 0);
    }
    expect(jobs).toBeGreaterThan(0);
  });

  it("counts a failed DynamoDB attempt by its error name", async () => {
    // A table that does not exist: every attempt fails with ResourceNotFoundException.
    const services = buildServices({
      ...testServicesConfig({ tableName: "missing_table_metrics", redisUrl: inject("redisUrl") }),
    });
    const gw = gatewayOf(buildApp(services), services);
    try {
      const res = await gw.request(`/v1/events/${uniqueId()}/seatmap`);
      expect(res.status).toBeGreaterThanOrEqual(400);
      const text = await scrape(gw);
      expect(text).toMatch(
        /gateway_dynamodb_attempt_errors_total\{command="\w+",error="ResourceNotFoundException"\} [1-9]/,
      );
    } finally {
      await gw.close();
    }
  });

  it("asks for METRICS_TOKEN when one is set", async () => {
    const token = "metrics-token-0123456789";
    const services = buildServices({
      ...testServicesConfig({ tableName, redisUrl: inject("redisUrl") }),
      metricsToken: token,
    });
    const gw = gatewayOf(buildApp(services), services);
    try {
      const open = await gw.request("/metrics");
      expect(open.status).toBe(401);
      expect(((await open.json()) as { error: { code: string } }).error.code).toBe("unauthenticated");
      expect((await gw.request("/metrics", { token: "wrong-token-0123456789" })).status).toBe(401);
      const ok = await gw.request("/metrics", { token });
      expect(ok.status).toBe(200);
      expect(await ok.text()).toContain("gateway_event_gauges_reporter");
    } finally {
      await gw.close();
    }
  });
});
