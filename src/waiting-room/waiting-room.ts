/**
 * The virtual waiting room: a line per event in Redis, moved only by Lua scripts (see
 * lua/waiting-room/), admitted at the operator's rate into at most maxActive sessions. The module
 * validates input, runs the scripts, turns their replies into domain results and signs tokens.
 * It knows nothing of HTTP; the gateway maps results to status codes.
 *
 * This file is the interface and its composition; each part lives in a file of its own:
 *   context.ts    the shared client, script runner and Redis guard
 *   line.ts       the fan's side: join and the status poll (the hot path)
 *   places.ts     a fan's place as shown, and the access token of an admitted fan
 *   operator.ts   configure, open now, settings and their log, revoke a fan, remove
 *   snapshot.ts   public info, operator stats, the lottery audit
 *   sessions.ts   ending a session, the claim path's session check
 *   restore.ts    configuring again a room Redis lost, from the stored event
 *   replies.ts    reading the scripts' replies
 */
import type { Cluster, Redis } from "ioredis";
import type { Logger } from "../logger.js";
import { trackRedis } from "../redis/availability.js";
import type { JoinBatchCounters } from "./join-batch.js";
import { createRoomContext, type FanRecords, type LotteryCommitter, type RestoringContext } from "./context.js";
import { limitKey } from "./keys.js";
import { cachedStatus, claimIdentity, join, releaseIdentity, status, statusOf } from "./line.js";
import {
  configureRoom,
  type KeptDecisions,
  openNow,
  removeRoom,
  revokeFan,
  settingsHistory,
  updateSettings,
} from "./operator.js";
import type { DrandBeacon } from "../lottery/drand.js";
import type { RoundSource } from "../lottery/drand-relay.js";
import { type BeaconResult, recordBeacon } from "./beacon.js";
import { type DrawResult, drawPreQueue } from "./draw.js";
import type { FanSweepOptions } from "./fan-sweep.js";
import { createLineViews, type LineViewOptions, type LineViews, noLineCacheCounters } from "./line-view.js";
import { createRestorer } from "./restore.js";
import { endSession, isSessionActive } from "./sessions.js";
import { forgetCommitted, info, lotteryPage, roomInfo, stats } from "./snapshot.js";
import type { JsonWebKeySet, SigningKeyInput, SigningKeySet } from "./signing-keys.js";
import { createTokenService, type AccessTokenClaims, type QueueTokenClaims, type TokenCheck } from "./tokens.js";
import type {
  ConfigureInput,
  ConfigureResult,
  EndSessionResult,
  FanPlace,
  InfoResult,
  JoinCredentials,
  JoinResult,
  LineLimit,
  LotteryPageResult,
  NotFound,
  OpenNowResult,
  RateLimited,
  RemoveResult,
  RestoreInput,
  RestoreOutcome,
  RevokeFanResult,
  RoomSettings,
  SessionActiveResult,
  SettingsHistoryResult,
  SettingsPatch,
  StatsResult,
  StatusLimits,
  StatusResult,
  Unavailable,
  UpdateSettingsResult,
} from "./types.js";

export { DEFAULT_ABANDON_SECONDS } from "./operator.js";

