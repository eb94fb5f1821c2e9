/**
 * Joins batched per event in one process (src/waiting-room/join-batch.ts, join-batch-n.lua): every
 * join really in flight at once through one gateway, so the batches are the ones a crowd makes.
 */
import { createHash } from "node:crypto";
import { Redis } from "ioredis";
import { afterAll, describe, expect, inject, it } from "vitest";
import { familyScripts } from "../../src/redis/scripts.js";
import { beatsKeyOf, bucketShardOf, shardBucketKey } from "../../src/waiting-room/fan-shards.js";
import { limitKey, waitingRoomKeys } from "../../src/waiting-room/keys.js";
import { createWaitingRoom } from "../../src/waiting-room/index.js";
import { waitingRoomScripts } from "../../src/waiting-room/scripts.js";
import { monitorRedis } from "../support/redis-monitor.js";
import { eventId, fans, gateways, lastBeat, ok, RECORDS_ON_SHARDS, SECRET, sleep } from "./helpers.js";

const gw = gateways(2, undefined, { lineCache: false });
afterAll(() => gw.close());

const open = { onSaleAt: Date.now() - 1_000, admitPerSecond: 0, maxActive: 100, sessionSeconds: 60 };

/** A line that is moving (the batch places only there): one fan placed, not admitted (rate 0). */
async function movingLine(tag: string, settings: Record<string, unknown> = {}): Promise<string> {
  const evt = eventId(tag);
  ok(await gw.room.configure(evt, { ...open, ...settings }));
  ok(await gw.room.join(evt, "first"));
  return evt;
}

