/**
 * What one gateway process knows of the fan shards of the rooms it serves (issue 28 goal 3, step 1;
 * docs/redis-cluster.md "One event over many masters"): each room's shard tags, the heartbeat
 * writer per room, and the sweeps the line hands to this process.
 *
 * A room's tags (`fanShardTags` in the room hash, placed by placeFanShards when the room was
 * created) and its shard key (`fanShardKey`, which keys fanShardOf) never change while the room
 * lives, so they are read once per room (one HMGET, with the room's epoch) and kept until a reply
 * names another epoch or count (`forget`): the room was created again, perhaps with other tags. A
 * room without shards (no tags) keeps its heartbeats in `seen`, and nothing here is used for it.
 */
import type { Logger } from "../logger.js";
import type { RedisClient } from "../redis/scripts.js";
import { beatsKeyOf, createFanBeats, type FanBeats, recordKeysOfBeats, VIEW_COPIES, viewKeyOf } from "./fan-shards.js";
import { type FanSweepOptions, sweepFanShards } from "./fan-sweep.js";
import { waitingRoomKeys } from "./keys.js";

/** Rooms remembered before the list starts over. */
const ROOMS_KEPT = 10_000;
/** How long "no room" is remembered for an event. */
const NO_ROOM_MS = 1_000;

/** A room as this process knows it: its epoch and its shards ('' epoch: no room). */
export interface ShardedRoom {
  epoch: string;
  /** 0: the room keeps its heartbeats in `seen`. */
  shards: number;
  /** The heartbeat writer of this room's shards (null without shards). */
  beats: FanBeats | null;
  /**
   * The fans' records live on the shards (`claims` 2; docs/redis-cluster.md "Steps 2 and 3, call
   * by call"): a poll Redis answers reads the record there (line.ts). Fixed at the room's creation.
   */
  recordsOnShards?: boolean;
}

export interface FanLine {
  /** The room's epoch and shards, read once per room. */
  roomOf(eventId: string): Promise<ShardedRoom>;
  /** The room if this process has already read it; undefined otherwise. Never reads Redis. */
  knownRoom(eventId: string): ShardedRoom | undefined;
  /** Read the room again at the next call (it was configured, or a script said it is not the one known). */
  forget(eventId: string): void;
  /** Runs the room's sweep in the background, one at a time per event in this process. */
  sweep(eventId: string, room: ShardedRoom): void;
  /** The keys of the room's shards (beats, the view's copies), to remove with it (none without shards). */
  keysOf(eventId: string): Promise<string[]>;
}

const NO_ROOM: ShardedRoom = { epoch: "", shards: 0, beats: null };

export function createFanLine(
  redis: RedisClient,
  log: Logger | undefined,
  sweepOptions: FanSweepOptions = {},
): FanLine {
  const known = new Map<string, ShardedRoom>();
  /** Events read without a room, until when that answer stands. */
  const missing = new Map<string, number>();
  const reading = new Map<string, Promise<ShardedRoom>>();
  const sweeping = new Set<string>();

  const read = async (eventId: string): Promise<ShardedRoom> => {
    const [epoch, tagList, shardKey, claims] = await redis.hmget(
      waitingRoomKeys(eventId).room,
      "epoch",
      "fanShardTags",
      "fanShardKey",
      "claims",
    );
    // No room: remembered for a second, so polls of an unknown event cost one Redis call, not two.
    // A room created meanwhile is learnt from the first reply that names it (a join batch answers
    // `reshard`, a poll or a view names its epoch).
    if (epoch === null || epoch === undefined) {
      if (missing.size >= ROOMS_KEPT) missing.clear();
      missing.set(eventId, Date.now() + NO_ROOM_MS);
      return NO_ROOM;
    }
    missing.delete(eventId);
    const tags = tagList ? tagList.split(",") : [];
    const room: ShardedRoom = {
      epoch,
      shards: tags.length,
      beats: tags.length > 0 ? createFanBeats(redis, { shards: tags.length, tagsOf: () => tags, shardKey }) : null,
      ...(Number(claims) === 2 && tags.length > 0 ? { recordsOnShards: true } : {}),
    };
    if (known.size >= ROOMS_KEPT) known.clear();
    known.set(eventId, room);
    return room;
  };

  return {
    roomOf(eventId) {
      const k = known.get(eventId);
      if (k) return Promise.resolve(k);
      if ((missing.get(eventId) ?? 0) > Date.now()) return Promise.resolve(NO_ROOM);
      let pending = reading.get(eventId);
      if (!pending) {
        pending = read(eventId).finally(() => reading.delete(eventId));
        reading.set(eventId, pending);
      }
      return pending;
    },
    knownRoom(eventId) {
      return known.get(eventId);
    },
    forget(eventId) {
      known.delete(eventId);
      missing.delete(eventId);
    },
    sweep(eventId, room) {
      if (!room.beats || sweeping.has(eventId)) return;
      sweeping.add(eventId);
      sweepFanShards(redis, room.beats, eventId, sweepOptions)
        .then((done) => {
          // Behind: a backlog of stale beats bigger than the budget reads; the line admits nobody
          // from 3 s after the last complete sweep until the next sweeps catch up.
          if (done?.behind) log?.warn({ eventId, ...done }, "fan shards sweep behind: admission waits for it");
          else if (done && done.abandoned > 0) log?.debug({ eventId, ...done }, "fan shards swept");
        })
        .catch((err: unknown) => {
          // The next second's sweep goes to whichever gateway asks then; until one completes the
          // line admits nobody (includes/admission.lua sweep_lagging).
          log?.warn({ eventId, err: (err as Error).message }, "fan shards not swept");
        })
        .finally(() => sweeping.delete(eventId));
    },
    async keysOf(eventId) {
      known.delete(eventId);
      const tags = await redis.hget(waitingRoomKeys(eventId).room, "fanShardTags");
      if (!tags) return [];
      const list = tags.split(",");
      // a room whose records live on the shards (`claims` 2) keeps its records, pre-queue, given
      // places and freeze beside the beats (fan-records-5.lua): every shard's, whatever the room
      return [
        ...list.flatMap((tag) => recordKeysOfBeats(beatsKeyOf(tag))),
        ...list.slice(0, VIEW_COPIES).map(viewKeyOf),
      ];
    },
  };
}
