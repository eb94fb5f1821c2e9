import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  ADMIN_TOKEN,
  admitFans,
  createTable,
  eventInput,
  type Gateway,
  listen,
  putEvent,
  startGateway,
  uniqueId,
} from "./harness.js";

let gw: Gateway;
beforeAll(async () => {
  gw = await startGateway({ tableName: await createTable() });
});
afterAll(async () => {
  await gw.close();
});

describe("the fan journey up to a hold (HTTP, real Redis and DynamoDB)", () => {
  it("join, poll until admitted, seat map, hold, release", async () => {
    const eventId = uniqueId();
    const created = await putEvent(gw, eventId);
    expect(created.status).toBe(201);
    const stored = (await created.json()) as { totalSeats: number; lottery: { commitment: string } };
    expect(stored.totalSeats).toBe(70);
    expect(stored.lottery.commitment).toMatch(/^[0-9a-f]{64}$/);

    const info = (await (await gw.request(`/v1/events/${eventId}/waiting-room`)).json()) as Record<string, unknown>;
    expect(info).toMatchObject({
      state: "open",
      admitPerSecond: 10_000,
      lottery: { commitment: stored.lottery.commitment },
    });

    const join = await gw.request(`/v1/events/${eventId}/queue`, { method: "POST", json: { fanId: "alice" } });
    expect(join.status).toBe(201);
    const joined = (await join.json()) as { queueToken: string; position: number; status: string };
    expect(joined.position).toBe(1);
    const again = await gw.request(`/v1/events/${eventId}/queue`, { method: "POST", json: { fanId: "alice" } });
    expect(again.status).toBe(200);
    expect(((await again.json()) as { position: number }).position).toBe(1);

    let status: { status: string; accessToken?: string; accessExpiresAt?: string; pollAfterSeconds: number };
    do {
      status = (await (
        await gw.request(`/v1/events/${eventId}/queue/status`, { token: joined.queueToken })
      ).json()) as typeof status;
    } while (status.status !== "admitted");
    expect(status.accessToken).toBeTruthy();
    expect(Date.parse(status.accessExpiresAt!)).toBeGreaterThan(Date.now());

    const map = (await (await gw.request(`/v1/events/${eventId}/seatmap`)).json()) as {
      sections: { id: string; available: number; total: number; price: number }[];
      generalAdmission: { id: string; available: number; capacity: number }[];
    };
    expect(map.sections).toEqual([
      expect.objectContaining({ id: "A", available: 50, total: 50, price: 15000 }),
      expect.objectContaining({ id: "B", available: 20, total: 20, price: 5000 }),
    ]);
    expect(map.generalAdmission).toEqual([expect.objectContaining({ id: "GA", available: 100, capacity: 100 })]);

    const seatsRes = await gw.request(`/v1/events/${eventId}/sections/A/seats`);
    expect(seatsRes.status).toBe(200);
    const etag = seatsRes.headers.get("etag")!;
    const seats = (await seatsRes.json()) as { seats: { id: string; status: string }[] };
    expect(seats.seats).toHaveLength(50);
    expect(seats.seats[0]).toEqual({ id: "A-1-1", status: "available" });
    expect(
      (await gw.request(`/v1/events/${eventId}/sections/A/seats`, { headers: { "if-none-match": etag } })).status,
    ).toBe(304);

    const hold = await gw.request(`/v1/events/${eventId}/holds`, {
      method: "POST",
      token: status.accessToken!,
      json: { seats: ["A-1-1", "A-1-2"] },
    });
    expect(hold.status).toBe(201);
    const held = (await hold.json()) as { holdId: string; seats: string[]; amount: number; expiresAt: string };
    expect(held.seats).toEqual(["A-1-1", "A-1-2"]);
    expect(held.amount).toBe(30000);
    expect(Date.parse(held.expiresAt) - Date.now()).toBeGreaterThan(100_000);

    // The cached map moved on: a new ETag, the seats held, one fewer... two fewer available.
    const after = await gw.request(`/v1/events/${eventId}/sections/A/seats`, { headers: { "if-none-match": etag } });
    expect(after.status).toBe(200);
    const afterSeats = (await after.json()) as { seats: { id: string; status: string }[] };
    expect(afterSeats.seats.slice(0, 3).map((s) => s.status)).toEqual(["held", "held", "available"]);
    const map2 = (await (await gw.request(`/v1/events/${eventId}/seatmap`)).json()) as {
      sections: { available: number }[];
    };
    expect(map2.sections[0]!.available).toBe(48);

    const ga = await gw.request(`/v1/events/${eventId}/holds`, {
      method: "POST",
      token: status.accessToken!,
      json: { generalAdmission: { id: "GA", quantity: 2 } },
    });
    expect(ga.status).toBe(201);
    expect(((await ga.json()) as { amount: number }).amount).toBe(12000);

    const release = await gw.request(`/v1/events/${eventId}/holds/${held.holdId}`, {
      method: "DELETE",
      token: status.accessToken!,
    });
    expect(release.status).toBe(204);
    const releaseAgain = await gw.request(`/v1/events/${eventId}/holds/${held.holdId}`, {
      method: "DELETE",
      token: status.accessToken!,
    });
    expect(releaseAgain.status).toBe(204);
    const back = (await (await gw.request(`/v1/events/${eventId}/sections/A/seats`)).json()) as {
      seats: { status: string }[];
    };
    expect(back.seats.slice(0, 2).map((s) => s.status)).toEqual(["available", "available"]);

    const metrics = await (await gw.request("/metrics")).text();
    expect(metrics).toContain(`gateway_admitted_fans{event="${eventId}"} 1`);
    expect(metrics).toMatch(/gateway_dynamodb_commands_total\{command="TransactWriteItems",outcome="ok"\} [1-9]/);
    expect(metrics).toMatch(
      /gateway_http_request_duration_seconds_count\{method="POST",route="\/v1\/events\/:eventId\/holds",status="201"\} \d+/,
    );

    const stats = await gw.request(`/v1/admin/events/${eventId}/stats`, { token: ADMIN_TOKEN });
    expect(stats.status).toBe(200);
    expect(await stats.json()).toMatchObject({
      admitted: 1,
      active: 1,
      seats: { available: 70, held: 0, sold: 0 },
      generalAdmission: { GA: { available: 98, held: 2, sold: 0 } },
    });
  });

  it("streams every seat change to a connected browser (Server-Sent Events)", async () => {
    const eventId = uniqueId();
    expect((await putEvent(gw, eventId)).status).toBe(201);
    const [fan] = await admitFans(gw, eventId, ["sse-fan"]);
    const server = await listen(gw);
    const controller = new AbortController();
    try {
      const res = await fetch(`${server.url}/v1/events/${eventId}/seatmap/stream`, { signal: controller.signal });
      expect(res.headers.get("content-type")).toContain("text/event-stream");
      const reader = res.body!.getReader();
      const decoder = new TextDecoder();
      let text = "";
      const until = async (needle: string) => {
        while (!text.includes(needle)) {
          const { value, done } = await reader.read();
          if (done) throw new Error(`stream ended before ${needle}`);
          text += decoder.decode(value, { stream: true });
        }
      };
      await until("event: ready");
      const hold = await gw.request(`/v1/events/${eventId}/holds`, {
        method: "POST",
        token: fan!.accessToken,
        json: { seats: ["B-2-10"] },
      });
      expect(hold.status).toBe(201);
      await until('data: {"id":"B-2-10","status":"held"}');
      expect(text).toContain("event: seat");
    } finally {
      controller.abort();
      await server.close();
    }
  });

  it("refuses to replace an event that is on sale, and replaces one that is not", async () => {
    const eventId = uniqueId();
    const later = new Date(Date.now() + 3_600_000).toISOString();
    expect((await putEvent(gw, eventId, eventInput({ onSaleAt: later }))).status).toBe(201);
    const replaced = await putEvent(
      gw,
      eventId,
      eventInput({ onSaleAt: later, sections: [{ id: "Z", tier: "Box", price: 1, rows: 1, seatsPerRow: 3 }] }),
    );
    expect(replaced.status).toBe(200);
    expect(((await replaced.json()) as { totalSeats: number }).totalSeats).toBe(3);
    const map = (await (await gw.request(`/v1/events/${eventId}/seatmap`)).json()) as { sections: { id: string }[] };
    expect(map.sections.map((s) => s.id)).toEqual(["Z"]);

    const live = uniqueId();
    expect((await putEvent(gw, live)).status).toBe(201);
    const refused = await putEvent(gw, live);
    expect(refused.status).toBe(409);
    expect(((await refused.json()) as { error: { code: string } }).error.code).toBe("event_on_sale");
  });

  it("refuses to replace an event whose on-sale is closer than the event cache plus the request budget (409)", async () => {
    const eventId = uniqueId();
    // 75 s by default (60 s event cache + 5 s x 3 attempts): 30 s is well inside it.
    const soon = new Date(Date.now() + 30_000).toISOString();
    expect((await putEvent(gw, eventId, eventInput({ onSaleAt: soon }))).status).toBe(201);
    const refused = await putEvent(gw, eventId, eventInput({ onSaleAt: soon, name: "Replaced" }));
    expect(refused.status).toBe(409);
    const body = (await refused.json()) as {
      error: { code: string; message: string; details: { onSaleAt: string; replaceableUntil: string } };
    };
    expect(body.error).toMatchObject({
      code: "replacement_closed",
      details: { onSaleAt: new Date(soon).toISOString() },
    });
    expect(Date.parse(body.error.details.replaceableUntil)).toBe(Date.parse(soon) - 75_000);
    const stored = await gw.deps.inventory.events.get({ eventId });
    expect(stored).toMatchObject({ version: 1, layoutComplete: true });
    expect(stored?.name).not.toBe("Replaced");
  });
});
