/**
 * The virtual waiting room: a line per event in Redis, moved only by Lua scripts (see
 * lua/waiting-room/), admitted at the operator's rate into at most maxActive sessions. This file
 * validates input, runs the scripts, turns their replies into domain results and signs tokens.
 * It knows nothing of HTTP; the gateway maps results to status codes.
 */
import { randomBytes } from "node:crypto";
import type { Cluster, Redis } from "ioredis";
import { z } from "zod";
import type { Logger } from "../logger.js";
import { redisReady, trackRedis } from "../redis/availability.js";
import { registerScripts } from "../redis/scripts.js";
import { onceEvery } from "../throttle.js";
import { adviseFan } from "./advice.js";
import { OUTCOME_MESSAGES, scriptOutcome, sessionAnswer } from "./codes.js";
import {
  allKeys,
  isEventId,
  isFanId,
  limitKey,
  lineKeys,
  lineKeysWithChanges,
  waitingRoomKeys,
  type WaitingRoomKeys,
} from "./keys.js";
import { commitmentOf, generateSeed } from "./lottery.js";
import { type ScriptName, waitingRoomScripts } from "./scripts.js";
import { createTokenService, type AccessTokenClaims, type QueueTokenClaims, type TokenCheck } from "./tokens.js";
import type {
  ConfigureInput,
  RestoreInput,
  ConfigureResult,
  EndSessionResult,
  FanPlace,
  FanStatusName,
  InfoResult,
  JoinResult,
  LineLimit,
  LotteryPageResult,
  NotFound,
  OpenNowResult,
  RemoveResult,
  RateLimited,
  RestoreOutcome,
  RoomSettings,
  RoomState,
  SessionActiveResult,
  SettingsChange,
  SettingsHistoryResult,
  SettingsPatch,
  StatsResult,
  StatusLimits,
  StatusResult,
  Unavailable,
  UpdateSettingsResult,
  WaitingRoomInfo,
  WaitingRoomStats,
} from "./types.js";

export const DEFAULT_ABANDON_SECONDS = 60;

export interface WaitingRoomOptions {
  redis: Redis | Cluster;
  /** The gateway secret (at least 32 bytes) that signs queue and access tokens. */
  secret: string | Uint8Array;
  logger?: Logger;
  queueTokenTtlSeconds?: number;
  /**
   * Where a room that Redis lost is configured again from: the event's stored settings (the
   * gateway reads them from DynamoDB), or null when there is no such event. Without it a missing
   * room stays missing (`not_found`).
   */
  restore?: (eventId: string) => Promise<RestoreInput | null>;
}

export interface WaitingRoom {
  /** Create or update (before it opens) an event's waiting room. Never changes a committed seed. */
  configure(eventId: string, input: ConfigureInput): Promise<ConfigureResult>;
  /** Draw the pre-queue and open now (onSaleAt := now), if not open yet. */
  openNow(eventId: string): Promise<OpenNowResult>;
  /**
   * Take a place in line, or get the one the fan has. With `limits.ip`, the client IP's join
   * bucket of this event is taken first, in the same Redis call (`rate_limited` when it is empty).
   */
  join(eventId: string, fanId: string, options?: { limits?: { ip?: LineLimit | undefined } }): Promise<JoinResult>;
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
  /** Public info (`GET /v1/events/{eventId}/waiting-room`). */
  info(eventId: string): Promise<InfoResult>;
  /** Operator stats and settings in force. */
  stats(eventId: string): Promise<StatsResult>;
  /** Change settings from now on, on every gateway at once; returns the settings in force. */
  updateSettings(eventId: string, patch: SettingsPatch): Promise<UpdateSettingsResult>;
  /** The latest settings changes, newest first. */
  settingsHistory(eventId: string, limit?: number): Promise<SettingsHistoryResult>;
  /** The fan bought: the session ends and frees its slot. */
  completeSession(eventId: string, sessionId: string): Promise<EndSessionResult>;
  /** The operator ends a session; the fan may not join this event again. */
  revokeSession(eventId: string, sessionId: string): Promise<EndSessionResult>;
  /**
   * One Redis round trip: is this session neither expired, completed nor revoked? With the
   * token's `epoch` (claim paths), a room of another epoch, or none, answers `decided: false`;
   * without it the room answers whatever its epoch (a missing room: not active).
   */
  isSessionActive(eventId: string, sessionId: string, epoch?: string): Promise<SessionActiveResult>;
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
  verifyAccessToken(token: string, eventId: string): TokenCheck<AccessTokenClaims>;
  /** The drawn pre-queue in lottery order, a page at a time (for audit). */
  lotteryPage(eventId: string, page: { offset: number; limit: number }): Promise<LotteryPageResult>;
  /** Delete every key of the event's waiting room. */
  remove(eventId: string): Promise<RemoveResult>;
}

