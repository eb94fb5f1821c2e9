/**
 * Production as an operator runs it: the real process, refusing a configuration that would start
 * embedded stand-ins; the compiled build (`dist/main.js`, what the image runs) serving the pages
 * and its probes; readiness off before the server closes on SIGTERM; the workers' health server.
 */
import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { setTimeout as sleep } from "node:timers/promises";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { spawnLocalDynamoDB } from "../../src/local/dynamodb.js";
import { eventInput } from "../gateway/harness.js";
import { type MainProcess, runToExit, startMainProcess } from "../support/processes.js";
import { type ClaimedDatabase, claimRedisDatabase } from "../support/worker-process.js";

const run = promisify(execFile);

let db: ClaimedDatabase;
beforeAll(async () => {
  db = await claimRedisDatabase();
});
const started: MainProcess[] = [];
afterAll(async () => {
  await Promise.all(started.map((p) => p.stop("SIGKILL")));
  await db?.release();
});

const secrets = {
  ADMIN_TOKEN: "adm_prod_test_3b9c1e7a5d2f",
  GATEWAY_SECRET: "gws_prod_test_8e1f0c3a6b9d2e5f7a1c4b8d0e3f6a9c",
};

/** src/main.ts with exactly `env` (no inherited REDIS_URL or the like): exit code and output. */
async function startRefused(env: Record<string, string>): Promise<{ code: number | null; out: string }> {
  return runToExit("src/main.ts", [], { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "/tmp", ...env });
}

/** The URL a `--role=worker` process logged for its health server. */
function healthUrlOf(logs: string[]): string {
  for (const line of logs) {
    try {
      const entry = JSON.parse(line) as { msg?: string; health?: string };
      if (entry.msg === "workers running" && entry.health) return entry.health.replace("localhost", "127.0.0.1");
    } catch {
      // not a log line
    }
  }
  throw new Error(`no health URL in the logs:\n${logs.join("\n")}`);
}

async function until<T>(probe: () => Promise<T | undefined>, timeoutMs: number): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`not within ${timeoutMs} ms`);
    await sleep(25);
  }
}

describe("production mode, the real process", () => {
  it("refuses to start without explicit DynamoDB, Redis and secrets: one message naming each, exit 1, no stack", async () => {
    const { code, out } = await startRefused({ NODE_ENV: "production" });
    expect(code).toBe(1);
    const lines = out.trim().split("\n");
    expect(lines).toHaveLength(1);
    const entry = JSON.parse(lines[0] ?? "") as { level: number; msg: string; err?: unknown };
    expect(entry.level).toBe(60);
    expect(entry.err).toBeUndefined();
    expect(entry.msg).toMatch(/^cannot start: invalid configuration for production/);
    for (const name of ["DYNAMODB_ENDPOINT", "AWS_REGION", "REDIS_URL", "GATEWAY_SECRET", "ADMIN_TOKEN"]) {
      expect(entry.msg).toContain(name);
    }
    expect(out).not.toMatch(/\n\s+at /);
  });

  it("refuses the secrets docker-compose.yml once published, and starts no embedded DynamoDB for them", async () => {
    const { code, out } = await startRefused({
      NODE_ENV: "production",
      REDIS_URL: db.url,
      DYNAMODB_ENDPOINT: inject("dynamoEndpoint"),
      ADMIN_TOKEN: "change-me-operator-token",
      GATEWAY_SECRET: "change-me-gateway-secret-at-least-32-chars",
    });
    expect(code).toBe(1);
    const entry = JSON.parse(out.trim()) as { msg: string };
    expect(entry.msg).toContain("ADMIN_TOKEN: a value published");
    expect(entry.msg).toContain("GATEWAY_SECRET: a value published");
    expect(entry.msg).not.toContain("REDIS_URL");
  });
});

