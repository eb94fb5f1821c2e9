/**
 * Operator decisions survive an event's replacement and a Redis loss (issue 29 item 3), over HTTP
 * against the real Redis and the local DynamoDB: the room's settings (invites, proof of work,
 * pause), a closed sale, an invite's identity claim and a revocation are each set, the event
 * replaced where it can be, the room's Redis keys deleted (as Redis losing them), and the room that
 * comes back must enforce the same thing.
 */
import { GetCommand, UpdateCommand } from "@aws-sdk/lib-dynamodb";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { createDocumentClient } from "../../src/dynamodb/client.js";
import { keys } from "../../src/inventory/keys.js";
import { mintInvite } from "../../src/waiting-room/invites.js";
import {
  ADMIN_TOKEN,
  admitFans,
  createTable,
  eventInput,
  type Gateway,
  metricTotal,
  putEvent,
  startGateway,
  uniqueId,
} from "./harness.js";

const INVITE_SECRET = "operator-invite-secret-0123456789-abcdef";

let gw: Gateway;
let redis: Redis;
let tableName: string;
beforeAll(async () => {
  tableName = await createTable();
  gw = await startGateway({ tableName, invites: { secret: INVITE_SECRET } });
  redis = new Redis(inject("redisUrl"));
});
afterAll(async () => {
  redis.disconnect();
  await gw.close();
});

type Json = Record<string, unknown>;
async function json(res: Response, status: number): Promise<Json> {
  const text = await res.text();
  if (res.status !== status) throw new Error(`expected ${status}, got ${res.status}: ${text}`);
  return JSON.parse(text) as Json;
}

/** Redis loses the room: every key of the event's line, its identity map included. */
async function loseRoom(eventId: string): Promise<void> {
  const found = await redis.keys(`wr:{evt:${eventId}}*`);
  expect(found.length).toBeGreaterThan(0);
  await redis.del(...found);
}

/** An event an hour before its on-sale: it may still be replaced. */
const later = (overrides: Parameters<typeof eventInput>[0] = {}) =>
  eventInput({ onSaleAt: new Date(Date.now() + 3_600_000).toISOString(), ...overrides });

const patch = (eventId: string, body: Json) =>
  gw.request(`/v1/admin/events/${eventId}/waiting-room`, { method: "PATCH", json: body, token: ADMIN_TOKEN });
const join = (eventId: string, body: Json) => gw.request(`/v1/events/${eventId}/queue`, { method: "POST", json: body });
const adminView = async (eventId: string) =>
  json(await gw.request(`/v1/admin/events/${eventId}`, { token: ADMIN_TOKEN }), 200);
const storedItem = async (eventId: string) => {
  const doc = createDocumentClient(gw.deps.clients.dynamo);
  const out = await doc.send(new GetCommand({ TableName: tableName, Key: keys.event(eventId), ConsistentRead: true }));
  return out.Item ?? {};
};
const invite = (eventId: string, identity: string) =>
  mintInvite({ eventId, identity, exp: Math.floor(Date.now() / 1000) + 600 }, { secret: INVITE_SECRET });

