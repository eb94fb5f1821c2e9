/**
 * The operator's side: creating and configuring a room (configure-9.lua), opening it now
 * (open-now-9.lua), changing its settings (update-settings-9.lua), reading the log of those
 * changes (old and new values, who), revoking a fan by id (end-session-8.lua), and removing the room. Input is validated here; the scripts trust it.
 */
import { randomBytes } from "node:crypto";
import { Cluster } from "ioredis";
import { z } from "zod";
import { ADMIT_RATE_RULE, isAdmitRate, withinAdmitRange } from "../admit-rate.js";
import { issuesOf, keysFor, notFound, type RestoringContext, type RoomContext } from "./context.js";
import {
  beatsKeyOf,
  createFanBeats,
  type FanBeats,
  newFanShardKey,
  placeFanShards,
  recordKeysOfBeats,
} from "./fan-shards.js";
import { allKeys, lineKeysWithChanges, lineKeysWithClaims } from "./keys.js";
import { commitmentOf, generateSeed } from "./lottery.js";
import { AUTO_ADMIT_FIELDS, changeFrom, Fields, infoFrom, ReplyShapeError, settingsFrom } from "./replies.js";
import { MAX_POW_BITS } from "./proof-of-work.js";
import { endSession } from "./sessions.js";
import type {
  AutoAdmitSettings,
  ConfigureInput,
  ConfigureResult,
  FanStatusName,
  OpenNowResult,
  RemoveResult,
  RevokeFanResult,
  SettingsHistoryResult,
  SettingsPatch,
  UpdateSettingsResult,
} from "./types.js";

export const DEFAULT_ABANDON_SECONDS = 60;

/** Fans a second: 0, or a positive rate within the one range (src/admit-rate.ts). */
const rate = z.number().refine(isAdmitRate, ADMIT_RATE_RULE);
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
    powBits: z.number().int().min(0).max(MAX_POW_BITS),
    invites: z.boolean(),
    autoAdmit: z
      .object({
        enabled: z.boolean(),
        minPerSecond: rate,
        maxPerSecond: rate,
        targetClaimP99Ms: z.number().int().min(1).max(60_000),
        maxThrottlesPerSecond: z.number().min(0).max(1_000_000),
      })
      .partial()
      .strict()
      .refine((a) => a.minPerSecond === undefined || a.maxPerSecond === undefined || a.minPerSecond <= a.maxPerSecond, {
        message: "minPerSecond must not exceed maxPerSecond",
        path: ["minPerSecond"],
      }),
  })
  .partial()
  .strict();

/** The loop's settings as room-hash pairs (update-settings-9.lua, configure-9.lua). */
export function autoAdmitArgs(a: Partial<AutoAdmitSettings>): string[] {
  const args: string[] = [];
  for (const [name, field] of Object.entries(AUTO_ADMIT_FIELDS) as [keyof AutoAdmitSettings, string][]) {
    const value = a[name];
    if (value === undefined) continue;
    args.push(field, typeof value === "boolean" ? (value ? "1" : "0") : String(value));
  }
  return args;
}

/**
 * The operator's decisions a room is created with when the call creates it (either mode): kept on
 * the stored event, so a room Redis lost, or one a PUT creates again, comes back with them in the
 * same script call. An existing room keeps its own.
 */
export interface KeptDecisions {
  paused?: boolean | undefined;
  closed?: boolean | undefined;
  powBits?: number | undefined;
  invites?: boolean | undefined;
  autoAdmit?: AutoAdmitSettings | undefined;
  settingsVersion?: number | undefined;
  /** Fans the operator revoked: each gets a revoked record in the new room. */
  revoked?: readonly string[] | undefined;
}

export type ConfigureMode = { mode: "configure" | "restore" } & KeptDecisions;

