/**
 * Reading the line scripts' replies: flat key/value lists (see lua/waiting-room/includes/views.lua)
 * read by name with checks, so a reply of the wrong shape is an error, never a half-read result.
 * Negative codes are read through the family's table (codes.ts) before a reply gets here.
 */
import type {
  AutoAdmitSettings,
  FanStatusName,
  RateLimited,
  RoomSettings,
  RoomState,
  SettingsChange,
  WaitingRoomInfo,
  WaitingRoomStats,
} from "./types.js";

export class ReplyShapeError extends Error {
  override name = "ReplyShapeError";
}

export const ROOM_STATES: readonly RoomState[] = ["prequeue", "open", "paused", "closed"];
export const FAN_STATUSES: readonly FanStatusName[] = [
  "prequeue",
  "waiting",
  "admitted",
  "abandoned",
  "completed",
  "expired",
  "revoked",
];
const CHANGE_KINDS: readonly SettingsChange["kind"][] = ["create", "configure", "settings", "open", "restore"];

export const iso = (ms: number) => new Date(ms).toISOString();

/** A script's flat key/value reply, read with checks. */
export class Fields {
  private readonly map = new Map<string, string>();
  /**
   * `base`: the fields not in `reply` are read from it. A batch of joins shares one view of the room
   * (join-batch-n.lua) and each fan's reply is only its own few fields over it, not a copy of it.
   */
  constructor(
    reply: unknown,
    private readonly base?: Fields,
  ) {
    if (!Array.isArray(reply)) throw new ReplyShapeError(`expected a list, got ${typeof reply}`);
    for (let i = 0; i + 1 < reply.length; i += 2) this.map.set(String(reply[i]), String(reply[i + 1]));
  }
  str(name: string): string {
    const v = this.map.get(name) ?? this.base?.map.get(name);
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
  /** A flag that only some replies carry: absent is false. */
  has(name: string): boolean {
    const v = this.map.get(name) ?? this.base?.map.get(name);
    return v !== undefined && v !== "0";
  }
  oneOf<T extends string>(name: string, values: readonly T[]): T {
    const v = this.str(name);
    if (!(values as readonly string[]).includes(v)) throw new ReplyShapeError(`${name} is ${v}`);
    return v as T;
  }
}

/** A script's answer when a limit taken in the same call refused it (see status-10.lua). */
export function limitedFrom(reply: unknown): RateLimited | null {
  if (!Array.isArray(reply) || reply[0] !== "limited") return null;
  const limit = reply[1] === "fan" ? "fan" : "ip";
  const retryAfterMs = Number(reply[3]);
  if (!Number.isFinite(retryAfterMs)) throw new ReplyShapeError("limited reply without retryAfterMs");
  return { ok: false, reason: "rate_limited", limit, retryAfterMs };
}

/** join-9.lua's answer when the room asks a proof of work or an invite the join did not bring. */
export function refusedFrom(
  reply: unknown,
): { ok: false; reason: "pow_required"; powBits: number } | { ok: false; reason: "invite_required" } | null {
  if (!Array.isArray(reply) || reply[0] !== "refused") return null;
  if (reply[1] === "invite") return { ok: false, reason: "invite_required" };
  const powBits = Number(reply[3]);
  if (reply[1] !== "pow" || !Number.isInteger(powBits)) throw new ReplyShapeError("malformed refused reply");
  return { ok: false, reason: "pow_required", powBits };
}

export function settingsFrom(f: Fields): RoomSettings {
  return {
    onSaleAt: iso(f.num("onSaleAt")),
    admitPerSecond: f.num("admitPerSecond"),
    maxActive: f.num("maxActive"),
    sessionSeconds: f.num("sessionSeconds"),
    abandonSeconds: f.num("abandonSeconds"),
    paused: f.flag("paused"),
    closed: f.flag("closed"),
    powBits: f.num("powBits"),
    invites: f.flag("invites"),
    autoAdmit: autoAdmitFrom(f),
  };
}

/** The loop's settings when an operator never set them (update-settings-9.lua has min and max too). */
export const AUTO_ADMIT_DEFAULTS: AutoAdmitSettings = {
  enabled: false,
  minPerSecond: 0,
  maxPerSecond: 100_000,
  targetClaimP99Ms: 250,
  maxThrottlesPerSecond: 0,
};

function autoAdmitFrom(f: Fields): AutoAdmitSettings {
  const d = AUTO_ADMIT_DEFAULTS;
  const or = (name: string, fallback: number) => (f.str(name) === "" ? fallback : f.num(name));
  return {
    enabled: or("autoAdmit", 0) !== 0,
    minPerSecond: or("autoMin", d.minPerSecond),
    maxPerSecond: or("autoMax", d.maxPerSecond),
    targetClaimP99Ms: or("autoP99Ms", d.targetClaimP99Ms),
    maxThrottlesPerSecond: or("autoThrottles", d.maxThrottlesPerSecond),
  };
}

/** The room hash's field of each loop setting (update-settings-9.lua, configure-9.lua). */
export const AUTO_ADMIT_FIELDS: Record<keyof AutoAdmitSettings, string> = {
  enabled: "autoAdmit",
  minPerSecond: "autoMin",
  maxPerSecond: "autoMax",
  targetClaimP99Ms: "autoP99Ms",
  maxThrottlesPerSecond: "autoThrottles",
};

export function infoFrom(f: Fields): WaitingRoomInfo {
  const seed = f.str("seed");
  return {
    onSaleAt: iso(f.num("onSaleAt")),
    state: f.oneOf("state", ROOM_STATES),
    waiting: f.num("waiting"),
    admitPerSecond: f.num("admitPerSecond"),
    powBits: f.num("powBits"),
    invites: f.flag("invites"),
    lottery: seed ? drawnLottery(f, seed) : { commitment: f.str("commitment") },
  };
}

function drawnLottery(f: Fields, seed: string): WaitingRoomInfo["lottery"] {
  const beacon = f.str("beacon");
  return {
    commitment: f.str("commitment"),
    seed,
    membershipHash: f.str("membershipHash"),
    ...(beacon ? { beacon } : {}),
    size: f.num("preCount"),
  };
}

export function statsFrom(f: Fields): WaitingRoomStats {
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
    drawing: f.num("openedAt") > 0 && !f.flag("drawn"),
    awaitingSweep: f.flag("awaitingSweep"),
    offered: f.num("offered"),
    at: iso(f.num("now")),
  };
}

/** One entry of the settings-change stream (configure-9, update-settings-9, open-now-9 write them). */
export function changeFrom(id: string, flat: readonly unknown[]): SettingsChange {
  const fields: Record<string, string> = {};
  for (let i = 0; i + 1 < flat.length; i += 2) fields[String(flat[i])] = String(flat[i + 1]);
  const { at, kind, ...rest } = fields;
  const known = CHANGE_KINDS.find((c) => c === kind);
  if (!known || at === undefined) throw new ReplyShapeError(`change ${id} is malformed`);
  return { id, at: iso(Number(at)), kind: known, fields: rest };
}
