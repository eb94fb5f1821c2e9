/**
 * "Tell me when seats come back" (issue 18 item 5): a fan of a sold-out event leaves a contact;
 * when seats come back (holds expire in the sweep, a fan releases a hold) the next fans in the
 * order they asked are told through the operator's webhook, about `fansPerSeat` per seat, each fan
 * once.
 *
 * Why a few per seat, not everyone: a returned seat is one seat; telling 10,000 fans about it sends
 * 9,999 to a sold-out map again. Two per seat covers a fan who does not come, and the rest keep
 * their place for the next return.
 *
 * Durability: requests and claims are DynamoDB items (./store.ts). A batch is claimed before its
 * job is added; a job lost (Redis restarted empty, a crash between the two) leaves its requests
 * claimed and due, and the backstop (`redeliverDue`, run with every sweep of the event) adds the
 * batch again under the same id, which the receiver deduplicates on.
 *
 * A return is not written down anywhere for the notifier: the seats come back in the release's or
 * the sweep's own writes and the fans are claimed after them, so a crash between the two, or one
 * claim that throws, would lose the notice for good. An "owed" record beside every release would
 * cost a write unit on every release and expiry of a normal sale, and one more to clear it. The
 * backstop reconciles levels instead (`reconcile`, run with `redeliverDue`): the event's seats and
 * places available in DynamoDB (the section tallies and area counters the console reads) against
 * `announced`, the seats already told to the waiting list (one item per event, ./store.ts
 * `level`); a shortfall is claimed for as a return would be.
 *   - A claim for a return adds its seats to `announced` after it: one UpdateItem, only when it
 *     claimed a fan (a return nobody waits for writes nothing; a sale's hold, confirm and release
 *     write nothing more). A claim cut short adds the seats its fans cover.
 *   - Seats taken since are seen as `announced` above what is available, and lower it, so a later
 *     return shows as a shortfall. Nobody waiting sets it to 0: fans ask only while sold out.
 *   - A shortfall is told only when a check RECONCILE_GRACE_MS later still sees it (the smaller of
 *     the two): a claim in flight (seats back, `announced` not raised yet) looks like a lost one
 *     for a moment, and telling it too would send twice the fans for the same seats.
 *   - The backstop claims under a lease taken by a write conditional on the level's version, so
 *     two gateways' sweeps do not both tell one shortfall; a crash under the lease leaves the
 *     shortfall, told when the lease runs out.
 * Failures lean towards telling: a claim whose `announced` write is lost is told again (to the next
 * fans; each fan is still told once). What a level cannot see: a lost return and as many announced
 * seats taken between two checks; the returned seats then pass for the announced ones. A check
 * reads every section of the event (one Query each), so it runs only while someone waits, at most
 * once per RECONCILE_EVERY_MS per process, and writes only when the level moved.
 */
import { createHmac, randomUUID } from "node:crypto";
import type { HoldService } from "../claims/hold-service.js";
import type { Logger } from "../logger.js";
import type { Metrics } from "../metrics.js";
import type { ClaimedFan, NotifyRequest, NotifyStore, RequestOutcome } from "./store.js";
import { postSeatsBack, type SeatsBackDelivery, type SeatsBackPayload } from "./webhook.js";

export const DEFAULT_FANS_PER_SEAT = 2;
export const DEFAULT_MAX_REQUESTS_PER_EVENT = 10_000;
export const MAX_CONTACT_LENGTH = 256;
/**
 * What a contact may not hold: control characters (C0 with CR, LF and NUL; DEL; C1), the Unicode
 * line and paragraph separators, and lone surrogates. The operator's system turns a contact into a
 * mail address or a push target, often into a header or a line of a protocol, where a CR/LF ends
 * the line and starts one the fan wrote (`Bcc: everyone`). Opaque, but printable.
 */
const CONTACT_REFUSED = /[\p{Cc}\p{Cs}\p{Zl}\p{Zp}]/u;

export function isPrintableContact(contact: string): boolean {
  return !CONTACT_REFUSED.test(contact);
}
/**
 * A claimed batch not acknowledged by then is delivered again by the backstop: past the job's own
 * retries (8 attempts, 1 s doubling: about 4 minutes), so the two do not race while the job lives.
 */
