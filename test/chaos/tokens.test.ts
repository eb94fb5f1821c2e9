/**
 * Tokens: every way of presenting a token that is not the right one, against a real gateway
 * process, each refused with the status docs/API.md gives it: 401 `unauthenticated` for a
 * missing, malformed, forged, expired or not-yet-valid token and for an ended session, 403
 * `forbidden` for a genuine token of the wrong kind or event. Another fan's hold is 409
 * `hold_not_owned` (the contract's row for it), another fan's purchase is 404 (as unknown as a
 * missing one). The malicious tokens are built with jose from the claims the real ones carry
 * (src/waiting-room/tokens.ts): a real token is decoded, then its claims re-signed as needed.
 *
 * Every refusal is paired with a control: the same request with the genuine token succeeds, so a
 * refusal is never the test's own mistake. Then the purchase webhook with a missing, malformed,
 * forged or stale signature is refused, and the sale is audited.
 */
import { decodeJwt, type JWTPayload, SignJWT, UnsecuredJWT } from "jose";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { derivedWebhookSecret } from "../../src/gateway.js";
import { signWebhook, signWebhookEvent, WEBHOOK_SIGNATURE_HEADER } from "../../src/payments/webhook.js";
import { createWaitingRoom } from "../../src/waiting-room/index.js";
import {
  ADMIN_TOKEN,
  admitFan,
  auditSale,
  type CallOptions,
  type CallResult,
  type ChaosGateway,
  call,
  expectApiError,
  type Fan,
  putEvent,
  SECRET,
  startChaosGateway,
} from "./support/http.js";
import { recordScenario } from "./support/report.js";

const EVENT = "tok_evt";
const OTHER_EVENT = "tok_other";
const encoder = new TextEncoder();

let gw: ChaosGateway;
let requests = 0;
let serverErrors = 0;
const refusals: string[] = [];

async function send(method: string, path: string, options: CallOptions = {}): Promise<CallResult> {
  const res = await call(gw.url, method, path, options);
  requests++;
  if (res.status >= 500) serverErrors++;
  return res;
}

/** The request is refused with this status and code; `what` names it in the report. */
async function refused(what: string, status: number, code: string, method: string, path: string, options: CallOptions) {
  const res = await send(method, path, options);
  expectApiError(res, status, code);
  refusals.push(`${what}: ${status} ${code}`);
  return res;
}

/** A real token's claims, changed, signed with `secret` (HS256). */
async function resign(
  token: string,
  change: (claims: JWTPayload) => JWTPayload,
  secret: string = SECRET,
  header: Record<string, unknown> = { alg: "HS256", typ: "JWT" },
): Promise<string> {
  return new SignJWT(change(decodeJwt(token)))
    .setProtectedHeader(header as { alg: string })
    .sign(encoder.encode(secret));
}

const now = () => Math.floor(Date.now() / 1000);
const holds = (e = EVENT) => `/v1/events/${e}/holds`;
const status = (e = EVENT) => `/v1/events/${e}/queue/status`;

async function hold(fan: Fan, seats: string[]): Promise<string> {
  const res = await send("POST", holds(), { token: fan.accessToken, json: { seats } });
  expect(res.status, res.text).toBe(201);
  return (res.body as { holdId: string }).holdId;
}

async function buy(fan: Fan, holdId: string, key: string): Promise<CallResult> {
  return send("POST", `${holds()}/${holdId}/purchase`, {
    token: fan.accessToken,
    json: { paymentToken: "tok_ok" },
    headers: { "idempotency-key": key },
  });
}

let fans: Record<string, Fan>;
let otherEventFan: Fan;

beforeAll(async () => {
  gw = await startChaosGateway();
  await putEvent(gw, EVENT);
  await putEvent(gw, OTHER_EVENT);
  const names = ["alice", "bob", "carol", "erin", "frank", "grace"];
  const admitted = await Promise.all(names.map((n) => admitFan(gw, EVENT, n)));
  fans = Object.fromEntries(names.map((n, i) => [n, admitted[i]!]));
  otherEventFan = await admitFan(gw, OTHER_EVENT, "dave");
}, 180_000);

afterAll(async () => {
  await gw?.stop();
}, 60_000);

