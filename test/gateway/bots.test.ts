/**
 * Bots kept out (issue 18 item 3) over HTTP, against the real Redis and the local DynamoDB: the
 * proof-of-work setting (PATCH, settings, public info), challenges and joins with good and bad
 * proofs in flight at once, a cost raised live, invite tokens and one place per identity under
 * concurrent joins, and the refusal counter.
 */
import { GetCommand } from "@aws-sdk/lib-dynamodb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createDocumentClient } from "../../src/dynamodb/client.js";
import { roomSource } from "../../src/gateway.js";
import { keys } from "../../src/inventory/keys.js";
import { mintInvite } from "../../src/waiting-room/invites.js";
import { solveChallenge, workOf } from "../../src/waiting-room/proof-of-work.js";
import { ADMIN_TOKEN, createTable, type Gateway, putEvent, startGateway, uniqueId } from "./harness.js";

const INVITE_SECRET = "operator-invite-secret-0123456789-abcdef";

let gw: Gateway;
let tableName: string;
beforeAll(async () => {
  tableName = await createTable();
  gw = await startGateway({ tableName, invites: { secret: INVITE_SECRET } });
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

async function newEvent(): Promise<string> {
  const eventId = uniqueId("bots");
  await json(await putEvent(gw, eventId), 201);
  return eventId;
}

const patch = (eventId: string, body: Json) =>
  gw.request(`/v1/admin/events/${eventId}/waiting-room`, { method: "PATCH", json: body, token: ADMIN_TOKEN });
const join = (eventId: string, body: Json) => gw.request(`/v1/events/${eventId}/queue`, { method: "POST", json: body });
const challengeOf = async (eventId: string, fanId: string) =>
  (await json(await gw.request(`/v1/events/${eventId}/queue/challenge?fanId=${encodeURIComponent(fanId)}`), 200)) as {
    challenge: string;
    bits: number;
    expiresAt: string;
  };

async function refusals(): Promise<Record<string, number>> {
  const metric = await gw.deps.metrics.joinRefused.get();
  return Object.fromEntries(metric.values.map((v) => [String(v.labels.reason), v.value]));
}

describe("proof of work on join", () => {
  it("is off by default, set live by PATCH, shown in the settings and the public info", async () => {
    const eventId = await newEvent();
    const before = await json(await gw.request(`/v1/events/${eventId}/waiting-room`), 200);
    expect(before).toMatchObject({ powBits: 0, invites: false });
    await json(await join(eventId, { fanId: "free_fan" }), 201);

    const settings = await json(await patch(eventId, { powBits: 10 }), 200);
    expect(settings).toMatchObject({ powBits: 10, invites: false });
    expect(await json(await gw.request(`/v1/events/${eventId}/waiting-room`), 200)).toMatchObject({ powBits: 10 });
    const history = await json(
      await gw.request(`/v1/admin/events/${eventId}/waiting-room/history`, { token: ADMIN_TOKEN }),
      200,
    );
    expect(JSON.stringify(history)).toContain('"powBits":{"from":"","to":"10"}');

    for (const bad of [{ powBits: 27 }, { powBits: -1 }, { powBits: 1.5 }, { invites: "yes" }]) {
      const body = await json(await patch(eventId, bad), 400);
      expect((body.error as Json).code).toBe("invalid_request");
    }
    // A fan already in line keeps its place without a proof (join is idempotent per fan).
    await json(await join(eventId, { fanId: "free_fan" }), 200);
    // Kept on the stored event with the other operator settings, for a room Redis loses.
    const doc = createDocumentClient(gw.deps.clients.dynamo);
    const item = await doc.send(new GetCommand({ TableName: tableName, Key: keys.event(eventId) }));
    expect(item.Item?.roomSettings).toMatchObject({ powBits: 10, invites: false });
    // ...and read back as such: what a room Redis lost is configured again from (src/gateway.ts roomSource).
    expect(await roomSource(gw.deps.inventory)(eventId)).toMatchObject({ powBits: 10, invites: false });
  });

  it("refuses joins without a proof or with a bad one, admits solved ones, many in flight at once", async () => {
    const eventId = await newEvent();
    const bits = 8;
    await json(await patch(eventId, { powBits: bits }), 200);
    const before = await refusals();

    const fans = Array.from({ length: 60 }, (_, i) => `fan_${i}`);
    const kinds = fans.map((_, i) => (["good", "none", "other_fan", "bad_nonce", "tampered"] as const)[i % 5]);
    const challenges = await Promise.all(fans.map((fanId) => challengeOf(eventId, fanId)));
    expect(challenges.every((c) => c.bits === bits)).toBe(true);

    const results = await Promise.all(
      fans.map(async (fanId, i) => {
        const { challenge } = challenges[i] ?? { challenge: "" };
        const kind = kinds[i];
        let body: Json = { fanId };
        if (kind === "good") body = { fanId, pow: { challenge, nonce: solveChallenge(challenge, bits) } };
        if (kind === "other_fan") {
          // a solved challenge of another fan: bound to that fan, refused
          const theirs = challenges[(i + 1) % fans.length]?.challenge ?? "";
          body = { fanId, pow: { challenge: theirs, nonce: solveChallenge(theirs, bits) } };
        }
        if (kind === "bad_nonce") {
          let nonce = "n";
          for (let j = 0; workOf(challenge, nonce) >= bits; j++) nonce = `n${j}`;
          body = { fanId, pow: { challenge, nonce } };
        }
        if (kind === "tampered") {
          const parts = challenge.split(".");
          const lowered = [...parts.slice(0, 3), "0", ...parts.slice(4)].join(".");
          body = { fanId, pow: { challenge: lowered, nonce: "0" } };
        }
        const res = await join(eventId, body);
        return { kind, status: res.status, body: (await res.json()) as Json };
      }),
    );
    for (const r of results) {
      if (r.kind === "good") expect(r.status).toBe(201);
      else if (r.kind === "none") {
        expect(r.status).toBe(428);
        expect(r.body.error).toMatchObject({ code: "proof_of_work_required", details: { powBits: bits } });
      } else {
        expect(r.status).toBe(400);
        expect((r.body.error as Json).code).toBe("invalid_proof");
      }
    }
    const stats = await gw.deps.waitingRoom.stats(eventId);
    if (!stats.ok) throw new Error(stats.reason);
    expect(stats.stats.joined).toBe(12);
    const after = await refusals();
    expect((after.pow_missing ?? 0) - (before.pow_missing ?? 0)).toBe(12);
    expect((after.pow_invalid ?? 0) - (before.pow_invalid ?? 0)).toBe(36);
  });

  it("refuses a challenge issued before the cost was raised; a new one at the new cost passes", async () => {
    const eventId = await newEvent();
    await json(await patch(eventId, { powBits: 4 }), 200);
    const old = await challengeOf(eventId, "fan_r");
    await json(await patch(eventId, { powBits: 9 }), 200);
    const stale = await join(eventId, {
      fanId: "fan_r",
      pow: { challenge: old.challenge, nonce: solveChallenge(old.challenge, 4) },
    });
    expect(stale.status).toBe(428);
    expect(((await stale.json()) as Json).error).toMatchObject({
      code: "proof_of_work_required",
      details: { powBits: 9 },
    });
    const fresh = await challengeOf(eventId, "fan_r");
    expect(fresh.bits).toBe(9);
    await json(
      await join(eventId, {
        fanId: "fan_r",
        pow: { challenge: fresh.challenge, nonce: solveChallenge(fresh.challenge, 9) },
      }),
      201,
    );
    // Lowering the cost: a challenge of more bits than asked is still enough.
    await json(await patch(eventId, { powBits: 0 }), 200);
    await json(await join(eventId, { fanId: "fan_s" }), 201);
  });

  it("takes the per-IP limit on challenges, and on joins with forged proofs", async () => {
    const limited = await startGateway({ tableName: await createTable(), limits: { ratePerIp: 1 } });
    try {
      const eventId = uniqueId("bots");
      expect((await putEvent(limited, eventId)).status).toBe(201);
      const forged = await Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          limited.request(`/v1/events/${eventId}/queue`, {
            method: "POST",
            json: { fanId: `bot${i}`, pow: { challenge: `pow1.${eventId}.Ym90.0.4102444800000.forged`, nonce: "0" } },
          }),
        ),
      );
      const forgedStatuses = forged.map((r) => r.status);
      expect(forgedStatuses).toContain(400);
      expect(forgedStatuses).toContain(429);
      expect(forgedStatuses.every((s) => s === 400 || s === 429)).toBe(true);
      const answers = await Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          limited.request(`/v1/events/${eventId}/queue/challenge?fanId=f${i}`, {
            headers: { "x-forwarded-for": "9.9.9.9" },
          }),
        ),
      );
      const statuses = answers.map((r) => r.status);
      expect(statuses).toContain(200);
      expect(statuses).toContain(429);
      const refused = answers.find((r) => r.status === 429);
      if (!refused) throw new Error("no 429");
      expect(((await refused.json()) as Json).error).toMatchObject({ code: "rate_limited" });
    } finally {
      await limited.close();
    }
  });

  it("answers bad challenge requests with a JSON error", async () => {
    const eventId = await newEvent();
    const empty = await gw.request(`/v1/events/${eventId}/queue/challenge?fanId=`);
    expect(empty.status).toBe(400);
    expect(((await empty.json()) as Json).error).toMatchObject({ code: "invalid_request" });
    // No fan id: the gateway issues one and binds the challenge to it (test/gateway/fan-ids.test.ts).
    expect(await json(await gw.request(`/v1/events/${eventId}/queue/challenge`), 200)).toHaveProperty("fanId");
    const unknown = await gw.request(`/v1/events/${uniqueId("none")}/queue/challenge?fanId=f`);
    expect(unknown.status).toBe(404);
    const malformed = await join(eventId, { fanId: "f", pow: { challenge: 42 } });
    expect(malformed.status).toBe(400);
  });
});

