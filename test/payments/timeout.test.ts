import { describe, expect, it } from "vitest";
import { type ChargeOutcome, type LateCharge, type PaymentProvider, withTimeout } from "../../src/payments/provider.js";

// withTimeout against hand-made providers: no I/O. The timeouts are short and real, since the
// timeout is the behaviour under test; everything else is awaited, never slept for.

function deferred<T>() {
  let resolve!: (value: T) => void;
  let reject!: (err: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

function fake(overrides: Partial<PaymentProvider>): PaymentProvider {
  return {
    charge: async () => ({ kind: "charged", chargeId: "ch_fast", amount: 100 }),
    lookup: async () => ({ kind: "not_found" }),
    refund: async () => ({ kind: "refunded", refundId: "re_1" }),
    ...overrides,
  };
}

function lateSink() {
  const got = deferred<[string, LateCharge]>();
  return { hooks: { onLateCharge: (key: string, late: LateCharge) => got.resolve([key, late]) }, late: got.promise };
}

describe("withTimeout", () => {
  it("passes through every outcome that arrives in time", async () => {
    const outcomes: ChargeOutcome[] = [
      { kind: "charged", chargeId: "ch_1", amount: 100 },
      { kind: "declined", reason: "card_declined" },
      { kind: "error", code: "provider_error", message: "down" },
      { kind: "unknown" },
    ];
    for (const outcome of outcomes) {
      const wrapped = withTimeout(fake({ charge: async () => outcome }), 1_000);
      expect(await wrapped.charge("k", 100, "tok")).toEqual(outcome);
    }
    const wrapped = withTimeout(fake({}), 1_000);
    expect(await wrapped.lookup("k")).toEqual({ kind: "not_found" });
    expect(await wrapped.refund("ch_1")).toEqual({ kind: "refunded", refundId: "re_1" });
  });

  it("answers unknown when the charge outlives the timeout, and lets the charge go on", async () => {
    const slow = deferred<ChargeOutcome>();
    let calls = 0;
    const { hooks, late } = lateSink();
    const wrapped = withTimeout(
      fake({
        charge: () => {
          calls++;
          return slow.promise;
        },
      }),
      20,
      hooks,
    );
    expect(await wrapped.charge("key-1", 500, "tok_ok")).toEqual({ kind: "unknown" });
    // The provider finishes after the caller gave up: the charge happened, and the hook hears of it.
    slow.resolve({ kind: "charged", chargeId: "ch_late", amount: 500 });
    expect(await late).toEqual(["key-1", { kind: "charged", chargeId: "ch_late", amount: 500 }]);
    expect(calls).toBe(1);
  });

  it("answers unknown when the provider throws, synchronously or not: a sent request is ambiguous", async () => {
    const sync = withTimeout(
      fake({
        charge: () => {
          throw new Error("socket hang up");
        },
      }),
      1_000,
    );
    expect(await sync.charge("k", 100, "tok_ok")).toEqual({ kind: "unknown" });
    const async = withTimeout(fake({ charge: () => Promise.reject(new Error("ECONNRESET")) }), 1_000);
    expect(await async.charge("k", 100, "tok_ok")).toEqual({ kind: "unknown" });
  });

  it("reports a charge that throws after the timeout to the hook, not as an unhandled rejection", async () => {
    const slow = deferred<ChargeOutcome>();
    const { hooks, late } = lateSink();
    const wrapped = withTimeout(fake({ charge: () => slow.promise }), 20, hooks);
    expect(await wrapped.charge("key-2", 100, "tok_ok")).toEqual({ kind: "unknown" });
    const boom = new Error("late failure");
    slow.reject(boom);
    expect(await late).toEqual(["key-2", { kind: "threw", error: boom }]);
  });

  it("survives a late charge with no hook, or a hook that throws", async () => {
    const slow = deferred<ChargeOutcome>();
    const noHook = withTimeout(fake({ charge: () => slow.promise }), 20);
    expect(await noHook.charge("k", 100, "tok")).toEqual({ kind: "unknown" });
    slow.reject(new Error("nobody listens"));

    const slow2 = deferred<ChargeOutcome>();
    const called = deferred<void>();
    const throwing = withTimeout(fake({ charge: () => slow2.promise }), 20, {
      onLateCharge: () => {
        called.resolve();
        throw new Error("hook bug");
      },
    });
    expect(await throwing.charge("k", 100, "tok")).toEqual({ kind: "unknown" });
    slow2.resolve({ kind: "charged", chargeId: "ch", amount: 100 });
    await called.promise;
  });

  it("turns a slow or failing lookup or refund into error: both are safe to ask again", async () => {
    const never = new Promise<never>(() => {});
    const slow = withTimeout(fake({ lookup: () => never, refund: () => never }), 20);
    expect(await slow.lookup("k")).toEqual({ kind: "error", message: "lookup timed out after 20 ms" });
    expect(await slow.refund("ch")).toEqual({ kind: "error", message: "refund timed out after 20 ms" });

    const failing = withTimeout(
      fake({
        lookup: () => Promise.reject(new Error("down")),
        refund: () => {
          throw new Error("refused");
        },
      }),
      1_000,
    );
    expect(await failing.lookup("k")).toEqual({ kind: "error", message: "down" });
    expect(await failing.refund("ch", "rk")).toEqual({ kind: "error", message: "refused" });
  });

  it("passes the refund idempotency key through", async () => {
    const seen: (string | undefined)[] = [];
    const wrapped = withTimeout(
      fake({
        refund: async (_chargeId, key) => {
          seen.push(key);
          return { kind: "refunded", refundId: "re_1" };
        },
      }),
      1_000,
    );
    await wrapped.refund("ch", "refund-key");
    await wrapped.refund("ch");
    expect(seen).toEqual(["refund-key", undefined]);
  });

  it("refuses a timeout that is not a positive number", () => {
    for (const bad of [0, -1, Number.NaN, Number.POSITIVE_INFINITY]) {
      expect(() => withTimeout(fake({}), bad)).toThrow(RangeError);
    }
  });
});
