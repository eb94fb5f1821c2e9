/**
 * The end of a closed event's background work: a chain of end runs on the reconcile queue, the
 * first delayed until the event's last hold can have expired (./event-jobs.ts). Each run sweeps
 * every shard (every hold has expired by then), resolves the pending purchases, and publishes and
 * checks the outbox, as the backstops did while the event was live: it is the event's only
 * backstop now. A run that found work left schedules the next one; once no run has found any for
 * `quietMs` (longer than the publisher ever waits between two checks of a published record, so
 * an unacknowledged one is due, and seen, inside that window), the event is marked `jobsEndedAt`
 * in DynamoDB and every job of it left in Redis is removed. Marked first: a crash in between
 * leaves this job to BullMQ's retry, whose run finds the mark and removes what is left.
 *
 * Bookings an integrator's handler failed for good stay unacknowledged, and the chain keeps
 * checking them (once a minute), as the live publisher did: work waiting, not time.
 */
import type { Inventory } from "../inventory/index.js";
import type { Logger } from "../logger.js";
import { OUTBOX_MAX_CHECK_AFTER_MS, type PublishOutboxResult } from "./outbox.js";
import { type Queues, removeEventJobs, scheduleEventEnd } from "./queues.js";

/** How long after a run that found work left the next end run comes. */
export const END_RECHECK_MS = 60_000;
/** How long the end runs must find nothing before the event's jobs go. */
export const END_QUIET_MS = OUTBOX_MAX_CHECK_AFTER_MS + END_RECHECK_MS;

export interface EndEventDeps {
  inventory: Pick<Inventory, "events" | "outbox">;
  queues: Queues;
  logger: Logger;
  /**
   * The work of one run, as the backstops do it: every shard, and in the first run (`run` 0) every
   * section read from DynamoDB as well (the later runs find no hold left that the first did not).
   */
  sweepAll(eventId: string, run: number): Promise<unknown>;
  reconcile(eventId: string): Promise<Record<string, number>>;
  publish(eventId: string): Promise<PublishOutboxResult>;
  recheckMs?: number;
  quietMs?: number;
  /** Epoch ms; default Date.now. */
  clock?: () => number;
}

export type EndRunResult =
  | { ended: true; removed: number }
  | { ended: false; busy: boolean; quietSince?: number; next: number };

export async function endEventJob(
  deps: EndEventDeps,
  job: { eventId: string; run: number; quietSince?: number },
  ownJobId?: string,
): Promise<EndRunResult> {
  const { eventId } = job;
  const clock = deps.clock ?? Date.now;
  const log = deps.logger.child({ job: "event-end", eventId, run: job.run });
  const event = await deps.inventory.events.get({ eventId });
  if (!event || event.jobsEndedAt !== undefined) {
    return { ended: true, removed: await removeEventJobs(deps.queues, eventId, ownJobId) };
  }

  await deps.sweepAll(eventId, job.run);
  const reconciled = await deps.reconcile(eventId);
  const outbox = await deps.publish(eventId);
  // Younger than the publisher's margin, or published and not due: not seen above, still work.
  const unsent = await deps.inventory.outbox.listUnsent({ eventId, limit: 1 });
  const busy =
    (reconciled.pending ?? 0) > 0 ||
    (reconciled.error ?? 0) > 0 ||
    outbox.published > 0 ||
    outbox.checked > outbox.acknowledged ||
    unsent.length > 0;

  const now = clock();
  const quietSince = busy ? undefined : (job.quietSince ?? now);
  if (quietSince !== undefined && now - quietSince >= (deps.quietMs ?? END_QUIET_MS)) {
    await deps.inventory.events.markJobsEnded({ eventId });
    const removed = await removeEventJobs(deps.queues, eventId, ownJobId);
    log.info({ removed }, "event ended: its remaining work is done and its jobs are removed");
    return { ended: true, removed };
  }
  const next = job.run + 1;
  await scheduleEventEnd(
    deps.queues,
    { eventId, run: next, ...(quietSince !== undefined ? { quietSince } : {}) },
    deps.recheckMs ?? END_RECHECK_MS,
  );
  if (busy) log.debug({ reconciled, outbox }, "closed event still has work; checked again later");
  return { ended: false, busy, ...(quietSince !== undefined ? { quietSince } : {}), next };
}
