/**
 * The admission loop's measurements across gateways, and its step (the law is
 * src/waiting-room/admission-loop.ts).
 *
 * Each process counts its own claims' latencies (the hold path, src/claims/hold-service.ts) in
 * histogram buckets per event, and reads its DynamoDB throttled attempts off its metrics. On each
 * sampler tick it adds them into one Redis hash per event (HINCRBY, a pipeline per event, all
 * sent together: no round trip per request). Throttles are the table's, not one event's: a process adds its
 * throttles since its last flush to every event it flushes, so each event's hash holds what the
 * table threw back at every gateway in that time.
 *
 * The process that claimed an event's sample slot (src/stats/sampler.ts) runs the step: it takes
 * the hash and deletes it in one MULTI (so what is counted is counted once, and the interval is the
 * one since the last step), merges the buckets into a p99, steps the law, applies the rate through
 * the settings script (`loop` mode: only while the loop is on, logged only when it moved enough)
 * and keeps the law's state next to the samples. One claimer per slot: never two processes setting
 * the rate for the same interval.
 */
import type { Logger } from "../logger.js";
import type { Metrics } from "../metrics.js";
import type { RedisClient } from "../redis/scripts.js";
import { type LoopReason, type LoopState, step } from "../waiting-room/admission-loop.js";
import type { WaitingRoom } from "../waiting-room/index.js";
import type { RoomSettings, WaitingRoomStats } from "../waiting-room/types.js";
import { statsKeys } from "./keys.js";

/** Upper bounds of the claim latency buckets, ms; one more bucket past the last. */
export const CLAIM_BUCKETS_MS = [5, 10, 25, 50, 75, 100, 150, 200, 250, 300, 400, 500, 750, 1_000, 2_000, 5_000];
/** DynamoDB errors that mean "too much for the table now" (src/dynamodb/instrument.ts counts them). */
export const THROTTLE_ERRORS = new Set([
  "ThrottlingException",
  "ProvisionedThroughputExceededException",
  "RequestLimitExceeded",
]);
/** The most events one process keeps claim counts for between flushes. */
const MAX_EVENTS = 1_000;
/** Who the settings history names for the loop's changes. */
export const LOOP_BY = "autoAdmit";

/** Where the hold path reports each claim's latency. */
export interface ClaimLatency {
  record(eventId: string, ms: number): void;
}

export interface LoopMeasures extends ClaimLatency {
  /** Adds what this process counted since the last flush into the events' shared hashes. */
  flush(): Promise<void>;
}

/** The bucket of a latency. */
export function bucketOf(ms: number): number {
  const i = CLAIM_BUCKETS_MS.findIndex((bound) => ms <= bound);
  return i === -1 ? CLAIM_BUCKETS_MS.length : i;
}

/**
 * The p99 of merged bucket counts, interpolated within its bucket (the last, open one answers
 * twice the highest bound). null when nothing was counted.
 */
export function p99Of(counts: readonly number[]): number | null {
  const total = counts.reduce((n, c) => n + c, 0);
  if (total <= 0) return null;
  const rank = 0.99 * total;
  let seen = 0;
  for (let i = 0; i < counts.length; i++) {
    const c = counts[i] ?? 0;
    if (c > 0 && seen + c >= rank) {
      const lo = i === 0 ? 0 : (CLAIM_BUCKETS_MS[i - 1] ?? 0);
      const hi = CLAIM_BUCKETS_MS[i] ?? 2 * (CLAIM_BUCKETS_MS[CLAIM_BUCKETS_MS.length - 1] ?? 0);
      return Math.round(lo + ((rank - seen) / c) * (hi - lo));
    }
    seen += c;
  }
  return CLAIM_BUCKETS_MS[CLAIM_BUCKETS_MS.length - 1] ?? null;
}

export function createLoopMeasures(options: {
  redis: RedisClient;
  metrics?: Pick<Metrics, "dynamoAttemptErrors">;
  /** The hash lives a few of these (a process that stopped flushing leaves nothing behind). */
  intervalMs: number;
}): LoopMeasures {
  const { redis, metrics } = options;
  let counts = new Map<string, number[]>();
  let throttlesSeen: number | undefined;

  async function throttlesSince(): Promise<number> {
    if (!metrics) return 0;
    const { values } = await metrics.dynamoAttemptErrors.get();
    const total = values.reduce((n, v) => (THROTTLE_ERRORS.has(String(v.labels.error)) ? n + v.value : n), 0);
    const delta = throttlesSeen === undefined ? 0 : Math.max(0, total - throttlesSeen);
    throttlesSeen = total;
    return delta;
  }

  return {
    record(eventId, ms) {
      let c = counts.get(eventId);
      if (!c) {
        if (counts.size >= MAX_EVENTS) return;
        c = new Array<number>(CLAIM_BUCKETS_MS.length + 1).fill(0);
        counts.set(eventId, c);
      }
      const i = bucketOf(ms);
      c[i] = (c[i] ?? 0) + 1;
    },
    async flush() {
      const throttles = await throttlesSince();
      const taken = counts;
      counts = new Map();
      if (taken.size === 0) return;
      // A pipeline per event: its keys share the event's hash tag, so each runs on one Redis
      // Cluster node (auto-pipelining still sends them together on one server).
      await Promise.all(
        [...taken].map(([eventId, c]) => {
          const key = statsKeys(eventId).loopMeasures;
          const pipeline = redis.pipeline();
          c.forEach((n, i) => {
            if (n > 0) pipeline.hincrby(key, `b${i}`, n);
          });
          if (throttles > 0) pipeline.hincrby(key, "throttles", throttles);
          pipeline.pexpire(key, options.intervalMs * 4);
          return pipeline.exec();
        }),
      );
    },
  };
}