export const REDELIVER_AFTER_MS = 10 * 60_000;
/** The most fans in one POST; a larger return is claimed as several batches. */
export const MAX_FANS_PER_BATCH = 100;
/**
 * A shortfall is told when a check this long after it still sees it: longer than a return's own
 * claims take (a few Queries and a conditional write per fan), shorter than the sweeps' backstop.
 */
export const RECONCILE_GRACE_MS = 60_000;
/** A process checks an event's level at most this often (shard 0's sweeps run every 5 s in a sale). */
export const RECONCILE_EVERY_MS = 60_000;
/** The backstop's claim for a shortfall holds the level this long; a crash under it waits it out. */
export const RECONCILE_LEASE_MS = 5 * 60_000;

export interface NotifyBatch extends SeatsBackPayload {
  batchId: string;
  /** The requests' key hashes, in `fans` order (to mark them notified). */
  fanHashes: string[];
}

/** Where a claimed batch goes to be delivered (the BullMQ queue, src/workers/notify.ts). */
export interface NotifyDispatch {
  /** `attempt`: 0 the first time, then the backstop's re-adds (a job id of their own). */
  add(batch: NotifyBatch, attempt: number): Promise<void>;
}

export interface NotifyOptions {
  store: NotifyStore;
  /** Absent: the feature is off (NOTIFY_WEBHOOK_URL unset). */
  delivery?: SeatsBackDelivery;
  /** Absent (no queues in this process): a batch is posted at once, once; the backstop retries. */
  dispatch?: NotifyDispatch;
  fansPerSeat?: number;
  maxRequestsPerEvent?: number;
  /**
   * The event's seats and places available now, as DynamoDB has them (null: no such event). What
   * the backstop reconciles against; absent, it only redelivers.
   */
  available?: (eventId: string) => Promise<number | null>;
  logger: Logger;
  metrics?: Pick<Metrics, "notify">;
  clock?: () => number;
}

export interface Notifier {
  readonly enabled: boolean;
  readonly limits: { maxRequestsPerEvent: number; maxContactLength: number; fansPerSeat: number };
  request(eventId: string, fanId: string, contact: string): Promise<RequestOutcome>;
  cancel(eventId: string, fanId: string): Promise<boolean>;
  get(eventId: string, fanId: string): Promise<NotifyRequest | null>;
  /**
   * `seats` came back to the event: the next waiting fans are claimed (about fansPerSeat each) and
   * their batches handed to delivery. Resolves with how many fans were claimed. Never throws: the
   * seats are back whatever happens here; a failure is logged.
   */
  seatsReturned(eventId: string, seats: number): Promise<number>;
  /** One delivery attempt of a batch; throws when the receiver did not take it (BullMQ retries). */
  deliver(batch: NotifyBatch): Promise<void>;
  /**
   * The backstop: batches claimed and not acknowledged in time are added again (resolves with how
   * many), then the event's level is reconciled. Never throws for the reconciliation.
   */
  redeliverDue(eventId: string): Promise<number>;
  /**
   * Seats available that the waiting list was not told of (a return whose claim was lost) are told
   * now; see the header. Resolves with how many fans were claimed; throws on a store error.
   */
  reconcile(eventId: string): Promise<number>;
  /** The release path's hook: a hold released gives its seats back (wraps the hold service). */
  wrapHolds(holds: HoldService): HoldService;
}

