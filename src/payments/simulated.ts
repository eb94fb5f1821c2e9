/**
 * The built-in simulated payment provider. Its state lives in Redis, so it outlives a gateway
 * restart and every gateway instance sees the same charges, as they would at a real processor.
 * The payment token picks the behaviour:
 *
 *   tok_ok       charges
 *   tok_decline  declines (reason card_declined); lookup says declined
 *   tok_timeout  charges at once, but answers only after `timeoutDelayMs`, longer than the
 *                gateway's PAYMENT_TIMEOUT_MS: the caller sees `unknown`, lookup finds it charged
 *   tok_error    fails with a provider error; nothing charged, nothing recorded
 *   tok_error_after_charge
 *                charges, then answers a provider error (a 5xx after capture): the caller is
 *                told `error`, yet lookup finds the charge. Every call with it answers so.
 *   anything else declines with reason unknown_token
 *
 * One idempotency key, one decision: payment-charge-4.lua records the first call's outcome under
 * the key atomically and replays it for every later call; a repeat with another amount or token
 * is an `idempotency_mismatch` error and charges nothing. Keys are `pay:{<namespace>}:...`, one
 * hash tag for all of them, every one passed in KEYS.
 */
import { setTimeout as sleep } from "node:timers/promises";
import { createHash, randomBytes } from "node:crypto";
import type { Logger } from "../logger.js";
import { neverSent, redisReady, trackRedis } from "../redis/availability.js";
import { registerScripts, type RedisClient } from "../redis/scripts.js";
import { PAYMENT_CODES, type PaymentCode, paymentScripts } from "./codes.js";
import type { ChargeOutcome, LookupOutcome, PaymentProvider, RefundOutcome } from "./provider.js";
import type { WebhookEvent } from "./webhook.js";

export const simulatedTokens = {
  ok: "tok_ok",
  decline: "tok_decline",
  timeout: "tok_timeout",
  error: "tok_error",
  errorAfterCharge: "tok_error_after_charge",
} as const;

export interface SimulatedProviderOptions {
  redis: RedisClient;
  /** The hash tag of every key, `pay:{<namespace>}:...`; tests use their own. Default `sim`. */
  namespace?: string;
  /** How long a tok_timeout charge takes to answer; keep it above PAYMENT_TIMEOUT_MS. Default 10 s. */
  timeoutDelayMs?: number;
  /**
   * Receives each webhook event once, after the charge is decided (tok_timeout: after the delay).
   * Never awaited by the charge; a throw or rejection is logged and dropped, as a real provider's
   * failed delivery would be from the caller's point of view.
   */
  onEvent?: (event: WebhookEvent) => void | Promise<void>;
  logger?: Logger;
}

export interface ChargeRecord {
  chargeId: string;
  idempotencyKey: string;
  amount: number;
  createdAt: string;
  refunded: boolean;
  refundId?: string;
  refundedAt?: string;
}

export interface PaymentTotals {
  /** Sum of all amounts charged, in minor units (refunds not deducted). */
  captured: number;
  /** Sum of all amounts refunded. */
  refunded: number;
  charges: number;
  refunds: number;
  declines: number;
  /** Provider errors answered (tok_error), each a call that charged nothing. */
  errors: number;
}

export interface SimulatedPaymentProvider extends PaymentProvider {
  getCharge(chargeId: string): Promise<ChargeRecord | null>;
  /** Every charge in creation order. For tests and audits: it reads the whole list. */
  listCharges(): Promise<ChargeRecord[]>;
  totals(): Promise<PaymentTotals>;
}

export function simulatedPaymentKeys(namespace: string) {
  const base = `pay:{${namespace}}`;
  return {
    idem: (idempotencyKey: string) => `${base}:idem:${idempotencyKey}`,
    charge: (chargeId: string) => `${base}:charge:${chargeId}`,
    charges: `${base}:charges`,
    totals: `${base}:totals`,
  };
}

type Disposition = { action: "charge" | "error" } | { action: "decline"; reason: string };

function dispositionOf(paymentToken: string): Disposition {
  switch (paymentToken) {
    case simulatedTokens.ok:
    case simulatedTokens.timeout:
    case simulatedTokens.errorAfterCharge:
      return { action: "charge" };
    case simulatedTokens.decline:
      return { action: "decline", reason: "card_declined" };
    case simulatedTokens.error:
      return { action: "error" };
    default:
      return { action: "decline", reason: "unknown_token" };
  }
}

/** Replays compare tokens by fingerprint: the simulator never stores a payment token. */
function fingerprint(paymentToken: string): string {
  return createHash("sha256").update(paymentToken).digest("hex");
}

