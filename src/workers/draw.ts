/**
 * The lottery draw as a job (issue 18 item 2): at an event's onSaleAt the draw runs whether or not
 * any fan polls or anyone reads the queue info (those start it too: src/waiting-room/waiting-room.ts).
 * One chain per event and on-sale time: the job ids are deterministic, so every gateway that arms
 * the event adds the same first run. A run that finds the draw not due yet (Redis time behind the
 * job's clock), held by another process, or waiting for a beacon value adds the next run a little
 * later, up to MAX_DRAW_RUNS; a drawn pre-queue ends the chain.
 */
import type { Logger } from "../logger.js";
import type { WaitingRoom } from "../waiting-room/index.js";

export interface DrawJob {
  kind: "draw";
  eventId: string;
  /** The on-sale time the chain is for (an event moved to another time gets a chain of its own). */
  onSaleAt: number;
  run: number;
}

/** Runs a second apart cover the draw's beacon wait (10 minutes) twice over. */
export const MAX_DRAW_RUNS = 1_200;
const NOT_DUE_RETRY_MS = 200;
const BUSY_RETRY_MS = 1_000;

export const drawJobId = (eventId: string, onSaleAt: number, run: number) => `draw-${eventId}-${onSaleAt}-${run}`;

export async function drawJob(
  deps: {
    waitingRoom: Pick<WaitingRoom, "drawDue">;
    /** Adds the chain's next run after `delayMs`. */
    next: (job: DrawJob, delayMs: number) => Promise<void>;
    logger: Logger;
  },
  job: DrawJob,
): Promise<{ outcome: string }> {
  const result = await deps.waitingRoom.drawDue(job.eventId);
  if (result.ok) return { outcome: result.changed ? "drawn" : "drawn_already" };
  if (result.reason === "not_found") return { outcome: "no_room" };
  if (job.run + 1 >= MAX_DRAW_RUNS) {
    deps.logger.error({ eventId: job.eventId, reason: result.reason, runs: job.run + 1 }, "the draw did not happen");
    return { outcome: `gave_up_${result.reason}` };
  }
  await deps.next({ ...job, run: job.run + 1 }, result.reason === "not_closed" ? NOT_DUE_RETRY_MS : BUSY_RETRY_MS);
  return { outcome: result.reason };
}