describe("joins batched per event", () => {
  it("1,000 joins in flight through one process take places in the order it received them, in batches", async () => {
    const evt = await movingLine("batchord");
    const before = gw.room.joinBatchCounters();
    const ids = fans(1_000);
    const joined = (await Promise.all(ids.map((fanId) => gw.room.join(evt, fanId)))).map(ok);
    const after = gw.room.joinBatchCounters();

    // One batch in flight per event, first in first out: place = arrival order, after "first".
    expect(joined.map((j) => j.place.position)).toEqual(ids.map((_, i) => i + 2));
    expect(joined.every((j) => j.created && j.place.status === "waiting")).toBe(true);
    expect(joined.map((j) => j.place.ahead)).toEqual(ids.map((_, i) => i + 1));
    const batches = after.batches - before.batches;
    expect(after.joins - before.joins).toBe(1_000);
    expect(batches).toBeLessThan(1_000 / 8);
    expect(after.largest).toBeGreaterThan(8);

    // The view the batch sent once, with each fan's own position and ahead, is the one Redis gives.
    for (const i of [0, 499, 999]) {
      const { etaSeconds: _eta, ...polled } = ok(await gw.room.statusOf(evt, ids[i]!)).place as { etaSeconds?: number };
      const { etaSeconds: _joinedEta, ...answered } = joined[i]!.place as { etaSeconds?: number };
      expect(answered).toEqual(polled);
    }
    const { stats } = ok(await gw.room.stats(evt));
    expect(stats).toMatchObject({ joined: 1_001, waiting: 1_001, lastPosition: 1_001 });
  });

  it("the same fan twice in one batch: one place, the second join answers it", async () => {
    const evt = await movingLine("batchdup");
    const [a, b, c] = (await Promise.all(["dup", "other", "dup"].map((fanId) => gw.room.join(evt, fanId)))).map(ok);
    expect(a?.created).toBe(true);
    expect(c?.created).toBe(false);
    expect(c?.place.position).toBe(a?.place.position);
    expect(b?.place.position).not.toBe(a?.place.position);
    expect(ok(await gw.room.stats(evt)).stats.joined).toBe(3);
  });

  it("repeat joins of places that stand are answered by the batch: no join-9.lua, the place kept as polled", async () => {
    const evt = await movingLine("batchagain", { abandonSeconds: 1 });
    const ids = fans(300);
    const first = (await Promise.all(ids.map((fanId) => gw.room.join(evt, fanId)))).map(ok);
    const { room } = waitingRoomKeys(evt);
    const [redis] = gw.clients;
    const before = await lastBeat(redis!, evt, ids[150]!);

    // join-9.lua's calls, told by the script's name: its Redis Function's (onsale_join_<hash>) or
    // its SHA1 (EVALSHA); a key count would not tell it from claims-9.lua, the sweep's call in a
    // room whose records live on the fan shards
    const join9 = familyScripts(waitingRoomScripts).find((script) => script.name === "join")!;
    const join9Sha = createHash("sha1").update(join9.lua).digest("hex");
    const monitor = await monitorRedis(inject("redisUrl"));
    const calls: string[] = [];
    monitor.on(({ args }) => {
      // a script call (EVALSHA, or FCALL of its Redis Function): its name, the key count, the keys
      if (!/^(?:evalsha|fcall)$/i.test(args[0] ?? "") || args[3] !== room) return;
      const name = args[1] ?? "";
      calls.push(name === join9Sha || name.startsWith(`onsale_${join9.command}_`) ? "join-9" : name);
    });
    try {
      await sleep(300);
      // the new fan among them is placed in the same batches, after everyone else
      const again = (await Promise.all([...ids, "newcomer"].map((fanId) => gw.room.join(evt, fanId)))).map(ok);
      await sleep(100);
      expect(calls.filter((n) => n === "join-9")).toEqual([]);
      expect(calls.length).toBeGreaterThan(0);
      expect(again.slice(0, -1).every((j) => !j.created && j.place.status === "waiting")).toBe(true);
      // (With the records on the fan shards, the range reserved a place for each repeat join too,
      // 302..601, which their shards gave back: the newcomer's is the one after them.)
      const newcomer = RECORDS_ON_SHARDS ? 602 : 302;
      expect(again.map((j) => j.place.position)).toEqual([...first.map((j) => j.place.position), newcomer]);
      expect(again.at(-1)?.created).toBe(true);
      // the heartbeat it counts as: the place's last poll moved
      expect(Number(await lastBeat(redis!, evt, ids[150]!))).toBeGreaterThan(Number(before));
      for (const i of [0, 150, 299]) {
        const {
          etaSeconds: _eta,
          ahead,
          ...polled
        } = ok(await gw.room.statusOf(evt, ids[i]!)).place as {
          etaSeconds?: number;
          ahead: number;
        };
        const {
          etaSeconds: _joinedEta,
          ahead: aheadJoined,
          ...answered
        } = again[i]!.place as { etaSeconds?: number; ahead: number };
        expect(answered).toEqual(polled);
        // "first" (place 1) is not polled: with abandonSeconds 1 it lapses about now, so the join's
        // answer and the poll after it may count one fan ahead more or less (CI saw 150 and 151)
        expect(Math.abs(ahead - aheadJoined)).toBeLessThanOrEqual(1);
      }

      // A place not polled for abandonSeconds does not stand: join-9.lua settles it (lost) and
      // gives a new place at the back.
      calls.length = 0;
      await sleep(1_300);
      const lost = ok(await gw.room.join(evt, ids[0]!));
      expect(lost.created).toBe(true);
      expect(lost.place.position).toBe(newcomer + 1);
      await sleep(100);
      // (With the records on the fan shards no join calls join-9.lua: the fan's shard settles it.)
      if (RECORDS_ON_SHARDS) expect(calls).not.toContain("join-9");
      else expect(calls).toContain("join-9");
    } finally {
      monitor.close();
    }
  });

  it("a known fan, a new fan and a revoked fan in one batch each get join-9's answer", async () => {
    const evt = await movingLine("batchmix", { admitPerSecond: 1_000 });
    const admitted = ok(await gw.room.join(evt, "second"));
    // "first" was admitted at its join (the line was empty); end its session as an operator would
    const first = ok(await gw.room.statusOf(evt, "first")).place;
    if (first.status !== "admitted") throw new Error(`first is ${first.status}`);
    ok(await gw.room.revokeSession(evt, first.sessionId));
    const [again, fresh, revoked] = await Promise.all([
      gw.room.join(evt, "second"),
      gw.room.join(evt, "third"),
      gw.room.join(evt, "first"),
    ]);
    expect(ok(again!).created).toBe(false);
    expect(ok(again!).place.position).toBe(admitted.place.position);
    expect(ok(fresh!).created).toBe(true);
    expect(revoked).toEqual({ ok: false, reason: "revoked" });
  });

  it("one client IP's limit in one batch: the first `burst` joins placed, the rest limited, each bucket taken once", async () => {
    const evt = await movingLine("batchlim");
    const limit = (ip: string) => ({ limits: { ip: { subject: ip, perSecond: 0.5, burst: 5 } } });
    const results = await Promise.all(
      fans(40).map((fanId, i) => gw.room.join(evt, fanId, limit(i % 2 === 0 ? "10.0.0.1" : "10.0.0.2"))),
    );
    const placed = results.flatMap((r, i) => (r.ok ? [i] : []));
    const limited = results.filter((r) => !r.ok);
    // Five per IP, and they are each IP's first five in arrival order.
    expect(placed).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    expect(limited).toHaveLength(30);
    for (const r of limited) {
      expect(r).toMatchObject({ ok: false, reason: "rate_limited", limit: "ip" });
      expect((r as { retryAfterMs: number }).retryAfterMs).toBeGreaterThan(0);
    }
    expect(ok(await gw.room.stats(evt)).stats.joined).toBe(11);
  });

  it("many client IPs in one batch: each bucket read and written as a lone join would, fans without a limit untouched", async () => {
    const evt = await movingLine("batchips");
    const limit = (ip: string) => ({ limits: { ip: { subject: ip, perSecond: 1, burst: 2 } } });
    // A second limit in the same batch (a caller of the API may pass its own): burst 4.
    const wider = (ip: string) => ({ limits: { ip: { subject: ip, perSecond: 1, burst: 4 } } });
    // 30 addresses, three joins each, and every fourth join carries no limit at all (a load test's
    // token); 4 addresses under the wider limit, six joins each: all in flight at once, so one
    // batch holds many buckets, two limits and fans with none.
    const joins = Array.from({ length: 120 }, (_, i) => ({
      fanId: `ip-fan-${i}`,
      ip: i % 4 === 3 ? undefined : `10.1.0.${i % 30}`,
    }));
    const widely = Array.from({ length: 24 }, (_, i) => ({ fanId: `wide-fan-${i}`, ip: `10.3.0.${i % 4}` }));
    const before = gw.room.joinBatchCounters().batches;
    const [results, wide] = await Promise.all([
      Promise.all(joins.map((j) => gw.room.join(evt, j.fanId, j.ip === undefined ? {} : limit(j.ip)))),
      Promise.all(widely.map((j) => gw.room.join(evt, j.fanId, wider(j.ip)))),
    ]);
    // each wide address's first four placed, its last two refused
    expect(wide.map((r) => r.ok)).toEqual(widely.map((_, i) => i < 16));
    expect(gw.room.joinBatchCounters().batches - before).toBeLessThanOrEqual(3);
    // Each address's first two joins (burst 2) in arrival order are placed, its later ones refused
    // with the wait for one token (at 1/s: up to 1 s); a join without a limit is always placed.
    const seen = new Map<string, number>();
    for (const [i, j] of joins.entries()) {
      const r = results[i]!;
      if (j.ip === undefined) {
        expect(r.ok).toBe(true);
        continue;
      }
      const nth = (seen.get(j.ip) ?? 0) + 1;
      seen.set(j.ip, nth);
      if (nth <= 2) expect(r.ok).toBe(true);
      else {
        expect(r).toMatchObject({ ok: false, reason: "rate_limited", limit: "ip" });
        const wait = (r as { retryAfterMs: number }).retryAfterMs;
        expect(wait).toBeGreaterThan(0);
        expect(wait).toBeLessThanOrEqual(1_000);
      }
    }
    // What the batch wrote is what a lone join reads: an emptied bucket, refilled by time. (A room
    // with fan shards keeps its join buckets on the shards: TEST_FAN_SHARDS.)
    const redis = gw.clients[0]!;
    const tags = (await redis.hget(waitingRoomKeys(evt).room, "fanShardTags"))?.split(",") ?? [];
    const bucketKey = (subject: string) => {
      const onEvent = limitKey(evt, "ip:join", subject);
      return tags.length === 0
        ? onEvent
        : shardBucketKey(beatsKeyOf(tags[bucketShardOf(onEvent, tags.length)]!), onEvent);
    };
    const key = bucketKey("10.1.0.0");
    if (tags.length > 0) expect(await redis.exists(limitKey(evt, "ip:join", "10.1.0.0"))).toBe(0);
    const [tokens, at] = (await redis.get(key))!.split(" ");
    expect(tokens).toBe("0");
    expect(Number(at)).toBeGreaterThan(Date.now() - 10_000);
    // kept until it would have refilled (2 tokens at 1/s), and a second more
    expect(await redis.pttl(key)).toBeGreaterThan(2_000);
    expect(await redis.pttl(key)).toBeLessThanOrEqual(3_000);
    const refused = await gw.room.join(evt, "ip-late-1", limit("10.1.0.0"));
    expect(refused).toMatchObject({ ok: false, reason: "rate_limited", limit: "ip" });
    await sleep(1_100);
    // 1.1 s at 1/s: one token and a fraction, so one of two joins placed, the fraction written back.
    const [later, refusedAgain] = await Promise.all([
      gw.room.join(evt, "ip-late-2", limit("10.1.0.0")),
      gw.room.join(evt, "ip-late-3", limit("10.1.0.0")),
    ]);
    expect(later?.ok).toBe(true);
    expect(refusedAgain).toMatchObject({ ok: false, reason: "rate_limited", limit: "ip" });
    const [left] = (await redis.get(key))!.split(" ");
    expect(Number(left)).toBeGreaterThan(0);
    expect(Number(left)).toBeLessThan(1);
    // An unreadable bucket counts as a full one, as in a lone join's take.
    await redis.set(bucketKey("10.1.0.99"), "garbage", "PX", 10_000);
    const fresh = await Promise.all([1, 2, 3].map((i) => gw.room.join(evt, `ip-99-${i}`, limit("10.1.0.99"))));
    expect(fresh.map((r) => r.ok)).toEqual([true, true, false]);
  });

  it("a closed room refuses the whole batch; proof of work and invites are asked per fan", async () => {
    const evt = await movingLine("batchref");
    ok(await gw.room.updateSettings(evt, { powBits: 8 }));
    const refused = await Promise.all(fans(5).map((fanId) => gw.room.join(evt, fanId)));
    for (const r of refused) expect(r).toMatchObject({ ok: false, reason: "pow_required", powBits: 8 });
    // A batch with and without proofs (each fan's bits sent): only the fan without is refused. Not
    // first: the first join of a burst goes alone (join-linger.test.ts), the rest together.
    const [first, withoutProof, ...rest] = await Promise.all([
      gw.room.join(evt, "proved-first", { credentials: { proofBits: 8 } }),
      gw.room.join(evt, "unproved"),
      ...fans(5, "proved").map((fanId) => gw.room.join(evt, fanId, { credentials: { proofBits: 8 } })),
    ]);
    const withProof = [first!, ...rest];
    expect(withoutProof).toMatchObject({ ok: false, reason: "pow_required", powBits: 8 });
    expect(withProof.every((r) => r.ok && r.created)).toBe(true);
    ok(await gw.room.updateSettings(evt, { powBits: 0, invites: true }));
    const [uninvited, invited] = await Promise.all([
      gw.room.join(evt, "uninvited"),
      gw.room.join(evt, "invited", { credentials: { invite: true } }),
    ]);
    expect(uninvited).toEqual({ ok: false, reason: "invite_required" });
    expect(ok(invited!).created).toBe(true);

    ok(await gw.room.updateSettings(evt, { closed: true }));
    const closed = await Promise.all(fans(5, "late").map((fanId) => gw.room.join(evt, fanId)));
    for (const r of closed) expect(r).toEqual({ ok: false, reason: "closed" });
  });

  it("before the on-sale a batch enters the pre-queue with arrival numbers in order", async () => {
    const evt = eventId("batchpre");
    ok(await gw.room.configure(evt, { ...open, onSaleAt: Date.now() + 3_600_000, admitPerSecond: 10 }));
    ok(await gw.room.join(evt, "first"));
    const ids = fans(200);
    const joined = (await Promise.all(ids.map((fanId) => gw.room.join(evt, fanId)))).map(ok);
    expect(joined.every((j) => j.place.status === "prequeue" && j.place.provisional)).toBe(true);
    expect(joined.map((j) => j.place.position)).toEqual(ids.map((_, i) => i + 2));
    // Before the draw every fan may end up ahead: `ahead` is the pre-queue less the fan as its batch
    // left it, so the same for a batch's fans, the last position of the batch less one.
    const ahead = joined.map((j) => j.place.ahead);
    expect(ahead.every((a, i) => a + 1 >= i + 2 && (i === 0 || a >= ahead[i - 1]!))).toBe(true);
    expect(
      ahead.every((a) => a + 1 <= 201 && ahead.includes(a) && joined.some((j) => j.place.position === a + 1)),
    ).toBe(true);
    expect(ahead.at(-1)).toBe(200);
    expect(ok(await gw.room.info(evt)).info.waiting).toBe(201);
  });

  it("two processes batching at once: every place given once", async () => {
    const evt = await movingLine("batch2gw");
    const ids = fans(2_000);
    const joined = (await Promise.all(ids.map((fanId, i) => gw.rooms[i % 2]!.join(evt, fanId)))).map(ok);
    const positions = joined.map((j) => j.place.position).sort((a, b) => a - b);
    expect(positions).toEqual(ids.map((_, i) => i + 2));
  });
});

describe("the batch-size metric (onJoinBatch)", () => {
  it.each([
    ["records on the event's slot", {}],
    ["records on the fan shards", { fanShards: 3, claims: "shards" as const }],
  ])("is told every batch a crowd's joins make, %s", async (_line, options) => {
    const sizes: number[] = [];
    const client = new Redis(inject("redisUrl"), { maxRetriesPerRequest: 1 });
    const room = createWaitingRoom({ redis: client, secret: SECRET, onJoinBatch: (n) => sizes.push(n), ...options });
    try {
      const evt = eventId("metric");
      ok(await room.configure(evt, open));
      ok(await room.join(evt, "first"));
      const before = room.joinBatchCounters();
      const joined = (await Promise.all(fans(200, "mt").map((fanId) => room.join(evt, fanId)))).map(ok);
      const after = room.joinBatchCounters();
      expect(joined.every((j) => j.created)).toBe(true);
      // the first join's batch too; each batch told once, with its size
      expect(sizes.reduce((a, b) => a + b, 0)).toBe(201);
      expect(sizes.length).toBe(after.batches);
      expect(after.joins - before.joins).toBe(200);
    } finally {
      await room.close();
      client.disconnect();
    }
  });
});