export interface WaitingRoomOptions {
  redis: Redis | Cluster;
  /** The gateway secret (at least 32 bytes) that signs queue and access tokens (HS256). */
  secret: string | Uint8Array;
  /** An ES256 or EdDSA key set (TOKEN_SIGNING_KEYS) that signs them instead; `secret` is then unused. */
  signingKeys?: SigningKeySet | readonly SigningKeyInput[] | undefined;
  logger?: Logger;
  queueTokenTtlSeconds?: number;
  /**
   * Where a room that Redis lost is configured again from: the event's stored settings (the
   * gateway reads them from DynamoDB), or null when there is no such event. Without it a missing
   * room stays missing (`not_found`).
   */
  restore?: (eventId: string) => Promise<RestoreInput | null>;
  /**
   * Where the lottery seed is committed once per event, outside Redis (src/lottery/store.ts, in
   * DynamoDB): configure and restore use the seed committed there, so losing Redis never draws a
   * new one. Without it the seed is drawn and kept in Redis alone.
   */
  lottery?: LotteryCommitter;
  /**
   * Where a draw waiting for its drand round fetches it (src/lottery/drand-relay.ts: the relays of
   * DRAND_RELAYS): recorded only if it verifies, as the operator's would be. Absent: the round is
   * recorded through recordBeacon only.
   */
  drandRounds?: RoundSource | undefined;
  /**
   * Where the settings in force are kept outside Redis after every change (the gateway keeps them
   * on the event in DynamoDB, for `restore`), with their version: a copy is kept only over an
   * older one, so changes racing on several gateways leave the latest. Resolves false when it was
   * not kept (no such event, or a newer copy is there). A failure is logged; the change stands.
   */
  keep?: (eventId: string, settings: RoomSettings, version: number) => Promise<boolean>;
  /**
   * Polls of fans whose turn has not come answered from this process's cached view of the line,
   * with their heartbeats sent in one call per event per refresh (line-view.ts). On by default;
   * `false`: every poll is a Redis call (status-10.lua), as before.
   */
  lineCache?: boolean | LineViewOptions;
  /** Told the size of every batch of joins this process sends (join-batch.ts), for a metric. */
  onJoinBatch?: (size: number) => void;
  /**
   * Fan shards of the rooms this process creates (configure, restore): their heartbeats live in
   * this many shards under tags of their own (fan-shards.ts), swept by the gateways (fan-sweep.ts).
   * Fixed per room when it is created; every process follows the room's. Default 0: none (`seen`).
   */
  fanShards?: number;
  /**
   * The rooms this process creates (configure, restore) admit by claims: the cursor passes places
   * by count and offers each a session, which the fan at that place claims at its next poll
   * (lua/waiting-room/includes/admission.lua; docs/waiting-room.md "Admission by claims"). Fixed
   * per room when it is created. Default false: the cursor admits the fan at each place by name.
   * "shards" (with `fanShards`): and the fans' records live on the fan shards (docs/redis-cluster.md
   * "Steps 2 and 3, call by call"; WAITING_ROOM_CLAIMS=shards). Without `fanShards` it admits
   * by claims with its records on the event's slot.
   */
  claims?: boolean | "shards";
  /**
   * How the fan shards' sweep reads (fan-sweep.ts): stale beats per shard per round
   * (SWEEP_PER_SHARD, 512) and how long one sweep keeps reading a backlog (SWEEP_BUDGET_MS, 1 s).
   * The defaults are for production; tests make them small to build a backlog from a few fans.
   */
  fanSweep?: FanSweepOptions;
  /**
   * Where invite identity claims and revocations are kept outside Redis (src/decisions/store.ts):
   * a claim is decided there, a revocation recorded there before Redis ends the session, and
   * `restore` brings the revoked fans back. Without it they live in Redis alone.
   */
  records?: FanRecords;
}