const rate = z.number().min(0).max(1_000_000);
const count = z.number().int().min(0).max(10_000_000);
const duration = z.number().int().min(1).max(86_400);

const configureSchema = z.object({
  onSaleAt: z
    .union([z.date(), z.string(), z.number()])
    .transform((v) => (v instanceof Date ? v.getTime() : typeof v === "string" ? Date.parse(v) : v))
    .pipe(z.number().int().min(0).max(8.64e15)),
  admitPerSecond: rate,
  maxActive: count,
  sessionSeconds: duration,
  abandonSeconds: duration.default(DEFAULT_ABANDON_SECONDS),
});

const patchSchema = z
  .object({
    admitPerSecond: rate,
    maxActive: count,
    sessionSeconds: duration,
    abandonSeconds: duration,
    paused: z.boolean(),
    closed: z.boolean(),
  })
  .partial()
  .strict();

const pageSchema = z.object({
  offset: z.number().int().min(0),
  limit: z.number().int().min(1).max(1_000),
});

const ROOM_STATES: readonly RoomState[] = ["prequeue", "open", "paused", "closed"];
const FAN_STATUSES: readonly FanStatusName[] = [
  "prequeue",
  "waiting",
  "admitted",
  "abandoned",
  "completed",
  "expired",
  "revoked",
];
const CHANGE_KINDS: readonly SettingsChange["kind"][] = ["create", "configure", "settings", "open", "restore"];

/** How long a "no such event" answer of `restore` is remembered (a flood of unknown ids). */
const NO_EVENT_MEMORY_MS = 5_000;
/** How often ensureRoom looks at one event's room. */
const ENSURE_EVERY_MS = 5_000;
/** At most one "redis is down" line per operation this often. */
const DOWN_LOG_EVERY_MS = 10_000;
/** Signed access tokens kept for polls of the same session; the oldest go first past this many. */
const ACCESS_TOKENS_KEPT = 20_000;

/** A script's answer when a limit taken in the same call refused it (see status-10.lua). */
function limitedFrom(reply: unknown): RateLimited | null {
  if (!Array.isArray(reply) || reply[0] !== "limited") return null;
  const limit = reply[1] === "fan" ? "fan" : "ip";
  const retryAfterMs = Number(reply[3]);
  if (!Number.isFinite(retryAfterMs)) throw new ReplyShapeError("limited reply without retryAfterMs");
  return { ok: false, reason: "rate_limited", limit, retryAfterMs };
}

/** KEYS and ARGV of one limit: an untouched key and rate 0 when there is none. */
function limitArgs(eventId: string, name: string, limit: LineLimit | undefined, subject = limit?.subject ?? "") {
  return {
    key: limitKey(eventId, name, subject),
    args: limit && limit.perSecond > 0 ? [limit.perSecond, limit.burst] : [0, 0],
  };
}

class ReplyShapeError extends Error {
  override name = "ReplyShapeError";
}

/** A script's flat key/value reply, read with checks. */
class Fields {
  private readonly map = new Map<string, string>();
  constructor(reply: unknown) {
    if (!Array.isArray(reply)) throw new ReplyShapeError(`expected a list, got ${typeof reply}`);
    for (let i = 0; i + 1 < reply.length; i += 2) this.map.set(String(reply[i]), String(reply[i + 1]));
  }
  str(name: string): string {
    const v = this.map.get(name);
    if (v === undefined) throw new ReplyShapeError(`reply lacks ${name}`);
    return v;
  }
  num(name: string): number {
    const n = Number(this.str(name));
    if (!Number.isFinite(n)) throw new ReplyShapeError(`reply field ${name} is not a number`);
    return n;
  }
  flag(name: string): boolean {
    return this.num(name) !== 0;
  }
  oneOf<T extends string>(name: string, values: readonly T[]): T {
    const v = this.str(name);
    if (!(values as readonly string[]).includes(v)) throw new ReplyShapeError(`${name} is ${v}`);
    return v as T;
  }
}

