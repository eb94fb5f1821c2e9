/** Shared by the waiting-room tests: connections, unique event ids, concurrent fan-out. */
import { setTimeout as sleep } from "node:timers/promises";
import { randomBytes } from "node:crypto";
import { type Cluster, Redis } from "ioredis";
import { inject, onTestFinished } from "vitest";
import { halfSipKeyFromHex } from "../../src/halfsiphash.js";
import { beatsKeyOf, fanShardOf, recordKeysOfBeats } from "../../src/waiting-room/fan-shards.js";
import { createWaitingRoom, type WaitingRoom } from "../../src/waiting-room/index.js";
import { waitingRoomKeys } from "../../src/waiting-room/keys.js";

export const SECRET = "waiting-room-test-secret-0123456789abcdef";

/** A fresh event id (matches ^[A-Za-z0-9_]{1,32}$); every test uses its own. */
export function eventId(tag: string): string {
  return `${tag.slice(0, 10)}_${randomBytes(8).toString("hex")}`;
}

export interface Gateways {
  /** One waiting room per connection, as several gateway instances would have. */
  rooms: WaitingRoom[];
  room: WaitingRoom;
  clients: Redis[];
  close(): void;
}

/**
 * `onEventSlot` for tests of the scripts a room with its records on the event's slot calls (with
 * TEST_LINE_CLAIMS=shards, the other rooms keep them on the fan shards).
 * `lineCache: false` for tests of the line's scripts themselves (what one call does): the line
 * cache's refreshes (src/waiting-room/line-view.ts) run the tick in the background too.
 */
export function gateways(
  count: number,
  url: string = inject("redisUrl"),
  options: { lineCache?: boolean; onEventSlot?: boolean } = {},
): Gateways {
  const clients = Array.from({ length: count }, () => new Redis(url, { maxRetriesPerRequest: 1 }));
  // TEST_FAN_SHARDS=K runs these rooms with K fan shards (lua/waiting-room/beats-1.lua), to try the
  // whole suite in that mode: TEST_FAN_SHARDS=12 npx vitest run test/waiting-room/
  const fanShards = Number(process.env.TEST_FAN_SHARDS ?? 0);
  const rooms = clients.map((redis) =>
    createWaitingRoom({
      redis,
      secret: SECRET,
      ...(options.lineCache === undefined ? {} : { lineCache: options.lineCache }),
      ...(fanShards > 0 ? { fanShards } : {}),
      // TEST_LINE_CLAIMS=1: the rooms admit by claims (WAITING_ROOM_CLAIMS), the whole suite in that mode;
      // TEST_LINE_CLAIMS=shards (with TEST_FAN_SHARDS): their records live on the fan shards
      // (createWaitingRoom's `claims: "shards"`, no gateway setting yet)
      ...(process.env.TEST_LINE_CLAIMS === "1" ? { claims: true } : {}),
      // `onEventSlot`: the fans' records stay on the event's slot whatever TEST_LINE_CLAIMS says
      // (for a test of the scripts only such a room calls)
      ...(process.env.TEST_LINE_CLAIMS === "shards" && fanShards > 0 && !options.onEventSlot
        ? { claims: "shards" as const }
        : {}),
    }),
  );
  const room = rooms[0];
  if (!room) throw new Error("at least one gateway");
  return {
    rooms,
    room,
    clients,
    close: () => {
      for (const r of rooms) void r.close();
      for (const c of clients) c.disconnect();
    },
  };
}

/** Round-robin over the rooms, all calls in flight at once. */
export function fanOut<T, R>(
  rooms: WaitingRoom[],
  items: readonly T[],
  fn: (room: WaitingRoom, item: T) => Promise<R>,
): Promise<R[]> {
  return Promise.all(items.map((item, i) => fn(rooms[i % rooms.length] as WaitingRoom, item)));
}

export function fans(count: number, prefix = "fan"): string[] {
  return Array.from({ length: count }, (_, i) => `${prefix}-${i + 1}`);
}

/**
 * After an open-now on one gateway, the others' line caches (src/waiting-room/line-view.ts) still
 * answer their pre-queued fans from the view before it, for up to a refresh: wait until every
 * gateway answers every fan from the drawn line.
 */
export function drawnEverywhere(rooms: WaitingRoom[], eventId: string, ids: string[]): Promise<true> {
  return until(async () => {
    const polled = await fanOut(rooms, ids, (r, fanId) => r.statusOf(eventId, fanId));
    return polled.every((p) => p.ok && p.place.status !== "prequeue") ? true : undefined;
  });
}

// The platform's, re-exported for the tests that import it from here.
export { sleep };

/**
 * The places the line has given a session: the fans admitted, and (a room with claims:
 * TEST_LINE_CLAIMS) the sessions offered at places passed that their fans have not claimed yet.
 * What the admission rate and maxActive bound, in either mode.
 */
export function moved(stats: { admitted: number; offered: number }): number {
  return stats.admitted + stats.offered;
}

/**
 * Reads `read` every `everyMs` while a test runs; `stop()` ends it and answers the largest value
 * read. Stopped at the test's end too (onTestFinished), should the test fail first.
 */
export function sampleMax(read: () => Promise<number>, everyMs = 5): { stop(): Promise<number> } {
  let most = 0;
  let sampling = true;
  const loop = (async () => {
    while (sampling) {
      most = Math.max(most, await read());
      await sleep(everyMs);
    }
  })();
  onTestFinished(() => {
    sampling = false;
  });
  return {
    async stop() {
      sampling = false;
      await loop;
      return most;
    },
  };
}

