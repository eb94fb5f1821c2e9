/**
 * The line as this process caches it, so that the poll of a fan whose turn has not come touches
 * no Redis (issue 28; docs/waiting-room.md "A poll answered from the cache").
 *
 * Per event this process serves polls of, it keeps:
 *   - the view: the cursor (`served`), the vacated places ahead of it, the room's state and the
 *     figures a fan's advice needs, read by lua/waiting-room/line-view-8.lua every
 *     VIEW_REFRESH_MS (that call also runs the line's tick, so admission moves however polls are
 *     answered);
 *   - the fans it answered from Redis (join or poll): their place (or pre-queue arrival number),
 *     the room epoch, and when this process last saw them poll;
 *   - the heartbeats owed: every fan answered here since the last refresh, sent with it in one
 *     call, which records them as seen now in Redis and names those no longer in line.
 *
 * A fan this process does not know (it joined or last polled through another process: a balancer
 * that spreads requests) is looked up in the next refresh instead of sent to Redis at once: the
 * poll waits for it (at most a refresh), and the same call finds the fan's record and beat and
 * records the beat, so the poll is answered here when the fan is waiting behind the cursor and
 * polled lately (line-view-8.lua's lookups). One status-10.lua a fan a process was what a fan
 * whose polls go round a few processes cost Redis on each of its polls. In a room with fan shards
 * the beat comes from the fan's shard (beats-1.lua 'look') and the record from the event's slot by
 * plain commands (lookUpRecords), both beside the refresh, which may then read its view from a copy
 * (below): found when both find the fan.
 *
 * In a room with fan shards one gateway at a time is the room's admitter (a lease line-view-8.lua
 * hands out): it refreshes on the event's slot and writes the view into copies on the room's first
 * shards (view-copy-1.lua); every other gateway reads a copy, beside its heartbeats and its
 * lookups, and calls the line-view script only for its first view, after changing the room, or when
 * the copy is older than COPY_MAX_AGE_MS (the admitter gone: that call takes the lease once it has lapsed). So
 * the event's slot runs about ten refreshes a second whatever the number of gateways.
 *
 * A poll is answered here only when the answer cannot be one Redis would give differently except
 * by the view's age (at most VIEW_STALE_MS, typically one refresh): the fan is known here, was
 * seen here within the abandon time less two refreshes and a second (so its place cannot have
 * been lost: every poll answered here is in Redis within a refresh), the room is drawn (or the
 * pre-queue is open and the on-sale more than a second away, or closed with its draw pending: a
 * pre-queued fan's answer then holds no place), and the fan's turn is more than NEAR_SECONDS of
 * admissions away. Every other poll goes to Redis as before (status-10.lua),
 * which admits the fan when its turn has come: the admission decisions stay in Redis, in one
 * place, and Redis is asked about O(admission rate) polls a second, not O(fans in line).
 */
import { randomUUID } from "node:crypto";
import { createLocalBuckets } from "../local-buckets.js";
import { redisReady } from "../redis/availability.js";
import { onceEvery } from "../throttle.js";
import { adviseFan, DRAW_GRACE_MS } from "./advice.js";
import type { RoomContext } from "./context.js";
import { keysFor } from "./context.js";
import { lineKeys, type WaitingRoomKeys } from "./keys.js";
import { Fields, iso, ReplyShapeError, ROOM_STATES } from "./replies.js";
import type { ShardedRoom } from "./fan-line.js";
import { type AbandonClock, abandonClockFrom, type FanBeats, type KeptBeats, type ViewCopy } from "./fan-shards.js";
import type { FanPlace, RateLimited, RoomState, StatusLimits } from "./types.js";

/** How often the view is read (and the heartbeats sent), per event, while it is polled. */
export const VIEW_REFRESH_MS = 100;
/** A view older than this answers nothing: every poll goes to Redis until a refresh succeeds. */
const VIEW_STALE_MS = 1_000;
/** An event nobody polled in this process for this long is dropped, with its fans. */
const VIEW_IDLE_MS = 15_000;
/** Fans whose turn is within this many seconds of admissions poll Redis, which admits them. */
export const NEAR_SECONDS = 1;
/** A pre-queued fan's poll goes to Redis from this long before the on-sale (the close, the draw). */
const NEAR_ON_SALE_MS = 1_000;
/**
 * Vacated places ahead of the cursor the view lists, nearest first: every gateway reads them ten
 * times a second, so the list is bounded. A fan behind the last one listed is told an `ahead` that
 * leaves the rest uncounted (an over-estimate, so an ETA on the safe side) until the cursor nears.
 */
const GONE_LISTED = 2_000;
/**
 * How long a refresh waits for a fan shard to take its heartbeats (a room with fan shards); a shard
 * slower than that, or failing (its master failing over), keeps them owed for the next refresh,
 * and the view is used meanwhile: one shard's trouble must not send every poll of the event to Redis.
 */
const KEEP_WAIT_MS = 300;
const NOTHING_KEPT: KeptBeats = { missing: [], unsent: [] };
/**
 * A room with fan shards: a refresh sends the heartbeats owed only once the oldest has waited this
 * long, or BEATS_SENT_AT are owed. Each shard's call costs about as much as ten beats whatever it
 * carries, and every gateway refreshes ten times a second: with many gateways on one event, each
 * owing a few beats a refresh, most shard calls carried one (docs/scaling.md "Many gateways on one
 * event"). The hold is taken from the keep time (keepMsOf), so a place answered here is still kept;
 * a fan who stops is given up that much later at most.
 */
export const BEATS_HELD_MS = 400;
const BEATS_SENT_AT = 128;
/**
 * A room with fan shards: a gateway that is not the room's admitter reads its view from a copy on
 * a shard (view-copy-1.lua), which the admitter writes every refresh. A copy older than this (the
 * admitter stopped, or its writes fail) sends the reader to the event's slot, as before, where it
 * takes the lease once the admitter's has lapsed (line-view-8.lua LEASE_MS, 1 s).
 */