describe("the compiled build", () => {
  it("`npm run build` compiles src/ to dist/ and builds the pages", () => {
    const scripts = (JSON.parse(readFileSync("package.json", "utf8")) as { scripts: Record<string, string> }).scripts;
    expect(scripts.build).toContain("tsc -p tsconfig.build.json");
    expect(scripts.build).toContain("npm run build:pages");
    const build = JSON.parse(readFileSync("tsconfig.build.json", "utf8")) as {
      compilerOptions: { outDir: string; rootDir: string; noEmit: boolean };
    };
    // dist/ mirrors src/, so what src/ finds one directory up (lua/, waiting-room/dist/) dist/ finds too.
    expect(build.compilerOptions).toMatchObject({ outDir: "dist", rootDir: "src", noEmit: false });
  });

  it("node dist/main.js in production serves /, /console, /livez and /readyz, and drains on SIGTERM", {
    timeout: 180_000,
  }, async () => {
    // The compile `npm run build` does (the pages were built by `pretest`; rebuilding them here
    // would empty waiting-room/dist/ under the page tests running alongside).
    await run(process.execPath, ["node_modules/typescript/bin/tsc", "-p", "tsconfig.build.json"]);
    const gw = await startMainProcess({
      entry: ["dist/main.js"],
      env: {
        NODE_ENV: "production",
        REDIS_URL: db.url,
        DYNAMODB_ENDPOINT: inject("dynamoEndpoint"),
        DYNAMODB_TABLE: `prod_${Date.now()}`,
        SHUTDOWN_DRAIN_MS: "1500",
        ...secrets,
      },
      timeoutMs: 60_000,
    });
    started.push(gw);
    const url = gw.url!;
    expect(gw.logs.join("\n")).toContain("production mode (NODE_ENV=production)");
    expect(gw.logs.join("\n")).not.toContain("demo event");

    for (const page of ["/", "/console"]) {
      const res = await fetch(`${url}${page}`);
      expect(res.status, page).toBe(200);
      expect(res.headers.get("content-type")).toContain("text/html");
      expect(await res.text()).toContain("<script");
    }
    expect(await (await fetch(`${url}/livez`)).json()).toEqual({ status: "ok" });
    expect(await (await fetch(`${url}/readyz`)).json()).toEqual({
      status: "ready",
      checks: { redis: "ok", dynamodb: "ok" },
    });
    // An event written to DynamoDB, and a fan in its line by the join script from lua/.
    const eventId = `prod_${Date.now()}`;
    const put = await fetch(`${url}/v1/admin/events/${eventId}`, {
      method: "PUT",
      headers: { "content-type": "application/json", authorization: `Bearer ${secrets.ADMIN_TOKEN}` },
      body: JSON.stringify(eventInput()),
    });
    expect(put.status).toBe(201);
    const join = await fetch(`${url}/v1/events/${eventId}/queue`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ fanId: "alice" }),
    });
    expect(join.status).toBe(201);
    expect(((await join.json()) as { queueToken?: string }).queueToken).toBeTruthy();

    gw.child.kill("SIGTERM");
    const draining = await until(async () => {
      const res = await fetch(`${url}/readyz`);
      return res.status === 503 ? ((await res.json()) as { error: { code: string; details: unknown } }) : undefined;
    }, 5_000);
    expect(draining.error).toMatchObject({ code: "unavailable", details: { draining: true } });
    // Still serving while the load balancer takes it out.
    expect((await fetch(`${url}/livez`)).status).toBe(200);
    expect(await gw.exited).toBe(0);
  });
});

describe("the workers' health server (WORKER_HEALTH_PORT)", () => {
  it("answers /livez, and /readyz with Redis, DynamoDB and the workers; 503 when DynamoDB goes", {
    timeout: 60_000,
  }, async () => {
    const dynamo = await spawnLocalDynamoDB({ port: 0 });
    const worker = await startMainProcess({
      role: "worker",
      env: { REDIS_URL: db.url, DYNAMODB_ENDPOINT: dynamo.endpoint, WORKER_HEALTH_PORT: "0", DEMO_EVENT: "false" },
    });
    started.push(worker);
    const health = healthUrlOf(worker.logs);

    expect(await (await fetch(`${health}/livez`)).json()).toEqual({ status: "ok" });
    const ready = await fetch(`${health}/readyz`);
    expect(ready.status).toBe(200);
    expect(await ready.json()).toEqual({
      status: "ready",
      checks: { redis: "ok", dynamodb: "ok", workers: "running" },
    });
    expect((await fetch(`${health}/nothing`)).status).toBe(404);
    // The worker's own series: job run times and its DynamoDB commands (docs/observability.md).
    const metrics = await fetch(`${health}/metrics`);
    expect(metrics.status).toBe(200);
    const text = await metrics.text();
    expect(text).toContain("# TYPE gateway_job_duration_seconds histogram");
    expect(text).toContain("# TYPE gateway_dynamodb_command_duration_seconds histogram");

    await dynamo.close();
    const down = await fetch(`${health}/readyz`);
    expect(down.status).toBe(503);
    expect(down.headers.get("retry-after")).toBe("1");
    const body = (await down.json()) as { error: { code: string; details: { failures: string[]; checks: unknown } } };
    expect(body.error.code).toBe("unavailable");
    expect(body.error.details.checks).toEqual({ redis: "ok", dynamodb: "down", workers: "running" });
    expect(body.error.details.failures).toEqual([expect.stringMatching(/^dynamodb: /)]);
    expect((await fetch(`${health}/livez`)).status).toBe(200);
    expect(await worker.stop("SIGTERM")).toBe(0);
  });
});
