/**
 * A fan shard's half of the line's records (lua/waiting-room/fan-records-5.lua), held to the
 * protocol of docs/redis-cluster.md "Steps 2 and 3, call by call" on a real Redis, the racing
 * calls really in flight at once from connections of their own: two tabs joining at once, a poll
 * or a rejoin racing the sweep, a claim's write racing a revocation. No room calls the script yet
 * (its callers are the next step of issue 28); what it must decide on its slot alone is pinned here.
 */
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { registerScripts, type RunScript, scriptFamily } from "../../src/redis/scripts.js";
import { createWaitingRoom, type WaitingRoom, waitingRoomKeys } from "../../src/waiting-room/index.js";
import { allKeys, lineKeys, lineKeysWithClaims } from "../../src/waiting-room/keys.js";
import { uniqueId } from "../gateway/harness.js";
import { byFanShard, createFanBeats, recordKeysOfBeats } from "../../src/waiting-room/fan-shards.js";
import { sweepFanShards } from "../../src/waiting-room/fan-sweep.js";
import { DRAW_GRACE_MS } from "../../src/waiting-room/draw.js";
import { drawKey, drawOrder, entryOf, membershipHash } from "../../src/lottery/draw.js";
import { monitorRedis } from "../support/redis-monitor.js";
import { eventId as roomEventId, ok, SECRET, shardKeysOf, shardOfIn, sleep, until } from "./helpers.js";

const family = scriptFamily({ name: "fan-records-test", files: { records: "waiting-room/fan-records-5" } });

let clients: Redis[] = [];
let runs: RunScript<"records">[] = [];

beforeAll(() => {
  clients = Array.from({ length: 8 }, () => new Redis(inject("redisUrl"), { maxRetriesPerRequest: 1 }));
  runs = clients.map((c) => registerScripts(c, family));
});

afterAll(() => {
  for (const c of clients) c.disconnect();
});

/** One shard's five keys, under a tag of its own. */
function shard() {
  const tag = `{${uniqueId("shard")}}`;
  const keys = ["beats", "fans", "pre", "given", "frozen"].map((k) => `wr:${tag}:${k}`);
  const redis = clients[0]!;
  const on =
    (i: number) =>
    (...args: (string | number)[]) =>
      runs[i % runs.length]!<unknown[]>("records", keys, args.map(String));
  const joinOn =
    (i: number) =>
    async (...args: (string | number)[]) =>
      joined(await on(i)("join", ...args), ["join", ...args]);
  return {
    keys,
    call: on(0),
    on,
    join: joinOn(0),
    joinOn,
    record: (fanId: string) => redis.hget(keys[1]!, fanId),
    beat: async (fanId: string) => {
      const s = await redis.zscore(keys[0]!, fanId);
      return s === null ? null : Number(s);
    },
    setBeat: (fanId: string, ms: number) => redis.zadd(keys[0]!, String(ms), fanId),
    /** `given`'s members: "x:<place>" a fan given up, "<place>" a place vacated. */
    given: () => redis.zrange(keys[3]!, "0", "-1"),
    pre: (fanId: string) => redis.zscore(keys[2]!, fanId),
  };
}

/**
 * A join's reply, per fan: outcome, record, previous beat's age, old place given up. A new fan's is
 * 1 (its record is its reservation): read back from the call's arguments, `args` as sent.
 */
function joined(reply: unknown[], args: readonly (string | number)[]) {
  const out: { outcome: string; record: string; age: string; old: number }[] = [];
  const kind = String(args[3]);
  const fans = (args.length - 4) / 2;
  // `now` alone: every fan new
  const answers = reply.length === 1 ? Array.from({ length: fans }, () => 1) : reply.slice(1);
  for (const [j, r] of answers.entries()) {
    if (r === 1) {
      const n = String(args[5 + 2 * j]);
      out.push({ outcome: "new", record: kind === "p" ? `p|0|${n}||0|0` : `w|${n}|0||0|0`, age: "", old: 0 });
    } else {
      const [outcome, record, age, old] = r as unknown[];
      out.push({ outcome: String(outcome), record: String(record), age: String(age), old: Number(old) });
    }
  }
  return out;
}

const ABANDON = 3_000;
/** A line drawn a minute ago: places lapse after ABANDON without a beat. */
const drawnSince = () => Date.now() - 60_000;

describe("fan records: the join (step 1)", () => {
  it("writes a new fan's reservation with its beat, keeps a standing one's, gives unused places back", async () => {
    const s = shard();
    const first = await s.join(ABANDON, drawnSince(), "w", "f1", 101, "f2", 102);
    expect(first.map((j) => j.outcome)).toEqual(["new", "new"]);
    expect(first[0]).toMatchObject({ record: "w|101|0||0|0", age: "", old: 0 });
    expect(await s.record("f2")).toBe("w|102|0||0|0");
    expect(await s.beat("f1")).toBeGreaterThan(Date.now() - 5_000);

    // a repeat join (a reload): the record stands, the new reservation is given back
    const again = await s.join(ABANDON, drawnSince(), "w", "f1", 150);
    expect(again[0]).toMatchObject({ outcome: "again", record: "w|101|0||0|0", old: 0 });
    expect(Number(again[0]!.age)).toBeGreaterThanOrEqual(0);
    expect(await s.given()).toEqual(["v:150"]);

    // a fan twice in one call: the second finds the first's record
    const twice = await s.join(ABANDON, drawnSince(), "w", "f3", 160, "f3", 161);
    expect(twice.map((j) => j.outcome)).toEqual(["new", "again"]);
    expect(await s.record("f3")).toBe("w|160|0||0|0");
    expect(await s.given()).toEqual(["v:150", "v:161"]);
  });

  it("enters pre-queued fans in the shard's pre-queue; an arrival number is never a place to give back", async () => {
    const s = shard();
    const first = await s.join(ABANDON, 0, "p", "p1", 1, "p2", 2);
    expect(first.map((j) => j.record)).toEqual(["p|0|1||0|0", "p|0|2||0|0"]);
    expect(await s.pre("p1")).toBe("0");
    const again = await s.join(ABANDON, 0, "p", "p1", 7);
    expect(again[0]).toMatchObject({ outcome: "again", record: "p|0|1||0|0" });
    expect(await s.given()).toEqual([]);
  });

  it("two tabs of one fan joining at once hold one place; every other reservation is given back", async () => {
    const s = shard();
    const places = Array.from({ length: 24 }, (_, i) => 500 + i);
    const outcomes = (await Promise.all(places.map((p, i) => s.joinOn(i)(ABANDON, drawnSince(), "w", "tabs", p)))).map(
      (r) => r[0]!,
    );
    const won = outcomes.filter((o) => o.outcome === "new");
    expect(won).toHaveLength(1);
    const record = won[0]!.record;
    // every tab is answered the one record
    expect(new Set(outcomes.map((o) => o.record))).toEqual(new Set([record]));
    const place = Number(record.split("|")[1]);
    expect(await s.given()).toEqual(places.filter((p) => p !== place).map((p) => `v:${p}`));
  });

  it("a lapsed place is given up and the rejoin takes its reservation; never before the draw", async () => {
    const s = shard();
    await s.call("join", ABANDON, drawnSince(), "w", "late", 10);
    await s.setBeat("late", Date.now() - ABANDON - 2_000);
    const re = await s.join(ABANDON, drawnSince(), "w", "late", 90);
    expect(re[0]).toMatchObject({ outcome: "rejoin", record: "w|90|0||0|0", old: 10 });
    expect(Number(re[0]!.age)).toBeGreaterThanOrEqual(ABANDON + 2_000);
    expect(await s.given()).toEqual(["x:10"]);
    expect(await s.beat("late")).toBeGreaterThan(Date.now() - 5_000);

    // the same old beat while the draw is pending (startMs 0): nobody lapses
    await s.call("join", ABANDON, 0, "p", "early", 3);
    await s.setBeat("early", Date.now() - 600_000);
    const kept = await s.join(ABANDON, 0, "p", "early", 9);
    expect(kept[0]).toMatchObject({ outcome: "again", record: "p|0|3||0|0" });
  });

  it("a revoked fan is refused and its reservation given back; an admitted one's is left to the caller", async () => {
    const s = shard();
    await s.call("join", ABANDON, drawnSince(), "w", "rev", 5, "adm", 6);
    await s.call("revoke", "rev");
    await s.call("cas", "adm", "w|6|0||0|0", "a|6|0|e1.1|999|888");
    const replies = await s.join(ABANDON, drawnSince(), "w", "rev", 40, "adm", 41);
    expect(replies.map((j) => j.outcome)).toEqual(["revoked", "admitted"]);
    expect(replies[1]!.record).toBe("a|6|0|e1.1|999|888");
    // the revoked fan's place 5 and its reservation 40 (a reservation not taken: `joined` counted
    // it); 41 waits for the caller, who vacates it
    expect(await s.given()).toEqual(["5", "v:40"]);
    expect(await s.call("vacate", 41)).toEqual([expect.any(Number), 1]);
    expect(await s.given()).toEqual(["5", "v:40", "v:41"]);
  });

  it("after the draw's freeze a new pre-queued reservation writes nothing; a member's repeat join stands", async () => {
    const s = shard();
    await s.call("join", ABANDON, 0, "p", "in", 1);
    expect((await s.call("freeze"))[1]).toBe(1);
    expect((await s.call("freeze"))[1]).toBe(0);
    const replies = await s.join(ABANDON, 0, "p", "straggler", 2, "in", 3);
    expect(replies.map((j) => j.outcome)).toEqual(["frozen", "again"]);
    expect(await s.record("straggler")).toBeNull();
    expect(await s.pre("straggler")).toBeNull();
    expect(await s.beat("straggler")).toBeNull();
    // the caller reserves again after the close: a place at the back, which a frozen shard takes
    const back = await s.join(ABANDON, 0, "w", "straggler", 77);
    expect(back[0]).toMatchObject({ outcome: "new", record: "w|77|0||0|0" });
  });
});