export const COPY_MAX_AGE_MS = 300;
/**
 * How old a view may be for a poll Redis answers to take the room's abandon clock from it
 * (`abandonClock`). The clock moves only at the close, the draw and a change of abandonSeconds; a
 * view this fresh is behind by at most about three refreshes (a copy's age counted). Behind at the
 * draw, it says the draw is pending, when no place lapses: the poll waits a refresh for its drawn
 * place. Behind a change of abandonSeconds, it judges one beat by the old time, as a sweep that read
 * the room just before the change does.
 */
const CLOCK_MAX_AGE_MS = 300;
/** Heartbeats per script call (Lua's unpack stack), the rest in further calls of the same refresh. */
const BEATS_PER_CALL = 2_000;
/** Fans remembered per event; the least recently learned go first (their next poll asks Redis). */
const FANS_KEPT = 500_000;
/** Unknown fans looked up in one refresh, at most; a poll past that asks Redis at once. */
const LOOKUPS_PER_REFRESH = 2_000;

export interface LineViewOptions {
  refreshMs?: number;
  fansKept?: number;
}

/** The room's figures a view holds, as the event's slot answered them (and a copy carries them). */
interface RoomFigures {
  served: number;
  tail: number;
  preSize: number;
  /** The pre-queue's size frozen at the close (0 before it). */
  preCount: number;
  openedAt: number;
  drawn: boolean;
  /** When the draw ran (0: not drawn; -1: unknown, a copy an earlier version wrote). */
  drawnAt: number;
  onSaleAt: number;
  roomState: RoomState;
  rate: number;
  full: boolean;
  admitPerSecond: number;
  abandonSeconds: number;
  epoch: string;
  /** The room's version of its vacated places (line-view-8.lua): unchanged, the list is not sent again. */
  goneVersion: string;
  /** `gone` lists every vacated place ahead of the cursor (none past the GONE_LISTED cap). */
  goneComplete: boolean;
  /** The room's fan shards (0: none): its heartbeats may be held for BEATS_HELD_MS. */
  fanShards: number;
  /** The fans' records live on the fan shards (`claims` 2): the draw waits DRAW_GRACE_MS after the close. */
  recordsOnShards: boolean;
}

interface View extends RoomFigures {
  /** Local clock (Date.now) when the view was answered. */
  fetchedAt: number;
  /** Redis time minus local time at that moment. */
  clockOffset: number;
  /** Vacated places ahead of the cursor, ascending (at most GONE_LISTED). */
  gone: number[];
  /**
   * Which list of vacated places `gone` is (the version, the cursor and the length when it was
   * read from the event's slot): the view's copies on the shards send a list only to a reader that
   * holds another.
   */
  goneListId: string;
}

interface KnownFan {
  /** `redis`: Redis answers this fan's polls (admitted, ended, near, not found by a lookup). */
  status: "waiting" | "prequeue" | "redis";
  /** The place (waiting) or the arrival number (prequeue). */
  position: number;
  epoch: string;
  /** Local clock of the last poll of this fan this process answered (either way). */
  seenAt: number;
}

interface EventLine {
  view: View | null;
  fans: Map<string, KnownFan>;
  beats: Set<string>;
  /** Local clock when the oldest heartbeat still owed was owed (0: none owed). */
  beatsSince: number;
  /** Unknown fans whose polls wait for the next refresh to look them up. */
  lookups: Map<string, ((found: boolean) => void)[]>;
  askedAt: number;
  timer: NodeJS.Timeout | null;
  refreshing: boolean;
  /** Invalidated while a refresh was in flight: that refresh's view is not taken. */
  stale: boolean;
  /**
   * The last call on the event's slot made this process the room's admitter (a room with fan
   * shards): its refreshes call the event's slot and write the view's copies. Otherwise they read
   * a copy.
   */
  admitter: boolean;
}

export interface LineViews {
  /**
   * The fan's place from this process's view, or null when Redis must answer (see above).
   * `lookedUp`: the poll waited for a lookup that found the fan, and that lookup recorded the
   * fan's beat after the poll arrived, so the answer owes no heartbeat.
   */
  answer(eventId: string, fanId: string, limits?: StatusLimits, lookedUp?: boolean): FanPlace | RateLimited | null;
  /**
   * A fan `answer` declined because this process does not know it (or has not seen it lately):
   * looked up in the next refresh. True when the fan was found and learned (`answer` may now
   * answer it); false at once when there is nothing to look up with (no fresh view, a fan Redis
   * answers, too many lookups), or when the refresh did not find it: Redis answers then.
   */
  lookup(eventId: string, fanId: string): Promise<boolean>;
  /**
   * The room's abandon clock (fan-shards.ts AbandonClock) from this process's view, when the view
   * of the room `epoch` was read within CLOCK_MAX_AGE_MS; null otherwise (the caller reads the room).
   * A poll Redis answers in a room whose records live on the shards judges the fan's beat by it
   * (line.ts statusOnShards): one call fewer on the event's slot.
   */
  abandonClock(eventId: string, epoch: string): AbandonClock | null;
  /**
   * The place of a fan this process knows as waiting there, in the room `epoch`, and has seen
   * within the keep time (so the place cannot have lapsed); null otherwise. A poll Redis answers
   * in a room whose records live on the shards asks the event's slot about that place while it
   * reads the record (line.ts statusOnShards), and keeps the slot's answer only when the record
   * says the same place.
   */
  knownPlace(eventId: string, fanId: string, epoch: string): number | null;
  /**
   * True when this process's view can answer a place taken now at the back of the line (fresh,
   * the line open and drawn): its join batches ask Redis for no fan view (join-batch-n.lua).
   */
  answersNewPlaces(eventId: string): boolean;
  /**
   * A new waiting place (a join the batch placed without a view), from this process's view as a
   * poll of that fan would be answered, or null when the view cannot say (the caller asks Redis).
   * Owes no heartbeat: the join wrote the fan's.
   */
  placeOfNewFan(eventId: string, position: number, epoch: string): FanPlace | null;
  /** What Redis answered about a fan (join or poll), with the room's epoch. */
  learn(eventId: string, fanId: string, place: FanPlace, epoch: string): void;
  /**
   * This process changed the room (settings, open now, configure, remove): its view is dropped
   * and read again at once, so its own next poll answers see the change. Other processes see it
   * at their next refresh (VIEW_REFRESH_MS).
   */
  invalidate(eventId: string): void;
  /**
   * Figures for tests and the bench: polls answered here, refreshes, and new places (joins placed
   * without the fan view) answered here or declined (then Redis answers them, as polls).
   */
  counters(): LineCacheCounters;
  /** Stops every refresh (a gateway shutting down); the heartbeats owed are sent first. */
  close(): Promise<void>;
}

