/**
 * The demo on-sale that `npm start` creates on a fresh data directory: 10,600 reserved seats in
 * seven sections over three tiers, plus a standing area, going on sale shortly after start so the
 * lottery pre-queue can be seen too.
 */
import type { EventInput, Inventory } from "./inventory/index.js";
import type { Logger } from "./logger.js";
import type { WaitingRoom } from "./waiting-room/index.js";

export const DEMO_EVENT_ID = "demo";

export function demoEvent(onSaleAt: Date): EventInput {
  return {
    name: "Finals Night (demo)",
    onSaleAt: onSaleAt.toISOString().replace(/\.\d{3}Z$/, "Z"),
    holdSeconds: 480,
    maxSeatsPerFan: 8,
    sections: [
      { id: "A", tier: "Floor", price: 15000, rows: 40, seatsPerRow: 50 },
      { id: "B", tier: "Floor", price: 15000, rows: 40, seatsPerRow: 50 },
      { id: "C", tier: "Lower", price: 9000, rows: 30, seatsPerRow: 40 },
      { id: "D", tier: "Lower", price: 9000, rows: 30, seatsPerRow: 40 },
      { id: "E", tier: "Lower", price: 9000, rows: 30, seatsPerRow: 40 },
      { id: "F", tier: "Upper", price: 5000, rows: 30, seatsPerRow: 50 },
      { id: "G", tier: "Upper", price: 5000, rows: 30, seatsPerRow: 50 },
    ],
    generalAdmission: [{ id: "GA", tier: "Standing", price: 6000, capacity: 5000 }],
    waitingRoom: { admitPerSecond: 20, maxActive: 500, sessionSeconds: 900 },
  };
}

/** Creates the demo event unless it exists; returns whether it was created. */
export async function ensureDemoEvent(deps: {
  inventory: Inventory;
  waitingRoom: WaitingRoom;
  logger: Logger;
}): Promise<boolean> {
  const existing = await deps.inventory.events.get({ eventId: DEMO_EVENT_ID });
  if (existing?.layoutComplete) {
    // Redis may be new (nothing persisted there); the room is configured again from the event.
    await deps.waitingRoom.configure(DEMO_EVENT_ID, { ...existing.waitingRoom, onSaleAt: existing.onSaleAt });
    return false;
  }
  const input = demoEvent(new Date(Date.now() + 30_000));
  const log = deps.logger.child({ eventId: DEMO_EVENT_ID });
  let last = 0;
  const result = await deps.inventory.events.create({
    eventId: DEMO_EVENT_ID,
    input,
    onProgress: (p) => {
      if (Date.now() - last < 1_000 && p.written < p.total) return;
      last = Date.now();
      log.info({ written: p.written, total: p.total }, "writing demo seats");
    },
  });
  if (!result.ok) throw new Error(`demo event not created: ${result.reason}`);
  const room = await deps.waitingRoom.configure(DEMO_EVENT_ID, { ...input.waitingRoom, onSaleAt: input.onSaleAt });
  // A Redis that outlived an earlier data directory may still hold an open demo line: keep it.
  if (!room.ok && room.reason !== "already_open") throw new Error(`demo waiting room not configured: ${room.reason}`);
  return true;
}