const iso = (ms: number) => new Date(ms).toISOString();
const issuesOf = (error: z.ZodError) => error.issues.map((i) => `${i.path.join(".") || "input"}: ${i.message}`);
const notFound: NotFound = { ok: false, reason: "not_found" };

function settingsFrom(f: Fields): RoomSettings {
  return {
    onSaleAt: iso(f.num("onSaleAt")),
    admitPerSecond: f.num("admitPerSecond"),
    maxActive: f.num("maxActive"),
    sessionSeconds: f.num("sessionSeconds"),
    abandonSeconds: f.num("abandonSeconds"),
    paused: f.flag("paused"),
    closed: f.flag("closed"),
  };
}

function infoFrom(f: Fields): WaitingRoomInfo {
  const seed = f.str("seed");
  return {
    onSaleAt: iso(f.num("onSaleAt")),
    state: f.oneOf("state", ROOM_STATES),
    waiting: f.num("waiting"),
    admitPerSecond: f.num("admitPerSecond"),
    lottery: seed ? { commitment: f.str("commitment"), seed } : { commitment: f.str("commitment") },
  };
}

function statsFrom(f: Fields): WaitingRoomStats {
  return {
    state: f.oneOf("state", ROOM_STATES),
    waiting: f.num("waiting"),
    active: f.num("active"),
    joined: f.num("joined"),
    admitted: f.num("admitted"),
    abandoned: f.num("abandoned"),
    completed: f.num("completed"),
    expired: f.num("expired"),
    revoked: f.num("revoked"),
    effectiveAdmitPerSecond: f.num("rate"),
    servedThrough: f.num("served"),
    lastPosition: f.num("tail"),
    preQueued: f.num("preCount"),
    at: iso(f.num("now")),
  };
}

