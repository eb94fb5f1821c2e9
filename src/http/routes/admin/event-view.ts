import { z } from "@hono/zod-openapi";
import type { EventDefinition } from "../../../inventory/index.js";
import { FAN_ID_MODES } from "../../../waiting-room/fan-ids.js";

export const StoredEvent = z
  .object({
    eventId: z.string(),
    name: z.string(),
    onSaleAt: z.string(),
    holdSeconds: z.number(),
    maxSeatsPerFan: z.number(),
    sections: z.array(
      z.object({ id: z.string(), tier: z.string(), price: z.number(), rows: z.number(), seatsPerRow: z.number() }),
    ),
    generalAdmission: z.array(z.object({ id: z.string(), tier: z.string(), price: z.number(), capacity: z.number() })),
    waitingRoom: z.object({
      admitPerSecond: z.number(),
      maxActive: z.number(),
      sessionSeconds: z.number(),
      fanIds: z.enum(FAN_ID_MODES).openapi({ description: "who names the fans: `any` or `issued` (docs/API.md)" }),
    }),
    totalSeats: z.number(),
    version: z.number(),
    createdAt: z.string(),
    updatedAt: z.string(),
    lottery: z.object({ commitment: z.string() }),
  })
  .openapi("StoredEvent");

export function toStoredEvent(event: EventDefinition, commitment: string): z.infer<typeof StoredEvent> {
  return {
    eventId: event.eventId,
    name: event.name,
    onSaleAt: event.onSaleAt,
    holdSeconds: event.holdSeconds,
    maxSeatsPerFan: event.maxSeatsPerFan,
    sections: event.sections,
    generalAdmission: event.generalAdmission,
    waitingRoom: { ...event.waitingRoom, fanIds: event.waitingRoom.fanIds ?? "any" },
    totalSeats: event.totalSeats,
    version: event.version,
    createdAt: event.createdAt,
    updatedAt: event.updatedAt,
    lottery: { commitment },
  };
}