/** What LineViews.counters answers; all 0 for a process without the cache. */
export interface LineCacheCounters {
  answered: number;
  refreshes: number;
  beats: number;
  missing: number;
  lookups: number;
  found: number;
  newPlaces: number;
  newPlacesDeclined: number;
  /** Polls of a fan this process knew, sent to Redis because the view was missing or older than VIEW_STALE_MS. */
  staleAsked: number;
  /** Refreshes that failed (Redis away or failing on the event's slot): the view was dropped. */
  failedRefreshes: number;
  /** Refreshes whose vacated places were unchanged, so Redis did not send the list again. */
  goneKept: number;
  /** Refreshes of a room with fan shards that held the heartbeats owed for a later one (BEATS_HELD_MS). */
  beatsHeld: number;
  /** Refreshes answered by a copy of the view on a fan shard: no call on the event's slot. */
  fromCopy: number;
  /** Refreshes made as the room's admitter (they call the event's slot and write the copies). */
  asAdmitter: number;
}

export const noLineCacheCounters = (): LineCacheCounters => ({
  answered: 0,
  refreshes: 0,
  beats: 0,
  missing: 0,
  lookups: 0,
  found: 0,
  newPlaces: 0,
  newPlacesDeclined: 0,
  staleAsked: 0,
  failedRefreshes: 0,
  goneKept: 0,
  beatsHeld: 0,
  fromCopy: 0,
  asAdmitter: 0,
});

/**
 * A waiting fan's place from the view, or null when Redis must answer: the line not open or not
 * drawn, the place passed, or the fan's turn within NEAR_SECONDS of admissions (Redis admits it).
 */
function waitingPlace(view: View, position: number): FanPlace | null {
  if (view.openedAt === 0 || !view.drawn || position <= view.served) return null;
  const ahead = Math.max(0, position - view.served - 1 - goneBelow(view.gone, position));
  if (ahead < Math.max(2, Math.ceil(view.rate * NEAR_SECONDS))) return null;
  const advice = adviseFan({
    status: "waiting",
    ahead,
    effectiveRate: view.rate,
    roomFull: view.full,
    admitPerSecond: view.admitPerSecond,
    untilOnSaleSeconds: 0,
    abandonSeconds: view.abandonSeconds,
  });
  return { status: "waiting", provisional: false, position, ahead, ...advice };
}

/**
 * A pre-queued fan's place from the view, as status-10.lua and places.ts answer it: its arrival
 * number, everyone else in the pre-queue possibly ahead (its size while open, frozen at the close),
 * and the advice: come back at the on-sale, or, once closed and before the draw, the draw's
 * (advice.ts adviseDrawPending).
 */
function prequeuePlace(view: View, position: number, redisNow: number): FanPlace {
  const closed = view.openedAt > 0;
  const ahead = Math.max(0, (closed ? view.preCount : view.preSize) - 1);
  const advice = adviseFan({
    status: "prequeue",
    ahead,
    effectiveRate: view.rate,
    roomFull: view.full,
    admitPerSecond: view.admitPerSecond,
    untilOnSaleSeconds: Math.max(0, (view.onSaleAt - redisNow) / 1000),
    abandonSeconds: view.abandonSeconds,
    ...(closed ? { drawPendingMs: Math.max(0, redisNow - view.onSaleAt) } : {}),
    ...(view.recordsOnShards ? { drawGraceMs: DRAW_GRACE_MS } : {}),
  });
  return { status: "prequeue", provisional: true, onSaleAt: iso(view.onSaleAt), position, ahead, ...advice };
}

/** The pre-queue has closed and its draw is pending (the room not closed for good). */
const drawPending = (view: View) => view.openedAt > 0 && !view.drawn && view.roomState !== "closed";

/** The vacated places past `served` (the list is ascending: one binary search, one slice). */
function passedDropped(gone: readonly number[], served: number): number[] {
  const passed = goneBelow(gone, served + 1);
  return passed === 0 ? (gone as number[]) : gone.slice(passed);
}

/**
 * The vacated places' version to send with a refresh ('' asks for the list): the view's, while its
 * list is worth keeping. A list that held every vacated place ahead stays whole (the cursor only
 * drops places from its front); one cut at GONE_LISTED is read again once the cursor has passed
 * half of it, so the places past its end come into it (until then a fan behind its last place is
 * told an `ahead` that counts them, on the safe side, as before).
 */
function goneVersionToSend(view: View | null): string {
  if (!view) return "";
  return view.goneComplete || view.gone.length >= GONE_LISTED / 2 ? view.goneVersion : "";
}

