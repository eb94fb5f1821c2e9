/**
 * The fan shards of one event's line (src/waiting-room/fan-shards.ts, lua/waiting-room/beats-1.lua):
 * the slot arithmetic against a real Redis Cluster's own (CLUSTER KEYSLOT), the K shards spread
 * evenly over the masters of a cluster whose masters hold contiguous slot ranges (as the starter
 * makes it), and the heartbeat script's four modes on one server and on that cluster, the calls
 * really in flight at once.
 */
import type { Cluster, Redis } from "ioredis";
import { Redis as RedisClientClass } from "ioredis";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { halfSipHash24, halfSipHashString, halfSipKeyFromHex } from "../../src/halfsiphash.js";
import {
  byFanShard,
  CLUSTER_SLOTS,
  createFanBeats,
  fanShardKeys,
  fanShardOf,
  fanShardTags,
  keySlot,
  newFanShardKey,
  placeFanShards,
} from "../../src/waiting-room/fan-shards.js";
import { clusterClient, ownerOf, type SpawnedRedisCluster, spawnRedisCluster } from "../support/redis-cluster.js";
import { uniqueId } from "../gateway/harness.js";
import { registerScripts } from "../../src/redis/scripts.js";
import { lineKeys, waitingRoomKeys } from "../../src/waiting-room/keys.js";
import { waitingRoomScripts } from "../../src/waiting-room/scripts.js";
import { createWaitingRoom, type WaitingRoom } from "../../src/waiting-room/index.js";
import { sweepFanShards } from "../../src/waiting-room/fan-sweep.js";
import { eventId as roomEventId, fans, gateways, ok, SECRET } from "./helpers.js";

let cluster: SpawnedRedisCluster;
let onCluster: Cluster;
let single: Redis;

beforeAll(async () => {
  cluster = await spawnRedisCluster({ masters: 3 });
  onCluster = await clusterClient(cluster);
  single = new RedisClientClass(inject("redisUrl"), { maxRetriesPerRequest: 1 });
}, 120_000);

afterAll(async () => {
  onCluster?.disconnect();
  single?.disconnect();
  await cluster?.close();
});

/** A line open since a second ago, admitting nobody (rate 0), that loses a place after 3 s unpolled. */
async function openPausedLine(room: WaitingRoom, evt: string) {
  ok(
    await room.configure(evt, {
      onSaleAt: new Date(Date.now() - 1_000).toISOString(),
      admitPerSecond: 0,
      maxActive: 10,
      sessionSeconds: 60,
      abandonSeconds: 3,
    }),
  );
}

