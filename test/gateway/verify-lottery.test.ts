/**
 * The draw verified from outside, over HTTP, as `npm run verify-lottery` does: an honest draw
 * passes; the same pre-queue tampered with in Redis after the close (a fan slipped in first, or
 * one removed) fails. Real gateway, Redis and DynamoDB; verifyRemoteDraw is what the CLI runs.
 */
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { verifyRemoteDraw } from "../../src/lottery/verify-remote.js";
import {
  ADMIN_TOKEN,
  createTable,
  eventInput,
  type Gateway,
  listen,
  putEvent,
  startGateway,
  uniqueId,
} from "./harness.js";

let gw: Gateway;
let server: Awaited<ReturnType<typeof listen>>;
let redis: Redis;

beforeAll(async () => {
  gw = await startGateway({ tableName: await createTable() });
  server = await listen(gw);
  redis = new Redis(inject("redisUrl"));
});

afterAll(async () => {
  redis.disconnect();
  await server.close();
  await gw.close();
});

const run = promisify(execFile);

/** The CLI as an operator runs it: its exit code and what it printed. */
async function cli(eventId: string): Promise<{ code: number; out: string }> {
  try {
    const { stdout } = await run(
      process.execPath,
      ["--import", "tsx", "scripts/verify-lottery.ts", "--gateway", server.url, "--event", eventId],
      { timeout: 30_000 },
    );
    return { code: 0, out: stdout };
  } catch (err) {
    const e = err as { code?: number; stdout?: string };
    return { code: e.code ?? -1, out: e.stdout ?? "" };
  }
}

describe("verify-lottery", () => {
  it("an honest draw passes; a pre-queue tampered with after the close fails", async () => {
    const eventId = uniqueId("vl");
    const later = new Date(Date.now() + 3_600_000).toISOString();
    expect((await putEvent(gw, eventId, eventInput({ onSaleAt: later }))).status).toBe(201);
    const fanIds = Array.from({ length: 1_500 }, (_, i) => `fan-${i}`);
    const joins = await Promise.all(
      fanIds.map((fanId) => gw.request(`/v1/events/${eventId}/queue`, { method: "POST", json: { fanId } })),
    );
    expect(joins.every((r) => r.status === 201)).toBe(true);
    // Before the draw the membership is not published.
    const early = await gw.request(`/v1/events/${eventId}/queue/lottery`);
    expect(early.status).toBe(409);
    expect(((await early.json()) as { error: { code: string } }).error.code).toBe("not_drawn");
    const opened = await gw.request(`/v1/admin/events/${eventId}/open-now`, { method: "POST", token: ADMIN_TOKEN });
    expect(opened.status).toBe(200);

    const honest = await verifyRemoteDraw(server.url, eventId);
    expect(honest.checks).toEqual({
      commitment: true,
      entriesWellFormed: true,
      size: true,
      membershipHash: true,
      order: true,
    });
    expect(honest.size).toBe(1_500);

    const passed = await cli(eventId);
    expect(passed.code).toBe(0);
    expect(passed.out).toContain("PASS");
    expect(passed.out).toContain(honest.first[0]!);

    // A bad cursor is a JSON error, not a crash.
    const bad = await gw.request(`/v1/events/${eventId}/queue/lottery?cursor=abc`);
    expect(bad.status).toBe(400);

    // Tampered with: a fan slipped in at the front, after the close.
    const pre = `wr:{evt:${eventId}}:pre`;
    await redis.zadd(pre, 0.5, "slipped-in");
    expect((await verifyRemoteDraw(server.url, eventId)).pass).toBe(false);
    const failed = await cli(eventId);
    expect(failed.code).toBe(1);
    expect(failed.out).toContain("FAIL");
    // Or a fan removed.
    await redis.zrem(pre, "slipped-in", "fan-7");
    const removed = await verifyRemoteDraw(server.url, eventId);
    expect(removed.pass).toBe(false);
    expect(removed.checks.membershipHash).toBe(false);
  }, 60_000);
});