/** How many listed vacated places are below `position` (binary search). */
function goneBelow(gone: readonly number[], position: number): number {
  let lo = 0;
  let hi = gone.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if ((gone[mid] as number) < position) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

function readView(
  reply: unknown,
  fetchedAt: number,
  previous: View | null,
): { view: View; missing: string[]; found: unknown[]; sweep: boolean; goneKept: boolean; lease: boolean } {
  if (!Array.isArray(reply) || reply.length < 6) throw new ReplyShapeError("line-view: expected a list");
  const tail = reply.slice(-6);
  if (
    tail[0] !== "gone" ||
    tail[2] !== "missing" ||
    tail[4] !== "found" ||
    !Array.isArray(tail[1]) ||
    !Array.isArray(tail[3]) ||
    !Array.isArray(tail[5])
  ) {
    throw new ReplyShapeError("line-view: no gone/missing/found lists");
  }
  const f = new Fields(reply.slice(0, -6));
  const now = f.num("now");
  const served = f.num("served");
  const goneAhead = f.num("goneAhead");
  // The list not sent again (the caller's version is the room's): the previous one, less the
  // places the cursor has passed since. Nothing was added to it meanwhile.
  const same = f.flag("goneSame") && previous !== null;
  const gone = same ? passedDropped(previous.gone, served) : (tail[1] as unknown[]).map(Number);
  const goneVersion = f.str("goneVersion");
  return {
    view: {
      fetchedAt,
      clockOffset: now - fetchedAt,
      served,
      tail: f.num("tail"),
      preSize: f.num("preSize"),
      preCount: f.num("preCount"),
      openedAt: f.num("openedAt"),
      drawn: f.flag("drawn"),
      drawnAt: f.num("drawnAt"),
      onSaleAt: f.num("onSaleAt"),
      roomState: f.oneOf("roomState", ROOM_STATES),
      rate: f.num("rate"),
      full: f.flag("full"),
      admitPerSecond: f.num("admitPerSecond"),
      abandonSeconds: f.num("abandonSeconds"),
      epoch: f.str("epoch"),
      gone,
      goneVersion,
      goneComplete: same ? previous.goneComplete : gone.length >= goneAhead,
      fanShards: f.num("fanShards"),
      recordsOnShards: f.has("recordsOnShards"),
      goneListId: same ? previous.goneListId : `${goneVersion}/${served}/${gone.length}`,
    },
    missing: (tail[3] as unknown[]).map(String),
    found: tail[5] as unknown[],
    sweep: f.flag("sweep"),
    goneKept: same,
    lease: f.flag("lease"),
  };
}

/** The fields of a view its copies carry (the rest is the list of vacated places, and the clock). */
interface CopyHead extends RoomFigures {
  /** Redis time on the event's slot when it answered the admitter. */
  now: number;
}

const COPY_NUMBERS = [
  "now",
  "served",
  "tail",
  "preSize",
  "preCount",
  "openedAt",
  "onSaleAt",
  "rate",
  "admitPerSecond",
  "abandonSeconds",
  "fanShards",
] as const;

/** The copy's head of a view the admitter holds (its Redis time: when the event's slot answered). */
function copyHeadOf(view: View): string {
  const head: CopyHead = {
    now: redisNow(view),
    served: view.served,
    tail: view.tail,
    preSize: view.preSize,
    preCount: view.preCount,
    openedAt: view.openedAt,
    drawn: view.drawn,
    drawnAt: view.drawnAt,
    onSaleAt: view.onSaleAt,
    roomState: view.roomState,
    rate: view.rate,
    full: view.full,
    admitPerSecond: view.admitPerSecond,
    abandonSeconds: view.abandonSeconds,
    epoch: view.epoch,
    goneVersion: view.goneVersion,
    goneComplete: view.goneComplete,
    fanShards: view.fanShards,
    recordsOnShards: view.recordsOnShards,
  };
  return JSON.stringify(head);
}

/**
 * A view from a copy on a shard: taken `copy.age` ms before it was received (the shard's clock,
 * both ends), so its age counts against VIEW_STALE_MS as a view read from the event's slot then
 * would. The list of vacated places is the copy's, or the reader's own when the copy holds that one.
 */
function viewFromCopy(copy: ViewCopy, receivedAt: number, previous: View | null): View {
  let head: Partial<Record<keyof CopyHead, unknown>>;
  try {
    head = JSON.parse(copy.head) as typeof head;
  } catch {
    throw new ReplyShapeError("view copy: not JSON");
  }
  for (const name of COPY_NUMBERS) {
    if (typeof head[name] !== "number" || !Number.isFinite(head[name])) {
      throw new ReplyShapeError(`view copy: no number ${name}`);
    }
  }
  const roomState = head.roomState as RoomState;
  if (
    typeof head.epoch !== "string" ||
    typeof head.goneVersion !== "string" ||
    typeof head.drawn !== "boolean" ||
    typeof head.full !== "boolean" ||
    typeof head.goneComplete !== "boolean" ||
    !(ROOM_STATES as readonly unknown[]).includes(roomState)
  ) {
    throw new ReplyShapeError("view copy: a field missing");
  }
  const h = head as CopyHead;
  const fetchedAt = receivedAt - copy.age;
  const same = copy.gone === null;
  if (same && previous?.goneListId !== copy.listId) throw new ReplyShapeError("view copy: no list");
  return {
    fetchedAt,
    clockOffset: h.now - fetchedAt,
    served: h.served,
    tail: h.tail,
    preSize: h.preSize,
    preCount: h.preCount,
    openedAt: h.openedAt,
    drawn: h.drawn,
    // (a copy an earlier version wrote has none: unknown, so no abandon clock is taken from it)
    drawnAt: typeof h.drawnAt === "number" && Number.isFinite(h.drawnAt) ? h.drawnAt : -1,
    onSaleAt: h.onSaleAt,
    roomState,
    rate: h.rate,
    full: h.full,
    admitPerSecond: h.admitPerSecond,
    abandonSeconds: h.abandonSeconds,
    epoch: h.epoch,
    gone: same && previous ? passedDropped(previous.gone, h.served) : (copy.gone ?? []),
    goneVersion: h.goneVersion,
    goneComplete: same && previous ? previous.goneComplete : h.goneComplete,
    fanShards: h.fanShards,
    // (a copy an earlier version wrote has none)
    recordsOnShards: h.recordsOnShards === true,
    goneListId: copy.listId,
  };
}

/** The event's slot's clock when the view was read there (a copy's: when the admitter read it). */
const redisNow = (view: View) => view.fetchedAt + view.clockOffset;

/** A call's answer, or null when it fails or takes longer than `ms` (it runs on regardless). */
function within<T>(call: Promise<T>, ms: number): Promise<T | null> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(null), ms);
    call.then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      () => {
        clearTimeout(timer);
        resolve(null);
      },
    );
  });
}

