/**
 * The history behind the operator console's charts, kept in Redis so a console opened (or
 * reloaded) at any time, on any gateway, shows the last hour at once.
 *
 * Every gateway process runs a sampler. Each tick (every half interval) it lists the events in use
 * (lua/stats-events-1.lua: those any gateway served, or an operator read, or whose line was
 * moving, within the last hour; at most MAX_SAMPLED_EVENTS) and, for each, tries to claim the
 * event's current sample slot (lua/stats-claim-1.lua: slots of one interval, numbered from Redis
 * time). Exactly one process claims each slot, so the history has one sample per slot however
 * many gateways run; ticking twice a slot means a slot is missed only when every process is
 * stalled for a whole interval (or the claimer dies before it records: a gap, never a double). The
 * claimer takes the sample (the waiting room from Redis, the counts through the snapshots, which
 * it then refreshes for every stats read too) and adds it to the event's history
 * (lua/stats-record-1.lua), trimmed to the window and to MAX_SAMPLES.
 *
 * Left out of a sample: conflicts (holds lost to another fan). Each gateway counts its own in
 * gateway_conflicts_total and no Redis counter sums them; the console charts the one it reads
 * live, and Prometheus sums them across pods.
 */
import { mapLimit } from "../concurrency.js";
import type { Logger } from "../logger.js";
import { redisReady, requireRedis } from "../redis/availability.js";
import { type RedisClient, registerScripts, scriptFamily } from "../redis/scripts.js";
import type { WaitingRoom } from "../waiting-room/index.js";
import { sampledEventsKey, statsKeys } from "./keys.js";
import { createLoopRunner, type LoopMeasures, type LoopSample } from "./loop.js";
import type { CountsSnapshots } from "./snapshots.js";

/** One sample per event every this long. */
export const SAMPLE_INTERVAL_MS = 5_000;
/** The history keeps this much: an hour. */
export const HISTORY_WINDOW_MS = 3_600_000;
/** And never more samples than this (an hour at 5 s is 720). */
export const MAX_SAMPLES = 1_000;
/** An event is sampled until it has not been in use for this long. */
export const SAMPLED_EVENT_TTL_MS = 3_600_000;
/** The most events sampled (each costs a count per interval). */
export const MAX_SAMPLED_EVENTS = 100;
/** Events sampled at once by one process. */
const SAMPLES_IN_FLIGHT = 4;

const statsScripts = scriptFamily({
  name: "stats",
  files: { events: "stats-events-1", claim: "stats-claim-1", record: "stats-record-1" },
});

/** One sample of an event's figures. */
export interface StatsSample {
  /** When it was taken: Redis time, epoch ms. */
  at: number;
  /** When its seat, area and purchase figures were read from the store (src/stats/snapshots.ts). */
  countsAt: number;
  state: string;
  waiting: number;
  /** Fans admitted so far (a counter: its slope is the admission rate). */
  admitted: number;
  active: number;
  /** Seats and standing places, together. */
  available: number;
  held: number;
  /** A counter: its slope is the sales rate. */
  sold: number;
  purchases: { confirmed: number; pending: number; failed: number };
  /** The operator's rate in force; null when the room could not be read. */
  admitPerSecond: number | null;
  /** What the room admits per second now (0 when paused, capped by maxActive). */
  effectiveAdmitPerSecond: number | null;
  /** The hold path's p99 latency over the slot, every gateway (src/stats/loop.ts); null: no claims. */
  claimP99Ms?: number | null;
  /** Claims counted over the slot, and DynamoDB throttled attempts, every gateway. */
  claims?: number;
  throttles?: number;
  /** Sessions ended so far (completed + expired + revoked): its slope is what checkout frees. */
  finished?: number;
  /** The admission loop's step in this slot, when it is on. */
  loop?: LoopSample;
}

/**
 * The events this process served: every one (the metrics reporter exports their gauges, as the
 * plain Set did) and, in `recent`, those since the sampler's last tick. The routes add to it
 * (src/http/app.ts, src/http/routes/queue/join.ts); the sampler empties `recent`.
 */
export class ServedEvents extends Set<string> {
  readonly recent = new Set<string>();
  override add(eventId: string): this {
    if (this.recent.size < MAX_SAMPLED_EVENTS * 10) this.recent.add(eventId);
    return super.add(eventId);
  }
}

export interface HistoryPage {
  samples: StatsSample[];
  /** More samples follow the last one (ask again with `since` = its `at`). */
  more: boolean;
}

export interface StatsSampler {
  readonly intervalMs: number;
  readonly windowMs: number;
  /** An operator looks at the event: sample it (for the next hour at least). */
  watch(eventId: string): void;
  /** Samples after `since` (epoch ms, exclusive), oldest first, at most `limit`. */
  history(eventId: string, page: { since: number; limit: number }): Promise<HistoryPage>;
  /** One tick now (the timer calls it; tests await it). The number of samples this call recorded. */
  tick(): Promise<number>;
  start(): void;
  stop(): void;
}

