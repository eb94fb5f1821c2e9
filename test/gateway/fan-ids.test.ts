/**
 * A place only its fan can use (issue 29 item 2), over HTTP against the real Redis and the local
 * DynamoDB: a join without a fan id is given an unguessable one, and an event with
 * `waitingRoom.fanIds: "issued"` takes no other, so the place of a fan id someone can say (or find
 * from the lottery's hash of it) cannot be taken there. Both servers answer alike: the app, and
 * the join's fast path (src/http/fast-path.ts) on a real socket.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mintInvite } from "../../src/waiting-room/invites.js";
import { createFanIdIssuer } from "../../src/waiting-room/fan-ids.js";
import { solveChallenge } from "../../src/waiting-room/proof-of-work.js";
import { exchange } from "../support/exchange.js";
import { type FastPathPair, startFastPathPair } from "./fast-path-harness.js";
import { ADMIN_TOKEN, createTable, eventInput, type Gateway, putEvent, uniqueId } from "./harness.js";

const INVITE_SECRET = "operator-invite-secret-0123456789-abcdef";
const ISSUED = /^f\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{16}$/;
/** Whose place a queue token is (its `sub`): a repeat join signs it again, so its bytes change with the second. */
const holderOf = (token: unknown) =>
  (JSON.parse(Buffer.from(String(token).split(".")[1] ?? "", "base64url").toString("utf8")) as { sub: string }).sub;

let pair: FastPathPair;
let gw: Gateway;
let fastPort: number;
beforeAll(async () => {
  pair = await startFastPathPair({ tableName: await createTable(), invites: { secret: INVITE_SECRET } });
  ({ gw, fastPort } = pair);
}, 120_000);
afterAll(async () => {
  await pair?.close();
});

type Json = Record<string, unknown>;
async function json(res: Response, status: number): Promise<Json> {
  const text = await res.text();
  if (res.status !== status) throw new Error(`expected ${status}, got ${res.status}: ${text}`);
  return JSON.parse(text) as Json;
}

async function newEvent(fanIds?: "any" | "issued"): Promise<string> {
  const eventId = uniqueId("fid");
  const base = eventInput();
  const input = fanIds ? { ...base, waitingRoom: { ...base.waitingRoom, fanIds } } : base;
  await json(await putEvent(gw, eventId, input), 201);
  return eventId;
}

/** The room's settings, as the operator sets them (PATCH .../waiting-room). */
async function setRoom(eventId: string, settings: Json): Promise<void> {
  await json(
    await gw.request(`/v1/admin/events/${eventId}/waiting-room`, {
      method: "PATCH",
      json: settings,
      token: ADMIN_TOKEN,
    }),
    200,
  );
}

/** An operator's invite for `identity`, good for an hour. */
const inviteOf = (identity: string, eventId: string) =>
  mintInvite({ identity, eventId, exp: Math.floor(Date.now() / 1000) + 3600 }, { secret: INVITE_SECRET });

const join = (eventId: string, body: Json) => gw.request(`/v1/events/${eventId}/queue`, { method: "POST", json: body });
/** The same join on a real socket of the server with the fast paths. */
async function joinFast(eventId: string, body: Json): Promise<{ status: number; body: Json }> {
  const text = JSON.stringify(body);
  const r = await exchange(
    `http://127.0.0.1:${fastPort}/v1/events/${eventId}/queue`,
    { "content-type": "application/json", "content-length": String(Buffer.byteLength(text)) },
    "POST",
    text,
  );
  return { status: r.status, body: JSON.parse(r.body.toString("utf8")) as Json };
}

