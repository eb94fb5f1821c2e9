/**
 * Joins, batched per event in each gateway process (issue 28, goal 2), by event-batches.ts: while
 * one batch of an event's joins is in Redis, the joins that arrive wait in a queue; when it
 * returns, the whole queue goes as the next batch (at most MAX_JOIN_BATCH fans), in one
 * join-batch-n.lua call. A lone join waits one turn of the event loop (setImmediate, so the joins
 * parsed in the same turn go together) and no more; under a crowd each batch carries what arrived
 * during the last round trip, and one that finds no batch in flight lingers up to JOIN_LINGER_MS for
 * others, until JOIN_LINGER_FULL have come. So the rush pays the script's fixed cost once per batch,
 * not once per fan, and the line's order is the order the process received the joins (the queue is
 * first in, first out, and one batch per event is in flight at a time: Redis runs them in that
 * order).
 *
 * The batch answers each fan what join-9.lua would for a new place, or for a repeat join of a
 * place that stands; the fans it cannot answer without the line's tick (a known fan to settle, a
 * line due to close or empty) come back as ['join'] for line.ts to hand to join-9.lua one by one.
 */
import type { RunScript } from "../redis/scripts.js";
import { type BatchCounters, createEventBatches, type Waiting } from "./event-batches.js";
import type { FanBeats, JoinBucketTake } from "./fan-shards.js";
import { Fields, ReplyShapeError } from "./replies.js";
import type { ScriptName } from "./scripts.js";

/** Fans in one call at most: a bound on the script's time in Redis (~a few ms) and its reply. */
export const MAX_JOIN_BATCH = 256;

/**
 * While an event's joins keep coming (a batch sent within the last 50 ms), a join that finds no
 * batch in flight waits this long for others before it is sent: a gateway answering thousands of
 * joins a second collects a dozen or more per call this way, where the round trip alone gathered
 * two or three. A lone join (nothing sent lately) does not wait.
 */
export const JOIN_LINGER_MS = 2;
/**
 * A lingering batch goes as soon as it carries this many (JOIN_LINGER_FULL): past it, waiting
 * saves little of the script's fixed cost (~50 µs of Redis a call: 3 µs a join at 16, 1.5 at 32)
 * and costs every fan in it the rest of the linger. A load generator that keeps N joins in flight
 * (k6's VUs, wrk) sends its next joins only once answered, so a linger bounded by time alone held
 * each round of them the whole 2 ms: 8,467 joins/s at 32 connections, against 15,838 without it.
 */
export const JOIN_LINGER_FULL = 16;

/** One fan's join, as join-batch-n.lua takes it. */
export interface BatchedJoin {
  fanId: string;
  /** The client IP's join bucket (limitKey), and its [rate, burst]: [0, 0] when there is no limit. */
  bucket: string;
  limit: readonly number[];
  /** Bits of the proof of work the gateway checked (0: none). */
  proofBits: number;
  /** The gateway checked an operator's invite. */
  invite: boolean;
}

export type JoinBatchCounters = BatchCounters;

export interface JoinBatcher {
  /** The fan's own reply from join-batch-n.lua: rejects when the batch's call failed. */
  join(eventId: string, lineKeys: readonly string[], request: BatchedJoin): Promise<unknown>;
  /** Batches sent, joins in them and the largest batch, since the process started (for the bench). */
  counters(): JoinBatchCounters;
}

type Pending = Waiting<BatchedJoin, unknown>;