describe("fan shards: keys and slots", () => {
  it("computes every key's slot as Redis does (hash tags, empty tags, unicode)", async () => {
    const keys = [
      "plain",
      "wr:{evt:demo}:room",
      "{}empty-tag",
      "a{}{b}",
      "{user1000}.following",
      "foo{bar}{zap}",
      "ümlaut{fän}",
      ...Array.from({ length: 200 }, (_, i) => `k${i}:${uniqueId("x")}`),
    ];
    const theirs = await Promise.all(keys.map((key) => onCluster.cluster("KEYSLOT", key)));
    expect(keys.map(keySlot)).toEqual(theirs.map(Number));
  });

  it("puts shard k's slot in the k-th K-th of the slots, so 12 shards are 4 per master of 3", async () => {
    const tags = fanShardTags("demo", 12);
    expect(new Set(tags).size).toBe(12);
    tags.forEach((tag, k) => {
      const slot = keySlot(`{${tag}}`);
      expect(slot).toBeGreaterThanOrEqual(Math.floor((k * CLUSTER_SLOTS) / 12));
      expect(slot).toBeLessThan(Math.floor(((k + 1) * CLUSTER_SLOTS) / 12));
    });
    const owners = await Promise.all(fanShardKeys("demo", 12).map((k) => ownerOf(onCluster, k.beats)));
    const perMaster = new Map<string, number>();
    for (const owner of owners) perMaster.set(owner, (perMaster.get(owner) ?? 0) + 1);
    expect([...perMaster.values()]).toEqual([4, 4, 4]);
    // The same tags in every process, and other events get their own.
    expect(fanShardTags("demo", 12)).toEqual(tags);
    expect(fanShardTags("other", 12).some((t) => tags.includes(t))).toBe(false);
  });

  it("places a new room's shards off the event's own master, evenly over the others; one master or no map: the even split", () => {
    // Six masters with contiguous ranges, as the starter makes them.
    const ownerOf = (slot: number) => `m${Math.floor((slot * 6) / CLUSTER_SLOTS)}`;
    for (const evt of ["demo", "other", "e_1234567890"]) {
      const eventMaster = ownerOf(keySlot(`{evt:${evt}}`));
      const tags = placeFanShards(evt, 12, ownerOf);
      expect(new Set(tags).size).toBe(12);
      const perMaster = new Map<string, number>();
      for (const tag of tags)
        perMaster.set(ownerOf(keySlot(`{${tag}}`)), (perMaster.get(ownerOf(keySlot(`{${tag}}`))) ?? 0) + 1);
      expect(perMaster.has(eventMaster)).toBe(false);
      // 12 over the other 5: two or three each
      expect([...perMaster.values()].sort()).toEqual([2, 2, 2, 3, 3]);
    }
    expect(placeFanShards("demo", 12, () => "only")).toEqual(fanShardTags("demo", 12));
    expect(placeFanShards("demo", 12)).toEqual(fanShardTags("demo", 12));
  });

  it("spreads fans evenly over the shards, with the room's key and without", () => {
    const fans = Array.from({ length: 24_000 }, (_, i) => `fan-${i}-${(i * 7919) % 1000}`);
    const key = halfSipKeyFromHex(newFanShardKey());
    for (const shardOf of [(f: string) => fanShardOf(f, 12), (f: string) => fanShardOf(f, 12, key)]) {
      const groups = byFanShard(fans, shardOf);
      const sizes = [...groups.values()].map((g) => g.length);
      expect(groups.size).toBe(12);
      for (const size of sizes) expect(Math.abs(size - 2_000)).toBeLessThan(200);
    }
    expect(() => fanShardTags("demo", 0)).toThrow(RangeError);
    expect(() => fanShardTags("bad id!", 12)).toThrow(RangeError);
  });

  it("hashes under the key as the HalfSipHash-2-4 reference does (its 32-bit test vectors)", () => {
    // The reference's vectors (github.com/veorq/SipHash, vectors.h vectors_hsip32): key bytes
    // 0..7, input bytes 0..i-1, the output read little-endian. Lengths 0-22 cover every tail length.
    const vectors = [
      0x5b9f35a9, 0xb85a4727, 0x03a662fa, 0x04e7fe8a, 0x89466e2a, 0x69b6fac5, 0x23fc6358, 0xc563cf8b, 0x8f84b8d0,
      0x79e706f8, 0x3479b094, 0x50300808, 0x2f87f057, 0xff63e677, 0x7cf8ffd6, 0x972bfe74, 0x84acb5d9, 0x5b6474c4,
      0x9b8d5b46, 0x87e3ef7b, 0x45104de3, 0xb3623f61, 0xfe67f370,
    ];
    const key = halfSipKeyFromHex("0001020304050607");
    const input = Uint8Array.from({ length: 64 }, (_, i) => i);
    expect(vectors.map((_, i) => halfSipHash24(key, input, i))).toEqual(vectors);
    // A string is hashed as its UTF-8 bytes, ASCII or not.
    expect(halfSipHashString(key, "fan-é€")).toBe(halfSipHash24(key, Buffer.from("fan-é€", "utf8")));
    expect(halfSipHashString(key, "\u0000\u0001\u0002")).toBe(vectors[3]);
    expect(() => halfSipKeyFromHex("00010203")).toThrow(RangeError);
  });

  it("fans aimed at one shard by the public hash spread over every shard of a room with a key", () => {
    // An attacker who chooses fan ids on an event whose `fanIds` is `any` can compute FNV-1a and
    // join only ids whose FNV shard is 0; the room's shard key is not theirs to know.
    const aimed: string[] = [];
    for (let i = 0; aimed.length < 12_000; i++) if (fanShardOf(`bot-${i}`, 12) === 0) aimed.push(`bot-${i}`);
    const roomKey = halfSipKeyFromHex(newFanShardKey());
    const keyed = byFanShard(aimed, (f) => fanShardOf(f, 12, roomKey));
    expect(keyed.size).toBe(12);
    for (const group of keyed.values()) expect(Math.abs(group.length - 1_000)).toBeLessThan(150);
    // Two rooms, two keys: the same fan lands on unrelated shards.
    const [a, b] = [halfSipKeyFromHex(newFanShardKey()), halfSipKeyFromHex(newFanShardKey())];
    const same = aimed.slice(0, 1_200).filter((f) => fanShardOf(f, 12, a) === fanShardOf(f, 12, b)).length;
    expect(same).toBeGreaterThan(50);
    expect(same).toBeLessThan(160);
  });
});