describe("the room's settings", () => {
  it("survive a replacement and a Redis loss; a replaced waitingRoom block applies to both stores", async () => {
    const eventId = uniqueId("keep");
    await json(await putEvent(gw, eventId, later()), 201);
    await json(await patch(eventId, { invites: true, powBits: 4, paused: true, abandonSeconds: 90 }), 200);
    const decided = { invites: true, powBits: 4, paused: true, abandonSeconds: 90 };

    // The same event again: the operator's decisions stay, in Redis and on the stored event.
    await json(await putEvent(gw, eventId, later()), 200);
    expect(await adminView(eventId)).toMatchObject({ roomSettings: { ...decided, closed: false } });
    expect((await storedItem(eventId)).roomSettings).toMatchObject(decided);

    await loseRoom(eventId);
    const refused = await join(eventId, { fanId: "no_invite" });
    expect(refused.status).toBe(428);
    // Proof of work is asked first; the invite after it (both are on, below).
    expect(((await refused.json()) as Json).error).toMatchObject({ code: "proof_of_work_required" });
    expect(await adminView(eventId)).toMatchObject({
      roomSettings: { ...decided, admitPerSecond: 10_000, maxActive: 10_000, sessionSeconds: 600 },
    });
    // The operator's figures show the same settings.
    const stats = await json(await gw.request(`/v1/admin/events/${eventId}/stats`, { token: ADMIN_TOKEN }), 200);
    expect(stats.waitingRoom).toMatchObject({ settings: { ...decided, closed: false } });

    // A replacement that changes the block: the new values in force in both stores, the rest kept.
    const changed = later({ waitingRoom: { admitPerSecond: 20, maxActive: 77, sessionSeconds: 300 } });
    await json(await putEvent(gw, eventId, changed), 200);
    const inForce = { ...decided, admitPerSecond: 20, maxActive: 77, sessionSeconds: 300 };
    expect(await adminView(eventId)).toMatchObject({ roomSettings: inForce });
    expect((await storedItem(eventId)).roomSettings).toMatchObject(inForce);
    await loseRoom(eventId);
    expect((await join(eventId, { fanId: "no_invite" })).status).toBe(428);
    expect(await adminView(eventId)).toMatchObject({ roomSettings: inForce });
  });

  it("survive the event being set up again from the store (a demo's restart)", async () => {
    const eventId = uniqueId("setup");
    await json(await putEvent(gw, eventId, later()), 201);
    await json(await patch(eventId, { invites: true, admitPerSecond: 5, abandonSeconds: 90 }), 200);
    expect(await gw.deps.events.restore(eventId, gw.deps.logger)).toBe(true);
    expect(await adminView(eventId)).toMatchObject({
      roomSettings: { invites: true, admitPerSecond: 5, abandonSeconds: 90 },
    });
  });

  it("a PATCH sent again is kept on the event even when Redis already has it", async () => {
    const eventId = uniqueId("again");
    await json(await putEvent(gw, eventId, later()), 201);
    await json(await patch(eventId, { invites: true }), 200);
    // The copy did not land (DynamoDB failed then, or an older gateway dropped it).
    const doc = createDocumentClient(gw.deps.clients.dynamo);
    await doc.send(
      new UpdateCommand({ TableName: tableName, Key: keys.event(eventId), UpdateExpression: "REMOVE roomSettings" }),
    );
    await json(await patch(eventId, { invites: true }), 200);
    expect((await storedItem(eventId)).roomSettings).toMatchObject({ invites: true });
    await loseRoom(eventId);
    expect((await join(eventId, { fanId: "no_invite" })).status).toBe(428);
  });
});

describe("a closed sale", () => {
  it("stays closed after a Redis loss, and an un-pause does not reopen it", async () => {
    const eventId = uniqueId("closed");
    await json(await putEvent(gw, eventId), 201);
    await json(await join(eventId, { fanId: "before" }), 201);
    await json(await gw.request(`/v1/admin/events/${eventId}/close-sale`, { method: "POST", token: ADMIN_TOKEN }), 200);
    expect((await join(eventId, { fanId: "after" })).status).toBe(403);

    await loseRoom(eventId);
    const refused = await join(eventId, { fanId: "after_loss" });
    expect(refused.status).toBe(403);
    expect(((await refused.json()) as Json).error).toMatchObject({ code: "forbidden" });
    expect(await adminView(eventId)).toMatchObject({
      sale: { state: "sale_closed", room: "closed" },
      roomSettings: { closed: true },
    });

    await json(await patch(eventId, { paused: false }), 200);
    expect((await join(eventId, { fanId: "after_unpause" })).status).toBe(403);
    expect(await adminView(eventId)).toMatchObject({ sale: { state: "sale_closed" } });
  });
});

describe("an invite's identity", () => {
  it("holds one place across a Redis loss", async () => {
    const eventId = uniqueId("ident");
    await json(await putEvent(gw, eventId), 201);
    await json(await patch(eventId, { invites: true }), 200);
    await json(await join(eventId, { fanId: "holder", invite: invite(eventId, "person_1") }), 201);

    await loseRoom(eventId);
    const devices = await Promise.all(
      Array.from({ length: 5 }, (_, i) => join(eventId, { fanId: `other_${i}`, invite: invite(eventId, "person_1") })),
    );
    for (const res of devices) {
      expect(res.status).toBe(409);
      expect(((await res.json()) as Json).error).toMatchObject({ code: "identity_already_queued" });
    }
    // Its holder takes a place in the new line with it.
    expect((await join(eventId, { fanId: "holder", invite: invite(eventId, "person_1") })).status).toBe(201);
    // Another identity is free as before.
    await json(await join(eventId, { fanId: "second", invite: invite(eventId, "person_2") }), 201);

    // What it costs: an identity's first join writes its claim (one conditional PutItem); its
    // repeats, answered from Redis's cache of the claim, and joins without an invite write nothing.
    const puts = () => metricTotal(gw, "gateway_dynamodb_commands_total", { command: "PutItem" });
    const before = await puts();
    for (let i = 0; i < 10; i++) {
      expect((await join(eventId, { fanId: "second", invite: invite(eventId, "person_2") })).status).toBe(200);
    }
    expect(await puts()).toBe(before);
    await json(await join(eventId, { fanId: "third", invite: invite(eventId, "person_3") }), 201);
    expect(await puts()).toBe(before + 1);
  });
});

