/**
 * The draw's beacon is a drand round (issue 29 item 1): the event names a chain (a key pair made
 * here signs its rounds); the draw takes only the round first published at or after the close,
 * only with a signature that verifies under the chain's key; it waits for it however long; a
 * dishonest operator who tries values, other rounds or another key, or withholds the round, gets
 * no other order. Real Redis, the test DynamoDB; nothing mocked.
 */
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { createDocumentClient, createDynamoClient } from "../../src/dynamodb/client.js";
import { ensureTable } from "../../src/dynamodb/table.js";
import { drawKey, entryOf, verifyDraw } from "../../src/lottery/draw.js";
import { randomnessOf, roundAt } from "../../src/lottery/drand.js";
import { createLotteryStore, type LotteryStore } from "../../src/lottery/store.js";
import { createWaitingRoom, lotteryOrder, type WaitingRoom } from "../../src/waiting-room/index.js";
import { testChain } from "../support/drand-chain.js";
import { eventId as freshEventId, ok, SECRET, until } from "../waiting-room/helpers.js";

const settings = (extra: object = {}) => ({
  onSaleAt: Date.now() + 3_600_000,
  admitPerSecond: 0,
  maxActive: 10,
  sessionSeconds: 60,
  ...extra,
});

let dynamo: ReturnType<typeof createDynamoClient>;
let store: LotteryStore;
let clients: Redis[];
let rooms: WaitingRoom[];

