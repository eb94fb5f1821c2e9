/**
 * Joins in a room whose records live on the fan shards (`claims` 2, WAITING_ROOM_CLAIMS=shards;
 * docs/redis-cluster.md "Steps 2 and 3, call by call", step 1), batched per event by
 * event-batches.ts as join-batch.ts's are: the joins that arrive while an event's batch is in Redis
 * go as its next batch, so the process's order is the line's (no linger: a batch goes the turn
 * after its first join; under wrk's 64 connections a batch carried 32 joins with or without a
 * linger of 2 ms, bench:gateway with WAITING_ROOM_CLAIMS=shards). A batch is the per-IP buckets on
 * the shards (takeJoinBuckets, as a sharded room's), one range of places on the event's slot for
 * the fans they let through (line-range-8.lua: no fan id), then each shard touched writes its fans'
 * records and beats (fan-records-5.lua 'join'), all at once. The event's slot sees one small call a
 * batch whatever its fans: the records' work is spread over the shards' masters.
 *
 * A gateway dying between the range and the shards leaves places reserved and never written: the
 * cursor offers them, nobody claims them, and they are given back after the abandon time and its
 * grace, as the protocol says.
 */
import type { RunScript } from "../redis/scripts.js";
import { createEventBatches, type EventBatchOptions } from "./event-batches.js";
import type { FanBeats } from "./fan-shards.js";
import { type BatchedJoin, type JoinBatchCounters, MAX_JOIN_BATCH, takeJoinBuckets } from "./join-batch.js";
import { ReplyShapeError } from "./replies.js";
import type { ScriptName } from "./scripts.js";

/** What a fan's join came to. */
export type ShardJoinOutcome =
  /** Holds `position` (a place, or an arrival number while the pre-queue is open); `created`: new. */
  | { kind: "placed"; created: boolean; prequeue: boolean; position: number }
  /** Admitted already: its poll answers its session. */
  | { kind: "admitted" }
  | { kind: "revoked" }
  | { kind: "closed" }
  | { kind: "not_found" }
  /** The room is not the one known (created again): read it again and join again. */
  | { kind: "reshard" }
  /** A pre-queue join its shard refused after the draw froze it: join again, after the close. */
  | { kind: "frozen" }
  | { kind: "refused"; reason: "pow" | "invite" }
  /** The per-IP limit (join-batch-n.lua's reply). */
  | { kind: "limited"; reply: unknown };

export interface ShardJoiner {
  join(eventId: string, keys: readonly string[], room: ShardJoinRoom, request: BatchedJoin): Promise<ShardJoinOutcome>;
  /** Batches sent, joins in them and the largest batch, since the process started (for the bench). */
  counters(): JoinBatchCounters;
}

export interface ShardJoinRoom {
  epoch: string;
  shards: number;
  beats: FanBeats;
}

export function createShardJoiner(
  run: RunScript<ScriptName>,
  /** `onBatch`: told every batch's size as it is sent (the gateway's metric, as join-batch.ts's). */
  options: Pick<EventBatchOptions<unknown, BatchedJoin, ShardJoinOutcome>, "onBatch"> = {},
): ShardJoiner {
  // the context of an event's next batch: its line's keys and the room its latest join knew (a room
  // created again: the next batch goes to the new one; one still queued for the old answers
  // `reshard`)
  const batches = createEventBatches<{ keys: readonly string[]; room: ShardJoinRoom }, BatchedJoin, ShardJoinOutcome>({
    maxBatch: MAX_JOIN_BATCH,
    ...(options.onBatch ? { onBatch: options.onBatch } : {}),
    send: async (eventId, { keys, room }, batch) => {
      const outcomes = await joinBatch(
        run,
        eventId,
        keys,
        room,
        batch.map((w) => w.request),
      );
      for (const [i, w] of batch.entries()) w.resolve(outcomes[i]!);
    },
  });
  return {
    join: (eventId, keys, room, request) => batches.push(eventId, { keys, room }, request),
    counters: batches.counters,
  };
}

