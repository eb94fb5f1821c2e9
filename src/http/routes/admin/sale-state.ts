import { z } from "@hono/zod-openapi";
import type { EventDefinition } from "../../../inventory/index.js";
import type { RoomState } from "../../../waiting-room/index.js";

/**
 * Where an event's sale stands, from the stored event (the authority on holds) and its waiting
 * room: `scheduled` (before onSaleAt), `on_sale`, `sale_closed` (the room is closed: no new
 * places, no admissions; admitted fans may still hold and buy until their session ends) and
 * `ended` (closedAt set: holds refused, the event's jobs end; purchases and audit stay readable).
 */
export const SaleStateName = z.enum(["scheduled", "on_sale", "sale_closed", "ended"]);

export const SaleState = z
  .object({
    state: SaleStateName,
    onSaleAt: z.string(),
    closedAt: z.string().optional().openapi({ description: "When the event was ended (holds refused from then on)" }),
    jobsEndedAt: z.string().optional(),
    room: z
      .string()
      .openapi({ description: "The waiting room's state: prequeue, open, paused, closed, or unavailable" }),
  })
  .openapi("SaleState");

export function saleStateOf(
  event: EventDefinition,
  room: RoomState | "unavailable",
  now = Date.now(),
): z.infer<typeof SaleState> {
  const state = event.closedAt
    ? "ended"
    : room === "closed"
      ? "sale_closed"
      : Date.parse(event.onSaleAt) > now
        ? "scheduled"
        : "on_sale";
  return {
    state,
    onSaleAt: event.onSaleAt,
    ...(event.closedAt ? { closedAt: event.closedAt } : {}),
    ...(event.jobsEndedAt ? { jobsEndedAt: event.jobsEndedAt } : {}),
    room,
  };
}
