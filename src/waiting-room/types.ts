/**
 * The waiting room's public types. Every method returns a value, never throws for an expected
 * outcome: `ok: true` with the result, or `ok: false` with a `reason` the gateway maps to HTTP.
 */
import type { DrandBeacon, DrandChain } from "../lottery/drand.js";
import type { TokenFailure } from "./tokens.js";

export type RoomState = "prequeue" | "open" | "paused" | "closed";

export type FanStatusName = "prequeue" | "waiting" | "admitted" | "abandoned" | "completed" | "expired" | "revoked";

/** Settings in force for one event (what the operator set, as stored in Redis). */
export interface RoomSettings {
  onSaleAt: string;
  admitPerSecond: number;
  maxActive: number;
  sessionSeconds: number;
  abandonSeconds: number;
  paused: boolean;
  closed: boolean;
  /** Leading zero bits a new place's proof of work must have (0: no proof asked). */
  powBits: number;
  /** Whether a new place needs an operator's invite token. */
  invites: boolean;
  /** Closed-loop admission (src/waiting-room/admission-loop.ts): while enabled it sets admitPerSecond. */
  autoAdmit: AutoAdmitSettings;
}

/**
 * The closed loop's settings: the rate it sets stays within [minPerSecond, maxPerSecond] and backs
 * off when the claim path's p99 latency passes targetClaimP99Ms or DynamoDB throttles pass
 * maxThrottlesPerSecond (docs/waiting-room.md "Admission that follows capacity").
 */
export interface AutoAdmitSettings {
  enabled: boolean;
  minPerSecond: number;
  maxPerSecond: number;
  targetClaimP99Ms: number;
  maxThrottlesPerSecond: number;
}

/** The public `GET /v1/events/{eventId}/waiting-room` body. */
export interface WaitingRoomInfo {
  onSaleAt: string;
  state: RoomState;
  waiting: number;
  admitPerSecond: number;
  /** A join for a new place brings a proof of work of this many bits (0: none). */
  powBits: number;
  /** A join for a new place brings an operator's invite token. */
  invites: boolean;
  /**
   * The draw's inputs: the commitment from the start; once drawn, the revealed seed, the
   * membership hash M, the beacon (when one was recorded) and the pre-queue's size
   * (src/lottery/draw.ts has the recipe).
   */
  lottery: {
    commitment: string;
    seed?: string;
    membershipHash?: string;
    beacon?: string;
    size?: number;
    /**
     * The drand chain the event named and the round the draw takes (the first published at or
     * after the close), announced from the start (src/waiting-room/beacon.ts).
     */
    drand?: DrandChain & { round: number; roundAt: string; knownAs?: string };
    /** The round recorded as the beacon, with its signature: anyone checks it against the chain's key. */
    beaconRound?: DrandBeacon;
    /** The pre-queue has closed and the draw waits for its drand round to be recorded. */
    awaitingBeacon?: boolean;
    /** Once drawn: when the pre-queue closed (the round is the first published at or after it). */
    closedAt?: string;
    /**
     * The draw sealed in DynamoDB is not the one Redis holds (the room was recreated after a wipe):
     * these are the sealed draw's inputs, and the membership pages serve its sealed order.
     */
    sealedOnly?: boolean;
  };
}

/** Operator figures. `admitted`, `abandoned`, `completed`, `expired`, `revoked` are totals. */
export interface WaitingRoomStats {
  state: RoomState;
  /** Fans in line (pre-queued or waiting), not counting places known to be abandoned. */
  waiting: number;
  /** Sessions active now (admitted, not yet expired, completed or revoked). */
  active: number;
  joined: number;
  admitted: number;
  abandoned: number;
  completed: number;
  expired: number;
  revoked: number;
  /** Admissions per second a waiting fan can expect now. */
  effectiveAdmitPerSecond: number;
  /** Places the line has reached so far (the serving position). */
  servedThrough: number;
  /** Places handed out so far (the back of the line). */
  lastPosition: number;
  /** Size of the drawn pre-queue (0 before the draw). */
  preQueued: number;
  /**
   * A room with fan shards admits nobody now: its last completed sweep of lost places is over 3 s
   * old (a backlog of fans who left, or no gateway could sweep). Always false without shards.
   */
  awaitingSweep: boolean;
  /**
   * A room with claims (WAITING_ROOM_CLAIMS): sessions offered at places the line passed, not yet
   * claimed by their fans. They count against maxActive beside `active`. Always 0 without claims.
   */
  offered: number;
  /** The pre-queue has closed and its draw is not done yet (waiting for its beacon, or running). */
  drawing: boolean;
  /** Redis time the figures were taken at. */
  at: string;
}

