/**
 * The draw's public beacon (issue 18 item 2), recorded in DynamoDB with the commitment, and the
 * draw sealed there: a named source makes the draw wait for its value (a bounded while); each
 * part is recorded once whatever many gateways race; nothing is taken after it could bias the
 * order; a beacon racing the draw is either in the sealed draw or refused. Real Redis, the test
 * DynamoDB; nothing mocked.
 */
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { createDocumentClient, createDynamoClient } from "../../src/dynamodb/client.js";
import { ensureTable } from "../../src/dynamodb/table.js";
import { drawKey, entryOf, verifyDraw } from "../../src/lottery/draw.js";
import { createLotteryStore, type LotteryStore } from "../../src/lottery/store.js";
import { createWaitingRoom, type WaitingRoom } from "../../src/waiting-room/index.js";
import { eventId as freshEventId, SECRET, ok, until } from "../waiting-room/helpers.js";

const settings = () => ({ onSaleAt: Date.now() + 3_600_000, admitPerSecond: 0, maxActive: 10, sessionSeconds: 60 });
const BEACON_WAIT_MS = 1_500;

let dynamo: ReturnType<typeof createDynamoClient>;
let store: LotteryStore;
let clients: Redis[];
let rooms: WaitingRoom[];

beforeAll(async () => {
  dynamo = createDynamoClient({ endpoint: inject("dynamoEndpoint"), region: "us-east-1" });
  const tableName = `beacon_${freshEventId("t")}`;
  await ensureTable(dynamo, tableName);
  store = createLotteryStore({ doc: createDocumentClient(dynamo), tableName, beaconWaitMs: BEACON_WAIT_MS });
  clients = Array.from({ length: 4 }, () => new Redis(inject("redisUrl"), { maxRetriesPerRequest: 1 }));
  rooms = clients.map((redis) => createWaitingRoom({ redis, secret: SECRET, lottery: store }));
});

afterAll(() => {
  for (const c of clients) c.disconnect();
  dynamo.destroy();
});

/** Every published entry, from Redis or the sealed pages, a page at a time. */
async function published(room: WaitingRoom, evt: string): Promise<string[]> {
  const out: string[] = [];
  for (let offset = 0; ; offset += 1_000) {
    const page = ok(await room.lotteryPage(evt, { offset, limit: 1_000 }));
    out.push(...page.entries);
    if (page.entries.length < 1_000) return out;
  }
}

async function preQueue(evt: string, count: number): Promise<string[]> {
  const fanIds = Array.from({ length: count }, (_, i) => `fan-${evt}-${i}`);
  await Promise.all(fanIds.map((fanId, i) => rooms[i % rooms.length]!.join(evt, fanId)));
  return fanIds;
}