export function createWaitingRoom(options: WaitingRoomOptions): WaitingRoom {
  const { redis } = options;
  trackRedis(redis);
  const log = options.logger?.child({ module: "waiting-room" });
  const run = registerScripts(redis, waitingRoomScripts);
  const tokens = createTokenService({
    secret: options.secret,
    ...(options.queueTokenTtlSeconds === undefined ? {} : { queueTokenTtlSeconds: options.queueTokenTtlSeconds }),
  });

  const downLogDue = onceEvery(DOWN_LOG_EVERY_MS);
  const logDown = (op: string, eventId: string, message: string) => {
    if (downLogDue(op)) log?.warn({ op, eventId, err: message }, "waiting room unavailable: redis is not connected");
  };

  /**
   * Redis and reply failures become `unavailable`; nothing was decided, the caller may retry.
   * While the client is not connected nothing is sent: the answer is immediate, not a retry loop.
   */
  async function guarded<T>(op: string, eventId: string, fn: () => Promise<T>): Promise<T | Unavailable> {
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
  }

  // --- a room Redis lost is configured again from the stored event ---------------------------
  const restoring = new Map<string, Promise<RestoreOutcome>>();
  const noEventUntil = new Map<string, number>();
  const ensureDue = onceEvery(ENSURE_EVERY_MS);

  function restoreRoom(eventId: string): Promise<RestoreOutcome> {
    const source = options.restore;
    if (!source || !isEventId(eventId)) return Promise.resolve("no_event");
    if ((noEventUntil.get(eventId) ?? 0) > Date.now()) return Promise.resolve("no_event");
    const pending = restoring.get(eventId);
    if (pending) return pending;
    const run = (async (): Promise<RestoreOutcome> => {
      let input: RestoreInput | null;
      try {
        input = await source(eventId);
      } catch (err) {
        log?.warn({ err: (err as Error).message, eventId }, "cannot read the event to restore its waiting room");
        return "unavailable";
      }
      if (!input) {
        if (noEventUntil.size >= 10_000) noEventUntil.clear();
        noEventUntil.set(eventId, Date.now() + NO_EVENT_MEMORY_MS);
        return "no_event";
      }
      // A room the operator had paused comes back paused, in the same script that creates it.
      const { paused, ...configure } = input;
      const result = await configureRoom(eventId, configure, { mode: "restore", paused: paused === true });
      if (!result.ok) return result.reason === "unavailable" ? "unavailable" : "no_event";
      if (!result.created) return "exists";
      log?.warn(
        { eventId, commitment: result.info.lottery.commitment, settings: result.settings },
        "waiting room restored from the stored event (Redis had lost it): new lottery seed and epoch",
      );
      return "restored";
    })().finally(() => restoring.delete(eventId));
    restoring.set(eventId, run);
    return run;
  }

  /** Runs `op`; when it finds no room and the stored event has one, restores it and runs it again. */
  async function withRestore<R extends { ok: boolean; reason?: string }>(
    eventId: string,
    op: () => Promise<R>,
  ): Promise<R | Unavailable> {
    const first = await op();
    if (first.ok || first.reason !== "not_found" || !options.restore) return first;
    const restored = await restoreRoom(eventId);
    if (restored === "unavailable") {
      return { ok: false, reason: "unavailable", message: "the room could not be restored; retry" };
    }
    return restored === "no_event" ? first : op();
  }

  async function script(name: ScriptName, keys: readonly string[], args: readonly (string | number)[] = []) {
    const reply = await run(name, keys, args);
    const outcome = scriptOutcome(reply);
    if (outcome) log?.debug({ script: name, outcome }, OUTCOME_MESSAGES[outcome]);
    return { reply, outcome };
  }

  // An admitted fan polls with the same session until it ends, and the access token is a pure
  // function of the session (iat = admission, exp = session expiry, deterministic HS256): signed
  // once per session here, not once per poll.
  const accessTokens = new Map<string, string>();
  function accessTokenFor(input: Parameters<typeof tokens.signAccessToken>[0]): string {
    const key = [
      input.eventId,
      input.sessionId,
      input.fanId,
      input.epoch ?? "",
      input.issuedAt.getTime(),
      input.expiresAt.getTime(),
    ].join("\n");
    const kept = accessTokens.get(key);
    if (kept !== undefined) return kept;
    const token = tokens.signAccessToken(input);
    if (accessTokens.size >= ACCESS_TOKENS_KEPT) accessTokens.delete(accessTokens.keys().next().value as string);
    accessTokens.set(key, token);
    return token;
  }

  function placeFrom(f: Fields, eventId: string, fanId: string): FanPlace {
    const status = f.oneOf("status", FAN_STATUSES);
    const now = f.num("now");
    const onSaleAt = f.num("onSaleAt");
    const position = f.num("position");
    const ahead = f.num("ahead");
    const advice = adviseFan({
      status,
      ahead,
      effectiveRate: f.num("rate"),
      admitPerSecond: f.num("admitPerSecond"),
      untilOnSaleSeconds: Math.max(0, (onSaleAt - now) / 1000),
      abandonSeconds: f.num("abandonSeconds"),
    });
    const common = { position, ahead, ...advice };
    switch (status) {
      case "prequeue":
        return { status, provisional: true, onSaleAt: iso(onSaleAt), ...common };
      case "waiting":
        return { status, provisional: false, ...common };
      case "admitted": {
        const sessionId = f.str("sessionId");
        const expiresAt = new Date(f.num("expiresAt"));
        const accessToken = accessTokenFor({
          fanId,
          eventId,
          sessionId,
          epoch: f.str("epoch"),
          issuedAt: new Date(f.num("admittedAt")),
          expiresAt,
        });
        return {
          status,
          provisional: false,
          sessionId,
          accessToken,
          accessExpiresAt: expiresAt.toISOString(),
          ...common,
        };
      }
      default:
        return { status, provisional: false, canRejoin: status !== "revoked", ...common };
    }
  }

  function keysFor(eventId: string): WaitingRoomKeys | null {
    return isEventId(eventId) ? waitingRoomKeys(eventId) : null;
  }

  async function statusOnce(
    k: WaitingRoomKeys,
    eventId: string,
    fanId: string,
    limits: StatusLimits = {},
  ): Promise<StatusResult> {
    const ip = limitArgs(eventId, "ip:status", limits.ip);
    const fan = limitArgs(eventId, "fan:status", limits.fan, fanId);
    return guarded("status", eventId, async () => {
      const { reply, outcome } = await script(
        "status",
        [...lineKeys(k), ip.key, fan.key],
        [fanId, ...ip.args, ...fan.args],
      );
      const limited = limitedFrom(reply);
      if (limited) return limited;
      if (outcome === "not_found") return notFound;
      if (outcome === "not_joined") return { ok: false as const, reason: outcome };
      if (outcome) throw new ReplyShapeError(`status: unexpected ${outcome}`);
      return { ok: true as const, fanId, place: placeFrom(new Fields(reply), eventId, fanId) };
    });
  }

  async function statusOf(
    eventId: string,
    fanId: string,
    options: { rejoin?: { epoch: string | undefined }; limits?: StatusLimits } = {},
  ): Promise<StatusResult> {
    const k = keysFor(eventId);
    if (!k) return notFound;
    if (!isFanId(fanId)) return { ok: false, reason: "not_joined" };
    // The limits are taken once per request: the call again after a restore does not take them.
    let limits = options.limits;
    const found = await withRestore(eventId, () => {
      const once = limits;
      limits = undefined;
      return statusOnce(k, eventId, fanId, once);
    });
    if (found.ok || found.reason !== "not_joined" || !options.rejoin) return found;
    // Unknown fan. In the epoch that issued the token that cannot happen (a place is never
    // forgotten), so the answer stands; from another epoch, Redis lost the line: a new place.
    const epoch = await guarded("status", eventId, async () => (await redis.hget(k.room, "epoch")) ?? "");
    if (typeof epoch !== "string") return epoch;
    if (epoch === (options.rejoin.epoch ?? "")) return found;
    const joined = await joinOnce(k, eventId, fanId);
    if (!joined.ok) return joined.reason === "unavailable" ? joined : found;
    log?.info({ eventId, fanId, position: joined.place.position }, "fan from a lost line placed in the new line");
    return { ok: true, fanId, place: joined.place, replaced: { queueToken: joined.queueToken } };
  }

  async function joinOnce(
    k: WaitingRoomKeys,
    eventId: string,
    fanId: string,
    ipLimit?: LineLimit,
  ): Promise<JoinResult> {
    const ip = limitArgs(eventId, "ip:join", ipLimit);
    return guarded("join", eventId, async () => {
      const { reply, outcome } = await script("join", [...lineKeys(k), ip.key], [fanId, ...ip.args]);
      const limited = limitedFrom(reply);
      if (limited) return limited;
      if (outcome === "not_found") return notFound;
      if (outcome === "closed" || outcome === "revoked") return { ok: false as const, reason: outcome };
      if (outcome) throw new ReplyShapeError(`join: unexpected ${outcome}`);
      const f = new Fields(reply);
      const queueToken = tokens.signQueueToken({ fanId, eventId, epoch: f.str("epoch") });
      const place = placeFrom(f, eventId, fanId);
      return { ok: true as const, created: f.flag("created"), fanId, queueToken, place };
    });
  }

  async function configureRoom(
    eventId: string,
    input: ConfigureInput,
    how: { mode: "configure" } | { mode: "restore"; paused: boolean },
  ): Promise<ConfigureResult> {
    const { mode } = how;
    const k = keysFor(eventId);
    if (!k) return notFound;
    const parsed = configureSchema.safeParse(input);
    if (!parsed.success) return { ok: false, reason: "invalid", issues: issuesOf(parsed.error) };
    const s = parsed.data;
    // A fresh seed and epoch every call; the script keeps the first ones it stored.
    const seed = generateSeed();
    const epoch = randomBytes(8).toString("hex");
    return guarded(mode, eventId, async () => {
      const { reply, outcome } = await script("configure", lineKeysWithChanges(k), [
        String(s.onSaleAt),
        String(s.admitPerSecond),
        String(s.maxActive),
        String(s.sessionSeconds),
        String(s.abandonSeconds),
        seed,
        commitmentOf(seed),
        epoch,
        mode,
        how.mode === "restore" && how.paused ? "1" : "0",
      ]);
      if (outcome === "already_open") return { ok: false as const, reason: outcome };
      if (outcome) throw new ReplyShapeError(`configure: unexpected ${outcome}`);
      const f = new Fields(reply);
      if (f.flag("changed") && mode === "configure") {
        log?.info({ eventId, settings: s, created: f.flag("created") }, "waiting room configured");
      }
      return {
        ok: true as const,
        created: f.flag("created"),
        changed: f.flag("changed"),
        settings: settingsFrom(f),
        info: infoFrom(f),
      };
    });
  }

  async function endSession(
    eventId: string,
    sessionId: string,
    reason: "completed" | "revoked",
  ): Promise<EndSessionResult> {
    const k = keysFor(eventId);
    if (!k) return notFound;
    return guarded(`${reason}Session`, eventId, async () => {
      const { reply, outcome } = await script("endSession", lineKeys(k), [sessionId, reason]);
      if (outcome === "not_found") return notFound;
      if (outcome === "unknown_session") return { ok: false as const, reason: outcome };
      if (outcome) throw new ReplyShapeError(`endSession: unexpected ${outcome}`);
      const f = new Fields(reply);
      if (reason === "revoked") log?.info({ eventId, sessionId }, "session revoked");
      return {
        ok: true as const,
        freed: f.flag("freed"),
        fanId: f.str("fanId"),
        status: f.oneOf("status", FAN_STATUSES),
      };
    });
  }

  const api: WaitingRoom = {
    configure: (eventId, input) => configureRoom(eventId, input, { mode: "configure" }),

    async openNow(eventId) {
      const k = keysFor(eventId);
      if (!k) return notFound;
      return guarded("openNow", eventId, async () => {
        const { reply, outcome } = await script("openNow", lineKeysWithChanges(k));
        if (outcome === "not_found") return notFound;
        if (outcome) throw new ReplyShapeError(`openNow: unexpected ${outcome}`);
        const f = new Fields(reply);
        return { ok: true as const, changed: f.flag("changed"), info: infoFrom(f) };
      });
    },

    async join(eventId, fanId, options = {}) {
      const k = keysFor(eventId);
      if (!k) return notFound;
      if (!isFanId(fanId)) return { ok: false, reason: "invalid_fan" };
      // As for a poll: the limit is taken once, not again after a restore.
      let ipLimit = options.limits?.ip;
      return withRestore(eventId, () => {
        const once = ipLimit;
        ipLimit = undefined;
        return joinOnce(k, eventId, fanId, once);
      });
    },

    async status(eventId, queueToken) {
      if (!isEventId(eventId)) return notFound;
      const check = tokens.verifyQueueToken(queueToken, eventId);
      if (!check.ok) return { ok: false, reason: "token", token: check.reason };
      return statusOf(eventId, check.claims.fanId, { rejoin: { epoch: check.claims.epoch } });
    },

    statusOf,

    async info(eventId) {
      const k = keysFor(eventId);
      if (!k) return notFound;
      return withRestore(eventId, () =>
        guarded("info", eventId, async () => {
          const { reply, outcome } = await script("snapshot", lineKeys(k));
          if (outcome === "not_found") return notFound;
          if (outcome) throw new ReplyShapeError(`snapshot: unexpected ${outcome}`);
          return { ok: true as const, info: infoFrom(new Fields(reply)) };
        }),
      );
    },

    async stats(eventId) {
      const k = keysFor(eventId);
      if (!k) return notFound;
      return withRestore(eventId, () =>
        guarded("stats", eventId, async () => {
          const { reply, outcome } = await script("snapshot", lineKeys(k));
          if (outcome === "not_found") return notFound;
          if (outcome) throw new ReplyShapeError(`snapshot: unexpected ${outcome}`);
          const f = new Fields(reply);
          return { ok: true as const, stats: statsFrom(f), settings: settingsFrom(f) };
        }),
      );
    },

    async updateSettings(eventId, patch) {
      const k = keysFor(eventId);
      if (!k) return notFound;
      const parsed = patchSchema.safeParse(patch);
      if (!parsed.success) return { ok: false, reason: "invalid", issues: issuesOf(parsed.error) };
      const args: string[] = [];
      for (const [name, value] of Object.entries(parsed.data)) {
        if (value === undefined) continue;
        args.push(name, typeof value === "boolean" ? (value ? "1" : "0") : String(value));
      }
      return withRestore(eventId, () =>
        guarded("updateSettings", eventId, async () => {
          const { reply, outcome } = await script("updateSettings", lineKeysWithChanges(k), args);
          if (outcome === "not_found") return notFound;
          if (outcome) throw new ReplyShapeError(`updateSettings: unexpected ${outcome}`);
          const f = new Fields(reply);
          const changed = f.num("changed");
          if (changed > 0) log?.info({ eventId, patch: parsed.data }, "waiting-room settings changed");
          return { ok: true as const, changed, settings: settingsFrom(f) };
        }),
      );
    },

    async settingsHistory(eventId, limit = 50) {
      const k = keysFor(eventId);
      if (!k) return notFound;
      const n = Math.max(1, Math.min(1_000, Math.floor(limit)));
      return guarded("settingsHistory", eventId, async () => {
        const [exists, entries] = await Promise.all([
          redis.exists(k.room),
          redis.xrevrange(k.changes, "+", "-", "COUNT", n),
        ]);
        if (exists === 0) return notFound;
        const changes: SettingsChange[] = entries.map(([id, flat]) => {
          const fields: Record<string, string> = {};
          for (let i = 0; i + 1 < flat.length; i += 2) fields[String(flat[i])] = String(flat[i + 1]);
          const { at, kind, ...rest } = fields;
          const known = CHANGE_KINDS.find((c) => c === kind);
          if (!known || at === undefined) throw new ReplyShapeError(`change ${id} is malformed`);
          return { id, at: iso(Number(at)), kind: known, fields: rest };
        });
        return { ok: true as const, changes };
      });
    },

    completeSession: (eventId, sessionId) => endSession(eventId, sessionId, "completed"),
    revokeSession: (eventId, sessionId) => endSession(eventId, sessionId, "revoked"),

    async isSessionActive(eventId, sessionId, epoch) {
      const k = keysFor(eventId);
      if (!k) return { ok: true, active: false, decided: true };
      return guarded("isSessionActive", eventId, async () => {
        const mode = epoch === undefined ? "strict" : "epoch";
        const answer = sessionAnswer(await run("sessionActive", [k.room, k.active], [sessionId, epoch ?? "", mode]));
        if (answer === "no_room") {
          // No room: Redis lost it. Bring it back for the fans still in line; this claim goes on.
          void restoreRoom(eventId).catch(() => undefined);
          return { ok: true as const, active: false, decided: false };
        }
        if (answer === "other_epoch") return { ok: true as const, active: false, decided: false };
        return { ok: true as const, active: answer === "active", decided: true };
      });
    },

    restoreRoom,

    ensureRoom(eventId) {
      const k = keysFor(eventId);
      if (!k || !options.restore || !redisReady(redis)) return;
      if (!ensureDue(eventId)) return;
      void (async () => {
        if ((await redis.exists(k.room)) === 0) await restoreRoom(eventId);
      })().catch(() => undefined);
    },

    verifyQueueToken: (token, eventId) => tokens.verifyQueueToken(token, eventId),
    verifyAccessToken: (token, eventId) => tokens.verifyAccessToken(token, eventId),

    async lotteryPage(eventId, page) {
      const k = keysFor(eventId);
      if (!k) return notFound;
      const parsed = pageSchema.safeParse(page);
      if (!parsed.success) return { ok: false, reason: "invalid", issues: issuesOf(parsed.error) };
      const { offset, limit } = parsed.data;
      return guarded("lotteryPage", eventId, async () => {
        const { reply, outcome } = await script("lotteryPage", lineKeys(k), [offset, limit]);
        if (outcome === "not_found") return notFound;
        if (outcome === "not_drawn") return { ok: false as const, reason: outcome };
        if (outcome || !Array.isArray(reply)) throw new ReplyShapeError("lotteryPage: unexpected reply");
        const [preQueued, ...fanIds] = reply.map(String);
        return { ok: true as const, preQueued: Number(preQueued), offset, fanIds };
      });
    },

    async remove(eventId) {
      const k = keysFor(eventId);
      if (!k) return notFound;
      return guarded("remove", eventId, async () => {
        const removedKeys = await redis.unlink(...allKeys(k));
        return { ok: true as const, removedKeys };
      });
    },
  };
  return api;
}
