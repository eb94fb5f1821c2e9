/**
 * The odds of a seat in the queue status (issue 18 item 5): before anyone was admitted the worst
 * case (every fan ahead takes maxSeatsPerFan); once fans were admitted and took seats, the seats
 * taken per admitted fan; a sold-out event says 0. Real Redis, the local DynamoDB, the HTTP app.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MIN_ADMITTED, oddsAt } from "../../src/waiting-room/odds.js";
import { admitFans, createTable, eventInput, type Gateway, putEvent, startGateway, uniqueId } from "./harness.js";

let gw: Gateway;
beforeAll(async () => {
  gw = await startGateway({ tableName: await createTable() });
});
afterAll(async () => {
  await gw?.close();
});

interface Status {
  status: string;
  ahead: number;
  odds?: { chance: number; seatsLeft: number; fansAhead: number; seatsPerFan: number; basis: string };
}

async function join(eventId: string, fanIds: string[]): Promise<string[]> {
  return Promise.all(
    fanIds.map(async (fanId) => {
      const res = await gw.request(`/v1/events/${eventId}/queue`, { method: "POST", json: { fanId } });
      expect([200, 201]).toContain(res.status);
      return ((await res.json()) as { queueToken: string }).queueToken;
    }),
  );
}

const statusOf = async (eventId: string, token: string) =>
  (await (await gw.request(`/v1/events/${eventId}/queue/status`, { token })).json()) as Status;

describe("odds of a seat in the queue status", () => {
  it("before any admission: the worst case, every fan ahead taking the limit", async () => {
    const eventId = uniqueId("odds");
    const input = eventInput({
      sections: [{ id: "A", tier: "Floor", price: 1_000, rows: 2, seatsPerRow: 10 }],
      generalAdmission: [{ id: "GA", tier: "Standing", price: 500, capacity: 4 }],
      waitingRoom: { admitPerSecond: 0, maxActive: 10, sessionSeconds: 600 },
    });
    expect((await putEvent(gw, eventId, input)).status).toBe(201);
    const tokens = await join(
      eventId,
      Array.from({ length: 8 }, (_, i) => `w${i}`),
    );
    const all = await Promise.all(tokens.map((t) => statusOf(eventId, t)));
    for (const s of all) {
      expect(s.status).toBe("waiting");
      // 24 left (20 seats, 4 places); 4 a fan: the fan with 5 ahead has 24 / 24 = 1, 6 ahead 24/28.
      expect(s.odds).toEqual({
        chance: Math.floor(Math.min(1, 24 / ((s.ahead + 1) * 4)) * 100) / 100,
        seatsLeft: 24,
        fansAhead: s.ahead,
        seatsPerFan: 4,
        basis: "limit",
      });
    }
    const byAhead = all.map((s) => [s.ahead, s.odds?.chance]).sort((a, b) => Number(a[0]) - Number(b[0]));
    expect(byAhead).toEqual([
      [0, 1],
      [1, 1],
      [2, 1],
      [3, 1],
      [4, 1],
      [5, 1],
      [6, 0.85],
      [7, 0.75],
    ]);
  });

  it("after admissions: at the seats taken per admitted fan", async () => {
    const eventId = uniqueId("odds");
    const input = eventInput({
      sections: [{ id: "A", tier: "Floor", price: 1_000, rows: 10, seatsPerRow: 10 }],
      generalAdmission: [],
      waitingRoom: { admitPerSecond: 10_000, maxActive: MIN_ADMITTED + 4, sessionSeconds: 600 },
    });
    expect((await putEvent(gw, eventId, input)).status).toBe(201);
    const buyers = await admitFans(
      gw,
      eventId,
      Array.from({ length: MIN_ADMITTED + 4 }, (_, i) => `b${i}`),
    );
    // Each admitted fan holds two seats at once: 48 of 100 taken by 24 fans, 2 a fan.
    const holds = await Promise.all(
      buyers.map((fan, i) =>
        gw.request(`/v1/events/${eventId}/holds`, {
          method: "POST",
          token: fan.accessToken,
          json: {
            seats: [`A-${Math.floor(i / 5) + 1}-${(i % 5) * 2 + 1}`, `A-${Math.floor(i / 5) + 1}-${(i % 5) * 2 + 2}`],
          },
        }),
      ),
    );
    expect(holds.map((r) => r.status)).toEqual(holds.map(() => 201));
    // The room is full (24 active): these wait.
    const tokens = await join(
      eventId,
      Array.from({ length: 6 }, (_, i) => `late${i}`),
    );
    // The figures are kept 2 s per gateway: poll until they show the holds.
    let seen: Status[] = [];
    await expect
      .poll(
        async () => {
          seen = await Promise.all(tokens.map((t) => statusOf(eventId, t)));
          return seen.every((s) => s.odds?.basis === "conversion" && s.odds.seatsLeft === 52);
        },
        { timeout: 15_000, interval: 250 },
      )
      .toBe(true);
    for (const s of seen) {
      expect(s.status).toBe("waiting");
      expect(s.odds).toEqual(
        oddsAt(s.ahead, { left: 52, capacity: 100, admitted: MIN_ADMITTED + 4, maxSeatsPerFan: 4 }),
      );
      expect(s.odds?.seatsPerFan).toBe(2);
    }
  });
});