describe.each([
  ["one server", () => single as Redis | Cluster],
  ["a 3-master cluster", () => onCluster as Redis | Cluster],
])("fan beats on %s", (_name, client) => {
  it("join records every fan, keep records those present and names the absent, at once from many callers", async () => {
    const beats = createFanBeats(client(), { shards: 6 });
    const eventId = uniqueId("fb");
    const fans = Array.from({ length: 3_000 }, (_, i) => `f${i}`);
    // 30 joins of 100 fans in flight at once.
    await Promise.all(Array.from({ length: 30 }, (_, j) => beats.joined(eventId, fans.slice(j * 100, j * 100 + 100))));
    const strangers = ["s1", "s2", "s3"];
    const polls = await Promise.all(
      Array.from({ length: 10 }, (_, j) =>
        beats.polled(eventId, [...fans.slice(j * 300, j * 300 + 300), ...strangers]),
      ),
    );
    for (const missing of polls) expect(missing.sort()).toEqual(strangers);
    // A keep never adds: the strangers are still absent.
    expect((await beats.polled(eventId, strangers)).sort()).toEqual(strangers);
    const counts = await Promise.all(fanShardKeys(eventId, 6).map((k) => client().zcard(k.beats)));
    expect(counts.reduce((a, b) => a + b, 0)).toBe(3_000);
  });

  it("stale lists the fans not seen for the abandon time, never before the clock's start; forget spares a fresh beat", async () => {
    const beats = createFanBeats(client(), { shards: 3 });
    const eventId = uniqueId("fb");
    const fans = Array.from({ length: 60 }, (_, i) => `g${i}`);
    await beats.joined(eventId, fans);
    await new Promise((resolve) => setTimeout(resolve, 300));
    // Half keep polling.
    const keepers = fans.filter((_, i) => i % 2 === 0);
    expect(await beats.polled(eventId, keepers)).toEqual([]);
    const stale = (
      await Promise.all(
        [0, 1, 2].map((shard) => beats.stale(eventId, shard, { abandonMs: 200, startMs: 0, limit: 1_000 })),
      )
    ).flat();
    expect(stale.map((s) => s.fanId).sort()).toEqual(fans.filter((_, i) => i % 2 === 1).sort());
    // The clock's start (a draw just now) holds everyone back.
    const held = await Promise.all(
      [0, 1, 2].map((shard) => beats.stale(eventId, shard, { abandonMs: 200, startMs: Date.now(), limit: 1_000 })),
    );
    expect(held.flat()).toEqual([]);
    // One stale fan polls again (a rejoin) between the sweep's read and its forget: kept.
    const back = stale[0]!;
    await beats.joined(eventId, [back.fanId]);
    let removed = 0;
    for (const shard of [0, 1, 2]) {
      removed += await beats.forget(
        eventId,
        shard,
        stale.filter((s) => fanShardOf(s.fanId, 3) === shard),
      );
    }
    expect(removed).toBe(stale.length - 1);
    expect(await beats.polled(eventId, [back.fanId])).toEqual([]);
    expect(
      (
        await beats.polled(
          eventId,
          stale.slice(1).map((s) => s.fanId),
        )
      ).length,
    ).toBe(stale.length - 1);
  });
});