/** What `prepare` answers for a batch. */
export interface PreparedBatch {
  /** The room these shards are of ('' none known): join-batch-n.lua answers `reshard` for another. */
  epoch: string;
  shards: number;
  /** fanId -> ms since its previous heartbeat (fans that had one). */
  ages: ReadonlyMap<string, number>;
  /**
   * Takes back the beats written for these fans, whom the line did not take because the room is
   * gone (-1) or is another one (`reshard`): awaited before their replies, so a fan sent again
   * writes its new beat after this one went.
   */
  untake?: (fanIds: readonly string[]) => Promise<unknown>;
  /**
   * Fans whose heartbeat could not be written (their fan shard failing): each is answered with
   * this error (a 503 to the fan) and left out of the call, so the rest of the batch goes on.
   */
  failed?: { fanIds: ReadonlySet<string>; error: unknown };
  /**
   * The per-IP join buckets were taken already (a room with fan shards takes them on the shards:
   * FanBeats.joinBuckets): the call takes none. `limited` holds the replies of the joins they
   * refused, by index in the batch given to `prepare` (join-batch-n.lua's own refusal), and those
   * joins are left out of the call.
   */
  bucketsTaken?: { limited: ReadonlyMap<number, unknown> };
}

export interface JoinBatcherOptions {
  /** Fans in one call at most (MAX_JOIN_BATCH). */
  maxBatch?: number;
  /** How long a join waits for others while the event's joins are busy (JOIN_LINGER_MS). */
  lingerMs?: number;
  /** A lingering batch goes at once when it has this many joins (JOIN_LINGER_FULL). */
  lingerFull?: number;
  /** Told every batch's size as it is sent (the gateway's metric). */
  onBatch?: (size: number) => void;
  /**
   * Runs before each batch's call and answers the room's fan shards as this process knows them
   * (sent with the batch: join-batch-n.lua answers `reshard` when the room has another count), and
   * how long ago each fan's previous beat was: the context's writes the batch's heartbeats to the
   * shards here. Absent: 0, no ages.
   */
  prepare?: (eventId: string, joins: readonly BatchedJoin[]) => Promise<PreparedBatch>;
  /**
   * Asked for each batch: false when this process answers a new waiting place from its own cached
   * view of the line (line-view.ts placeOfNewFan), so join-batch-n.lua may leave the fan view out
   * of its reply. Absent: always true.
   */
  viewWanted?: (eventId: string) => boolean;
}

