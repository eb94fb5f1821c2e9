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
  /** The backstop: batches claimed and not acknowledged in time are added again. */
  redeliverDue(eventId: string): Promise<number>;
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
      let wanted = Math.ceil(seats * fansPerSeat);
      let claimed = 0;
      try {
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
          if (fans.length === 0) break;
          claimed += fans.length;
          wanted -= fans.length;
          count("claimed", fans.length);
          await send(batchOf(eventId, batchId, seats, new Date(now).toISOString(), fans), 0);
          if (fans.length < MAX_FANS_PER_BATCH) break;
        }
      } catch (err) {
        // Claimed and not handed over: the backstop finds the batch when it is due.
        logger.warn({ eventId, seats, err: (err as Error).message }, "notify claim failed");
      }
      return claimed;
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
      return due.length;
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