beforeAll(async () => {
  dynamo = createDynamoClient({ endpoint: inject("dynamoEndpoint"), region: "us-east-1" });
  const tableName = `beacon_${freshEventId("t")}`;
  await ensureTable(dynamo, tableName);
  store = createLotteryStore({ doc: createDocumentClient(dynamo), tableName });
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

const drawnLottery = (evt: string, timeout = 10_000) =>
  until(async () => {
    const l = ok(await rooms[3]!.info(evt)).info.lottery;
    return l.seed === undefined ? undefined : l;
  }, timeout);

describe("the lottery beacon: a drand round", () => {
  it("is announced before the close, awaited after it, and taken only as the close's round with its signature", async () => {
    const t = testChain();
    const evt = freshEventId("src");
    ok(await rooms[0]!.configure(evt, settings({ drand: t.chain })));
    const fanIds = await preQueue(evt, 300);
    const before = ok(await rooms[1]!.info(evt)).info;
    expect(before.lottery.drand).toMatchObject({ ...t.chain, round: roundAt(t.chain, Date.parse(before.onSaleAt)) });
    // Before the close no round is taken, not even the announced one.
    expect(await rooms[2]!.recordBeacon(evt, t.sign(before.lottery.drand!.round))).toMatchObject({
      ok: false,
      reason: "lottery_open",
    });

    const opened = ok(await rooms[0]!.openNow(evt));
    expect(opened.info.lottery.seed).toBeUndefined();
    const info = ok(await rooms[1]!.info(evt)).info;
    const round = roundAt(t.chain, Date.parse(info.onSaleAt));
    expect(info.lottery).toMatchObject({ awaitingBeacon: true, drand: { round } });
    expect(ok(await rooms[1]!.statusOf(evt, fanIds[0]!)).place.status).toBe("prequeue");

    const beacon = t.sign(round);
    const recorded = await rooms[2]!.recordBeacon(evt, beacon);
    expect(recorded).toEqual({ ok: true, beacon: randomnessOf(beacon.signature), round: beacon });
    // The same round again is a no-op.
    expect(await rooms[3]!.recordBeacon(evt, beacon)).toMatchObject({ ok: true });

    const lottery = await drawnLottery(evt);
    expect(lottery).toMatchObject({ beacon: randomnessOf(beacon.signature), beaconRound: beacon, size: 300 });
    const entries = await published(rooms[0]!, evt);
    const check = verifyDraw({
      ...lottery,
      seed: lottery.seed!,
      membershipHash: lottery.membershipHash!,
      size: 300,
      entries,
    });
    expect(check.pass).toBe(true);
    const sealed = (await store.read(evt))!.draw!;
    expect(sealed).toMatchObject({ round, beacon: randomnessOf(beacon.signature), size: 300 });
    expect(sealed.drawKey).toBe(drawKey(lottery.seed!, lottery.membershipHash!, randomnessOf(beacon.signature)));
    // (rooms[0]'s view may show the draw pending for a refresh after it: its fans are told their
    // arrival numbers until then, line-view.ts)
    const statuses = await until(async () => {
      const polled = (await Promise.all(fanIds.slice(0, 30).map((fanId) => rooms[0]!.statusOf(evt, fanId)))).map(ok);
      return polled.every((p) => p.place.status !== "prequeue") ? polled : undefined;
    });
    for (const s of statuses) expect(s.place.position).toBe(entries.indexOf(entryOf(s.fanId)) + 1);
    expect(await rooms[0]!.recordBeacon(evt, t.sign(round + 1))).toMatchObject({ ok: false });
  }, 60_000);

  it("a dishonest operator can neither pick the order by trying beacons nor get a fallback draw by withholding", async () => {
    const t = testChain();
    const impostor = testChain();
    const evt = freshEventId("dishonest");
    ok(await rooms[0]!.configure(evt, settings({ drand: t.chain })));
    const fanIds = await preQueue(evt, 12);
    const target = fanIds[7]!;
    // Nor can a close be set in the past (its round would be published already, chosen by its date).
    expect(await rooms[0]!.configure(evt, settings({ onSaleAt: Date.now() - 60_000 }))).toMatchObject({
      ok: false,
      reason: "invalid",
    });
    // The close was 20 minutes ago, twice the old no-beacon fallback (10 minutes): the room's
    // clock fields are moved back rather than waiting.
    ok(await rooms[0]!.openNow(evt));
    const closedAt = Date.now() - 20 * 60_000;
    await clients[0]!.hset(`wr:{evt:${evt}}:room`, "onSaleAt", closedAt, "openedAt", closedAt);
    const round = roundAt(t.chain, closedAt);
    const seed = (await store.read(evt))!.seed; // the operator reads the seed from DynamoDB

    // Withheld: however often the draw is asked for, it does not happen without the round.
    for (let i = 0; i < 5; i++) {
      const l = ok(await rooms[i % rooms.length]!.info(evt)).info.lottery;
      expect(l.seed).toBeUndefined();
      expect(l.awaitingBeacon).toBe(true);
      expect(ok(await rooms[0]!.statusOf(evt, target)).place.status).toBe("prequeue");
    }
    expect(ok(await rooms[0]!.stats(evt)).stats.drawing).toBe(true);
    expect((await store.read(evt))!.draw).toBeUndefined();

    // Tries: later and earlier rounds (their values are published too), another key's signature of
    // the round, junk; each would give another order, none is taken.
    const tries = [
      t.sign(round + 1),
      t.sign(round + 2),
      t.sign(round - 1),
      impostor.sign(round),
      { round, signature: t.sign(round + 1).signature },
      { round, signature: "00".repeat(48) },
      { round, signature: `${t.sign(round).signature.slice(0, 94)}00` },
    ];
    const answers = await Promise.all(tries.map((b, i) => rooms[i % rooms.length]!.recordBeacon(evt, b)));
    for (const a of answers) expect(a.ok, JSON.stringify(a)).toBe(false);
    expect(answers.slice(0, 3).map((a) => !a.ok && a.reason)).toEqual(["wrong_round", "wrong_round", "wrong_round"]);
    for (const a of answers.slice(3)) expect(a).toMatchObject({ ok: false, reason: "invalid_beacon" });
    expect((await store.read(evt))!.beacon).toBeUndefined();

    // Only the round's own signature is taken, and the order is the one it gives.
    const honest = t.sign(round);
    ok(await rooms[1]!.recordBeacon(evt, honest));
    const lottery = await drawnLottery(evt);
    expect(lottery.beacon).toBe(randomnessOf(honest.signature));
    const order = lotteryOrder(seed, fanIds, randomnessOf(honest.signature));
    // A gateway's cached view may show the draw pending for a refresh after it (line-view.ts): its
    // pre-queued fans are told their arrival numbers until then.
    const positions = await until(async () => {
      const places = await Promise.all(fanIds.map(async (f) => ok(await rooms[2]!.statusOf(evt, f)).place));
      return places.every((p) => p.status !== "prequeue") ? places.map((p) => p.position) : undefined;
    });
    for (const [i, f] of fanIds.entries()) expect(positions[i]).toBe(order.indexOf(f) + 1);
    // The tried values would each have drawn another order: the operator had choices and got none.
    const alternatives = tries.slice(0, 3).map((b) => lotteryOrder(seed, fanIds, randomnessOf(b.signature)));
    expect(alternatives.some((o) => o[0] !== order[0] || o.join() !== order.join())).toBe(true);
  }, 60_000);

  it("is named once: a PUT with another chain is refused, an event without one takes no beacon", async () => {
    const t = testChain();
    const evt = freshEventId("once");
    ok(await rooms[0]!.configure(evt, settings({ drand: t.chain })));
    const other = await rooms[1]!.configure(evt, settings({ drand: testChain().chain }));
    expect(other).toMatchObject({ ok: false, reason: "invalid" });
    expect((await store.read(evt))!.drandChain).toEqual(t.chain);

    const plain = freshEventId("plain");
    ok(await rooms[0]!.configure(plain, settings()));
    await preQueue(plain, 5);
    ok(await rooms[0]!.openNow(plain));
    expect(await rooms[1]!.recordBeacon(plain, t.sign(10))).toEqual({ ok: false, reason: "no_beacon_chain" });
    const lottery = await drawnLottery(plain);
    expect(lottery.beacon).toBeUndefined();
    expect(lottery.drand).toBeUndefined();
    expect((await store.read(plain))!.draw).toMatchObject({ beacon: "", size: 5 });
  }, 30_000);

  it("the chained scheme: a round comes with its previous signature", async () => {
    const t = testChain({ scheme: "pedersen-bls-chained", period: 30 });
    const evt = freshEventId("chained");
    ok(await rooms[0]!.configure(evt, settings({ drand: t.chain })));
    await preQueue(evt, 20);
    ok(await rooms[0]!.openNow(evt));
    const round = ok(await rooms[1]!.info(evt)).info.lottery.drand!.round;
    const beacon = t.sign(round);
    expect(
      await rooms[1]!.recordBeacon(evt, { round, signature: beacon.signature, previousSignature: "11".repeat(96) }),
    ).toMatchObject({ ok: false, reason: "invalid_beacon" });
    ok(await rooms[2]!.recordBeacon(evt, beacon));
    const lottery = await drawnLottery(evt);
    expect(lottery).toMatchObject({ beacon: randomnessOf(beacon.signature), beaconRound: beacon });
  }, 30_000);
});
