/**
 * The fan shards of one event's line (issue 28 goal 3; the plan in docs/redis-cluster.md "One
 * event over many masters"): per-fan work (heartbeats first, then the fans' records) moves off the
 * event's hash tag `{evt:E}` into K shards, each under a tag of its own, so that one event's line
 * is spread over a cluster's masters instead of loading one.
 *
 * Step 1 of the plan: the heartbeats. A room configured with `fanShards` K > 0 keeps them here
 * (lua/waiting-room/beats-1.lua), written by the joins before their places, by every poll Redis
 * answers and by every line-view refresh for the polls answered from the cache; the sweep
 * (fan-sweep.ts, run by whichever gateway the line hands it to) gives lost places up. A room
 * without (K = 0, the default) keeps them in `wr:{evt:E}:seen` as before. The fans' records stay on
 * the event's slot (steps 2 and 3 are not built).
 *
 * A shard's tag is `evt:E:s<k>.<salt>`: `<salt>` is the first integer that puts shard k's slot in
 * the k-th K-th of the 16,384 slots. Cluster starters and most operators give masters contiguous
 * slot ranges, so the K shards land evenly on the masters (K = 12: four per master on 3, two on 6)
 * instead of where the hash would put them. A few CRC16s per shard, once per event.
 */
import { randomBytes } from "node:crypto";
import { type HalfSipKey, halfSipHashString, halfSipKeyFromHex } from "../halfsiphash.js";
import { type RedisClient, registerScripts, scriptFamily } from "../redis/scripts.js";
import { isEventId } from "./keys.js";
import { limitTable } from "./join-batch.js";

/** Redis Cluster's hash slots. */
export const CLUSTER_SLOTS = 16_384;
/** Shards per event unless configured otherwise: divides evenly over 1, 2, 3, 4, 6 and 12 masters. */
export const DEFAULT_FAN_SHARDS = 12;
/** At most this many shards (a line script names one key per shard it touches). */
export const MAX_FAN_SHARDS = 256;