describe("the lottery beacon", () => {
  it("a source named before the close holds the draw until its value comes; the draw takes it", async () => {
    const evt = freshEventId("src");
    ok(await rooms[0]!.configure(evt, settings()));
    const fanIds = await preQueue(evt, 400);
    const source = "drand quicknet round 12345678";
    expect(await rooms[1]!.recordBeacon(evt, { source })).toEqual({ ok: true, beaconSource: source });
    // The same again is a no-op; another source is refused with what is recorded.
    expect(await rooms[2]!.recordBeacon(evt, { source })).toMatchObject({ ok: true });
    expect(await rooms[3]!.recordBeacon(evt, { source: "another" })).toEqual({
      ok: false,
      reason: "beacon_conflict",
      beaconSource: source,
    });
    expect(ok(await rooms[0]!.info(evt)).info.lottery.beaconSource).toBe(source);

    // The close: the draw waits for the value, nobody in the pre-queue is placed yet.
    const opened = ok(await rooms[0]!.openNow(evt));
    expect(opened.info.lottery.seed).toBeUndefined();
    expect(ok(await rooms[1]!.statusOf(evt, fanIds[0]!)).place.status).toBe("prequeue");
    // Too late for a new source; the value of the one named is still taken.
    expect(await rooms[1]!.recordBeacon(evt, { source: "a later one" })).toMatchObject({
      ok: false,
      reason: "lottery_closed",
    });
    const value = "a".repeat(64);
    expect(await rooms[2]!.recordBeacon(evt, { value })).toEqual({ ok: true, beaconSource: source, beacon: value });

    const lottery = await until(async () => {
      const l = ok(await rooms[3]!.info(evt)).info.lottery;
      return l.seed === undefined ? undefined : l;
    });
    expect(lottery).toMatchObject({ beacon: value, beaconSource: source, size: 400 });
    const entries = await published(rooms[0]!, evt);
    const check = verifyDraw({
      commitment: lottery.commitment,
      seed: lottery.seed!,
      membershipHash: lottery.membershipHash!,
      beacon: value,
      size: lottery.size!,
      entries,
    });
    expect(check.pass).toBe(true);
    // Without the beacon the same inputs give another order: the value is in the key.
    expect(
      verifyDraw({
        ...check,
        ...lottery,
        seed: lottery.seed!,
        membershipHash: lottery.membershipHash!,
        beacon: "",
        size: 400,
        entries,
      }).pass,
    ).toBe(false);
    const sealed = (await store.read(evt))!.draw!;
    expect(sealed).toMatchObject({
      membershipHash: lottery.membershipHash,
      size: 400,
      beacon: value,
      beaconMissed: false,
    });
    expect(sealed.drawKey).toBe(drawKey(lottery.seed!, lottery.membershipHash!, value));
    // Every fan's place is the sealed order's.
    const statuses = await Promise.all(fanIds.slice(0, 50).map((fanId) => rooms[0]!.statusOf(evt, fanId)));
    for (const s of statuses) expect(ok(s).place.position).toBe(entries.indexOf(entryOf(ok(s).fanId)) + 1);
    // Sealed: nothing about the beacon changes any more.
    expect(await rooms[0]!.recordBeacon(evt, { value: "b".repeat(64) })).toMatchObject({
      ok: false,
      reason: "lottery_drawn",
    });
  }, 60_000);

  it("a value that never comes: the draw goes on without one after the wait, and says so", async () => {
    const evt = freshEventId("missed");
    ok(await rooms[0]!.configure(evt, settings()));
    await preQueue(evt, 50);
    ok(await rooms[0]!.recordBeacon(evt, { source: "drand quicknet round 1" }));
    expect(ok(await rooms[0]!.openNow(evt)).info.lottery.seed).toBeUndefined();
    const lottery = await until(async () => {
      const l = ok(await rooms[1]!.info(evt)).info.lottery;
      return l.seed === undefined ? undefined : l;
    }, 15_000);
    expect(lottery.beaconMissed).toBe(true);
    expect(lottery.beacon).toBeUndefined();
    expect((await store.read(evt))!.draw).toMatchObject({ beacon: "", beaconMissed: true, size: 50 });
    const entries = await published(rooms[2]!, evt);
    expect(
      verifyDraw({ ...lottery, seed: lottery.seed!, membershipHash: lottery.membershipHash!, size: 50, entries }).pass,
    ).toBe(true);
  }, 30_000);

  it("is recorded once however many gateways race; a value with no source is refused after the close", async () => {
    const evt = freshEventId("race");
    ok(await rooms[0]!.configure(evt, settings()));
    const values = Array.from({ length: 24 }, (_, i) => `value-${i}`);
    const results = await Promise.all(values.map((value, i) => rooms[i % rooms.length]!.recordBeacon(evt, { value })));
    const won = results.filter((r) => r.ok);
    expect(won).toHaveLength(1);
    const recorded = (await store.read(evt))!.beacon!;
    expect(values).toContain(recorded);
    for (const r of results.filter((x) => !x.ok))
      expect(r).toEqual({ ok: false, reason: "beacon_conflict", beacon: recorded });

    const late = freshEventId("late");
    ok(await rooms[0]!.configure(late, settings()));
    await preQueue(late, 3);
    ok(await rooms[0]!.openNow(late));
    expect(await rooms[1]!.recordBeacon(late, { value: "picked after seeing the membership" })).toMatchObject({
      ok: false,
    });
    expect((await store.read(late))!.beacon).toBeUndefined();
  }, 30_000);

  it("a value racing the draw is either in the sealed draw or refused, never taken and left out", async () => {
    for (let round = 0; round < 6; round++) {
      const evt = freshEventId(`drawrace${round}`);
      ok(await rooms[0]!.configure(evt, settings()));
      await preQueue(evt, 30);
      const value = `race-${round}`;
      const [beacons] = await Promise.all([
        Promise.all(rooms.map((r) => r.recordBeacon(evt, { value }))),
        Promise.all(rooms.map((r) => r.openNow(evt))),
      ]);
      const lottery = await until(async () => {
        const l = ok(await rooms[round % rooms.length]!.info(evt)).info.lottery;
        return l.seed === undefined ? undefined : l;
      });
      const sealed = (await store.read(evt))!.draw!;
      if (beacons.some((b) => b.ok)) expect(sealed.beacon).toBe(value);
      else expect(sealed.beacon).toBe("");
      for (const b of beacons) if (!b.ok) expect(["lottery_closed", "lottery_drawn"]).toContain(b.reason);
      expect(lottery.beacon ?? "").toBe(sealed.beacon);
      const entries = await published(rooms[0]!, evt);
      expect(
        verifyDraw({ ...lottery, seed: lottery.seed!, membershipHash: lottery.membershipHash!, size: 30, entries })
          .pass,
      ).toBe(true);
    }
  }, 60_000);
});
