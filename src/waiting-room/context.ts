/**
 * What every part of the waiting room shares: the Redis client, the family's script runner, the
 * guard that turns Redis failures into `unavailable`, the token service and the place reader.
 * Built once per room by createWaitingRoom (waiting-room.ts) and handed to each part.
 */
import type { Cluster, Redis } from "ioredis";
import type { z } from "zod";
import type { LotteryStore } from "../lottery/store.js";
import type { Logger } from "../logger.js";
import { redisReady } from "../redis/availability.js";
import { registerScripts, type RunScript } from "../redis/scripts.js";
import { onceEvery } from "../throttle.js";
import { OUTCOME_MESSAGES, type ScriptOutcome, scriptOutcome } from "./codes.js";
import { createFanLine, type FanLine } from "./fan-line.js";
import type { FanSweepOptions } from "./fan-sweep.js";
import { createJoinBatcher, type JoinBatcher, takeJoinBuckets } from "./join-batch.js";
import { createShardJoiner, type ShardJoiner } from "./shard-joins.js";
import { isEventId, waitingRoomKeys, type WaitingRoomKeys } from "./keys.js";
import type { LineViews } from "./line-view.js";
import { createPlaceReader, type PlaceReader } from "./places.js";
import { type ScriptName, waitingRoomScripts } from "./scripts.js";
import type { TokenService } from "./tokens.js";
import type { NotFound, RestoreOutcome, Unavailable } from "./types.js";

/** At most one "redis is down" line per operation this often. */
const DOWN_LOG_EVERY_MS = 10_000;

export interface RoomContext {
  redis: Redis | Cluster;
  log: Logger | undefined;
  tokens: TokenService;
  placeFrom: PlaceReader;
  /**
   * Where the lottery seed is committed outside Redis (DynamoDB, src/lottery/store.ts): configure
   * and restore take the seed from there, so a Redis wipe cannot re-roll it. Without it, the seed
   * lives in Redis only (tests of the line alone).
   */
  lottery?: LotteryCommitter | undefined;
  /**
   * The line as this process caches it (line-view.ts): polls of fans whose turn has not come are
   * answered from it, and every answer from Redis teaches it. Absent: every poll asks Redis.
   */
  views?: LineViews | undefined;
  /**
   * Where an invite's identity claim and the operator's revocations are kept outside Redis
   * (src/decisions/store.ts, DynamoDB), so a room Redis lost still holds them. Absent: Redis only
   * (tests of the line alone).
   */
  records?: FanRecords | undefined;
  /** The family's runner: the raw reply. */
  run: RunScript<ScriptName>;
  /** New fans' joins, batched per event (join-batch.ts). */
  joins: JoinBatcher;
  /** Joins in a room whose records live on the fan shards (shard-joins.ts), batched per event. */
  shardJoins: ShardJoiner;
  /** The rooms' fan shards as this process knows them, their heartbeats and sweeps (fan-line.ts). */
  fanLine: FanLine;
  /** Fan shards of a room this process creates (configure-9.lua ARGV[20]; 0: none). */
  fanShardsForNewRooms: number;
  /** A room this process creates offers sessions that its fans claim (configure-9.lua ARGV[23]). */
  /** "shards": and the fans' records live on the fan shards (configure-9.lua claims '2'; not yet for production). */
  claimsForNewRooms: boolean | "shards";
  /** A script's reply, with its negative code read as an outcome (logged at debug). */
  script(
    name: ScriptName,
    keys: readonly string[],
    args?: readonly (string | number)[],
  ): Promise<{ reply: unknown; outcome: ScriptOutcome | null }>;
  /**
   * Redis and reply failures become `unavailable`; nothing was decided, the caller may retry.
   * While the client is not connected nothing is sent: the answer is immediate, not a retry loop.
   */
  guarded<T>(op: string, eventId: string, fn: () => Promise<T>): Promise<T | Unavailable>;
}

/**
 * Where the lottery is committed, outside Redis (src/lottery/store.ts): the seed once per event,
 * the beacon, and the draw's sealed record and order.
 */
export type LotteryCommitter = LotteryStore;

/** Claims and decisions about fans kept outside Redis (src/decisions/store.ts). */
export interface FanRecords {
  /** Claims the identity for `fanId` unless another fan id holds it; answers the holder. */
  claimIdentity(eventId: string, identity: string, fanId: string): Promise<{ holder: string; fresh: boolean }>;
  /** Takes back the claim while `fanId` holds it. */
  releaseIdentity(eventId: string, identity: string, fanId: string): Promise<void>;
  /** The operator revoked the fan (idempotent). */
  recordRevocation(eventId: string, fanId: string): Promise<void>;
}

/** What the parts that may find a room Redis lost need besides (restore.ts builds it). */
export interface RestoringContext extends RoomContext {
  restoreRoom(eventId: string): Promise<RestoreOutcome>;
  /** Runs `op`; when it finds no room and the stored event has one, restores it and runs it again. */
  withRestore<R extends { ok: boolean; reason?: string }>(
    eventId: string,
    op: () => Promise<R>,
  ): Promise<R | Unavailable>;
}

