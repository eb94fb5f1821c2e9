import { afterAll, describe, expect, it } from "vitest";
import { createTokenService, createWaitingRoom } from "../../src/waiting-room/index.js";
import { MAX_CLOCK_SKEW_MS } from "../../src/waiting-room/tokens.js";
import { SECRET, eventId, gateways, ok, until } from "./helpers.js";

const tokens = createTokenService({ secret: SECRET });
const access = {
  fanId: "alice",
  eventId: "finals",
  sessionId: "abc.1",
  issuedAt: new Date(),
  expiresAt: new Date(Date.now() + 600_000),
};

/** Replace one character of the signature, keeping it valid base64url. */
function forge(token: string): string {
  const last = token.at(-2) === "A" ? "B" : "A";
  return `${token.slice(0, -2)}${last}${token.at(-1)}`;
}

describe("tokens (no I/O)", () => {
  it("accept their own kind, fan and event", async () => {
    const q = await tokens.verifyQueueToken(
      await tokens.signQueueToken({ fanId: "alice", eventId: "finals" }),
      "finals",
    );
    expect(q).toMatchObject({ ok: true, claims: { kind: "queue", fanId: "alice", eventId: "finals" } });
    const a = await tokens.verifyAccessToken(await tokens.signAccessToken(access), "finals");
    expect(a).toMatchObject({
      ok: true,
      claims: { kind: "access", fanId: "alice", eventId: "finals", sessionId: "abc.1" },
    });
  });

  it("refuse a forged signature, another secret, and a tampered payload", async () => {
    const token = await tokens.signAccessToken(access);
    expect(await tokens.verifyAccessToken(forge(token), "finals")).toEqual({ ok: false, reason: "bad_signature" });
    const other = createTokenService({ secret: "another-secret-another-secret-another" });
    expect(await tokens.verifyAccessToken(await other.signAccessToken(access), "finals")).toEqual({
      ok: false,
      reason: "bad_signature",
    });
    const [h, p, s] = token.split(".");
    const payload = JSON.parse(Buffer.from(p!, "base64url").toString());
    const tampered = Buffer.from(JSON.stringify({ ...payload, sub: "mallory" })).toString("base64url");
    expect(await tokens.verifyAccessToken(`${h}.${tampered}.${s}`, "finals")).toEqual({
      ok: false,
      reason: "bad_signature",
    });
  });

  it("refuse the wrong kind, both ways", async () => {
    const queue = await tokens.signQueueToken({ fanId: "alice", eventId: "finals" });
    const acc = await tokens.signAccessToken(access);
    expect(await tokens.verifyAccessToken(queue, "finals")).toEqual({ ok: false, reason: "wrong_kind" });
    expect(await tokens.verifyQueueToken(acc, "finals")).toEqual({ ok: false, reason: "wrong_kind" });
  });

  it("refuse another event's token", async () => {
    expect(await tokens.verifyAccessToken(await tokens.signAccessToken(access), "semis")).toEqual({
      ok: false,
      reason: "wrong_event",
    });
    const queue = await tokens.signQueueToken({ fanId: "alice", eventId: "finals" });
    expect(await tokens.verifyQueueToken(queue, "semis")).toEqual({ ok: false, reason: "wrong_event" });
  });

  it("refuse expired tokens", async () => {
    const lastWeek = Date.now() - 8 * 24 * 3600_000;
    const past = createTokenService({ secret: SECRET, now: () => lastWeek });
    const queue = await past.signQueueToken({ fanId: "alice", eventId: "finals" }); // 7-day lifetime
    expect(await tokens.verifyQueueToken(queue, "finals")).toEqual({ ok: false, reason: "expired" });
    const ended = await tokens.signAccessToken({
      ...access,
      issuedAt: new Date(Date.now() - 600_000),
      expiresAt: new Date(Date.now() - 1_000),
    });
    expect(await tokens.verifyAccessToken(ended, "finals")).toEqual({ ok: false, reason: "expired" });
  });

  it("refuse a token issued in the future, past the clock skew, and accept one within it", async () => {
    const ahead = (ms: number) =>
      tokens.signAccessToken({
        ...access,
        issuedAt: new Date(Date.now() + ms),
        expiresAt: new Date(Date.now() + ms + 600_000),
      });
    expect(await tokens.verifyAccessToken(await ahead(MAX_CLOCK_SKEW_MS + 5_000), "finals")).toEqual({
      ok: false,
      reason: "malformed",
    });
    expect((await tokens.verifyAccessToken(await ahead(5_000), "finals")).ok).toBe(true);
    const later = createTokenService({ secret: SECRET, now: () => Date.now() + 3_600_000 });
    const queue = await later.signQueueToken({ fanId: "alice", eventId: "finals" });
    expect(await tokens.verifyQueueToken(queue, "finals")).toEqual({ ok: false, reason: "malformed" });
  });

  it("refuse garbage, unsigned tokens and a short secret", async () => {
    expect(await tokens.verifyQueueToken("not.a.jwt", "finals")).toEqual({ ok: false, reason: "malformed" });
    expect(await tokens.verifyQueueToken("", "finals")).toEqual({ ok: false, reason: "malformed" });
    const none = [
      Buffer.from(JSON.stringify({ alg: "none", typ: "JWT" })).toString("base64url"),
      Buffer.from(
        JSON.stringify({ kind: "queue", evt: "finals", sub: "alice", iss: "onsale-gateway", iat: 1, exp: 4e9 }),
      ).toString("base64url"),
      "",
    ].join(".");
    expect(await tokens.verifyQueueToken(none, "finals")).toEqual({ ok: false, reason: "malformed" });
    expect(() => createTokenService({ secret: "too short" })).toThrow(RangeError);
  });
});