describe("the sweep's verdicts on the event's slot (abandon-8.lua)", () => {
  it("gives up stale places ahead of the cursor, and spares a recent beat, a place taken after the sweep began, and everyone before the draw", async () => {
    // abandon-8.lua judges the records on the event's slot (a room whose records live on the fan
    // shards gives up on the shards: fan-records.test.ts)
    const gw = gateways(1, inject("redisUrl"), { lineCache: false, onEventSlot: true });
    try {
      const evt = roomEventId("sweep");
      await openPausedLine(gw.room, evt);
      const ids = fans(6, "sw");
      // All six join at once (the line is open and paused at rate 0: nobody is admitted).
      await Promise.all(ids.map((fanId) => gw.room.join(evt, fanId).then(ok)));
      const raw = gw.clients[0]!;
      const k = waitingRoomKeys(evt);
      const tail = Number(await raw.hget(k.room, "tail"));
      expect(tail).toBe(6);
      const posOf = async (fanId: string) => Number((await raw.hget(k.fans, fanId))!.split("|")[1]);
      const byPlace = new Map<number, string>();
      for (const fanId of ids) byPlace.set(await posOf(fanId), fanId);
      const run = registerScripts(raw, waitingRoomScripts);

      // Within abandonSeconds of the open nobody is given up, whatever the beats say.
      const early = await run<unknown[]>("abandon", lineKeys(k), [tail, "1", byPlace.get(1)!, 0]);
      expect(early[1]).toBe("0");
      await new Promise((resolve) => setTimeout(resolve, 3_300));

      // Places 1-3 stale (beat 0), place 4 with a recent beat, place 6 reported stale but past the
      // tail the sweep read (tail 5: it joined after the sweep began).
      const verdicts = [1, 2, 3].flatMap((p) => [byPlace.get(p)!, 0]);
      verdicts.push(byPlace.get(4)!, Date.now(), byPlace.get(6)!, 0);
      const reply = await run<unknown[]>("abandon", lineKeys(k), [5, "1", ...verdicts]);
      expect(reply[0]).toBe("abandoned");
      expect(reply[1]).toBe("3");
      expect(Number(reply[3])).toBeGreaterThan(0);
      // The shard may forget the three given up, not the two spared (their beats stay for later).
      expect(reply[4]).toBe("done");
      expect((reply[5] as string[]).sort()).toEqual([1, 2, 3].map((p) => byPlace.get(p)!).sort());
      expect(await raw.hget(k.room, "sweptAt")).toBe(String(reply[3]));
      for (const p of [1, 2, 3]) expect((await raw.hget(k.fans, byPlace.get(p)!))!.startsWith("x|")).toBe(true);
      for (const p of [4, 5, 6]) expect((await raw.hget(k.fans, byPlace.get(p)!))!.startsWith("w|")).toBe(true);
      expect((await raw.zrange(k.gone, "0", "-1")).map(Number)).toEqual([1, 2, 3]);
      expect(Number(await raw.hget(k.room, "abandoned"))).toBe(3);
      // Again: nothing more (those records are no longer waiting), and those three are done.
      const again = await run<unknown[]>("abandon", lineKeys(k), [5, "1", ...verdicts]);
      expect(again[1]).toBe("0");
      expect((again[5] as string[]).sort()).toEqual([1, 2, 3].map((p) => byPlace.get(p)!).sort());

      // Before the draw (the pre-queue open): nobody, and no sweep recorded.
      const pre = roomEventId("sweeppre");
      ok(
        await gw.room.configure(pre, {
          onSaleAt: new Date(Date.now() + 600_000).toISOString(),
          admitPerSecond: 10,
          maxActive: 10,
          sessionSeconds: 60,
          abandonSeconds: 3,
        }),
      );
      ok(await gw.room.join(pre, "early"));
      const kp = waitingRoomKeys(pre);
      expect(await run<unknown[]>("abandon", lineKeys(kp), [1, "1", "early", 0])).toEqual([
        "abandoned",
        "0",
        "sweptAt",
        "0",
        "done",
        [],
      ]);
      expect((await raw.hget(kp.fans, "early"))!.startsWith("p|")).toBe(true);
    } finally {
      gw.close();
    }
  }, 30_000);
});

/** A paused line on one server whose `n` fans joined as the wired line joins them (beats, then places), over 3 shards. */
async function sweptLine(name: string, n: number, prefix: string) {
  const room = createWaitingRoom({ redis: single, secret: SECRET, lineCache: false });
  const beats = createFanBeats(single, { shards: 3 });
  const evt = roomEventId(name);
  await openPausedLine(room, evt);
  const ids = fans(n, prefix);
  await beats.joined(evt, ids);
  await Promise.all(ids.map((fanId) => room.join(evt, fanId).then(ok)));
  return { room, beats, evt, ids };
}

