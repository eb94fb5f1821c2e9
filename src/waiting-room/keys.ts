/**
 * Every Redis key of the waiting room, built here and nowhere else (never inside Lua). All keys
 * of one event share the hash tag `{evt:<eventId>}`, so one event's scripts run on one Cluster
 * slot; the `wr:` prefix keeps them apart from other modules' keys under the same tag.
 */

/** The gateway's event id rule; it also keeps `{` and `}` out of the hash tag. */
export const EVENT_ID_PATTERN = /^[A-Za-z0-9_]{1,32}$/;

/**
 * Fan ids: 1..128 printable characters (the API contract): no control character, no lone
 * surrogate, no line or paragraph separator (U+2028, U+2029) and no U+FFFD (what invalid UTF-8
 * decodes to: the client's bytes were not the id it meant).
 */
export const FAN_ID_PATTERN = /^[^\p{Cc}\p{Cs}\p{Zl}\p{Zp}\uFFFD]{1,128}$/u;

export interface WaitingRoomKeys {
  /** HASH: settings, lottery seed and commitment, cursor, budget, counters. */
  room: string;
  /** HASH: fanId -> packed place record. */
  fans: string;
  /**
   * ZSET: the pre-queue. Members are the plain fan ids (prequeue.lua pre_member), score 0 while it
   * is open; the draw writes each fan's drawn place as its score. Membership frozen at the close.
   */
  pre: string;
  /** ZSET: fanId -> place, for fans placed after the draw and not yet reached. */
  fifo: string;
  /** ZSET: fanId -> last join or poll (ms), fans still in line. */
  seen: string;
  /** ZSET: places vacated by abandonment (only those ahead of the cursor count). */
  gone: string;
  /** ZSET: sessionId -> session expiry (ms). */
  active: string;
  /** HASH: invite identity -> the fan id holding its place (one place per identity). */
  identities: string;
  /** HASH: sessionId -> fanId. */
  sessions: string;
  /** STREAM: capped log of settings changes. */
  changes: string;
  /**
   * HASH: place -> its claim, in a room whose records live on the fan shards (room.lua
   * shard_records, lua/waiting-room/claims-9.lua): "sid|exp|at" of the session the place's fan
   * claimed, `x` a place lost, `r` a place revoked. Empty in every other room.
   */
  claims: string;
}

export function isEventId(eventId: string): boolean {
  return EVENT_ID_PATTERN.test(eventId);
}

export function isFanId(fanId: string): boolean {
  return FAN_ID_PATTERN.test(fanId);
}

export function waitingRoomKeys(eventId: string): WaitingRoomKeys {
  if (!isEventId(eventId)) throw new RangeError(`invalid event id: ${JSON.stringify(eventId)}`);
  const key = (name: string) => `wr:{evt:${eventId}}:${name}`;
  return {
    room: key("room"),
    fans: key("fans"),
    pre: key("pre"),
    fifo: key("fifo"),
    seen: key("seen"),
    gone: key("gone"),
    active: key("active"),
    sessions: key("sessions"),
    changes: key("changes"),
    identities: key("identities"),
    claims: key("claims"),
  };
}

/** KEYS[1..8] of every line script (lua/waiting-room/includes/room.lua), in that order. */
export function lineKeys(k: WaitingRoomKeys): string[] {
  return [k.room, k.fans, k.pre, k.fifo, k.seen, k.gone, k.active, k.sessions];
}

/** KEYS[1..9] of claims-9.lua: the line keys and the claims. */
export function lineKeysWithClaims(k: WaitingRoomKeys): string[] {
  return [...lineKeys(k), k.claims];
}

/** KEYS[1..9]: the line keys and the settings-change log. */
export function lineKeysWithChanges(k: WaitingRoomKeys): string[] {
  return [...lineKeys(k), k.changes];
}

/**
 * A rate-limit bucket (a string, see lua/includes/token-bucket.lua) that a line script takes in the
 * same call, hence under the event's tag: `limit` names it (`ip:status`, `fan:status`, `ip:join`),
 * `subject` is whom it counts (a client IP, a fan id). Buckets expire by themselves once full, so
 * `allKeys` does not list them.
 */
export function limitKey(eventId: string, limit: string, subject: string): string {
  if (!isEventId(eventId)) throw new RangeError(`invalid event id: ${JSON.stringify(eventId)}`);
  return `wr:{evt:${eventId}}:lim:${limit}:${subject}`;
}

export function allKeys(k: WaitingRoomKeys): string[] {
  return [...lineKeysWithChanges(k), k.identities, k.claims];
}
