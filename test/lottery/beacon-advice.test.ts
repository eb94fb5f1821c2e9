/**
 * What a pre-queued fan is told while the draw waits for its beacon (issue 28 item 7): not a poll
 * every 100 ms with an ETA of 1 s for up to ten minutes, but a poll every few seconds and no ETA
 * until the draw. Real Redis, the test DynamoDB; nothing mocked.
 */
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { createDocumentClient, createDynamoClient } from "../../src/dynamodb/client.js";
import { ensureTable } from "../../src/dynamodb/table.js";
import { createLotteryStore } from "../../src/lottery/store.js";
import { testChain } from "../support/drand-chain.js";
import { DRAW_WAIT_POLL_MS, DRAW_WAIT_SPREAD_MS } from "../../src/waiting-room/advice.js";
import { createWaitingRoom, type WaitingRoom } from "../../src/waiting-room/index.js";
import { eventId as freshEventId, ok, SECRET, until } from "../waiting-room/helpers.js";

let dynamo: ReturnType<typeof createDynamoClient>;
let redis: Redis;
let room: WaitingRoom;

beforeAll(async () => {
  dynamo = createDynamoClient({ endpoint: inject("dynamoEndpoint"), region: "us-east-1" });
  const tableName = `beacon_advice_${freshEventId("t")}`;
  await ensureTable(dynamo, tableName);
  // The draw waits for the beacon far longer than the test runs: the value comes when the test sends it.
  const store = createLotteryStore({ doc: createDocumentClient(dynamo), tableName });
  redis = new Redis(inject("redisUrl"), { maxRetriesPerRequest: 1 });
  room = createWaitingRoom({ redis, secret: SECRET, lottery: store });
});

afterAll(async () => {
  await room.close();
  redis.disconnect();
  dynamo.destroy();
});

describe("advice while the draw waits for its beacon", () => {
  it("tells pre-queued fans to poll every few seconds with no ETA, then the draw places them", async () => {
    const chain = testChain();
    const evt = freshEventId("advice");
    // Ten fans at 10 a second: before the fix each was told 100 ms and an ETA of 1 s.
    ok(
      await room.configure(evt, {
        drand: chain.chain,
        onSaleAt: Date.now() + 3_600_000,
        admitPerSecond: 10,
        maxActive: 100,
        sessionSeconds: 60,
        abandonSeconds: 60,
      }),
    );
    const fanIds = Array.from({ length: 10 }, (_, i) => `fan-${evt}-${i}`);
    for (const fanId of fanIds) ok(await room.join(evt, fanId));
    expect(ok(await room.openNow(evt)).info.lottery.seed).toBeUndefined();

    // The first fraction of a second after the close is the draw's own expected time (the fan is
    // told to poll as it should end); past it the draw is waiting for the beacon.
    let told: unknown;
    const waiting = await until(async () => {
      const place = ok(await room.statusOf(evt, fanIds[0]!)).place;
      expect(place.status).toBe("prequeue");
      told = place;
      return (place.pollAfterMs ?? 0) >= 1_000 ? place : undefined;
    }, 3_000).catch(() => {
      throw new Error(`3 s into the beacon's wait the fan is still told ${JSON.stringify(told)}`);
    });
    expect(waiting.etaSeconds).toBeNull();
    for (const fanId of fanIds) {
      const place = ok(await room.statusOf(evt, fanId)).place;
      expect(place).toMatchObject({ status: "prequeue", etaSeconds: null });
      expect(place.pollAfterMs).toBeGreaterThanOrEqual(DRAW_WAIT_POLL_MS);
      expect(place.pollAfterMs).toBeLessThanOrEqual(DRAW_WAIT_POLL_MS + DRAW_WAIT_SPREAD_MS);
      expect(place.pollAfterSeconds).toBeGreaterThanOrEqual(2);
    }
    // All of that while the beacon is still awaited.
    expect(ok(await room.info(evt)).info.lottery.seed).toBeUndefined();

    // The value comes: the next polls draw the pre-queue and the fan has a place and an ETA again.
    ok(await room.recordBeacon(evt, chain.sign(ok(await room.info(evt)).info.lottery.drand!.round)));
    const placed = await until(async () => {
      const place = ok(await room.statusOf(evt, fanIds[0]!)).place;
      return place.status === "prequeue" ? undefined : place;
    }, 10_000);
    expect(["waiting", "admitted"]).toContain(placed.status);
    expect(placed.etaSeconds).not.toBeNull();
  }, 30_000);
});