export interface WaitingRoom {
  /**
   * Create or update (before it opens) an event's waiting room. Never changes a committed seed.
   * `kept`: the operator's decisions kept on the stored event, which a room this call creates
   * starts with (an event replaced after Redis lost its room); an existing room keeps its own.
   */
  configure(eventId: string, input: ConfigureInput, kept?: KeptDecisions): Promise<ConfigureResult>;
  /** Draw the pre-queue and open now (onSaleAt := now), if not open yet. */
  openNow(eventId: string): Promise<OpenNowResult>;
  /**
   * Take a place in line, or get the one the fan has. With `limits.ip`, the client IP's join
   * bucket of this event is taken first, in the same Redis call (`rate_limited` when it is empty).
   */
  join(
    eventId: string,
    fanId: string,
    options?: { limits?: { ip?: LineLimit | undefined }; credentials?: JoinCredentials },
  ): Promise<JoinResult>;
  /**
   * One place per invite identity: records `fanId` as the identity's holder unless another fan
   * id holds it already; answers the holder.
   */
  claimIdentity(
    eventId: string,
    identity: string,
    fanId: string,
  ): Promise<{ ok: true; holder: string; fresh: boolean } | NotFound | Unavailable>;
  /** Takes back the claim `fanId` made of the identity (while it still holds it). */
  releaseIdentity(eventId: string, identity: string, fanId: string): Promise<{ ok: true } | NotFound | Unavailable>;
  /** The place named by a queue token; the call counts as the poll that keeps the place. */
  status(eventId: string, queueToken: string): Promise<StatusResult>;
  /**
   * The same, by fan id (for callers that already authenticated the fan). With `rejoin`, a fan the
   * line does not know whose token came from another room epoch (Redis lost the line) is given a
   * place in the new line, as a join would (`replaced` in the result). With `limits`, the poll's
   * buckets (client IP, then fan) are taken first, in the same Redis call: one round trip a poll.
   */
  statusOf(
    eventId: string,
    fanId: string,
    options?: { rejoin?: { epoch: string | undefined }; limits?: StatusLimits },
  ): Promise<StatusResult>;
  /**
   * Synchronous: the poll answered from this process's view of the line (line-view.ts), its
   * limits taken in this process's buckets; null when Redis must answer (`statusOf` asks it).
   */
  cachedStatus(
    eventId: string,
    fanId: string,
    limits?: StatusLimits,
  ): { ok: true; fanId: string; place: FanPlace; cached: true } | RateLimited | null;
  /** Public info (`GET /v1/events/{eventId}/waiting-room`). */
  info(eventId: string): Promise<InfoResult>;
  /** Operator stats and settings in force. */
  stats(eventId: string): Promise<StatsResult>;
  /**
   * Change settings from now on, on every gateway at once; returns the settings in force. `loop`:
   * the admission loop's step (only admitPerSecond, only while the loop is on; operator.ts).
   */
  updateSettings(
    eventId: string,
    patch: SettingsPatch,
    options?: { by?: string; loop?: boolean },
  ): Promise<UpdateSettingsResult>;
  /** The latest settings changes, newest first. */
  settingsHistory(eventId: string, limit?: number): Promise<SettingsHistoryResult>;
  /** The fan bought: the session ends and frees its slot. */
  completeSession(eventId: string, sessionId: string): Promise<EndSessionResult>;
  /** The operator ends a session; the fan may not join this event again. */
  revokeSession(eventId: string, sessionId: string): Promise<EndSessionResult>;
  /** The same, by fan id: the fan's session ends (`no_session` for a fan still in line). */
  revokeFan(eventId: string, fanId: string): Promise<RevokeFanResult>;
  /**
   * One Redis round trip: is this session neither expired, completed nor revoked? With the
   * token's `epoch` (claim paths), a room of another epoch, or none, answers `decided: false`;
   * without it the room answers whatever its epoch (a missing room: not active). With the token's
   * `fanId`, a room of another epoch that has the fan revoked (restored with the revocations kept
   * in DynamoDB) answers ended.
   */
  isSessionActive(eventId: string, sessionId: string, epoch?: string, fanId?: string): Promise<SessionActiveResult>;
  /**
   * Creates the room again from the stored event if Redis lost it (never touches an existing
   * room). Single flight per event in this process; idempotent across processes.
   */
  restoreRoom(eventId: string): Promise<RestoreOutcome>;
  /**
   * For reads that do not touch the room (the seat map): checks, at most every few seconds per
   * event, that the room exists, and restores it in the background if not. Never waits, never throws.
   */
  ensureRoom(eventId: string): void;
  /** Synchronous: the signature and claims, no Redis. */
  verifyQueueToken(token: string, eventId: string): TokenCheck<QueueTokenClaims>;
  /** `expiredGraceSeconds`: see TokenService.verifyAccessToken (src/waiting-room/tokens.ts). */
  verifyAccessToken(
    token: string,
    eventId: string,
    options?: { expiredGraceSeconds?: number },
  ): TokenCheck<AccessTokenClaims>;
  /** The public keys that verify this room's tokens, as a JWKS (no keys with HS256). */
  jwks(): JsonWebKeySet;
  /** The drawn pre-queue in lottery order, a page at a time (for audit). */
  lotteryPage(eventId: string, page: { offset: number; limit: number }): Promise<LotteryPageResult>;
  /**
   * Draws the pre-queue if it has closed (the close itself is lazy: this call makes it at
   * onSaleAt): what the draw job runs (src/workers/draw.ts). `changed` false: drawn already.
   */
  drawDue(eventId: string): Promise<DrawResult>;
  /** Records the draw's beacon: the drand round of the close, verified (src/waiting-room/beacon.ts). */
  recordBeacon(eventId: string, beacon: DrandBeacon): Promise<BeaconResult>;
  /** Delete every key of the event's waiting room. */
  remove(eventId: string): Promise<RemoveResult>;
  /** Polls answered from this process's view of the line, refreshes and heartbeats sent (line-view.ts). */
  lineCacheCounters(): ReturnType<LineViews["counters"]>;
  /** Batches of joins this process sent, the joins in them and the largest (join-batch.ts). */
  joinBatchCounters(): JoinBatchCounters;
  /**
   * The key of the per-IP join bucket of `subject` (a client IP) that this event's joins take: on
   * the event's slot (limitKey), or on a fan shard for a room with fan shards (their join batches
   * take the buckets there). For a join refused before its batch (a malformed body), so it takes the
   * same bucket. It reads no Redis: a room this process has not read yet (no join or poll of the
   * event has come through it) gets the event's slot, so a flood of malformed joins to made-up
   * events costs one Redis call each (the bucket), not two.
   */
  joinBucketKey(eventId: string, subject: string): string;
  /** Sends the heartbeats owed and stops the line cache's refreshes (a gateway shutting down). */
  close(): Promise<void>;
}

