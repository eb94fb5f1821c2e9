/**
 * The lottery commitment lives in DynamoDB (issue 18 item 2): written once per event, however
 * many configures race, and a room Redis lost comes back with the same seed, never a new one
 * drawn unseen. Real Redis, the test DynamoDB; nothing mocked.
 */
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { createDocumentClient, createDynamoClient } from "../../src/dynamodb/client.js";
import { ensureTable } from "../../src/dynamodb/table.js";
import { createLotteryStore, type LotteryStore } from "../../src/lottery/store.js";
import { entryOf, verifyDraw } from "../../src/lottery/draw.js";
import { commitmentOf, createWaitingRoom, lotteryOrder, type WaitingRoom } from "../../src/waiting-room/index.js";
import { drawnEverywhere, eventId as freshEventId, SECRET, ok } from "./helpers.js";

const settings = { onSaleAt: Date.now() + 3_600_000, admitPerSecond: 10, maxActive: 10, sessionSeconds: 60 };

let dynamo: ReturnType<typeof createDynamoClient>;
let store: LotteryStore;
let clients: Redis[];
let rooms: WaitingRoom[];

beforeAll(async () => {
  dynamo = createDynamoClient({ endpoint: inject("dynamoEndpoint"), region: "us-east-1" });
  const tableName = `lot_${freshEventId("t")}`;
  await ensureTable(dynamo, tableName);
  store = createLotteryStore({ doc: createDocumentClient(dynamo), tableName });
  // Four gateways' worth of rooms over four connections, all committing to the same table.
  clients = Array.from({ length: 4 }, () => new Redis(inject("redisUrl"), { maxRetriesPerRequest: 1 }));
  rooms = clients.map((redis) => createWaitingRoom({ redis, secret: SECRET, lottery: store }));
});

afterAll(() => {
  for (const c of clients) c.disconnect();
  dynamo.destroy();
});

