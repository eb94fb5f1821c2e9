/**
 * The seats-back webhook the operator wires to mail or push: one signed POST per batch of fans.
 *
 * Signed as payment webhooks are (src/payments/webhook.ts, Stripe's scheme): `Onsale-Signature:
 * t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<raw body>">`, so a receiver checks it with the
 * same few lines. `Idempotency-Key` is the batch id: a retry (BullMQ's backoff, or the backstop
 * after a lost job) carries the same key, so the receiver sends each fan one mail however many
 * times the batch arrives.
 */
import { signWebhook } from "../payments/webhook.js";

export const NOTIFY_SIGNATURE_HEADER = "Onsale-Signature";
export const NOTIFY_IDEMPOTENCY_HEADER = "Idempotency-Key";

export interface SeatsBackPayload {
  eventId: string;
  /** Seats and standing places that came back in the return that triggered this batch. */
  seatsReturned: number;
  /** In the order they asked. */
  fans: Array<{ fanId: string; contact: string }>;
  /** When the batch was claimed (ISO): the same on every retry. */
  at: string;
}

export interface SeatsBackDelivery {
  url: string;
  secret: string;
  /** Per attempt; a slower receiver counts as failed and gets the retry. */
  timeoutMs?: number;
}

export type DeliveryOutcome = { ok: true; status: number } | { ok: false; status?: number; error: string };

/** One POST of one batch. Never throws: the caller decides on retries. */
export async function postSeatsBack(
  delivery: SeatsBackDelivery,
  batchId: string,
  payload: SeatsBackPayload,
): Promise<DeliveryOutcome> {
  const body = JSON.stringify(payload);
  try {
    const res = await fetch(delivery.url, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        [NOTIFY_SIGNATURE_HEADER]: signWebhook(delivery.secret, body),
        [NOTIFY_IDEMPOTENCY_HEADER]: batchId,
      },
      body,
      signal: AbortSignal.timeout(delivery.timeoutMs ?? 10_000),
    });
    // The body is not ours to read; drained so the connection is reused.
    await res.arrayBuffer().catch(() => undefined);
    if (res.status >= 200 && res.status < 300) return { ok: true, status: res.status };
    return { ok: false, status: res.status, error: `receiver answered ${res.status}` };
  } catch (err) {
    return { ok: false, error: (err as Error).message };
  }
}