/**
 * The records of fans looked up in a room with fan shards, read on the event's slot by plain
 * commands in one MULTI (lookUpRecords): the room's epoch, each fan's record, and, once the line is
 * drawn, each one's drawn place in the pre-queue.
 */
interface LookedRecords {
  epoch: string;
  records: (string | null)[];
  /** ZMSCORE of the pre-queue, when the view the lookups went with was drawn; else null. */
  drawnPlaces: (string | null)[] | null;
}

/**
 * A looked-up fan's place from its record, against the view this process will answer it from (as
 * line-view-8.lua's lookups read it, and the same cases found): waiting behind the cursor; pre-queued
 * before the close (the arrival number), or after it with the draw pending; pre-queued with a drawn
 * place behind the cursor. Null for anything else (admitted, given up, ended, revoked, a drawn place
 * not read): Redis answers that fan.
 */
function lookedPlace(
  view: View,
  raw: string | null,
  drawnPlace: string | null | undefined,
): Pick<KnownFan, "status" | "position"> | null {
  if (!raw) return null;
  const [letter, pos, n] = raw.split("|", 3);
  if (view.openedAt === 0 || !view.drawn) {
    if (letter !== "p") return null;
    const arrival = Number(n);
    return arrival > 0 ? { status: "prequeue", position: arrival } : null;
  }
  const position = letter === "w" ? Number(pos) : letter === "p" ? Number(drawnPlace ?? 0) : 0;
  return position > view.served ? { status: "waiting", position } : null;
}