describe("who names the fans", () => {
  it('fanIds "issued" holds after a Redis loss; a replacement takes its body\'s value, in the stored event and the join', async () => {
    const eventId = uniqueId("fids");
    const base = later();
    await json(await putEvent(gw, eventId, { ...base, waitingRoom: { ...base.waitingRoom, fanIds: "issued" } }), 201);
    const kept = await json(await join(eventId, {}), 201);

    await loseRoom(eventId);
    expect((await join(eventId, { fanId: "named-by-client" })).status).toBe(400);
    // The id it issued is still one it knows: a place in the line Redis made again.
    expect((await join(eventId, { fanId: kept.fanId })).status).toBe(201);

    // Replaced without the field: the default, `any`, in the stored event and at the join.
    await json(await putEvent(gw, eventId, later()), 200);
    expect(((await adminView(eventId)).waitingRoom as Json).fanIds).toBe("any");
    expect((await join(eventId, { fanId: "named-by-client" })).status).toBe(201);
  });

  it("an invite refused for naming another's fan id is free again after a Redis loss", async () => {
    const eventId = uniqueId("fidinv");
    await json(await putEvent(gw, eventId), 201);
    await json(await patch(eventId, { invites: true }), 200);
    await json(await join(eventId, { fanId: "alice", invite: invite(eventId, "alice_person") }), 201);
    expect((await join(eventId, { fanId: "alice", invite: invite(eventId, "mallory_person") })).status).toBe(403);

    await loseRoom(eventId);
    // The claim was taken back in DynamoDB too: mallory's invite makes a place of her own.
    await json(await join(eventId, { fanId: "mallory", invite: invite(eventId, "mallory_person") }), 201);
  });
});

describe("a revocation", () => {
  it("keeps the fan out after a Redis loss", async () => {
    const eventId = uniqueId("revoke");
    await json(await putEvent(gw, eventId), 201);
    const [bad, good] = await admitFans(gw, eventId, ["bad_fan", "good_fan"]);
    await json(
      await gw.request(`/v1/admin/events/${eventId}/revocations`, {
        method: "POST",
        json: { fanId: "bad_fan" },
        token: ADMIN_TOKEN,
      }),
      200,
    );
    expect((await join(eventId, { fanId: "bad_fan" })).status).toBe(403);

    await loseRoom(eventId);
    const refused = await join(eventId, { fanId: "bad_fan" });
    expect(refused.status).toBe(403);
    expect(((await refused.json()) as Json).error).toMatchObject({ code: "forbidden" });
    // The revoked session's access token, of the lost room's epoch, claims nothing either; another
    // fan's session from before the loss is trusted on its signature as before.
    const hold = (token: string | undefined, seat: string) =>
      gw.request(`/v1/events/${eventId}/holds`, { method: "POST", json: { seats: [seat] }, token: token ?? "" });
    const refusedHold = await hold(bad?.accessToken, "A-1-1");
    expect(refusedHold.status).toBe(401);
    expect(((await refusedHold.json()) as Json).error).toMatchObject({ code: "unauthenticated" });
    expect((await hold(good?.accessToken, "A-1-2")).status).toBe(201);
    await json(await join(eventId, { fanId: "good_fan" }), 201);
  });

  it("stops a fan admitted before a Redis loss, revoked after it, and keeps it revoked through the next loss", async () => {
    const eventId = uniqueId("revlate");
    await json(await putEvent(gw, eventId), 201);
    const [late] = await admitFans(gw, eventId, ["late_fan"]);
    await loseRoom(eventId);
    await json(await join(eventId, { fanId: "someone" }), 201); // the room comes back

    // The new room never knew the fan; its session, from the lost room, is revoked all the same.
    const revoked = await json(
      await gw.request(`/v1/admin/events/${eventId}/revocations`, {
        method: "POST",
        json: { fanId: "late_fan" },
        token: ADMIN_TOKEN,
      }),
      200,
    );
    expect(revoked).toMatchObject({ fanId: "late_fan", freed: false, status: "revoked" });
    const hold = await gw.request(`/v1/events/${eventId}/holds`, {
      method: "POST",
      json: { seats: ["A-2-1"] },
      token: late?.accessToken ?? "",
    });
    expect(hold.status).toBe(401);
    expect((await join(eventId, { fanId: "late_fan" })).status).toBe(403);
    // A repeat is answered as done.
    await json(
      await gw.request(`/v1/admin/events/${eventId}/revocations`, {
        method: "POST",
        json: { fanId: "late_fan" },
        token: ADMIN_TOKEN,
      }),
      200,
    );

    await loseRoom(eventId);
    expect((await join(eventId, { fanId: "late_fan" })).status).toBe(403);
  });
});