describe("tokens: each bad token refused with the right status", () => {
  it("forged signature, alg none, malformed: 401 unauthenticated", async () => {
    const { alice } = fans as { alice: Fan };
    const forged = await resign(alice.accessToken, (c) => c, "another-secret-0123456789-0123456789-abcdef");
    await refused("forged access token", 401, "unauthenticated", "POST", holds(), {
      token: forged,
      json: { seats: ["A-1-1"] },
    });
    const forgedQueue = await resign(alice.queueToken, (c) => c, "another-secret-0123456789-0123456789-abcdef");
    await refused("forged queue token", 401, "unauthenticated", "GET", status(), { token: forgedQueue });

    const none = new UnsecuredJWT(decodeJwt(alice.accessToken)).encode();
    await refused("alg none access token", 401, "unauthenticated", "POST", holds(), {
      token: none,
      json: { seats: ["A-1-1"] },
    });
    const noneQueue = new UnsecuredJWT(decodeJwt(alice.queueToken)).encode();
    await refused("alg none queue token", 401, "unauthenticated", "GET", status(), { token: noneQueue });
    // The real header, claims and signature, with the header's alg swapped for none.
    const [, payload, signature] = alice.accessToken.split(".");
    const swapped = `${Buffer.from(JSON.stringify({ alg: "none", typ: "JWT" })).toString("base64url")}.${payload}.${signature}`;
    await refused("alg swapped to none", 401, "unauthenticated", "POST", holds(), {
      token: swapped,
      json: { seats: ["A-1-1"] },
    });
    // HS512 with the right secret: only HS256 is accepted.
    const hs512 = await resign(alice.accessToken, (c) => c, SECRET, { alg: "HS512", typ: "JWT" });
    await refused("HS512 token", 401, "unauthenticated", "POST", holds(), { token: hs512, json: { seats: ["A-1-1"] } });
    // One character in the middle of the signature changed (each carries 6 signature bits; the
    // last one also carries padding bits that a decoder may ignore).
    const tampered = await resign(alice.accessToken, (c) => c);
    const at = tampered.lastIndexOf(".") + 20;
    const flipped = `${tampered.slice(0, at)}${tampered[at] === "A" ? "B" : "A"}${tampered.slice(at + 1)}`;
    expect(flipped).not.toBe(tampered);
    await refused("tampered signature", 401, "unauthenticated", "POST", holds(), {
      token: flipped,
      json: { seats: ["A-1-1"] },
    });

    await refused("missing token", 401, "unauthenticated", "POST", holds(), { json: { seats: ["A-1-1"] } });
    await refused("garbage token", 401, "unauthenticated", "POST", holds(), {
      token: "not.a.jwt",
      json: { seats: ["A-1-1"] },
    });
    await refused("not a bearer", 401, "unauthenticated", "POST", holds(), {
      headers: { authorization: `Basic ${alice.accessToken}` },
      json: { seats: ["A-1-1"] },
    });
    const noExp = await resign(alice.accessToken, ({ exp: _exp, ...c }) => c);
    await refused("no exp claim", 401, "unauthenticated", "POST", holds(), {
      token: noExp,
      json: { seats: ["A-1-1"] },
    });
    const otherIssuer = await resign(alice.accessToken, (c) => ({ ...c, iss: "someone-else" }));
    await refused("another issuer", 401, "unauthenticated", "POST", holds(), {
      token: otherIssuer,
      json: { seats: ["A-1-1"] },
    });

    // Control: the genuine token, the same request.
    await hold(alice, ["A-1-1"]);
  });

  it("expired and not yet valid: 401 unauthenticated", async () => {
    const { bob } = fans as { bob: Fan };
    const expired = await resign(bob.accessToken, (c) => ({ ...c, iat: now() - 7_200, exp: now() - 3_600 }));
    const res = await refused("expired access token", 401, "unauthenticated", "POST", holds(), {
      token: expired,
      json: { seats: ["A-1-2"] },
    });
    expect((res.body as { error: { message: string } }).error.message).toMatch(/expired/);
    const expiredQueue = await resign(bob.queueToken, (c) => ({ ...c, iat: now() - 7_200, exp: now() - 1 }));
    await refused("expired queue token", 401, "unauthenticated", "GET", status(), { token: expiredQueue });

    const issuedLater = await resign(bob.accessToken, (c) => ({ ...c, iat: now() + 3_600, exp: now() + 7_200 }));
    await refused("iat in the future", 401, "unauthenticated", "POST", holds(), {
      token: issuedLater,
      json: { seats: ["A-1-2"] },
    });
    const notYet = await resign(bob.accessToken, (c) => ({ ...c, nbf: now() + 3_600 }));
    await refused("nbf in the future", 401, "unauthenticated", "POST", holds(), {
      token: notYet,
      json: { seats: ["A-1-2"] },
    });
    const notYetQueue = await resign(bob.queueToken, (c) => ({ ...c, nbf: now() + 3_600 }));
    await refused("queue token, nbf in the future", 401, "unauthenticated", "GET", status(), { token: notYetQueue });

    await hold(bob, ["A-1-2"]);
  });

  it("a token of another event: 403 forbidden", async () => {
    await refused("other event's access token", 403, "forbidden", "POST", holds(), {
      token: otherEventFan.accessToken,
      json: { seats: ["A-1-3"] },
    });
    await refused("other event's queue token", 403, "forbidden", "GET", status(), { token: otherEventFan.queueToken });
    // Only the holder of the gateway secret can re-sign `evt`; what such a token gets is noted, not asserted.
    const moved = await resign(otherEventFan.accessToken, (c) => ({ ...c, evt: EVENT }));
    const res = await send("POST", holds(), { token: moved, json: { seats: ["A-1-3"] } });
    refusals.push(`another event's session re-signed (with the real secret) for this event: ${res.status}`);
    if (res.status === 201) {
      const released = await send("DELETE", `${holds()}/${(res.body as { holdId: string }).holdId}`, { token: moved });
      expect(released.status).toBe(204);
    }

    const ok = await send("POST", holds(OTHER_EVENT), { token: otherEventFan.accessToken, json: { seats: ["A-1-3"] } });
    expect(ok.status, ok.text).toBe(201);
  });

  it("a queue token used as an access token and the reverse: 403; the operator token is no fan token: 401", async () => {
    const { carol } = fans as { carol: Fan };
    const held = await hold(carol, ["A-2-1"]);
    await refused("queue token to hold", 403, "forbidden", "POST", holds(), {
      token: carol.queueToken,
      json: { seats: ["A-2-2"] },
    });
    await refused("queue token to release", 403, "forbidden", "DELETE", `${holds()}/${held}`, {
      token: carol.queueToken,
    });
    await refused("queue token to buy", 403, "forbidden", "POST", `${holds()}/${held}/purchase`, {
      token: carol.queueToken,
      json: { paymentToken: "tok_ok" },
      headers: { "idempotency-key": "carol-q" },
    });
    await refused("access token to poll", 403, "forbidden", "GET", status(), { token: carol.accessToken });
    await refused("operator token as access token", 401, "unauthenticated", "POST", holds(), {
      token: ADMIN_TOKEN,
      json: { seats: ["A-2-2"] },
    });
    await refused("access token as operator token", 401, "unauthenticated", "GET", `/v1/admin/events/${EVENT}/stats`, {
      token: carol.accessToken,
    });
    // A queue token re-signed with kind: access is still no session (no sid): 401.
    const promoted = await resign(carol.queueToken, (c) => ({ ...c, kind: "access" }));
    await refused("queue token re-signed as access", 401, "unauthenticated", "POST", holds(), {
      token: promoted,
      json: { seats: ["A-2-2"] },
    });

    const polled = await send("GET", status(), { token: carol.queueToken });
    expect(polled.status).toBe(200);
    const bought = await buy(carol, held, "carol-1");
    expect(bought.status, bought.text).toBe(201);
  });

  it("another fan's token: cannot release or buy her hold (409 hold_not_owned) nor read her purchase (404)", async () => {
    const { grace, frank } = fans as { grace: Fan; frank: Fan };
    const graceHold = await hold(grace, ["A-3-1"]);
    await refused("release another fan's hold", 409, "hold_not_owned", "DELETE", `${holds()}/${graceHold}`, {
      token: frank.accessToken,
    });
    await refused("buy another fan's hold", 409, "hold_not_owned", "POST", `${holds()}/${graceHold}/purchase`, {
      token: frank.accessToken,
      json: { paymentToken: "tok_ok" },
      headers: { "idempotency-key": "frank-steals" },
    });
    // Nothing changed: the hold is still hers and she buys it.
    const bought = await buy(grace, graceHold, "grace-1");
    expect(bought.status, bought.text).toBe(201);
    const purchaseId = (bought.body as { purchaseId: string }).purchaseId;
    await refused("read another fan's purchase", 404, "not_found", "GET", `/v1/purchases/${purchaseId}`, {
      token: frank.accessToken,
    });
    await refused(
      "read a purchase with another event's token",
      403,
      "forbidden",
      "GET",
      `/v1/purchases/${purchaseId}`,
      {
        token: otherEventFan.accessToken,
      },
    );
    const own = await send("GET", `/v1/purchases/${purchaseId}`, { token: grace.accessToken });
    expect(own.status).toBe(200);
    expect((own.body as { status: string }).status).toBe("confirmed");
  });

  it("a revoked session: 401 for a new hold and a new purchase; releasing is still allowed", async () => {
    const { erin } = fans as { erin: Fan };
    const erinHold = await hold(erin, ["A-3-5"]);
    const sessionId = decodeJwt(erin.accessToken).sid as string;
    // No operator endpoint revokes a session (API.md): revoke through the waiting room on the gateway's Redis.
    const redis = new Redis(gw.redisUrl, { maxRetriesPerRequest: 1 });
    try {
      const room = createWaitingRoom({ redis, secret: SECRET });
      const revoked = await room.revokeSession(EVENT, sessionId);
      expect(revoked.ok, JSON.stringify(revoked)).toBe(true);
    } finally {
      redis.disconnect();
    }
    await refused("revoked session holds", 401, "unauthenticated", "POST", holds(), {
      token: erin.accessToken,
      json: { seats: ["A-3-6"] },
    });
    await refused("revoked session buys its hold", 401, "unauthenticated", "POST", `${holds()}/${erinHold}/purchase`, {
      token: erin.accessToken,
      json: { paymentToken: "tok_ok" },
      headers: { "idempotency-key": "erin-1" },
    });
    await refused("revoked fan joins again", 403, "forbidden", "POST", `/v1/events/${EVENT}/queue`, {
      json: { fanId: "erin" },
    });
    const released = await send("DELETE", `${holds()}/${erinHold}`, { token: erin.accessToken });
    expect(released.status).toBe(204);
  });

  it("replay after the session ended with a confirmed purchase: no new hold (401); the same purchase request gets the same answer", async () => {
    const { frank } = fans as { frank: Fan };
    const frankHold = await hold(frank, ["A-4-1"]);
    const first = await buy(frank, frankHold, "frank-1");
    expect(first.status, first.text).toBe(201);
    await refused("hold after the session ended", 401, "unauthenticated", "POST", holds(), {
      token: frank.accessToken,
      json: { seats: ["A-4-2"] },
    });
    const again = await buy(frank, frankHold, "frank-1");
    expect(again.status).toBe(201);
    expect(again.body).toEqual(first.body);
    await refused("same key, another body", 422, "idempotency_key_reused", "POST", `${holds()}/${frankHold}/purchase`, {
      token: frank.accessToken,
      json: { paymentToken: "tok_decline" },
      headers: { "idempotency-key": "frank-1" },
    });
    const newKey = await buy(frank, frankHold, "frank-2");
    expect(newKey.status, newKey.text).toBeGreaterThanOrEqual(400);
    refusals.push(
      `the bought hold under a new key: ${newKey.status} ${(newKey.body as { error?: { code: string } }).error?.code}`,
    );
  });

  it("the purchase webhook: missing, malformed, forged, tampered or stale signatures are refused (401)", async () => {
    const secret = derivedWebhookSecret(SECRET);
    const event = {
      id: `evt_tok_${Date.now()}`,
      type: "charge.succeeded" as const,
      data: { idempotencyKey: `${EVENT}-aaaaaaaaaaaaaaaaaaaaaaaaaa`, chargeId: "ch_x", amount: 100 },
    };
    const body = JSON.stringify(event);
    const postRaw = (headers: Record<string, string>, raw = body) =>
      send("POST", "/v1/payments/webhook", { headers: { "content-type": "application/json", ...headers }, body: raw });
    const check = async (what: string, headers: Record<string, string>, raw?: string) => {
      const res = await postRaw(headers, raw);
      expectApiError(res, 401, "unauthenticated");
      refusals.push(`webhook, ${what}: 401`);
    };
    await check("no signature", {});
    await check("malformed signature", { [WEBHOOK_SIGNATURE_HEADER]: "garbage" });
    await check("signed with another secret", {
      [WEBHOOK_SIGNATURE_HEADER]: signWebhook("not-the-webhook-secret-0123456789", body),
    });
    await check("tampered body", {
      [WEBHOOK_SIGNATURE_HEADER]: signWebhook(secret, body.replace("ch_x", "ch_y")),
    });
    await check("stale (signed an hour ago)", { [WEBHOOK_SIGNATURE_HEADER]: signWebhook(secret, body, now() - 3_600) });
    await check("from the future (an hour ahead)", {
      [WEBHOOK_SIGNATURE_HEADER]: signWebhook(secret, body, now() + 3_600),
    });
    // Control: the genuine signature is accepted.
    const genuine = signWebhookEvent(secret, event);
    const ok = await postRaw({ [WEBHOOK_SIGNATURE_HEADER]: genuine.signature }, genuine.body);
    expect(ok.status, ok.text).toBe(200);
  });

  it("ends with the audit", async () => {
    const audit = await auditSale(gw, EVENT);
    recordScenario({
      scenario: "tokens",
      faults: "forged, alg none, expired, nbf, other event/fan/kind, revoked, replayed; bad webhook signatures",
      requests,
      oversells: audit.oversells,
      lostPurchases: audit.lostPurchases,
      serverErrors,
      notes: `${refusals.length} refusals checked: ${refusals.join("; ")}`,
    });
    expect(audit.report.ok, JSON.stringify(audit.report.checks.filter((c) => c.status === "fail"))).toBe(true);
    expect(audit.oversells).toBe(0);
    expect(audit.lostPurchases).toBe(0);
    expect(serverErrors).toBe(0);
  });
});
