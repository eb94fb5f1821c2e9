/**
 * What one gateway process knows of the fan shards of the rooms it serves (issue 28 goal 3, step 1;
 * docs/redis-cluster.md "One event over many masters"): each room's shard count, the heartbeat
 * writers per count, and the sweeps the line hands to this process.
 *
 * A room's count (`fanShards` in the room hash) is fixed when the room is created, so it is read
 * once per event (one HGET) and then learnt from the replies that carry it: the line view's, and a
 * join batch's `reshard` when the room was created again with another count. 0: the room keeps its
 * heartbeats in `seen`, and nothing here is used.
 */
import type { Logger } from "../logger.js";
import type { RedisClient } from "../redis/scripts.js";
import { createFanBeats, type FanBeats, fanShardKeyList } from "./fan-shards.js";
import { sweepFanShards } from "./fan-sweep.js";
import { waitingRoomKeys } from "./keys.js";

/** Events whose count is remembered before the list starts over. */
const EVENTS_KEPT = 10_000;

export interface FanLine {
  /** The room's shard count (0: none, or no room), read once per event. */
  shardsOf(eventId: string): Promise<number>;
  /** A reply said the room's count (a line view, a join batch's `reshard`). */
  learn(eventId: string, shards: number): void;
  /** The heartbeat writer of rooms with `shards` shards. */
  beats(shards: number): FanBeats;
  /** Runs the room's sweep in the background, one at a time per event in this process. */
  sweep(eventId: string, shards: number): void;
  /** The keys of the room's shards, to remove with it (none without shards). */
  keysOf(eventId: string): Promise<string[]>;
  /** Sweeps run and places they gave up, since the process started (tests, the bench). */
  counters(): { sweeps: number; abandoned: number; failed: number };
}

export function createFanLine(redis: RedisClient, log: Logger | undefined): FanLine {
  const known = new Map<string, number>();
  const reading = new Map<string, Promise<number>>();
  const writers = new Map<number, FanBeats>();
  const sweeping = new Set<string>();
  const counts = { sweeps: 0, abandoned: 0, failed: 0 };

  const learn = (eventId: string, shards: number) => {
    if (known.size >= EVENTS_KEPT && !known.has(eventId)) known.clear();
    known.set(eventId, shards);
  };

  const beats = (shards: number): FanBeats => {
    let w = writers.get(shards);
    if (!w) {
      w = createFanBeats(redis, { shards });
      writers.set(shards, w);
    }
    return w;
  };

  return {
    shardsOf(eventId) {
      const k = known.get(eventId);
      if (k !== undefined) return Promise.resolve(k);
      let pending = reading.get(eventId);
      if (!pending) {
        pending = redis
          .hmget(waitingRoomKeys(eventId).room, "fanShards", "epoch")
          .then(([v, epoch]) => {
            const shards = Number(v) || 0;
            // No room yet: not remembered (the room this process or another creates may have shards).
            if (epoch !== null) learn(eventId, shards);
            return shards;
          })
          .finally(() => reading.delete(eventId));
        reading.set(eventId, pending);
      }
      return pending;
    },
    learn,
    beats,
    sweep(eventId, shards) {
      if (shards <= 0 || sweeping.has(eventId)) return;
      sweeping.add(eventId);
      sweepFanShards(redis, beats(shards), eventId)
        .then((done) => {
          counts.sweeps += 1;
          counts.abandoned += done?.abandoned ?? 0;
          if (done && done.abandoned > 0) log?.debug({ eventId, ...done }, "fan shards swept");
        })
        .catch((err: unknown) => {
          // The next second's sweep goes to whichever gateway asks then; until one completes the
          // line admits nobody (includes/admission.lua sweep_lagging).
          counts.failed += 1;
          log?.warn({ eventId, err: (err as Error).message }, "fan shards not swept");
        })
        .finally(() => sweeping.delete(eventId));
    },
    async keysOf(eventId) {
      const shards = Number(await redis.hget(waitingRoomKeys(eventId).room, "fanShards")) || 0;
      known.delete(eventId);
      return shards > 0 ? fanShardKeyList(eventId, shards) : [];
    },
    counters: () => ({ ...counts }),
  };
}