interface PlaceCommon {
  /**
   * The fan's place in line, fixed once given. Before the draw (status "prequeue") it is only the
   * fan's arrival number among pre-queued fans, `provisional: true`: the real place is drawn at
   * onSaleAt. For ended/abandoned states it is the place the fan had.
   */
  position: number;
  /** Fans still ahead (abandoned places excluded as they are found). Prequeue: all the others. */
  ahead: number;
  etaSeconds: number | null;
  pollAfterSeconds: number;
  /** The poll scheduled on the fan's ETA, in milliseconds (src/waiting-room/advice.ts). */
  pollAfterMs?: number;
}

export type FanPlace =
  | (PlaceCommon & { status: "prequeue"; provisional: true; onSaleAt: string })
  | (PlaceCommon & { status: "waiting"; provisional: false })
  | (PlaceCommon & {
      status: "admitted";
      provisional: false;
      sessionId: string;
      accessToken: string;
      accessExpiresAt: string;
      /** When the line admitted the fan (the decision), ISO 8601 at millisecond precision. */
      admittedAt: string;
    })
  | (PlaceCommon & {
      status: "abandoned" | "completed" | "expired" | "revoked";
      provisional: false;
      /** Whether `join` gives this fan a new place at the back (not after a revocation). */
      canRejoin: boolean;
    });

/**
 * A rate limit a line script takes in the same Redis call as the line, so a join or a poll is one
 * round trip. The bucket is per event (its key carries the event's tag): `subject` (a client IP,
 * a fan id) may make `perSecond` requests per second with bursts of `burst`.
 */
export interface LineLimit {
  subject: string;
  perSecond: number;
  burst: number;
}

/** The poll's limits: per client IP, then per fan (the IP's bucket is taken first). */
export interface StatusLimits {
  ip?: LineLimit | undefined;
  fan?: LineLimit | undefined;
}

/** A limit refused the call before it touched the line; retry after `retryAfterMs`. */
export type RateLimited = { ok: false; reason: "rate_limited"; limit: "ip" | "fan"; retryAfterMs: number };

export type Unavailable = { ok: false; reason: "unavailable"; message: string };
export type NotFound = { ok: false; reason: "not_found" };
export type Invalid = { ok: false; reason: "invalid"; issues: string[] };

export interface ConfigureInput {
  onSaleAt: Date | string | number;
  admitPerSecond: number;
  maxActive: number;
  sessionSeconds: number;
  /** Default 60. */
  abandonSeconds?: number;
  /** The drand chain whose round is the draw's beacon (named once, before the close; src/waiting-room/beacon.ts). */
  drand?: DrandChain | undefined;
}

/** The bot settings (proof of work, invites) a restored room comes back with, and the loop's. */
export interface BotSettings {
  powBits?: number;
  invites?: boolean;
  autoAdmit?: AutoAdmitSettings;
  /** The version of the kept settings: the restored room's next change is numbered above it. */
  settingsVersion?: number;
}

/** What a restore configures a lost room with: the stored settings and the operator's decisions. */
export interface RestoreInput extends ConfigureInput, BotSettings {
  paused?: boolean;
  /** The sale was closed (close-sale): the room comes back closed, not merely paused. */
  closed?: boolean;
  /** Fans the operator revoked: they may not take a place in the new room. */
  revoked?: string[];
}

export type ConfigureResult =
  | { ok: true; created: boolean; changed: boolean; settings: RoomSettings; info: WaitingRoomInfo }
  | Invalid
  | NotFound
  | { ok: false; reason: "already_open" }
  | Unavailable;

/** What a join brought that the gateway checked (proof of work, invite); the room decides if it is enough. */
export interface JoinCredentials {
  /** Bits of a checked proof of work (0 or absent: none). */
  proofBits?: number;
  /** An invite was checked. */
  invite?: boolean;
}