describe("a sweep of the fan shards (sweepFanShards)", () => {
  it("a shard that cannot be read: the other shards' leavers are given up, and the sweep is not recorded", async () => {
    const { room, beats, evt, ids } = await sweptLine("fsunread", 24, "ur");
    try {
      const k = waitingRoomKeys(evt);
      const before = await sweepFanShards(single, beats, evt);
      expect(before).toMatchObject({ behind: false });
      const recorded = Number(await single.hget(k.room, "sweptAt"));
      await new Promise((resolve) => setTimeout(resolve, 3_300));
      // Shard 0 fails every call (its master failing over).
      const broken = fanShardKeys(evt, 3)[0]!.beats;
      await single.set(broken, "not a zset");
      const onBroken = ids.filter((fanId) => fanShardOf(fanId, 3) === 0);
      expect(onBroken.length).toBeGreaterThan(0);
      const swept = await sweepFanShards(single, beats, evt);
      expect(swept).toMatchObject({ abandoned: ids.length - onBroken.length, behind: true, sweptAt: 0 });
      expect(Number(await single.hget(k.room, "sweptAt"))).toBe(recorded);
      const records = await single.hmget(k.fans, ...ids);
      for (const [i, fanId] of ids.entries()) {
        expect(records[i]?.slice(0, 2), fanId).toBe(onBroken.includes(fanId) ? "w|" : "x|");
      }
      await single.del(broken);
    } finally {
      await room.close();
    }
  }, 30_000);

  it("a backlog bigger than a page: a round that is behind records no sweep; reading on catches up and records it", async () => {
    const { room, beats, evt, ids } = await sweptLine("fsbacklog", 30, "bl");
    try {
      const k = waitingRoomKeys(evt);
      // A complete sweep before anyone lapsed: recorded.
      const before = await sweepFanShards(single, beats, evt, { perShard: 2 });
      expect(before).toMatchObject({ stale: 0, rounds: 1, behind: false });
      const recorded = Number(await single.hget(k.room, "sweptAt"));
      expect(recorded).toBe(before!.sweptAt);
      // Everyone stops; after the abandon time, one round of 2 a shard leaves 24 unread.
      await new Promise((resolve) => setTimeout(resolve, 3_300));
      const one = await sweepFanShards(single, beats, evt, { perShard: 2, budgetMs: 0 });
      expect(one).toMatchObject({ stale: 6, abandoned: 6, forgotten: 6, rounds: 1, behind: true, sweptAt: 0 });
      expect(Number(await single.hget(k.room, "sweptAt"))).toBe(recorded);
      // With a budget, rounds follow at once until no shard fills its page; then it is recorded.
      const rest = await sweepFanShards(single, beats, evt, { perShard: 2 });
      expect(rest).toMatchObject({ stale: 24, abandoned: 24, forgotten: 24, behind: false });
      expect(rest!.rounds).toBeGreaterThanOrEqual(5);
      expect(rest!.sweptAt).toBeGreaterThan(recorded);
      expect(Number(await single.hget(k.room, "sweptAt"))).toBe(rest!.sweptAt);
      const records = await single.hmget(k.fans, ...ids);
      expect(records.every((r) => r?.startsWith("x|"))).toBe(true);
    } finally {
      await room.close();
    }
  }, 30_000);

  it.each([
    ["one server", () => single as Redis | Cluster],
    ["a 3-master cluster", () => onCluster as Redis | Cluster],
  ])(
    "on %s: the fans who stopped lose their places, those who poll keep them, a second sweep finds nothing",
    async (_n, client) => {
      const room = createWaitingRoom({ redis: client(), secret: SECRET, lineCache: false });
      try {
        const beats = createFanBeats(client(), { shards: 6 });
        const evt = roomEventId("fsweep");
        await openPausedLine(room, evt);
        const ids = fans(40, "fs");
        // Joins as the wired line will make them: the beats first, then the places; all at once.
        await beats.joined(evt, ids);
        await Promise.all(ids.map((fanId) => room.join(evt, fanId).then(ok)));
        // Nothing stale yet; the sweep is still recorded (a sharded line admits only after one).
        const first = await sweepFanShards(client(), beats, evt);
        expect(first).toMatchObject({ stale: 0, abandoned: 0, forgotten: 0 });
        expect(first!.sweptAt).toBeGreaterThan(0);
        // Half poll (through their shards) every half second; the others stop.
        const keepers = ids.filter((_, i) => i % 2 === 0);
        const leavers = ids.filter((_, i) => i % 2 === 1);
        for (let t = 0; t < 7; t++) {
          await new Promise((resolve) => setTimeout(resolve, 500));
          expect(await beats.polled(evt, keepers)).toEqual([]);
        }
        const swept = await sweepFanShards(client(), beats, evt);
        expect(swept).toMatchObject({ stale: 20, abandoned: 20, forgotten: 20 });
        expect(swept!.sweptAt).toBeGreaterThan(0);
        // Their beats are gone from the shards (a poll of theirs is named missing), the keepers' stay.
        expect((await beats.polled(evt, leavers)).sort()).toEqual([...leavers].sort());
        expect(await beats.polled(evt, keepers)).toEqual([]);
        // Read raw: the line's own tick (stats, a poll) still sweeps `seen`, where nobody polled here.
        const k = waitingRoomKeys(evt);
        expect(Number(await client().hget(k.room, "abandoned"))).toBe(20);
        const records = await client().hmget(k.fans, ...ids);
        for (const [i, fanId] of ids.entries()) {
          expect(records[i]!.startsWith(i % 2 === 0 ? "w|" : "x|"), fanId).toBe(true);
        }
        expect(await sweepFanShards(client(), beats, evt)).toMatchObject({ stale: 0, abandoned: 0 });
      } finally {
        await room.close();
      }
    },
    60_000,
  );
});
