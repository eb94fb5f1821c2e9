/**
 * A fan at its seat limit who asks for a free seat again and again (each request refused 422
 * `seat_limit_exceeded` by the fan's ledger in DynamoDB) does not keep that seat from everyone
 * else: once refused for its limit, the fan's next holds read its ledger before the hot-seat
 * shield leases anything (src/claims/hold-service.ts). Before, each doomed request leased the seat
 * for its DynamoDB write, and another fan asking meanwhile was told 409 `seat_unavailable` for a
 * seat nobody held (an outside pass: 30 of 40 times). The requests really in flight at once.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { admitFans, createTable, eventInput, type Gateway, putEvent, startGateway, uniqueId } from "./harness.js";

let gw: Gateway;

beforeAll(async () => {
  gw = await startGateway({ tableName: await createTable() });
}, 60_000);

afterAll(async () => {
  await gw?.close();
});

const hold = (eventId: string, token: string, seats: string[]) =>
  gw.request(`/v1/events/${eventId}/holds`, { method: "POST", token, json: { seats } });

const codeOf = async (res: Response) => ((await res.json()) as { error?: { code: string } }).error?.code;

describe("a fan at its seat limit and the shield", () => {
  it("asking for a free seat again and again, three at a time, never makes it unavailable to another fan", async () => {
    const eventId = uniqueId();
    expect((await putEvent(gw, eventId, eventInput({ maxSeatsPerFan: 1 }))).status).toBe(201);
    const [greedy, honest] = await admitFans(gw, eventId, ["greedy", "honest"]);
    expect((await hold(eventId, greedy!.accessToken, ["A-1-1"])).status).toBe(201);
    // The first refusal for the limit (it leased A-1-2 for its write, as any unflagged request does).
    const first = await hold(eventId, greedy!.accessToken, ["A-1-2"]);
    expect(first.status).toBe(422);
    expect(await codeOf(first)).toBe("seat_limit_exceeded");

    let stop = false;
    const greedyAnswers: number[] = [];
    const greedyLoop = async () => {
      while (!stop) {
        const res = await hold(eventId, greedy!.accessToken, ["A-1-2"]);
        greedyAnswers.push(res.status);
        await res.arrayBuffer();
      }
    };
    const loops = [greedyLoop(), greedyLoop(), greedyLoop()];
    const honestAnswers: string[] = [];
    try {
      for (let i = 0; i < 30; i++) {
        const res = await hold(eventId, honest!.accessToken, ["A-1-2"]);
        if (res.status !== 201) {
          honestAnswers.push(`${res.status} ${await codeOf(res)}`);
          continue;
        }
        honestAnswers.push("201");
        const { holdId } = (await res.json()) as { holdId: string };
        const released = await gw.request(`/v1/events/${eventId}/holds/${holdId}`, {
          method: "DELETE",
          token: honest!.accessToken,
        });
        expect(released.status).toBe(204);
      }
    } finally {
      stop = true;
      await Promise.all(loops);
    }
    // The greedy fan was refused every time (for its limit, or 409 while the honest fan held the
    // seat), and asked often enough to matter.
    expect(greedyAnswers.length).toBeGreaterThanOrEqual(30);
    expect(greedyAnswers.filter((s) => s !== 422 && s !== 409)).toEqual([]);
    expect(greedyAnswers.filter((s) => s === 422).length).toBeGreaterThan(0);
    // The honest fan got the free seat every time.
    expect(honestAnswers.filter((a) => a !== "201")).toEqual([]);
  }, 120_000);

  it("a fan flagged at its limit who releases a hold can hold again at once", async () => {
    const eventId = uniqueId();
    expect((await putEvent(gw, eventId, eventInput({ maxSeatsPerFan: 1 }))).status).toBe(201);
    const [fan] = await admitFans(gw, eventId, ["changes-mind"]);
    const held = await hold(eventId, fan!.accessToken, ["B-1-1"]);
    expect(held.status).toBe(201);
    expect((await hold(eventId, fan!.accessToken, ["B-1-2"])).status).toBe(422);
    const { holdId } = (await held.json()) as { holdId: string };
    expect(
      (await gw.request(`/v1/events/${eventId}/holds/${holdId}`, { method: "DELETE", token: fan!.accessToken })).status,
    ).toBe(204);
    // Flagged, so its ledger is read first: it holds nothing now, and the hold goes through.
    expect((await hold(eventId, fan!.accessToken, ["B-1-2"])).status).toBe(201);
    expect((await hold(eventId, fan!.accessToken, ["B-1-3"])).status).toBe(422);
  }, 60_000);
});