// CRC16-CCITT (XMODEM), Redis Cluster's key hash (cluster.c keyHashSlot).
const CRC16_TABLE = (() => {
  const table = new Uint16Array(256);
  for (let i = 0; i < 256; i++) {
    let crc = i << 8;
    for (let bit = 0; bit < 8; bit++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
    table[i] = crc;
  }
  return table;
})();

function crc16(bytes: Uint8Array): number {
  let crc = 0;
  for (const byte of bytes) crc = ((crc << 8) & 0xffff) ^ (CRC16_TABLE[((crc >> 8) ^ byte) & 0xff] as number);
  return crc;
}

/** The cluster slot of a key, as Redis computes it: the hash tag's (the first non-empty `{...}`) or the whole key's. */
export function keySlot(key: string): number {
  const open = key.indexOf("{");
  if (open >= 0) {
    const close = key.indexOf("}", open + 1);
    if (close > open + 1) key = key.slice(open + 1, close);
  }
  return crc16(Buffer.from(key, "utf8")) % CLUSTER_SLOTS;
}

/**
 * The K shard tags of an event, shard k's slot in [k * 16384 / K, (k + 1) * 16384 / K). A
 * `generation` (a room whose records live on the shards: its epoch) makes them the room's own, so
 * a room created again after its event's slot was lost never finds the lost room's records.
 */
export function fanShardTags(eventId: string, shards = DEFAULT_FAN_SHARDS, generation = ""): string[] {
  if (!isEventId(eventId)) throw new RangeError(`invalid event id: ${JSON.stringify(eventId)}`);
  if (!Number.isInteger(shards) || shards < 1 || shards > MAX_FAN_SHARDS) {
    throw new RangeError(`fan shards: 1 to ${MAX_FAN_SHARDS}, not ${shards}`);
  }
  const tags: string[] = [];
  for (let k = 0; k < shards; k++) {
    const low = Math.floor((k * CLUSTER_SLOTS) / shards);
    const high = Math.floor(((k + 1) * CLUSTER_SLOTS) / shards);
    // A range of 16384/K slots is hit once in K tries on average; 256 shards: 64 slots, ~256 tries.
    for (let salt = 0; ; salt++) {
      const tag = `evt:${eventId}:${generation}s${k}.${salt}`;
      const slot = keySlot(`{${tag}}`);
      if (slot >= low && slot < high) {
        tags.push(tag);
        break;
      }
    }
  }
  return tags;
}

/**
 * The K shard tags of a room about to be created, on a cluster whose slot owners `ownerOf` tells
 * (ioredis's slot map: slot -> master): shard k goes to the k-th of the masters other than the
 * event's own (round robin), so the per-fan work leaves the master that runs the line's scripts;
 * on one master, or without a slot map (one server), fanShardTags's even split. The tags are kept
 * in the room (`fanShardTags`), so every process uses the room's, whatever the cluster did since.
 */
export function placeFanShards(
  eventId: string,
  shards: number,
  ownerOf?: (slot: number) => string | undefined,
  generation = "",
): string[] {
  const even = fanShardTags(eventId, shards, generation);
  if (!ownerOf) return even;
  const eventOwner = ownerOf(keySlot(`{evt:${eventId}}`));
  const masters = new Set<string>();
  for (let slot = 0; slot < CLUSTER_SLOTS; slot += 16) {
    const owner = ownerOf(slot);
    if (owner !== undefined && owner !== eventOwner) masters.add(owner);
  }
  const targets = [...masters].sort();
  if (targets.length === 0) return even;
  return even.map((tag, k) => {
    const target = targets[k % targets.length] as string;
    if (ownerOf(keySlot(`{${tag}}`)) === target) return tag;
    // A master holds about 1/M of the slots: a few tries each. Bounded, in case the map is odd.
    for (let salt = 0; salt < 100_000; salt++) {
      const candidate = `evt:${eventId}:${generation}s${k}.m${salt}`;
      if (ownerOf(keySlot(`{${candidate}}`)) === target) return candidate;
    }
    return tag;
  });
}

/**
 * The shard a fan belongs to, the same in every process: with the room's shard key (`fanShardKey`,
 * 8 random bytes drawn when the room is created, kept in the room), HalfSipHash-2-4 of the fan id
 * under it, mod K; without (a room created before the key, or a caller outside a room), FNV-1a
 * (32 bits) of the fan id, mod K.
 *
 * Keyed, so that whoever chooses fan ids (an event whose `fanIds` is `any`) cannot choose their
 * shards: with FNV-1a, which anyone can compute, an attacker could put every fan they join on one
 * shard, and so on one master (docs/redis-cluster.md "Fans aimed at one shard").
 */
export function fanShardOf(fanId: string, shards: number, key?: HalfSipKey | null): number {
  if (key) return halfSipHashString(key, fanId) % shards;
  let hash = 0x811c9dc5;
  for (let i = 0; i < fanId.length; i++) {
    hash ^= fanId.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash % shards;
}

/** One part of a batch of beats: its fans, and the shard's reply (null: it failed or was late). */
interface BeatsPart {
  ids: string[];
  reply: unknown[] | null;
  error?: unknown;
}

/**
 * A call's reply, or null with the error when it fails or, given `ms`, takes longer (the call runs
 * on regardless: a beat that lands late is harmless).
 */
function settle(call: Promise<unknown[]>, ms?: number): Promise<Pick<BeatsPart, "reply" | "error">> {
  return new Promise((resolve) => {
    const timer =
      ms === undefined
        ? undefined
        : setTimeout(() => resolve({ reply: null, error: new Error(`fan shard: no answer in ${ms} ms`) }), ms);
    call.then(
      (reply) => {
        clearTimeout(timer);
        resolve({ reply });
      },
      (error: unknown) => {
        clearTimeout(timer);
        resolve({ reply: null, error });
      },
    );
  });
}

/** The beats key of a shard tag. */
export function beatsKeyOf(tag: string): string {
  return `wr:{${tag}}:beats`;
}

/**
 * A shard's five keys of lua/waiting-room/fan-records-5.lua (issue 28 steps 2 and 3: a room whose
 * records live on the fan shards), from its beats key: beats, fans, pre, given, frozen.
 */
export function recordKeysOfBeats(beatsKey: string): string[] {
  const base = beatsKey.slice(0, -"beats".length);
  return ["beats", "fans", "pre", "given", "frozen"].map((name) => `${base}${name}`);
}

/** The key of the line view's copy on a shard tag (lua/waiting-room/view-copy-1.lua). */
export function viewKeyOf(tag: string): string {
  return `wr:{${tag}}:view`;
}

/**
 * The room's first this many shards hold a copy of the line's view, written by the room's admitter
 * every refresh (line-view.ts). A reader reads one, chosen by its admitter id, so the reads of many
 * gateways spread over up to this many masters; the writes cost the admitter this many small calls
 * a refresh. (The join buckets' shards: placeFanShards puts them on distinct masters.)
 */
export const VIEW_COPIES = 4;

/** A copy of the line's view as a shard answered it (view-copy-1.lua 'get'). */
export interface ViewCopy {
  /** How long ago (ms, the shard master's clock) the admitter wrote it. */
  age: number;
  /** The view's fields (JSON text, line-view.ts writes and reads it). */
  head: string;
  /** Which list of vacated places the copy holds. */
  listId: string;
  /** That list, or null when the reader holds it already. */
  gone: number[] | null;
}

export interface FanShardKeys {
  /** ZSET: fanId -> last join or poll (ms, the shard master's clock), fans of this shard in line. */
  beats: string;
}

/** The keys of every shard of an event, in shard order. */
export function fanShardKeys(eventId: string, shards = DEFAULT_FAN_SHARDS): FanShardKeys[] {
  return fanShardTags(eventId, shards).map((tag) => ({ beats: beatsKeyOf(tag) }));
}

/** A new room's shard key: 8 random bytes, 16 hex digits (configure-9.lua keeps it as `fanShardKey`). */
export function newFanShardKey(): string {
  return randomBytes(8).toString("hex");
}

/** Fan ids grouped by shard (only the shards named; `shardOf` a FanBeats's), in the order given within each. */
export function byFanShard(fanIds: Iterable<string>, shardOf: (fanId: string) => number): Map<number, string[]> {
  const groups = new Map<number, string[]>();
  for (const fanId of fanIds) {
    const k = shardOf(fanId);
    const group = groups.get(k);
    if (group) group.push(fanId);
    else groups.set(k, [fanId]);
  }
  return groups;
}

/** Fan ids per script call (Lua's unpack stack); a larger batch of one shard takes further calls. */
const BEATS_PER_CALL = 2_000;

const beatScripts = scriptFamily({
  name: "fan-beats",
  files: {
    beats: "waiting-room/beats-1",
    joinBuckets: "waiting-room/join-buckets-n",
    viewCopy: "waiting-room/view-copy-1",
    records: "waiting-room/fan-records-5",
  },
});

/** A client IP's join bucket as a batch takes it (join-buckets-n.lua): `count` joins want a token. */
export interface JoinBucketTake {
  /** The bucket's key on the event's slot (limitKey): it names the bucket, and picks its shard. */
  key: string;
  rate: number;
  burst: number;
  count: number;
}

/** What `joinBuckets` answered, by bucket key. */
export interface JoinBucketsTaken {
  /** How many of each bucket's joins (the first, in arrival order) got a token, and when to retry. */
  taken: Map<string, { allowed: number; retryAfterMs: number }>;
  /** Buckets whose shard failed: their joins are answered with `error` (a 503). */
  failed: Set<string>;
  error?: unknown;
}

/**
 * Join buckets go to the first BUCKET_SHARDS shards of a room only (placeFanShards puts shards
 * 0, 1, ... on distinct masters other than the event's, round robin): a batch of joins from as many
 * addresses then costs at most this many bucket calls, each holding a dozen buckets, not one call
 * per shard with three or four (12 shards: 25.7-52.3 us of Redis a join at 1-6 masters against
 * 19.4-35.5 without buckets on the shards, bench:line-cluster BENCH_JOIN_IPS=1, 2026-12-06).
 */
export const BUCKET_SHARDS = 4;

/** The shard of a join bucket (its event-slot key): the same in every process. */
export function bucketShardOf(eventSlotKey: string, shards: number): number {
  return fanShardOf(eventSlotKey, Math.min(shards, BUCKET_SHARDS));
}

/**
 * The key of a join bucket on a fan shard: the shard's tag, the rest of the event-slot key
 * (`wr:{evt:E}:lim:ip:join:<subject>` -> `wr:{<tag>}:lim:ip:join:<subject>`).
 */
export function shardBucketKey(beatsKey: string, eventSlotKey: string): string {
  const at = eventSlotKey.indexOf("}:lim:");
  if (at < 0 || !beatsKey.endsWith(":beats")) throw new RangeError(`not a limit key: ${eventSlotKey}`);
  return `${beatsKey.slice(0, -"beats".length)}${eventSlotKey.slice(at + 2)}`;
}

/** A fan's beat as a sweep read it (the shard master's clock, ms). */
export interface StaleBeat {
  fanId: string;
  beat: number;
}

/** What `joined` wrote: each fan's previous beat's age, and the beats written (to take back). */
export interface JoinedBeats {
  /** fanId -> ms since its previous beat (fans that had one). */
  ages: Map<string, number>;
  /** The beat written for each fan (its shard master's clock). */
  written: StaleBeat[];
  /** Fans whose shard failed the call (its master failing over): no beat, so no place either. */
  failed: string[];
  /** The first such failure. */
  error?: unknown;
}

/** What `kept` did with a refresh's heartbeats. */
export interface KeptBeats {
  /** Fans no longer present on their shards (their next poll asks Redis). */
  missing: string[];
  /**
   * Fans whose shard failed, did not answer in time, or still has an earlier `kept` call in flight
   * (a slow master is not sent a new call on top of one it has not answered): still owed.
   */
  unsent: string[];
}

/** What `poll` wrote: the previous beat's age (null: none), and the beat written. */
export interface PolledBeat {
  age: number | null;
  beat: number;
}

/**
 * The heartbeats of an event's fan shards (lua/waiting-room/beats-1.lua), one call per shard
 * touched, all sent at once (ioredis pipelines them; on a cluster each goes to its shard's master).
 */
export interface FanBeats {
  /**
   * Joins: each fan recorded as seen now (added when absent), before its place is written. Returns
   * how long ago (ms) the previous beat of each fan that had one was (a rejoin of a lapsed place).
   */
  joined(eventId: string, fanIds: readonly string[]): Promise<JoinedBeats>;
  /** Polls: each fan still present recorded as seen now; returns those no longer present. */
  polled(eventId: string, fanIds: readonly string[]): Promise<string[]>;
  /**
   * As `polled`, shard by shard: a shard that fails or does not answer within `waitMs` does not
   * fail the others; its fans come back as `unsent`, for the caller to send again.
   */
  kept(eventId: string, fanIds: readonly string[], waitMs: number): Promise<KeptBeats>;
  /**
   * Lookups (line-view.ts): each fan whose beat is younger than `recentMs` recorded as seen now
   * and returned; a shard that fails or does not answer within `waitMs` finds none of its fans
   * (their polls go to Redis).
   */
  looked(eventId: string, fanIds: readonly string[], recentMs: number, waitMs: number): Promise<Set<string>>;
  /**
   * A poll Redis answers: the fan recorded as seen now; returns how long ago (ms) its previous
   * beat was, or null when its shard had none.
   */
  poll(eventId: string, fanId: string): Promise<PolledBeat>;
  /**
   * A batch's per-IP join buckets, taken on the fan shards (bucket b on shard
   * bucketShardOf(b.key)), one call per shard touched, all at once: before the batch's beats and
   * places, so a refused join touches neither.
   */
  joinBuckets(eventId: string, buckets: readonly JoinBucketTake[]): Promise<JoinBucketsTaken>;
  /** Where `joinBuckets` keeps the bucket whose event-slot key is `eventSlotKey`. */
  bucketKey(eventId: string, eventSlotKey: string): string;
  /** One shard's fans not seen for `abandonMs` (nobody before `startMs + abandonMs`), oldest first. */
  stale(
    eventId: string,
    shard: number,
    options: { abandonMs: number; startMs: number; limit: number },
  ): Promise<StaleBeat[]>;
  /** Removes the beats read by `stale`, each only while it is still the one read. Returns how many went. */
  forget(eventId: string, shard: number, beats: readonly StaleBeat[]): Promise<number>;
  /**
   * Takes back beats this process wrote (`joined`, `poll`) for fans the line then did not take
   * (the room gone, or created again): each only while it is still the one written, so a later
   * beat of the same fan stays. Without it a beat written as its event was removed would stay in a
   * shard nobody sweeps. Returns how many went.
   */
  unwrite(eventId: string, beats: readonly StaleBeat[]): Promise<number>;
  /**
   * The room's admitter writes the line's view into the copies (the first VIEW_COPIES shards), all
   * at once; the list of vacated places goes to a shard only when it is not known to hold `listId`
   * already. Resolves when every copy answered or `waitMs` passed; a copy that failed is only
   * older for its readers (they call the event's slot once it is too old).
   */
  writeCopies(
    eventId: string,
    copy: { head: string; listId: string; gone: readonly number[] },
    waitMs: number,
  ): Promise<void>;
  /** A copy of the line's view (copy `index` mod the copies); null when the shard has none. */
  readCopy(eventId: string, index: number, listId: string): Promise<ViewCopy | null>;
  /** A room whose records live on the fan shards (`claims` 2): the shards' calls of its records. */
  readonly records: ShardRecords;
  readonly shards: number;
  /** The shard of a fan of this room (fanShardOf with the room's key). */
  shardOf(fanId: string): number;
}

/** The abandon clock a shard judges beats by: the room's abandon time and its start (0: the draw is pending). */
export interface AbandonClock {
  abandonMs: number;
  startMs: number;
}

/**
 * The abandon clock of the room's fields: its abandon time, and its start once the line is drawn,
 * max(openedAt, drawnAt) (0 before: no place lapses while the draw is pending).
 */
export function abandonClockFrom(room: {
  abandonSeconds: number;
  openedAt: number;
  drawn: boolean;
  drawnAt: number;
}): AbandonClock {
  return {
    abandonMs: room.abandonSeconds * 1000,
    startMs: room.openedAt > 0 && room.drawn ? Math.max(room.openedAt, room.drawnAt || 0) : 0,
  };
}

/**
 * The calls of lua/waiting-room/fan-records-5.lua that a room whose records live on the fan shards
 * makes (docs/redis-cluster.md "Steps 2 and 3, call by call"). The sweep's, so far: the gateway's
 * join, poll and revocation in such a room come next.
 */
export interface ShardRecords {
  /** Gives up the fans of one shard whose beats lapsed and who are still in line; returns the places given up. */
  giveUp(eventId: string, shard: number, fanIds: readonly string[], clock: AbandonClock): Promise<number[]>;
  /**
   * One shard's places to tell the event's slot, lowest first, at most `limit`: `member` as the
   * shard keeps it (for `ack`), `abandoned` when a fan was given up there (else a place vacated).
   */
  given(eventId: string, shard: number, limit: number): Promise<GivenPlace[]>;
  /** The event's slot took these (`member`s of `given`): the shard forgets them. */
  ack(eventId: string, shard: number, members: readonly string[]): Promise<number>;
  /**
   * A batch's join on one shard (fan-records-5.lua 'join'): each fan's reservation (a place, or an
   * arrival number when `kind` is 'p') written as its record unless it has one, its beat written.
   * One answer a fan, in order: 1 new, else [outcome, record, previous beat's age, old place]
   * (the shard answers `now` alone when all are new: read here as 1 each).
   */
  join(
    eventId: string,
    shard: number,
    clock: AbandonClock,
    kind: "w" | "p",
    reservations: readonly (readonly [string, number])[],
  ): Promise<unknown[]>;
  /** Places reserved and not taken (an admitted fan's join): told to the event's slot by the sweep. */
  vacate(eventId: string, shard: number, places: readonly number[]): Promise<void>;
  /**
   * A poll Redis answers: the fan's record as its shard settles it (a lapsed place given up, a
   * drawn pre-queued fan at its place), its beat written; null when the shard has no record.
   */
  poll(eventId: string, fanId: string, clock: AbandonClock): Promise<{ record: string; age: number | null } | null>;
  /** The record written back only while it is still `old` (the claim's write); false when it was not. */
  cas(eventId: string, fanId: string, old: string, record: string): Promise<boolean>;
  /** A fan's record as its shard holds it (includes/fans.lua's text), or null. */
  record(eventId: string, fanId: string): Promise<string | null>;
  /** The operator revokes the fan: its record to r whatever it was (written when absent); answers the record before. */
  revoke(eventId: string, fanId: string): Promise<string | null>;
  /** The draw: the shard's pre-queue takes nobody more (a straggling pre-queue join is refused there). */
  freeze(eventId: string, shard: number): Promise<void>;
  /** The draw: the shard's pre-queued fan ids, in byte order, `count` from `from`. */
  members(eventId: string, shard: number, from: number, count: number): Promise<string[]>;
  /** The draw: each fan's drawn place written into the shard's pre-queue (those there). */
  place(eventId: string, shard: number, places: readonly (readonly [string, number])[]): Promise<void>;
  /**
   * The line view's lookups (line-view.ts), one call a shard touched (fan-records-5.lua 'look'), all
   * at once: each fan `found` when its beat is within `recentMs` (then refreshed to now, as a poll's
   * beat), with its record and, when `drawn`, its drawn place, in `fanIds`' order. A shard that
   * fails or takes longer than `waitMs` finds none of its fans (their polls go to Redis).
   */
  look(
    eventId: string,
    fanIds: readonly string[],
    recentMs: number,
    drawn: boolean,
    waitMs: number,
  ): Promise<{ found: Set<string>; records: (string | null)[]; drawnPlaces: (string | null)[] | null }>;
  /** The lottery's page: the fans drawn to places `from`..`to`, in place order, read from every shard's pre-queue. */
  drawnBetween(eventId: string, from: number, to: number): Promise<string[]>;
}

export interface GivenPlace {
  member: string;
  place: number;
  abandoned: boolean;
  /** A reservation a join did not take (a repeat join's, an admitted fan's): `joined` counted it. */
  reservation: boolean;
}

export function createFanBeats(
  redis: RedisClient,
  options: {
    shards?: number;
    tagsOf?: (eventId: string) => readonly string[];
    /** The room's `fanShardKey` (16 hex digits); none: FNV-1a (a room created before the key). */
    shardKey?: string | null;
  } = {},
): FanBeats {
  const shards = options.shards ?? DEFAULT_FAN_SHARDS;
  const key = options.shardKey ? halfSipKeyFromHex(options.shardKey) : null;
  const shardOf = (fanId: string) => fanShardOf(fanId, shards, key);
  const run = registerScripts(redis, beatScripts);
  // The keys of an event's shards: the room's own tags (`tagsOf`), or computed once per event.
  const keysOf = new Map<string, FanShardKeys[]>();
  const keys = (eventId: string) => {
    let k = keysOf.get(eventId);
    if (!k) {
      k = options.tagsOf
        ? options.tagsOf(eventId).map((tag) => ({ beats: beatsKeyOf(tag) }))
        : fanShardKeys(eventId, shards);
      if (keysOf.size >= 10_000) keysOf.clear();
      keysOf.set(eventId, k);
    }
    return k;
  };
  const beatsKey = (eventId: string, shard: number) => {
    const k = keys(eventId)[shard];
    if (!k) throw new RangeError(`fan shard ${shard} of ${shards}`);
    return k.beats;
  };
  const recordKeys = (eventId: string, shard: number) => recordKeysOfBeats(beatsKey(eventId, shard));
  const records: ShardRecords = {
    async giveUp(eventId, shard, fanIds, clock) {
      if (fanIds.length === 0) return [];
      const reply = await run<unknown[]>("records", recordKeys(eventId, shard), [
        "give-up",
        clock.abandonMs,
        clock.startMs,
        ...fanIds,
      ]);
      return reply.slice(1).map(Number);
    },
    async given(eventId, shard, limit) {
      const reply = await run<unknown[]>("records", recordKeys(eventId, shard), ["given", limit]);
      return reply.slice(1).map((m) => {
        const member = String(m);
        const abandoned = member.startsWith("x:");
        const reservation = member.startsWith("v:");
        return { member, place: Number(abandoned || reservation ? member.slice(2) : member), abandoned, reservation };
      });
    },
    async ack(eventId, shard, members) {
      if (members.length === 0) return 0;
      const reply = await run<unknown[]>("records", recordKeys(eventId, shard), ["ack", ...members]);
      return Number(reply[1]);
    },
    async join(eventId, shard, clock, kind, reservations) {
      const args: (string | number)[] = ["join", clock.abandonMs, clock.startMs, kind];
      for (const [fanId, n] of reservations) args.push(fanId, n);
      const reply = await run<unknown[]>("records", recordKeys(eventId, shard), args);
      // `now` alone: every fan new
      return reply.length === 1 ? reservations.map(() => 1) : reply.slice(1);
    },
    async vacate(eventId, shard, places) {
      if (places.length > 0) await run("records", recordKeys(eventId, shard), ["vacate", ...places]);
    },
    async poll(eventId, fanId, clock) {
      const reply = await run<unknown[]>("records", recordKeys(eventId, shardOf(fanId)), [
        "poll",
        clock.abandonMs,
        clock.startMs,
        fanId,
      ]);
      const record = String(reply[1] ?? "");
      if (record === "") return null;
      return { record, age: reply[2] === "" || reply[2] === undefined ? null : Number(reply[2]) };
    },
    async cas(eventId, fanId, old, record) {
      const reply = await run<unknown[]>("records", recordKeys(eventId, shardOf(fanId)), ["cas", fanId, old, record]);
      return Number(reply[1]) === 1;
    },
    record: (eventId, fanId) => redis.hget(recordKeys(eventId, shardOf(fanId))[1]!, fanId),
    async revoke(eventId, fanId) {
      const reply = await run<unknown[]>("records", recordKeys(eventId, shardOf(fanId)), ["revoke", fanId]);
      return reply[1] ? String(reply[1]) : null;
    },
    async freeze(eventId, shard) {
      await run("records", recordKeys(eventId, shard), ["freeze"]);
    },
    async members(eventId, shard, from, count) {
      const reply = await run<unknown[]>("records", recordKeys(eventId, shard), ["members", from, count]);
      return reply.slice(1).map(String);
    },
    async place(eventId, shard, places) {
      if (places.length === 0) return;
      await run("records", recordKeys(eventId, shard), ["place", ...places.flat()]);
    },
    async look(eventId, fanIds, recentMs, drawn, waitMs) {
      const found = new Set<string>();
      const records = new Map<string, string>();
      const places = new Map<string, string>();
      await Promise.all(
        [...byFanShard(fanIds, shardOf)].map(async ([shard, ids]) => {
          const args = ["look", recentMs, drawn ? "1" : "0", ...ids];
          const { reply } = await settle(run<unknown[]>("records", recordKeys(eventId, shard), args), waitMs);
          if (!reply) return;
          for (const [i, fanId] of ids.entries()) {
            const at = 1 + 3 * i;
            if (Number(reply[at]) === 1) found.add(fanId);
            const record = String(reply[at + 1] ?? "");
            if (record !== "") records.set(fanId, record);
            const place = String(reply[at + 2] ?? "");
            if (place !== "") places.set(fanId, place);
          }
        }),
      );
      return {
        found,
        records: fanIds.map((fanId) => records.get(fanId) ?? null),
        drawnPlaces: drawn ? fanIds.map((fanId) => places.get(fanId) ?? null) : null,
      };
    },
    async drawnBetween(eventId, from, to) {
      const pages = await Promise.all(
        Array.from({ length: shards }, (_, shard) =>
          redis.zrangebyscore(recordKeys(eventId, shard)[2]!, from, to, "WITHSCORES"),
        ),
      );
      const drawn: { fanId: string; place: number }[] = [];
      for (const page of pages) {
        for (let i = 0; i + 1 < page.length; i += 2) drawn.push({ fanId: page[i]!, place: Number(page[i + 1]) });
      }
      return drawn.sort((a, b) => a.place - b.place).map((d) => d.fanId);
    },
  };
  // `kept` calls still in flight (those given up on included), per shard key.
  const keeping = new Map<string, number>();
  const copies = Math.min(shards, VIEW_COPIES);
  const viewKey = (eventId: string, index: number) => {
    const tags = options.tagsOf ? options.tagsOf(eventId) : fanShardTags(eventId, shards);
    const tag = tags[index % copies];
    if (tag === undefined) throw new RangeError(`view copy ${index} of ${copies}`);
    return viewKeyOf(tag);
  };
  // The list each copy holds, as far as this process knows (it wrote it): the list goes again only
  // when it changed, or the shard said it holds another (its copy expired, or another admitter's).
  const listHeld = new Map<string, string>();
  // Copies whose put is still in flight.
  const writing = new Set<string>();
  // One call per shard touched (and per BEATS_PER_CALL fans), all at once; each part answered on
  // its own, so one shard failing (its master failing over) fails only its fans.
  const each = (eventId: string, fanIds: readonly string[], mode: "join" | "keep", waitMs?: number) => {
    const parts: Promise<BeatsPart>[] = [];
    for (const [shard, ids] of byFanShard(fanIds, shardOf)) {
      const key = beatsKey(eventId, shard);
      const busy = waitMs !== undefined && (keeping.get(key) ?? 0) > 0;
      for (let i = 0; i < ids.length; i += BEATS_PER_CALL) {
        const part = ids.slice(i, i + BEATS_PER_CALL);
        if (busy) {
          parts.push(
            Promise.resolve({ ids: part, reply: null, error: new Error("fan shard: a call still in flight") }),
          );
          continue;
        }
        const call = run<unknown[]>("beats", [key], [mode, ...part]);
        if (waitMs !== undefined) {
          keeping.set(key, (keeping.get(key) ?? 0) + 1);
          const done = () => {
            const left = (keeping.get(key) ?? 1) - 1;
            if (left > 0) keeping.set(key, left);
            else keeping.delete(key);
          };
          call.then(done, done);
        }
        parts.push(settle(call, waitMs).then((answer) => ({ ids: part, ...answer })));
      }
    }
    return Promise.all(parts);
  };
  const forget = async (eventId: string, shard: number, beats: readonly StaleBeat[]): Promise<number> => {
    if (beats.length === 0) return 0;
    const args = beats.flatMap((b) => [b.fanId, b.beat]);
    const reply = await run<unknown[]>("beats", [beatsKey(eventId, shard)], ["forget", ...args]);
    return Number(reply[1]);
  };
  return {
    shards,
    shardOf,
    records,
    async writeCopies(eventId, { head, listId, gone }, waitMs) {
      let list: string | null = null;
      const calls: Promise<Pick<BeatsPart, "reply" | "error">>[] = [];
      for (let index = 0; index < copies; index++) {
        const key = viewKey(eventId, index);
        // A slow master is not sent a new put on top of one it has not answered (as `kept`).
        if (writing.has(key)) continue;
        const withList = listHeld.get(key) !== listId;
        if (withList) list ??= gone.join(",");
        const call = run<unknown>(
          "viewCopy",
          [key],
          ["put", head, listId, withList ? "1" : "0", withList ? (list ?? "") : ""],
        );
        writing.add(key);
        const done = () => writing.delete(key);
        call.then(done, done);
        calls.push(
          settle(
            call.then((reply) => {
              if (Number(reply) === 1) {
                if (listHeld.size >= 10_000) listHeld.clear();
                listHeld.set(key, listId);
              } else listHeld.delete(key);
              return [reply];
            }),
            waitMs,
          ),
        );
      }
      await Promise.all(calls);
    },
    async readCopy(eventId, index, listId) {
      const reply = await run<unknown[]>("viewCopy", [viewKey(eventId, index)], ["get", listId]);
      if (!Array.isArray(reply) || reply.length < 4) return null;
      const list = reply[3];
      return {
        age: Number(reply[0]),
        head: String(reply[1]),
        listId: String(reply[2]),
        gone:
          list === null || list === undefined ? null : String(list) === "" ? [] : String(list).split(",").map(Number),
      };
    },
    async joined(eventId, fanIds) {
      const ages = new Map<string, number>();
      const written: StaleBeat[] = [];
      const failed: string[] = [];
      let error: unknown;
      for (const { ids, reply, error: e } of await each(eventId, fanIds, "join")) {
        if (!reply) {
          failed.push(...ids);
          error ??= e;
          continue;
        }
        const beat = Number(reply[0]);
        for (const [i, fanId] of ids.entries()) {
          const age = reply[i + 1];
          if (age !== "" && age !== null && age !== undefined) ages.set(fanId, Number(age));
          written.push({ fanId, beat });
        }
      }
      return { ages, written, failed, ...(failed.length > 0 ? { error } : {}) };
    },
    async polled(eventId, fanIds) {
      const parts = await each(eventId, fanIds, "keep");
      const failed = parts.find((p) => !p.reply);
      if (failed) throw failed.error;
      return parts.flatMap((p) => (p.reply as unknown[]).slice(1).map(String));
    },
    async kept(eventId, fanIds, waitMs) {
      const out: KeptBeats = { missing: [], unsent: [] };
      for (const { ids, reply } of await each(eventId, fanIds, "keep", waitMs)) {
        if (!reply) out.unsent.push(...ids);
        else out.missing.push(...reply.slice(1).map(String));
      }
      return out;
    },
    async looked(eventId, fanIds, recentMs, waitMs) {
      const found = new Set<string>();
      if (fanIds.length === 0) return found;
      // not counted as a `kept` in flight: a lookup never holds a shard's heartbeats back
      const parts: Promise<Pick<BeatsPart, "reply" | "error">>[] = [];
      for (const [shard, ids] of byFanShard(fanIds, shardOf)) {
        const call = run<unknown[]>("beats", [beatsKey(eventId, shard)], ["look", recentMs, ...ids]);
        parts.push(settle(call, waitMs));
      }
      for (const { reply } of await Promise.all(parts)) {
        if (reply) for (const fanId of reply.slice(1)) found.add(String(fanId));
      }
      return found;
    },
    async poll(eventId, fanId) {
      const reply = await run<unknown[]>("beats", [beatsKey(eventId, shardOf(fanId))], ["poll", fanId]);
      const age = reply[1];
      return { age: age === "" || age === null || age === undefined ? null : Number(age), beat: Number(reply[0]) };
    },
    bucketKey: (eventId, eventSlotKey) =>
      shardBucketKey(beatsKey(eventId, bucketShardOf(eventSlotKey, shards)), eventSlotKey),
    async joinBuckets(eventId, buckets) {
      const out: JoinBucketsTaken = { taken: new Map(), failed: new Set() };
      const byShard = new Map<number, JoinBucketTake[]>();
      for (const b of buckets) {
        const k = bucketShardOf(b.key, shards);
        const group = byShard.get(k);
        if (group) group.push(b);
        else byShard.set(k, [b]);
      }
      const calls = [...byShard].map(async ([shard, group]) => {
        const limits = limitTable();
        for (const b of group) limits.add(b.rate, b.burst);
        const beats = beatsKey(eventId, shard);
        try {
          const reply = await run<unknown[]>(
            "joinBuckets",
            group.map((b) => shardBucketKey(beats, b.key)), // as bucketKey(): all of this shard
            [group.length, ...limits.args(), ...group.map((b) => b.count)],
          );
          for (const [i, b] of group.entries()) {
            out.taken.set(b.key, { allowed: Number(reply[2 * i]), retryAfterMs: Number(reply[2 * i + 1]) });
          }
        } catch (err) {
          for (const b of group) out.failed.add(b.key);
          out.error ??= err;
        }
      });
      await Promise.all(calls);
      return out;
    },
    async stale(eventId, shard, { abandonMs, startMs, limit }) {
      const reply = await run<unknown[]>("beats", [beatsKey(eventId, shard)], ["stale", abandonMs, startMs, limit]);
      const out: StaleBeat[] = [];
      for (let i = 1; i + 1 < reply.length; i += 2) out.push({ fanId: String(reply[i]), beat: Number(reply[i + 1]) });
      return out;
    },
    forget,
    async unwrite(eventId, beats) {
      const beatOf = new Map(beats.map((b) => [b.fanId, b.beat]));
      const calls: Promise<number>[] = [];
      for (const [shard, ids] of byFanShard(beatOf.keys(), shardOf)) {
        for (let i = 0; i < ids.length; i += BEATS_PER_CALL) {
          const part = ids.slice(i, i + BEATS_PER_CALL).map((fanId) => ({ fanId, beat: beatOf.get(fanId) as number }));
          calls.push(forget(eventId, shard, part));
        }
      }
      return (await Promise.all(calls)).reduce((a, b) => a + b, 0);
    },
  };
}
