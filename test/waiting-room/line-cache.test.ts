/**
 * The line cache (src/waiting-room/line-view.ts): a waiting fan's poll answered by the process
 * with no Redis call, its heartbeat sent in the process's batch; admission still decided in Redis.
 */
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from "vitest";
import { type SpawnedRedis, spawnRedis } from "../../src/local/redis.js";
import { registerScripts } from "../../src/redis/scripts.js";
import { createWaitingRoom, waitingRoomKeys } from "../../src/waiting-room/index.js";
import { lineKeys } from "../../src/waiting-room/keys.js";
import { waitingRoomScripts } from "../../src/waiting-room/scripts.js";
import {
  eventId,
  fanOut,
  fans,
  type Gateways,
  gateways,
  lastBeat,
  ok,
  recordOf,
  recordsOf,
  SECRET,
  sampleMax,
  sleep,
  until,
} from "./helpers.js";

// A Redis of this file's own.
let server: SpawnedRedis;
let url: string;
let gw: Gateways;
let plain: Gateways;
let raw: Redis;
beforeAll(async () => {
  server = await spawnRedis();
  url = server.url;
  gw = gateways(3, url);
  plain = gateways(1, url, { lineCache: false });
  raw = new Redis(url);
}, 60_000);
afterAll(async () => {
  gw.close();
  plain.close();
  raw.disconnect();
  await server.close();
});

const past = () => Date.now() - 1_000;
/** One session, taken by the first fan: the rest wait, and the cursor stands still. */
const oneSession = { onSaleAt: past(), admitPerSecond: 1, maxActive: 1, sessionSeconds: 300, abandonSeconds: 4 };

/**
 * The commands gateway 0's Redis client sent naming `needle` while `fn` ran: every command an
 * ioredis client sends goes through its sendCommand (the script calls included), so counting there
 * counts what the real Redis received from that gateway. (MONITOR did the same, but its stream on a
 * busy server broke ioredis's reply queue now and then: "Command queue state error".)
 */
async function commandsNaming(needle: string, fn: () => Promise<void>): Promise<string[]> {
  const client = gw.clients[0]!;
  const seen: string[] = [];
  const send = client.sendCommand;
  client.sendCommand = function (this: typeof client, command, ...rest) {
    if (command.args.some((a) => String(a).includes(needle))) seen.push(command.name);
    return send.call(this, command, ...rest);
  } as typeof send;
  try {
    await fn();
  } finally {
    client.sendCommand = send;
  }
  return seen;
}

/**
 * The keepers poll (round-robin over the gateways) every 300 ms until every stopper's place is given
 * up (its record lost), for at most a minute: true when they all were.
 */
async function keepPollingUntilGone(
  evt: string,
  keepers: string[],
  stoppers: Set<string>,
  rooms = gw.rooms,
): Promise<boolean> {
  const abandoned = async () => (await recordsOf(raw, evt, [...stoppers])).every((r) => r?.startsWith("x|"));
  for (let i = 0; i < 200 && !(await abandoned()); i++) {
    await fanOut(rooms, keepers, (r, fanId) => r.statusOf(evt, fanId));
    await sleep(300);
  }
  return abandoned();
}