/** Sessions open and offered: what counts against maxActive, in either mode. */
export function occupied(stats: { active: number; offered: number }): number {
  return stats.active + stats.offered;
}

/** Narrow an `ok` result or fail the test with what came back instead. */
export function ok<T extends { ok: boolean }>(result: T): Extract<T, { ok: true }> {
  if (!result.ok) throw new Error(`expected ok, got ${JSON.stringify(result)}`);
  return result as Extract<T, { ok: true }>;
}

/**
 * Poll `probe` until it returns a value (not undefined), at most `timeoutMs`. For conditions that
 * only elapsed Redis time can bring (expiry, abandonment), with a pause between polls.
 */
export async function until<T>(probe: () => Promise<T | undefined>, timeoutMs = 5_000, everyMs = 50): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`condition not reached within ${timeoutMs} ms`);
    await sleep(everyMs);
  }
}

/** The beats keys of a room's fan shards, in shard order, as the room names them (none without). */
export async function shardKeysOf(redis: Redis | Cluster, eventId: string): Promise<string[]> {
  const tags = await redis.hget(waitingRoomKeys(eventId).room, "fanShardTags");
  return tags ? tags.split(",").map(beatsKeyOf) : [];
}

/** The shard of a fan of a room with fan shards, as every gateway computes it: under the room's key. */
export async function shardOfIn(redis: Redis | Cluster, eventId: string): Promise<(fanId: string) => number> {
  const [tags, key] = await redis.hmget(waitingRoomKeys(eventId).room, "fanShardTags", "fanShardKey");
  const shards = tags ? tags.split(",").length : 0;
  if (shards === 0) throw new Error(`${eventId}: no fan shards`);
  const sipKey = key ? halfSipKeyFromHex(key) : null;
  return (fanId) => fanShardOf(fanId, shards, sipKey);
}

/**
 * A fan's last heartbeat as Redis holds it (ms), or null: in `seen`, or, for a room with fan
 * shards (`fanShards` in the room hash), in the fan's shard (src/waiting-room/fan-shards.ts).
 */
export async function lastBeat(redis: Redis | Cluster, eventId: string, fanId: string): Promise<number | null> {
  const k = waitingRoomKeys(eventId);
  const tags = await shardKeysOf(redis, eventId);
  const key = tags.length > 0 ? (tags[(await shardOfIn(redis, eventId))(fanId)] as string) : k.seen;
  const score = await redis.zscore(key, fanId);
  return score === null ? null : Number(score);
}

/**
 * Fans' records (includes/fans.lua's text, or null each) wherever the room keeps them: the event's
 * slot's `fans` hash, or, in a room whose records live on the fan shards (`claims` 2 in the room
 * hash: TEST_LINE_CLAIMS=shards), each fan's shard's `fans` hash.
 */
export async function recordsOf(redis: Redis | Cluster, eventId: string, fanIds: readonly string[]) {
  const k = waitingRoomKeys(eventId);
  if ((await redis.hget(k.room, "claims")) !== "2") return fanIds.length ? redis.hmget(k.fans, ...fanIds) : [];
  const [keys, shardOf] = [await shardKeysOf(redis, eventId), await shardOfIn(redis, eventId)];
  return Promise.all(fanIds.map((fanId) => redis.hget(recordKeysOfBeats(keys[shardOf(fanId)]!)[1]!, fanId)));
}

/** One fan's record wherever the room keeps it (recordsOf). */
export async function recordOf(redis: Redis | Cluster, eventId: string, fanId: string): Promise<string | null> {
  return (await recordsOf(redis, eventId, [fanId]))[0] ?? null;
}

/**
 * The suite runs with the fans' records on the fan shards (TEST_LINE_CLAIMS=shards with
 * TEST_FAN_SHARDS): a join reserves its place in the event's slot before its shard reads the fan's
 * record, so a repeat join's reservation counts in `joined` and `lastPosition` until the sweep
 * gives it back (docs/redis-cluster.md "Steps 2 and 3, call by call").
 */
export const RECORDS_ON_SHARDS =
  process.env.TEST_LINE_CLAIMS === "shards" && Number(process.env.TEST_FAN_SHARDS ?? 0) > 0;

/**
 * The pre-queue key holding a fan (its arrival number, then its drawn place): the event's slot's
 * `pre`, or, in a room whose records live on the fan shards, the fan's shard's.
 */
export async function preKeyOf(redis: Redis | Cluster, eventId: string, fanId: string): Promise<string> {
  const k = waitingRoomKeys(eventId);
  if ((await redis.hget(k.room, "claims")) !== "2") return k.pre;
  const [keys, shardOf] = [await shardKeysOf(redis, eventId), await shardOfIn(redis, eventId)];
  return recordKeysOfBeats(keys[shardOf(fanId)]!)[2]!;
}

/** Fans written at drawn places (`[fanId, place]`) into the pre-queue each is kept in (preKeyOf). */
export async function writePlaces(
  redis: Redis | Cluster,
  eventId: string,
  places: readonly (readonly [string, number])[],
) {
  for (const [fanId, place] of places) await redis.zadd(await preKeyOf(redis, eventId, fanId), place, fanId);
}