/** Needs no restore: restoring is this call in 'restore' mode. */
export async function configureRoom(
  ctx: RoomContext,
  eventId: string,
  input: ConfigureInput,
  how: ConfigureMode,
): Promise<ConfigureResult> {
  const { mode } = how;
  const k = keysFor(eventId);
  if (!k) return notFound;
  // A room restored from a rate stored before the range was enforced comes back, within it.
  const parsed = configureSchema.safeParse(
    mode === "restore" ? { ...input, admitPerSecond: withinAdmitRange(input.admitPerSecond) } : input,
  );
  if (!parsed.success) return { ok: false, reason: "invalid", issues: issuesOf(parsed.error) };
  const s = parsed.data;
  // A fresh seed and epoch every call; the script keeps the first ones it stored. With a
  // committer (DynamoDB), the seed is the one committed there first, whatever Redis lost since.
  let seed = generateSeed();
  let commitment = commitmentOf(seed);
  if (ctx.lottery) {
    // The draw's drand round is the first published at or after the close: fixing the close in the
    // past would pick a round already published, a value the operator could choose by its date.
    const closeInPast = mode === "configure" && s.onSaleAt <= Date.now();
    const pastClose = [
      "drand: the on-sale time must be ahead: the draw's drand round must be unpublished when it is fixed",
    ];
    if (closeInPast && input.drand) return { ok: false, reason: "invalid", issues: pastClose };
    try {
      // The drand chain is named by the operator's PUT only (a restore takes what is committed).
      const named = mode === "configure" ? input.drand : undefined;
      const committed = await ctx.lottery.commit(eventId, { seed, commitment, drandChain: named });
      ({ seed, commitment } = committed);
      if (named && JSON.stringify(committed.drandChain) !== JSON.stringify(named)) {
        return {
          ok: false,
          reason: "invalid",
          issues: [
            committed.drandChain
              ? `drand: the lottery is committed to drand chain ${committed.drandChain.chainHash}; a chain is named once`
              : "drand: the lottery is drawn, or has a beacon, without a chain; too late to name one",
          ],
        };
      }
      if (closeInPast && committed.drandChain) return { ok: false, reason: "invalid", issues: pastClose };
    } catch (err) {
      ctx.log?.warn({ eventId, err: (err as Error).message }, "the lottery commitment could not be read or written");
      return { ok: false, reason: "unavailable", message: "the lottery commitment could not be kept; retry" };
    }
  }
  const epoch = randomBytes(8).toString("hex");
  return ctx.guarded(mode, eventId, async () => {
    // A room whose records live on the shards gets shard keys of its own (its epoch in the tags):
    // a room restored after its event's slot was lost never reads the lost room's records.
    const onShards = ctx.claimsForNewRooms === "shards";
    const shards = await shardArgs(ctx, eventId, onShards ? `${epoch.slice(0, 8)}:` : "");
    // Restored with revocations, records on the shards: each revoked fan's record written on its
    // shard first (a join there is refused), so a restorer dying before the room exists leaves
    // no room that lets them in. A room another restorer created meanwhile keeps its own shards.
    let revokedOn: string[] = [];
    if (onShards && mode === "restore" && (how.revoked?.length ?? 0) > 0 && Number(shards[0]) > 0) {
      const tags = shards[1].split(",");
      const beats = createFanBeats(ctx.redis, { shards: tags.length, tagsOf: () => tags, shardKey: shards[2] });
      await Promise.all((how.revoked ?? []).map((fanId) => beats.records.revoke(eventId, fanId)));
      revokedOn = tags;
    }
    const { reply, outcome } = await ctx.script("configure", lineKeysWithChanges(k), [
      String(s.onSaleAt),
      String(s.admitPerSecond),
      String(s.maxActive),
      String(s.sessionSeconds),
      String(s.abandonSeconds),
      // With a committer the seed stays out of Redis until the draw reveals it (draw.ts).
      ctx.lottery ? "" : seed,
      commitment,
      epoch,
      mode,
      how.paused ? "1" : "0",
      // the bot settings, the loop's and their version (used only when this call creates the room)
      String(Math.max(0, Math.min(MAX_POW_BITS, Math.floor(how.powBits ?? 0)))),
      how.invites ? "1" : "0",
      // the loop's settings, in the script's order; '' = unset
      ...restoredLoop(how),
      how.settingsVersion ? String(Math.floor(how.settingsVersion)) : "",
      how.closed ? "1" : "0",
      // the fan shards' tags and key, if this call creates the room (placed off the event's own master)
      ...shards,
      ctx.claimsForNewRooms === "shards" ? "2" : ctx.claimsForNewRooms ? "1" : "0",
      ...(how.revoked ?? []),
    ]);
    if (outcome === "already_open") return { ok: false as const, reason: outcome };
    if (outcome) throw new ReplyShapeError(`configure: unexpected ${outcome}`);
    const f = new Fields(reply);
    // Read again at the next call: a room this call created has the shards it was given, one that
    // existed keeps its own.
    ctx.fanLine.forget(eventId);
    // A restore that lost the race to another restorer (the room exists): the revoked records it
    // wrote are under shard tags of its own epoch, which no room names. Taken back, each key alone
    // (each its own slot); a restorer that dies first leaves them, a few small keys.
    if (revokedOn.length > 0 && !f.flag("created")) {
      const orphans = revokedOn.flatMap((tag) => recordKeysOfBeats(beatsKeyOf(tag)));
      await Promise.all(orphans.map((key) => ctx.redis.unlink(key)));
    }
    if (f.flag("changed") && mode === "configure") {
      ctx.log?.info({ eventId, settings: s, created: f.flag("created") }, "waiting room configured");
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

/**
 * configure-9.lua's ARGV[20] (the count), ARGV[21] (the tags, comma-separated) and ARGV[22] (the
 * shard key, fanShardOf's: new for each room); '0', '', '' for none.
 */
async function shardArgs(ctx: RoomContext, eventId: string, generation: string): Promise<[string, string, string]> {
  const shards = ctx.fanShardsForNewRooms;
  if (shards <= 0) return ["0", "", ""];
  // On a cluster, where each tag would live: the masters' slot ranges as the cluster says now
  // (CLUSTER SLOTS: [first, last, [host, port, id], replicas...] per range).
  let ownerOf: ((slot: number) => string | undefined) | undefined;
  if (ctx.redis instanceof Cluster) {
    const ranges = await ctx.redis.cluster("SLOTS");
    ownerOf = (slot) => {
      const master = ranges.find(([first, last]) => slot >= first && slot <= last)?.[2];
      return master ? `${master[0]}:${master[1]}` : undefined;
    };
  }
  const tags = placeFanShards(eventId, shards, ownerOf, generation);
  return [String(tags.length), tags.join(","), newFanShardKey()];
}

function restoredLoop(how: ConfigureMode): string[] {
  const a = how.autoAdmit;
  if (!a) return ["", "", "", "", ""];
  const pairs = autoAdmitArgs(a);
  return pairs.filter((_, i) => i % 2 === 1);
}

export async function openNow(ctx: RoomContext, eventId: string): Promise<OpenNowResult> {
  const k = keysFor(eventId);
  if (!k) return notFound;
  return ctx.guarded("openNow", eventId, async () => {
    const { reply, outcome } = await ctx.script("openNow", lineKeysWithChanges(k));
    if (outcome === "not_found") return notFound;
    if (outcome) throw new ReplyShapeError(`openNow: unexpected ${outcome}`);
    const f = new Fields(reply);
    return { ok: true as const, changed: f.flag("changed"), info: infoFrom(f) };
  });
}

/**
 * `loop`: the admission loop's own step (src/stats/loop.ts): only `admitPerSecond`, applied only
 * while the loop is on, logged only when it moved enough (update-settings-9.lua).
 */
export async function updateSettings(
  ctx: RestoringContext,
  eventId: string,
  patch: SettingsPatch,
  by?: string,
  loop = false,
): Promise<UpdateSettingsResult> {
  const k = keysFor(eventId);
  if (!k) return notFound;
  const parsed = patchSchema.safeParse(patch);
  if (!parsed.success) return { ok: false, reason: "invalid", issues: issuesOf(parsed.error) };
  const args: string[] = [];
  for (const [name, value] of Object.entries(parsed.data)) {
    if (value === undefined) continue;
    if (name === "autoAdmit") args.push(...autoAdmitArgs(value as Partial<AutoAdmitSettings>));
    else args.push(name, typeof value === "boolean" ? (value ? "1" : "0") : String(value));
  }
  // Who made the change, kept in its log entry (not a setting).
  if (by !== undefined) args.push("by", by.slice(0, 64));
  if (loop) args.push("loop", "1");
  return ctx.withRestore(eventId, () =>
    ctx.guarded("updateSettings", eventId, async () => {
      const { reply, outcome } = await ctx.script("updateSettings", lineKeysWithChanges(k), args);
      if (outcome === "not_found") return notFound;
      if (outcome === "auto_admit_on") return { ok: false as const, reason: outcome };
      if (outcome === "auto_admit_bounds") {
        return {
          ok: false as const,
          reason: "invalid" as const,
          issues: ["autoAdmit.minPerSecond: must not exceed maxPerSecond"],
        };
      }
      if (outcome) throw new ReplyShapeError(`updateSettings: unexpected ${outcome}`);
      const f = new Fields(reply);
      const changed = f.num("changed");
      if (changed > 0 && !loop) ctx.log?.info({ eventId, patch: parsed.data }, "waiting-room settings changed");
      const version = f.str("settingsAt") === "" ? 0 : f.num("settingsAt");
      return { ok: true as const, changed, settings: settingsFrom(f), version };
    }),
  );
}

export async function settingsHistory(ctx: RoomContext, eventId: string, limit = 50): Promise<SettingsHistoryResult> {
  const k = keysFor(eventId);
  if (!k) return notFound;
  const n = Math.max(1, Math.min(1_000, Math.floor(limit)));
  return ctx.guarded("settingsHistory", eventId, async () => {
    const [exists, entries] = await Promise.all([
      ctx.redis.exists(k.room),
      ctx.redis.xrevrange(k.changes, "+", "-", "COUNT", n),
    ]);
    if (exists === 0) return notFound;
    return { ok: true as const, changes: entries.map(([id, flat]) => changeFrom(id, flat)) };
  });
}

const FAN_RECORD = /^([a-z])\|\d+\|\d+\|([^|]*)\|/;
const FAN_STATE: Record<string, FanStatusName> = {
  p: "prequeue",
  w: "waiting",
  a: "admitted",
  x: "abandoned",
  c: "completed",
  e: "expired",
  r: "revoked",
};

/**
 * The operator revokes a fan: the fan's session (the one its place record names, lua/waiting-room/
 * includes/fans.lua) ends as end-session-8.lua ends it, its slot freed, and the fan may not join
 * the event again. A fan with no session (still in line) is `no_session`, with its status: only
 * an admitted fan holds an access token to stop. Two round trips: the record, then the script,
 * which ends only the session the record named (a session ended meanwhile stays ended).
 */
export async function revokeFan(ctx: RoomContext, eventId: string, fanId: string): Promise<RevokeFanResult> {
  const k = keysFor(eventId);
  if (!k) return notFound;
  const record = await ctx.guarded("revokeFan", eventId, async () => {
    const [exists, restoredAt, raw, claims] = await Promise.all([
      ctx.redis.exists(k.room),
      ctx.redis.hget(k.room, "restoredAt"),
      ctx.redis.hget(k.fans, fanId),
      ctx.redis.hget(k.room, "claims"),
    ]);
    // A room whose records live on the fan shards (`claims` 2): the record is the fan's shard's.
    const shards = Number(claims) === 2 ? (await ctx.fanLine.roomOf(eventId)).beats : null;
    const own = shards ? await shards.records.record(eventId, fanId) : raw;
    return { ok: true as const, exists: exists > 0, restored: restoredAt !== null, raw: own, shards };
  });
  if (!record.ok) return record;
  if (!record.exists) return notFound;
  if (record.raw === null) {
    // A room restored after a Redis loss cannot tell a fan it never knew from one admitted in the
    // lost room, whose access token (of the lost room's epoch) the claim path still trusts: the fan
    // id is revoked (recorded, and a revoked record here), which refuses that token and its joins.
    if (record.restored && ctx.records) return revokeUnseen(ctx, eventId, fanId, record.shards);
    return { ok: false, reason: "unknown_fan" };
  }
  const match = FAN_RECORD.exec(record.raw);
  if (!match) throw new ReplyShapeError(`fan record of ${eventId} is malformed`);
  const [, letter = "", sessionId = ""] = match;
  const status = FAN_STATE[letter];
  if (!status) throw new ReplyShapeError(`fan record of ${eventId} has state ${letter}`);
  if (sessionId === "") {
    // Revoked already (a revoked record a restore or revokeUnseen wrote has no session): done.
    if (status === "revoked") return { ok: true, sessionId: "", freed: false, status };
    return { ok: false, reason: "no_session", status };
  }
  // Recorded outside Redis first: a room Redis loses comes back refusing the fan (restore.ts). A
  // failure here changes nothing; the operator retries.
  if (ctx.records) {
    try {
      await ctx.records.recordRevocation(eventId, fanId);
    } catch (err) {
      ctx.log?.warn({ eventId, err: (err as Error).message }, "the revocation could not be recorded");
      return { ok: false, reason: "unavailable", message: "the revocation could not be recorded; retry" };
    }
  }
  if (record.shards) return revokeOnShards(ctx, eventId, fanId, record.shards);
  const ended = await endSession(ctx, eventId, sessionId, "revoked");
  if (!ended.ok) return ended.reason === "unknown_session" ? { ok: false, reason: "unknown_fan" } : ended;
  return { ok: true, sessionId, freed: ended.freed, status: ended.status };
}

/**
 * A room whose records live on the fan shards (docs/redis-cluster.md "Steps 2 and 3, call by
 * call", step 5), after the revocation was recorded: the record to `r` on the fan's shard first
 * (a poll then claims nothing more), then the place barred on the event's slot, the session
 * claimed there ended (claims-9.lua 'revoke'). A claim that raced the first step has its session
 * ended by the second; one after it is refused.
 */
async function revokeOnShards(
  ctx: RoomContext,
  eventId: string,
  fanId: string,
  shards: FanBeats,
): Promise<RevokeFanResult> {
  const k = keysFor(eventId);
  if (!k) return notFound;
  return ctx.guarded("revokeFan", eventId, async () => {
    const before = await shards.records.revoke(eventId, fanId);
    const place = Number(before?.split("|")[1] ?? 0);
    const { reply, outcome } = await ctx.script("claims", lineKeysWithClaims(k), ["revoke", place]);
    if (outcome === "not_found") return notFound;
    if (!Array.isArray(reply)) throw new ReplyShapeError(`claims revoke of ${eventId}: ${String(reply)}`);
    const sessionId = reply[0] === "ended" ? String(reply[1]) : (FAN_RECORD.exec(before ?? "")?.[2] ?? "");
    return {
      ok: true as const,
      sessionId,
      freed: reply[0] === "ended" && Number(reply[2]) === 1,
      status: "revoked" as const,
    };
  });
}

/**
 * Revokes a fan id a restored room does not know: recorded first, then a revoked record. In a room
 * whose records live on the shards the event's slot's record still refuses the lost room's access
 * token (session-active-3.lua reads it across epochs), and the shard's refuses a join.
 */
async function revokeUnseen(
  ctx: RoomContext,
  eventId: string,
  fanId: string,
  shards: FanBeats | null = null,
): Promise<RevokeFanResult> {
  const k = keysFor(eventId);
  if (!k || !ctx.records) return notFound;
  try {
    await ctx.records.recordRevocation(eventId, fanId);
  } catch (err) {
    ctx.log?.warn({ eventId, err: (err as Error).message }, "the revocation could not be recorded");
    return { ok: false, reason: "unavailable", message: "the revocation could not be recorded; retry" };
  }
  const written = await ctx.guarded("revokeFan", eventId, async () => ({
    ok: true as const,
    // The record of revoke-fan's reading (includes/fans.lua): revoked, no place, no session.
    set: (await ctx.redis.hsetnx(k.fans, fanId, "r|0|0||0|0")) === 1,
  }));
  if (!written.ok) return written;
  // On the shards: the record to r there whatever it became meanwhile (a join in between), its
  // place barred and any session claimed there ended.
  if (shards) return revokeOnShards(ctx, eventId, fanId, shards);
  // The fan joined in between: revoke what it has now.
  if (!written.set) return revokeFan(ctx, eventId, fanId);
  ctx.log?.info({ eventId, fanId }, "fan revoked in a restored room (its session, if any, was in the room Redis lost)");
  return { ok: true, sessionId: "", freed: false, status: "revoked" };
}

/** Deletes every key of the event's waiting room. */
export async function removeRoom(ctx: RoomContext, eventId: string): Promise<RemoveResult> {
  const k = keysFor(eventId);
  if (!k) return notFound;
  return ctx.guarded("remove", eventId, async () => {
    // The fan shards' keys first (each its own slot, so one UNLINK each), then the room's.
    const shardKeys = await ctx.fanLine.keysOf(eventId);
    const fromShards = await Promise.all(shardKeys.map((key) => ctx.redis.unlink(key)));
    const removedKeys = await ctx.redis.unlink(...allKeys(k));
    return { ok: true as const, removedKeys: removedKeys + fromShards.reduce((a, b) => a + b, 0) };
  });
}