export function createNotifier(options: NotifyOptions): Notifier {
  const { store, delivery, dispatch, logger } = options;
  const fansPerSeat = options.fansPerSeat ?? DEFAULT_FANS_PER_SEAT;
  const maxRequestsPerEvent = options.maxRequestsPerEvent ?? DEFAULT_MAX_REQUESTS_PER_EVENT;
  const clock = options.clock ?? Date.now;
  const count = (outcome: string, n = 1) => {
    if (n > 0) options.metrics?.notify.inc({ outcome }, n);
  };
  /** When this process last checked each event's level (a throttle; the level itself is durable). */
  const checked = new Map<string, number>();

  const batchOf = (eventId: string, batchId: string, seats: number, at: string, fans: ClaimedFan[]): NotifyBatch => ({
    batchId,
    eventId,
    seatsReturned: seats,
    at,
    fans: fans.map((f) => ({ fanId: f.fanId, contact: f.contact })),
    fanHashes: fans.map((f) => f.fanHash),
  });

  const send = async (batch: NotifyBatch, attempt: number) => {
    if (dispatch) return dispatch.add(batch, attempt);
    // No queue in this process: one attempt now; the backstop tries again when due.
    await notifier.deliver(batch).catch((err: unknown) => {
      logger.warn({ eventId: batch.eventId, batchId: batch.batchId, err: (err as Error).message }, "notify failed");
    });
  };

  const remember = (eventId: string, at: number) => {
    // Events a process has checked; an old sale's entries go once there are many.
    if (checked.size >= 10_000) {
      for (const [id, t] of checked) if (at - t >= RECONCILE_EVERY_MS) checked.delete(id);
    }
    checked.set(eventId, at);
  };

  /** The seats a claim cut short told of: those its fans cover, at fansPerSeat each. */
  const covered = (seats: number, claimed: number) => Math.min(seats, Math.floor(claimed / fansPerSeat));

  /** `seats` more told; a failure is logged (the backstop then tells them again, to other fans). */
  const announce = (eventId: string, seats: number, settle: boolean) =>
    seats > 0 || settle
      ? store.addAnnounced(eventId, seats, settle).catch((err: unknown) => {
          logger.warn({ eventId, seats, err: (err as Error).message }, "notify level write failed");
        })
      : Promise.resolve();

  /**
   * The next waiting fans claimed for `seats` (about fansPerSeat each), batch by batch, each batch
   * handed to delivery; `progress.claimed` counts them as they go. Throws on a store error.
   */
  const claimFor = async (eventId: string, seats: number, progress: { claimed: number }) => {
    let wanted = Math.ceil(seats * fansPerSeat);
    while (wanted > 0) {
      const batchId = `nb_${randomUUID().replaceAll("-", "")}`;
      const now = clock();
      const fans = await store.claim(
        eventId,
        Math.min(wanted, MAX_FANS_PER_BATCH),
        batchId,
        now + REDELIVER_AFTER_MS,
        seats,
      );
      if (fans.length === 0) return;
      progress.claimed += fans.length;
      wanted -= fans.length;
      count("claimed", fans.length);
      await send(batchOf(eventId, batchId, seats, new Date(now).toISOString(), fans), 0);
      if (fans.length < MAX_FANS_PER_BATCH) return;
    }
  };

  const notifier: Notifier = {
    enabled: delivery !== undefined,
    limits: { maxRequestsPerEvent, maxContactLength: MAX_CONTACT_LENGTH, fansPerSeat },

    async request(eventId, fanId, contact) {
      // The HTTP schema refuses these first (400); this keeps any other caller from storing one.
      if (!isPrintableContact(contact)) throw new RangeError("a contact must be printable: no control characters");
      const out = await store.request({ eventId, fanId, contact, maxRequests: maxRequestsPerEvent });
      count(out.ok ? (out.created ? "requested" : "repeated") : out.reason);
      return out;
    },

    async cancel(eventId, fanId) {
      const cancelled = await store.cancel(eventId, fanId);
      if (cancelled) count("cancelled");
      return cancelled;
    },

    get: (eventId, fanId) => store.get(eventId, fanId),

    async seatsReturned(eventId, seats) {
      if (!delivery || seats <= 0) return 0;
      const progress = { claimed: 0 };
      try {
        await claimFor(eventId, seats, progress);
      } catch (err) {
        // Claimed and not handed over: the backstop finds the batch when it is due; not claimed:
        // the backstop's level check finds the seats (see the header).
        logger.warn({ eventId, seats, err: (err as Error).message }, "notify claim failed");
        await announce(eventId, covered(seats, progress.claimed), false);
        return progress.claimed;
      }
      // Nobody claimed: nobody waits, and nobody is owed (the backstop sets the level to 0).
      if (progress.claimed > 0) await announce(eventId, seats, false);
      return progress.claimed;
    },

    async deliver(batch) {
      if (!delivery) return;
      const out = await postSeatsBack(delivery, batch.batchId, {
        eventId: batch.eventId,
        seatsReturned: batch.seatsReturned,
        fans: batch.fans,
        at: batch.at,
      });
      if (!out.ok) {
        count("delivery_failed");
        throw new Error(`notify ${batch.batchId}: ${out.error}`);
      }
      const marked = await Promise.all(batch.fanHashes.map((h) => store.markNotified(batch.eventId, h, batch.batchId)));
      count("notified", marked.filter(Boolean).length);
    },

    async redeliverDue(eventId) {
      if (!delivery) return 0;
      const due = await store.dueBatches(eventId);
      for (const b of due) {
        const next = clock() + REDELIVER_AFTER_MS;
        // Deferred first: a second backstop run meanwhile does not add it again.
        await store.deferBatch(eventId, b.fans, b.batchId, next);
        count("redelivered", b.fans.length);
        await send(batchOf(eventId, b.batchId, b.seatsReturned, b.claimedAt, b.fans), next);
      }
      await notifier.reconcile(eventId).catch((err: unknown) => {
        logger.warn({ eventId, err: (err as Error).message }, "notify reconcile failed");
      });
      return due.length;
    },

    async reconcile(eventId) {
      if (!delivery || !options.available) return 0;
      const now = clock();
      if (now - (checked.get(eventId) ?? Number.NEGATIVE_INFINITY) < RECONCILE_EVERY_MS) return 0;
      remember(eventId, now);
      const { waiting, level } = await store.noticeState(eventId);
      if (level.leaseUntil !== undefined && level.leaseUntil > now) return 0;
      if (waiting <= 0) {
        // Nobody to tell, so nobody is owed; a fan who asks from now on asks of a sold-out event.
        if (level.announced !== 0 || level.owed) await store.setLevel(eventId, level.version, { announced: 0 });
        return 0;
      }
      const available = await options.available(eventId);
      if (available === null) return 0;
      const shortfall = available - level.announced;
      if (shortfall <= 0) {
        // Announced seats were taken (or a claim in flight is now counted): the level follows.
        if (shortfall < 0 || level.owed) await store.setLevel(eventId, level.version, { announced: available });
        return 0;
      }
      if (!level.owed) {
        await store.setLevel(eventId, level.version, {
          announced: level.announced,
          owed: { seats: shortfall, at: now },
        });
        return 0;
      }
      if (now - level.owed.at < RECONCILE_GRACE_MS) return 0;
      // Seen twice, a grace apart: no claim in flight explains it. The smaller of the two, since
      // a return in flight now may stand in the second.
      const seats = Math.min(shortfall, level.owed.seats);
      const leased = await store.setLevel(eventId, level.version, {
        announced: level.announced,
        owed: level.owed,
        leaseUntil: now + RECONCILE_LEASE_MS,
      });
      if (!leased) return 0;
      const progress = { claimed: 0 };
      try {
        await claimFor(eventId, seats, progress);
      } catch (err) {
        // The covered part is told; the rest is a shortfall again, for the next check.
        await announce(eventId, covered(seats, progress.claimed), true);
        throw err;
      }
      count("reconciled", progress.claimed);
      logger.info({ eventId, seats, fans: progress.claimed }, "notify: seats back that nobody was told of");
      await store.addAnnounced(eventId, seats, true);
      return progress.claimed;
    },

    wrapHolds(holds) {
      return {
        ...holds,
        async release(request) {
          const result = await holds.release(request);
          // Seats and general-admission places alike: a fan told "seats are back" may want either.
          const returned = result.ok ? result.releasedSeats.length + result.placesReturned : 0;
          if (returned > 0) void notifier.seatsReturned(request.eventId, returned);
          return result;
        },
      };
    },
  };
  return notifier;
}

/** NOTIFY_WEBHOOK_SECRET's default: derived from the gateway secret, apart from the payment one. */
export function derivedNotifySecret(gatewaySecret: string): string {
  return createHmac("sha256", gatewaySecret).update("notify-webhook").digest("base64url");
}