describe("tokens from a real waiting room", () => {
  const gw = gateways(2);
  afterAll(() => gw.close());

  it("a fan admitted into a second session gets that session's token on the gateway that signed the first", async () => {
    const evt = eventId("tokens");
    ok(
      await gw.room.configure(evt, {
        onSaleAt: Date.now() - 1_000,
        admitPerSecond: 1_000,
        maxActive: 10,
        sessionSeconds: 600,
      }),
    );
    const admittedPlace = async () =>
      until(async () => {
        const p = ok(await gw.room.statusOf(evt, "bea")).place;
        return p.status === "admitted" ? p : undefined;
      });
    ok(await gw.room.join(evt, "bea"));
    const first = await admittedPlace();
    // polled again (signed once per session): the same token
    const again = ok(await gw.room.statusOf(evt, "bea")).place;
    expect(again.status === "admitted" && again.accessToken).toBe(first.accessToken);

    ok(await gw.room.completeSession(evt, first.sessionId));
    ok(await gw.room.join(evt, "bea"));
    const second = await admittedPlace();
    expect(second.sessionId).not.toBe(first.sessionId);
    expect(second.accessToken).not.toBe(first.accessToken);
    expect(await gw.room.verifyAccessToken(second.accessToken, evt)).toMatchObject({
      ok: true,
      claims: { fanId: "bea", sessionId: second.sessionId },
    });
    expect(await gw.room.verifyAccessToken(first.accessToken, evt)).toMatchObject({
      ok: true,
      claims: { sessionId: first.sessionId },
    });
  });

  it("an admitted fan's access token names fan, event, session and expiry, and works on every gateway", async () => {
    const evt = eventId("tokens");
    const other = eventId("tokens");
    for (const e of [evt, other])
      ok(
        await gw.room.configure(e, {
          onSaleAt: Date.now() - 1_000,
          admitPerSecond: 1_000,
          maxActive: 10,
          sessionSeconds: 600,
        }),
      );
    const joined = ok(await gw.room.join(evt, "alice"));
    const place = await until(async () => {
      const p = ok(await gw.room.statusOf(evt, "alice")).place;
      return p.status === "admitted" ? p : undefined;
    });
    const check = await gw.rooms[1]!.verifyAccessToken(place.accessToken, evt);
    expect(check).toMatchObject({ ok: true, claims: { fanId: "alice", eventId: evt, sessionId: place.sessionId } });
    expect(check.ok && check.claims.expiresAt.getTime()).toBe(
      Math.ceil(Date.parse(place.accessExpiresAt) / 1000) * 1000,
    );
    // the same token on every poll
    const again = ok(await gw.rooms[1]!.statusOf(evt, "alice")).place;
    expect(again.status === "admitted" && again.accessToken).toBe(place.accessToken);

    expect(await gw.room.verifyAccessToken(place.accessToken, other)).toEqual({ ok: false, reason: "wrong_event" });
    expect(await gw.room.verifyAccessToken(joined.queueToken, evt)).toEqual({ ok: false, reason: "wrong_kind" });
    expect(await gw.room.status(evt, place.accessToken)).toEqual({ ok: false, reason: "token", token: "wrong_kind" });
    expect(await gw.room.status(other, joined.queueToken)).toEqual({
      ok: false,
      reason: "token",
      token: "wrong_event",
    });
    expect(await gw.room.status(evt, forge(joined.queueToken))).toEqual({
      ok: false,
      reason: "token",
      token: "bad_signature",
    });

    // a gateway with another secret refuses them all
    const stranger = createWaitingRoom({ redis: gw.clients[0]!, secret: "not-the-gateway-secret-not-the-gateway" });
    expect(await stranger.verifyAccessToken(place.accessToken, evt)).toEqual({ ok: false, reason: "bad_signature" });
    expect(await stranger.status(evt, joined.queueToken)).toEqual({
      ok: false,
      reason: "token",
      token: "bad_signature",
    });
  });
});