describe("fan records: the poll and the claim's write (step 2)", () => {
  it("settles a drawn pre-queued fan at its place, gives a lapsed place up, knows no stranger", async () => {
    const s = shard();
    await s.call("join", ABANDON, 0, "p", "a", 1, "b", 2);
    const members = (await s.call("members", 0, 10)).slice(1);
    expect(members).toEqual(["a", "b"]);
    expect((await s.call("place", "a", 2, "b", 1, "nobody", 3))[1]).toBe(2);
    expect(await s.pre("nobody")).toBeNull();

    // before the draw's start is known to the caller, the place stays unknown
    expect((await s.call("poll", ABANDON, 0, "a"))[1]).toBe("p|0|1||0|0");
    expect((await s.call("poll", ABANDON, drawnSince(), "a"))[1]).toBe("w|2|1||0|0");
    expect(await s.record("a")).toBe("w|2|1||0|0");

    await s.setBeat("b", Date.now() - ABANDON - 1_000);
    const lost = await s.call("poll", ABANDON, drawnSince(), "b");
    expect(lost[1]).toBe("x|1|2||0|0");
    expect(Number(lost[2])).toBeGreaterThanOrEqual(ABANDON + 1_000);
    expect(await s.beat("b")).toBeNull();
    expect(await s.given()).toEqual(["x:1"]);

    expect((await s.call("poll", ABANDON, drawnSince(), "stranger")).slice(1)).toEqual(["", ""]);
  });

  it("of many writes from one record at once, exactly one lands; the others read the winner's", async () => {
    const s = shard();
    await s.call("join", ABANDON, drawnSince(), "w", "c", 3);
    const writes = Array.from({ length: 16 }, (_, i) => `a|3|0|e1.${i}|999|888`);
    const replies = await Promise.all(writes.map((w, i) => s.on(i)("cas", "c", "w|3|0||0|0", w)));
    const landed = replies.filter((r) => r[1] === 1);
    expect(landed).toHaveLength(1);
    const winner = writes[replies.findIndex((r) => r[1] === 1)]!;
    expect(await s.record("c")).toBe(winner);
    for (const r of replies.filter((r) => r[1] === 0)) expect(r[2]).toBe(winner);
    // admitted: out of line, so no beat for a sweep to judge
    expect(await s.beat("c")).toBeNull();
  });

  it("a revocation racing a claim's write: whichever lands first, the record ends revoked", async () => {
    for (let round = 0; round < 10; round++) {
      const s = shard();
      await s.call("join", ABANDON, drawnSince(), "w", "r", 8);
      const [cas, revoke] = await Promise.all([
        s.on(round)("cas", "r", "w|8|0||0|0", "a|8|0|e1.1|999|888"),
        s.on(round + 1)("revoke", "r"),
      ]);
      const record = await s.record("r");
      expect(record?.startsWith("r|8|")).toBe(true);
      if (cas[1] === 1) {
        // the claim landed first: the revocation saw the admitted record (E then ends its session)
        expect(revoke[1]).toBe("a|8|0|e1.1|999|888");
        expect(await s.given()).toEqual([]);
      } else {
        // the revocation first: the claim's write fails on r (its session is ended by the caller)
        expect(cas[2]).toBe(record);
        expect(await s.given()).toEqual(["8"]);
      }
    }
  });
});

describe("fan records: the sweep (step 3)", () => {
  it("gives up a fan whose beat is the one read; spares one whose beat was kept since, or who rejoined", async () => {
    const s = shard();
    await s.call("join", ABANDON, drawnSince(), "w", "gone", 1, "back", 2, "rejoined", 3, "done", 4);
    const old = Date.now() - ABANDON - 5_000;
    for (const f of ["gone", "back", "rejoined", "done"]) await s.setBeat(f, old);
    // the sweep has read the four beats ('stale'); meanwhile one's beat is kept (a poll a gateway
    // answered from its cache within the abandon time, its beat sent after: beats-1.lua 'keep'),
    // one rejoins, one is admitted
    await s.setBeat("back", Date.now());
    await s.call("join", ABANDON, drawnSince(), "w", "rejoined", 30);
    await s.call("cas", "done", "w|4|0||0|0", "a|4|0|e1.1|999|888");
    await s.setBeat("done", old); // a beat left behind: given no place, only dropped
    const given = await s.call("give-up", ABANDON, drawnSince(), "gone", "back", "rejoined", "done");
    expect(given.slice(1)).toEqual([1]);
    expect(await s.record("gone")).toBe("x|1|0||0|0");
    expect(await s.record("back")).toBe("w|2|0||0|0");
    expect(await s.record("rejoined")).toBe("w|30|0||0|0");
    expect(await s.beat("done")).toBeNull();
    // the rejoin gave its lapsed place 3 up itself; the sweep gave 1
    expect(await s.given()).toEqual(["x:1", "x:3"]);
  });

  it("a poll and the give-up of one fan racing: the fan is either polling at its place or given up, never both", async () => {
    for (let round = 0; round < 10; round++) {
      const s = shard();
      await s.call("join", ABANDON, drawnSince(), "w", "f", 12);
      const old = Date.now() - ABANDON - 100;
      await s.setBeat("f", old);
      const [poll, giveUp] = await Promise.all([
        s.on(round)("poll", ABANDON, drawnSince(), "f"),
        s.on(round + 1)("give-up", ABANDON, drawnSince(), "f"),
      ]);
      const record = await s.record("f");
      // the poll finds the beat lapsed either way: it gives the place up itself, or reads the give-up's
      expect(record).toBe("x|12|0||0|0");
      expect(poll[1]).toBe("x|12|0||0|0");
      expect(giveUp.slice(1).length).toBeLessThanOrEqual(1);
      expect(await s.given()).toEqual(["x:12"]);
    }
  });

  it("looks fans up in one call: a recent beat found and refreshed, a lapsed one not, each record and drawn place read", async () => {
    const s = shard();
    await s.join(ABANDON, drawnSince(), "w", "near", 5, "far", 6);
    await s.join(ABANDON, 0, "p", "early", 1);
    await s.call("place", "early", 3);
    await s.setBeat("far", Date.now() - 10_000);
    const before = { near: await s.beat("near"), far: await s.beat("far") };
    await sleep(5);
    const reply = await s.call("look", 3_000, "1", "near", "far", "early", "ghost");
    expect(reply.slice(1)).toEqual([1, "w|5|0||0|0", "", 0, "w|6|0||0|0", "", 1, "p|0|1||0|0", "3", 0, "", ""]);
    // the found fans' beats moved to the call's time (a lookup is a poll's beat); a lapsed beat
    // stays lapsed (the sweep's to judge), and a fan with no beat gets none
    expect(await s.beat("near")).toBe(Number(reply[0]));
    expect(Number(reply[0])).toBeGreaterThan(before.near!);
    expect(await s.beat("far")).toBe(before.far);
    expect(await s.beat("ghost")).toBeNull();
    // before the draw no drawn place is read
    expect((await s.call("look", 3_000, "0", "early")).slice(1)).toEqual([1, "p|0|1||0|0", ""]);
    expect(await s.call("look", 3_000, "0")).toHaveLength(1);
  });

  it("hands the given places over until the event's slot acknowledges them", async () => {
    const s = shard();
    await s.call("vacate", 9, 4, 7, 0);
    expect((await s.call("given", 2)).slice(1)).toEqual(["v:4", "v:7"]);
    expect((await s.call("ack", "v:4", "v:7", "v:99"))[1]).toBe(2);
    expect((await s.call("given", 10)).slice(1)).toEqual(["v:9"]);
    await expect(s.call("nonsense")).rejects.toThrow(/unknown mode/);
  });
});

/**
 * The event's slot's half (lua/waiting-room/line-range-8.lua, claims-9.lua): a room made with fan
 * shards and claims, then switched to records on the shards (`claims` 2) by hand, since no
 * gateway creates such a room yet.
 */
