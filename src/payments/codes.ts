/**
 * The simulated provider's script family and its one table of reply codes (the first element of
 * every reply of lua/payment-charge-4.lua and lua/payment-refund-2.lua). Codes are unique across
 * the family, so a code read anywhere means one thing: positive codes are decisions, negative ones
 * are refusals that charged or refunded nothing.
 */
import { codeTable, scriptFamily } from "../redis/scripts.js";

export const paymentScripts = scriptFamily({
  name: "payment",
  files: { charge: "payment-charge-4", refund: "payment-refund-2" },
});

export const PAYMENT_CODES = codeTable("payment", {
  1: "charged",
  2: "declined",
  3: "refunded",
  [-1]: "provider_error",
  [-2]: "idempotency_mismatch",
  [-3]: "charge_id_taken",
  [-4]: "no_charge",
});

export type PaymentCode = ReturnType<typeof PAYMENT_CODES.outcome>;
