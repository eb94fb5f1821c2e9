/**
 * The operator's whole sale over HTTP (issue 17 item 5), against the real Redis and the local
 * DynamoDB: named tokens and the read role, the event list and view, open now, close the sale,
 * end the event, revoke a fan, the settings history and the action log.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  ADMIN_TOKEN,
  admitFans,
  createTable,
  eventInput,
  type Gateway,
  putEvent,
  startGateway,
  uniqueId,
} from "./harness.js";

const ALICE = "alice-operator-token-0123456789";
const BOARD = "dashboard-read-token-0123456789";

let gw: Gateway;
beforeAll(async () => {
  gw = await startGateway({
    tableName: await createTable(),
    operatorTokens: [
      { name: "alice", role: "admin", token: ALICE },
      { name: "board", role: "read", token: BOARD },
    ],
  });
});
afterAll(async () => {
  await gw.close();
});

type Json = Record<string, unknown>;
async function json(res: Response, status: number): Promise<Json> {
  const text = await res.text();
  if (res.status !== status) throw new Error(`expected ${status}, got ${res.status}: ${text}`);
  return JSON.parse(text) as Json;
}

const later = () => new Date(Date.now() + 3_600_000).toISOString();

async function hold(eventId: string, accessToken: string, seat: string): Promise<Response> {
  return gw.request(`/v1/events/${eventId}/holds`, { method: "POST", token: accessToken, json: { seats: [seat] } });
}

interface Action {
  operator: string;
  role: string;
  method: string;
  route: string;
  status: number;
  code?: string;
  summary?: Json;
  eventId?: string;
}

async function actionsOf(eventId: string): Promise<Action[]> {
  const body = await json(await gw.request(`/v1/admin/events/${eventId}/action-log`, { token: BOARD }), 200);
  return body.actions as Action[];
}

describe("operator tokens", () => {
  it("ADMIN_TOKEN is the admin 'default'; a named admin token acts; a read token only reads; others are refused", async () => {
    const eventId = uniqueId();
    expect((await putEvent(gw, eventId, eventInput({ onSaleAt: later() }))).status).toBe(201);

    // read: every GET of the operator
    for (const path of [
      `/v1/admin/events`,
      `/v1/admin/events/${eventId}`,
      `/v1/admin/events/${eventId}/stats`,
      `/v1/admin/events/${eventId}/waiting-room/history`,
      `/v1/admin/action-log`,
    ]) {
      expect((await gw.request(path, { token: BOARD })).status, path).toBe(200);
    }
    // ... and no action
    const refused = await gw.request(`/v1/admin/events/${eventId}/waiting-room`, {
      method: "PATCH",
      token: BOARD,
      json: { admitPerSecond: 1 },
    });
    expect(((await json(refused, 403)).error as Json).code).toBe("forbidden");
    expect((await gw.request(`/v1/admin/events/${eventId}/end`, { method: "POST", token: BOARD })).status).toBe(403);
    const stats = await json(await gw.request(`/v1/admin/events/${eventId}/stats`, { token: ALICE }), 200);
    expect((stats.waitingRoom as { settings: Json }).settings.admitPerSecond).toBe(10_000);

    // unknown or missing token: 401, logged nowhere as an action of anyone
    expect((await gw.request(`/v1/admin/events`, { token: "not-a-token-of-anyone-000" })).status).toBe(401);
    expect((await gw.request(`/v1/admin/events`)).status).toBe(401);

    const patched = await gw.request(`/v1/admin/events/${eventId}/waiting-room`, {
      method: "PATCH",
      token: ALICE,
      json: { admitPerSecond: 7 },
    });
    expect((await json(patched, 200)).admitPerSecond).toBe(7);

    const actions = await actionsOf(eventId);
    // newest first: alice's PATCH, board's refused end and PATCH, the default token's PUT
    expect(actions.map((a) => [a.operator, a.role, a.method, a.route, a.status])).toEqual([
      ["alice", "admin", "PATCH", "/v1/admin/events/{eventId}/waiting-room", 200],
      ["board", "read", "POST", "/v1/admin/events/{eventId}/end", 403],
      ["board", "read", "PATCH", "/v1/admin/events/{eventId}/waiting-room", 403],
      ["default", "admin", "PUT", "/v1/admin/events/{eventId}", 201],
    ]);
    expect(actions[0]!.summary).toEqual({ admitPerSecond: 7 });
    expect(actions[1]!.code).toBe("forbidden");
    // the PUT's body in brief: scalars kept, lists counted
    expect(actions[3]!.summary).toMatchObject({ name: "Test Night", sections: "[2 items]" });
  });
});

describe("events", () => {
  it("lists every event, latest on-sale first, a page at a time with a cursor; reads one with its sale state", async () => {
    const ids = Array.from({ length: 5 }, () => uniqueId());
    // on-sales an hour apart, created all at once
    await Promise.all(
      ids.map(async (id, i) => {
        const onSaleAt = new Date(Date.now() + (i + 1) * 3_600_000).toISOString();
        expect((await putEvent(gw, id, eventInput({ onSaleAt, name: `Night ${i}` }))).status).toBe(201);
      }),
    );
    const seen: string[] = [];
    let cursor: string | undefined;
    let pages = 0;
    do {
      const query = `limit=2${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`;
      const page = await json(await gw.request(`/v1/admin/events?${query}`, { token: BOARD }), 200);
      for (const e of page.events as { eventId: string; sale: { state: string; room: string } }[]) {
        seen.push(e.eventId);
        if (ids.includes(e.eventId)) expect(e.sale).toMatchObject({ state: "scheduled", room: "prequeue" });
      }
      cursor = page.cursor as string | undefined;
      pages++;
    } while (cursor && pages < 50);
    // the other tests' events are in this table too: ours in order, each once
    expect(seen.filter((id) => ids.includes(id))).toEqual([...ids].reverse());
    expect(new Set(seen).size).toBe(seen.length);
    expect(pages).toBeGreaterThanOrEqual(3);

    const bad = await gw.request(`/v1/admin/events?cursor=${Buffer.from('{"PK":"x"}').toString("base64url")}`, {
      token: BOARD,
    });
    expect(((await json(bad, 400)).error as Json).code).toBe("invalid_request");

    const one = await json(await gw.request(`/v1/admin/events/${ids[0]}`, { token: BOARD }), 200);
    expect(one).toMatchObject({
      eventId: ids[0],
      name: "Night 0",
      totalSeats: 70,
      sale: { state: "scheduled", room: "prequeue" },
      roomSettings: { admitPerSecond: 10_000, closed: false, paused: false },
    });
    expect((one.lottery as { commitment: string }).commitment).toMatch(/^[0-9a-f]{64}$/);
    expect((await gw.request(`/v1/admin/events/${uniqueId()}`, { token: BOARD })).status).toBe(404);
  });
});

describe("open now", () => {
  it("moves the on-sale to now: the pre-queue is drawn, fans are admitted and may hold at once", async () => {
    const eventId = uniqueId();
    expect((await putEvent(gw, eventId, eventInput({ onSaleAt: later() }))).status).toBe(201);
    const fans = Array.from({ length: 20 }, (_, i) => `early-${i}`);
    const joined = await Promise.all(
      fans.map(async (fanId) =>
        json(await gw.request(`/v1/events/${eventId}/queue`, { method: "POST", json: { fanId } }), 201),
      ),
    );
    expect(new Set(joined.map((j) => j.status))).toEqual(new Set(["prequeue"]));

    // Several operators press it at once: one opens, the rest find it open.
    const opened = await Promise.all(
      Array.from({ length: 5 }, () =>
        gw.request(`/v1/admin/events/${eventId}/open-now`, { method: "POST", token: ALICE }),
      ),
    );
    const bodies = await Promise.all(opened.map((r) => json(r, 200)));
    expect(bodies.filter((b) => b.changed === true)).toHaveLength(1);
    const onSaleAt = Date.parse(bodies[0]!.onSaleAt as string);
    expect(Math.abs(onSaleAt - Date.now())).toBeLessThan(10_000);
    expect(new Set(bodies.map((b) => b.onSaleAt))).toEqual(new Set([bodies[0]!.onSaleAt]));
    expect((bodies[0]!.sale as Json).state).toBe("on_sale");
    expect((bodies[0]!.lottery as { seed?: string }).seed).toMatch(/^[0-9a-f]+$/);

    // the pre-queued fans are admitted and may hold (before, a hold was refused: not on sale)
    const admitted = await admitFans(gw, eventId, fans.slice(0, 3));
    const held = await Promise.all(admitted.map((f, i) => hold(eventId, f.accessToken, `A-1-${i + 1}`)));
    expect(held.map((r) => r.status)).toEqual([201, 201, 201]);

    // it can no longer be replaced; the stored event says on sale
    expect((await putEvent(gw, eventId, eventInput())).status).toBe(409);
    const view = await json(await gw.request(`/v1/admin/events/${eventId}`, { token: BOARD }), 200);
    expect(view.sale).toMatchObject({ state: "on_sale", room: "open" });
    expect(view.onSaleAt).toBe(bodies[0]!.onSaleAt);
    const history = await json(
      await gw.request(`/v1/admin/events/${eventId}/waiting-room/history`, { token: BOARD }),
      200,
    );
    expect((history.changes as { kind: string }[])[0]!.kind).toBe("open");
  });
});

describe("close the sale, then end the event", () => {
  it("close-sale stops joins and admissions while admitted fans still buy; end refuses holds, the audit trail stays", async () => {
    const eventId = uniqueId();
    expect(
      (
        await putEvent(
          gw,
          eventId,
          eventInput({ waitingRoom: { admitPerSecond: 10_000, maxActive: 3, sessionSeconds: 600 } }),
        )
      ).status,
    ).toBe(201);
    const [, ben, dan] = await admitFans(gw, eventId, ["ann", "ben", "dan"]);
    // a fourth fan waits: the room holds three sessions
    const cat = await json(
      await gw.request(`/v1/events/${eventId}/queue`, { method: "POST", json: { fanId: "cat" } }),
      201,
    );
    expect(cat.status).toBe("waiting");

    const closed = await json(
      await gw.request(`/v1/admin/events/${eventId}/close-sale`, { method: "POST", token: ALICE }),
      200,
    );
    expect(closed).toMatchObject({ changed: true, sale: { state: "sale_closed", room: "closed" } });
    const again = await json(
      await gw.request(`/v1/admin/events/${eventId}/close-sale`, { method: "POST", token: ALICE }),
      200,
    );
    expect(again.changed).toBe(false);

    // no new places, on many requests at once
    const joins = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        gw.request(`/v1/events/${eventId}/queue`, { method: "POST", json: { fanId: `late-${i}` } }),
      ),
    );
    expect(new Set(joins.map((r) => r.status))).toEqual(new Set([403]));
    // ann's session ends (she is revoked): no admission into the freed slot, cat still waits
    expect(
      (
        await gw.request(`/v1/admin/events/${eventId}/revocations`, {
          method: "POST",
          token: ALICE,
          json: { fanId: "ann" },
        })
      ).status,
    ).toBe(200);
    const catNow = await json(
      await gw.request(`/v1/events/${eventId}/queue/status`, { token: cat.queueToken as string }),
      200,
    );
    expect(catNow.status).not.toBe("admitted");

    // ben, admitted before, finishes his checkout
    const held = await json(await hold(eventId, ben!.accessToken, "A-2-2"), 201);
    const bought = await gw.request(`/v1/events/${eventId}/holds/${held.holdId as string}/purchase`, {
      method: "POST",
      token: ben!.accessToken,
      headers: { "idempotency-key": `ben-${eventId}` },
      json: { paymentToken: "tok_ok" },
    });
    expect([201, 202]).toContain(bought.status);
    const purchase = (await bought.json()) as { purchaseId: string };

    // the room's settings history has the close, who did it and what it was
    const history = await json(
      await gw.request(`/v1/admin/events/${eventId}/waiting-room/history`, { token: BOARD }),
      200,
    );
    expect((history.changes as Json[])[0]).toMatchObject({
      kind: "settings",
      by: "alice",
      settings: { closed: { from: "0", to: "1" } },
    });

    // end: holds refused; /close is the same action (same closedAt)
    const ended = await json(
      await gw.request(`/v1/admin/events/${eventId}/end`, { method: "POST", token: ALICE }),
      200,
    );
    expect(ended.roomClosed).toBe(true);
    const aliased = await json(
      await gw.request(`/v1/admin/events/${eventId}/close`, { method: "POST", token: ADMIN_TOKEN }),
      200,
    );
    expect(aliased.closedAt).toBe(ended.closedAt);
    // dan's session is still active (ben's ended when he bought): his hold is refused, the event is not on sale
    const refused = await hold(eventId, dan!.accessToken, "A-3-3");
    expect(refused.status).toBe(403);

    // the trail stays readable: the purchase, the stats, the event's state and its action log
    const read = await gw.request(`/v1/purchases/${purchase.purchaseId}`, { token: ben!.accessToken });
    expect(read.status).toBe(200);
    const stats = await json(await gw.request(`/v1/admin/events/${eventId}/stats`, { token: BOARD }), 200);
    expect((stats.seats as Json).held).toBe(0);
    expect((stats.purchases as Json).confirmed as number).toBeGreaterThanOrEqual(0);
    const view = await json(await gw.request(`/v1/admin/events/${eventId}`, { token: BOARD }), 200);
    expect(view.sale).toMatchObject({ state: "ended", closedAt: ended.closedAt });
    const actions = await actionsOf(eventId);
    expect(actions.slice(0, 5).map((a) => [a.operator, a.route])).toEqual([
      ["default", "/v1/admin/events/{eventId}/close"],
      ["alice", "/v1/admin/events/{eventId}/end"],
      ["alice", "/v1/admin/events/{eventId}/revocations"],
      ["alice", "/v1/admin/events/{eventId}/close-sale"],
      ["alice", "/v1/admin/events/{eventId}/close-sale"],
    ]);
    expect(actions[2]!.summary).toEqual({ fanId: "ann" });
    // an ended event cannot be opened
    expect((await gw.request(`/v1/admin/events/${eventId}/open-now`, { method: "POST", token: ALICE })).status).toBe(
      403,
    );
    // nor can the ended event's room be opened again (as open-now refuses): no fan is placed
    const reopened = await gw.request(`/v1/admin/events/${eventId}/waiting-room`, {
      method: "PATCH",
      token: ALICE,
      json: { closed: false },
    });
    expect(reopened.status).toBe(403);
    expect(((await reopened.json()) as { error: { code: string } }).error.code).toBe("forbidden");
    const late = await gw.request(`/v1/events/${eventId}/queue`, { method: "POST", json: { fanId: "after-the-end" } });
    expect(late.status).toBe(403);
  });
});

describe("reopening the room while the event ends", () => {
  it("an end that commits between the reopen's check and its write still leaves the room closed", async () => {
    const eventId = uniqueId();
    expect((await putEvent(gw, eventId)).status).toBe(201);
    await json(await gw.request(`/v1/admin/events/${eventId}/close-sale`, { method: "POST", token: ALICE }), 200);
    // The interleaving forced: the reopen's first read of the event (real DynamoDB) answers "not
    // ended", and the whole end (the event committed, the room closed) runs right after it,
    // before the reopen writes the room.
    const events = gw.deps.events;
    const get = events.get.bind(events);
    let reads = 0;
    events.get = async (id: string) => {
      const read = await get(id);
      if (id === eventId && ++reads === 1) {
        const ended = await gw.request(`/v1/admin/events/${eventId}/end`, { method: "POST", token: ALICE });
        expect(ended.status).toBe(200);
      }
      return read;
    };
    try {
      const reopened = await gw.request(`/v1/admin/events/${eventId}/waiting-room`, {
        method: "PATCH",
        token: ALICE,
        json: { closed: false },
      });
      expect(reopened.status).toBe(403);
    } finally {
      events.get = get;
    }
    expect(reads).toBeGreaterThanOrEqual(2);
    const stats = await json(await gw.request(`/v1/admin/events/${eventId}/stats`, { token: BOARD }), 200);
    expect(stats.waitingRoom).toMatchObject({ state: "closed" });
    const late = await gw.request(`/v1/events/${eventId}/queue`, { method: "POST", json: { fanId: "slipped-in" } });
    expect(late.status).toBe(403);
  });
});

describe("close the sale, then Redis loses the room", () => {
  it("the room comes back from the stored event closed: nobody takes a place or is admitted", async () => {
    const eventId = uniqueId();
    expect((await putEvent(gw, eventId)).status).toBe(201);
    await json(await gw.request(`/v1/admin/events/${eventId}/close-sale`, { method: "POST", token: ALICE }), 200);
    expect((await gw.deps.waitingRoom.remove(eventId)).ok).toBe(true);

    // the next read restores the room from DynamoDB (issue 29 item 3: closed, not merely paused)
    const stats = await json(await gw.request(`/v1/admin/events/${eventId}/stats`, { token: BOARD }), 200);
    expect(stats.waitingRoom).toMatchObject({ state: "closed" });
    for (const fanId of ["x1", "x2", "x3"]) {
      expect((await gw.request(`/v1/events/${eventId}/queue`, { method: "POST", json: { fanId } })).status).toBe(403);
    }
  });
});

describe("revoke", () => {
  it("many fans revoked at once: each token stops at once on the claim path, their slots go to the fans waiting", async () => {
    const eventId = uniqueId();
    const maxActive = 10;
    expect(
      (
        await putEvent(
          gw,
          eventId,
          eventInput({ waitingRoom: { admitPerSecond: 10_000, maxActive, sessionSeconds: 600 } }),
        )
      ).status,
    ).toBe(201);
    const first = await admitFans(
      gw,
      eventId,
      Array.from({ length: maxActive }, (_, i) => `first-${i}`),
    );
    const waiting = await Promise.all(
      Array.from({ length: maxActive }, async (_, i) =>
        json(await gw.request(`/v1/events/${eventId}/queue`, { method: "POST", json: { fanId: `next-${i}` } }), 201),
      ),
    );
    expect(waiting.every((w) => w.status === "waiting")).toBe(true);

    const revoked = await Promise.all(
      first.map((f) =>
        gw.request(`/v1/admin/events/${eventId}/revocations`, {
          method: "POST",
          token: ALICE,
          json: { fanId: f.fanId },
        }),
      ),
    );
    const bodies = await Promise.all(revoked.map((r) => json(r, 200)));
    expect(bodies.every((b) => b.freed === true && b.status === "revoked")).toBe(true);
    // every revoked token is refused on its next claim, all at once
    const holds = await Promise.all(first.map((f, i) => hold(eventId, f.accessToken, `A-4-${i + 1}`)));
    expect(new Set(holds.map((r) => r.status))).toEqual(new Set([401]));
    // a revoked fan may not take a new place
    expect(
      (await gw.request(`/v1/events/${eventId}/queue`, { method: "POST", json: { fanId: "first-0" } })).status,
    ).toBe(403);
    // the freed slots went to the fans waiting
    const next = await admitFans(
      gw,
      eventId,
      waiting.map((_, i) => `next-${i}`),
    );
    expect(next).toHaveLength(maxActive);
    const stats = await json(await gw.request(`/v1/admin/events/${eventId}/stats`, { token: BOARD }), 200);
    expect(stats.active).toBe(maxActive);

    // a repeat frees nothing; a fan still in line or unknown: 404 with why
    const repeat = await json(
      await gw.request(`/v1/admin/events/${eventId}/revocations`, {
        method: "POST",
        token: ALICE,
        json: { fanId: "first-1" },
      }),
      200,
    );
    expect(repeat.freed).toBe(false);
    await json(await gw.request(`/v1/events/${eventId}/queue`, { method: "POST", json: { fanId: "in-line" } }), 201);
    const inLine = await json(
      await gw.request(`/v1/admin/events/${eventId}/revocations`, {
        method: "POST",
        token: ALICE,
        json: { fanId: "in-line" },
      }),
      404,
    );
    expect((inLine.error as { details: Json }).details.status).toBe("waiting");
    expect(
      (
        await gw.request(`/v1/admin/events/${eventId}/revocations`, {
          method: "POST",
          token: ALICE,
          json: { fanId: "nobody" },
        })
      ).status,
    ).toBe(404);
    expect(
      (
        await gw.request(`/v1/admin/events/${eventId}/revocations`, {
          method: "POST",
          token: ALICE,
          json: { fan: "x" },
        })
      ).status,
    ).toBe(400);
  });
});

describe("the admission rate's range", () => {
  it("admitPerSecond is 0 (stopped) or 0.001..100000 a second: anything else is a 400 naming the field", async () => {
    const refused = async (res: Response, path: string) => {
      const body = await json(res, 400);
      const error = body.error as { code: string; requestId: string; details: { issues: Array<{ path: string }> } };
      expect(error.code).toBe("invalid_request");
      expect(error.requestId).toBeTruthy();
      expect(error.details.issues.map((i) => i.path)).toContain(path);
    };
    const room = (admitPerSecond: number) => ({ admitPerSecond, maxActive: 100, sessionSeconds: 600 });
    for (const rate of [1e-300, 0.0009, 100_000.5, 1e300, -1]) {
      const eventId = uniqueId();
      const res = await putEvent(gw, eventId, eventInput({ onSaleAt: later(), waitingRoom: room(rate) }));
      await refused(res, "waitingRoom.admitPerSecond");
    }
    const eventId = uniqueId();
    expect((await putEvent(gw, eventId, eventInput({ onSaleAt: later(), waitingRoom: room(0.001) }))).status).toBe(201);
    const patch = (body: Json) =>
      gw.request(`/v1/admin/events/${eventId}/waiting-room`, { method: "PATCH", token: ALICE, json: body });
    for (const rate of [1e-300, 5e-324, 0.0009, 100_000.5, 1e300, -0.001]) {
      await refused(await patch({ admitPerSecond: rate }), "admitPerSecond");
      await refused(await patch({ autoAdmit: { minPerSecond: rate } }), "autoAdmit.minPerSecond");
      await refused(await patch({ autoAdmit: { maxPerSecond: rate } }), "autoAdmit.maxPerSecond");
    }
    // The bounds themselves, and 0, are taken.
    for (const rate of [0, 0.001, 100_000, 2.5]) {
      const body = await json(await patch({ admitPerSecond: rate }), 200);
      expect(body.admitPerSecond).toBe(rate);
    }
    expect(
      (await json(await patch({ autoAdmit: { minPerSecond: 0, maxPerSecond: 0.001 } }), 200)).autoAdmit,
    ).toMatchObject({ minPerSecond: 0, maxPerSecond: 0.001 });
  });
});

describe("settings history and the action log", () => {
  it("every PATCH with its old and new values and who; the day's log pages back through every action", async () => {
    const eventId = uniqueId();
    expect((await putEvent(gw, eventId, eventInput({ onSaleAt: later() }))).status).toBe(201);
    const patches = [{ admitPerSecond: 5 }, { maxActive: 3, paused: true }, { admitPerSecond: 9 }];
    for (const [i, patch] of patches.entries()) {
      const token = i % 2 === 0 ? ALICE : ADMIN_TOKEN;
      expect(
        (await gw.request(`/v1/admin/events/${eventId}/waiting-room`, { method: "PATCH", token, json: patch })).status,
      ).toBe(200);
    }
    const history = await json(
      await gw.request(`/v1/admin/events/${eventId}/waiting-room/history?limit=3`, { token: BOARD }),
      200,
    );
    expect(history.changes).toMatchObject([
      { kind: "settings", by: "alice", settings: { admitPerSecond: { from: "5", to: "9" } } },
      {
        kind: "settings",
        by: "default",
        settings: { maxActive: { from: "10000", to: "3" }, paused: { from: "0", to: "1" } },
      },
      { kind: "settings", by: "alice", settings: { admitPerSecond: { from: "10000", to: "5" } } },
    ]);

    // the day's log, newest first, two at a time, reaches this event's PUT
    const day = new Date().toISOString().slice(0, 10);
    const ours: Action[] = [];
    let cursor: string | undefined;
    let pages = 0;
    do {
      const page = await json(
        await gw.request(`/v1/admin/action-log?day=${day}&limit=2${cursor ? `&cursor=${cursor}` : ""}`, {
          token: BOARD,
        }),
        200,
      );
      ours.push(...(page.actions as Action[]).filter((a) => a.eventId === eventId));
      cursor = page.cursor as string | undefined;
      pages++;
    } while (cursor && pages < 500);
    expect(ours.map((a) => a.method)).toEqual(["PATCH", "PATCH", "PATCH", "PUT"]);
    expect(
      ((await json(await gw.request(`/v1/admin/action-log?cursor=bad`, { token: BOARD }), 400)).error as Json).code,
    ).toBe("invalid_request");
    expect((await gw.request(`/v1/admin/action-log?day=yesterday`, { token: BOARD })).status).toBe(400);
    // the shape of a date is not enough: the day must exist
    for (const day of ["2026-13-45", "2026-02-30", "2026-00-10"]) {
      expect((await gw.request(`/v1/admin/action-log?day=${day}`, { token: BOARD })).status, day).toBe(400);
    }
    expect((await gw.request(`/v1/admin/action-log?day=2028-02-29`, { token: BOARD })).status).toBe(200);
  });
});
