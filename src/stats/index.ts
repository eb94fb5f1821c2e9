/**
 * The operator's figures: authoritative counts shared through Redis (snapshots.ts) and the history
 * the console charts (sampler.ts), built once per process by src/services.ts.
 */
import { randomUUID } from "node:crypto";
import type { Logger } from "../logger.js";
import type { RedisClient } from "../redis/scripts.js";
import type { WaitingRoom } from "../waiting-room/index.js";
import { createStatsSampler, ServedEvents, type StatsSampler } from "./sampler.js";
import { type CountsSnapshots, type CountsSource, createCountsSnapshots } from "./snapshots.js";

export { HISTORY_WINDOW_MS, MAX_SAMPLES, SAMPLE_INTERVAL_MS, ServedEvents, type StatsSample } from "./sampler.js";
export { COUNTS_INTERVAL_MS, type CountsSnapshot } from "./snapshots.js";

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
}

export function createEventStats(
  deps: {
    redis: RedisClient;
    source: CountsSource;
    waitingRoom: Pick<WaitingRoom, "stats">;
    scope: string;
    logger: Logger;
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
  const sampler = createStatsSampler({
    redis: deps.redis,
    snapshots: counts,
    waitingRoom: deps.waitingRoom,
    served,
    scope: deps.scope,
    logger: deps.logger,
    ...(options.sampleIntervalMs ? { intervalMs: options.sampleIntervalMs } : {}),
    ...(options.windowMs ? { windowMs: options.windowMs } : {}),
    ...(options.maxSamples ? { maxSamples: options.maxSamples } : {}),
  });
  return { served, counts, sampler };
}