describe("the line cache", () => {
  it("answers a waiting fan whose turn has not come with no Redis call, as Redis would", async () => {
    const evt = eventId("cached");
    const room = gw.room;
    // One session, taken by the first fan: the rest wait, and the cursor stands still.
    ok(await room.configure(evt, { onSaleAt: past(), admitPerSecond: 1, maxActive: 1, sessionSeconds: 300 }));
    const ids = fans(40, "cf");
    for (const fanId of ids) ok(await room.join(evt, fanId));
    const back = ids[30]!;
    await until(async () => (room.lineCacheCounters().refreshes > 0 ? true : undefined));

    const answered = room.lineCacheCounters().answered;
    const polls: Awaited<ReturnType<typeof room.statusOf>>[] = [];
    const statusCalls = await commandsNaming(`lim:fan:status:${back}`, async () => {
      // 50 polls of the same fan really in flight at once, then one more
      polls.push(...(await Promise.all(Array.from({ length: 50 }, () => room.statusOf(evt, back)))));
      polls.push(await room.statusOf(evt, back));
    });
    expect(statusCalls).toEqual([]);
    expect(room.lineCacheCounters().answered - answered).toBe(51);
    for (const p of polls) expect(ok(p).cached).toBe(true);

    // The same answer the line's own script gives (a room without the cache asks Redis).
    const fromRedis = ok(await plain.room.statusOf(evt, back));
    expect(fromRedis.cached).toBeUndefined();
    const fromCache = ok(polls.at(-1)!).place;
    expect(fromCache).toMatchObject({
      status: fromRedis.place.status,
      position: fromRedis.place.position,
      ahead: fromRedis.place.ahead,
      etaSeconds: fromRedis.place.etaSeconds,
      provisional: false,
    });
    expect(fromCache.position).toBe(31);
    expect(fromCache.ahead).toBe(29);

    // A fan at the front (its turn within a second of admissions) is asked of Redis, which admits.
    const front = ids[1]!;
    const frontCalls = await commandsNaming(`lim:fan:status:${front}`, async () => {
      ok(await room.statusOf(evt, front));
    });
    expect(frontCalls.length).toBe(1);
  });

  it("counts vacated places in `ahead`, and sends a fan the cache no longer knows to Redis", async () => {
    const evt = eventId("vacated");
    const room = gw.room;
    ok(await room.configure(evt, oneSession));
    const ids = fans(20, "vf");
    for (const fanId of ids) ok(await room.join(evt, fanId));
    const back = ids[19]!;
    // Fans 3..6 stop polling and lose their places; the others keep polling.
    const stoppers = new Set(ids.slice(2, 6));
    const keepers = ids.filter((f) => !stoppers.has(f));
    expect(await keepPollingUntilGone(evt, keepers, stoppers)).toBe(true);
    // The cache's view lists the vacated places: `ahead` is what Redis says.
    await sleep(250);
    const cached = ok(await room.statusOf(evt, back));
    const fromRedis = ok(await plain.room.statusOf(evt, back));
    expect(cached.place.ahead).toBe(fromRedis.place.ahead);
    // place 20, fan 1 admitted (the cursor at 1), places 3..6 vacated
    expect(fromRedis.place.ahead).toBe(20 - 1 - 1 - 4);

    // A stopper comes back: the cache did not see it poll within the abandon time, so Redis
    // answers, and tells it the place was lost.
    const returning = ok(await room.statusOf(evt, ids[4]!));
    expect(returning.cached).toBeUndefined();
    expect(returning.place.status).toBe("abandoned");
  });

  it("reads the vacated places again only when a fan is given up, and drops those the cursor passes", async () => {
    // A gateway of its own: its counters (process-wide) count this event's refreshes alone.
    const own = gateways(1, url);
    onTestFinished(() => own.close());
    const room = own.room;
    const evt = eventId("gonekept");
    ok(await room.configure(evt, { ...oneSession, admitPerSecond: 50 }));
    const ids = fans(24, "gk");
    for (const fanId of ids) ok(await room.join(evt, fanId));
    const back = ids[23]!;
    const aheadBoth = async () => {
      const cached = ok(await room.statusOf(evt, back));
      const fromRedis = ok(await plain.room.statusOf(evt, back));
      return { cached: cached.place.ahead, redis: fromRedis.place.ahead, fromCache: cached.cached === true };
    };
    /** Until this gateway's cached answer for the back fan is `ahead` (its view refreshed past a change). */
    const cachedAhead = (ahead: number) =>
      until(
        async () => {
          const both = await aheadBoth();
          return both.fromCache && both.cached === ahead ? both : undefined;
        },
        5_000,
        20,
      );
    // Places 3..7 given up; fan 1 holds the one session, the cursor at 1.
    const stoppers = new Set(ids.slice(2, 7));
    const keepers = ids.filter((f) => !stoppers.has(f));
    expect(await keepPollingUntilGone(evt, keepers, stoppers, own.rooms)).toBe(true);
    expect(await cachedAhead(24 - 1 - 1 - 5)).toEqual({ cached: 17, redis: 17, fromCache: true });

    // Nobody given up since: a second of refreshes keeps the list (Redis sends it no more).
    const before = room.lineCacheCounters();
    for (let t = 0; t < 5; t++) {
      await fanOut(own.rooms, keepers, (r, fanId) => r.statusOf(evt, fanId));
      await sleep(200);
    }
    const counted = room.lineCacheCounters();
    expect(counted.refreshes - before.refreshes).toBeGreaterThanOrEqual(5);
    expect(counted.goneKept - before.goneKept).toBe(counted.refreshes - before.refreshes);
    expect(await aheadBoth()).toEqual({ cached: 17, redis: 17, fromCache: true });

    // The cursor passes the vacated places (fan 1's session ends, fan 2 is admitted; fan 2's ends,
    // the cursor skips 3..7 and admits fan 8). Nobody was given up, so the list is kept, less the
    // places passed: counted still, the back fan would be told 5 fewer ahead than it has.
    const keptBefore = room.lineCacheCounters().goneKept;
    const first = ok(await plain.room.statusOf(evt, ids[0]!)).place;
    ok(await plain.room.completeSession(evt, (first as { sessionId: string }).sessionId));
    const second = await until(async () => {
      const p = ok(await plain.room.statusOf(evt, ids[1]!)).place;
      return p.status === "admitted" ? p : undefined;
    });
    ok(await plain.room.completeSession(evt, (second as { sessionId: string }).sessionId));
    await until(async () => {
      const p = ok(await plain.room.statusOf(evt, ids[7]!)).place;
      return p.status === "admitted" ? true : undefined;
    });
    // place 24, the cursor at 8, nothing vacated ahead
    expect(await cachedAhead(24 - 8 - 1)).toEqual({ cached: 15, redis: 15, fromCache: true });
    expect(room.lineCacheCounters().goneKept).toBeGreaterThan(keptBefore);

    // A fan behind the cursor gives up: its place is read in the next refresh, and counted.
    const leaver = ids[12]!;
    const stillPolling = keepers.filter((f) => f !== leaver && ids.indexOf(f) > 7);
    expect(await keepPollingUntilGone(evt, stillPolling, new Set([leaver]), own.rooms)).toBe(true);
    expect(await cachedAhead(24 - 8 - 2)).toEqual({ cached: 14, redis: 14, fromCache: true });
  });

  it("answers joins behind a long line from the cache: the batch's call sends no fan view, and each place is Redis's", async () => {
    const evt = eventId("newplaces");
    const room = gw.room;
    ok(await room.configure(evt, oneSession));
    const ahead = fans(30, "np");
    for (const fanId of ahead) ok(await room.join(evt, fanId));
    // This process's view of the line, read once the first fan's admission is in it (the cursor at
    // 1, where it stays: one session): the last fan's poll, answered from the cache, counts 28 ahead.
    // A view read before that admission is a refresh old, not wrong, but would count one more.
    await until(async () => {
      const last = ok(await room.statusOf(evt, ahead[29]!));
      return last.cached && last.place.ahead === 28 ? true : undefined;
    });

    const before = room.lineCacheCounters().newPlaces;
    const batches = room.joinBatchCounters().batches;
    const ids = fans(20, "npj");
    // 20 joins really in flight at once: one batch (or two), each placed without the view.
    const joined = await Promise.all(ids.map((fanId) => room.join(evt, fanId)));
    expect(room.joinBatchCounters().batches - batches).toBeLessThanOrEqual(2);
    expect(room.lineCacheCounters().newPlaces - before).toBe(20);
    const positions = joined.map((j) => ok(j).place.position).sort((a, b) => a - b);
    expect(positions).toEqual(Array.from({ length: 20 }, (_, i) => 31 + i));
    for (const [i, j] of joined.entries()) {
      const placed = ok(j);
      expect(placed.created).toBe(true);
      // What Redis says of the same fan, asked by a process without a cache.
      const fromRedis = ok(await plain.room.statusOf(evt, ids[i]!)).place;
      // (The advice, pollAfterMs and the ETA, follows the admission rate each side measured; the
      // view's may be a refresh older.)
      expect(placed.place).toMatchObject({ status: "waiting", position: fromRedis.position, ahead: fromRedis.ahead });
      expect(placed.place.pollAfterMs).toBeGreaterThan(0);
      // The token names the fan and the room's epoch, as a join answered with the view does.
      const token = room.verifyQueueToken(placed.queueToken, evt);
      expect(token.ok && token.claims).toMatchObject({
        fanId: ids[i],
        epoch: await raw.hget(waitingRoomKeys(evt).room, "epoch"),
      });
    }

    // A process without a cache asks for the view, as always.
    const other = ok(await plain.room.join(evt, fans(1, "npplain")[0]!));
    expect(other.place).toMatchObject({ status: "waiting", position: 51, ahead: 49 });
  });

  it("a new place the view cannot answer (its turn near, once the vacated places are counted) is answered by Redis", async () => {
    const evt = eventId("newnear");
    const room = gw.room;
    ok(await room.configure(evt, oneSession));
    const ahead = fans(12, "nn");
    for (const fanId of ahead) ok(await room.join(evt, fanId));
    // Places 2..11 given up (their fans stop polling): the script sees the next arrival 12 places
    // behind the cursor (room for a place without the view), this process's view sees 1 place ahead
    // of it (too near to answer).
    const stoppers = new Set(ahead.slice(1, 11));
    const keepers = ahead.filter((f) => !stoppers.has(f));
    expect(await keepPollingUntilGone(evt, keepers, stoppers)).toBe(true);
    // The view with them: the last fan's poll, one place from its turn, is no longer the cache's.
    await until(async () => {
      const last = ok(await room.statusOf(evt, ahead[11]!));
      return !last.cached && last.place.ahead === 0 ? true : undefined;
    });
    // and a refresh begun after that, so the view lists every vacated place
    const refreshes = room.lineCacheCounters().refreshes;
    await until(async () => (room.lineCacheCounters().refreshes >= refreshes + 2 ? true : undefined));
    const before = room.lineCacheCounters();
    const late = fans(1, "nnj")[0]!;
    const joined = ok(await room.join(evt, late));
    const after = room.lineCacheCounters();
    expect(after.newPlacesDeclined - before.newPlacesDeclined).toBe(1);
    expect(after.newPlaces - before.newPlaces).toBe(0);
    expect(joined.created).toBe(true);
    expect(joined.place).toMatchObject({ status: "waiting", position: 13, ahead: 1 });
    const fromRedis = ok(await plain.room.statusOf(evt, late)).place;
    expect(fromRedis).toMatchObject({ status: "waiting", position: 13, ahead: 1 });
  });

  it("keeps a place answered only from the cache: its heartbeats reach Redis in the batch", async () => {
    const evt = eventId("beats");
    const room = gw.room;
    ok(await room.configure(evt, oneSession));
    const ids = fans(12, "hb");
    for (const fanId of ids) ok(await room.join(evt, fanId));
    // The one session, held by the first fan, so the others wait whoever stops polling. (A room
    // with claims, TEST_LINE_CLAIMS, opens it when the fan claims its offer at a poll; an offer
    // nobody claims is given back once its fan is given up, and the next place's is made.)
    await until(async () => (ok(await room.statusOf(evt, ids[0]!)).place.status === "admitted" ? true : undefined));
    const keeper = ids[10]!;
    const leaver = ids[11]!;
    const joinedSeen = Number(await lastBeat(raw, evt, keeper));
    const started = Date.now();
    let cachedPolls = 0;
    let polls = 0;
    const statusCalls = await commandsNaming(`lim:fan:status:${keeper}`, async () => {
      // Past the abandon time, polling every 400 ms, always on this gateway.
      while (Date.now() - started < 6_000) {
        const p = ok(await room.statusOf(evt, keeper));
        expect(p.place.status).toBe("waiting");
        polls++;
        if (p.cached) cachedPolls++;
        await sleep(400);
      }
    });
    // Most polls were answered from the cache (a poll finding the view older than a second, on a
    // loaded machine, asks Redis)...
    expect(cachedPolls).toBeGreaterThanOrEqual(polls / 2);
    expect(statusCalls.length).toBeLessThan(cachedPolls);
    // ...and its heartbeats reached Redis: the place is kept, seen lately.
    expect(Number(await lastBeat(raw, evt, keeper))).toBeGreaterThan(joinedSeen + 4_000);
    expect((await recordOf(raw, evt, keeper))?.startsWith("w|")).toBe(true);
    // The fan who joined with it and never polled again lost the place.
    expect((await recordOf(raw, evt, leaver))?.startsWith("x|")).toBe(true);
  });

  it("a fan that joined through another process is looked up in that process's next refresh, not sent to Redis", async () => {
    const evt = eventId("lookup");
    // Gateway 0 takes the joins; gateway 1 has never heard of these fans.
    const [joiner, other] = [gw.rooms[0]!, gw.rooms[1]!];
    ok(await joiner.configure(evt, oneSession));
    const ids = fans(30, "lk");
    for (const fanId of ids) ok(await joiner.join(evt, fanId));
    // gateway 1's view of this event exists once it has served a poll of it (the first fan's:
    // admitted, Redis's to answer)
    ok(await other.statusOf(evt, ids[0]!));
    const refreshed = other.lineCacheCounters().refreshes;
    await until(async () => (other.lineCacheCounters().refreshes > refreshed + 1 ? true : undefined));

    const before = other.lineCacheCounters();
    const back = ids.slice(10, 20);
    const polledAt = Date.now();
    // ten fans' first polls at gateway 1, all in flight at once: one refresh looks them all up
    const polls = (await Promise.all(back.map((fanId) => other.statusOf(evt, fanId)))).map(ok);
    const after = other.lineCacheCounters();
    for (const [i, p] of polls.entries()) {
      expect(p.place).toMatchObject({ status: "waiting", position: 11 + i, ahead: 9 + i });
      // answered from the view once found (with fan shards: the record here, the beat on its shard)
      expect(p.cached).toBe(true);
    }
    expect(after.lookups - before.lookups).toBe(10);
    expect(after.found - before.found).toBe(10);
    // the poll's beat is in Redis (the lookup records it, as a heartbeat): the place is kept
    for (const fanId of back) expect(Number(await lastBeat(raw, evt, fanId))).toBeGreaterThanOrEqual(polledAt - 50);
    // ...so those answers owe none: the refreshes after carry no heartbeat of theirs
    await until(async () => (other.lineCacheCounters().refreshes > after.refreshes + 1 ? true : undefined));
    expect(other.lineCacheCounters().beats - after.beats).toBe(0);
    // their next polls are answered at once from the view (known now), and owe their beats
    const again = ok(await other.statusOf(evt, back[0]!));
    expect(again.cached).toBe(true);
    expect(other.lineCacheCounters().lookups).toBe(after.lookups);
    const owed = other.lineCacheCounters();
    // (a room with fan shards holds a lone beat for BEATS_HELD_MS before its shard takes it)
    await until(async () => (other.lineCacheCounters().beats > owed.beats ? true : undefined));
    expect(other.lineCacheCounters().beats - owed.beats).toBe(1);

    // A fan admitted (Redis's to answer) is looked up once, not found, and then asked of Redis
    // at once: no lookup for each of its polls.
    const admitted = ok(await other.statusOf(evt, ids[0]!));
    expect(admitted.place.status).toBe("admitted");
    expect(other.lineCacheCounters().lookups).toBe(after.lookups);

    // A fan whose last beat is older than the abandon time less two refreshes and a second
    // (4 s - 1.2 s here) may be losing its place: not found, Redis answers that poll.
    const late = ids[25]!;
    await sleep(3_000);
    // A view read just now (on a loaded machine a refresh may lag, and a view over a second old
    // sends every poll to Redis without a lookup: not what this checks).
    const fresh = other.lineCacheCounters().refreshes;
    await until(async () => (other.lineCacheCounters().refreshes > fresh ? true : undefined));
    const lookedUp = other.lineCacheCounters();
    const p = ok(await other.statusOf(evt, late));
    expect(p.cached).toBeUndefined();
    expect(other.lineCacheCounters().lookups - lookedUp.lookups).toBe(1);
    expect(other.lineCacheCounters().found - lookedUp.found).toBe(0);
  });

  it("a pre-queued fan that joined through another process is looked up too, with its arrival number", async () => {
    const evt = eventId("lookuppre");
    const [joiner, other] = [gw.rooms[0]!, gw.rooms[1]!];
    // The pre-queue is open for a minute: every poll's answer is provisional, the arrival number.
    ok(await joiner.configure(evt, { ...oneSession, onSaleAt: Date.now() + 60_000 }));
    const ids = fans(12, "lp");
    for (const fanId of ids) ok(await joiner.join(evt, fanId));
    ok(await other.statusOf(evt, ids[0]!));
    const refreshed = other.lineCacheCounters().refreshes;
    await until(async () => (other.lineCacheCounters().refreshes > refreshed + 1 ? true : undefined));

    const before = other.lineCacheCounters();
    const back = ids.slice(4, 10);
    const polls = (await Promise.all(back.map((fanId) => other.statusOf(evt, fanId)))).map(ok);
    for (const [i, p] of polls.entries()) {
      expect(p.place).toMatchObject({ status: "prequeue", position: 5 + i, provisional: true });
      expect(p.cached).toBe(true);
    }
    const after = other.lineCacheCounters();
    expect([after.lookups - before.lookups, after.found - before.found]).toEqual([6, 6]);
    // Redis answers the same: the view's answer is the record's.
    const plainRoom = plain.rooms[0]!;
    for (const [i, fanId] of back.entries()) {
      expect(ok(await plainRoom.statusOf(evt, fanId)).place).toMatchObject({ status: "prequeue", position: 5 + i });
    }
  });

  it("while the draw is pending, a pre-queued fan's poll is answered from the view, and still kicks the draw", async () => {
    const evt = eventId("drawpend");
    const room = gw.rooms[0]!;
    const onSaleAt = Date.now() + 1_500;
    ok(await room.configure(evt, { ...oneSession, abandonSeconds: 30, onSaleAt }));
    // Another process holds the draw (its lock, draw.ts): the draw stays pending after the close.
    const lock = `${waitingRoomKeys(evt).room}:draw-lock`;
    await raw.set(lock, "another-process", "PX", 60_000);
    const ids = fans(20, "dp");
    (await fanOut([room], ids, (r, fanId) => r.join(evt, fanId))).map(ok);
    for (const p of await Promise.all(ids.map((fanId) => room.statusOf(evt, fanId)))) {
      expect(ok(p).place.status).toBe("prequeue");
    }
    // Past the on-sale, and this process's view has seen the close.
    await until(async () => {
      const p = room.cachedStatus(evt, ids[0]!);
      return p && "place" in p && p.place.status === "prequeue" && Date.now() > onSaleAt + 200 ? true : undefined;
    });
    const polls = (await Promise.all(ids.map((fanId) => room.statusOf(evt, fanId)))).map(ok);
    const cached = polls.filter((p) => p.cached === true);
    expect(cached.length, JSON.stringify(polls[0])).toBeGreaterThanOrEqual(ids.length - 1);
    // As Redis answers them (a gateway without the cache): the arrival number, the whole
    // pre-queue but the fan ahead, no place yet, the draw's advice (its ETA moves with the time
    // since the close, so it is not compared: these Redis polls come later).
    const plainRoom = plain.rooms[0]!;
    for (const [i, fanId] of ids.entries()) {
      const p = polls[i]!;
      if (p.cached !== true) continue;
      const fromRedis = ok(await plainRoom.statusOf(evt, fanId)).place;
      expect(p.place, fanId).toMatchObject({
        status: "prequeue",
        provisional: true,
        onSaleAt: new Date(onSaleAt).toISOString(),
        position: fromRedis.position,
        ahead: fromRedis.ahead,
      });
      expect(fromRedis.ahead).toBe(ids.length - 1);
      expect(p.place.pollAfterMs).toBeGreaterThanOrEqual(100);
    }
    // The lock goes: the polls answered from the cache alone (as the HTTP fast path answers them)
    // kick the draw, and the fans learn their places.
    await raw.del(lock);
    const drawn = await until(
      async () => {
        for (const fanId of ids) room.cachedStatus(evt, fanId);
        const stats = ok(await room.stats(evt)).stats;
        return stats.drawing ? undefined : stats;
      },
      10_000,
      100,
    );
    expect(drawn.drawing).toBe(false);
  });

  it("after the draw, a pre-queued fan's next poll is a lookup of its drawn place, not a Redis poll of its own", async () => {
    const evt = eventId("drawnlook");
    const room = gw.rooms[0]!;
    ok(await room.configure(evt, { ...oneSession, onSaleAt: Date.now() + 60_000 }));
    const ids = fans(30, "dl");
    (await fanOut([room], ids, (r, fanId) => r.join(evt, fanId))).map(ok);
    // Known here as pre-queued (provisional arrival numbers), then the close and the draw.
    for (const p of await Promise.all(ids.map((fanId) => room.statusOf(evt, fanId)))) {
      expect(ok(p).place.status).toBe("prequeue");
    }
    ok(await room.openNow(evt));
    const refreshed = room.lineCacheCounters().refreshes;
    await until(async () => (room.lineCacheCounters().refreshes > refreshed + 1 ? true : undefined));

    // Every fan polls at once, as the pre-queue does after the draw.
    const before = room.lineCacheCounters();
    const polls = (await Promise.all(ids.map((fanId) => room.statusOf(evt, fanId)))).map(ok);
    const after = room.lineCacheCounters();
    const said = JSON.stringify({ before, after });
    // One session (maxActive 1, 1/s): the fan at place 1 is admitted, place 2's turn is near (Redis
    // answers both); every other fan's drawn place is looked up and answered from the view.
    const cached = polls.filter((p) => p.cached === true);
    expect(cached.length, said).toBeGreaterThanOrEqual(ids.length - 3);
    expect(after.lookups - before.lookups, said).toBeGreaterThanOrEqual(ids.length - 3);
    // found: every one behind the cursor (those near their turn then declined by the view, as polls)
    expect(after.found - before.found, said).toBeGreaterThanOrEqual(cached.length);
    // The places are the draw's: what Redis answers for each fan (a gateway without the cache).
    const plainRoom = plain.rooms[0]!;
    for (const [i, fanId] of ids.entries()) {
      const fromRedis = ok(await plainRoom.statusOf(evt, fanId)).place;
      const p = polls[i]!;
      if (p.cached !== true) continue;
      expect(p.place.status).toBe("waiting");
      expect(p.place, fanId).toMatchObject({ status: fromRedis.status, position: fromRedis.position });
    }
    // Each drawn place answered is one fan's (the draw is a permutation of 1..30).
    const places = polls.filter((p) => p.cached).map((p) => (p.place as { position: number }).position);
    expect(new Set(places).size).toBe(places.length);
    for (const place of places) expect(place >= 1 && place <= ids.length).toBe(true);
  });

  it("a refresh moves the beats of the fans in line and names the others missing, whether or not any is", async () => {
    // A room whose beats are in `seen` (no fan shards, whatever TEST_FAN_SHARDS says): this is
    // line-view-8.lua's own heartbeat path.
    const room = createWaitingRoom({ redis: raw, secret: SECRET, lineCache: false });
    const evt = eventId("missing");
    ok(await room.configure(evt, oneSession));
    const ids = fans(6, "ms");
    for (const fanId of ids) ok(await room.join(evt, fanId));
    ok(await room.statusOf(evt, ids[0]!)); // admitted: the one session
    const k = waitingRoomKeys(evt);
    const run = registerScripts(raw, waitingRoomScripts);
    const refresh = async (polled: string[]) => {
      // no lookups (0, recent 0), then the beats
      const reply = await run<unknown[]>("lineView", lineKeys(k), ["16", "0", "0", "", "", ...polled]);
      expect(reply[reply.length - 4]).toBe("missing");
      expect(reply.slice(-2)).toEqual(["found", []]);
      return (reply[reply.length - 3] as string[]).sort();
    };
    // ids[0] holds the one session; the rest are in line. Every fan sent is in line: none missing
    // (ZADD alone answers), and every beat moved forward.
    const inLine = ids.slice(1);
    const before = await Promise.all(inLine.map((f) => lastBeat(raw, evt, f)));
    await sleep(5);
    expect(await refresh(inLine)).toEqual([]);
    const after = await Promise.all(inLine.map((f) => lastBeat(raw, evt, f)));
    for (const [i, beat] of after.entries()) expect(Number(beat)).toBeGreaterThan(Number(before[i]));
    // With the admitted fan and a stranger among them: those two are missing, nobody is added.
    await sleep(5);
    expect(await refresh([...inLine, ids[0]!, "stranger"])).toEqual([ids[0]!, "stranger"].sort());
    expect(await raw.zscore(k.seen, "stranger")).toBeNull();
    expect(await raw.zscore(k.seen, ids[0]!)).toBeNull();
    // The same fans twice in one millisecond: the second refresh moves no beat (GT), and still
    // names nobody missing.
    const twice = await Promise.all([refresh(inLine), refresh(inLine)]);
    expect(twice).toEqual([[], []]);
  });

  it("a view that cannot be refreshed answers nothing: dropped at a failed refresh, old after a second of a slow one", async () => {
    const evt = eventId("stale");
    const room = gw.room;
    ok(await room.configure(evt, oneSession));
    const ids = fans(12, "st");
    for (const fanId of ids) ok(await room.join(evt, fanId));
    const back = ids.slice(4);
    const pollAll = () => Promise.all(back.map((fanId) => room.statusOf(evt, fanId)));
    const allCached = async () => {
      const polled = await pollAll();
      return polled.every((p) => p.ok && p.cached) ? true : undefined;
    };
    await until(allCached, 5_000, 50);
    const k = waitingRoomKeys(evt);

    // The event's slot failing (a line key of the wrong type, as no code writes it): the first
    // refresh that fails drops the view, and the polls go to Redis, which answers them 503.
    const failed = room.lineCacheCounters();
    await raw.set(k.gone, "not a zset");
    try {
      await until(async () => (room.lineCacheCounters().failedRefreshes > failed.failedRefreshes ? true : undefined));
      const polled = await pollAll();
      for (const p of polled) expect(p).toMatchObject({ ok: false, reason: "unavailable" });
      const counted = room.lineCacheCounters();
      expect(counted.staleAsked - failed.staleAsked).toBeGreaterThanOrEqual(back.length);
      expect(counted.answered).toBe(failed.answered);
    } finally {
      await raw.del(k.gone);
    }
    // Mended: the next refresh makes a view again, and the polls are answered from it.
    await until(allCached, 5_000, 50);

    // The event's master slow (holding every write, the refresh's script included, for 1.5 s): the
    // view is answered from for a second after its last refresh, then every poll goes to Redis
    // (held with the rest until the pause ends) instead of being told a place a stale view gives.
    const slow = room.lineCacheCounters();
    await raw.call("CLIENT", "PAUSE", "1500", "WRITE");
    const pausedAt = Date.now();
    await sleep(1_100);
    const polled = await pollAll();
    const waited = Date.now() - pausedAt;
    for (const p of polled) expect(ok(p).place.status).toBe("waiting");
    const counted = room.lineCacheCounters();
    expect(counted.staleAsked - slow.staleAsked, `${waited} ms`).toBe(back.length);
    expect(counted.answered, `${waited} ms`).toBe(slow.answered);
    expect(counted.failedRefreshes).toBe(slow.failedRefreshes);
    expect(waited).toBeGreaterThanOrEqual(1_400);
    await until(allCached, 5_000, 50);
  });

  it("never exceeds maxActive with three gateways admitting at once, and admits every fan in place order", async () => {
    const evt = eventId("three");
    const maxActive = 8;
    ok(await gw.room.configure(evt, { onSaleAt: past(), admitPerSecond: 150, maxActive, sessionSeconds: 300 }));
    const ids = fans(120, "tg");
    const joined = await fanOut(gw.rooms, ids, (r, fanId) => r.join(evt, fanId));
    const placeOf = new Map(joined.map((j) => [ok(j).fanId, ok(j).place.position]));
    const k = waitingRoomKeys(evt);
    const sampler = sampleMax(() => raw.zcard(k.active));
    const admittedAt = new Map<string, number>();
    // Every fan polls as told (pollAfterMs), each poll to the next gateway; once admitted it
    // shops a little and completes, freeing the slot. All fans in flight at once.
    await Promise.all(
      ids.map(async (fanId, i) => {
        for (let turn = i; ; turn++) {
          const r = gw.rooms[turn % 3]!;
          const p = ok(await r.statusOf(evt, fanId)).place;
          if (p.status === "admitted") {
            admittedAt.set(fanId, Date.parse(p.admittedAt));
            await sleep(20 + (i % 7) * 10);
            ok(await r.completeSession(evt, p.sessionId));
            return;
          }
          expect(p.status).toBe("waiting");
          await sleep(Math.min(p.pollAfterMs ?? 1_000, 1_000));
        }
      }),
    );
    const maxSeen = await sampler.stop();
    expect(admittedAt.size).toBe(ids.length);
    expect(maxSeen).toBeLessThanOrEqual(maxActive);
    expect(maxSeen).toBeGreaterThan(0);
    // The line admits in place order: admission times never go backwards along the places. A room
    // with claims (TEST_LINE_CLAIMS) offers in place order, and each fan claims at its next poll:
    // a claim may follow a later place's by at most one poll (at most 1 s here).
    const slack = process.env.TEST_LINE_CLAIMS === "1" ? 1_000 : 0;
    const byPlace = [...admittedAt].sort((a, b) => placeOf.get(a[0])! - placeOf.get(b[0])!);
    let latest = 0;
    for (const [, at] of byPlace) {
      expect(at).toBeGreaterThanOrEqual(latest - slack);
      latest = Math.max(latest, at);
    }
    const stats = ok(await gw.room.stats(evt)).stats;
    expect(stats).toMatchObject({ admitted: ids.length, completed: ids.length, abandoned: 0 });
    // Most polls of fans far back were answered by the gateways themselves.
    const answered = gw.rooms.reduce((n, r) => n + r.lineCacheCounters().answered, 0);
    expect(answered).toBeGreaterThan(0);
  });
});
