/**
 * GET /v1/admin/events/{eventId}/stats does not read every seat per request: what it asks DynamoDB
 * for, counted on the real client (a middleware on the gateway's own DynamoDB client, the local
 * DynamoDB behind it), is the same for an event of 70 seats and one of 2,000 — nothing at all
 * while the shared snapshot is fresh — and many requests at once on two gateways count the seats
 * once. After the interval the counts follow the store again.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ADMIN_TOKEN, admitFans, createTable, eventInput, putEvent, uniqueId } from "../gateway/harness.js";
import { type CountedGateway, startCountedGateway } from "./support.js";

interface StatsBody {
  seats: { available: number; held: number; sold: number; total: number };
  counts: { at: string; source: string };
}

let tableName: string;
const gateways: CountedGateway[] = [];

beforeAll(async () => {
  tableName = await createTable();
});

afterAll(async () => {
  for (const gw of gateways) await gw.close();
});

function gateway(countsIntervalMs: number): CountedGateway {
  const gw = startCountedGateway(tableName, { countsIntervalMs });
  gateways.push(gw);
  return gw;
}

async function stats(gw: CountedGateway, eventId: string): Promise<StatsBody> {
  const res = await gw.request(`/v1/admin/events/${eventId}/stats`, { token: ADMIN_TOKEN });
  expect(res.status).toBe(200);
  return (await res.json()) as StatsBody;
}

const big = eventInput({
  sections: [
    { id: "A", tier: "Floor", price: 15000, rows: 25, seatsPerRow: 40 },
    { id: "B", tier: "Upper", price: 5000, rows: 25, seatsPerRow: 40 },
  ],
});

describe("the stats route's DynamoDB reads", () => {
  let one: CountedGateway;
  let two: CountedGateway;
  beforeAll(() => {
    // A long interval: the snapshot taken first stays fresh for the whole test.
    one = gateway(120_000);
    two = gateway(120_000);
  });

  it("do not grow with the number of seats: none per request while the snapshot is fresh", async () => {
    const small = uniqueId();
    const large = uniqueId();
    expect((await putEvent(one, small)).status).toBe(201);
    expect((await putEvent(one, large, big)).status).toBe(201);

    const perEvent: Record<string, { first: number; items: number; requests: number }> = {};
    for (const [eventId, seats] of [
      [small, 70],
      [large, 2_000],
    ] as const) {
      one.resetReads();
      const first = await stats(one, eventId);
      expect(first.seats.total).toBe(seats);
      expect(first.counts.source).toBe("computed");
      // The count itself reads every seat (so the counter sees seat reads).
      const firstItems = one.reads.items;
      expect(firstItems).toBeGreaterThanOrEqual(seats);

      one.resetReads();
      two.resetReads();
      const answers = await Promise.all(Array.from({ length: 40 }, (_, i) => stats(i % 2 ? two : one, eventId)));
      expect(new Set(answers.map((a) => a.counts.at))).toEqual(new Set([first.counts.at]));
      expect(new Set(answers.map((a) => a.counts.source))).toEqual(new Set(["snapshot"]));
      const requests = [one, two].reduce((n, gw) => n + Object.values(gw.reads.requests).reduce((a, b) => a + b, 0), 0);
      perEvent[eventId] = { first: firstItems, items: one.reads.items + two.reads.items, requests };
    }
    const [s, l] = [perEvent[small]!, perEvent[large]!];
    console.log(
      `stats reads: a first count of 70 seats read ${s.first} items, of 2,000 seats ${l.first}; ` +
        `40 requests after it read ${s.items} and ${l.items} items in ${s.requests} and ${l.requests} requests`,
    );
    expect(l.first).toBeGreaterThan(s.first);
    expect(l.items).toBe(s.items);
    expect(l.requests).toBe(s.requests);
    expect(l.items).toBe(0);
  }, 120_000);

  it("many requests at once on two gateways, before any snapshot: the seats are counted once", async () => {
    const eventId = uniqueId();
    expect((await putEvent(one, eventId, big)).status).toBe(201);
    one.resetReads();
    two.resetReads();
    const answers = await Promise.all(Array.from({ length: 30 }, (_, i) => stats(i % 2 ? two : one, eventId)));
    // One count: one Query of each section's seats (2 sections, each one page).
    expect(one.reads.seatQueries + two.reads.seatQueries).toBe(2);
    expect(new Set(answers.map((a) => a.counts.at)).size).toBe(1);
    // The gateway that counted answers all its requests from that one count ("computed"); the
    // other waited for it and answers the shared snapshot.
    const byGateway = [0, 1].map((k) => new Set(answers.filter((_, i) => i % 2 === k).map((a) => a.counts.source)));
    expect(byGateway.map((sources) => [...sources].join()).sort()).toEqual(["computed", "snapshot"]);
    expect(answers.every((a) => a.seats.total === 2_000)).toBe(true);
  }, 120_000);
});

describe("after the interval", () => {
  it("the counts follow the store again: a hold shows within the interval's time", async () => {
    const gw = gateway(300);
    const eventId = uniqueId();
    expect((await putEvent(gw, eventId)).status).toBe(201);
    const before = await stats(gw, eventId);
    expect(before.seats.held).toBe(0);
    const [fan] = await admitFans(gw, eventId, ["holder"]);
    const held = await gw.request(`/v1/events/${eventId}/holds`, {
      method: "POST",
      token: fan!.accessToken,
      json: { seats: ["A-1-1"] },
    });
    expect(held.status).toBe(201);
    let after = before;
    await expect
      .poll(
        async () => {
          after = await stats(gw, eventId);
          return after.seats.held;
        },
        { timeout: 15_000, interval: 50 },
      )
      .toBe(1);
    expect(Date.parse(after.counts.at)).toBeGreaterThan(Date.parse(before.counts.at));
  });
});