describe("invite tokens", () => {
  const exp = () => Math.floor(Date.now() / 1000) + 600;
  const invite = (eventId: string, identity: string) =>
    mintInvite({ eventId, identity, exp: exp() }, { secret: INVITE_SECRET });

  it("with invites on, a join needs a valid invite for the event", async () => {
    const eventId = await newEvent();
    expect(await json(await patch(eventId, { invites: true }), 200)).toMatchObject({ invites: true });
    const before = await refusals();
    const none = await join(eventId, { fanId: "fan_a" });
    expect(none.status).toBe(428);
    expect(((await none.json()) as Json).error).toMatchObject({ code: "invite_required" });
    const otherEvent = await join(eventId, { fanId: "fan_a", invite: invite("someotherevt", "person_a") });
    expect(otherEvent.status).toBe(403);
    expect(((await otherEvent.json()) as Json).error).toMatchObject({
      code: "invalid_invite",
      details: { reason: "wrong_event" },
    });
    const forged = mintInvite({ eventId, identity: "person_a", exp: exp() }, { secret: `${INVITE_SECRET}!` });
    expect((await join(eventId, { fanId: "fan_a", invite: forged })).status).toBe(403);
    await json(await join(eventId, { fanId: "fan_a", invite: invite(eventId, "person_a") }), 201);
    const after = await refusals();
    expect((after.invite_missing ?? 0) - (before.invite_missing ?? 0)).toBe(1);
    expect((after.invite_invalid ?? 0) - (before.invite_invalid ?? 0)).toBe(2);
  });

  it("gives one place per identity, whatever the fan ids racing for it", async () => {
    const eventId = await newEvent();
    await json(await patch(eventId, { invites: true }), 200);
    const before = await refusals();
    const identities = ["p1", "p2", "p3", "p4"];
    const attempts = identities.flatMap((identity) =>
      Array.from({ length: 25 }, (_, i) => ({ identity, fanId: `${identity}_device_${i}` })),
    );
    const results = await Promise.all(
      attempts.map(async (a) => {
        const res = await join(eventId, { fanId: a.fanId, invite: invite(eventId, a.identity) });
        return { ...a, status: res.status, body: (await res.json()) as Json };
      }),
    );
    for (const identity of identities) {
      const mine = results.filter((r) => r.identity === identity);
      const placed = mine.filter((r) => r.status === 201);
      expect(placed).toHaveLength(1);
      const refused = mine.filter((r) => r.status === 409);
      expect(refused).toHaveLength(24);
      for (const r of refused) expect(r.body.error).toMatchObject({ code: "identity_already_queued" });
      // the holder joins again with the same invite: the same place
      const holder = placed[0];
      if (!holder) throw new Error("no holder");
      const again = await json(await join(eventId, { fanId: holder.fanId, invite: invite(eventId, identity) }), 200);
      expect(again.position).toBe(holder.body.position);
    }
    const after = await refusals();
    expect((after.identity_taken ?? 0) - (before.identity_taken ?? 0)).toBe(96);
  });

  it("proof of work and invites together: both are needed", async () => {
    const eventId = await newEvent();
    await json(await patch(eventId, { invites: true, powBits: 6 }), 200);
    const { challenge } = await challengeOf(eventId, "fan_both");
    const pow = { challenge, nonce: solveChallenge(challenge, 6) };
    expect((await join(eventId, { fanId: "fan_both", pow })).status).toBe(428);
    expect((await join(eventId, { fanId: "fan_both", invite: invite(eventId, "pb") })).status).toBe(428);
    await json(await join(eventId, { fanId: "fan_both", pow, invite: invite(eventId, "pb") }), 201);
  });
});