export function createJoinBatcher(run: RunScript<ScriptName>, options: JoinBatcherOptions = {}): JoinBatcher {
  const {
    maxBatch = MAX_JOIN_BATCH,
    lingerMs = JOIN_LINGER_MS,
    lingerFull = JOIN_LINGER_FULL,
    onBatch,
    prepare,
    viewWanted,
  } = options;

  const send = async (eventId: string, lineKeys: readonly string[], batch: Pending[]): Promise<void> => {
    // The batch's call: each client IP's bucket once in KEYS, numbered from 1 after the line's keys;
    // each distinct limit once (as a rule one: the gateway's setting), and each bucket's limit only
    // when there are several; then one, two or four arguments a fan, the fewest that carry the
    // batch: the fan id; its bucket when any fan has one; its proof's bits and invite when any fan
    // brings either (an argument costs the script ~650 instructions, a '0' nearly as much as an id).
    const call = (fans: Pending[], tail: (string | number)[], bucketsTaken = false) => {
      const buckets = new Map<string, number>();
      const limits = limitTable();
      const bucketOf: number[] = [];
      let width = 1;
      for (const { request: j } of fans) {
        let bucket = 0;
        const rate = bucketsTaken ? 0 : (j.limit[0] ?? 0);
        if (rate > 0) {
          bucket = buckets.get(j.bucket) ?? 0;
          if (bucket === 0) {
            bucket = buckets.size + 1;
            buckets.set(j.bucket, bucket);
            // a bucket's limit is its first fan's
            limits.add(rate, j.limit[1] ?? 0);
          }
          width = Math.max(width, 2);
        }
        if (j.proofBits > 0 || j.invite) width = 4;
        bucketOf.push(bucket);
      }
      const perFan: (string | number)[] = [];
      for (const [i, { request: j }] of fans.entries()) {
        if (width === 1) perFan.push(j.fanId);
        else if (width === 2) perFan.push(j.fanId, bucketOf[i] as number);
        else perFan.push(j.fanId, bucketOf[i] as number, j.proofBits, j.invite ? "1" : "0");
      }
      return run(
        "joinBatch",
        [...lineKeys, ...buckets.keys()],
        [fans.length, buckets.size, width, ...limits.args(), ...perFan, ...tail],
      );
    };
    const wanted = () => (viewWanted && !viewWanted(eventId) ? "0" : "1");
    if (!prepare) {
      const replies = fanReplies(await call(batch, ["", 0, wanted()]), batch.length);
      for (const [i, p] of batch.entries()) p.resolve(replies[i]);
      return;
    }
    const prepared = await prepare(
      eventId,
      batch.map((p) => p.request),
    );
    // Who goes in the call: the batch, less the joins a bucket taken by `prepare` refused (answered
    // now) and the fans `prepare` could not write a beat for (or take a bucket of: a 503 each).
    const { epoch, shards, ages, failed, bucketsTaken } = prepared;
    const limited = bucketsTaken?.limited;
    let going = batch;
    if ((failed && failed.fanIds.size > 0) || (limited && limited.size > 0)) {
      going = [];
      for (const [i, p] of batch.entries()) {
        if (limited?.has(i)) p.resolve(limited.get(i));
        else if (failed?.fanIds.has(p.request.fanId)) p.reject(failed.error);
        else going.push(p);
      }
      if (going.length === 0) return;
    }
    // The ages only of the fans that had a beat, each after its index in the call (from 1): a
    // crowd of new fans has none, and an argument costs the script as much as a fan id.
    const aged: (string | number)[] = [];
    for (const [i, p] of going.entries()) {
      const age = ages.get(p.request.fanId);
      if (age !== undefined) aged.push(i + 1, age);
    }
    const reply = await call(going, [epoch, shards, wanted(), ...aged], bucketsTaken !== undefined);
    const replies = fanReplies(reply, going.length);
    if (prepared.untake) {
      const untaken = going.filter((_, i) => notTaken(replies[i])).map((p) => p.request.fanId);
      // Best effort: a beat left behind costs a few bytes, never a place.
      if (untaken.length > 0) await prepared.untake(untaken).catch(() => undefined);
    }
    for (const [i, p] of going.entries()) p.resolve(replies[i]);
  };

  const batches = createEventBatches<readonly string[], BatchedJoin, unknown>({
    send,
    maxBatch,
    lingerMs,
    lingerFull,
    ...(onBatch ? { onBatch } : {}),
  });
  return {
    join: (eventId, lineKeys, request) => batches.push(eventId, lineKeys, request),
    counters: batches.counters,
  };
}

/**
 * The limits of a script call's buckets as join-batch-n.lua and join-buckets-n.lua take them: each
 * distinct limit once (as a rule one: the gateway's setting), then each bucket's limit (1..s) only
 * when there are several. `add` is called once a bucket, in KEYS order; `args` gives
 * s, rate 1, burst 1, ..., rate s, burst s, then the buckets' limits when s > 1.
 */
export function limitTable(): { add(rate: number, burst: number): void; args(): number[] } {
  const limits = new Map<string, number>();
  const limitArgs: number[] = [];
  const limitOf: number[] = [];
  return {
    add(rate, burst) {
      const name = `${rate} ${burst}`;
      let k = limits.get(name);
      if (k === undefined) {
        k = limits.size + 1;
        limits.set(name, k);
        limitArgs.push(rate, burst);
      }
      limitOf.push(k);
    },
    args: () => [limits.size, ...limitArgs, ...(limits.size > 1 ? limitOf : [])],
  };
}

/**
 * A batch's per-IP join buckets taken on a room's fan shards (join-buckets-n.lua), as
 * join-batch-n.lua takes them on the event's slot: each bucket once, its limit its first join's,
 * the first `allowed` of its joins (in arrival order) let through. Returns the refusals by index in
 * `joins` (join-batch-n.lua's reply for them), and the buckets whose shard failed.
 */
