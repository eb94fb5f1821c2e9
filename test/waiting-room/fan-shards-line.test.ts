/**
 * A line whose heartbeats live in fan shards (WAITING_ROOM_FAN_SHARDS; issue 28 goal 3, step 1):
 * nothing of a poll or a join's heartbeat on the event's slot, every lost place given up by the
 * sweep or by the fan's own next call, nobody admitted while the sweep lags, and a gateway that
 * dies with heartbeats owed costing nobody a place. On one server and on a 3-master cluster, calls
 * really in flight at once. (The whole waiting-room suite also runs in this mode:
 * TEST_FAN_SHARDS=12 npx vitest run test/waiting-room/.)
 */
import type { Cluster } from "ioredis";
import { Redis } from "ioredis";
import { describe, expect, it } from "vitest";
import { bucketShardOf, fanShardOf, shardBucketKey } from "../../src/waiting-room/fan-shards.js";
import type { WaitingRoom } from "../../src/waiting-room/index.js";
import { limitKey, waitingRoomKeys } from "../../src/waiting-room/keys.js";
import { BEATS_HELD_MS } from "../../src/waiting-room/line-view.js";
import { ownerOf } from "../support/redis-cluster.js";
import { monitorRedis } from "../support/redis-monitor.js";
import { eventId, fanOut, fans, lastBeat, ok, shardKeysOf, shardOfIn, sleep, until } from "./helpers.js";
import { singleAndCluster } from "./single-and-cluster.js";

const SHARDS = 6;
/** includes/admission.lua SWEEP_LAG_MS: nobody is admitted past a sweep this old. */
const SWEEP_LAG_MS = 3_000;

const lines = singleAndCluster(SHARDS);
const { single, raw, gateway } = lines;

async function openLine(room: WaitingRoom, evt: string, abandonSeconds: number, admitPerSecond = 0) {
  ok(
    await room.configure(evt, {
      onSaleAt: new Date(Date.now() - 1_000).toISOString(),
      admitPerSecond,
      maxActive: 1_000,
      sessionSeconds: 60,
      abandonSeconds,
    }),
  );
}

/**
 * Two fans at the head on shards other than 0 (a poll whose turn is near, ahead < 2, always asks
 * Redis; they are not polled), then 36 fans joined at once and polled until this process answers
 * them from its cache.
 */
/** `onZero` fans of `pool` on fan shard 0 and `elsewhere` on the others, in the pool's order. */
function mixed(pool: string[], shardOf: (fanId: string) => number, onZero: number, elsewhere: number): string[] {
  const zero = pool.filter((fanId) => shardOf(fanId) === 0).slice(0, onZero);
  const rest = pool.filter((fanId) => shardOf(fanId) !== 0).slice(0, elsewhere);
  if (zero.length < onZero || rest.length < elsewhere) throw new Error("pool too small for the mix");
  return pool.filter((fanId) => zero.includes(fanId) || rest.includes(fanId));
}

async function cachedLine(room: WaitingRoom, redis: Redis | Cluster, evt: string, prefix: string) {
  const shardOf = await shardOfIn(redis, evt);
  const head = fans(40, `${prefix}head`)
    .filter((fanId) => shardOf(fanId) !== 0)
    .slice(0, 2);
  for (const fanId of head) ok(await room.join(evt, fanId));
  // Six of them on shard 0 and thirty elsewhere, whatever the room's random shard key: 36 fans
  // drawn at random left shard 0 (of 6) empty once in 700 runs.
  const ids = mixed(fans(400, prefix), shardOf, 6, 30);
  (await fanOut([room], ids, (r, fanId) => r.join(evt, fanId))).map(ok);
  const pollAll = () => Promise.all(ids.map((fanId) => room.statusOf(evt, fanId)));
  for (let t = 0; t < 3; t++) {
    (await pollAll()).map(ok);
    await sleep(150);
  }
  return { head, ids, pollAll };
}