/** What one step recorded in the event's sample (the console charts it). */
export interface LoopSample {
  rate: number;
  reason: LoopReason;
  /** The rate before the step. */
  was: number;
  finishingPerSecond: number | null;
  throttlesPerSecond: number | null;
  targetClaimP99Ms: number;
  minPerSecond: number;
  maxPerSecond: number;
}

/** The claim figures every sample carries, the loop on or off. */
export interface ClaimFigures {
  claimP99Ms: number | null;
  claims: number;
  throttles: number;
}

export interface LoopRunner {
  /**
   * Runs by the slot's claimer: takes the interval's shared measurements and, with the loop on,
   * steps it and applies the rate. `at` is the slot's Redis time.
   */
  run(
    eventId: string,
    at: number,
    room: { stats: WaitingRoomStats; settings: RoomSettings } | undefined,
  ): Promise<{ claims: ClaimFigures; loop?: LoopSample }>;
}

export function createLoopRunner(options: {
  redis: RedisClient;
  waitingRoom: Pick<WaitingRoom, "updateSettings">;
  intervalMs: number;
  /** The law's state lives this long after the last step. */
  windowMs: number;
  logger: Logger;
}): LoopRunner {
  const { redis, waitingRoom, intervalMs, windowMs, logger } = options;
  return {
    async run(eventId, at, room) {
      const k = statsKeys(eventId);
      const replies = await redis.multi().get(k.loop).hgetall(k.loopMeasures).del(k.loopMeasures).exec();
      if (!replies) throw new Error("loop measurements: transaction discarded");
      const [stateReply, measuresReply] = replies;
      if (stateReply?.[0] || measuresReply?.[0]) throw stateReply?.[0] ?? measuresReply?.[0];
      const raw = (measuresReply?.[1] ?? {}) as Record<string, string>;
      const buckets = CLAIM_BUCKETS_MS.map((_, i) => Number(raw[`b${i}`] ?? 0));
      buckets.push(Number(raw[`b${CLAIM_BUCKETS_MS.length}`] ?? 0));
      const claims: ClaimFigures = {
        claimP99Ms: p99Of(buckets),
        claims: buckets.reduce((n, c) => n + c, 0),
        throttles: Number(raw.throttles ?? 0),
      };
      if (!room?.settings.autoAdmit.enabled) return { claims };
      const { stats, settings } = room;
      const state = parseState(stateReply?.[1]);
      const out = step(
        state,
        {
          at,
          finishedTotal: stats.completed + stats.expired + stats.revoked,
          active: stats.active,
          maxActive: settings.maxActive,
          waiting: stats.waiting,
          admitting: stats.state === "open" && !stats.drawing,
          claimP99Ms: claims.claimP99Ms,
          throttles: claims.throttles,
        },
        { ...settings.autoAdmit, rate: settings.admitPerSecond, intervalMs },
      );
      let rate = out.rate;
      if (rate !== settings.admitPerSecond) {
        const applied = await waitingRoom.updateSettings(
          eventId,
          { admitPerSecond: rate },
          { by: LOOP_BY, loop: true },
        );
        if (!applied.ok) {
          logger.debug({ eventId, reason: applied.reason }, "admission loop: rate not applied");
          rate = settings.admitPerSecond;
        } else {
          rate = applied.settings.admitPerSecond;
        }
      }
      await redis.set(k.loop, JSON.stringify(out.state), "PX", windowMs);
      const a = settings.autoAdmit;
      return {
        claims,
        loop: {
          rate,
          reason: out.reason,
          was: settings.admitPerSecond,
          finishingPerSecond: out.finishingPerSecond,
          throttlesPerSecond: out.throttlesPerSecond,
          targetClaimP99Ms: a.targetClaimP99Ms,
          minPerSecond: a.minPerSecond,
          maxPerSecond: a.maxPerSecond,
        },
      };
    },
  };
}

function parseState(raw: unknown): LoopState | null {
  if (typeof raw !== "string") return null;
  try {
    const s = JSON.parse(raw) as Partial<LoopState>;
    if (typeof s.at !== "number" || typeof s.finishedTotal !== "number") return null;
    return {
      at: s.at,
      finishedTotal: s.finishedTotal,
      decreased: s.decreased === true,
      ceiling: Number(s.ceiling ?? 0),
    };
  } catch {
    return null;
  }
}