function newId(prefix: string): string {
  return `${prefix}_${randomBytes(12).toString("base64url")}`;
}

// Unreferenced: a pending slow answer must not hold a shutting-down process open.
const delay = (ms: number): Promise<void> => sleep(ms, undefined, { ref: false });

function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

const MAX_KEY_LENGTH = 255;

/** The reply's code as named in the family's table; undefined for a code it does not know. */
function outcomeOf(code: number): PaymentCode | undefined {
  return PAYMENT_CODES.codes[code];
}

/** [code, value, amount, created], see lua/payment-charge-4.lua. */
type ChargeReply = [number, string, number, number];
/** [code, refundId, amount, created, idempotencyKey], see lua/payment-refund-2.lua. */
type RefundReply = [number, string?, number?, number?, string?];

export function createSimulatedProvider(options: SimulatedProviderOptions): SimulatedPaymentProvider {
  const { redis, onEvent, logger } = options;
  const namespace = options.namespace ?? "sim";
  const timeoutDelayMs = options.timeoutDelayMs ?? 10_000;
  if (!/^[A-Za-z0-9_.:-]{1,64}$/.test(namespace)) throw new RangeError(`bad payment namespace ${namespace}`);
  if (!Number.isFinite(timeoutDelayMs) || timeoutDelayMs < 0) throw new RangeError("timeoutDelayMs must be >= 0");

  const keys = simulatedPaymentKeys(namespace);
  const run = registerScripts(redis, paymentScripts);
  trackRedis(redis);

  function emit(event: WebhookEvent): void {
    if (!onEvent) return;
    // Delivered on a later turn, never inside the charge's own promise chain: a webhook is a
    // separate request, and the receiver must cope with it arriving before or after the answer.
    setImmediate(() => {
      Promise.resolve()
        .then(() => onEvent(event))
        .catch((err: unknown) =>
          logger?.warn({ err, eventId: event.id, type: event.type }, "payment webhook delivery failed"),
        );
    });
  }

  async function decide(idempotencyKey: string, amount: number, paymentToken: string): Promise<ChargeOutcome> {
    const disposition = dispositionOf(paymentToken);
    const chargeId = newId("ch");
    let reply: ChargeReply;
    try {
      reply = await run<ChargeReply>(
        "charge",
        [keys.idem(idempotencyKey), keys.charge(chargeId), keys.charges, keys.totals],
        [
          chargeId,
          amount,
          fingerprint(paymentToken),
          disposition.action,
          disposition.action === "decline" ? disposition.reason : "",
          idempotencyKey,
        ],
      );
    } catch (err) {
      // Refused before it was sent (Redis not connected): nothing was charged, say so.
      if (neverSent(err)) return unreachable();
      // The script may have run before the connection failed: nobody knows whether it charged.
      logger?.warn({ err, idempotencyKey }, "simulated payment charge: redis failed");
      return { kind: "unknown" };
    }
    const [code, value, recorded, created] = reply;
    switch (outcomeOf(code)) {
      case "charged":
        if (created === 1) {
          const succeeded = eventOf("charge.succeeded", { idempotencyKey, chargeId: value, amount: recorded });
          if (paymentToken === simulatedTokens.timeout) void delay(timeoutDelayMs).then(() => emit(succeeded));
          else emit(succeeded);
        }
        return { kind: "charged", chargeId: value, amount: recorded };
      case "declined":
        if (created === 1) emit(eventOf("charge.failed", { idempotencyKey, amount: recorded, reason: value }));
        return { kind: "declined", reason: value };
      case "provider_error":
        return { kind: "error", code: "provider_error", message: "simulated provider error (tok_error)" };
      case "idempotency_mismatch":
        return {
          kind: "error",
          code: "idempotency_mismatch",
          message: `idempotency key reused with a different ${value}; nothing charged`,
        };
      default:
        // charge_id_taken; or a code this table does not know, which charged nothing either
        return {
          kind: "error",
          code: "provider_error",
          message: `charge id collision (code ${code}); nothing charged`,
        };
    }
  }

  function unreachable(): ChargeOutcome {
    return { kind: "error", code: "unreachable", message: "the payment provider is unreachable; nothing charged" };
  }

  function eventOf(type: WebhookEvent["type"], data: WebhookEvent["data"]): WebhookEvent {
    return { id: newId("evt"), type, data };
  }

  function toRecord(chargeId: string, raw: Record<string, string>): ChargeRecord | null {
    if (raw.amount === undefined || raw.key === undefined) return null;
    return {
      chargeId,
      idempotencyKey: raw.key,
      amount: Number(raw.amount),
      createdAt: new Date(Number(raw.at)).toISOString(),
      refunded: raw.refundId !== undefined,
      ...(raw.refundId === undefined ? {} : { refundId: raw.refundId }),
      ...(raw.refundedAt === undefined ? {} : { refundedAt: new Date(Number(raw.refundedAt)).toISOString() }),
    };
  }

  return {
    async charge(idempotencyKey, amount, paymentToken) {
      if (idempotencyKey.length === 0 || idempotencyKey.length > MAX_KEY_LENGTH) {
        return {
          kind: "error",
          code: "invalid_request",
          message: `idempotency key must be 1..${MAX_KEY_LENGTH} chars`,
        };
      }
      if (!Number.isSafeInteger(amount) || amount <= 0) {
        return { kind: "error", code: "invalid_request", message: "amount must be a positive integer of minor units" };
      }
      // The provider's store is not reachable: the request never leaves, nothing is charged. (A
      // real provider would be reached over HTTP; a refused connection means the same.)
      if (!redisReady(redis)) return unreachable();
      const outcome = await decide(idempotencyKey, amount, paymentToken);
      // The slow token is slow on every call, a replay too: the caller always meets its timeout.
      if (paymentToken === simulatedTokens.timeout) await delay(timeoutDelayMs);
      // A 5xx after capture, on every call: only a lookup tells the caller the money was taken.
      if (paymentToken === simulatedTokens.errorAfterCharge && outcome.kind === "charged") {
        return { kind: "error", code: "provider_error", message: "simulated provider error after capture" };
      }
      return outcome;
    },

    async lookup(idempotencyKey): Promise<LookupOutcome> {
      if (!redisReady(redis)) return { kind: "error", message: "the payment provider is unreachable" };
      try {
        const [outcome, chargeId, amount, reason] = await redis.hmget(
          keys.idem(idempotencyKey),
          "outcome",
          "chargeId",
          "amount",
          "reason",
        );
        if (outcome === "declined") return { kind: "declined", reason: reason ?? "" };
        if (outcome !== "charged" || !chargeId) return { kind: "not_found" };
        const refundId = await redis.hget(keys.charge(chargeId), "refundId");
        return { kind: "charged", chargeId, amount: Number(amount), refunded: refundId !== null };
      } catch (err) {
        return { kind: "error", message: messageOf(err) };
      }
    },

    async refund(chargeId, idempotencyKey): Promise<RefundOutcome> {
      if (!redisReady(redis)) return { kind: "error", message: "the payment provider is unreachable" };
      let reply: RefundReply;
      try {
        reply = await run<RefundReply>(
          "refund",
          [keys.charge(chargeId), keys.totals],
          [newId("re"), idempotencyKey ?? ""],
        );
      } catch (err) {
        // Safe to report as not refunded: a retry of the same charge's refund cannot refund twice.
        return { kind: "error", message: messageOf(err) };
      }
      const [code, refundId, amount, created, chargeKey] = reply;
      if (outcomeOf(code) !== "refunded" || refundId === undefined) {
        return { kind: "error", message: `no charge ${chargeId}` };
      }
      if (created === 1 && chargeKey !== undefined) {
        emit(
          eventOf("charge.refunded", {
            idempotencyKey: chargeKey,
            chargeId,
            ...(amount === undefined ? {} : { amount }),
          }),
        );
      }
      return { kind: "refunded", refundId };
    },

    async getCharge(chargeId) {
      return toRecord(chargeId, await redis.hgetall(keys.charge(chargeId)));
    },

    async listCharges() {
      const ids = await redis.lrange(keys.charges, 0, -1);
      const records: ChargeRecord[] = [];
      // Batched so a load test's thousands of charges do not become one giant pipeline.
      for (let i = 0; i < ids.length; i += 500) {
        const batch = ids.slice(i, i + 500);
        const pipeline = redis.pipeline();
        for (const id of batch) pipeline.hgetall(keys.charge(id));
        const results = (await pipeline.exec()) ?? [];
        batch.forEach((id, j) => {
          const [err, raw] = results[j] ?? [null, {}];
          if (err) throw err;
          const record = toRecord(id, raw as Record<string, string>);
          if (record) records.push(record);
        });
      }
      return records;
    },

    async totals() {
      const raw = await redis.hgetall(keys.totals);
      const n = (field: string) => Number(raw[field] ?? 0);
      return {
        captured: n("captured"),
        refunded: n("refunded"),
        charges: n("charges"),
        refunds: n("refunds"),
        declines: n("declines"),
        errors: n("errors"),
      };
    },
  };
}