describe.each(["single", "cluster"] as const)("a line with fan shards, on %s", (target) => {
  it("keeps no heartbeat on the event's slot: joins and polls beat on the shards; the stopped lose their places, the polling never", async () => {
    const a = gateway(target);
    const b = gateway(target);
    const evt = eventId("fsline");
    await openLine(a.room, evt, 3);
    const ids = fans(60, "fl");
    // Joins at once through two gateways (each batches its own), then polls through their caches.
    (await fanOut([a.room, b.room], ids, (r, fanId) => r.join(evt, fanId))).map(ok);
    const k = waitingRoomKeys(evt);
    const redis = raw(target);
    expect(await redis.hget(k.room, "fanShards")).toBe(String(SHARDS));
    const keepers = ids.filter((_, i) => i % 3 !== 0);
    const leavers = ids.filter((_, i) => i % 3 === 0);
    const joinedAt = Date.now();
    // The keepers poll every 400 ms for 6 s (twice the abandon time), half through each gateway.
    const rounds: number[] = [];
    while (Date.now() - joinedAt < 6_000) {
      rounds.push(Date.now());
      const polled = await fanOut([a.room, b.room], keepers, (r, fanId) => r.statusOf(evt, fanId));
      for (const p of polled) expect(ok(p).place.status).toBe("waiting");
      await sleep(400);
    }
    // Lost within the abandon time plus the sweep's lag (and a second of slack for this machine),
    // and not before the abandon time.
    const lost = await until(
      async () => {
        const records = await redis.hmget(k.fans, ...leavers);
        return records.every((r) => r?.startsWith("x|")) ? Date.now() : undefined;
      },
      3_000 + SWEEP_LAG_MS + 1_000,
      100,
    );
    expect(lost - joinedAt).toBeGreaterThanOrEqual(3_000);
    const stats = ok(await a.room.stats(evt)).stats;
    expect(stats).toMatchObject({ abandoned: leavers.length, waiting: keepers.length });
    for (const fanId of keepers) expect((await redis.hget(k.fans, fanId))?.startsWith("w|")).toBe(true);
    // Nothing in `seen`; every keeper's beat on its shard, from its polls of the last rounds: at
    // least the one before last (the last one's may still be held, BEATS_HELD_MS). Measured from
    // the polls, not from now: the reads above take seconds on a loaded machine.
    expect(await redis.zcard(k.seen)).toBe(0);
    const beforeLast = rounds.at(-2)!;
    for (const fanId of keepers.slice(0, 10)) {
      expect((await lastBeat(redis, evt, fanId)) ?? 0).toBeGreaterThanOrEqual(beforeLast - 50);
    }
    // A leaver's beat is forgotten once its place is given up.
    await until(async () => ((await lastBeat(redis, evt, leavers[0]!)) === null ? true : undefined), 3_000);
    const shardKeys = await shardKeysOf(redis, evt);
    expect(shardKeys).toHaveLength(SHARDS);
    if (target === "cluster") {
      // The shards are placed off the event's own master (which runs the line's scripts), evenly
      // over the other two.
      const eventMaster = await ownerOf(lines.onCluster, k.room);
      const owners = await Promise.all(shardKeys.map((key) => ownerOf(lines.onCluster, key)));
      expect(owners).not.toContain(eventMaster);
      const perMaster = new Map<string, number>();
      for (const o of owners) perMaster.set(o, (perMaster.get(o) ?? 0) + 1);
      expect([...perMaster.values()]).toEqual([SHARDS / 2, SHARDS / 2]);
    }
    // Removing the event removes its shards.
    ok(await a.room.remove(evt));
    for (const key of shardKeys) expect(await redis.exists(key)).toBe(0);
  }, 60_000);

  it("holds a few heartbeats for up to BEATS_HELD_MS before the shards take them, then sends them all", async () => {
    const { room } = gateway(target);
    const redis = raw(target);
    const evt = eventId("fshold");
    await openLine(room, evt, 3);
    const { ids } = await cachedLine(room, redis, evt, "fshold");
    // Every beat owed so far sent: the next polls start a new hold.
    await until(async () => (room.lineCacheCounters().beatsHeld > 0 ? true : undefined), 2_000);
    await sleep(BEATS_HELD_MS + 300);
    const polled = ids.slice(0, 5);
    const before = await Promise.all(polled.map((fanId) => lastBeat(redis, evt, fanId)));
    const counted = room.lineCacheCounters();
    const polledAt = Date.now();
    for (const fanId of polled) expect(ok(await room.statusOf(evt, fanId)).place.status).toBe("waiting");
    expect(room.lineCacheCounters().answered - counted.answered).toBe(polled.length);
    // A refresh after the polls holds their five beats (fewer than BEATS_SENT_AT, none old) and
    // sends them once the oldest has waited BEATS_HELD_MS: never sooner. (Whether a refresh is seen
    // holding them is not asked: on a loaded machine the first refresh after the polls may come
    // after BEATS_HELD_MS, and then sends them at once, as it must. The bound is what holds; it
    // fails whenever a refresh sends them sooner, and refreshes come every VIEW_REFRESH_MS.)
    const sentAt = await until(
      async () => (room.lineCacheCounters().beats - counted.beats >= polled.length ? Date.now() : undefined),
      BEATS_HELD_MS + 4_000,
      10,
    );
    expect(sentAt - polledAt).toBeGreaterThanOrEqual(BEATS_HELD_MS);
    const after = await Promise.all(polled.map((fanId) => lastBeat(redis, evt, fanId)));
    for (let i = 0; i < polled.length; i++) expect(after[i]!).toBeGreaterThan(before[i]!);
  }, 30_000);

  it("admits nobody while the sweep lags, and admits the fans still there once a sweep completes", async () => {
    const { room } = gateway(target, { lineCache: false });
    const evt = eventId("fslag");
    // 3 s: a fan polling every 200 ms keeps its place even when a loaded machine (CI) delays a
    // round of polls by a second or two (with 1 s, one such round cost a fan its place, once).
    const abandonSeconds = 3;
    const openedAt = Date.now();
    await openLine(room, evt, abandonSeconds);
    const ids = fans(5, "lag");
    for (const fanId of ids) ok(await room.join(evt, fanId));
    const k = waitingRoomKeys(evt);
    const redis = raw(target);
    // No sweep for a long while: nobody may be handed the sweep, and the last one is old. The fans
    // keep polling until places can be lost (the abandon time since the open has passed).
    await redis.hset(k.room, "sweepAt", String(Date.now() + 3_600_000), "sweptAt", "1");
    while (Date.now() < openedAt + abandonSeconds * 1_000 + 500) {
      await Promise.all(ids.map((fanId) => room.statusOf(evt, fanId)));
      await sleep(200);
    }
    ok(await room.updateSettings(evt, { admitPerSecond: 100 }));
    for (let t = 0; t < 5; t++) {
      const polled = await Promise.all(ids.map((fanId) => room.statusOf(evt, fanId)));
      for (const p of polled) expect(ok(p).place.status).toBe("waiting");
      await sleep(100);
    }
    expect(ok(await room.stats(evt)).stats).toMatchObject({ admitted: 0, awaitingSweep: true });
    // The sweep may be handed out again: the next poll takes it, and the line moves.
    await redis.hset(k.room, "sweepAt", "0");
    await until(
      async () => {
        const polled = await Promise.all(ids.map((fanId) => room.statusOf(evt, fanId)));
        return polled.every((p) => ok(p).place.status === "admitted") ? true : undefined;
      },
      5_000,
      100,
    );
    expect(Number(await redis.hget(k.room, "sweptAt"))).toBeGreaterThan(Date.now() - 5_000);
    expect(ok(await room.stats(evt)).stats.awaitingSweep).toBe(false);
  }, 30_000);

  it("a mass of fans leaving at once: nobody who left is admitted while the sweep works through the backlog", async () => {
    // A sweep reads one stale beat a shard a second here (production: 512 a shard, rounds for up to
    // a second), so 24 fans leaving at once take several sweeps: the backlog a stadium's line
    // sees when tens of thousands close the tab in the same minute.
    const opts = { lineCache: false, fanShards: 3, fanSweep: { perShard: 1, budgetMs: 0 } };
    const a = gateway(target, opts);
    const b = gateway(target, opts);
    const evt = eventId("fsmass");
    await openLine(a.room, evt, 3);
    const leavers = fans(24, "ml");
    const keepers = fans(4, "mk");
    // The leavers first in line, then the keepers: the cursor must pass every leaver's place.
    (await fanOut([a.room, b.room], leavers, (r, fanId) => r.join(evt, fanId))).map(ok);
    (await fanOut([a.room, b.room], keepers, (r, fanId) => r.join(evt, fanId))).map(ok);
    const joinedAt = Date.now();
    const k = waitingRoomKeys(evt);
    const redis = raw(target);
    const poll = async () => {
      const polled = await fanOut([a.room, b.room], keepers, (r, fanId) => r.statusOf(evt, fanId));
      return polled.map((p) => ok(p).place.status);
    };
    // The keepers poll (their polls hand out the sweeps) past the abandon time plus the lag gate.
    while (Date.now() - joinedAt < 3_000 + SWEEP_LAG_MS + 1_500) {
      expect(await poll()).toEqual(keepers.map(() => "waiting"));
      await sleep(300);
    }
    const recordsAt = await redis.hmget(k.fans, ...leavers);
    const unswept = recordsAt.filter((r) => r?.startsWith("w|")).length;
    // Admission on while (on this machine, most likely) leavers still wait unswept.
    ok(await a.room.updateSettings(evt, { admitPerSecond: 200 }));
    await until(async () => ((await poll()).every((s) => s === "admitted") ? true : undefined), 30 * 1_000, 300);
    const records = await redis.hmget(k.fans, ...leavers);
    for (const [i, fanId] of leavers.entries()) expect(records[i]?.slice(0, 2), fanId).toBe("x|");
    const stats = ok(await a.room.stats(evt)).stats;
    expect(stats).toMatchObject({ abandoned: leavers.length, admitted: keepers.length });
    // The case this is about happened: leavers the sweeps had not reached when admission began (a
    // sweep a second gives up one a shard, so at least 9 of the 24 were left).
    expect(unswept).toBeGreaterThan(0);
  }, 60_000);

  it("a fan back after the abandon time learns the loss at its first poll or join, before any sweep", async () => {
    const { room } = gateway(target, { lineCache: false });
    const evt = eventId("fslapse");
    await openLine(room, evt, 1);
    const [sleeper, rejoiner, other] = fans(3, "lapse");
    for (const fanId of [sleeper!, rejoiner!, other!]) ok(await room.join(evt, fanId));
    // No call at all meanwhile: nobody is handed a sweep.
    await sleep(1_600);
    const k = waitingRoomKeys(evt);
    expect((await raw(target).hget(k.fans, sleeper!))?.startsWith("w|")).toBe(true);
    expect(ok(await room.statusOf(evt, sleeper!)).place).toMatchObject({ status: "abandoned", position: 1 });
    const back = ok(await room.join(evt, rejoiner!));
    expect(back.created).toBe(true);
    expect(back.place.position).toBe(4);
  }, 30_000);

  it("polls and joins of an event removed under a process that knew it leave no beat behind", async () => {
    const knew = gateway(target, { lineCache: false });
    const operator = gateway(target, { lineCache: false });
    const evt = eventId("fsgone");
    await openLine(knew.room, evt, 30);
    const ids = fans(12, "gone");
    (await fanOut([knew.room], ids, (r, fanId) => r.join(evt, fanId))).map(ok);
    for (const fanId of ids) ok(await knew.room.statusOf(evt, fanId));
    const redis = raw(target);
    const shardKeys = await shardKeysOf(redis, evt);
    expect(shardKeys).toHaveLength(SHARDS);
    ok(await operator.room.remove(evt));
    // `knew` still holds the room's shards: its polls and joins write their beats first, learn the
    // room is gone, and take those beats back. All at once.
    const [polls, joins] = await Promise.all([
      Promise.all(ids.map((fanId) => knew.room.statusOf(evt, fanId))),
      Promise.all(fans(12, "late").map((fanId) => knew.room.join(evt, fanId))),
    ]);
    for (const p of [...polls, ...joins]) expect(p).toMatchObject({ ok: false, reason: "not_found" });
    for (const key of shardKeys) expect(await redis.exists(key), key).toBe(0);
  });

  it("fans aimed at one shard by the public hash land on every shard: the room's own key places them, the same in every gateway", async () => {
    const [a, b] = [gateway(target, { lineCache: false }), gateway(target, { lineCache: false })];
    const evt = eventId("fsaim");
    await openLine(a.room, evt, 30);
    const redis = raw(target);
    const key = await redis.hget(waitingRoomKeys(evt).room, "fanShardKey");
    expect(key).toMatch(/^[0-9a-f]{16}$/);
    // An attacker on an event whose fanIds is `any` keeps only the ids FNV-1a puts on shard 0.
    const aimed: string[] = [];
    for (let i = 0; aimed.length < 120; i++) if (fanShardOf(`aim-${i}`, SHARDS) === 0) aimed.push(`aim-${i}`);
    // Joined and polled through two gateways at once: both write each fan's beat to one shard.
    (await fanOut([a.room, b.room], aimed, (r, fanId) => r.join(evt, fanId))).map(ok);
    (await fanOut([b.room, a.room], aimed, (r, fanId) => r.statusOf(evt, fanId))).map(ok);
    const shardKeys = await shardKeysOf(redis, evt);
    const sizes = await Promise.all(shardKeys.map((k) => redis.zcard(k)));
    expect(sizes.reduce((x, y) => x + y, 0)).toBe(aimed.length);
    for (const size of sizes) expect(size).toBeGreaterThan(0);
    const shardOf = await shardOfIn(redis, evt);
    for (const fanId of aimed) expect(await redis.zscore(shardKeys[shardOf(fanId)]!, fanId), fanId).not.toBeNull();
  });

  it("takes the per-IP join buckets on the shards: one client IP's joins through two gateways share one bucket; a refused join writes no beat and takes no place", async () => {
    const a = gateway(target, { lineCache: false });
    const b = gateway(target, { lineCache: false });
    const evt = eventId("fsbucket");
    await openLine(a.room, evt, 30);
    const redis = raw(target);
    const k = waitingRoomKeys(evt);
    const limit = (ip: string) => ({ limits: { ip: { subject: ip, perSecond: 1, burst: 3 } } });
    // 8 joins from one address and 2 each from 20 others, all in flight at once over two gateways.
    const crowd = Array.from({ length: 8 }, (_, i) => ({ fanId: `bk-one-${i}`, ip: "10.7.0.1" })).concat(
      Array.from({ length: 40 }, (_, i) => ({ fanId: `bk-many-${i}`, ip: `10.7.1.${i % 20}` })),
    );
    const results = await Promise.all(
      crowd.map((j, i) => (i % 2 === 0 ? a.room : b.room).join(evt, j.fanId, limit(j.ip))),
    );
    const one = results.slice(0, 8);
    // one bucket for the address whichever gateway took the join: burst 3 let in, 5 refused
    expect(one.filter((r) => r.ok).length).toBe(3);
    for (const r of one.filter((r) => !r.ok))
      expect(r).toMatchObject({ ok: false, reason: "rate_limited", limit: "ip" });
    expect(results.slice(8).every((r) => r.ok)).toBe(true);
    // The refused: no beat on their shard, no record on the event's slot.
    const refused = crowd.slice(0, 8).filter((_, i) => !one[i]!.ok);
    for (const { fanId } of refused) {
      expect(await lastBeat(redis, evt, fanId)).toBeNull();
      expect(await redis.hget(k.fans, fanId)).toBeNull();
    }
    expect(Number(await redis.hget(k.room, "tail"))).toBe(3 + 40);
    // The buckets are on the shards' slots, none on the event's.
    const shardKeys = await shardKeysOf(redis, evt);
    const onEvent = limitKey(evt, "ip:join", "10.7.0.1");
    const onShard = shardBucketKey(shardKeys[bucketShardOf(onEvent, shardKeys.length)]!, onEvent);
    expect(await redis.exists(onEvent)).toBe(0);
    // emptied (less than a token: the second gateway's batch may have come a few ms later, refilled)
    expect(Number((await redis.get(onShard))?.split(" ")[0])).toBeLessThan(1);
    if (target === "cluster") {
      // the shards are placed off the event's master, and so are their buckets
      expect(await ownerOf(lines.onCluster, onShard)).not.toBe(await ownerOf(lines.onCluster, k.room));
    }
  });

  it("one fan shard failing: every poll is still answered from the cache, and its heartbeats are sent once it is back", async () => {
    const { room } = gateway(target);
    const evt = eventId("fsfail");
    await openLine(room, evt, 30);
    const redis = raw(target);
    const { head, ids, pollAll } = await cachedLine(room, redis, evt, "sf");
    const shardKeys = await shardKeysOf(redis, evt);
    const shardOf = await shardOfIn(redis, evt);
    const broken = shardKeys[0]!;
    const onBroken = ids.filter((fanId) => shardOf(fanId) === 0);
    expect(onBroken.length).toBeGreaterThan(0);
    // Shard 0 fails every call (as a master failing over would, but at once and for good): its
    // key is no longer a sorted set. One SET replaces it at once: a DEL before it left a moment in
    // which a refresh found the shard empty, took its fans for gone and sent their next polls to
    // Redis (one failed CI run).
    await redis.set(broken, "not a zset");
    const { answered: before, failedRefreshes, staleAsked } = room.lineCacheCounters();
    let polls = 0;
    for (let t = 0; t < 6; t++) {
      const polled = await pollAll();
      polls += polled.length;
      for (const p of polled) expect(ok(p).place.status).toBe("waiting");
      await sleep(150);
    }
    // Not one of them went to Redis (before: the failed refresh dropped the view, every poll asked
    // Redis, and the broken shard's fans were answered 503).
    expect(room.lineCacheCounters()).toMatchObject({ answered: before + polls, failedRefreshes, staleAsked });
    // Joins at once meanwhile: the broken shard's fans are answered unavailable (503), the others
    // join (before: one failed beat failed the whole batch).
    // Four on the broken shard and twenty elsewhere (24 drawn at random left it empty in a CI run).
    const late = mixed(fans(300, "sflate"), shardOf, 4, 20);
    const joined = await Promise.all(late.map((fanId) => room.join(evt, fanId)));
    const lateBroken = late.filter((fanId) => shardOf(fanId) === 0);
    expect(lateBroken.length).toBeGreaterThan(0);
    expect(lateBroken.length).toBeLessThan(late.length);
    for (const [i, fanId] of late.entries()) {
      if (lateBroken.includes(fanId)) expect(joined[i], fanId).toMatchObject({ ok: false, reason: "unavailable" });
      else expect(ok(joined[i]!).place.status, fanId).toBe("waiting");
    }
    const joinedOk = late.length - lateBroken.length;
    // The shard back (empty, as a replica that lost them would be): the owed heartbeats find their
    // fans missing, whose next polls go to Redis and record them again.
    await redis.del(broken);
    await until(
      async () => {
        (await pollAll()).map(ok);
        const beats = await Promise.all(onBroken.map((fanId) => lastBeat(redis, evt, fanId)));
        return beats.every((b) => b !== null) ? true : undefined;
      },
      5_000,
      150,
    );
    expect(ok(await room.stats(evt)).stats).toMatchObject({
      waiting: head.length + ids.length + joinedOk,
      abandoned: 0,
    });
  }, 30_000);

  it("a gateway that dies with heartbeats owed costs nobody a place: the fans' next polls reach another", async () => {
    const a = gateway(target);
    const b = gateway(target);
    const evt = eventId("fskill");
    await openLine(a.room, evt, 3);
    const ids = fans(20, "kill");
    for (const fanId of ids) ok(await a.room.join(evt, fanId));
    // Polled through a's cache for a while, then a dies between two refreshes (its connection cut,
    // nothing flushed).
    for (let t = 0; t < 5; t++) {
      await Promise.all(ids.map((fanId) => a.room.statusOf(evt, fanId)));
      await sleep(150);
    }
    await Promise.all(ids.map((fanId) => a.room.statusOf(evt, fanId)));
    a.client.disconnect();
    // The same fans go on polling, through b, for twice the abandon time.
    const started = Date.now();
    while (Date.now() - started < 6_000) {
      const polled = await Promise.all(ids.map((fanId) => b.room.statusOf(evt, fanId)));
      for (const p of polled) expect(ok(p).place.status).toBe("waiting");
      await sleep(500);
    }
    expect(ok(await b.room.stats(evt)).stats).toMatchObject({ abandoned: 0, waiting: ids.length });
  }, 30_000);
});

