/**
 * One sweep of an event's fan shards (issue 28 goal 3, step 1; docs/redis-cluster.md): the fans
 * no shard has a beat of for abandonSeconds give up their places. A room with fan shards hands it
 * to one gateway a second (lua/waiting-room/line-view-8.lua and status-10.lua answer `sweep` 1;
 * fan-line.ts runs it), and admits nobody while the last one that completed is older than three
 * seconds (includes/admission.lua sweep_lagging). A room without keeps sweeping `seen` in its tick.
 *
 * In order, each step idempotent, so a sweeper that dies midway leaves the rest to the next one:
 *   1. the room's `tail`, abandon time and clock start (the close, the draw), on the event's slot;
 *   2. every shard's stale beats (lua/waiting-room/beats-1.lua 'stale'), at once;
 *   3. the verdicts on the event's slot (lua/waiting-room/abandon-8.lua), which checks each again
 *      and spares a place taken after step 1 (a fan who rejoined meanwhile);
 *   4. the beats of the fans step 3 called done, forgotten on their shards, each only while it is
 *      still the beat step 2 read.
 */
import { type RedisClient, registerScripts } from "../redis/scripts.js";
import { byFanShard, type FanBeats, type StaleBeat } from "./fan-shards.js";
import { lineKeys, waitingRoomKeys } from "./keys.js";
import { waitingRoomScripts } from "./scripts.js";

/** Stale beats read per shard per sweep; the rest wait for the next sweep. */
export const SWEEP_PER_SHARD = 512;

export interface FanSweep {
  /** Beats found stale on the shards. */
  stale: number;
  /** Places given up. */
  abandoned: number;
  /** Beats removed from the shards. */
  forgotten: number;
  /** When the room recorded the sweep (Redis time, ms); 0: the line cannot lose places yet. */
  sweptAt: number;
}

export async function sweepFanShards(
  redis: RedisClient,
  beats: FanBeats,
  eventId: string,
  options: { perShard?: number } = {},
): Promise<FanSweep | null> {
  const k = waitingRoomKeys(eventId);
  const [tail, abandonSeconds, openedAt, drawnAt, drawn] = await redis.hmget(
    k.room,
    "tail",
    "abandonSeconds",
    "openedAt",
    "drawnAt",
    "drawn",
  );
  if (tail === null && abandonSeconds === null) return null;
  const none: FanSweep = { stale: 0, abandoned: 0, forgotten: 0, sweptAt: 0 };
  if (!Number(openedAt) || !Number(drawn)) return none;
  const startMs = Math.max(Number(openedAt), Number(drawnAt) || 0);
  const abandonMs = Number(abandonSeconds) * 1000;
  const limit = options.perShard ?? SWEEP_PER_SHARD;
  const shards = Array.from({ length: beats.shards }, (_, shard) => shard);
  const stale = (
    await Promise.all(shards.map((shard) => beats.stale(eventId, shard, { abandonMs, startMs, limit })))
  ).flat();
  // Nothing stale still goes to the room: the sweep's time is what lets the line admit.
  const run = registerScripts(redis, waitingRoomScripts);
  const reply = await run<unknown[]>("abandon", lineKeys(k), [
    Number(tail) || 0,
    ...stale.flatMap((s) => [s.fanId, s.beat]),
  ]);
  if (!Array.isArray(reply)) throw new Error(`abandon-8: unexpected reply ${String(reply)}`);
  if (stale.length === 0) return { ...none, sweptAt: Number(reply[3]) };
  const done = new Set((reply[5] as unknown[]).map(String));
  const beatOf = new Map<string, StaleBeat>(stale.map((s) => [s.fanId, s]));
  const removed = await Promise.all(
    [...byFanShard(done, beats.shards)].map(([shard, ids]) =>
      beats.forget(
        eventId,
        shard,
        ids.map((id) => beatOf.get(id)).filter((s): s is StaleBeat => s !== undefined),
      ),
    ),
  );
  const forgotten = removed.reduce((a, b) => a + b, 0);
  return { stale: stale.length, abandoned: Number(reply[1]), forgotten, sweptAt: Number(reply[3]) };
}
