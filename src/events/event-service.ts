/**
 * Setting up an event, in one place for the operator's PUT and the demo: the event and its seats
 * in DynamoDB, then its waiting room in Redis, its seat-map cache refreshed, and its background
 * jobs armed. DynamoDB is the source of truth: once the event is stored, the Redis steps are best
 * effort (a failed refresh loads on the next read; unarmed jobs are armed on the next reconnect),
 * except the waiting room, whose outcome the caller is told.
 */
import type {
  CreateEventProgress,
  CreateEventResult,
  EventCounts,
  EventDefinition,
  EventInput,
  GeneralAdmissionCounts,
  Inventory,
  OperatorRoomSettings,
} from "../inventory/index.js";
import type { DrandChain } from "../lottery/drand.js";
import type { Logger } from "../logger.js";
import type { SeatMapCache } from "../seatmap/cache.js";
import type { ConfigureResult, KeptDecisions, OpenNowResult, WaitingRoom } from "../waiting-room/index.js";
import { type EventJobs, endRunAt } from "../workers/event-jobs.js";

export type PutEventOutcome =
  | Exclude<CreateEventResult, { ok: true }>
  | {
      ok: true;
      created: boolean;
      event: EventDefinition;
      seatsWritten: number;
      /** The waiting room's configuration: a failure here leaves the stored event as it is. */
      room: ConfigureResult;
    };

export interface EventService {
  /** Creates or replaces the event (not on sale yet) and sets up everything around it. */
  put(eventId: string, input: EventInput, log: Logger): Promise<PutEventOutcome>;
  /**
   * A stored event whose Redis side may be new (a fresh Redis under an old table): its room is
   * configured again from the event, and its jobs armed. False when there is no complete event.
   */
  restore(eventId: string, log: Logger): Promise<boolean>;
  /** The event from the process's one event cache (src/inventory/events.ts). */
  cached(eventId: string): Promise<EventDefinition | null>;
  /** Whether the cached event has the section, synchronously; undefined when it cannot tell now. */
  hasSection(eventId: string, sectionId: string): boolean | undefined;
  /** The cached event, synchronously: undefined when this process cannot tell now, null for none. */
  peek(eventId: string): EventDefinition | null | undefined;
  /** Seats and areas by status, from the authoritative store; null for an unknown event. */
  counts(eventId: string): Promise<EventCounts | null>;
  generalAdmission(eventId: string, areaId: string): Promise<GeneralAdmissionCounts | null>;
  /**
   * Closes the sale: holds are refused from now on (in this process at once, in the others within
   * their event cache's 60 s), the event's backstops are removed, and its end is scheduled for
   * when its last hold can have expired (src/workers/event-jobs.ts). A repeat keeps the first
   * closing time. Null when there is no complete event.
   */
  close(eventId: string, log: Logger): Promise<{ event: EventDefinition; jobsEndAt: string } | null>;
  /**
   * Opens the sale now: the stored onSaleAt becomes now (holds are taken from now on), then the
   * waiting room draws its pre-queue and opens, and the jobs are armed for the new on-sale. Null
   * for no complete event, `closed` for a closed one. A repeat (already on sale) changes nothing
   * in DynamoDB and still opens a room that is not open yet (a retry after a Redis failure).
   */
  openNow(
    eventId: string,
    log: Logger,
  ): Promise<{ event: EventDefinition; changed: boolean; room: OpenNowResult } | null | "closed">;
  /** The operator's list: complete events, latest on-sale first, a page at a time. Null for a bad cursor. */
  list(page: {
    limit: number;
    cursor?: string | undefined;
  }): Promise<{ events: EventDefinition[]; cursor?: string } | null>;
  /** A consistent read of the stored event (complete or not); null when there is none. */
  get(eventId: string): Promise<EventDefinition | null>;
}

/** The operator's decisions kept on the event, as a room created from them starts with them. */
function decisionsOf(kept: OperatorRoomSettings): KeptDecisions {
  return {
    paused: kept.paused,
    closed: kept.closed === true,
    ...(kept.powBits === undefined ? {} : { powBits: kept.powBits }),
    ...(kept.invites === undefined ? {} : { invites: kept.invites }),
    ...(kept.autoAdmit === undefined ? {} : { autoAdmit: kept.autoAdmit }),
    ...(kept.version === undefined ? {} : { settingsVersion: kept.version }),
  };
}

