/**
 * The payment provider port. Payment is an external system: slow, sometimes down, and sometimes
 * ambiguous. Every answer is a value (a discriminated union), never an exception, so the purchase
 * saga has to name what it does for each case, including the one where nobody knows.
 *
 * An adapter turns its SDK's or HTTP client's failures into these outcomes; no SDK type leaks
 * past it. The simulated provider (simulated.ts) is one adapter; a real card processor is another.
 */

export type ChargeOutcome =
  /** The money was taken. `chargeId` is what refund and reconciliation name. */
  | { kind: "charged"; chargeId: string; amount: number }
  /** The provider refused (card declined, unknown token). Final for this idempotency key. */
  | { kind: "declined"; reason: string }
  /**
   * Nobody knows: the request may or may not have charged (a timeout, a connection reset after
   * sending). Never treat this as a failure and never retry blindly with a new key: ask `lookup`
   * with the same key, or wait for the webhook, before deciding.
   */
  | { kind: "unknown" }
  /**
   * The provider answered that this call failed, or the call never left. It says nothing about
   * an earlier call under the same key, and a provider's 5xx can come after the capture: the saga
   * believes "nothing charged" only once `lookup` says so for the key.
   */
  | { kind: "error"; code: ChargeErrorCode; message: string };

export type ChargeErrorCode =
  /** The provider answered an error; a retry with the same key may succeed. */
  | "provider_error"
  /** The request never left (connection refused, no connection): this call charged nothing. */
  | "unreachable"
  /** The key was first used with another amount or payment token; nothing more was charged. */
  | "idempotency_mismatch"
  /** The request itself was invalid (amount, key); nothing was sent. */
  | "invalid_request";

export type LookupOutcome =
  | { kind: "charged"; chargeId: string; amount: number; refunded: boolean }
  /** The provider never charged under this key (never seen, or it failed before charging). */
  | { kind: "not_found" }
  | { kind: "declined"; reason: string }
  /** The lookup itself failed; it says nothing about the charge. Ask again. */
  | { kind: "error"; message: string };

export type RefundOutcome =
  /** Refunded, now or before: a repeated refund of one charge returns the first refundId. */
  | { kind: "refunded"; refundId: string }
  /** Not refunded (unknown charge, provider down). Refund is idempotent per charge: retry. */
  | { kind: "error"; message: string };

export interface PaymentProvider {
  /**
   * Charges `amount` (minor units) once per `idempotencyKey`. Every repeat with the same key,
   * concurrent or later, returns the outcome of the first call and charges nothing more.
   */
  charge(idempotencyKey: string, amount: number, paymentToken: string): Promise<ChargeOutcome>;
  /** What happened to the charge made under `idempotencyKey`; the way out of `unknown`. */
  lookup(idempotencyKey: string): Promise<LookupOutcome>;
  /** Refunds the whole charge (the saga's compensation). Idempotent per charge. */
  refund(chargeId: string, idempotencyKey?: string): Promise<RefundOutcome>;
}

/** What a wrapped provider answered after the caller had already been told `unknown`. */
export type LateCharge = ChargeOutcome | { kind: "threw"; error: unknown };

export interface TimeoutHooks {
  /** For logs and metrics: a charge that outlived the timeout has now settled. */
  onLateCharge?(idempotencyKey: string, late: LateCharge): void;
}

type Answered<T> = { state: "done"; value: T } | { state: "threw"; error: unknown };
type Settled<T> = Answered<T> | { state: "timeout" };

/** The call's settlement or the timeout, whichever comes first, and the call itself, still running. */
async function settleWithin<T>(work: () => Promise<T>, timeoutMs: number): Promise<[Settled<T>, Promise<Answered<T>>]> {
  // An async wrapper turns a synchronous throw inside `work` into a rejection like any other.
  const pending = (async () => work())().then(
    (value): Answered<T> => ({ state: "done", value }),
    (error: unknown): Answered<T> => ({ state: "threw", error }),
  );
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<Settled<T>>((resolve) => {
    timer = setTimeout(() => resolve({ state: "timeout" }), timeoutMs);
  });
  try {
    return [await Promise.race([pending, timeout]), pending];
  } finally {
    clearTimeout(timer);
  }
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/**
 * Bounds every call by `timeoutMs` (the gateway's PAYMENT_TIMEOUT_MS) and turns exceptions into
 * outcomes.
 *
 * charge: past the timeout the caller gets `unknown`, and the call is *not* cancelled: the
 * provider may still charge, and that is exactly the ambiguity the saga resolves through `lookup`
 * or the webhook. An exception also becomes `unknown`, not `error`: once a request may have left
 * the process (a reset socket, a parse failure of the reply), the gateway cannot know whether the
 * provider charged, and reporting `error` would invite a retry under a new key, a double charge.
 * Only an adapter that knows nothing was charged returns `error` itself; that passes through.
 *
 * lookup and refund: a timeout or an exception becomes `error`. Neither is ambiguous in a way
 * that costs money: lookup only reads, and refund is idempotent per charge, so asking again is
 * always safe.
 */
export function withTimeout(provider: PaymentProvider, timeoutMs: number, hooks: TimeoutHooks = {}): PaymentProvider {
  if (!Number.isFinite(timeoutMs) || timeoutMs <= 0) throw new RangeError(`timeoutMs must be > 0, got ${timeoutMs}`);

  return {
    async charge(idempotencyKey, amount, paymentToken) {
      const [settled, pending] = await settleWithin(
        () => provider.charge(idempotencyKey, amount, paymentToken),
        timeoutMs,
      );
      if (settled.state === "done") return settled.value;
      if (settled.state === "timeout" && hooks.onLateCharge) {
        const report = hooks.onLateCharge.bind(hooks);
        void pending.then((late) => {
          try {
            report(idempotencyKey, late.state === "done" ? late.value : { kind: "threw", error: late.error });
          } catch {
            // A failing hook must not become an unhandled rejection; it only ever logs.
          }
        });
      }
      return { kind: "unknown" };
    },

    async lookup(idempotencyKey) {
      const [settled] = await settleWithin(() => provider.lookup(idempotencyKey), timeoutMs);
      if (settled.state === "done") return settled.value;
      return {
        kind: "error",
        message: settled.state === "timeout" ? `lookup timed out after ${timeoutMs} ms` : messageOf(settled.error),
      };
    },

    async refund(chargeId, idempotencyKey) {
      const [settled] = await settleWithin(() => provider.refund(chargeId, idempotencyKey), timeoutMs);
      if (settled.state === "done") return settled.value;
      return {
        kind: "error",
        message: settled.state === "timeout" ? `refund timed out after ${timeoutMs} ms` : messageOf(settled.error),
      };
    },
  };
}