describe("a line with fan shards, one shard's master slow (3-master cluster)", () => {
  it("polls are still answered from the cache, and the slow master is not sent a new call every refresh", async () => {
    const { room } = gateway("cluster");
    const evt = eventId("fsslow");
    await openLine(room, evt, 30);
    const { pollAll } = await cachedLine(room, lines.onCluster, evt, "ss");
    // The master of shard 0 (not the event's: shards are placed off it) holds every write for 1.5 s.
    const shardKeys = await shardKeysOf(lines.onCluster, evt);
    const slowAt = await ownerOf(lines.onCluster, shardKeys[0]!);
    expect(slowAt).not.toBe(await ownerOf(lines.onCluster, waitingRoomKeys(evt).room));
    const [host, port] = slowAt.split(":");
    const slow = new Redis({ host: host!, port: Number(port), maxRetriesPerRequest: 1 });
    // The script calls that master runs on this event's shards (other tests' lines may still be
    // refreshing on the same cluster), as MONITOR shows them once run.
    const theirs = new Set<string>();
    for (const key of shardKeys) if ((await ownerOf(lines.onCluster, key)) === slowAt) theirs.add(key);
    // A plain socket, not ioredis' monitor(): on a busy master it took monitored lines for replies
    // to its handshake and failed this test in CI (test/support/redis-monitor.ts).
    const monitor = await monitorRedis(`redis://${host}:${port}`);
    let calls = 0;
    monitor.on(({ args }) => {
      // The script calls (EVALSHA, or FCALL of its Redis Function), not the commands they run
      // (MONITOR shows those too).
      if (/^(?:evalsha|fcall)$/i.test(args[0] ?? "") && args.some((a) => theirs.has(a))) calls += 1;
    });
    try {
      // No sweep handed out meanwhile (its reads are calls to that master too): only heartbeats.
      await lines.onCluster.hset(waitingRoomKeys(evt).room, "sweepAt", String(Date.now() + 3_600_000));
      await slow.call("CLIENT", "PAUSE", "1500", "WRITE");
      const pausedAt = Date.now();
      // Three rounds of polls, each right after a view refresh completed during the pause (the
      // first of them waited for the slow shard; the next ones find its call still in flight and
      // keep its heartbeats owed). Each round must be answered here: the view refreshed on (the
      // event's master is not slow). Before, the refresh failed with the shard and dropped the view,
      // and the polls went to Redis. Timed right after a refresh, a round never finds the view old
      // on a loaded machine either: rounds timed by the clock alone did once in CI (a round more
      // than a second after the last refresh went to Redis).
      const rounds: { at: number; cached: number; polls: number }[] = [];
      const nextRefresh = async () => {
        const seen = room.lineCacheCounters().refreshes;
        const since = Date.now();
        while (room.lineCacheCounters().refreshes === seen && Date.now() - since < 5_000) await sleep(2);
      };
      for (let round = 0; round < 3; round++) {
        await nextRefresh();
        const before = room.lineCacheCounters().answered;
        const at = Date.now() - pausedAt;
        const polled = await pollAll();
        rounds.push({ at, cached: room.lineCacheCounters().answered - before, polls: polled.length });
        const other = polled.filter((p) => !p.ok || p.place.status !== "waiting");
        expect(other, `${Date.now() - pausedAt} ms into the pause: ${JSON.stringify(other[0])}`).toEqual([]);
      }
      const said = `${JSON.stringify(rounds)} ${JSON.stringify(room.lineCacheCounters())}`;
      expect(
        rounds.every((r) => r.cached === r.polls),
        said,
      ).toBe(true);
      expect(rounds.at(-1)!.at, said).toBeLessThan(1_500);
      // Past the pause's end, and long enough for MONITOR to show the calls it held.
      await sleep(Math.max(0, pausedAt + 1_500 - Date.now()) + 800);
      // Refreshes ran on, but each of that master's shards got one heartbeat call until it
      // answered, then one with what was owed meanwhile (the polls stopped before the pause
      // ended): two a shard, not one per refresh (12 calls without that, in a run here; the pause
      // spans about 15 refreshes). On a loaded machine (CI's parallel part) a third a shard was
      // seen once, the owed beats split over two calls after the pause: still not one per refresh.
      expect(calls).toBeGreaterThan(0);
      expect(calls).toBeLessThanOrEqual(theirs.size * 3);
    } finally {
      slow.disconnect();
      monitor.close();
    }
  }, 30_000);
});

describe("a line with fan shards: the count is the room's", () => {
  it("a process that knew the room without shards learns the new room's count from its join", async () => {
    const knew = gateway("single", { fanShards: 0, lineCache: false });
    const creator = gateway("single", { fanShards: SHARDS, lineCache: false });
    const evt = eventId("fsreshard");
    await openLine(knew.room, evt, 30);
    ok(await knew.room.join(evt, "before"));
    expect(await single.hget(waitingRoomKeys(evt).room, "fanShards")).toBeNull();
    ok(await creator.room.remove(evt));
    await openLine(creator.room, evt, 30);
    const joined = ok(await knew.room.join(evt, "after"));
    expect(joined.created).toBe(true);
    const key = (await shardKeysOf(single, evt))[(await shardOfIn(single, evt))("after")]!;
    expect(await single.zscore(key, "after")).not.toBeNull();
    expect(await single.zcard(waitingRoomKeys(evt).seen)).toBe(0);
  });
});