async function joinBatch(
  run: RunScript<ScriptName>,
  eventId: string,
  keys: readonly string[],
  room: ShardJoinRoom,
  joins: readonly BatchedJoin[],
): Promise<ShardJoinOutcome[]> {
  const out: (ShardJoinOutcome | undefined)[] = new Array(joins.length);
  const { limited, failedBuckets, bucketError } = await takeJoinBuckets(room.beats, eventId, joins);
  if (failedBuckets.size > 0) throw bucketError;
  const going: number[] = [];
  for (const [i] of joins.entries()) {
    const refusal = limited.get(i);
    if (refusal !== undefined) out[i] = { kind: "limited", reply: refusal };
    else going.push(i);
  }
  if (going.length > 0) {
    const flagged = going.some((i) => joins[i]!.proofBits > 0 || joins[i]!.invite);
    const perFan = flagged ? going.flatMap((i) => [joins[i]!.proofBits, joins[i]!.invite ? "1" : "0"]) : [];
    const reply = await run<unknown>("range", keys, [
      going.length,
      room.epoch,
      room.shards,
      flagged ? 2 : 0,
      ...perFan,
    ]);
    if (reply === -1 || reply === -3) {
      for (const i of going) out[i] = { kind: reply === -1 ? "not_found" : "closed" };
    } else if (Array.isArray(reply) && reply[0] === "reshard") {
      for (const i of going) out[i] = { kind: "reshard" };
    } else if (Array.isArray(reply) && reply[0] === "range") {
      await writeRecords(eventId, room, joins, going, reply, out);
    } else throw new ReplyShapeError(`line-range of ${eventId}: ${JSON.stringify(reply)?.slice(0, 80)}`);
  }
  return out.map((o, i) => {
    if (!o) throw new ReplyShapeError(`shard join of ${eventId}: no outcome for fan ${i}`);
    return o;
  });
}

/** The range's places to the fans it let through, in order, then each shard's records written at once. */
async function writeRecords(
  eventId: string,
  room: ShardJoinRoom,
  joins: readonly BatchedJoin[],
  going: readonly number[],
  reply: unknown[],
  out: (ShardJoinOutcome | undefined)[],
): Promise<void> {
  const kind = String(reply[1]);
  const first = Number(reply[2]);
  const clock = { abandonMs: Number(reply[4]), startMs: Number(reply[3]) };
  const reservations: { index: number; fanId: string; number: number }[] = [];
  let taken = 0;
  for (const [j, i] of going.entries()) {
    const outcome = reply[7 + j];
    if (outcome === "pow" || outcome === "invite") out[i] = { kind: "refused", reason: outcome };
    else reservations.push({ index: i, fanId: joins[i]!.fanId, number: first + ++taken });
  }
  const byShard = new Map<number, typeof reservations>();
  for (const r of reservations) {
    const shard = room.beats.shardOf(r.fanId);
    const list = byShard.get(shard);
    if (list) list.push(r);
    else byShard.set(shard, [r]);
  }
  await Promise.all(
    [...byShard].map(async ([shard, list]) => {
      const answers = await room.beats.records.join(
        eventId,
        shard,
        clock,
        kind === "p" ? "p" : "w",
        list.map((r) => [r.fanId, r.number] as const),
      );
      const vacated: number[] = [];
      for (const [n, r] of list.entries()) {
        const outcome = outcomeOf(answers[n], kind === "p", r.number);
        // an admitted fan keeps its session: its reservation is nobody's (a place, not a number)
        if (outcome.kind === "admitted" && kind !== "p") vacated.push(r.number);
        out[r.index] = outcome;
      }
      await room.beats.records.vacate(eventId, shard, vacated);
    }),
  );
}

/** A shard's answer for one fan (fan-records-5.lua 'join'): 1 new, else { outcome, record, age, old }. */
function outcomeOf(answer: unknown, prequeue: boolean, reserved: number): ShardJoinOutcome {
  if (answer === 1) return { kind: "placed", created: true, prequeue, position: reserved };
  if (!Array.isArray(answer)) throw new ReplyShapeError(`fan-records join: ${JSON.stringify(answer)}`);
  const outcome = String(answer[0]);
  const record = String(answer[1]);
  const [s = "", pos = "0", n = "0"] = record.split("|");
  switch (outcome) {
    case "rejoin":
      return { kind: "placed", created: true, prequeue, position: reserved };
    case "again":
      return s === "p"
        ? { kind: "placed", created: false, prequeue: true, position: Number(n) }
        : { kind: "placed", created: false, prequeue: false, position: Number(pos) };
    case "admitted":
      return { kind: "admitted" };
    case "revoked":
      return { kind: "revoked" };
    case "frozen":
      return { kind: "frozen" };
    default:
      throw new ReplyShapeError(`fan-records join: outcome ${outcome}`);
  }
}
