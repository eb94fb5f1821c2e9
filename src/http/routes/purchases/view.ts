import { z } from "@hono/zod-openapi";
import type { Purchase } from "../../../inventory/index.js";
import { REFUND_DUE } from "../../../purchases/saga.js";

export const PurchaseView = z
  .object({
    purchaseId: z.string(),
    status: z.enum(["pending", "confirmed", "failed", "refunded"]),
    seats: z.array(z.string()),
    generalAdmission: z.object({ id: z.string(), quantity: z.number() }).optional(),
    amount: z.number().int(),
    createdAt: z.string(),
    confirmedAt: z.string().optional(),
  })
  .openapi("Purchase");

export function purchaseView(p: Purchase): z.infer<typeof PurchaseView> {
  return {
    purchaseId: p.purchaseId,
    // A refund decided but not finished is still in flight for the fan: pending until refunded.
    status: p.status === "failed" && p.failureReason === REFUND_DUE ? "pending" : p.status,
    seats: p.seats,
    ...(p.generalAdmission
      ? { generalAdmission: { id: p.generalAdmission.areaId, quantity: p.generalAdmission.quantity } }
      : {}),
    amount: p.amount,
    createdAt: p.createdAt,
    ...(p.confirmedAt ? { confirmedAt: p.confirmedAt } : {}),
  };
}
