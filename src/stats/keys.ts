/**
 * The Redis keys of the operator's figures. An event's keys share its hash tag `{evt:<eventId>}`
 * with the rest of the event's keys, so the scripts run on Redis Cluster; the list of events to
 * sample is one key per deployment (named by its DynamoDB table, as the metrics reporter's).
 */
export function statsKeys(eventId: string) {
  const base = `st:{evt:${eventId}}`;
  return {
    /** string: the latest counts snapshot (JSON, src/stats/snapshots.ts). */
    counts: `${base}:counts`,
    /** string, SET NX PX: the process computing the next counts snapshot. */
    countsLease: `${base}:counts-lease`,
    /** string: the last sample slot claimed (lua/stats-claim-1.lua). */
    slot: `${base}:slot`,
    /** zset: the samples, scored by time (lua/stats-record-1.lua). */
    history: `${base}:history`,
    /** string: the admission loop's state between steps (JSON, src/stats/loop.ts). */
    loop: `${base}:loop`,
    /** hash: claim latency bucket counts and throttles every gateway added since the last step. */
    loopMeasures: `${base}:loop-m`,
  };
}

/** zset of the events to sample, scored by when they were last in use (lua/stats-events-1.lua). */
export const sampledEventsKey = (scope: string) => `{stats:${scope}}:events`;