export function createStatsSampler(options: {
  redis: RedisClient;
  snapshots: CountsSnapshots;
  waitingRoom: Pick<WaitingRoom, "stats" | "updateSettings">;
  served: ServedEvents;
  /** This process's claim figures, flushed each tick; the claimer steps the admission loop. */
  measures?: LoopMeasures;
  /** The deployment (its DynamoDB table): the list of events to sample is its own. */
  scope: string;
  logger: Logger;
  intervalMs?: number;
  windowMs?: number;
  maxSamples?: number;
}): StatsSampler {
  const { redis, snapshots, waitingRoom, served, logger } = options;
  const intervalMs = options.intervalMs ?? SAMPLE_INTERVAL_MS;
  const windowMs = options.windowMs ?? HISTORY_WINDOW_MS;
  const maxSamples = options.maxSamples ?? MAX_SAMPLES;
  const registry = sampledEventsKey(options.scope);
  const run = registerScripts(redis, statsScripts);
  const loop = createLoopRunner({ redis, waitingRoom, intervalMs, windowMs, logger });
  const watched = new Set<string>();
  // Events whose line moved at their last sample here: kept in use while fans wait or shop.
  const moving = new Set<string>();
  let timer: ReturnType<typeof setInterval> | undefined;
  let ticking: Promise<number> | undefined;

  async function take(eventId: string, at: number): Promise<StatsSample | null> {
    const [counts, room] = await Promise.all([snapshots.latest(eventId), waitingRoom.stats(eventId)]);
    if (!counts) return null;
    // The loop's step, once per slot, by this claimer; a failed step leaves the rate as it was.
    const stepped = await loop.run(eventId, at, room.ok ? room : undefined).catch((err: unknown) => {
      logger.warn({ err: (err as Error).message, eventId }, "admission loop: no step this slot");
      return undefined;
    });
    const areas = Object.values(counts.seats.generalAdmission);
    const sum = (pick: (a: (typeof areas)[number]) => number) => areas.reduce((n, a) => n + pick(a), 0);
    const seats = counts.seats.seats;
    const queue = room.ok ? room.stats : undefined;
    return {
      at,
      countsAt: counts.at,
      state: queue?.state ?? (room.ok ? "unknown" : "unavailable"),
      waiting: queue?.waiting ?? 0,
      admitted: queue?.admitted ?? 0,
      active: queue?.active ?? 0,
      // An expired hold not yet swept is available to the next fan (as the stats route counts it).
      available: seats.available + seats.expiredHolds + sum((a) => a.available),
      held: seats.held + sum((a) => a.held),
      sold: seats.sold + sum((a) => a.sold),
      purchases: {
        confirmed: counts.purchases.confirmed,
        pending: counts.purchases.pending,
        failed: counts.purchases.failed,
      },
      admitPerSecond: stepped?.loop ? stepped.loop.rate : room.ok ? room.settings.admitPerSecond : null,
      effectiveAdmitPerSecond: queue ? queue.effectiveAdmitPerSecond : null,
      ...(stepped ? { ...stepped.claims } : {}),
      ...(queue ? { finished: queue.completed + queue.expired + queue.revoked } : {}),
      ...(stepped?.loop ? { loop: stepped.loop } : {}),
    };
  }

  async function sampleOne(eventId: string): Promise<boolean> {
    const [claimed, at] = await run<[number, number]>("claim", [statsKeys(eventId).slot], [intervalMs]);
    if (claimed !== 1) return false;
    const sample = await take(eventId, at);
    if (!sample) return false;
    await run("record", [statsKeys(eventId).history], [at, JSON.stringify(sample), windowMs, maxSamples]);
    if (sample.waiting + sample.active > 0) moving.add(eventId);
    return true;
  }

  async function tickOnce(): Promise<number> {
    if (!redisReady(redis)) return 0;
    // Before any claim: what this process counted reaches the step of every slot claimed after.
    await options.measures?.flush().catch((err: unknown) => {
      logger.debug({ err: (err as Error).message }, "stats sampler: claim figures not flushed");
    });
    const touched = [...new Set([...served.recent, ...watched, ...moving])];
    served.recent.clear();
    watched.clear();
    moving.clear();
    let events: string[];
    try {
      events = await run<string[]>("events", [registry], [SAMPLED_EVENT_TTL_MS, MAX_SAMPLED_EVENTS, ...touched]);
    } catch (err) {
      // Told again at the next tick.
      for (const eventId of touched) watched.add(eventId);
      logger.debug({ err: (err as Error).message }, "stats sampler: events not listed");
      return 0;
    }
    const recorded = await mapLimit(events, SAMPLES_IN_FLIGHT, (eventId) =>
      sampleOne(eventId).catch((err: unknown) => {
        logger.debug({ err: (err as Error).message, eventId }, "stats sampler: no sample");
        return false;
      }),
    );
    return recorded.filter(Boolean).length;
  }

  const sampler: StatsSampler = {
    intervalMs,
    windowMs,
    watch(eventId) {
      if (watched.size < MAX_SAMPLED_EVENTS) watched.add(eventId);
    },
    async history(eventId, { since, limit }) {
      requireRedis(redis, "stats history");
      const raw = await redis.zrangebyscore(statsKeys(eventId).history, `(${since}`, "+inf", "LIMIT", 0, limit + 1);
      const samples: StatsSample[] = [];
      for (const member of raw.slice(0, limit)) {
        try {
          samples.push(JSON.parse(member) as StatsSample);
        } catch {
          // Not ours: skipped.
        }
      }
      return { samples, more: raw.length > limit };
    },
    tick() {
      // One tick at a time: a slow store makes the next one wait, never pile up.
      ticking ??= tickOnce().finally(() => {
        ticking = undefined;
      });
      return ticking;
    },
    start() {
      if (timer) return;
      timer = setInterval(() => void sampler.tick(), Math.max(1, Math.floor(intervalMs / 2)));
      timer.unref();
    },
    stop() {
      clearInterval(timer);
      timer = undefined;
    },
  };
  return sampler;
}