export const notFound: NotFound = { ok: false, reason: "not_found" };

export const issuesOf = (error: z.ZodError) => error.issues.map((i) => `${i.path.join(".") || "input"}: ${i.message}`);

/** Events whose keys are remembered: every poll asks, and building nine strings each time showed. */
const KEYS_REMEMBERED = 1_000;
const rememberedKeys = new Map<string, Readonly<WaitingRoomKeys>>();

/** The event's keys, or null for an id that is not an event id (answered `not_found`). */
export function keysFor(eventId: string): Readonly<WaitingRoomKeys> | null {
  const known = rememberedKeys.get(eventId);
  if (known) return known;
  if (!isEventId(eventId)) return null;
  if (rememberedKeys.size >= KEYS_REMEMBERED) rememberedKeys.clear();
  const keys = Object.freeze(waitingRoomKeys(eventId));
  rememberedKeys.set(eventId, keys);
  return keys;
}

export function createRoomContext(
  redis: Redis | Cluster,
  log: Logger | undefined,
  tokens: TokenService,
  lottery?: LotteryCommitter,
  onJoinBatch?: (size: number) => void,
  fanSweep?: FanSweepOptions,
): RoomContext {
  const run = registerScripts(redis, waitingRoomScripts);
  const fanLine = createFanLine(redis, log, fanSweep);
  const downLogDue = onceEvery(DOWN_LOG_EVERY_MS);
  const logDown = (op: string, eventId: string, message: string) => {
    if (downLogDue(op)) log?.warn({ op, eventId, err: message }, "waiting room unavailable: redis is not connected");
  };
  const ctx: RoomContext = {
    redis,
    log,
    tokens,
    placeFrom: createPlaceReader(tokens),
    lottery,
    run,
    fanLine,
    fanShardsForNewRooms: 0,
    claimsForNewRooms: false,
    shardJoins: createShardJoiner(run, onJoinBatch ? { onBatch: onJoinBatch } : {}),
    joins: createJoinBatcher(run, {
      ...(onJoinBatch ? { onBatch: onJoinBatch } : {}),
      // A process whose cached view of the line answers new places (line-view.ts) asks Redis for
      // no fan view: the batch's call is cheaper on the event's slot (join-batch-n.lua).
      viewWanted: (eventId) => !(ctx.views?.answersNewPlaces(eventId) ?? false),
      // A room with fan shards: the batch's beats are on their shards before its places exist, so a
      // place is never without the beat its sweep needs (a gateway dying in between leaves a beat
      // without a place, which the sweep forgets).
      async prepare(eventId, joins) {
        const room = await fanLine.roomOf(eventId);
        const beats = room.beats;
        if (!beats) return { epoch: room.epoch, shards: room.shards, ages: new Map<string, number>() };
        // The per-IP join buckets first, on the shards (not the event's slot: a crowd brings about
        // one address a fan), so a refused join writes no beat and takes no place.
        const { limited, failedBuckets, bucketError } = await takeJoinBuckets(beats, eventId, joins);
        const beating = joins.filter((j, i) => !limited.has(i) && !failedBuckets.has(j.bucket)).map((j) => j.fanId);
        const { ages, written, failed, error } = await beats.joined(eventId, beating);
        const failedFans = new Set(failed);
        for (const j of joins) if (failedBuckets.has(j.bucket)) failedFans.add(j.fanId);
        return {
          epoch: room.epoch,
          shards: room.shards,
          ages,
          bucketsTaken: { limited },
          // A shard that failed (its master failing over): its fans are answered 503, the rest join.
          ...(failedFans.size > 0 ? { failed: { fanIds: failedFans, error: error ?? bucketError } } : {}),
          // The room gone or created again since this process read it: the beats go back.
          untake: (untaken) => {
            fanLine.forget(eventId);
            const ids = new Set(untaken);
            return beats.unwrite(
              eventId,
              written.filter((b) => ids.has(b.fanId)),
            );
          },
        };
      },
    }),
    async script(name, keys, args = []) {
      const reply = await run(name, keys, args);
      const outcome = scriptOutcome(reply);
      if (outcome) log?.debug({ script: name, outcome }, OUTCOME_MESSAGES[outcome]);
      return { reply, outcome };
    },
    async guarded<T>(op: string, eventId: string, fn: () => Promise<T>): Promise<T | Unavailable> {
      if (!redisReady(redis)) {
        const message = `redis is ${redis.status}`;
        logDown(op, eventId, message);
        return { ok: false, reason: "unavailable", message };
      }
      try {
        return await fn();
      } catch (err) {
        if (redisReady(redis)) log?.error({ err, op, eventId }, "waiting-room call failed");
        else logDown(op, eventId, (err as Error).message);
        return { ok: false, reason: "unavailable", message: (err as Error).message };
      }
    },
  };
  return ctx;
}