export type JoinResult =
  | {
      ok: true;
      created: boolean;
      fanId: string;
      queueToken: string;
      place: FanPlace;
      /**
       * The room asks a new place for an invite (its `invites` setting, read in the join's own
       * script): a place given back then goes only with the invite (src/http/routes/queue/join.ts).
       */
      invites: boolean;
    }
  | NotFound
  /** The room asks a proof of `powBits` bits, or an invite, for a new place. */
  | { ok: false; reason: "pow_required"; powBits: number }
  | { ok: false; reason: "invite_required" }
  | { ok: false; reason: "closed" | "revoked" | "invalid_fan" }
  | RateLimited
  | Unavailable;

export type StatusResult =
  | {
      ok: true;
      fanId: string;
      place: FanPlace;
      /**
       * Set when the fan's token came from another room epoch (Redis lost the line and the room
       * was created again) and the fan was given a place in the new line, as a join would; with
       * the queue token of the new epoch.
       */
      replaced?: { queueToken: string };
      /** Answered from this process's view of the line, with no Redis call (line-view.ts). */
      cached?: true;
    }
  | NotFound
  | { ok: false; reason: "not_joined" }
  | { ok: false; reason: "token"; token: TokenFailure }
  | RateLimited
  | Unavailable;

export type InfoResult = { ok: true; info: WaitingRoomInfo } | NotFound | Unavailable;

export type StatsResult = { ok: true; stats: WaitingRoomStats; settings: RoomSettings } | NotFound | Unavailable;

export interface SettingsPatch {
  admitPerSecond?: number;
  maxActive?: number;
  sessionSeconds?: number;
  abandonSeconds?: number;
  paused?: boolean;
  closed?: boolean;
  powBits?: number;
  invites?: boolean;
  /** The fields given change; the others keep their values. */
  autoAdmit?: Partial<AutoAdmitSettings>;
}

export type UpdateSettingsResult =
  /**
   * `version`: the settings' version in Redis (update-settings-9.lua), rising with every change
   * (0 before the first): what orders the copies kept outside Redis.
   */
  | { ok: true; changed: number; settings: RoomSettings; version: number }
  | Invalid
  /** A manual admitPerSecond while the loop is on (and stays on): the loop owns the rate. */
  | { ok: false; reason: "auto_admit_on" }
  | NotFound
  | Unavailable;

export type OpenNowResult = { ok: true; changed: boolean; info: WaitingRoomInfo } | NotFound | Unavailable;

export type EndSessionResult =
  | { ok: true; freed: boolean; fanId: string; status: FanStatusName }
  | NotFound
  | { ok: false; reason: "unknown_session" }
  | Unavailable;

export type RevokeFanResult =
  | { ok: true; sessionId: string; freed: boolean; status: FanStatusName }
  | NotFound
  | { ok: false; reason: "unknown_fan" }
  | { ok: false; reason: "no_session"; status: FanStatusName }
  | Unavailable;

/**
 * `decided: false` when this room cannot know the session: it has another epoch than the token
 * (Redis lost the room, which was created again) or there is no room. The token is then trusted
 * on its signature and expiry alone, as while Redis is down. `active` is false then.
 */
export type SessionActiveResult = { ok: true; active: boolean; decided: boolean } | Unavailable;

/** How a missing room was dealt with: created again from the stored event, or not. */
export type RestoreOutcome = "restored" | "exists" | "no_event" | "unavailable";

export type LotteryPageResult =
  /**
   * `entries`: SHA-256 (hex) of each fan id, from place `offset + 1` on; `fanIds` too when the
   * page came from Redis (not from the sealed draw in DynamoDB: see snapshot.ts).
   */
  | { ok: true; preQueued: number; offset: number; entries: string[]; fanIds?: string[] }
  | NotFound
  | { ok: false; reason: "not_drawn" }
  | Invalid
  | Unavailable;

export interface SettingsChange {
  /** Stream entry id. */
  id: string;
  at: string;
  /** `restore`: created again from the stored event after Redis lost it. */
  kind: "create" | "configure" | "settings" | "open" | "restore";
  fields: Record<string, string>;
}

export type SettingsHistoryResult = { ok: true; changes: SettingsChange[] } | NotFound | Unavailable;

export type RemoveResult = { ok: true; removedKeys: number } | NotFound | Unavailable;