export async function takeJoinBuckets(
  beats: Pick<FanBeats, "joinBuckets">,
  eventId: string,
  joins: readonly BatchedJoin[],
): Promise<{ limited: Map<number, unknown>; failedBuckets: ReadonlySet<string>; bucketError?: unknown }> {
  const wanted = new Map<string, JoinBucketTake>();
  for (const j of joins) {
    const rate = j.limit[0] ?? 0;
    if (!(rate > 0)) continue;
    const b = wanted.get(j.bucket);
    if (b) b.count += 1;
    else wanted.set(j.bucket, { key: j.bucket, rate, burst: j.limit[1] ?? 0, count: 1 });
  }
  const limited = new Map<number, unknown>();
  if (wanted.size === 0) return { limited, failedBuckets: new Set() };
  const { taken, failed, error } = await beats.joinBuckets(eventId, [...wanted.values()]);
  const used = new Map<string, number>();
  for (const [i, j] of joins.entries()) {
    const t = (j.limit[0] ?? 0) > 0 ? taken.get(j.bucket) : undefined;
    if (!t) continue;
    const n = used.get(j.bucket) ?? 0;
    used.set(j.bucket, n + 1);
    if (n >= t.allowed) limited.set(i, ["limited", "ip", "retryAfterMs", t.retryAfterMs]);
  }
  return { limited, failedBuckets: failed, ...(failed.size > 0 ? { bucketError: error } : {}) };
}

/** A fan's batch reply that says the line did not take the fan: no room (-1), or another room. */
function notTaken(reply: unknown): boolean {
  return reply === -1 || (Array.isArray(reply) && reply[0] === "reshard");
}

/**
 * Each fan's reply, as join-9.lua would give it: join-batch-n.lua sends the view of the room once
 * ({ view, reply 1, ..., reply n }) and, for each fan placed, only its position and `ahead`. A
 * placed fan's reply is a Fields of those over the batch's one read of the view (no copy of the
 * view per fan); any other reply is passed on as the script gave it.
 */
export function fanReplies(reply: unknown, fans: number): unknown[] {
  if (!Array.isArray(reply) || reply.length !== fans + 1 || !Array.isArray(reply[0])) {
    throw new ReplyShapeError(`joinBatch: ${fans} fans, reply ${JSON.stringify(reply)?.slice(0, 80)}`);
  }
  let view: Fields | undefined;
  let aheadOf: ((position: number) => number) | null = null;
  const out: unknown[] = new Array(fans);
  for (let i = 0; i < fans; i++) {
    const own: unknown = reply[i + 1];
    const placed = typeof own === "number" && own > 0;
    if (!placed && !(Array.isArray(own) && typeof own[0] === "number")) {
      out[i] = own;
      continue;
    }
    if (view === undefined) {
      if ((reply[0] as unknown[]).length === 0) throw new ReplyShapeError("joinBatch: a fan placed, no view");
      view = new Fields(reply[0]);
      // A viewless reply has no `ahead` to count from: the caller's cached view answers (line.ts).
      aheadOf = view.has("viewless") ? null : newPlaceAhead(view);
    }
    if (placed) {
      out[i] = new Fields(
        aheadOf ? ["position", own, "ahead", aheadOf(own), "created", 1] : ["position", own, "created", 1],
        view,
      );
    } else out[i] = new Fields(["position", (own as number[])[0], "ahead", (own as number[])[1], "created", 0], view);
  }
  return out;
}

/**
 * `ahead` of a new place at a position, from the batch's view (which is of its first new place, as
 * fan_view computes it): before the close every new fan has the pre-queue less itself ahead (the
 * view's `ahead`, its position `provisional`); after it a new place is at the back, past every
 * vacated place, so the places between it and the view's are all ahead of it too.
 */
function newPlaceAhead(view: Fields): (position: number) => number {
  const ahead = view.num("ahead");
  if (view.flag("provisional")) return () => ahead;
  const from = view.num("position");
  return (position) => Math.max(0, ahead + position - from);
}
