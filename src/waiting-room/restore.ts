/**
 * A room Redis lost is configured again from the stored event (the gateway reads it from
 * DynamoDB): on the first call that finds no room, once per event at a time in this process.
 * Idempotent across processes: configure-9.lua in 'restore' mode never touches an existing room.
 */
import { redisReady } from "../redis/availability.js";
import { onceEvery } from "../throttle.js";
import type { RestoringContext, RoomContext } from "./context.js";
import { isEventId, waitingRoomKeys } from "./keys.js";
import type { KeptDecisions } from "./operator.js";
import type { ConfigureInput, ConfigureResult, RestoreInput, RestoreOutcome } from "./types.js";

/** How long a "no such event" answer of `restore` is remembered (a flood of unknown ids). */
const NO_EVENT_MEMORY_MS = 5_000;
/** How often ensureRoom looks at one event's room. */
const ENSURE_EVERY_MS = 5_000;

export type RestoreSource = (eventId: string) => Promise<RestoreInput | null>;

/** Configures the room in restore mode, created with the operator's kept decisions. */
export type RestoreConfigure = (
  eventId: string,
  input: ConfigureInput,
  kept: KeptDecisions,
) => Promise<ConfigureResult>;

export interface Restorer extends Pick<RestoringContext, "restoreRoom" | "withRestore"> {
  /** At most every few seconds per event: restores the room in the background if it is gone. */
  ensureRoom(eventId: string): void;
}

export function createRestorer(
  ctx: RoomContext,
  source: RestoreSource | undefined,
  configure: RestoreConfigure,
): Restorer {
  const { redis, log } = ctx;
  const restoring = new Map<string, Promise<RestoreOutcome>>();
  const noEventUntil = new Map<string, number>();
  const ensureDue = onceEvery(ENSURE_EVERY_MS);

  async function restoreOnce(read: RestoreSource, eventId: string): Promise<RestoreOutcome> {
    let input: RestoreInput | null;
    try {
      input = await read(eventId);
    } catch (err) {
      log?.warn({ err: (err as Error).message, eventId }, "cannot read the event to restore its waiting room");
      return "unavailable";
    }
    if (!input) {
      if (noEventUntil.size >= 10_000) noEventUntil.clear();
      noEventUntil.set(eventId, Date.now() + NO_EVENT_MEMORY_MS);
      return "no_event";
    }
    // A room the operator had paused or closed comes back so, in the same script that creates it.
    // So are its bot settings: a Redis wipe must not open the line to bots.
    // The admission loop's settings too: a loop that was on keeps owning the rate.
    // And the settings' version: the next change is kept over the copy it was restored from.
    // And the fans the operator revoked: they may not take a place in the new room either.
    const { paused, closed, revoked, powBits, invites, autoAdmit, settingsVersion, ...settings } = input;
    const result = await configure(eventId, settings, {
      paused: paused === true,
      closed: closed === true,
      ...(revoked === undefined ? {} : { revoked }),
      ...(powBits === undefined ? {} : { powBits }),
      ...(invites === undefined ? {} : { invites }),
      ...(autoAdmit === undefined ? {} : { autoAdmit }),
      ...(settingsVersion === undefined ? {} : { settingsVersion }),
    });
    if (!result.ok) return result.reason === "unavailable" ? "unavailable" : "no_event";
    if (!result.created) return "exists";
    log?.warn(
      { eventId, commitment: result.info.lottery.commitment, settings: result.settings },
      "waiting room restored from the stored event (Redis had lost it): new epoch, the lottery seed committed in DynamoDB when there is one",
    );
    return "restored";
  }

  function restoreRoom(eventId: string): Promise<RestoreOutcome> {
    if (!source || !isEventId(eventId)) return Promise.resolve("no_event");
    if ((noEventUntil.get(eventId) ?? 0) > Date.now()) return Promise.resolve("no_event");
    const pending = restoring.get(eventId);
    if (pending) return pending;
    const run = restoreOnce(source, eventId).finally(() => restoring.delete(eventId));
    restoring.set(eventId, run);
    return run;
  }

  return {
    restoreRoom,

    async withRestore(eventId, op) {
      const first = await op();
      if (first.ok || first.reason !== "not_found" || !source) return first;
      const restored = await restoreRoom(eventId);
      if (restored === "unavailable") {
        return { ok: false, reason: "unavailable", message: "the room could not be restored; retry" };
      }
      return restored === "no_event" ? first : op();
    },

    ensureRoom(eventId) {
      if (!isEventId(eventId) || !source || !redisReady(redis)) return;
      if (!ensureDue(eventId)) return;
      const { room } = waitingRoomKeys(eventId);
      void (async () => {
        if ((await redis.exists(room)) === 0) await restoreRoom(eventId);
      })().catch(() => undefined);
    },
  };
}