export function createEventService(deps: {
  inventory: Pick<Inventory, "events" | "seats">;
  waitingRoom: Pick<WaitingRoom, "configure" | "openNow">;
  seatMap: Pick<SeatMapCache, "rebuild">;
  /** Absent when no queues are wired (some tests): nothing is armed. */
  jobs?: Pick<EventJobs, "arm">;
  /** The grace after a close before the last hold can expire (default CLOSE_GRACE_MS). */
  closeGraceMs?: number;
  /**
   * The event's lottery commitment (src/lottery/store.ts): a PUT whose on-sale time has passed is
   * refused before anything is stored when the lottery is committed to a drand chain (the round of
   * a past close is published: its date would choose the order). Absent: not checked here (the
   * room still refuses it, after the event item was written).
   */
  lottery?: { read(eventId: string): Promise<{ drandChain?: DrandChain } | null> };
}): EventService {
  const { inventory, waitingRoom, seatMap, jobs } = deps;

  const armJobs = (event: EventDefinition, log: Logger) =>
    jobs
      ?.arm(event)
      .catch((err: unknown) =>
        log.warn({ err: (err as Error).message }, "background jobs not armed yet; they will be when Redis answers"),
      );

  /** The room configured from the stored event: the settings kept on it when there are, else its block. */
  const configureFrom = (event: EventDefinition) => {
    const kept = event.roomSettings;
    if (!kept) return waitingRoom.configure(event.eventId, { onSaleAt: event.onSaleAt, ...event.waitingRoom });
    return waitingRoom.configure(
      event.eventId,
      {
        onSaleAt: event.onSaleAt,
        admitPerSecond: kept.admitPerSecond,
        maxActive: kept.maxActive,
        sessionSeconds: kept.sessionSeconds,
        abandonSeconds: kept.abandonSeconds,
      },
      decisionsOf(kept),
    );
  };

  return {
    async put(eventId, input, log) {
      // The body's own `drand` with a past close is refused by its schema; a body that omits it
      // still runs under the chain the lottery committed to (a chain is named once): the same rule,
      // read from there, and the stored event keeps showing the chain it runs under.
      if (deps.lottery && !input.waitingRoom.drand) {
        const chain = (await deps.lottery.read(eventId))?.drandChain;
        if (chain && Date.parse(input.onSaleAt) <= Date.now()) {
          return {
            ok: false,
            reason: "invalid_request",
            issues: [
              "onSaleAt: the lottery is committed to a drand chain: the on-sale time must be ahead (its round must be unpublished)",
            ],
          };
        }
        if (chain) input = { ...input, waitingRoom: { ...input.waitingRoom, drand: chain } };
      }
      let lastLogged = 0;
      const result = await inventory.events.create({
        eventId,
        input,
        onProgress: (p: CreateEventProgress) => {
          const now = Date.now();
          if (now - lastLogged < 1_000 && p.written + p.deleted < p.total) return;
          lastLogged = now;
          log.info({ written: p.written, deleted: p.deleted, total: p.total }, "writing seats");
        },
      });
      if (!result.ok) return result;
      const event = result.event;
      // A replacement keeps the room's settings (the stored event carries them over, the block's
      // changed fields applied): the room in Redis gets the same, and one this call creates (Redis
      // lost it) starts with the operator's decisions.
      const room = await configureFrom(event);
      // A replaced layout must not be served from the old cache.
      await Promise.all(event.sections.map((s) => seatMap.rebuild(eventId, s.id))).catch((err: unknown) =>
        log.warn({ err: (err as Error).message }, "seat-map cache refresh failed; it will load on the next read"),
      );
      await armJobs(event, log);
      if (result.kept.seats.length > 0 || result.kept.areas.length > 0) {
        // Only a replacement that raced a sale gets here (its write landed later than the budget).
        log.warn(
          { seats: result.kept.seats.slice(0, 100), areas: result.kept.areas, seatsKept: result.kept.seats.length },
          "seats and areas a fan holds or bought were left as they were, not rewritten",
        );
      }
      log.info({ created: result.created, seats: result.seatsWritten }, "event stored");
      return { ok: true, created: result.created, event, seatsWritten: result.seatsWritten, room };
    },

    async restore(eventId, log) {
      const event = await inventory.events.get({ eventId });
      if (!event?.layoutComplete) return false;
      // The settings kept on the event, as a PUT does: setting the event up again undoes nothing
      // the operator set since.
      const room = await configureFrom(event);
      if (!room.ok) log.debug({ reason: room.reason }, "waiting room kept as it was");
      await armJobs(event, log);
      return true;
    },

    async close(eventId, log) {
      const event = await inventory.events.close({ eventId });
      if (!event) return null;
      // Stored first: a Redis that cannot take the change now gets it on the next reconnect or start.
      await armJobs(event, log);
      log.info({ closedAt: event.closedAt }, "event closed");
      return { event, jobsEndAt: new Date(endRunAt(event, deps.closeGraceMs)).toISOString() };
    },

    async openNow(eventId, log) {
      const opened = await inventory.events.openNow({ eventId });
      if (opened === null || opened === "closed") return opened;
      const room = await waitingRoom.openNow(eventId);
      if (opened.changed) {
        await armJobs(opened.event, log);
        log.info({ onSaleAt: opened.event.onSaleAt }, "sale opened now");
      }
      return { ...opened, room };
    },

    list: (page) => inventory.events.listPage(page),
    get: (eventId) => inventory.events.get({ eventId }),
    cached: (eventId) => inventory.events.cached({ eventId }),
    hasSection: (eventId, sectionId) => inventory.events.hasSection({ eventId, sectionId }),
    peek: (eventId) => inventory.events.peek({ eventId }),
    counts: (eventId) => inventory.seats.eventCounts({ eventId }),
    generalAdmission: (eventId, areaId) => inventory.seats.generalAdmission({ eventId, areaId }),
  };
}
