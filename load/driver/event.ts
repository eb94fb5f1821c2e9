/**
 * The event a run plays on: one the driver creates for its scenario (with an operator token), or
 * one that exists, read off its seat map and waiting room.
 */
import type { Client } from "./http.js";
import type { EventPlan, Section } from "./scenario.js";

export interface PlayedEvent {
  sections: Section[];
  seatsTotal: number;
  /** Epoch ms. */
  onSaleAt: number;
}

export interface NewEvent {
  eventId: string;
  name: string;
  adminToken: string;
  plan: EventPlan;
  fans: number;
  /** Seconds from now to onSaleAt (the lottery pre-queue); default 3 + the layout's write time + `waitSeconds`. */
  onSaleDelaySeconds?: number;
  /** How long the driver waits after the event is written before its first fan (its idle measurement). */
  waitSeconds?: number;
}

/** Creates the event; throws when the gateway refuses it. */
export async function createEvent(client: Client, e: NewEvent, log: (line: string) => void): Promise<PlayedEvent> {
  const { sections, holdSeconds } = e.plan;
  const seatsTotal = sections.reduce((n, s) => n + s.rows * s.seatsPerRow, 0);
  const onSaleAt = Date.now() + (e.onSaleDelaySeconds ?? 3 + seatsTotal / 2_500 + (e.waitSeconds ?? 0)) * 1000;
  const put = await client.call("admin", "PUT", `/v1/admin/events/${e.eventId}`, {
    token: e.adminToken,
    json: {
      name: e.name,
      onSaleAt: new Date(onSaleAt).toISOString(),
      holdSeconds,
      maxSeatsPerFan: 4,
      sections: sections.map((s) => ({ ...s, tier: s.id === "FRONT" ? "Front" : "Floor", price: 10_000 })),
      generalAdmission: [],
      waitingRoom: {
        // high, but spread over ~10 s: admitting everyone at once would leave the admission
        // order to the poll timing and make the fairness figure meaningless
        admitPerSecond: Math.max(20, Math.ceil(e.fans / 10)),
        maxActive: Math.max(1_000, e.fans),
        sessionSeconds: 900,
      },
    },
    ok: [200, 201],
  });
  if (put.status !== 200 && put.status !== 201) {
    throw new Error(`event ${e.eventId} not created: ${put.status} ${JSON.stringify(put.body)}`);
  }
  if (e.plan.waitingRoom) {
    const patch = await client.call("admin", "PATCH", `/v1/admin/events/${e.eventId}/waiting-room`, {
      token: e.adminToken,
      json: e.plan.waitingRoom,
    });
    if (patch.status !== 200) throw new Error(`event ${e.eventId}: settings refused: ${patch.status}`);
  }
  if (Date.now() > onSaleAt) log(`note: the event was written after its onSaleAt; no pre-queue this run`);
  return { sections, seatsTotal, onSaleAt };
}

/** An event that exists: its sections (one row each, as the map counts them) and onSaleAt. */
export async function readEvent(client: Client, eventId: string): Promise<PlayedEvent> {
  const map = await client.call<{ sections: { id: string; total: number }[] }>(
    "seatmap",
    "GET",
    `/v1/events/${eventId}/seatmap`,
  );
  const room = await client.call<{ onSaleAt: string }>("waiting-room", "GET", `/v1/events/${eventId}/waiting-room`);
  if (map.status !== 200) throw new Error(`event ${eventId}: seat map answered ${map.status}`);
  return {
    sections: map.body.sections.map((s) => ({ id: s.id, rows: 1, seatsPerRow: s.total })),
    seatsTotal: map.body.sections.reduce((n, s) => n + s.total, 0),
    onSaleAt: Date.parse(room.body.onSaleAt),
  };
}
