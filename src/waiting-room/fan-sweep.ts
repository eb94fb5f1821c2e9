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
 * A shard with more stale beats than one read takes (a mass of fans left at once) fills its page:
 * then the round is behind, the room does not record the sweep, and the steps run again at once,
 * within SWEEP_BUDGET_MS. So while a backlog waits unread the cursor admits nobody (sweep_lagging
 * after 3 s), instead of admitting fans whose beats say they left.
 */
import { type RedisClient, registerScripts, type RunScript } from "../redis/scripts.js";
import { byFanShard, type FanBeats, type StaleBeat } from "./fan-shards.js";
import { lineKeys, waitingRoomKeys } from "./keys.js";
import { type ScriptName, waitingRoomScripts } from "./scripts.js";

/** Stale beats read per shard per round; a shard that fills its page is read again at once. */
export const SWEEP_PER_SHARD = 512;
/**
 * How long one sweep keeps reading while a shard still fills its page (a mass of fans left at
 * once); then the next second's sweep goes on. Below includes/admission.lua SWEEP_LAG_MS (3 s).
 */
export const SWEEP_BUDGET_MS = 1_000;

export interface FanSweep {
  /** Beats found stale on the shards. */
  stale: number;
  /** Places given up. */
  abandoned: number;
  /** Beats removed from the shards. */
  forgotten: number;
  /**
   * When the room recorded the sweep complete (Redis time, ms); 0: the line cannot lose places
   * yet, or the sweep is behind.
   */
  sweptAt: number;
  /** Rounds read (more than one when a shard had more stale beats than a page). */
  rounds: number;
  /**
   * Stale beats were left unread (the budget ran out, or a shard could not be read): the room did
   * not record the sweep.
   */
  behind: boolean;
}

export interface FanSweepOptions {
  /** Stale beats read per shard per round (SWEEP_PER_SHARD). */
  perShard?: number;
  /** How long to keep reading while behind (SWEEP_BUDGET_MS); 0: one round. */
  budgetMs?: number;
}

/**
 * Sweeps until no shard fills its page (the room then records the sweep complete) or the budget
 * runs out (it does not, and admission stops once the last complete sweep is 3 s old).
 */
export async function sweepFanShards(
  redis: RedisClient,
  beats: FanBeats,
  eventId: string,
  options: FanSweepOptions = {},
): Promise<FanSweep | null> {
  const perShard = options.perShard ?? SWEEP_PER_SHARD;
  const budgetMs = options.budgetMs ?? SWEEP_BUDGET_MS;
  const started = performance.now();
  const run = registerScripts(redis, waitingRoomScripts);
  const total: FanSweep = { stale: 0, abandoned: 0, forgotten: 0, sweptAt: 0, rounds: 0, behind: false };
  for (;;) {
    const round = await sweepRound(redis, run, beats, eventId, perShard);
    if (round === null) return total.rounds === 0 ? null : total;
    total.rounds += 1;
    total.stale += round.stale;
    total.abandoned += round.abandoned;
    total.forgotten += round.forgotten;
    total.sweptAt = round.sweptAt;
    total.behind = round.behind;
    // A round that gave up nothing cannot shorten the backlog: the page is full of places spared
    // for now (a clock skew between masters, a rejoin in flight), or a shard cannot be read; the
    // next sweep reads again.
    if (!round.behind || round.forgotten === 0 || performance.now() - started >= budgetMs) return total;
  }
}

interface Round {
  stale: number;
  abandoned: number;
  forgotten: number;
  sweptAt: number;
  behind: boolean;
}

async function sweepRound(
  redis: RedisClient,
  run: RunScript<ScriptName>,
  beats: FanBeats,
  eventId: string,
  limit: number,
): Promise<Round | null> {
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
  const none: Round = { stale: 0, abandoned: 0, forgotten: 0, sweptAt: 0, behind: false };
  if (!Number(openedAt) || !Number(drawn)) return none;
  const startMs = Math.max(Number(openedAt), Number(drawnAt) || 0);
  const abandonMs = Number(abandonSeconds) * 1000;
  const shards = Array.from({ length: beats.shards }, (_, shard) => shard);
  const settled = await Promise.allSettled(
    shards.map((shard) => beats.stale(eventId, shard, { abandonMs, startMs, limit })),
  );
  // A shard that cannot be read (its master failing over): the others' stale fans are still given
  // up, but the sweep is not complete, so the line admits nobody once the last complete one is
  // 3 s old. Every shard failing is the sweep failing.
  const pages = settled.flatMap((s) => (s.status === "fulfilled" ? [s.value] : []));
  const unread = settled.find((s): s is PromiseRejectedResult => s.status === "rejected");
  if (unread && pages.length === 0) throw unread.reason;
  // A full page may leave more behind it: the sweep is complete only when no shard filled one.
  const behind = unread !== undefined || pages.some((page) => page.length >= limit);
  const stale = pages.flat();
  // Nothing stale still goes to the room: the sweep's time is what lets the line admit.
  const reply = await run<unknown[]>("abandon", lineKeys(k), [
    Number(tail) || 0,
    behind ? "0" : "1",
    ...stale.flatMap((s) => [s.fanId, s.beat]),
  ]);
  if (!Array.isArray(reply)) throw new Error(`abandon-8: unexpected reply ${String(reply)}`);
  if (stale.length === 0) return { ...none, sweptAt: Number(reply[3]), behind };
  const done = new Set((reply[5] as unknown[]).map(String));
  const beatOf = new Map<string, StaleBeat>(stale.map((s) => [s.fanId, s]));
  const removed = await Promise.all(
    [...byFanShard(done, beats.shardOf)].map(([shard, ids]) =>
      beats.forget(
        eventId,
        shard,
        ids.map((id) => beatOf.get(id)).filter((s): s is StaleBeat => s !== undefined),
      ),
    ),
  );
  const forgotten = removed.reduce((a, b) => a + b, 0);
  return { stale: stale.length, abandoned: Number(reply[1]), forgotten, sweptAt: Number(reply[3]), behind };
}
