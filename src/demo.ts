/**
 * The demo on-sale that `npm start` creates on a fresh data directory: 10,600 reserved seats in
 * seven sections over three tiers, plus a standing area, going on sale shortly after start so the
 * lottery pre-queue can be seen too.
 */
import type { EventService } from "./events/event-service.js";
import type { EventInput } from "./inventory/index.js";
import type { Logger } from "./logger.js";
import { type NotifyReceiver, startNotifyReceiver } from "./notify/receiver.js";

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
export async function ensureDemoEvent(deps: { events: EventService; logger: Logger }): Promise<boolean> {
  const log = deps.logger.child({ eventId: DEMO_EVENT_ID });
  // Redis may be new (nothing persisted there): the room and the jobs are set up again from the event.
  if (await deps.events.restore(DEMO_EVENT_ID, log)) return false;
  const result = await deps.events.put(DEMO_EVENT_ID, demoEvent(new Date(Date.now() + 30_000)), log);
  if (!result.ok) throw new Error(`demo event not created: ${result.reason}`);
  // A Redis that outlived an earlier data directory may still hold an open demo line: keep it.
  if (!result.room.ok && result.room.reason !== "already_open") {
    throw new Error(`demo waiting room not configured: ${result.room.reason}`);
  }
  return true;
}

/**
 * "Simulated here": with no NOTIFY_WEBHOOK_URL, `npm start` (one process, gateway and workers)
 * points the seats-back webhook at a local receiver that checks each batch's signature and logs
 * who would be mailed (src/notify/receiver.ts). Split roles need a receiver both can reach: none.
 */
export async function demoNotifyReceiver(options: {
  demoEvent: boolean;
  role: string;
  webhookUrl: string | undefined;
  secret: string;
  logger: Logger;
}): Promise<NotifyReceiver | undefined> {
  if (options.webhookUrl || !options.demoEvent || options.role !== "all") return undefined;
  const receiver = await startNotifyReceiver({ secret: options.secret, logger: options.logger });
  options.logger.info({ url: receiver.url }, "seats-back webhook: a local receiver logs each batch (demo)");
  return receiver;
}
