/**
 * The abandon clock of a pre-queued fan starts at the draw, not at the close (issue 28 item 7):
 * while the draw waits for its beacon nobody's place can be lost, and after it a fan who does not
 * poll loses the place abandonSeconds after the draw. And the admission budget is not banked while
 * the draw waits: the pre-queue is admitted at the rate from the draw on, in each of the three
 * lines. Real Redis, the test DynamoDB (the lottery store, whose named beacon makes the draw wait);
 * nothing mocked.
 */
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { createDocumentClient, createDynamoClient } from "../../src/dynamodb/client.js";
import { ensureTable } from "../../src/dynamodb/table.js";
import { createLotteryStore } from "../../src/lottery/store.js";
import { testChain } from "../support/drand-chain.js";
import { createWaitingRoom, type WaitingRoom, waitingRoomKeys } from "../../src/waiting-room/index.js";
import { eventId as freshEventId, ok, SECRET, sleep, until } from "../waiting-room/helpers.js";

const ABANDON_SECONDS = 2;

let dynamo: ReturnType<typeof createDynamoClient>;
let redis: Redis;
let room: WaitingRoom;
let store: ReturnType<typeof createLotteryStore>;

beforeAll(async () => {
  dynamo = createDynamoClient({ endpoint: inject("dynamoEndpoint"), region: "us-east-1" });
  const tableName = `draw_abandon_${freshEventId("t")}`;
  await ensureTable(dynamo, tableName);
  store = createLotteryStore({ doc: createDocumentClient(dynamo), tableName });
  redis = new Redis(inject("redisUrl"), { maxRetriesPerRequest: 1 });
  room = createWaitingRoom({ redis, secret: SECRET, lottery: store });
});

afterAll(async () => {
  await room.close();
  redis.disconnect();
  dynamo.destroy();
});

describe("the abandon clock of the pre-queue", () => {
  it("starts at the draw: a beacon's wait longer than abandonSeconds costs nobody a place", async () => {
    const chain = testChain();
    const evt = freshEventId("clock");
    ok(
      await room.configure(evt, {
        drand: chain.chain,
        onSaleAt: Date.now() + 3_600_000,
        admitPerSecond: 0,
        maxActive: 100,
        sessionSeconds: 60,
        abandonSeconds: ABANDON_SECONDS,
      }),
    );
    const fans = ["keeps", "quiet-1", "quiet-2"].map((f) => `${f}-${evt}`);
    for (const fanId of fans) ok(await room.join(evt, fanId));
    ok(await room.openNow(evt));

    // Longer than abandonSeconds with the draw waiting, and nobody polling (as they were told).
    await sleep(ABANDON_SECONDS * 1000 + 1_500);
    const waiting = ok(await room.stats(evt)).stats;
    expect(waiting).toMatchObject({ abandoned: 0, waiting: 3, drawing: true });

    // The value comes; the draw places them all, none lost.
    ok(await room.recordBeacon(evt, chain.sign(ok(await room.info(evt)).info.lottery.drand!.round)));
    const drawn = await until(async () => {
      const place = ok(await room.statusOf(evt, fans[0]!)).place;
      return place.status === "prequeue" ? undefined : place;
    }, 10_000);
    expect(drawn.status).toBe("waiting");
    const k = waitingRoomKeys(evt);
    const records = await redis.hmget(k.fans, ...fans);
    for (const r of records) expect(r?.startsWith("x|"), String(r)).toBe(false);
    const after = ok(await room.stats(evt)).stats;
    expect(after).toMatchObject({ abandoned: 0, waiting: 3, drawing: false });

    // From the draw on the clock runs: the two who never poll lose their places, the one who polls
    // keeps it, and the counts follow.
    const lost = await until(
      async () => {
        ok(await room.statusOf(evt, fans[0]!));
        const s = ok(await room.stats(evt)).stats;
        return s.abandoned === 2 ? s : undefined;
      },
      15_000,
      300,
    );
    expect(lost.waiting).toBe(1);
    expect(ok(await room.statusOf(evt, fans[1]!)).place.status).toBe("abandoned");
    expect(ok(await room.statusOf(evt, fans[0]!)).place).toMatchObject({ status: "waiting", ahead: 0 });
  });
});

/** The three lines a room can be (src/waiting-room/context.ts): by name, by claims, records on the shards. */
const LINES = [
  ["by name", {}],
  ["by claims", { claims: true }],
  ["records on the fan shards", { fanShards: 3, claims: "shards" }],
] as const;

describe("the admission budget while the draw waits", () => {
  it.each(LINES)(
    "%s: the pre-queue is admitted at the rate from the draw on, not a second's worth in one instant",
    async (_line, options) => {
      const chain = testChain();
      const evt = freshEventId("budget");
      const line = createWaitingRoom({ redis, secret: SECRET, lottery: store, ...options });
      try {
        const admitPerSecond = 4;
        ok(
          await line.configure(evt, {
            drand: chain.chain,
            onSaleAt: Date.now() + 3_600_000,
            admitPerSecond,
            maxActive: 100,
            sessionSeconds: 60,
          }),
        );
        const fans = Array.from({ length: 12 }, (_, i) => `pq-${i}-${evt}`);
        await Promise.all(fans.map((fanId) => line.join(evt, fanId).then(ok)));
        ok(await line.openNow(evt));
        // The draw waits for its beacon over a second while the line is asked (each call ticks):
        // the budget accrues meanwhile and cannot be spent on the pre-queue.
        for (let i = 0; i < 6; i++) {
          expect(ok(await line.stats(evt)).stats).toMatchObject({ drawing: true, admitted: 0 });
          await sleep(250);
        }
        ok(await line.recordBeacon(evt, chain.sign(ok(await line.info(evt)).info.lottery.drand!.round)));
        // A fan's poll starts the draw once the beacon is in (as the first test's does).
        await until(async () => {
          const place = ok(await line.statusOf(evt, fans[0]!)).place;
          return place.status === "prequeue" ? undefined : place;
        }, 10_000);
        const k = waitingRoomKeys(evt);
        // From the draw on, at every look: the places moved (admitted, or offered to be claimed)
        // are at most the one admission kept plus what the rate paid since drawnAt (Redis time,
        // read after the stats call's tick, so the bound is never short).
        let moved = 0;
        for (let look = 1; look <= 15; look++) {
          const s = ok(await line.stats(evt)).stats;
          const [drawnAt, [seconds, micros]] = await Promise.all([redis.hget(k.room, "drawnAt"), redis.time()]);
          const since = Number(seconds) * 1000 + Number(micros) / 1000 - Number(drawnAt);
          moved = s.admitted + (s.offered ?? 0);
          expect(moved, `look ${look}: ${since.toFixed(0)} ms after the draw`).toBeLessThanOrEqual(
            1 + Math.floor((admitPerSecond * since) / 1000),
          );
          await sleep(100);
        }
        // and the line did move at the rate
        expect(moved).toBeGreaterThan(0);
      } finally {
        await line.close();
      }
    },
    20_000,
  );
});
