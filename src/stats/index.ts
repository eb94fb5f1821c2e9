/**
 * The operator's figures: authoritative counts shared through Redis (snapshots.ts) and the history
 * the console charts (sampler.ts), built once per process by src/services.ts.
 */
import { randomUUID } from "node:crypto";
import type { Logger } from "../logger.js";
import type { Metrics } from "../metrics.js";
import type { RedisClient } from "../redis/scripts.js";
import type { WaitingRoom } from "../waiting-room/index.js";
import { type ClaimLatency, createLoopMeasures } from "./loop.js";
import { createStatsSampler, SAMPLE_INTERVAL_MS, ServedEvents, type StatsSampler } from "./sampler.js";
import { type CountsSnapshots, type CountsSource, createCountsSnapshots } from "./snapshots.js";

export { HISTORY_WINDOW_MS, MAX_SAMPLES, SAMPLE_INTERVAL_MS, ServedEvents, type StatsSample } from "./sampler.js";
export { COUNTS_INTERVAL_MS, type CountsSnapshot } from "./snapshots.js";
export type { ClaimLatency, LoopSample } from "./loop.js";

export interface EventStatsOptions {
  /** Counts snapshots are recomputed when older (default COUNTS_INTERVAL_MS, 5 s). */
  countsIntervalMs?: number;
  /** One sample per this (default SAMPLE_INTERVAL_MS, 5 s). */
  sampleIntervalMs?: number;
  /** History kept (default HISTORY_WINDOW_MS, an hour). */
  windowMs?: number;
  maxSamples?: number;
}

export interface EventStats {
  /** The events this process served (the app's `seenEvents`). */
  readonly served: ServedEvents;
  readonly counts: CountsSnapshots;
  readonly sampler: StatsSampler;
  /** The hold path reports each claim's latency here (the admission loop's p99, src/stats/loop.ts). */
  readonly claims: ClaimLatency;
}

export function createEventStats(
  deps: {
    redis: RedisClient;
    source: CountsSource;
    waitingRoom: Pick<WaitingRoom, "stats" | "updateSettings">;
    scope: string;
    logger: Logger;
    /** Its DynamoDB throttled attempts feed the admission loop. */
    metrics?: Pick<Metrics, "dynamoAttemptErrors">;
  },
  options: EventStatsOptions = {},
): EventStats {
  const served = new ServedEvents();
  const counts = createCountsSnapshots({
    redis: deps.redis,
    source: deps.source,
    id: randomUUID(),
    ...(options.countsIntervalMs ? { intervalMs: options.countsIntervalMs } : {}),
  });
  const measures = createLoopMeasures({
    redis: deps.redis,
    ...(deps.metrics ? { metrics: deps.metrics } : {}),
    intervalMs: options.sampleIntervalMs ?? SAMPLE_INTERVAL_MS,
  });
  const sampler = createStatsSampler({
    redis: deps.redis,
    measures,
    snapshots: counts,
    waitingRoom: deps.waitingRoom,
    served,
    scope: deps.scope,
    logger: deps.logger,
    ...(options.sampleIntervalMs ? { intervalMs: options.sampleIntervalMs } : {}),
    ...(options.windowMs ? { windowMs: options.windowMs } : {}),
    ...(options.maxSamples ? { maxSamples: options.maxSamples } : {}),
  });
  return { served, counts, sampler, claims: measures };
}
