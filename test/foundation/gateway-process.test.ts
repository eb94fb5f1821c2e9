import { mkdtempSync, readdirSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { spawnLocalDynamoDB } from "../../src/local/dynamodb.js";
import { spawnRedis } from "../../src/local/redis.js";
import { createTableBeforeGsi3, createTestDynamoClient } from "../support/dynamo.js";
import { type GatewayProcess, startGatewayProcess } from "../support/processes.js";
import { type ClaimedDatabase, claimRedisDatabase } from "../support/worker-process.js";

// These gateways run workers too (role "all"): on a Redis database of their own, so they take
// no other test file's jobs.
let db: ClaimedDatabase;
let redisUrl: string;
beforeAll(async () => {
  db = await claimRedisDatabase();
  redisUrl = db.url;
});
const started: GatewayProcess[] = [];
afterAll(async () => {
  await Promise.all(started.map((g) => g.stop("SIGKILL")));
  await db?.release();
});

describe("the gateway process", () => {
  it("answers /livez, /healthz and /readyz against the provided Redis and DynamoDB, and stops cleanly on SIGTERM", async () => {
    const dataDir = mkdtempSync(join(tmpdir(), "gw-"));
    const gw = await startGatewayProcess({
      REDIS_URL: redisUrl,
      DYNAMODB_ENDPOINT: inject("dynamoEndpoint"),
      DYNAMODB_TABLE: `foundation_${Date.now()}`,
      DATA_DIR: dataDir,
      DEMO_EVENT: "false",
    });
    started.push(gw);

    for (const path of ["/livez", "/healthz"]) {
      const health = await fetch(`${gw.url}${path}`);
      expect(health.status, path).toBe(200);
      expect(await health.json()).toEqual({ status: "ok" });
    }

    // Ready with both checks ok. A CI run once caught the first probe in a moment when the Redis
    // connection was not writable yet (`degraded`, redis down, still 200), so the probe is asked
    // as a load balancer asks it: again, until it says ready (or the poll gives up and fails).
    await expect
      .poll(
        async () => {
          const ready = await fetch(`${gw.url}/readyz`);
          return { status: ready.status, body: await ready.json() };
        },
        { timeout: 15_000, interval: 250 },
      )
      .toEqual({ status: 200, body: { status: "ready", checks: { redis: "ok", dynamodb: "ok" } } });

    const missing = await fetch(`${gw.url}/v1/nothing-here`, { headers: { "X-Request-Id": "req_123" } });
    expect(missing.status).toBe(404);
    expect(missing.headers.get("x-request-id")).toBe("req_123");
    expect(await missing.json()).toEqual({
      error: { code: "not_found", message: "no route for GET /v1/nothing-here", requestId: "req_123" },
    });

    const openapi = (await (await fetch(`${gw.url}/openapi.json`)).json()) as { paths: Record<string, unknown> };
    expect(Object.keys(openapi.paths)).toEqual(expect.arrayContaining(["/livez", "/healthz", "/readyz"]));

    // Generated secrets are kept for the next start.
    const secrets = JSON.parse(readFileSync(join(dataDir, "secrets.json"), "utf8")) as Record<string, string>;
    expect(secrets.adminToken).toMatch(/^adm_/);
    expect(secrets.gatewaySecret?.length).toBeGreaterThanOrEqual(32);

    expect(await gw.stop("SIGTERM")).toBe(0);
  });

  it("starts the embedded local DynamoDB when no endpoint is given, keeping its data under DATA_DIR", {
    timeout: 300_000,
  }, async () => {
    const dataDir = mkdtempSync(join(tmpdir(), "gw-embedded-"));
    const env = {
      REDIS_URL: redisUrl,
      DYNAMODB_PORT: "0",
      DATA_DIR: dataDir,
      DYNAMODB_ENDPOINT: "",
    };
    // This is `npm start` on a fresh clone: it also writes the 10,600-seat demo on-sale first.
    const gw = await startGatewayProcess(env, 120_000);
    started.push(gw);
    const ready = await fetch(`${gw.url}/readyz`);
    expect(ready.status).toBe(200);
    expect(gw.logs.join("\n")).toContain("started the embedded local DynamoDB");
    const demo = (await (await fetch(`${gw.url}/v1/events/demo/seatmap`)).json()) as { sections: { total: number }[] };
    expect(demo.sections.reduce((n, s) => n + s.total, 0)).toBe(10_600);
    expect(await gw.stop("SIGTERM")).toBe(0);

    // The table persisted: a second start finds it (LevelDB under DATA_DIR/dynamodb).
    const again = await startGatewayProcess(env, 120_000);
    started.push(again);
    expect((await fetch(`${again.url}/readyz`)).status).toBe(200);
    expect(await again.stop("SIGTERM")).toBe(0);
  });

  it("moves aside a local store made before the open-purchases index (GSI3) and starts on a new table", {
    timeout: 120_000,
  }, async () => {
    // The store an older version left under DATA_DIR: its table has GSI1 and GSI2 only.
    const dataDir = mkdtempSync(join(tmpdir(), "gw-old-store-"));
    const old = await spawnLocalDynamoDB({ port: 0, path: join(dataDir, "dynamodb") });
    const client = createTestDynamoClient(old.endpoint);
    await createTableBeforeGsi3(client, "onsale");
    client.destroy();
    await old.close();

    const gw = await startGatewayProcess(
      { REDIS_URL: redisUrl, DYNAMODB_PORT: "0", DATA_DIR: dataDir, DYNAMODB_ENDPOINT: "", DEMO_EVENT: "false" },
      60_000,
    );
    started.push(gw);
    expect((await fetch(`${gw.url}/readyz`)).status).toBe(200);
    expect(gw.logs.join("\n")).toContain("made by an older version");
    // Kept, not deleted: the old store sits beside the new one.
    expect(readdirSync(dataDir).filter((f) => f.startsWith("dynamodb-before-gsi3-"))).toHaveLength(1);
    expect(await gw.stop("SIGTERM")).toBe(0);
  });

  it("answers /readyz with 503 and Retry-After when DynamoDB goes away, while /healthz stays 200", async () => {
    const dynamo = await spawnLocalDynamoDB({ port: 0 });
    const gw = await startGatewayProcess({
      REDIS_URL: redisUrl,
      DYNAMODB_ENDPOINT: dynamo.endpoint,
      DATA_DIR: mkdtempSync(join(tmpdir(), "gw-down-")),
      DEMO_EVENT: "false",
    });
    started.push(gw);
    expect((await fetch(`${gw.url}/readyz`)).status).toBe(200);

    await dynamo.close();
    const down = await fetch(`${gw.url}/readyz`);
    expect(down.status).toBe(503);
    expect(down.headers.get("retry-after")).toBe("1");
    const body = (await down.json()) as { error: { code: string; details: { failures: string[] } } };
    expect(body.error.code).toBe("unavailable");
    expect(body.error.details.failures).toHaveLength(1);
    expect(body.error.details.failures[0]).toMatch(/^dynamodb: /);
    expect((await fetch(`${gw.url}/healthz`)).status).toBe(200);
    expect((await fetch(`${gw.url}/livez`)).status).toBe(200);
  });

  it("stays ready when Redis goes away (degraded: held fans still buy), and says so", async () => {
    const redis = await spawnRedis();
    const gw = await startGatewayProcess({
      ROLE: "gateway",
      REDIS_URL: redis.url,
      DYNAMODB_ENDPOINT: inject("dynamoEndpoint"),
      DATA_DIR: mkdtempSync(join(tmpdir(), "gw-degraded-")),
      DEMO_EVENT: "false",
    });
    started.push(gw);
    expect(await (await fetch(`${gw.url}/readyz`)).json()).toMatchObject({ status: "ready" });

    const exited = new Promise((resolve) => redis.child.once("exit", resolve));
    redis.child.kill("SIGKILL");
    await exited;
    const degraded = await fetch(`${gw.url}/readyz`);
    expect(degraded.status).toBe(200);
    const body = (await degraded.json()) as { status: string; checks: unknown; failures: string[] };
    expect(body.status).toBe("degraded");
    expect(body.checks).toEqual({ redis: "down", dynamodb: "ok" });
    expect(body.failures).toEqual([expect.stringMatching(/^redis: /)]);
    expect(await gw.stop("SIGTERM")).toBe(0);
  });
});
