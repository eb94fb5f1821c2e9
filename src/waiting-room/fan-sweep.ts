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
import { type AbandonClock, abandonClockFrom, byFanShard, type FanBeats, type StaleBeat } from "./fan-shards.js";
import { lineKeys, lineKeysWithClaims, waitingRoomKeys } from "./keys.js";
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
  const [tail, abandonSeconds, openedAt, drawnAt, drawn, claims] = await redis.hmget(
    k.room,
    "tail",
    "abandonSeconds",
    "openedAt",
    "drawnAt",
    "drawn",
    "claims",
  );
  if (tail === null && abandonSeconds === null) return null;
  const none: Round = { stale: 0, abandoned: 0, forgotten: 0, sweptAt: 0, behind: false };
  const { abandonMs, startMs } = abandonClockFrom({
    abandonSeconds: Number(abandonSeconds),
    openedAt: Number(openedAt),
    drawn: Number(drawn) !== 0,
    drawnAt: Number(drawnAt),
  });
  // (0 until the line is opened and drawn: no place lapses before)
  if (startMs === 0) return none;
  const shards = Array.from({ length: beats.shards }, (_, shard) => shard);
  const settled = await Promise.allSettled(
    shards.map((shard) => beats.stale(eventId, shard, { abandonMs, startMs, limit })),
  );
  if (Number(claims) === 2) return recordsRound(run, beats, eventId, settled, { abandonMs, startMs }, limit);
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

/**
 * A round in a room whose records live on the fan shards (`claims` 2; docs/redis-cluster.md "Steps
 * 2 and 3, call by call", step 3): the record and the beat are on one slot, so each shard gives its
 * stale fans up itself (fan-records-5.lua 'give-up': the beat as it is then, the record still in
 * line), with no call on the event's slot per fan. Then every place a shard gave up or vacated and
 * has not yet told (its `given`, the give-ups of polls and rejoins included, and those a sweeper
 * that died left) goes to the event's slot in one call (claims-9.lua 'gone': ahead of the cursor
 * vacated, passed lost with its offer back, claimed kept), and only then does each shard forget
 * them ('ack'). Each step idempotent: a sweeper dying between two leaves the next round the rest.
 */
async function recordsRound(
  run: RunScript<ScriptName>,
  beats: FanBeats,
  eventId: string,
  settled: PromiseSettledResult<StaleBeat[]>[],
  clock: AbandonClock,
  limit: number,
): Promise<Round> {
  const read = settled.flatMap((s, shard) => (s.status === "fulfilled" ? [{ shard, page: s.value }] : []));
  const unread = settled.find((s): s is PromiseRejectedResult => s.status === "rejected");
  if (unread && read.length === 0) throw unread.reason;
  const stale = read.reduce((n, { page }) => n + page.length, 0);
  const givenUp = await Promise.allSettled(
    read.map(({ shard, page }) =>
      beats.records.giveUp(
        eventId,
        shard,
        page.map((b) => b.fanId),
        clock,
      ),
    ),
  );
  const lists = await Promise.allSettled(
    Array.from({ length: beats.shards }, (_, shard) => beats.records.given(eventId, shard, limit)),
  );
  // Complete only when every shard was read and gave up what it read, and told all it holds.
  const behind =
    unread !== undefined ||
    read.some(({ page }) => page.length >= limit) ||
    givenUp.some((g) => g.status === "rejected") ||
    lists.some((l) => l.status === "rejected" || l.value.length >= limit);
  const told = lists.flatMap((l, shard) => (l.status === "fulfilled" ? [{ shard, places: l.value }] : []));
  const places = told.flatMap(({ places }) => places);
  const k = waitingRoomKeys(eventId);
  // each place as its shard named it (x: given up, v: a reservation no fan took): the event's
  // slot counts each once, however often it is told
  const reply = await run<unknown[]>("claims", lineKeysWithClaims(k), [
    "gone",
    behind ? "0" : "1",
    ...places.map((p) => p.member),
  ]);
  if (!Array.isArray(reply)) throw new Error(`claims-9 gone: unexpected reply ${String(reply)}`);
  const acked = await Promise.all(
    told.map(({ shard, places }) =>
      beats.records.ack(
        eventId,
        shard,
        places.map((p) => p.member),
      ),
    ),
  );
  return {
    stale,
    // as the event's slot counted them: a place an overlapping sweep told first is not counted again
    abandoned: Number(reply[9] ?? 0),
    forgotten: acked.reduce((a, b) => a + b, 0),
    sweptAt: Number(reply[7]),
    behind,
  };
}