/** How long a process waits before it tries again a draw that could not finish. */
const DRAW_RETRY_MS = 1_000;

export function createWaitingRoom(options: WaitingRoomOptions): WaitingRoom {
  const { redis } = options;
  trackRedis(redis);
  const tokens = createTokenService({
    secret: options.secret,
    keys: options.signingKeys,
    ...(options.queueTokenTtlSeconds === undefined ? {} : { queueTokenTtlSeconds: options.queueTokenTtlSeconds }),
  });
  const base = createRoomContext(
    redis,
    options.logger?.child({ module: "waiting-room" }),
    tokens,
    options.lottery,
    options.onJoinBatch,
    options.fanSweep,
  );
  base.fanShardsForNewRooms = options.fanShards ?? 0;
  base.claimsForNewRooms = options.claims ?? false;
  const restorer = createRestorer(base, options.restore, (eventId, input, kept) =>
    configureRoom(base, eventId, input, { mode: "restore", ...kept }),
  );
  const views =
    options.lineCache === false
      ? undefined
      : createLineViews(base, typeof options.lineCache === "object" ? options.lineCache : {});
  base.views = views;
  base.records = options.records;
  const ctx: RestoringContext = { ...base, ...restorer };

  // The draw runs once the pre-queue has closed, in whichever process first sees it pending
  // (draw.ts locks it across processes); one run at a time per event in this process.
  // A draw that could not finish (another process drawing, a beacon awaited) is not tried again
  // by this process for DRAW_RETRY_MS: every pre-queued fan's poll kicks it.
  const drawing = new Map<string, Promise<unknown>>();
  // A draw that waits for its drand round asks the relays for it, at most once a second per event.
  const fetched = new Map<string, number>();
  const drawOrFetch = async (eventId: string): Promise<DrawResult> => {
    const result = await drawPreQueue(ctx, eventId);
    const rounds = options.drandRounds;
    if (result.ok || result.reason !== "awaiting_beacon" || !rounds) return result;
    if ((fetched.get(eventId) ?? 0) > Date.now() - DRAW_RETRY_MS) return result;
    if (fetched.size >= 1_000) fetched.clear();
    fetched.set(eventId, Date.now());
    const room = await info(ctx, eventId);
    const drand = room.ok ? room.info.lottery.drand : undefined;
    if (!drand) return result;
    const { round, roundAt: _at, knownAs: _known, ...chain } = drand;
    const beacon = await rounds(chain, round).catch(() => null);
    if (!beacon) return result;
    const recorded = await recordBeacon(ctx, eventId, beacon);
    if (ctx.lottery) forgetCommitted(ctx.lottery, eventId);
    if (!recorded.ok) {
      ctx.log?.warn({ eventId, round, reason: recorded.reason }, "a relay's drand round was not taken");
      return result;
    }
    ctx.log?.info({ eventId, round }, "drand round fetched from a relay and recorded");
    return drawPreQueue(ctx, eventId);
  };
  const kickDraw = (eventId: string): Promise<unknown> => {
    const pending = drawing.get(eventId);
    if (pending) return pending;
    const run = drawOrFetch(eventId)
      .then(
        (result) => (result.ok ? 0 : DRAW_RETRY_MS),
        () => DRAW_RETRY_MS,
      )
      .then((wait) => {
        if (wait === 0) drawing.delete(eventId);
        else setTimeout(() => drawing.delete(eventId), wait).unref();
      });
    drawing.set(eventId, run);
    return run;
  };
  const afterPlace = <R extends { ok: boolean }>(eventId: string, result: R): R => {
    const place = (result as { place?: { status: string; onSaleAt?: string } }).place;
    if (result.ok && place?.status === "prequeue" && Date.parse(place.onSaleAt ?? "") <= Date.now()) {
      void kickDraw(eventId);
    }
    return result;
  };
  /** Opens now and waits for the draw (another process's included), a bounded while. */
  const openAndDraw = async (eventId: string): Promise<OpenNowResult> => {
    const opened = await openNow(ctx, eventId);
    if (!opened.ok || opened.info.lottery.seed !== undefined || opened.info.state === "closed") return opened;
    for (let attempt = 0; attempt < 400; attempt++) {
      const drawn = await drawPreQueue(ctx, eventId);
      if (drawn.ok) return { ok: true, changed: opened.changed, info: drawn.info };
      if (drawn.reason !== "drawing") break;
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
    return opened;
  };

  /** A change this process made: its own line cache reads the room again before answering from it. */
  const changed = <R>(eventId: string, result: R): R => {
    views?.invalidate(eventId);
    return result;
  };

  return {
    configure: async (eventId, input, kept) =>
      changed(eventId, await configureRoom(ctx, eventId, input, { mode: "configure", ...kept })),
    openNow: async (eventId) => changed(eventId, await openAndDraw(eventId)),
    join: async (eventId, fanId, joinOptions) => afterPlace(eventId, await join(ctx, eventId, fanId, joinOptions)),
    claimIdentity: (eventId, identity, fanId) => claimIdentity(ctx, eventId, identity, fanId),
    releaseIdentity: (eventId, identity, fanId) => releaseIdentity(ctx, eventId, identity, fanId),
    status: async (eventId, queueToken) => afterPlace(eventId, await status(ctx, eventId, queueToken)),
    statusOf: async (eventId, fanId, statusOptions) =>
      afterPlace(eventId, await statusOf(ctx, eventId, fanId, statusOptions)),
    // A pre-queued fan answered from the cache after the on-sale kicks the draw as a poll Redis
    // answers does (afterPlace): the HTTP fast path answers through here alone.
    cachedStatus: (eventId, fanId, limits) => {
      const cached = cachedStatus(ctx, eventId, fanId, limits);
      return cached ? afterPlace(eventId, cached) : null;
    },
    info: async (eventId) => {
      const result = await info(ctx, eventId);
      if (result.ok && result.info.state !== "prequeue" && result.info.lottery.seed === undefined) {
        void kickDraw(eventId);
      }
      return result;
    },
    stats: (eventId) => stats(ctx, eventId),
    updateSettings: async (eventId, patch, updateOptions) => {
      const result = changed(
        eventId,
        await updateSettings(ctx, eventId, patch, updateOptions?.by, updateOptions?.loop === true),
      );
      // Every change, the operator's and the admission loop's, before the answer: a Redis lost
      // right after it comes back with it. An operator's call that changed nothing in Redis is kept
      // too (under a new version): it repairs a copy that did not land.
      const kept = result.ok && (result.changed > 0 || updateOptions?.loop !== true);
      if (result.ok && kept && options.keep) {
        await options.keep(eventId, result.settings, result.version).catch((err: unknown) => {
          base.log?.warn({ eventId, err: (err as Error).message }, "waiting-room settings not kept on the event");
        });
      }
      return result;
    },
    settingsHistory: (eventId, limit) => settingsHistory(ctx, eventId, limit),
    completeSession: (eventId, sessionId) => endSession(ctx, eventId, sessionId, "completed"),
    revokeSession: (eventId, sessionId) => endSession(ctx, eventId, sessionId, "revoked"),
    revokeFan: (eventId, fanId) => revokeFan(ctx, eventId, fanId),
    isSessionActive: (eventId, sessionId, epoch, fanId) => isSessionActive(ctx, eventId, sessionId, epoch, fanId),
    restoreRoom: restorer.restoreRoom,
    ensureRoom: restorer.ensureRoom,
    verifyQueueToken: (token, eventId) => tokens.verifyQueueToken(token, eventId),
    verifyAccessToken: (token, eventId, options) => tokens.verifyAccessToken(token, eventId, options),
    jwks: () => tokens.jwks(),
    lotteryPage: (eventId, page) => lotteryPage(ctx, eventId, page),
    drawDue: async (eventId) => {
      const room = await roomInfo(ctx, eventId);
      if (!room.ok) return room;
      if (room.info.state === "prequeue") return { ok: false, reason: "not_closed" };
      return drawOrFetch(eventId);
    },
    recordBeacon: async (eventId, beacon) => {
      const result = await recordBeacon(ctx, eventId, beacon);
      if (ctx.lottery) forgetCommitted(ctx.lottery, eventId);
      return result;
    },
    remove: async (eventId) => changed(eventId, await removeRoom(ctx, eventId)),
    lineCacheCounters: () => views?.counters() ?? noLineCacheCounters(),
    joinBatchCounters: () => {
      // both batchers: a room's records on the event's slot (join-batch.ts) or on its shards (shard-joins.ts)
      const a = ctx.joins.counters();
      const b = ctx.shardJoins.counters();
      return { batches: a.batches + b.batches, joins: a.joins + b.joins, largest: Math.max(a.largest, b.largest) };
    },
    joinBucketKey: (eventId, subject) => {
      const onEvent = limitKey(eventId, "ip:join", subject);
      const room = ctx.fanLine.knownRoom(eventId);
      return room?.beats ? room.beats.bucketKey(eventId, onEvent) : onEvent;
    },
    close: async () => {
      await views?.close();
    },
  };
}