export function createLineViews(ctx: RoomContext, options: LineViewOptions = {}): LineViews {
  const refreshMs = options.refreshMs ?? VIEW_REFRESH_MS;
  const fansKept = options.fansKept ?? FANS_KEPT;
  const lines = new Map<string, EventLine>();
  const buckets = createLocalBuckets();
  const counts = noLineCacheCounters();
  /**
   * This process's name for the rooms' admitter leases (line-view-8.lua), and which copy of a
   * room's view it reads (so the reads of many gateways spread over the copies).
   */
  const admitterId = randomUUID();
  const copyIndex = Number.parseInt(admitterId.slice(0, 8), 16);
  /** The event's view when it is young enough to answer from (VIEW_STALE_MS), else null. */
  const freshView = (eventId: string): View | null => {
    const view = lines.get(eventId)?.view;
    return view && Date.now() - view.fetchedAt <= VIEW_STALE_MS ? view : null;
  };
  /**
   * How long after a poll answered here the fan's place is certainly kept (see `answer`): its beat
   * reaches Redis within two refreshes (and the hold, with fan shards), so no sweep can have taken
   * the place of a fan seen here within this time.
   */
  const keepMsOf = (view: View) =>
    view.abandonSeconds * 1000 - 2 * refreshMs - (view.fanShards > 0 ? BEATS_HELD_MS : 0) - 1_000;
  /** A fan of the view's room seen here within the keep time: its place cannot have been lost. */
  const keptHere = (fan: KnownFan, view: View, now: number) =>
    fan.epoch === view.epoch && now - fan.seenAt <= keepMsOf(view);

  /** A heartbeat owed for `fanId` since `at` (the oldest owed sets when they must go). */
  function owe(line: EventLine, fanId: string, at: number) {
    if (line.beats.size === 0) line.beatsSince = at;
    line.beats.add(fanId);
  }

  /** What this process knows of a fan, with the LRU bound. */
  function remember(line: EventLine, fanId: string, fan: KnownFan) {
    line.fans.delete(fanId);
    line.fans.set(fanId, fan);
    if (line.fans.size > fansKept) line.fans.delete(line.fans.keys().next().value as string);
  }

  /** Answers every lookup taken: found or not (Redis answers the poll then). */
  function settle(lookups: Map<string, ((found: boolean) => void)[]>, found: ReadonlySet<string>) {
    for (const [fanId, waiting] of lookups) for (const resolve of waiting) resolve(found.has(fanId));
    lookups.clear();
  }
  const unsentLogDue = onceEvery(10_000);

  /** The heartbeats owed wait for a later refresh (a room with fan shards, few owed, none old). */
  const beatsHeld = (line: EventLine, now: number) =>
    (line.view?.fanShards ?? 0) > 0 &&
    line.beats.size > 0 &&
    line.beats.size < BEATS_SENT_AT &&
    now - line.beatsSince < BEATS_HELD_MS;

  /**
   * A room with fan shards: the looked-up fans' records on the event's slot, read by plain commands
   * (HGET, HMGET, ZMSCORE in one MULTI: a few µs of Redis, not a line-view-8.lua call), so a
   * gateway that reads its view from a copy looks fans up without a script on the event's slot.
   * The beats are the shards' (beats-1.lua 'look', beside it). A room whose records live on the
   * fan shards looks its fans up on the shards alone (lookUpOnShards).
   */
  async function lookUpRecords(keys: Readonly<WaitingRoomKeys>, ids: string[], view: View): Promise<LookedRecords> {
    const drawn = view.openedAt > 0 && view.drawn && view.preCount > 0;
    const multi = ctx.redis
      .multi()
      .hget(keys.room, "epoch")
      .hmget(keys.fans, ...ids);
    if (drawn) multi.zmscore(keys.pre, ...ids);
    const replies = await multi.exec();
    if (!replies) throw new ReplyShapeError("lookups: the transaction was discarded");
    for (const [err] of replies) if (err) throw err;
    const [epoch, records, drawnPlaces] = replies.map(([, value]) => value);
    if (!Array.isArray(records) || records.length !== ids.length) throw new ReplyShapeError("lookups: no records");
    return {
      epoch: typeof epoch === "string" ? epoch : "",
      records: records as (string | null)[],
      drawnPlaces: drawn && Array.isArray(drawnPlaces) ? (drawnPlaces as (string | null)[]) : null,
    };
  }

  /**
   * A room whose records live on the fan shards: each shard touched checks its fans' beats and
   * reads their records (and drawn places) in one call (fan-records-5.lua 'look'), nothing on the
   * event's slot. The shards' keys carry the room's epoch (their tags), so the records read are of
   * the room `room` is: its epoch is theirs.
   */
  async function lookUpOnShards(
    eventId: string,
    ids: string[],
    view: View,
    room: ShardedRoom,
    beats: FanBeats,
    recentMs: number,
  ): Promise<[LookedRecords, Set<string>]> {
    const drawn = view.openedAt > 0 && view.drawn && view.preCount > 0;
    const { found, ...looked } = await beats.records.look(eventId, ids, recentMs, drawn, KEEP_WAIT_MS);
    return [{ epoch: room.epoch, ...looked }, found];
  }

  async function refresh(eventId: string, line: EventLine, sendBeats = false): Promise<void> {
    if (line.refreshing) return;
    const started = Date.now();
    if (started - line.askedAt > VIEW_IDLE_MS && line.beats.size === 0) {
      stopLine(eventId, line);
      return;
    }
    const k = keysFor(eventId);
    if (!k) return;
    line.refreshing = true;
    line.stale = false;
    const held = !sendBeats && beatsHeld(line, started);
    const beats = held ? [] : [...line.beats];
    if (held) counts.beatsHeld += 1;
    else {
      line.beats.clear();
      line.beatsSince = 0;
    }
    // The lookups go with the first call, when there is a view to say how recent a beat must be.
    const lookups = new Map(line.lookups);
    line.lookups.clear();
    const lookupIds = line.view ? [...lookups.keys()] : [];
    const recentMs = line.view ? keepMsOf(line.view) : 0;
    // The view this refresh starts from: its vacated places stand unless the room says they changed.
    const previous = line.view;
    const goneVersion = goneVersionToSend(previous);
    const foundHere = new Set<string>();
    try {
      const keys = lineKeys(k);
      // A room with fan shards takes the heartbeats on the shards (beats-1.lua 'keep', one call per
      // shard touched), beside one line-view call; a room without takes them in line-view itself.
      const sent = await ctx.guarded("lineView", eventId, async () => {
        const room = await ctx.fanLine.roomOf(eventId);
        if (room.beats) {
          const keeping =
            beats.length > 0 ? room.beats.kept(eventId, beats, KEEP_WAIT_MS) : Promise.resolve(NOTHING_KEPT);
          // Lookups: the records from the event's slot (plain commands, no script), the beats from
          // the shards ('look'): a fan is found when both find it. Neither needs the line-view
          // call, so a gateway that reads copies looks fans up without one (polls spread over many
          // gateways are lookups on most of them). Lookups that fail or take longer than a view
          // may be old find nobody (Redis answers those polls); the refresh stands.
          const looking =
            lookupIds.length > 0 && previous
              ? within(
                  room.recordsOnShards
                    ? lookUpOnShards(eventId, lookupIds, previous, room, room.beats, recentMs)
                    : Promise.all([
                        lookUpRecords(k, lookupIds, previous),
                        room.beats.looked(eventId, lookupIds, recentMs, KEEP_WAIT_MS),
                      ]),
                  VIEW_STALE_MS,
                )
              : Promise.resolve(null);
          // Not the admitter, a view to start from: the view from a copy on a shard, beside the
          // heartbeats; the event's slot only when the copy is missing or old.
          if (previous && previous.fanShards > 0 && !line.admitter) {
            const [copy, kept, looked] = await Promise.all([
              within(room.beats.readCopy(eventId, copyIndex, previous.goneListId), KEEP_WAIT_MS),
              keeping,
              looking,
            ]);
            if (copy && copy.age <= COPY_MAX_AGE_MS) {
              return { room, replies: [], copy, receivedAt: Date.now(), ...kept, looked };
            }
            const view = await ctx.script("lineView", keys, [GONE_LISTED, 0, recentMs, goneVersion, admitterId]);
            return { room, replies: [view], copy: null, receivedAt: 0, ...kept, looked };
          }
          const [view, kept, looked] = await Promise.all([
            ctx.script("lineView", keys, [GONE_LISTED, 0, recentMs, goneVersion, admitterId]),
            keeping,
            looking,
          ]);
          return { room, replies: [view], copy: null, receivedAt: 0, ...kept, looked };
        }
        const chunks: string[][] = [];
        for (let i = 0; i < beats.length; i += BEATS_PER_CALL) chunks.push(beats.slice(i, i + BEATS_PER_CALL));
        if (chunks.length === 0) chunks.push([]);
        const replies = await Promise.all(
          chunks.map((ids, i) =>
            ctx.script(
              "lineView",
              keys,
              i === 0
                ? [GONE_LISTED, lookupIds.length, recentMs, goneVersion, "", ...lookupIds, ...ids]
                : [GONE_LISTED, 0, 0, goneVersion, "", ...ids],
            ),
          ),
        );
        const none: string[] = [];
        return { room, replies, copy: null, receivedAt: 0, missing: none, unsent: none, looked: null };
      });
      if ("ok" in sent) throw new Error(sent.message);
      const fetchedAt = Date.now();
      let latest: View | null = null;
      let missingAll = sent.missing;
      let lease = false;
      if (sent.copy) {
        latest = viewFromCopy(sent.copy, sent.receivedAt, previous);
        counts.fromCopy += 1;
        if (latest.fanShards !== sent.room.shards || latest.epoch !== sent.room.epoch) {
          // not the room this process knows (created again): read it again, and the event's slot next
          ctx.fanLine.forget(eventId);
          latest = null;
        } else if (previous && previous.epoch === latest.epoch && redisNow(latest) < redisNow(previous)) {
          // The copy was read from the event's slot before the view this process holds (it read the
          // slot itself since: its first view, or after changing the room): the view stands, so a
          // change made through this process is never answered as it was before. The next copies
          // are newer.
          latest = previous;
        }
      }
      for (const { reply, outcome } of sent.replies) {
        if (outcome === "not_found") {
          // No room (removed, or Redis lost it): nothing is answered here until Redis says more.
          line.view = null;
          line.fans.clear();
          return;
        }
        if (outcome) throw new ReplyShapeError(`line-view: unexpected ${outcome}`);
        const { view, missing, found, sweep, goneKept, lease: held } = readView(reply, fetchedAt, previous);
        if (goneKept) counts.goneKept += 1;
        lease = held;
        latest = view;
        missingAll = missingAll.concat(missing);
        const resharded = view.fanShards !== sent.room.shards || (view.fanShards > 0 && view.epoch !== sent.room.epoch);
        // Fans found by a lookup (a room without fan shards): their beat was recorded in this call,
        // no earlier than `started`. `found` is one number a lookup, in order (0: not found); the
        // status follows from the room.
        const status = view.openedAt > 0 ? "waiting" : "prequeue";
        for (let i = 0; i < found.length && !resharded; i++) {
          const position = Number(found[i]);
          const fanId = lookupIds[i];
          if (!(position > 0) || fanId === undefined) continue;
          remember(line, fanId, { status, position, epoch: view.epoch, seenAt: started });
          foundHere.add(fanId);
        }
        if (resharded) {
          // The room was created again, perhaps with other shards: these beats may have gone where
          // it does not look. Read again for the next refresh; these fans' next polls go to Redis,
          // which records them.
          ctx.fanLine.forget(eventId);
          for (const fanId of beats) {
            const known = line.fans.get(fanId);
            if (known) known.seenAt = 0;
          }
        } else if (sweep) {
          ctx.fanLine.sweep(eventId, sent.room);
        }
      }
      // Fans found by a lookup in a room with fan shards: a record the view can answer (of the
      // room the view is of: not one created again meanwhile) and a beat their shard found recent and
      // recorded in this refresh, no earlier than `started`.
      if (sent.looked && latest && latest.fanShards === sent.room.shards && latest.epoch === sent.room.epoch) {
        const [records, beatsFound] = sent.looked;
        if (records.epoch === latest.epoch) {
          for (const [i, fanId] of lookupIds.entries()) {
            if (!beatsFound.has(fanId)) continue;
            const place = lookedPlace(latest, records.records[i] ?? null, records.drawnPlaces?.[i]);
            if (!place) continue;
            remember(line, fanId, { ...place, epoch: latest.epoch, seenAt: started });
            foundHere.add(fanId);
          }
        }
      }
      counts.missing += missingAll.length;
      for (const fanId of missingAll) line.fans.delete(fanId);
      // Heartbeats a shard did not take: still owed, with the next refresh. Those fans' places
      // cannot be lost meanwhile (no sweep completes without every shard, and the line admits
      // nobody once the last completed one is 3 s old); they keep being answered here.
      for (const fanId of sent.unsent) if (line.fans.has(fanId)) owe(line, fanId, started);
      if (sent.unsent.length > 0 && unsentLogDue(eventId)) {
        ctx.log?.warn({ eventId, unsent: sent.unsent.length }, "a fan shard did not take its heartbeats: sent again");
      }
      counts.refreshes += 1;
      counts.beats += beats.length - sent.unsent.length;
      if (latest && line.view && latest.epoch !== line.view.epoch) {
        line.fans.clear();
        foundHere.clear();
      }
      line.view = line.stale ? null : latest;
      // The admitter writes its view into the copies the other gateways read (each waits at most
      // KEEP_WAIT_MS: a copy not written is only older, and its readers call the event's slot).
      line.admitter = lease;
      if (lease && line.view && sent.room.beats) {
        counts.asAdmitter += 1;
        const { goneListId, gone } = line.view;
        await sent.room.beats.writeCopies(
          eventId,
          { head: copyHeadOf(line.view), listId: goneListId, gone },
          KEEP_WAIT_MS,
        );
      }
      counts.lookups += lookups.size;
      counts.found += foundHere.size;
      // Not found: Redis answers these fans' polls (and the next ones, within the keep time).
      if (latest) {
        for (const fanId of lookups.keys()) {
          if (!foundHere.has(fanId)) {
            remember(line, fanId, { status: "redis", position: 0, epoch: latest.epoch, seenAt: started });
          }
        }
      }
    } catch (err) {
      // The heartbeats may not have been recorded: those fans' next polls go to Redis, which
      // records them (or answers 503); the view answers nothing until a read succeeds.
      line.view = null;
      line.admitter = false;
      counts.failedRefreshes += 1;
      for (const fanId of beats) {
        const known = line.fans.get(fanId);
        if (known) known.seenAt = 0;
      }
      ctx.log?.debug({ eventId, err: (err as Error).message }, "line view not refreshed");
    } finally {
      settle(lookups, foundHere);
      line.refreshing = false;
      if (line.stale) {
        line.stale = false;
        void refresh(eventId, line);
      }
    }
  }

  function stopLine(eventId: string, line: EventLine) {
    settle(line.lookups, new Set());
    if (line.timer) clearInterval(line.timer);
    line.timer = null;
    if (lines.get(eventId) === line) lines.delete(eventId);
  }

  function lineOf(eventId: string): EventLine {
    let line = lines.get(eventId);
    if (!line) {
      line = {
        view: null,
        fans: new Map(),
        beats: new Set(),
        beatsSince: 0,
        lookups: new Map(),
        askedAt: Date.now(),
        timer: null,
        refreshing: false,
        stale: false,
        admitter: false,
      };
      lines.set(eventId, line);
    }
    if (!line.timer) {
      const started = line;
      line.timer = setInterval(() => void refresh(eventId, started), refreshMs);
      line.timer.unref();
      void refresh(eventId, line);
    }
    return line;
  }

  /** The limits of a poll answered here, taken in this process's buckets (ip first, as the script). */
  function takeLimits(eventId: string, fanId: string, limits: StatusLimits | undefined): RateLimited | null {
    // Two plain calls, not a loop over a list built per poll: this runs on every cached poll.
    return takeLimit(eventId, "ip", limits?.ip, limits?.ip?.subject) ?? takeLimit(eventId, "fan", limits?.fan, fanId);
  }

  function takeLimit(
    eventId: string,
    name: "ip" | "fan",
    limit: StatusLimits["ip"],
    subject: string | undefined,
  ): RateLimited | null {
    if (!limit || limit.perSecond <= 0) return null;
    const [allowed, retryAfterMs] = buckets.take(`${eventId}\n${name}\n${subject}`, limit.perSecond, limit.burst);
    if (allowed !== 1) return { ok: false, reason: "rate_limited", limit: name, retryAfterMs };
    return null;
  }

  return {
    answer(eventId, fanId, limits, lookedUp = false) {
      const line = lines.get(eventId);
      if (!line) return null;
      // Redis away: the poll is asked of Redis, and answered 503 as every poll was before the cache
      // (the heartbeat could not be recorded; the view is frozen at the outage).
      if (!redisReady(ctx.redis)) return null;
      const now = Date.now();
      line.askedAt = now;
      const view = line.view;
      const fan = line.fans.get(fanId);
      if (!fan) return null;
      if (!view || now - view.fetchedAt > VIEW_STALE_MS) {
        counts.staleAsked += 1;
        return null;
      }
      // Seen here recently enough that the place cannot have been lost (every poll answered here
      // reaches Redis within a refresh); otherwise Redis tells (and records this poll).
      if (fan.status === "redis" || !keptHere(fan, view, now)) return null;
      const redisNow = now + view.clockOffset;
      let place: FanPlace;
      if (fan.status === "prequeue") {
        // Before the close: unless the on-sale is within NEAR_ON_SALE_MS (the close and the draw
        // are Redis's). After it, while the draw is pending (the whole pre-queue polls at the
        // on-sale): the view holds the frozen pre-queue's size and the draw's advice.
        const open = view.roomState === "prequeue" && redisNow < view.onSaleAt - NEAR_ON_SALE_MS;
        if (!open && !drawPending(view)) return null;
        place = prequeuePlace(view, fan.position, redisNow);
      } else {
        const waiting = waitingPlace(view, fan.position);
        if (!waiting) return null;
        place = waiting;
      }
      const limited = takeLimits(eventId, fanId, limits);
      if (limited) return limited;
      // The beat this answer owes goes with the next refresh; a lookup's own is recorded already
      // (its seenAt is the refresh's start, before Redis recorded it).
      if (!lookedUp) {
        fan.seenAt = now;
        owe(line, fanId, now);
      }
      counts.answered += 1;
      return place;
    },

    abandonClock(eventId, epoch) {
      const view = lines.get(eventId)?.view;
      if (!view || view.epoch !== epoch || view.drawnAt < 0) return null;
      if (Date.now() - view.fetchedAt > CLOCK_MAX_AGE_MS) return null;
      return abandonClockFrom(view);
    },

    knownPlace(eventId, fanId, epoch) {
      const line = lines.get(eventId);
      const view = line?.view;
      const fan = line?.fans.get(fanId);
      if (!view || !fan || fan.status !== "waiting" || view.epoch !== epoch) return null;
      return keptHere(fan, view, Date.now()) ? fan.position : null;
    },

    answersNewPlaces(eventId) {
      const view = freshView(eventId);
      return view !== null && view.openedAt > 0 && view.drawn && redisReady(ctx.redis);
    },

    placeOfNewFan(eventId, position, epoch) {
      const view = freshView(eventId);
      const place = view && view.epoch === epoch ? waitingPlace(view, position) : null;
      if (place) counts.newPlaces += 1;
      else counts.newPlacesDeclined += 1;
      return place;
    },

    learn(eventId, fanId, place, epoch) {
      const line = lineOf(eventId);
      line.askedAt = Date.now();
      if (place.status === "waiting" || (place.status === "prequeue" && place.provisional)) {
        remember(line, fanId, { status: place.status, position: place.position, epoch, seenAt: Date.now() });
      } else {
        // admitted, ended, a drawn place: Redis answers it (a lookup would not find it)
        remember(line, fanId, { status: "redis", position: 0, epoch, seenAt: Date.now() });
      }
    },

    lookup(eventId, fanId) {
      const line = lines.get(eventId);
      const view = line?.view;
      if (!line || !view || !redisReady(ctx.redis)) return Promise.resolve(false);
      const now = Date.now();
      if (now - view.fetchedAt > VIEW_STALE_MS) return Promise.resolve(false);
      // Only a fan this process does not know, or has not seen lately: one it knows and declined
      // (near its turn, Redis's to answer) asks Redis at once. Except a pre-queued fan once the
      // line is drawn: its drawn place is looked up (a lookup a fan, batched in a refresh, where a
      // status-10.lua call each was the whole pre-queue's herd at the on-sale).
      const known = line.fans.get(fanId);
      const drawnPlace = known?.status === "prequeue" && view.openedAt > 0 && view.drawn;
      if (known && !drawnPlace && keptHere(known, view, now)) {
        return Promise.resolve(false);
      }
      // Only where the view could answer: a drawn line, or a pre-queue before the on-sale; in a room
      // with fan shards also a closed pre-queue whose draw is pending (its lookups read the records
      // directly: lookedPlace).
      const drawing = view.fanShards > 0 && drawPending(view);
      if (!(view.roomState === "prequeue" || (view.openedAt > 0 && view.drawn) || drawing)) {
        return Promise.resolve(false);
      }
      const waiting = line.lookups.get(fanId);
      if (waiting) return new Promise((resolve) => waiting.push(resolve));
      if (line.lookups.size >= LOOKUPS_PER_REFRESH) return Promise.resolve(false);
      return new Promise((resolve) => line.lookups.set(fanId, [resolve]));
    },

    invalidate(eventId) {
      const line = lines.get(eventId);
      if (!line) return;
      line.view = null;
      // A refresh in flight may answer the state from before the change: read again after it.
      if (line.refreshing) line.stale = true;
      else void refresh(eventId, line);
    },

    counters: () => ({ ...counts }),

    async close() {
      const pending: Promise<void>[] = [];
      for (const [eventId, line] of lines) {
        if (line.timer) clearInterval(line.timer);
        line.timer = null;
        settle(line.lookups, new Set());
        if (line.beats.size > 0) {
          line.askedAt = Date.now();
          pending.push(refresh(eventId, line, true));
        }
      }
      await Promise.all(pending);
      lines.clear();
    },
  };
}
