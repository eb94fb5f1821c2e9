/**
 * Payment webhooks: what the provider posts to `POST /v1/payments/webhook`, and how the gateway
 * knows the provider sent it.
 *
 * The signature header is Stripe's scheme: `t=<unix seconds>,v1=<hex HMAC-SHA256>`, where the MAC
 * covers `<t>.<raw body>`. Binding the timestamp into the MAC lets the receiver refuse a replay of
 * an old, genuine event; the raw body (not a re-serialised parse) is what was signed, so the route
 * must hand over the bytes it received. Several `v1=` entries may appear while a secret is being
 * rotated; any one matching is enough.
 */
import { createHmac, timingSafeEqual } from "node:crypto";
import { z } from "zod";

/** The request header that carries the signature. */
export const WEBHOOK_SIGNATURE_HEADER = "Payment-Signature";

/** Five minutes, as Stripe: wide enough for clock skew and a retry, narrow enough to stop replays. */
export const DEFAULT_WEBHOOK_TOLERANCE_SECONDS = 300;

export const webhookEventTypes = ["charge.succeeded", "charge.failed", "charge.refunded"] as const;

export const webhookEventSchema = z.object({
  /** Unique per event: the receiver deduplicates on it, since a webhook may arrive twice. */
  id: z.string().min(1).max(128),
  type: z.enum(webhookEventTypes),
  data: z.object({
    /** The key the charge was made under: how the receiver finds its purchase. */
    idempotencyKey: z.string().min(1).max(255),
    chargeId: z.string().min(1).max(128).optional(),
    amount: z.number().int().nonnegative().optional(),
    /** Why a charge failed (charge.failed only). */
    reason: z.string().max(128).optional(),
  }),
});

export type WebhookEvent = z.infer<typeof webhookEventSchema>;
export type WebhookEventType = (typeof webhookEventTypes)[number];

export type WebhookVerification =
  | { ok: true; timestamp: number }
  | {
      ok: false;
      /**
       * malformed_header: missing, unparsable, or without a `t` and a `v1`;
       * bad_signature: no `v1` matches (tampered body, wrong secret, forged);
       * stale_timestamp: genuine, but signed further from `now` than the tolerance (a replay).
       */
      reason: "malformed_header" | "bad_signature" | "stale_timestamp";
    };

export type WebhookReading =
  | { ok: true; event: WebhookEvent; timestamp: number }
  | { ok: false; reason: Extract<WebhookVerification, { ok: false }>["reason"] | "invalid_body" };

type Body = string | Uint8Array;

const MAX_HEADER_LENGTH = 1024;

function mac(secret: string, body: Body, timestamp: number): Buffer {
  return createHmac("sha256", secret).update(`${timestamp}.`).update(body).digest();
}

function nowSeconds(): number {
  return Math.floor(Date.now() / 1000);
}

/** The header value for `body` signed at `timestamp` (unix seconds). */
export function signWebhook(secret: string, body: Body, timestamp: number = nowSeconds()): string {
  if (secret.length === 0) throw new RangeError("webhook secret must not be empty");
  if (!Number.isSafeInteger(timestamp) || timestamp < 0) {
    throw new RangeError(`timestamp must be whole unix seconds, got ${timestamp}`);
  }
  return `t=${timestamp},v1=${mac(secret, body, timestamp).toString("hex")}`;
}

function parseHeader(header: string): { timestamp: number; signatures: Buffer[] } | null {
  if (header.length > MAX_HEADER_LENGTH) return null;
  let timestamp: number | undefined;
  const signatures: Buffer[] = [];
  for (const part of header.split(",")) {
    const eq = part.indexOf("=");
    if (eq === -1) return null;
    const key = part.slice(0, eq).trim();
    const value = part.slice(eq + 1).trim();
    if (key === "t") {
      if (timestamp !== undefined || !/^\d{1,12}$/.test(value)) return null;
      timestamp = Number(value);
    } else if (key === "v1") {
      if (!/^[0-9a-fA-F]{64}$/.test(value)) return null;
      signatures.push(Buffer.from(value, "hex"));
    }
    // Other schemes (v0, a future v2) are ignored, as Stripe's receivers do.
  }
  if (timestamp === undefined || signatures.length === 0) return null;
  return { timestamp, signatures };
}

/**
 * Checks a signature header against the raw body. `secret` may list the current and the previous
 * secret during a rotation. `now` is unix seconds. The MAC is compared in constant time; the
 * signature is checked before the timestamp so that `stale_timestamp` only ever names a genuine event.
 */
export function verifyWebhook(
  secret: string | readonly string[],
  rawBody: Body,
  header: string | null | undefined,
  toleranceSeconds: number = DEFAULT_WEBHOOK_TOLERANCE_SECONDS,
  now: number = nowSeconds(),
): WebhookVerification {
  if (!header) return { ok: false, reason: "malformed_header" };
  const parsed = parseHeader(header);
  if (!parsed) return { ok: false, reason: "malformed_header" };

  const secrets = typeof secret === "string" ? [secret] : secret;
  let matched = false;
  for (const s of secrets) {
    if (s.length === 0) continue;
    const expected = mac(s, rawBody, parsed.timestamp);
    // Every candidate is compared (no early exit), each in constant time; lengths are equal by parse.
    for (const candidate of parsed.signatures) {
      if (timingSafeEqual(expected, candidate)) matched = true;
    }
  }
  if (!matched) return { ok: false, reason: "bad_signature" };
  if (Math.abs(now - parsed.timestamp) > toleranceSeconds) return { ok: false, reason: "stale_timestamp" };
  return { ok: true, timestamp: parsed.timestamp };
}

/** verifyWebhook, then the body parsed against the schema: what the webhook route needs. */
export function readWebhook(
  secret: string | readonly string[],
  rawBody: Body,
  header: string | null | undefined,
  toleranceSeconds: number = DEFAULT_WEBHOOK_TOLERANCE_SECONDS,
  now: number = nowSeconds(),
): WebhookReading {
  const verified = verifyWebhook(secret, rawBody, header, toleranceSeconds, now);
  if (!verified.ok) return verified;
  let json: unknown;
  try {
    json = JSON.parse(typeof rawBody === "string" ? rawBody : Buffer.from(rawBody).toString("utf8"));
  } catch {
    return { ok: false, reason: "invalid_body" };
  }
  const event = webhookEventSchema.safeParse(json);
  if (!event.success) return { ok: false, reason: "invalid_body" };
  return { ok: true, event: event.data, timestamp: verified.timestamp };
}

/** The body and header a provider sends for `event`: for the simulated provider's delivery. */
export function signWebhookEvent(
  secret: string,
  event: WebhookEvent,
  timestamp: number = nowSeconds(),
): { body: string; signature: string } {
  const body = JSON.stringify(event);
  return { body, signature: signWebhook(secret, body, timestamp) };
}
