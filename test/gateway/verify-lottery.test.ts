/**
 * The draw verified from outside, over HTTP, as `npm run verify-lottery` does: an honest draw
 * passes; the same pre-queue tampered with in Redis after the close (a fan slipped in first, or
 * one removed) fails. Real gateway, Redis and DynamoDB; verifyRemoteDraw is what the CLI runs.
 */
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { randomnessOf } from "../../src/lottery/drand.js";
import { verifyRemoteDraw } from "../../src/lottery/verify-remote.js";
import { commitmentOf, generateSeed, lotteryOrder } from "../../src/waiting-room/index.js";
import { testChain } from "../support/drand-chain.js";
import { preKeyOf, writePlaces } from "../waiting-room/helpers.js";
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
async function cli(eventId: string, ...more: string[]): Promise<{ code: number; out: string }> {
  try {
    const { stdout } = await run(
      process.execPath,
      ["--import", "tsx", "scripts/verify-lottery.ts", "--gateway", server.url, "--event", eventId, ...more],
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

    // Tampered with: a fan slipped in at place 1 beside the fan drawn there, after the close
    // (wherever the room keeps its pre-queue: the event's slot, or each fan's shard).
    await writePlaces(redis, eventId, [["slipped-in", 1]]);
    expect((await verifyRemoteDraw(server.url, eventId)).pass).toBe(false);
    const failed = await cli(eventId);
    expect(failed.code).toBe(1);
    expect(failed.out).toContain("FAIL");
    // Or a fan removed.
    for (const fanId of ["slipped-in", "fan-7"]) await redis.zrem(await preKeyOf(redis, eventId, fanId), fanId);
    const removed = await verifyRemoteDraw(server.url, eventId);
    expect(removed.pass).toBe(false);
    expect(removed.checks.membershipHash).toBe(false);
  }, 60_000);

  it("checks the seed against the commitment a fan recorded at join, and the drand beacon against its chain", async () => {
    const t = testChain();
    const eventId = uniqueId("vr");
    const later = new Date(Date.now() + 3_600_000).toISOString();
    const waitingRoom = { admitPerSecond: 0, maxActive: 10, sessionSeconds: 600, drand: t.chain };
    expect((await putEvent(gw, eventId, eventInput({ onSaleAt: later, waitingRoom }))).status).toBe(201);
    const fanIds = Array.from({ length: 60 }, (_, i) => `fan-${i}`);
    const joins = await Promise.all(
      fanIds.map((fanId) => gw.request(`/v1/events/${eventId}/queue`, { method: "POST", json: { fanId } })),
    );
    // The join answers with the commitment: the fan's page keeps it.
    const bodies = (await Promise.all(joins.map((r) => r.json()))) as { lottery?: { commitment: string } }[];
    const recorded = bodies[0]!.lottery!.commitment;
    expect(recorded).toMatch(/^[0-9a-f]{64}$/);
    for (const b of bodies) expect(b.lottery?.commitment).toBe(recorded);

    expect(
      (await gw.request(`/v1/admin/events/${eventId}/open-now`, { method: "POST", token: ADMIN_TOKEN })).status,
    ).toBe(200);
    const info = (await (await gw.request(`/v1/events/${eventId}/waiting-room`)).json()) as {
      lottery: { drand: { round: number } };
    };
    const signed = t.sign(info.lottery.drand.round);
    const put = await gw.request(`/v1/admin/events/${eventId}/waiting-room/beacon`, {
      method: "PUT",
      token: ADMIN_TOKEN,
      json: signed,
    });
    expect(put.status).toBe(200);
    const honest = await (async () => {
      for (let i = 0; ; i++) {
        try {
          return await verifyRemoteDraw(server.url, eventId, { commitment: recorded });
        } catch (err) {
          if (i > 300) throw err;
          await new Promise((r) => setTimeout(r, 100));
        }
      }
    })();
    expect(honest.pass).toBe(true);
    expect(honest.beaconCheck).toMatchObject({ ok: true, round: signed.round, chainHash: t.chain.chainHash });
    expect(honest.beacon).toBe(randomnessOf(signed.signature));
    const passed = await cli(eventId, "--commitment", recorded);
    expect(passed.code).toBe(0);
    expect(passed.out).toContain("ok   beacon");

    // The operator rewrites the seed and its commitment (and the places to match) after the draw:
    // against the commitment served now everything agrees; against the one recorded at join, not.
    const room = `wr:{evt:${eventId}}:room`;
    const [beacon] = await redis.hmget(room, "beacon");
    const forgedSeed = generateSeed();
    await redis.hset(room, "seed", forgedSeed, "commitment", commitmentOf(forgedSeed));
    const forgedOrder = lotteryOrder(forgedSeed, fanIds, beacon ?? "");
    await writePlaces(
      redis,
      eventId,
      forgedOrder.map((fanId, i) => [fanId, i + 1] as const),
    );
    expect((await verifyRemoteDraw(server.url, eventId)).pass).toBe(true);
    const moved = await verifyRemoteDraw(server.url, eventId, { commitment: recorded });
    expect(moved.pass).toBe(false);
    expect(moved.checks.commitment).toBe(false);
    expect(moved.commitmentAsRecorded).toBe(false);
    const failed = await cli(eventId, "--commitment", recorded);
    expect(failed.code).toBe(1);
    expect(failed.out).toContain("FAIL");

    // Or another beacon value (and the places to match) in place of the round's randomness: the
    // order agrees with it, the beacon does not verify.
    const chosen = "0".repeat(64);
    const [seed] = await redis.hmget(room, "seed");
    await redis.hset(room, "beacon", chosen);
    const chosenOrder = lotteryOrder(seed!, fanIds, chosen);
    await writePlaces(
      redis,
      eventId,
      chosenOrder.map((fanId, i) => [fanId, i + 1] as const),
    );
    const rebeaconed = await verifyRemoteDraw(server.url, eventId);
    expect(rebeaconed.checks.order).toBe(true);
    expect(rebeaconed.beaconCheck?.ok).toBe(false);
    expect(rebeaconed.pass).toBe(false);
  }, 60_000);
});