describe("the lottery commitment in DynamoDB", () => {
  it("is written once, whatever many configures race on several gateways", async () => {
    const evt = freshEventId("commit");
    const results = await Promise.all(
      Array.from({ length: 24 }, (_, i) => rooms[i % rooms.length]!.configure(evt, settings)),
    );
    const commitments = new Set(results.map((r) => ok(r).info.lottery.commitment));
    expect(commitments.size).toBe(1);
    const stored = await store.read(evt);
    expect(stored).not.toBeNull();
    expect(commitmentOf(stored!.seed)).toBe(stored!.commitment);
    expect([...commitments][0]).toBe(stored!.commitment);
    // Redis does not hold the seed before the draw: whoever reads it learns nothing of the order.
    expect(await clients[0]!.hget(`wr:{evt:${evt}}:room`, "seed")).toBe("");
  });

  it("the draw reveals the committed seed; the published pre-queue verifies, and fails once tampered with", async () => {
    const evt = freshEventId("draw");
    const stored = ok(await rooms[0]!.configure(evt, { ...settings, admitPerSecond: 0 }));
    const fanIds = Array.from({ length: 3_000 }, (_, i) => `fan-${i}`);
    await Promise.all(fanIds.map((fanId, i) => rooms[i % rooms.length]!.join(evt, fanId)));
    // Every gateway asks to open at once: one draw, one order.
    const opened = await Promise.all(rooms.map((r) => r.openNow(evt)));
    const lotteries = opened.map((o) => ok(o).info.lottery);
    expect(new Set(lotteries.map((l) => l.seed)).size).toBe(1);
    const lottery = lotteries[0]!;
    expect(lottery.seed).toBe((await store.read(evt))!.seed);
    expect(lottery.commitment).toBe(stored.info.lottery.commitment);
    expect(lottery.size).toBe(3_000);
    const published = async () => {
      const out: string[] = [];
      for (let offset = 0; ; offset += 1_000) {
        const page = ok(await rooms[1]!.lotteryPage(evt, { offset, limit: 1_000 }));
        out.push(...page.fanIds!);
        if (page.fanIds!.length < 1_000) return out;
      }
    };
    const honest = await published();
    const draw = {
      commitment: lottery.commitment,
      seed: lottery.seed!,
      membershipHash: lottery.membershipHash!,
      size: lottery.size!,
    };
    expect(verifyDraw({ ...draw, entries: honest.map(entryOf) }).pass).toBe(true);
    expect(honest).toEqual(lotteryOrder(lottery.seed!, fanIds));
    // rooms[2]'s view shows the draw (one that has not yet answers its pre-queued fans with their
    // arrival numbers, the draw pending, for up to a refresh).
    await drawnEverywhere([rooms[2]!], evt, fanIds.slice(0, 200));
    const statuses = await Promise.all(fanIds.slice(0, 200).map((fanId) => rooms[2]!.statusOf(evt, fanId)));
    for (const s of statuses) expect(ok(s).place.position).toBe(honest.indexOf(ok(s).fanId) + 1);

    // Tampered with in Redis after the close: a fan slipped in at place 1.
    await clients[0]!.zadd(`wr:{evt:${evt}}:pre`, 0.5, "slipped-in");
    const tampered = await published();
    expect(tampered[0]).toBe("slipped-in");
    expect(verifyDraw({ ...draw, entries: tampered.map(entryOf) }).pass).toBe(false);
    // Or two fans swapped.
    await clients[0]!.zrem(`wr:{evt:${evt}}:pre`, "slipped-in");
    await clients[0]!.zadd(`wr:{evt:${evt}}:pre`, 1, honest[1]!, 2, honest[0]!);
    expect(verifyDraw({ ...draw, entries: (await published()).map(entryOf) }).pass).toBe(false);
  });

  it("an empty pre-queue reveals the committed seed at the open too, with the hash of no entries", async () => {
    const evt = freshEventId("empty");
    ok(await rooms[0]!.configure(evt, settings));
    const opened = await Promise.all(rooms.map((r) => r.openNow(evt)));
    const stored = await store.read(evt);
    for (const o of opened) {
      expect(ok(o).info.lottery).toMatchObject({ seed: stored!.seed, size: 0 });
    }
    const lottery = ok(await rooms[1]!.info(evt)).info.lottery;
    expect(verifyDraw({ ...lottery, entries: [] } as Parameters<typeof verifyDraw>[0]).checks).toEqual({
      commitment: true,
      entriesWellFormed: true,
      size: true,
      membershipHash: true,
      order: true,
    });
  });

  it("a room Redis lost comes back with the committed seed, not a new one", async () => {
    const evt = freshEventId("wipe");
    const first = ok(await rooms[0]!.configure(evt, settings)).info.lottery.commitment;
    ok(await rooms[0]!.remove(evt));
    expect(await clients[0]!.exists(`wr:{evt:${evt}}:room`)).toBe(0);
    const again = ok(await rooms[1]!.configure(evt, settings));
    expect(again.created).toBe(true);
    expect(again.info.lottery.commitment).toBe(first);
  });

  it("a room restored from the stored event takes the committed seed", async () => {
    const evt = freshEventId("restore");
    const restoring = createWaitingRoom({
      redis: clients[2]!,
      secret: SECRET,
      lottery: store,
      restore: async () => ({ ...settings, paused: false }),
    });
    const first = ok(await restoring.configure(evt, settings)).info.lottery.commitment;
    ok(await restoring.remove(evt));
    // Many fans ask at once: one restore, the same commitment for every answer.
    const infos = await Promise.all(Array.from({ length: 10 }, () => restoring.info(evt)));
    expect(new Set(infos.map((i) => ok(i).info.lottery.commitment))).toEqual(new Set([first]));
  });

  it("without a committer the seed is Redis's alone (a wipe draws a new one)", async () => {
    const evt = freshEventId("alone");
    const alone = createWaitingRoom({ redis: clients[3]!, secret: SECRET });
    const first = ok(await alone.configure(evt, settings)).info.lottery.commitment;
    ok(await alone.remove(evt));
    expect(ok(await alone.configure(evt, settings)).info.lottery.commitment).not.toBe(first);
    expect(await store.read(evt)).toBeNull();
  });
});