describe("the event's slot's half: ranges, claims, give-ups", () => {
  const slotFamily = scriptFamily({
    name: "shard-records-slot-test",
    files: { range: "waiting-room/line-range-8", claims: "waiting-room/claims-9" },
  });
  let slotRuns: RunScript<"range" | "claims">[] = [];
  let room: WaitingRoom;
  beforeAll(() => {
    slotRuns = clients.map((c) => registerScripts(c, slotFamily));
    room = createWaitingRoom({ redis: clients[0]!, secret: SECRET, claims: true, fanShards: 4, lineCache: false });
  });
  afterAll(async () => {
    await room?.close();
  });

  /** A room of records on the shards; `onSaleAt` in the past unless said. */
  async function slot(
    settings: { admitPerSecond?: number; maxActive?: number; onSaleAt?: number; abandonSeconds?: number } = {},
  ) {
    const evt = roomEventId("slot");
    ok(
      await room.configure(evt, {
        onSaleAt: new Date(settings.onSaleAt ?? Date.now() - 1_000).toISOString(),
        admitPerSecond: settings.admitPerSecond ?? 0,
        maxActive: settings.maxActive ?? 100,
        sessionSeconds: 60,
        abandonSeconds: settings.abandonSeconds ?? 30,
      }),
    );
    const k = waitingRoomKeys(evt);
    const redis = clients[0]!;
    await redis.hset(k.room, "claims", "2");
    const [epoch, shards] = await redis.hmget(k.room, "epoch", "fanShards");
    const field = async (name: string) => Number(await redis.hget(k.room, name));
    return {
      k,
      field,
      range: (i: number, n: number, perFan: (string | number)[] = []) =>
        slotRuns[i % slotRuns.length]!<unknown>("range", lineKeys(k), [
          n,
          epoch ?? "",
          shards ?? "0",
          perFan.length > 0 ? 2 : 0,
          ...perFan,
        ]),
      claims: (i: number, ...args: (string | number)[]) =>
        slotRuns[i % slotRuns.length]!<unknown[]>("claims", lineKeysWithClaims(k), args.map(String)),
      rate: (admitPerSecond: number) => room.updateSettings(evt, { admitPerSecond }),
      evt,
      /** The room's shards, as a gateway's fan-line.ts makes them. */
      beats: async () => {
        const [tags, key] = await redis.hmget(k.room, "fanShardTags", "fanShardKey");
        const list = (tags ?? "").split(",");
        return createFanBeats(redis, { shards: list.length, tagsOf: () => list, shardKey: key });
      },
    };
  }

  /**
   * Fans joining as the protocol's step 1 has a gateway join them: one range on the event's slot,
   * then each shard's records and beats (the gateway's join in such a room is not built yet).
   */
  async function joinFans(s: Awaited<ReturnType<typeof slot>>, ids: string[]) {
    const reply = (await s.range(0, ids.length)) as unknown[];
    const [kind, first, startMs, abandonMs] = [String(reply[1]), Number(reply[2]), reply[3], reply[4]];
    const shardKeys = await shardKeysOf(clients[0]!, s.evt);
    const shardOf = await shardOfIn(clients[0]!, s.evt);
    const placeOf = new Map(ids.map((id, j) => [id, first + j + 1]));
    for (const [shard, group] of byFanShard(ids, shardOf)) {
      await runs[0]!("records", recordKeysOfBeats(shardKeys[shard]!), [
        "join",
        String(abandonMs),
        String(startMs),
        kind,
        ...group.flatMap((id) => [id, String(placeOf.get(id))]),
      ]);
    }
    return { placeOf, shardKeys, shardOf };
  }

  it("gives concurrent batches ranges that never overlap and cover the line, with no fan id sent", async () => {
    const s = await slot();
    const sizes = Array.from({ length: 64 }, (_, i) => 1 + ((i * 7) % 32));
    const replies = (await Promise.all(sizes.map((n, i) => s.range(i, n)))) as unknown[][];
    const taken: number[] = [];
    for (const [i, reply] of replies.entries()) {
      expect(reply.slice(0, 2)).toEqual(["range", "w"]);
      const first = Number(reply[2]);
      for (let j = 1; j <= sizes[i]!; j++) taken.push(first + j);
      expect(reply.slice(7)).toEqual(Array(sizes[i]).fill(0));
    }
    const total = sizes.reduce((a, b) => a + b, 0);
    expect(taken.sort((a, b) => a - b)).toEqual(Array.from({ length: total }, (_, i) => i + 1));
    expect(await s.field("tail")).toBe(total);
    expect(await s.field("joined")).toBe(total);
    // no record, no fifo, no pre-queue member on the event's slot
    for (const key of [s.k.fans, s.k.fifo, s.k.pre]) expect(await clients[0]!.exists(key)).toBe(0);
  });

  it("numbers the pre-queue's arrivals and closes it at onSaleAt counting every number given", async () => {
    const s = await slot({ onSaleAt: Date.now() + 1_500 });
    const early = (await s.range(0, 5)) as unknown[];
    expect(early.slice(0, 4)).toEqual(["range", "p", "0", "0"]);
    await s.range(1, 3);
    await sleep(1_600);
    const after = (await s.range(2, 2)) as unknown[];
    // the close froze the pre-queue at 8 arrival numbers: the next places follow them
    expect(after.slice(0, 3)).toEqual(["range", "w", "8"]);
    expect(await s.field("preCount")).toBe(8);
    // the draw is pending: nobody's place can lapse yet
    expect(after[3]).toBe("0");
  });

  it("refuses by the room's own settings, per fan, and takes nothing for the refused", async () => {
    const s = await slot();
    await clients[0]!.hset(s.k.room, "powBits", "8", "invites", "1");
    const reply = (await s.range(0, 3, [8, "1", 4, "1", 9, "0"])) as unknown[];
    expect(reply.slice(7)).toEqual([0, "pow", "invite"]);
    expect(await s.field("tail")).toBe(1);
    await clients[0]!.hset(s.k.room, "closed", "1");
    expect(await s.range(0, 1)).toBe(-3);
    expect(await s.range(0, 1, [])).toBe(-3);
  });

  it("answers every claim of one passed place with the one session, opened once", async () => {
    const s = await slot({ maxActive: 10 });
    await s.range(0, 3);
    expect((await s.claims(0, "claim", 2, "f2"))[0]).toBe("ahead");
    ok(await s.rate(1_000));
    await sleep(20);
    const replies = await Promise.all(Array.from({ length: 16 }, (_, i) => s.claims(i, "claim", 2, "f2")));
    const sessions = new Set(replies.map((r) => JSON.stringify(r)));
    expect(sessions.size).toBe(1);
    const [kind, sid] = replies[0]!;
    expect(kind).toBe("session");
    expect(await clients[0]!.hget(s.k.sessions, String(sid))).toBe("f2");
    expect(await s.field("admitted")).toBe(1);
    // three places offered, one claimed: two offers and one session hold the cap
    expect(await s.field("offered")).toBe(2);
    expect(await clients[0]!.zcard(s.k.active)).toBe(3);
  });

  it("never holds more than maxActive offers and sessions, three gateways claiming at once", async () => {
    const s = await slot({ maxActive: 5 });
    await s.range(0, 40);
    ok(await s.rate(2_000));
    const claimed = new Set<string>();
    for (let round = 0; round < 30; round++) {
      const served = await s.field("served");
      const claims = Array.from({ length: 3 * 4 }, (_, i) => {
        // the places at the cursor (a claim's tick moves it; place 1 while it stands at 0)
        const place = Math.max(1, served - (i % 4));
        return s.claims(i, "claim", place, `f${place}`);
      });
      for (const reply of await Promise.all(claims)) if (reply[0] === "session") claimed.add(String(reply[1]));
      // a session claimed a moment ago ends (a purchase), freeing a slot for the cursor
      const live = await clients[0]!.zrangebyscore(s.k.active, `(${Date.now()}`, "+inf");
      const sessionsLive = live.filter((m) => !m.startsWith("offer:"));
      expect(live.length).toBeLessThanOrEqual(5);
      expect(Number(await s.field("offered")) + sessionsLive.length).toBe(live.length);
      if (sessionsLive.length > 0) await clients[0]!.zrem(s.k.active, sessionsLive[0]!);
      await sleep(5);
    }
    expect(claimed.size).toBeGreaterThan(5);
  });

  it("gives up places: ahead of the cursor vacated, passed lost with its offer back, claimed kept", async () => {
    const s = await slot({ maxActive: 10 });
    await s.range(0, 6);
    ok(await s.rate(1_000));
    await sleep(20);
    await s.claims(0, "claim", 1, "f1");
    ok(await s.rate(0));
    const served = await s.field("served");
    expect(served).toBeGreaterThanOrEqual(3);
    // a place ahead only if the line has one left: 6 > served when the cursor stopped early
    const ahead = served < 6 ? [6] : [];
    // place 1 claimed before its fan was given up (a claim racing the give-up): kept, not counted
    const reply = await s.claims(0, "gone", "1", "x:1", "x:2", ...ahead.map((p) => `x:${p}`));
    expect(reply).toEqual([
      "vacated",
      String(ahead.length),
      "offersBack",
      "1",
      "claimed",
      "1",
      "sweptAt",
      expect.any(String),
      "abandoned",
      String(1 + ahead.length),
    ]);
    expect(await clients[0]!.zscore(s.k.gone, "6")).toBe(ahead.length > 0 ? "6" : null);
    // the lost place's fan claims after (a poll that read its record before the give-up): lost
    expect((await s.claims(1, "claim", 2, "f2"))[0]).toBe("lost");
    expect(await s.field("abandoned")).toBe(1 + ahead.length);
    // told again (a sweep that overlapped another): nothing more is counted, nor answered counted
    expect((await s.claims(0, "gone", "1", "x:1", "x:2", ...ahead.map((p) => `x:${p}`))).slice(-2)).toEqual([
      "abandoned",
      "0",
    ]);
    expect(await s.field("abandoned")).toBe(1 + ahead.length);
    // the claimed place's session stands
    expect((await s.claims(2, "claim", 1, "f1"))[0]).toBe("session");
  });

  it("bars a revoked fan's place: a claim after is refused, a session there is ended", async () => {
    const s = await slot({ maxActive: 10 });
    await s.range(0, 4);
    ok(await s.rate(1_000));
    await sleep(20);
    const session = await s.claims(0, "claim", 1, "f1");
    expect(session[0]).toBe("session");
    expect(await s.claims(0, "revoke", 1)).toEqual(["ended", session[1], 1]);
    expect(await clients[0]!.zscore(s.k.active, String(session[1]))).toBeNull();
    expect(await s.claims(0, "revoke", 2)).toEqual(["barred"]);
    expect(await s.claims(1, "claim", 2, "f2")).toEqual(["revoked"]);
    // a place never passed is vacated for the cursor to skip
    ok(await s.rate(0));
    const served = await s.field("served");
    await s.range(0, 3);
    expect(await s.claims(0, "revoke", served + 2)).toEqual(["barred"]);
    expect(await clients[0]!.zscore(s.k.gone, String(served + 2))).toBe(String(served + 2));
    expect(await s.field("revoked")).toBe(3);
  });

  it("sweeps on the shards: stale fans given up there, their places told to the event's slot once", async () => {
    // open a minute ago, so a beat a minute old has lapsed; 3 s to lose a place
    const s = await slot({ maxActive: 4, abandonSeconds: 3, onSaleAt: Date.now() - 60_000 });
    const ids = Array.from({ length: 12 }, (_, i) => `sw${i + 1}`);
    const { placeOf, shardKeys, shardOf } = await joinFans(s, ids);
    const keysOf = (id: string) => recordKeysOfBeats(shardKeys[shardOf(id)]!);
    const beats = await s.beats();
    ok(await s.rate(1_000));
    await sleep(20);
    // nobody is offered a place while no sweep has completed for 3 s (admission.lua sweep_lagging)
    expect((await s.claims(0, "claim", 1, "sw1"))[0]).toBe("ahead");
    expect(await sweepFanShards(clients[0]!, beats, s.evt)).toMatchObject({ stale: 0, abandoned: 0, behind: false });
    // the cursor offers places 1-4 (maxActive 4); fan 1 claims its place, as its poll would
    const session = await s.claims(0, "claim", placeOf.get("sw1")!, "sw1");
    expect(session[0]).toBe("session");
    const casReply = await runs[0]!<unknown[]>("records", keysOf("sw1"), [
      "cas",
      "sw1",
      `w|1|0||0|0`,
      `a|1|0|${session[1]}|${session[2]}|${session[3]}`,
    ]);
    expect(casReply[1]).toBe(1);
    expect(await s.field("served")).toBe(4);
    ok(await s.rate(0));
    // fans 2 (passed, offered), 7 and 9 (ahead) stop polling: their beats a minute old
    const old = String(Date.now() - 60_000);
    for (const id of ["sw2", "sw7", "sw9"]) await clients[0]!.zadd(keysOf(id)[0]!, old, id);
    // and fan 3 joins again (a reload): its new reservation, place 13, is vacated, not abandoned
    const again = await joinFans(s, ["sw3"]);
    expect(again.placeOf.get("sw3")).toBe(13);

    const swept = await sweepFanShards(clients[0]!, beats, s.evt);
    expect(swept).toMatchObject({ stale: 3, abandoned: 3, behind: false });
    expect(swept!.sweptAt).toBeGreaterThan(0);
    for (const id of ["sw2", "sw7", "sw9"]) {
      expect((await clients[0]!.hget(keysOf(id)[1]!, id))?.startsWith(`x|${placeOf.get(id)}|`)).toBe(true);
    }
    // ahead: vacated for the cursor to skip; passed: lost, its offer back; counted once
    expect(await clients[0]!.zrange(s.k.gone, "0", "-1")).toEqual(["7", "9", "13"]);
    expect(await clients[0]!.zscore(s.k.active, "offer:2")).toBeNull();
    expect(await clients[0]!.hget(s.k.claims, "2")).toBe("x");
    expect(await s.field("abandoned")).toBe(3);
    expect(await s.field("sweptAt")).toBe(swept!.sweptAt);
    for (const key of shardKeys) expect(await clients[0]!.zcard(recordKeysOfBeats(key)[3]!)).toBe(0);
    // the claimed place kept its session; a second sweep finds nothing more
    expect((await s.claims(0, "claim", 1, "sw1"))[0]).toBe("session");
    expect(await sweepFanShards(clients[0]!, beats, s.evt)).toMatchObject({ stale: 0, abandoned: 0 });
    expect(await s.field("abandoned")).toBe(3);
  });

  it("a place two overlapping sweeps both tell is counted abandoned once, and reported so by the sweep", async () => {
    const s = await slot({ maxActive: 4, abandonSeconds: 3, onSaleAt: Date.now() - 60_000 });
    const ids = Array.from({ length: 6 }, (_, i) => `ov${i + 1}`);
    const { placeOf, shardKeys, shardOf } = await joinFans(s, ids);
    const beats = await s.beats();
    const keys = recordKeysOfBeats(shardKeys[shardOf("ov5")]!);
    await clients[0]!.zadd(keys[0]!, String(Date.now() - 60_000), "ov5");
    const openedAt = await s.field("openedAt");
    expect(await beats.records.giveUp(s.evt, shardOf("ov5"), ["ov5"], { abandonMs: 3_000, startMs: openedAt })).toEqual(
      [placeOf.get("ov5")],
    );
    // the other sweep told the event's slot and has not yet acknowledged it on the shard
    await s.claims(1, "gone", "0", `x:${placeOf.get("ov5")}`);
    expect(await s.field("abandoned")).toBe(1);
    // this sweep tells it again: the slot counts nothing more, and the sweep reports what it counted
    expect(await sweepFanShards(clients[0]!, beats, s.evt)).toMatchObject({ stale: 0, abandoned: 0 });
    expect(await s.field("abandoned")).toBe(1);
    expect(await clients[0]!.zcard(keys[3]!)).toBe(0);
  });

  it("a sweeper dying after the give-ups loses nothing: the next sweep tells the places", async () => {
    const s = await slot({ maxActive: 4, abandonSeconds: 3, onSaleAt: Date.now() - 60_000 });
    const ids = Array.from({ length: 6 }, (_, i) => `dy${i + 1}`);
    const { placeOf, shardKeys, shardOf } = await joinFans(s, ids);
    const beats = await s.beats();
    const old = String(Date.now() - 60_000);
    const keys = recordKeysOfBeats(shardKeys[shardOf("dy5")]!);
    await clients[0]!.zadd(keys[0]!, old, "dy5");
    // the dead sweeper's steps: the stale read and the give-up, and nothing after
    const openedAt = await s.field("openedAt");
    const given = await beats.records.giveUp(s.evt, shardOf("dy5"), ["dy5"], { abandonMs: 3_000, startMs: openedAt });
    expect(given).toEqual([placeOf.get("dy5")]);
    expect(await clients[0]!.zcard(s.k.gone)).toBe(0);
    // the next sweep reads no stale beat (the give-up dropped it) and still tells the place
    expect(await sweepFanShards(clients[0]!, beats, s.evt)).toMatchObject({ stale: 0, abandoned: 1 });
    expect(await clients[0]!.zrange(s.k.gone, "0", "-1")).toEqual([String(placeOf.get("dy5"))]);
    expect(await clients[0]!.zcard(keys[3]!)).toBe(0);
    expect(await s.field("abandoned")).toBe(1);
  });

  it("draws over the shards: frozen, the members placed 1..n as the committed order, lost numbers vacated", async () => {
    const s = await slot({ onSaleAt: Date.now() + 1_200 });
    const ids = Array.from({ length: 40 }, (_, i) => `dr${i + 1}`);
    await joinFans(s, ids.slice(0, 20));
    // a gateway lost between the range and its shards' writes: arrival numbers 21-23 nobody holds
    expect(((await s.range(0, 3)) as unknown[])[2]).toBe("20");
    await joinFans(s, ids.slice(20));
    await sleep(1_300);
    const opened = await room.openNow(s.evt);
    expect(opened.ok && opened.info.lottery.seed).toBeTruthy();
    expect(await s.field("preCount")).toBe(43);
    expect(await s.field("drawn")).toBe(1);
    // 43 numbers counted joined by the range, 40 fans: the draw counts its members
    expect(await s.field("joined")).toBe(40);
    // not before the grace after the close: the joins numbered before it land first
    expect((await s.field("drawnAt")) - (await s.field("openedAt"))).toBeGreaterThanOrEqual(DRAW_GRACE_MS);
    // every member on its shard at its drawn place, the places exactly 1..40
    const shardKeys = await shardKeysOf(clients[0]!, s.evt);
    const shardOf = await shardOfIn(clients[0]!, s.evt);
    const placeOf = new Map<string, number>();
    for (const id of ids) {
      const score = await clients[0]!.zscore(recordKeysOfBeats(shardKeys[shardOf(id)]!)[2]!, id);
      placeOf.set(id, Number(score));
    }
    expect([...placeOf.values()].sort((a, b) => a - b)).toEqual(ids.map((_, i) => i + 1));
    // the order is the committed one: seed, membership of exactly these fans, no beacon
    const [seed, m] = await clients[0]!.hmget(s.k.room, "seed", "membershipHash");
    expect(m).toBe(membershipHash(ids.map(entryOf)));
    const order = drawOrder(drawKey(seed!, m!), ids.map(entryOf));
    expect(order.map((entry) => placeOf.get(ids.find((id) => entryOf(id) === entry)!))).toEqual(
      ids.map((_, i) => i + 1),
    );
    // the lottery's audit pages list the fans in that order, read from the shards' pre-queues
    const byPlace = [...placeOf].sort((a, b) => a[1] - b[1]).map(([id]) => id);
    const pages = [
      await room.lotteryPage(s.evt, { offset: 0, limit: 15 }),
      await room.lotteryPage(s.evt, { offset: 15, limit: 30 }),
    ];
    expect(pages.flatMap((p) => (p.ok ? (p.fanIds ?? []) : [JSON.stringify(p)]))).toEqual(byPlace);
    expect(pages[1]).toMatchObject({ ok: true, offset: 15, preQueued: 43 });
    // the lost numbers' places are vacated for the cursor to skip
    expect(await clients[0]!.zrange(s.k.gone, "0", "-1")).toEqual(["41", "42", "43"]);
    // a pre-queue join straggling past the draw is refused by its frozen shard
    const straggler = await runs[0]!<unknown[]>("records", recordKeysOfBeats(shardKeys[shardOf("late")]!), [
      "join",
      "30000",
      "0",
      "p",
      "late",
      "44",
    ]);
    expect(straggler[1]).toEqual(["frozen", "", "", 0]);
    // a second draw changes nothing
    expect((await room.openNow(s.evt)).ok).toBe(true);
    expect(await clients[0]!.zscore(recordKeysOfBeats(shardKeys[shardOf("dr1")]!)[2]!, "dr1")).toBe(
      String(placeOf.get("dr1")),
    );
    // removing the room takes the shards' records, pre-queues and freezes with it
    ok(await room.remove(s.evt));
    for (const key of shardKeys.flatMap(recordKeysOfBeats)) expect(await clients[0]!.exists(key), key).toBe(0);
  });

  it("revokes on the shards: the record first, then the place barred and the session ended", async () => {
    const s = await slot({ maxActive: 10 });
    const { placeOf, shardKeys, shardOf } = await joinFans(s, ["rv1", "rv2"]);
    ok(await s.rate(1_000));
    await sleep(20);
    const session = await s.claims(0, "claim", placeOf.get("rv1")!, "rv1");
    expect(session[0]).toBe("session");
    const keys = recordKeysOfBeats(shardKeys[shardOf("rv1")]!);
    const admitted = `a|${placeOf.get("rv1")}|0|${session[1]}|${session[2]}|${session[3]}`;
    expect(
      (await runs[0]!<unknown[]>("records", keys, ["cas", "rv1", `w|${placeOf.get("rv1")}|0||0|0`, admitted]))[1],
    ).toBe(1);

    // a fan still in line has no session to revoke, as in every room
    expect(await room.revokeFan(s.evt, "rv2")).toMatchObject({ ok: false, reason: "no_session", status: "waiting" });
    expect(await room.revokeFan(s.evt, "nobody")).toMatchObject({ ok: false, reason: "unknown_fan" });
    expect(await room.revokeFan(s.evt, "rv1")).toEqual({
      ok: true,
      sessionId: session[1],
      freed: true,
      status: "revoked",
    });
    expect((await clients[0]!.hget(keys[1]!, "rv1"))?.startsWith("r|")).toBe(true);
    expect(await clients[0]!.zscore(s.k.active, String(session[1]))).toBeNull();
    expect(await clients[0]!.hget(s.k.claims, String(placeOf.get("rv1")))).toBe("r");
    // its access token's session check now refuses it, and a join is refused on its shard
    const epoch = await clients[0]!.hget(s.k.room, "epoch");
    expect(await room.isSessionActive(s.evt, String(session[1]), epoch ?? "", "rv1")).toMatchObject({
      ok: true,
      active: false,
    });
    const again = await runs[0]!<unknown[]>("records", keys, ["join", "30000", "0", "w", "rv1", "99"]);
    expect((again[1] as unknown[])[0]).toBe("revoked");
    // a second revocation changes nothing
    expect(await room.revokeFan(s.evt, "rv1")).toMatchObject({ ok: true, status: "revoked" });
  });

  it("answers polls from the shards' records: waiting, claimed once by concurrent polls, never over maxActive", async () => {
    const s = await slot({ maxActive: 3 });
    const ids = Array.from({ length: 10 }, (_, i) => `pl${i + 1}`);
    const { placeOf } = await joinFans(s, ids);
    const gateways = [
      room,
      ...clients.slice(1, 3).map((redis) => createWaitingRoom({ redis, secret: SECRET, lineCache: false })),
    ];
    try {
      const first = ok(await gateways[1]!.statusOf(s.evt, "pl4")).place;
      expect(first).toMatchObject({ status: "waiting", position: placeOf.get("pl4"), ahead: 3 });
      ok(await s.rate(1_000));
      await sleep(20);
      const sessions = new Map<string, string>();
      for (let round = 0; round < 12; round++) {
        // every fan polls through every gateway at once
        const polls = await Promise.all(ids.flatMap((id) => gateways.map((g) => g.statusOf(s.evt, id))));
        for (const p of polls) {
          const { fanId, place } = ok(p);
          if (place.status !== "admitted") continue;
          const known = sessions.get(fanId);
          if (known) expect(place.sessionId).toBe(known);
          else sessions.set(fanId, place.sessionId);
        }
        const live = await clients[0]!.zrangebyscore(s.k.active, `(${Date.now()}`, "+inf");
        expect(live.length).toBeLessThanOrEqual(3);
        // one admitted fan completes its purchase: its session ends, a slot frees
        const session = live.find((m) => !m.startsWith("offer:"));
        if (session) await clients[0]!.zrem(s.k.active, session);
        await sleep(5);
      }
      // admitted in the line's order, each with one session of its own, its record on its shard
      expect(sessions.size).toBeGreaterThan(3);
      const admitted = [...sessions.keys()].map((id) => placeOf.get(id)!).sort((a, b) => a - b);
      expect(admitted).toEqual(admitted.map((_, i) => i + 1));
      expect(new Set(sessions.values()).size).toBe(sessions.size);
      const shardKeys = await shardKeysOf(clients[0]!, s.evt);
      const shardOf = await shardOfIn(clients[0]!, s.evt);
      for (const [id, sid] of sessions) {
        const record = await clients[0]!.hget(recordKeysOfBeats(shardKeys[shardOf(id)]!)[1]!, id);
        expect(record?.split("|")[3]).toBe(sid);
      }
    } finally {
      for (const g of gateways.slice(1)) await g.close();
    }
  });

  it("a poll after the abandon time loses the place; a pre-queued fan waits at its drawn place", async () => {
    const s = await slot({ onSaleAt: Date.now() + 1_000, abandonSeconds: 3 });
    await joinFans(s, ["pq1", "pq2", "pq3"]);
    expect(ok(await room.statusOf(s.evt, "pq2")).place).toMatchObject({ status: "prequeue", position: 2, ahead: 2 });
    await sleep(1_100);
    ok(await room.openNow(s.evt));
    const drawn = ok(await room.statusOf(s.evt, "pq2")).place;
    expect(drawn.status).toBe("waiting");
    const shardKeys = await shardKeysOf(clients[0]!, s.evt);
    const shardOf = await shardOfIn(clients[0]!, s.evt);
    const keys = recordKeysOfBeats(shardKeys[shardOf("pq2")]!);
    expect(drawn.position).toBe(Number(await clients[0]!.zscore(keys[2]!, "pq2")));
    expect(await clients[0]!.hget(keys[1]!, "pq2")).toBe(`w|${drawn.position}|2||0|0`);
    // pq3 stops polling: its beat older than the abandon time since the draw
    const drawnAt = await s.field("drawnAt");
    const keys3 = recordKeysOfBeats(shardKeys[shardOf("pq3")]!);
    await clients[0]!.zadd(keys3[0]!, String(drawnAt - 1), "pq3");
    await sleep(3_100);
    expect(ok(await room.statusOf(s.evt, "pq3")).place.status).toBe("abandoned");
    expect(await room.statusOf(s.evt, "stranger")).toMatchObject({ ok: false, reason: "not_joined" });
  });

  it("joins through the gateway's calls: a range and the shards' records, batched, every fan one place", async () => {
    const made = createWaitingRoom({ redis: clients[3]!, secret: SECRET, claims: "shards", fanShards: 4 });
    const evt = roomEventId("shj");
    try {
      ok(
        await made.configure(evt, {
          onSaleAt: new Date(Date.now() - 1_000).toISOString(),
          admitPerSecond: 0,
          maxActive: 10,
          sessionSeconds: 60,
        }),
      );
      const k = waitingRoomKeys(evt);
      expect(await clients[0]!.hget(k.room, "claims")).toBe("2");
      const gateways = [made, ...clients.slice(4, 6).map((redis) => createWaitingRoom({ redis, secret: SECRET }))];
      try {
        // 60 fans through three gateways at once, and each fan's second tab too
        const ids = Array.from({ length: 60 }, (_, i) => `j${i + 1}`);
        const joins = await Promise.all(
          ids.flatMap((id, i) => [gateways[i % 3]!.join(evt, id), gateways[(i + 1) % 3]!.join(evt, id)]),
        );
        const placeOf = new Map<string, number>();
        for (const j of joins) {
          const joined = ok(j);
          expect(joined.place.status).toBe("waiting");
          const held = placeOf.get(joined.fanId);
          if (held !== undefined) expect(joined.place.position).toBe(held);
          else placeOf.set(joined.fanId, joined.place.position);
        }
        // one place a fan: 60 places, each fan's one record on its shard, none on the event's slot
        expect(new Set(placeOf.values()).size).toBe(60);
        expect(await clients[0]!.exists(k.fans)).toBe(0);
        const shardKeys = await shardKeysOf(clients[0]!, evt);
        const shardOf = await shardOfIn(clients[0]!, evt);
        for (const [id, place] of placeOf) {
          expect(await clients[0]!.hget(recordKeysOfBeats(shardKeys[shardOf(id)]!)[1]!, id)).toBe(`w|${place}|0||0|0`);
        }
        // 120 reservations for 60 fans: the second tabs' places were given back, still on their
        // shards or told to the event's slot already by a sweep (a gateway's view refresh runs one)
        const tail = Number(await clients[0]!.hget(k.room, "tail"));
        expect(tail).toBe(120);
        const given = (
          await Promise.all(shardKeys.map((key) => clients[0]!.zrange(recordKeysOfBeats(key)[3]!, "0", "-1")))
        ).flat();
        const vacated = new Set([...given, ...(await clients[0]!.zrange(k.gone, "0", "-1"))].map(Number));
        expect(vacated.size).toBe(60);
        for (const place of placeOf.values()) expect(vacated.has(place)).toBe(false);
        // their polls answer the same places; the repeat join a reload makes too
        const again = ok(await gateways[2]!.join(evt, "j7"));
        expect(again).toMatchObject({ created: false, place: { position: placeOf.get("j7") } });
        expect(ok(await gateways[1]!.statusOf(evt, "j7")).place.position).toBe(placeOf.get("j7"));
        // the 61 reservations no fan took are taken back out of `joined` as a sweep tells them
        // (the gateways' own sweeps may run too), once each: told again, as by a sweep that
        // overlapped another, they change nothing
        const [tagList, shardKey] = await clients[0]!.hmget(k.room, "fanShardTags", "fanShardKey");
        const tags = (tagList ?? "").split(",");
        const beats = createFanBeats(clients[0]!, { shards: tags.length, tagsOf: () => tags, shardKey });
        await sweepFanShards(clients[0]!, beats, evt);
        expect(ok(await made.stats(evt)).stats).toMatchObject({ joined: 60, waiting: 60, lastPosition: 121 });
        const slotRun = registerScripts(
          clients[0]!,
          scriptFamily({ name: "gone-again", files: { claims: "waiting-room/claims-9" } }),
        );
        const told = [...vacated].slice(0, 5).map((p) => `v:${p}`);
        await slotRun("claims", lineKeysWithClaims(k), ["gone", "1", ...told]);
        expect(ok(await made.stats(evt)).stats).toMatchObject({ joined: 60, waiting: 60 });
      } finally {
        for (const g of gateways.slice(1)) await g.close();
      }
    } finally {
      await made.close();
    }
  });

  it("joins as in today's rooms: a purchase's fan placed again at once, a revoked one barred, the invite line, a closed room", async () => {
    const made = createWaitingRoom({ redis: clients[3]!, secret: SECRET, claims: "shards", fanShards: 4 });
    const evt = roomEventId("shjoin2");
    try {
      ok(
        await made.configure(evt, {
          onSaleAt: new Date(Date.now() - 1_000).toISOString(),
          admitPerSecond: 1_000,
          maxActive: 10,
          sessionSeconds: 60,
        }),
      );
      ok(await made.join(evt, "amy"));
      const admitted = await until(async () => {
        const place = ok(await made.statusOf(evt, "amy")).place;
        return place.status === "admitted" ? place : undefined;
      });
      // a live session: the repeat join answers it, no new place
      expect(ok(await made.join(evt, "amy"))).toMatchObject({ created: false, place: { status: "admitted" } });
      // her session ends (a purchase): her next join is a new place at the back, in that one join
      ok(await made.completeSession(evt, admitted.status === "admitted" ? admitted.sessionId : ""));
      const again = ok(await made.join(evt, "amy"));
      expect(again.created).toBe(true);
      expect(["waiting", "admitted"]).toContain(again.place.status);
      expect(again.place.position).toBeGreaterThan(admitted.position);
      expect(ok(await made.stats(evt)).stats.completed).toBe(1);
      // the operator revokes a session by its id: ended, counted, and the fan barred on its shard
      ok(await made.join(evt, "rex"));
      const rex = await until(async () => {
        const place = ok(await made.statusOf(evt, "rex")).place;
        return place.status === "admitted" ? place : undefined;
      });
      expect(ok(await made.revokeSession(evt, rex.status === "admitted" ? rex.sessionId : ""))).toMatchObject({
        freed: true,
        fanId: "rex",
        status: "revoked",
      });
      expect(ok(await made.statusOf(evt, "rex")).place.status).toBe("revoked");
      expect(await made.join(evt, "rex")).toEqual({ ok: false, reason: "revoked" });
      expect(ok(await made.stats(evt)).stats.revoked).toBe(1);
      // an invite line: a new place asks the invite; a place given back comes back flagged, with
      // the invite or without (the routes then ask it), as today's rooms answer (the range refuses
      // before any record is read: the fan's record answers)
      const invite = { credentials: { proofBits: 0, invite: true } };
      ok(await made.updateSettings(evt, { invites: true }));
      expect(ok(await made.join(evt, "ivy", invite))).toMatchObject({ created: true, invites: false });
      expect(ok(await made.join(evt, "ivy", invite))).toMatchObject({ created: false, invites: true });
      expect(ok(await made.join(evt, "amy", invite))).toMatchObject({ created: false, invites: true });
      expect(ok(await made.join(evt, "ivy"))).toMatchObject({ created: false, invites: true });
      expect(await made.join(evt, "ned")).toEqual({ ok: false, reason: "invite_required" });
      expect(await made.join(evt, "rex")).toEqual({ ok: false, reason: "revoked" });
      // a proof of work: asked of a new place only, not of a fan in line
      ok(await made.updateSettings(evt, { invites: false, powBits: 8 }));
      expect(ok(await made.join(evt, "ivy"))).toMatchObject({ created: false, invites: false });
      expect(await made.join(evt, "pat")).toEqual({ ok: false, reason: "pow_required", powBits: 8 });
      ok(await made.updateSettings(evt, { powBits: 0 }));
      // a closed room keeps the places it gave (the range refuses first; the record answers) and
      // gives no new one, nor one to a fan whose place ended
      ok(await made.updateSettings(evt, { closed: true, invites: false }));
      expect(ok(await made.join(evt, "ivy"))).toMatchObject({
        created: false,
        place: { position: expect.any(Number) },
      });
      expect(await made.join(evt, "newbie")).toEqual({ ok: false, reason: "closed" });
      expect(await made.join(evt, "rex")).toEqual({ ok: false, reason: "revoked" });
      expect(await made.join(evt, "amy")).toMatchObject({ ok: true, created: false });
      ok(await made.remove(evt));
    } finally {
      await made.close();
    }
  });

  it("a room restored after its event's slot was lost: shards of its own, the revoked refused on them", async () => {
    const evt = roomEventId("shrestore");
    const settings = { onSaleAt: Date.now() - 1_000, admitPerSecond: 0, maxActive: 10, sessionSeconds: 60 };
    // the decisions kept outside Redis (DynamoDB's in the gateway), as the restore reads them
    const revoked = new Set<string>();
    const made = createWaitingRoom({
      redis: clients[3]!,
      secret: SECRET,
      claims: "shards",
      fanShards: 4,
      restore: async (id) => (id === evt ? { ...settings, revoked: [...revoked] } : null),
      records: {
        claimIdentity: async (_e, _i, fanId) => ({ holder: fanId, fresh: true }),
        releaseIdentity: async () => undefined,
        recordRevocation: async (_e, fanId) => void revoked.add(fanId),
      },
    });
    try {
      ok(await made.configure(evt, { ...settings, onSaleAt: new Date(settings.onSaleAt).toISOString() }));
      for (const id of ["x", "y", "ann", "bad"]) ok(await made.join(evt, id));
      const k = waitingRoomKeys(evt);
      const lostTags = await clients[0]!.hget(k.room, "fanShardTags");
      revoked.add("bad");
      // the event's slot is lost (its master failed over to a replica that had not synced); the
      // shards keep the lost room's records
      await clients[0]!.unlink(...allKeys(k));
      // ann's next join restores the room: a new place 1, not her lost record's place 3
      const again = ok(await made.join(evt, "ann"));
      expect(again).toMatchObject({ created: true, place: { status: "waiting", position: 1 } });
      const tags = await clients[0]!.hget(k.room, "fanShardTags");
      expect(await clients[0]!.hget(k.room, "restoredAt")).not.toBeNull();
      expect(tags).not.toBe(lostTags);
      // the revoked fan is refused by its shard in the new room, from its first join
      expect(await made.join(evt, "bad")).toEqual({ ok: false, reason: "revoked" });
      // and a fan the restored room never saw, revoked now, is refused too
      expect(await made.revokeFan(evt, "stranger")).toMatchObject({ ok: true, status: "revoked" });
      expect(revoked.has("stranger")).toBe(true);
      expect(await made.join(evt, "stranger")).toEqual({ ok: false, reason: "revoked" });
      // (the refused joins' reservations were given back: a newcomer is let in as usual)
      expect(ok(await made.join(evt, "newcomer"))).toMatchObject({ created: true, place: { status: "waiting" } });
      for (const tag of lostTags!.split(",")) await clients[0]!.unlink(...recordKeysOfBeats(`wr:{${tag}}:beats`));
      ok(await made.remove(evt));
    } finally {
      await made.close();
    }
  });

  it("a join through a gateway that knew the room before it was created again is placed in the new room, not refused", async () => {
    const knew = createWaitingRoom({ redis: clients[3]!, secret: SECRET, claims: "shards", fanShards: 3 });
    const other = createWaitingRoom({ redis: clients[4]!, secret: SECRET, claims: "shards", fanShards: 3 });
    try {
      const evt = roomEventId("shagain");
      const settings = {
        onSaleAt: new Date(Date.now() - 1_000).toISOString(),
        admitPerSecond: 0,
        maxActive: 10,
        sessionSeconds: 60,
      };
      ok(await knew.configure(evt, settings));
      expect(ok(await knew.join(evt, "before")).created).toBe(true);
      // The room goes and is created again elsewhere (as a restore after a Redis loss does): new
      // epoch, new shard keys. This gateway still knows the old room.
      ok(await other.remove(evt));
      ok(await other.configure(evt, settings));
      // Ten joins at once through it: the range refuses the old room's, and each joins the new one.
      const joins = (await Promise.all(Array.from({ length: 10 }, (_, i) => knew.join(evt, `after${i}`)))).map(ok);
      expect(joins.every((j) => j.created && j.place.status !== "prequeue")).toBe(true);
      expect(joins.map((j) => j.place.position).sort((a, b) => a - b)).toEqual(
        Array.from({ length: 10 }, (_, i) => i + 1),
      );
      const epoch = await clients[0]!.hget(waitingRoomKeys(evt).room, "epoch");
      const tags = await shardKeysOf(clients[0]!, evt);
      expect(tags.every((key) => key.includes(`:${epoch!.slice(0, 8)}:`))).toBe(true);
      const shardOf = await shardOfIn(clients[0]!, evt);
      expect(await clients[0]!.hget(recordKeysOfBeats(tags[shardOf("after0")]!)[1]!, "after0")).toMatch(/^[wa]\|/);
      ok(await other.remove(evt));
    } finally {
      await other.close();
      await knew.close();
    }
  });

  it("a pre-queued fan polling in the draw's grace after the close is told to come back as the draw ends, not that it is overdue", async () => {
    const made = createWaitingRoom({ redis: clients[3]!, secret: SECRET, claims: "shards", fanShards: 3 });
    const plain = createWaitingRoom({ redis: clients[4]!, secret: SECRET, lineCache: false });
    try {
      const evt = roomEventId("shgrace");
      const onSaleAt = new Date(Date.now() + 3_600_000).toISOString();
      ok(await made.configure(evt, { onSaleAt, admitPerSecond: 10, maxActive: 10, sessionSeconds: 60 }));
      const ids = ["g1", "g2", "g3", "g4", "g5"];
      for (const id of ids) expect(ok(await made.join(evt, id)).place.status).toBe("prequeue");
      const opening = made.openNow(evt);
      await sleep(300);
      // The draw starts DRAW_GRACE_MS after the close: a fan polling 300 ms in hears when it should
      // be done, with an ETA, from Redis and from a gateway's view alike (overdue would be no ETA and
      // 2-5 s: the first fans passed after the draw learned it seconds late).
      const inGrace = (place: { status: string; etaSeconds?: number | null; pollAfterMs?: number }) => {
        expect(place.status).toBe("prequeue");
        expect(place.etaSeconds).toEqual(expect.any(Number));
        expect(place.pollAfterMs).toBeLessThanOrEqual(DRAW_GRACE_MS + 300);
        expect(place.pollAfterMs).toBeGreaterThan(DRAW_GRACE_MS / 2);
      };
      inGrace(ok(await plain.statusOf(evt, "g1")).place);
      const cached = await until(
        async () => {
          const p = await made.statusOf(evt, "g2");
          return p.ok && p.cached && p.place.status === "prequeue" ? p.place : undefined;
        },
        1_200,
        20,
      );
      inGrace(cached);
      ok(await opening);
      expect(ok(await plain.statusOf(evt, "g1")).place.status).toMatch(/^(?:waiting|admitted)$/);
      ok(await made.remove(evt));
    } finally {
      await plain.close();
      await made.close();
    }
  });

  it("a poll Redis answers judges the beat by the gateway's fresh view of the room: no read of the room, the same verdicts", async () => {
    const made = createWaitingRoom({ redis: clients[3]!, secret: SECRET, claims: "shards", fanShards: 3 });
    const plain = createWaitingRoom({ redis: clients[4]!, secret: SECRET, lineCache: false });
    const monitor = await monitorRedis(inject("redisUrl"));
    try {
      const evt = roomEventId("shclock");
      const k = waitingRoomKeys(evt);
      // the reads of the room's abandon clock (line.ts abandonClockOf), by the gateway that made them
      const clockReads: string[] = [];
      monitor.on(({ args, source }) => {
        // (the sweep's read of the room starts with `tail`)
        if (args[0]?.toLowerCase() === "hmget" && args[1] === k.room && args[2] === "abandonSeconds") {
          clockReads.push(source);
        }
      });
      const onSaleAt = new Date(Date.now() + 3_600_000).toISOString();
      ok(
        await made.configure(evt, {
          onSaleAt,
          admitPerSecond: 0,
          maxActive: 10,
          sessionSeconds: 60,
          abandonSeconds: 3,
        }),
      );
      const ids = ["c1", "c2", "c3", "c4", "c5", "c6"];
      for (const id of ids) expect(ok(await made.join(evt, id)).place.status).toBe("prequeue");
      ok(await made.openNow(evt));
      const drawnAt = Number(await clients[0]!.hget(k.room, "drawnAt"));
      const shardKeys = await shardKeysOf(clients[0]!, evt);
      const shardOf = await shardOfIn(clients[0]!, evt);
      const fansKey = (id: string) => recordKeysOfBeats(shardKeys[shardOf(id)]!)[1]!;
      const placeOf = async (id: string) =>
        Number(await clients[0]!.zscore(recordKeysOfBeats(shardKeys[shardOf(id)]!)[2]!, id));
      // the first two places are near the head (nobody admitted): Redis answers their polls
      const byPlace = new Map<number, string>();
      for (const id of ids) byPlace.set(await placeOf(id), id);
      const [one, two] = [byPlace.get(1)!, byPlace.get(2)!];
      // a fan whose beat lapsed since the draw (it stopped polling before the close)
      const gone = byPlace.get(6)!;
      await clients[0]!.zadd(recordKeysOfBeats(shardKeys[shardOf(gone)]!)[0]!, String(drawnAt - 1), gone);
      // once the view that made the room read it again after the draw (openNow invalidates it)
      await sleep(150);
      clockReads.length = 0;
      const viaView = ok(await made.statusOf(evt, one));
      expect(viaView.cached).toBeFalsy();
      // a drawn pre-queued fan's record settled at its place: the view's clock says the draw ran
      expect(viaView.place).toMatchObject({ status: "waiting", position: 1, ahead: 0 });
      // (written back after the answer: the poll does not wait for it)
      await until(async () => ((await clients[0]!.hget(fansKey(one), one))?.startsWith("w|1|") ? true : undefined));
      const viaRoom = ok(await plain.statusOf(evt, two));
      expect(viaRoom.place).toMatchObject({ status: "waiting", position: 2, ahead: 1 });
      await sleep(3_100);
      // the lapsed fan is given up (by this poll, judged by the view's clock, or by the sweep first)
      const lapsed = ok(await made.statusOf(evt, gone));
      expect(lapsed.place.status).toBe("abandoned");
      // a marker through another client: everything sent before it has been relayed
      const marker = `clock-marker-${Math.random()}`;
      const seen = new Promise<void>((resolve) => monitor.on(({ args }) => args[1] === marker && resolve()));
      await clients[0]!.echo(marker);
      await seen;
      // the gateway without a view read the room for its poll; the one with a fresh view did not
      expect(clockReads).toHaveLength(1);
      ok(await made.remove(evt));
    } finally {
      monitor.close();
      await plain.close();
      await made.close();
    }
  });

  it("a fan a gateway knows at its place is claimed in one round trip; one who left that place is answered from its record", async () => {
    const a = createWaitingRoom({ redis: clients[3]!, secret: SECRET, claims: "shards", fanShards: 3 });
    const b = createWaitingRoom({ redis: clients[4]!, secret: SECRET });
    const monitor = await monitorRedis(inject("redisUrl"));
    try {
      const evt = roomEventId("shknown");
      const k = waitingRoomKeys(evt);
      ok(
        await a.configure(evt, {
          onSaleAt: new Date(Date.now() - 1_000).toISOString(),
          admitPerSecond: 0,
          maxActive: 10,
          sessionSeconds: 60,
        }),
      );
      const ids = Array.from({ length: 8 }, (_, i) => `kn${i + 1}`);
      for (const id of ids) ok(await a.join(evt, id));
      const shardKeys = await shardKeysOf(clients[0]!, evt);
      const shardOf = await shardOfIn(clients[0]!, evt);
      const fansKey = (id: string) => recordKeysOfBeats(shardKeys[shardOf(id)]!)[1]!;
      // gateway b learns kn4 and kn5 waiting at their places. (Only kn5 is answered from b's view
      // after: an answer there owes the fan's beat, and a beat b sends for kn4 once kn4 is admitted
      // elsewhere would be found missing, and b would send kn4's polls to Redis as a stranger's.)
      for (const [id, position] of [
        ["kn4", 4],
        ["kn5", 5],
      ] as const) {
        expect(ok(await b.statusOf(evt, id)).place).toMatchObject({ status: "waiting", position });
      }
      await until(async () => (b.cachedStatus(evt, "kn5") ? true : undefined));
      // kn5's record as a drawn fan's: its arrival number (42) kept through the claim
      expect(await clients[0]!.hget(fansKey("kn5"), "kn5")).toBe("w|5|0||0|0");
      await clients[0]!.hset(fansKey("kn5"), "kn5", "w|5|42||0|0");
      ok(await a.updateSettings(evt, { admitPerSecond: 1_000 }));
      // kn4 is admitted through a, its session completed, and it joins again: a new place at the back
      const s1 = await until(async () => {
        const p = ok(await a.statusOf(evt, "kn4")).place;
        return p.status === "admitted" ? p.sessionId : undefined;
      });
      ok(await a.updateSettings(evt, { admitPerSecond: 0 }));
      ok(await a.completeSession(evt, s1));
      // (the place after the one its first reservation took: that went back, the record being admitted)
      const again = ok(await a.join(evt, "kn4")).place;
      expect(again).toMatchObject({ status: "waiting", position: expect.any(Number) });
      expect(again.position).toBeGreaterThan(8);
      await until(async () => (Number(await clients[0]!.hget(k.room, "served")) >= 5 ? true : undefined));
      // once b's view has seen the cursor pass them (it no longer answers their polls itself)
      await until(async () => (b.cachedStatus(evt, "kn5") === null ? true : undefined));
      // the records b's polls of them send the event's slot (status-shard-11.lua; not the shards' write
      // backs), told by b's connection
      const bAddress = `127.0.0.1:${(clients[4] as unknown as { stream: { localPort: number } }).stream.localPort}`;
      const sent: { fanId: string; record: string }[] = [];
      monitor.on(({ args, source }) => {
        if (source !== bAddress || !/^(?:evalsha|eval|fcall)(?:_ro)?$/i.test(args[0] ?? "")) return;
        const fanId = args.find((x) => /^kn[45]$/.test(x));
        const record = args.find((x) => /^[wpaxrec]\|/.test(x));
        if (fanId && record && !args.includes("cas")) sent.push({ fanId, record });
      });
      const viaB = async (fanId: string) => ok(await b.statusOf(evt, fanId)).place;
      // b still knows kn5 at place 5, passed: the slot is asked about that place while the record is
      // read, and its claim stands (the record says the same place)
      const claimed = await viaB("kn5");
      expect(claimed.status).toBe("admitted");
      const sid = claimed.status === "admitted" ? claimed.sessionId : "";
      // the claim is on the record before the token is answered
      expect(await clients[0]!.hget(fansKey("kn5"), "kn5")).toMatch(
        new RegExp(`^a\\|5\\|42\\|${sid.replace(".", "\\.")}\\|`),
      );
      expect(ok(await a.statusOf(evt, "kn5")).place).toMatchObject({ status: "admitted", sessionId: sid });
      // b still knows kn4 at place 4, where the slot keeps its ended session: the record says its new
      // place, so the slot is asked again, and kn4 is waiting there, not admitted in the old session
      expect(await viaB("kn4")).toMatchObject({ status: "waiting", position: again.position });
      expect(await clients[0]!.hget(k.claims, "4")).toMatch(new RegExp(`^${s1.replace(".", "\\.")}\\|`));
      const marker = `known-marker-${Math.random()}`;
      const seen = new Promise<void>((resolve) => monitor.on(({ args }) => args[1] === marker && resolve()));
      await clients[0]!.echo(marker);
      await seen;
      const records = (id: string) => sent.filter((c) => c.fanId === id).map((c) => c.record);
      // kn5: one call on the slot, about the known place; kn4: one more, about its new place
      expect(records("kn5")).toEqual(["w|5|0||0|0"]);
      expect(records("kn4")).toEqual(["w|4|0||0|0", `w|${again.position}|0||0|0`]);
      ok(await a.remove(evt));
    } finally {
      monitor.close();
      await b.close();
      await a.close();
    }
  });

  it("a gateway that does not know a fan finds its record on the fan's shard in a view refresh (no status call)", async () => {
    const made = createWaitingRoom({ redis: clients[3]!, secret: SECRET, claims: "shards", fanShards: 4 });
    const other = createWaitingRoom({ redis: clients[4]!, secret: SECRET });
    try {
      for (const [onSaleAt, status] of [
        [Date.now() + 3_600_000, "prequeue"],
        [Date.now() - 1_000, "waiting"],
      ] as const) {
        const evt = roomEventId("shlook");
        ok(
          await made.configure(evt, {
            onSaleAt: new Date(onSaleAt).toISOString(),
            admitPerSecond: 0,
            maxActive: 10,
            sessionSeconds: 60,
          }),
        );
        const ids = Array.from({ length: 24 }, (_, i) => `${status}${i + 1}`);
        const joins = (await Promise.all(ids.map((id) => made.join(evt, id)))).map(ok);
        const positionOf = new Map(joins.map((j) => [j.fanId, j.place.position]));
        // the other gateway learns the room from the last fan's poll (Redis answers it; the head
        // of a line is Redis's to answer), and its view
        const first = ids.at(-1)!;
        const rest = ids.slice(0, -1);
        expect(ok(await other.statusOf(evt, first)).place.status).toBe(status);
        await until(async () => {
          const p = other.cachedStatus(evt, first);
          return p && "place" in p && p.place.status === status ? true : undefined;
        });
        // the rest, all at once, through a gateway that never saw them: found in its next
        // refresh on their shards (the event's slot has no record of them), answered from the view
        const found = other.lineCacheCounters().found;
        const polls = (await Promise.all(rest.map((id) => other.statusOf(evt, id)))).map(ok);
        expect(other.lineCacheCounters().found - found).toBe(rest.length);
        for (const p of polls) {
          const position = positionOf.get(p.fanId)!;
          // pre-queued: everyone else may end up ahead (the arrival numbers the event's slot gave)
          const ahead = status === "prequeue" ? ids.length - 1 : position - 1;
          expect(p.place).toMatchObject({ status, position, ahead });
        }
        ok(await made.remove(evt));
      }
    } finally {
      await other.close();
      await made.close();
    }
  });
});