describe("fan ids the gateway issues", () => {
  it("a join without a fan id is given one; its repeat is the same place, another join without one a new place", async () => {
    const eventId = await newEvent();
    const first = await json(await join(eventId, {}), 201);
    expect(first.fanId).toMatch(ISSUED);
    const again = await json(await join(eventId, { fanId: first.fanId }), 200);
    expect(again).toMatchObject({ fanId: first.fanId, position: first.position });
    expect(holderOf(again.queueToken)).toBe(first.fanId);

    // Many fans at once, none naming itself: as many places, none shared.
    const crowd = await Promise.all(Array.from({ length: 40 }, async () => json(await join(eventId, {}), 201)));
    const ids = new Set(crowd.map((b) => b.fanId));
    expect(ids.size).toBe(40);
    expect(ids.has(first.fanId)).toBe(false);
    expect(new Set(crowd.map((b) => b.position)).size).toBe(40);
  });

  it("a fan id named by the client is still taken where the event takes any, and the answer names it", async () => {
    const eventId = await newEvent();
    const body = await json(await join(eventId, { fanId: "alice-x1" }), 201);
    expect(body.fanId).toBe("alice-x1");
    const view = await json(await gw.request(`/v1/admin/events/${eventId}`, { token: ADMIN_TOKEN }), 200);
    expect((view.waitingRoom as Json).fanIds).toBe("any");
    expect(await json(await gw.request(`/v1/events/${eventId}/waiting-room`), 200)).toMatchObject({ fanIds: "any" });
  });

  it('an event with fanIds "issued" refuses a fan id it did not issue: alice\'s place cannot be taken by naming her', async () => {
    const eventId = await newEvent("issued");
    const view = await json(await gw.request(`/v1/admin/events/${eventId}`, { token: ADMIN_TOKEN }), 200);
    expect((view.waitingRoom as Json).fanIds).toBe("issued");

    // The public info tells a client to join without a fan id.
    expect(await json(await gw.request(`/v1/events/${eventId}/waiting-room`), 200)).toMatchObject({ fanIds: "issued" });
    const refused = await json(await join(eventId, { fanId: "alice-x1" }), 400);
    expect(refused.error).toMatchObject({ code: "invalid_request", details: { field: "fanId", reason: "not_issued" } });

    const alice = await json(await join(eventId, {}), 201);
    // The attacker knows alice's entry in the lottery (SHA-256 of her fan id) and forges ids:
    // one issued for another event, one with its MAC changed, one made up in the same shape.
    const other = await newEvent("issued");
    const forInOther = (await json(await join(other, {}), 201)).fanId as string;
    const tampered = `${(alice.fanId as string).slice(0, -1)}${(alice.fanId as string).endsWith("A") ? "B" : "A"}`;
    const madeUp = createFanIdIssuer("not-the-gateway-secret-0123456789abcdef").issue(eventId);
    for (const fanId of [forInOther, tampered, madeUp]) {
      const body = await json(await join(eventId, { fanId }), 400);
      expect((body.error as Json).details).toMatchObject({ reason: "not_issued" });
    }
    // Alice herself, with the id she was given, keeps her place.
    const back = await json(await join(eventId, { fanId: alice.fanId }), 200);
    expect(back.position).toBe(alice.position);
    expect(holderOf(back.queueToken)).toBe(alice.fanId);
  });

  it("the fast path answers as the app: an issued id for {}, the same place on a repeat, no chosen id on an issued-only event", async () => {
    const anyEvent = await newEvent();
    const issuedEvent = await newEvent("issued");
    for (const eventId of [anyEvent, issuedEvent]) {
      const first = await joinFast(eventId, {});
      expect(first.status).toBe(201);
      expect(first.body.fanId).toMatch(ISSUED);
      const again = await joinFast(eventId, { fanId: first.body.fanId });
      expect(again.status).toBe(200);
      expect(again.body.position).toBe(first.body.position);
      expect(holderOf(again.body.queueToken)).toBe(first.body.fanId);
    }
    const named = await joinFast(anyEvent, { fanId: "bob-7" });
    expect(named.status).toBe(201);
    expect(named.body.fanId).toBe("bob-7");
    const refused = await joinFast(issuedEvent, { fanId: "bob-7" });
    expect(refused.status).toBe(400);
    expect(refused.body.error).toMatchObject({ code: "invalid_request", details: { reason: "not_issued" } });
  });

  it("a proof of work: the challenge issues the fan id it is bound to; a proof without the fan id is refused", async () => {
    const eventId = await newEvent("issued");
    await setRoom(eventId, { powBits: 4 });
    const ch = (await json(await gw.request(`/v1/events/${eventId}/queue/challenge`), 200)) as {
      challenge: string;
      fanId: string;
      bits: number;
    };
    expect(ch.fanId).toMatch(ISSUED);
    const nonce = solveChallenge(ch.challenge, ch.bits);
    const noId = await json(await join(eventId, { pow: { challenge: ch.challenge, nonce } }), 400);
    expect((noId.error as Json).details).toMatchObject({ field: "fanId" });
    const joined = await json(await join(eventId, { fanId: ch.fanId, pow: { challenge: ch.challenge, nonce } }), 201);
    expect(joined.fanId).toBe(ch.fanId);
  });

  it("an invite names the person: a rejoin with it and no fan id is that person's place, not a second one", async () => {
    const eventId = await newEvent("issued");
    await setRoom(eventId, { invites: true });
    const invite = inviteOf(`person-${uniqueId("p")}`, eventId);
    // The same person on two devices at once, neither with a fan id: one place between them.
    const [a, b] = await Promise.all([join(eventId, { invite }), join(eventId, { invite })]);
    const bodies = [await a.json(), await b.json()] as Json[];
    expect([a.status, b.status].sort()).toEqual([200, 201]);
    expect(bodies[0]!.fanId).toBe(bodies[1]!.fanId);
    expect(bodies[0]!.position).toBe(bodies[1]!.position);
    expect(holderOf(bodies[1]!.queueToken)).toBe(bodies[0]!.fanId);
    const later = await json(await join(eventId, { invite }), 200);
    expect(later.fanId).toBe(bodies[0]!.fanId);
  });

  it("in a line for invited fans only, a fan id alone does not give a place back: its invite does", async () => {
    const eventId = await newEvent();
    await setRoom(eventId, { invites: true });
    const invite = inviteOf(`alice-${uniqueId("p")}`, eventId);
    const alice = await json(await join(eventId, { fanId: "alice-x1", invite }), 201);
    // Someone who knows (or guessed) her fan id, on both servers: no token, asked for the invite.
    const byApp = await json(await join(eventId, { fanId: "alice-x1" }), 428);
    expect(byApp.error).toMatchObject({ code: "invite_required" });
    expect(byApp).not.toHaveProperty("queueToken");
    const byFast = await joinFast(eventId, { fanId: "alice-x1" });
    expect(byFast.status).toBe(428);
    expect(byFast.body).not.toHaveProperty("queueToken");
    // Alice, with her invite, gets her place back.
    const back = await json(await join(eventId, { fanId: "alice-x1", invite }), 200);
    expect(back.position).toBe(alice.position);
    expect(holderOf(back.queueToken)).toBe("alice-x1");
  });

  it("invites and a proof of work: the 428 names the id the person is held under, and the proof for it gets the place", async () => {
    const eventId = await newEvent("issued");
    await setRoom(eventId, { invites: true, powBits: 4 });
    const invite = inviteOf(`both-${uniqueId("p")}`, eventId);
    const asked = await json(await join(eventId, { invite }), 428);
    expect(asked.error).toMatchObject({ code: "proof_of_work_required" });
    const fanId = ((asked.error as Json).details as Json).fanId as string;
    expect(fanId).toMatch(ISSUED);
    // Asked again (another device, the same person): the same id, not a second one.
    const again = await json(await join(eventId, { invite }), 428);
    expect(((again.error as Json).details as Json).fanId).toBe(fanId);
    const ch = (await json(
      await gw.request(`/v1/events/${eventId}/queue/challenge?fanId=${encodeURIComponent(fanId)}`),
      200,
    )) as { challenge: string; bits: number };
    const nonce = solveChallenge(ch.challenge, ch.bits);
    const joined = await json(await join(eventId, { fanId, invite, pow: { challenge: ch.challenge, nonce } }), 201);
    expect(joined.fanId).toBe(fanId);
    expect(await json(await join(eventId, { invite }), 200)).toMatchObject({ fanId, position: joined.position });
  });

  it("an invite of one's own does not take another's place: naming her fan id with it is refused, and leaves the invite free", async () => {
    const eventId = await newEvent();
    await setRoom(eventId, { invites: true });
    const aliceInvite = inviteOf(`alice-${uniqueId("p")}`, eventId);
    const malloryInvite = inviteOf(`mallory-${uniqueId("p")}`, eventId);
    const alice = await json(await join(eventId, { fanId: "alice-x2", invite: aliceInvite }), 201);
    // Mallory names alice's fan id with an invite of her own, twice (a retry must not pass).
    for (let i = 0; i < 2; i++) {
      const refused = await json(await join(eventId, { fanId: "alice-x2", invite: malloryInvite }), 403);
      expect(refused.error).toMatchObject({ code: "invalid_invite", details: { reason: "fan_id_held" } });
      expect(refused).not.toHaveProperty("queueToken");
    }
    // Her invite is still hers to use, for a place of her own.
    const own = await json(await join(eventId, { fanId: "mallory-1", invite: malloryInvite }), 201);
    expect(own.position).not.toBe(alice.position);
    const back = await json(await join(eventId, { fanId: "alice-x2", invite: aliceInvite }), 200);
    expect(back.position).toBe(alice.position);
  });
});
