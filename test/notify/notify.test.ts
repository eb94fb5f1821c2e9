/**
 * "Tell me when seats come back" (issue 18 item 5), end to end on real parts: the HTTP app, real
 * Redis and BullMQ, the local DynamoDB, and a real HTTP receiver that checks every signature.
 * An event sells out, fans ask at once, the holds expire, two gateways' sweeps run at once: the
 * receiver is told of NOTIFY_FANS_PER_SEAT fans per seat, the earliest askers, each fan once;
 * a receiver that fails gets the retry under the same idempotency key. A return whose claim is
 * lost (the claim throws, the process dies after the release) is told by the sweeps' backstop, a
 * grace later, once; the backstop tells nobody when nothing came back.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, inject, it, vi } from "vitest";
import { buildApp } from "../../src/http/app.js";
import pino from "pino";
import { createDynamoClient } from "../../src/dynamodb/client.js";
import {
  createNotifier,
  derivedNotifySecret,
  RECONCILE_EVERY_MS,
  RECONCILE_GRACE_MS,
  REDELIVER_AFTER_MS,
} from "../../src/notify/service.js";
import { createNotifyStore, type NotifyStore } from "../../src/notify/store.js";
import {
  NOTIFY_IDEMPOTENCY_HEADER,
  NOTIFY_SIGNATURE_HEADER,
  postSeatsBack,
  type SeatsBackPayload,
} from "../../src/notify/webhook.js";
import { verifyWebhook } from "../../src/payments/webhook.js";
import { buildServices } from "../../src/services.js";
import { sweepJob } from "../../src/workers/workers.js";
import {
  admitFans,
  createTable,
  eventInput,
  type Gateway,
  gatewayOf,
  metricTotal,
  putEvent,
  SECRET,
  testServicesConfig,
  uniqueId,
} from "../gateway/harness.js";
import { sleep } from "../support/worker-process.js";

const FANS_PER_SEAT = 2;
const MAX_REQUESTS = 12;

interface Post {
  status: number;
  key: string;
  signed: boolean;
  payload: SeatsBackPayload;
  /** The body as sent. */
  raw: string;
}

/** The operator's mail system, as a test sees it: every POST recorded, the first `failNext` answered 500. */
async function startReceiver() {
  const posts: Post[] = [];
  const state = { failNext: 0 };
  const secret = derivedNotifySecret(SECRET);
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const body = Buffer.concat(chunks);
      const signed = verifyWebhook(secret, body, req.headers[NOTIFY_SIGNATURE_HEADER.toLowerCase()] as string).ok;
      const status = !signed ? 401 : state.failNext > 0 ? 500 : 200;
      if (status === 500) state.failNext--;
      posts.push({
        status,
        key: String(req.headers[NOTIFY_IDEMPOTENCY_HEADER.toLowerCase()]),
        signed,
        payload: JSON.parse(body.toString("utf8")) as SeatsBackPayload,
        raw: body.toString("utf8"),
      });
      res.writeHead(status).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`,
    posts,
    state,
    /** What the receiver acted on: the first accepted POST of each idempotency key. */
    accepted: () => {
      const seen = new Map<string, Post>();
      for (const p of posts) if (p.status === 200 && !seen.has(p.key)) seen.set(p.key, p);
      return [...seen.values()];
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

type Receiver = Awaited<ReturnType<typeof startReceiver>>;

/** The store's clock, moved past the holds' expiry instead of waiting for it. */
let clockOffsetMs = 0;
const clock = () => Date.now() + clockOffsetMs;

function gateway(tableName: string, url: string | undefined): Gateway {
  const services = buildServices({
    ...testServicesConfig({ tableName, redisUrl: inject("redisUrl") }),
    clock,
    redisOptions: { maxRetriesPerRequest: 1, enableAutoPipelining: true },
    queues: true,
    notify: { webhookUrl: url, fansPerSeat: FANS_PER_SEAT, maxRequestsPerEvent: MAX_REQUESTS },
  });
  return gatewayOf(buildApp(services), services);
}

let receiver: Receiver;
let tableName: string;
let gw1: Gateway;
let gw2: Gateway;
let off: Gateway;

beforeAll(async () => {
  receiver = await startReceiver();
  tableName = await createTable();
  // Two gateways on one table and one Redis, each running workers: two processes' sweeps and
  // deliveries at once. A third without NOTIFY_WEBHOOK_URL.
  gw1 = gateway(tableName, receiver.url);
  gw2 = gateway(tableName, receiver.url);
  off = gateway(tableName, undefined);
  gw1.deps.startWorkers();
  gw2.deps.startWorkers();
});
afterAll(async () => {
  await Promise.all([gw1?.close(), gw2?.close(), off?.close()]);
  await receiver?.close();
});

/** A place in line: the fan's queue token (which may read or cancel a request, not make one). */
async function join(gw: Gateway, eventId: string, fanId: string): Promise<string> {
  const res = await gw.request(`/v1/events/${eventId}/queue`, { method: "POST", json: { fanId } });
  expect([200, 201]).toContain(res.status);
  return ((await res.json()) as { queueToken: string }).queueToken;
}

/** The fan joined and admitted: its access token, what asking takes. */
async function admitted(gw: Gateway, eventId: string, fanId: string): Promise<string> {
  const [fan] = await admitFans(gw, eventId, [fanId]);
  return fan!.accessToken;
}

const ask = (gw: Gateway, eventId: string, token: string, contact: unknown) =>
  gw.request(`/v1/events/${eventId}/notify`, { method: "POST", token, json: { contact } });

async function errorCode(res: Response): Promise<string> {
  return ((await res.json()) as { error: { code: string } }).error.code;
}

/**
 * An event of `seats` seats in one row, every seat held by one fan for `holdSeconds`: sold out
 * (long enough, on a loaded machine, for the fans to ask while it still is).
 */
async function soldOutEvent(seats: number, holdSeconds = 120) {
  const eventId = uniqueId("nt");
  const input = eventInput({
    sections: [{ id: "A", tier: "Floor", price: 1_000, rows: 1, seatsPerRow: seats }],
    generalAdmission: [],
    maxSeatsPerFan: seats,
  });
  expect((await putEvent(gw1, eventId, input)).status).toBe(201);
  const early = await admitted(gw1, eventId, "early");
  // Not sold out yet: the fan is sent to the seats.
  const notYet = await ask(gw1, eventId, early, "mail:early@example.com");
  expect(notYet.status).toBe(409);
  expect(await errorCode(notYet)).toBe("not_sold_out");
  const seatIds = Array.from({ length: seats }, (_, i) => `A-1-${i + 1}`);
  const hold = await gw1.deps.holds.holdSeats({ eventId, fanId: "buyer", seatIds, holdSeconds });
  if (!hold.ok) throw new Error(`hold failed: ${JSON.stringify(hold)}`);
  return { eventId, hold: hold.hold };
}

const sweepBoth = (eventId: string) =>
  Promise.all(
    [gw1, gw2].map((gw) =>
      sweepJob(
        { inventory: gw.deps.inventory, seatMapWrites: gw.deps.seatMapWrites, notify: gw.deps.notify },
        { eventId },
      ),
    ),
  );

describe("seats-back notifications", () => {
  it("tells FANS_PER_SEAT fans per returned seat, earliest first, each once, across two sweeps at once", async () => {
    const seats = 4;
    const { eventId, hold } = await soldOutEvent(seats);
    // Two more fans than the event takes ask at once, half through each gateway.
    const all = Array.from({ length: MAX_REQUESTS + 2 }, (_, i) => `fan${i}`);
    const allTokens = (await admitFans(gw1, eventId, all)).map((f) => f.accessToken);
    const asked = await Promise.all(
      allTokens.map((t, i) => ask(i % 2 ? gw2 : gw1, eventId, t, `mail:${all[i]}@example.com`)),
    );
    const statuses = asked.map((r) => r.status);
    expect(statuses.filter((s) => s === 201)).toHaveLength(MAX_REQUESTS);
    expect(statuses.filter((s) => s === 409)).toHaveLength(2);
    const fanIds: string[] = [];
    const tokens: string[] = [];
    const requestedAt = new Map<string, string>();
    await Promise.all(
      asked.map(async (r, i) => {
        const body = (await r.json()) as { requestedAt?: string; error?: { code: string } };
        if (r.status === 409) return expect(body.error?.code).toBe("notify_limit_reached");
        requestedAt.set(all[i]!, body.requestedAt!);
      }),
    );
    all.forEach((f, i) => {
      if (!requestedAt.has(f)) return;
      fanIds.push(f);
      tokens.push(allTokens[i]!);
    });

    // Asking again answers the first request (even at the limit, since it is the same one).
    const again = await ask(gw2, eventId, tokens[0]!, "mail:other@example.com");
    expect(again.status).toBe(200);
    expect(((await again.json()) as { requestedAt: string }).requestedAt).toBe(requestedAt.get(fanIds[0]!));

    // The holds lapse; two gateways sweep every shard at once.
    clockOffsetMs += Math.max(0, Date.parse(hold.expiresAt) - clock() + 1_000);
    const swept = await sweepBoth(eventId);
    expect(swept.reduce((n, r) => n + r.seatsReleased, 0)).toBe(seats);

    const wanted = seats * FANS_PER_SEAT;
    await vi.waitFor(
      () =>
        expect(
          receiver
            .accepted()
            .filter((p) => p.payload.eventId === eventId)
            .flatMap((p) => p.payload.fans),
        ).toHaveLength(wanted),
      { timeout: 20_000, interval: 50 },
    );
    const batches = receiver.accepted().filter((p) => p.payload.eventId === eventId);
    const told = batches.flatMap((p) => p.payload.fans);
    expect(receiver.posts.every((p) => p.signed)).toBe(true);
    // Each fan once, with the contact they gave.
    expect(new Set(told.map((f) => f.fanId)).size).toBe(wanted);
    for (const f of told) expect(f.contact).toBe(`mail:${f.fanId}@example.com`);
    // The earliest askers: nobody told asked after anybody left waiting.
    const toldIds = new Set(told.map((f) => f.fanId));
    const lastTold = Math.max(...[...toldIds].map((f) => Date.parse(requestedAt.get(f)!)));
    const firstLeft = Math.min(...fanIds.filter((f) => !toldIds.has(f)).map((f) => Date.parse(requestedAt.get(f)!)));
    expect(lastTold).toBeLessThanOrEqual(firstLeft);
    // Within a batch, in the order they asked.
    for (const batch of batches) {
      const times = batch.payload.fans.map((f) => Date.parse(requestedAt.get(f.fanId)!));
      expect(times).toEqual([...times].sort((x, y) => x - y));
      expect(batch.payload.seatsReturned).toBeGreaterThan(0);
    }
    expect(batches.reduce((n, p) => n + p.payload.seatsReturned * FANS_PER_SEAT, 0)).toBe(wanted);

    // The fans told read `notified`; the others still wait.
    const told0 = fanIds.findIndex((f) => toldIds.has(f));
    const left0 = fanIds.findIndex((f) => !toldIds.has(f));
    await vi.waitFor(async () => {
      const res = await gw2.request(`/v1/events/${eventId}/notify`, { token: tokens[told0]! });
      expect(((await res.json()) as { state: string }).state).toBe("notified");
    });
    const waiting = await gw2.request(`/v1/events/${eventId}/notify`, { token: tokens[left0]! });
    expect(await waiting.json()).toMatchObject({ requested: true, state: "waiting" });

    // Sweeping again returns nothing and tells nobody more.
    const before = receiver.posts.length;
    const again2 = await sweepBoth(eventId);
    expect(again2.reduce((n, r) => n + r.seatsReleased, 0)).toBe(0);
    await sleep(300);
    expect(receiver.posts.length).toBe(before);
    expect(await metricTotal(gw1, "gateway_notify_total", { outcome: "claimed" })).toBeGreaterThan(0);
  });

  it("a released hold tells the next fans, and a receiver that fails gets the retry under the same key", async () => {
    const { eventId, hold } = await soldOutEvent(1);
    const tokens = (await admitFans(gw1, eventId, ["r0", "r1", "r2"])).map((f) => f.accessToken);
    for (const [i, t] of tokens.entries()) expect((await ask(gw1, eventId, t, `push:r${i}`)).status).toBe(201);
    receiver.state.failNext = 1;
    const released = await gw1.deps.holds.release({ eventId, holdId: hold.holdId, fanId: "buyer" });
    expect(released.ok).toBe(true);
    await vi.waitFor(() => expect(receiver.accepted().filter((p) => p.payload.eventId === eventId)).toHaveLength(1), {
      timeout: 20_000,
      interval: 50,
    });
    const mine = receiver.posts.filter((p) => p.payload.eventId === eventId);
    expect(mine.map((p) => p.status)).toEqual([500, 200]);
    expect(mine[1]!.key).toBe(mine[0]!.key);
    expect(mine[1]!.payload).toEqual(mine[0]!.payload);
    // One seat, two fans per seat: the first two who asked, in that order.
    expect(mine[1]!.payload.fans).toEqual([
      { fanId: "r0", contact: "push:r0" },
      { fanId: "r1", contact: "push:r1" },
    ]);
  });

  it("a released general-admission hold tells the next fans too, once however many releases race", async () => {
    const eventId = uniqueId("ntga");
    const input = eventInput({
      sections: [{ id: "A", tier: "Floor", price: 1_000, rows: 1, seatsPerRow: 1 }],
      generalAdmission: [{ id: "GA", tier: "Standing", price: 500, capacity: 2 }],
      maxSeatsPerFan: 3,
    });
    expect((await putEvent(gw1, eventId, input)).status).toBe(201);
    const seat = await gw1.deps.holds.holdSeats({ eventId, fanId: "buyer", seatIds: ["A-1-1"], holdSeconds: 120 });
    expect(seat.ok).toBe(true);
    const places = await gw1.deps.holds.holdGeneralAdmission({
      eventId,
      fanId: "buyer",
      areaId: "GA",
      quantity: 2,
      holdSeconds: 120,
    });
    if (!places.ok) throw new Error(`hold failed: ${JSON.stringify(places)}`);
    const fans = ["g0", "g1", "g2", "g3", "g4"];
    const tokens = (await admitFans(gw1, eventId, fans)).map((f) => f.accessToken);
    for (const [i, t] of tokens.entries()) expect((await ask(gw1, eventId, t, `push:g${i}`)).status).toBe(201);
    // Three releases of the same hold at once, on two gateways: the two places come back once.
    const releases = await Promise.all(
      [gw1, gw2, gw1].map((gw) => gw.deps.holds.release({ eventId, holdId: places.hold.holdId, fanId: "buyer" })),
    );
    expect(releases.every((r) => r.ok)).toBe(true);
    await vi.waitFor(() => expect(receiver.accepted().filter((p) => p.payload.eventId === eventId)).toHaveLength(1), {
      timeout: 20_000,
      interval: 50,
    });
    await sleep(300);
    const mine = receiver.accepted().filter((p) => p.payload.eventId === eventId);
    expect(mine).toHaveLength(1);
    // Two places, two fans per place: the first four who asked.
    expect(mine[0]!.payload.seatsReturned).toBe(2);
    expect(mine[0]!.payload.fans.map((f) => f.fanId)).toEqual(["g0", "g1", "g2", "g3"]);
  });

  it("refuses bad input, missing tokens, and answers notify_disabled without a webhook", async () => {
    const { eventId } = await soldOutEvent(1);
    const token = await admitted(gw1, eventId, "x");
    const long = await ask(gw1, eventId, token, "m".repeat(257));
    expect(long.status).toBe(400);
    expect(await errorCode(long)).toBe("invalid_request");
    const empty = await ask(gw1, eventId, token, "");
    expect(empty.status).toBe(400);
    const extra = await gw1.request(`/v1/events/${eventId}/notify`, {
      method: "POST",
      token,
      json: { contact: "ok", fanId: "someone-else" },
    });
    expect(extra.status).toBe(400);
    const noToken = await gw1.request(`/v1/events/${eventId}/notify`, { method: "POST", json: { contact: "ok" } });
    expect(noToken.status).toBe(401);
    const disabled = await ask(off, eventId, token, "ok");
    expect(disabled.status).toBe(404);
    expect(await errorCode(disabled)).toBe("notify_disabled");
    // Cancelling is idempotent, and asking again after it works.
    expect((await ask(gw1, eventId, token, "ok")).status).toBe(201);
    for (let i = 0; i < 2; i++) {
      const del = await gw1.request(`/v1/events/${eventId}/notify`, { method: "DELETE", token });
      expect(del.status).toBe(204);
    }
    const gone = await gw1.request(`/v1/events/${eventId}/notify`, { token });
    expect(await gone.json()).toEqual({ eventId, requested: false });
  });

  it("asking takes an admitted fan's access token: a place in line alone cannot fill the list", async () => {
    const { eventId } = await soldOutEvent(1);
    // A bot's fan ids, each with a place in line (a queue token costs one join).
    const queued = await Promise.all(["bot0", "bot1"].map((f) => join(gw1, eventId, f)));
    for (const token of queued) {
      const res = await ask(gw1, eventId, token, "mail:bot@example.com");
      expect(res.status).toBe(403);
      const body = (await res.json()) as { error: { code: string; message: string; requestId: string } };
      expect(body.error.code).toBe("forbidden");
      expect(body.error.message).toMatch(/access token/);
      expect(body.error.requestId).toBeTruthy();
      // Nothing was stored; the queue token still reads (and cancels) the fan's own request.
      const look = await gw1.request(`/v1/events/${eventId}/notify`, { token });
      expect(await look.json()).toEqual({ eventId, requested: false });
      expect((await gw1.request(`/v1/events/${eventId}/notify`, { method: "DELETE", token })).status).toBe(204);
    }
    // Once admitted, the same fan asks.
    const [bot0] = await admitFans(gw1, eventId, ["bot0"]);
    expect((await ask(gw1, eventId, bot0!.accessToken, "mail:bot0@example.com")).status).toBe(201);
    const mine = await gw1.request(`/v1/events/${eventId}/notify`, { token: queued[0]! });
    expect(await mine.json()).toMatchObject({ eventId, requested: true, state: "waiting" });
  });

  it("the limit counts requests still waiting: fans told free their places, a cancel after it frees none", async () => {
    const { eventId, hold } = await soldOutEvent(1);
    const first = await admitFans(
      gw1,
      eventId,
      Array.from({ length: MAX_REQUESTS }, (_, i) => `cap${i}`),
    );
    for (const f of first) expect((await ask(gw1, eventId, f.accessToken, `push:${f.fanId}`)).status).toBe(201);
    const [late1, late2, late3] = await admitFans(gw1, eventId, ["late1", "late2", "late3"]);
    const full = await ask(gw1, eventId, late1!.accessToken, "push:late1");
    expect(full.status).toBe(409);
    expect(await errorCode(full)).toBe("notify_limit_reached");

    // The seat comes back: FANS_PER_SEAT fans are told, and leave the count.
    expect((await gw1.deps.holds.release({ eventId, holdId: hold.holdId, fanId: "buyer" })).ok).toBe(true);
    await vi.waitFor(
      () =>
        expect(
          receiver
            .accepted()
            .filter((p) => p.payload.eventId === eventId)
            .flatMap((p) => p.payload.fans),
        ).toHaveLength(FANS_PER_SEAT),
      { timeout: 20_000, interval: 50 },
    );
    // The seat is taken again at once (sold out again), so later fans may ask.
    const again = await gw1.deps.holds.holdSeats({ eventId, fanId: "buyer2", seatIds: ["A-1-1"], holdSeconds: 120 });
    expect(again.ok).toBe(true);
    // A told fan who cancels frees nothing more: the request had left the count when it was claimed.
    const told = first.find((f) => f.fanId === "cap0")!;
    expect(
      (await gw1.request(`/v1/events/${eventId}/notify`, { method: "DELETE", token: told.accessToken })).status,
    ).toBe(204);
    expect((await ask(gw1, eventId, late1!.accessToken, "push:late1")).status).toBe(201);
    expect((await ask(gw1, eventId, late2!.accessToken, "push:late2")).status).toBe(201);
    const past = await ask(gw1, eventId, late3!.accessToken, "push:late3");
    expect(past.status).toBe(409);
    expect(await errorCode(past)).toBe("notify_limit_reached");
    // A waiting fan who cancels frees a place.
    const waiting = first.find((f) => f.fanId === `cap${MAX_REQUESTS - 1}`)!;
    expect(
      (await gw1.request(`/v1/events/${eventId}/notify`, { method: "DELETE", token: waiting.accessToken })).status,
    ).toBe(204);
    expect((await ask(gw1, eventId, late3!.accessToken, "push:late3")).status).toBe(201);
  });

  it("refuses a contact with control characters (a CR/LF would end a mail header downstream)", async () => {
    const { eventId } = await soldOutEvent(1);
    const token = await admitted(gw1, eventId, "ctl");
    const bad = [
      "mail:a@example.com\r\nBcc: everyone@example.com",
      "mail:a@example.com\nX: y",
      "mail:a@example.com\r",
      "mail:a\u0000@example.com",
      "mail:a\u0007@example.com",
      "mail:a\u001b[2J@example.com",
      "mail:a\u007f@example.com",
      "mail:a\u0085@example.com",
      "mail:a\u009b@example.com",
      "mail:a@example.com\u2028Bcc: x",
      "mail:a@example.com\u2029",
      "mail:a\ud800@example.com",
    ];
    for (const contact of bad) {
      const res = await ask(gw1, eventId, token, contact);
      expect(res.status, JSON.stringify(contact)).toBe(400);
      const body = (await res.json()) as {
        error: { code: string; requestId: string; details: { issues: Array<{ path: string }> } };
      };
      expect(body.error.code).toBe("invalid_request");
      expect(body.error.requestId).toBeTruthy();
      expect(body.error.details.issues.map((i) => i.path)).toContain("contact");
    }
    // Nothing was stored for any of them; a printable contact (any script, spaces) is taken.
    const none = await gw1.request(`/v1/events/${eventId}/notify`, { token });
    expect(await none.json()).toEqual({ eventId, requested: false });
    const ok = await ask(gw1, eventId, token, "mail:Zoë Ünal <zoe@example.com>");
    expect(ok.status).toBe(201);
  });

  it("the webhook carries a contact as JSON data, escaped, never as raw control bytes", async () => {
    // A contact stored before the gateway refused control characters still goes out escaped.
    const eventId = uniqueId("esc");
    const contact = "mail:a@example.com\r\nBcc: everyone@example.com\u0000";
    const out = await postSeatsBack({ url: receiver.url, secret: derivedNotifySecret(SECRET) }, `nb_${eventId}`, {
      eventId,
      seatsReturned: 1,
      fans: [{ fanId: "old", contact }],
      at: new Date().toISOString(),
    });
    expect(out.ok).toBe(true);
    const post = receiver.posts.find((p) => p.payload.eventId === eventId);
    for (const raw of ["\r", "\n", "\u0000"]) expect(post?.raw).not.toContain(raw);
    expect(post?.payload.fans[0]?.contact).toBe(contact);
    expect(post?.key).toBe(`nb_${eventId}`);
  });

  it("a batch whose delivery never got through is delivered again by the backstop, under the same key", async () => {
    let now = Date.now();
    const dynamo = createDynamoClient({ endpoint: inject("dynamoEndpoint"), region: "us-east-1" });
    try {
      const store = createNotifyStore({ client: dynamo, tableName, clock: () => now });
      // No queue: one attempt at once, as when the job was lost with a Redis restarted empty.
      const notifier = createNotifier({
        store,
        delivery: { url: receiver.url, secret: derivedNotifySecret(SECRET) },
        logger: pino({ level: "silent" }),
        clock: () => now,
      });
      const eventId = uniqueId("bs");
      for (const fanId of ["b0", "b1", "b2"]) {
        expect((await store.request({ eventId, fanId, contact: `c-${fanId}`, maxRequests: 10 })).ok).toBe(true);
        now += 1;
      }
      receiver.state.failNext = 1;
      expect(await notifier.seatsReturned(eventId, 1)).toBe(FANS_PER_SEAT);
      const mine = () => receiver.posts.filter((p) => p.payload.eventId === eventId);
      expect(mine().map((p) => p.status)).toEqual([500]);
      // Not due yet: the job's own retries would still be running.
      expect(await notifier.redeliverDue(eventId)).toBe(0);
      now += REDELIVER_AFTER_MS + 1;
      expect(await notifier.redeliverDue(eventId)).toBe(1);
      expect(mine().map((p) => p.status)).toEqual([500, 200]);
      expect(mine()[1]!.key).toBe(mine()[0]!.key);
      expect(mine()[1]!.payload.fans.map((f) => f.fanId)).toEqual(["b0", "b1"]);
      // Acknowledged: out of the backstop's index for good.
      now += REDELIVER_AFTER_MS + 1;
      expect(await notifier.redeliverDue(eventId)).toBe(0);
      expect((await store.get(eventId, "b0"))?.state).toBe("notified");
      expect((await store.get(eventId, "b2"))?.state).toBe("waiting");
    } finally {
      dynamo.destroy();
    }
  });

  it("many returns claimed at once on two gateways: each fan once, the earliest askers", async () => {
    const { eventId } = await soldOutEvent(1);
    const store = createNotifyStore({ client: gw1.deps.clients.dynamo, tableName });
    const fanIds = Array.from({ length: 20 }, (_, i) => `m${String(i).padStart(2, "0")}`);
    // In a known order: one after the other.
    for (const fanId of fanIds) {
      expect((await store.request({ eventId, fanId, contact: fanId, maxRequests: 100 })).ok).toBe(true);
    }
    const returns = 8;
    const claimed = await Promise.all(
      Array.from({ length: returns }, (_, i) => (i % 2 ? gw2 : gw1).deps.notify.seatsReturned(eventId, 1)),
    );
    expect(claimed.reduce((a, b) => a + b, 0)).toBe(returns * FANS_PER_SEAT);
    await vi.waitFor(
      () =>
        expect(
          receiver
            .accepted()
            .filter((p) => p.payload.eventId === eventId)
            .flatMap((p) => p.payload.fans),
        ).toHaveLength(returns * FANS_PER_SEAT),
      { timeout: 20_000, interval: 50 },
    );
    const told = receiver
      .accepted()
      .filter((p) => p.payload.eventId === eventId)
      .flatMap((p) => p.payload.fans.map((f) => f.fanId));
    expect([...told].sort()).toEqual(fanIds.slice(0, returns * FANS_PER_SEAT));
  });

  it("a return whose claim threw is told by the backstop a grace later, once per fan, with two backstops at once", async () => {
    const { eventId, hold } = await soldOutEvent(2, 3_600);
    const fans = ["k0", "k1", "k2", "k3", "k4", "k5"];
    const tokens = (await admitFans(gw1, eventId, fans)).map((f) => f.accessToken);
    for (const [i, t] of tokens.entries()) expect((await ask(gw1, eventId, t, `push:k${i}`)).status).toBe(201);
    let now = clock();
    const store = createNotifyStore({ client: gw1.deps.clients.dynamo, tableName, clock: () => now });
    // The real store, whose next claim fails as DynamoDB may (throttled, timed out).
    let faults = 1;
    const flaky: NotifyStore = {
      ...store,
      claim: (...args) =>
        faults-- > 0
          ? Promise.reject(new Error("injected: ProvisionedThroughputExceededException"))
          : store.claim(...args),
    };
    const available = async (id: string) => {
      const counts = await gw1.deps.inventory.seats.eventCounts({ eventId: id });
      return counts ? counts.seats.available : null;
    };
    // Two processes' notifiers, no queue: a batch is posted at once.
    const notifierOf = (s: NotifyStore) =>
      createNotifier({
        store: s,
        delivery: { url: receiver.url, secret: derivedNotifySecret(SECRET) },
        fansPerSeat: FANS_PER_SEAT,
        available,
        logger: pino({ level: "silent" }),
        clock: () => now,
      });
    const a = notifierOf(flaky);
    const b = notifierOf(store);
    const mine = () => receiver.accepted().filter((p) => p.payload.eventId === eventId);

    // The release commits (on the gateway that tells nobody), then its notice's claim throws.
    expect((await off.deps.holds.release({ eventId, holdId: hold.holdId, fanId: "buyer" })).ok).toBe(true);
    expect(await a.seatsReturned(eventId, 2)).toBe(0);
    expect(faults).toBe(0);
    expect(mine()).toHaveLength(0);

    // The first look sees the shortfall, which a claim still in flight would show too: it waits.
    expect(await a.reconcile(eventId)).toBe(0);
    expect(mine()).toHaveLength(0);
    now += RECONCILE_GRACE_MS;
    // Still short a grace later: told, by one of two backstops running at once.
    const claimed = await Promise.all([a.reconcile(eventId), b.reconcile(eventId)]);
    expect(claimed.reduce((x, y) => x + y, 0)).toBe(2 * FANS_PER_SEAT);
    expect(mine()).toHaveLength(1);
    expect(mine()[0]!.payload.seatsReturned).toBe(2);
    expect(mine()[0]!.payload.fans).toEqual(fans.slice(0, 4).map((f, i) => ({ fanId: f, contact: `push:k${i}` })));

    // The seats are still there, and told: later checks (through the sweeps' backstop) tell nobody.
    for (let i = 0; i < 3; i++) {
      now += RECONCILE_EVERY_MS + RECONCILE_GRACE_MS;
      await Promise.all([a.redeliverDue(eventId), b.redeliverDue(eventId)]);
    }
    expect(receiver.posts.filter((p) => p.payload.eventId === eventId)).toHaveLength(1);
    expect((await store.get(eventId, "k0"))?.state).toBe("notified");
    expect((await store.get(eventId, "k4"))?.state).toBe("waiting");
  });

  it("a process that dies between the release and the claim: the sweeps' backstop tells the fans; nothing back, nobody told", async () => {
    const { eventId, hold } = await soldOutEvent(1, 3_600);
    const fans = ["d0", "d1", "d2", "d3"];
    const tokens = (await admitFans(gw1, eventId, fans)).map((f) => f.accessToken);
    for (const [i, t] of tokens.entries()) expect((await ask(gw1, eventId, t, `push:d${i}`)).status).toBe(201);
    const mine = () => receiver.posts.filter((p) => p.payload.eventId === eventId);
    const state = async (fanId: string) => (await gw1.deps.notify.get(eventId, fanId))?.state;
    /** Two gateways' sweeps, then again a grace later: what the backstop needs to tell a shortfall. */
    const sweepsAGraceApart = async () => {
      clockOffsetMs += RECONCILE_EVERY_MS;
      await sweepBoth(eventId);
      clockOffsetMs += RECONCILE_GRACE_MS;
      await sweepBoth(eventId);
    };

    // Sold out, fans waiting, nothing came back: the backstop tells nobody.
    await sweepsAGraceApart();
    await sleep(300);
    expect(mine()).toHaveLength(0);
    expect(await state("d0")).toBe("waiting");

    // The release commits and the process dies before claiming anyone (the gateway without notices).
    expect((await off.deps.holds.release({ eventId, holdId: hold.holdId, fanId: "buyer" })).ok).toBe(true);
    await sweepsAGraceApart();
    await vi.waitFor(() => expect(mine().filter((p) => p.status === 200)).toHaveLength(1), {
      timeout: 20_000,
      interval: 50,
    });
    expect(mine()[0]!.payload.fans.map((f) => f.fanId)).toEqual(["d0", "d1"]);

    // Told once: the seat still free, the backstop tells nobody more about it.
    await sweepsAGraceApart();
    await sleep(300);
    expect(mine()).toHaveLength(1);

    // Taken again (the level follows it down), then lost again the same way: the next fans are told.
    const again = await off.deps.holds.holdSeats({ eventId, fanId: "buyer2", seatIds: ["A-1-1"], holdSeconds: 3_600 });
    if (!again.ok) throw new Error(`hold failed: ${JSON.stringify(again)}`);
    await sweepsAGraceApart();
    await sleep(300);
    expect(mine()).toHaveLength(1);
    expect((await off.deps.holds.release({ eventId, holdId: again.hold.holdId, fanId: "buyer2" })).ok).toBe(true);
    await sweepsAGraceApart();
    await vi.waitFor(() => expect(mine().filter((p) => p.status === 200)).toHaveLength(2), {
      timeout: 20_000,
      interval: 50,
    });
    expect(mine()[1]!.payload.fans.map((f) => f.fanId)).toEqual(["d2", "d3"]);
    expect(await state("d0")).toBe("notified");
  });

  it("a return told by its own claim, even one still in flight when the backstop looks, is not told again", async () => {
    const { eventId, hold } = await soldOutEvent(2, 3_600);
    const fans = ["i0", "i1", "i2", "i3", "i4", "i5", "i6", "i7"];
    const tokens = (await admitFans(gw1, eventId, fans)).map((f) => f.accessToken);
    for (const [i, t] of tokens.entries()) expect((await ask(gw1, eventId, t, `push:i${i}`)).status).toBe(201);
    let now = clock();
    const notifier = createNotifier({
      store: createNotifyStore({ client: gw1.deps.clients.dynamo, tableName, clock: () => now }),
      delivery: { url: receiver.url, secret: derivedNotifySecret(SECRET) },
      fansPerSeat: FANS_PER_SEAT,
      available: async (id) => (await gw1.deps.inventory.seats.eventCounts({ eventId: id }))?.seats.available ?? null,
      logger: pino({ level: "silent" }),
      clock: () => now,
    });
    const mine = () => receiver.posts.filter((p) => p.payload.eventId === eventId);

    // The seats are back and the backstop looks before the return's own claim: a shortfall...
    expect((await off.deps.holds.release({ eventId, holdId: hold.holdId, fanId: "buyer" })).ok).toBe(true);
    expect(await notifier.reconcile(eventId)).toBe(0);
    // ...which the claim, landing now, covers.
    expect(await notifier.seatsReturned(eventId, 2)).toBe(2 * FANS_PER_SEAT);
    expect(mine()).toHaveLength(1);
    for (let i = 0; i < 3; i++) {
      now += RECONCILE_EVERY_MS + RECONCILE_GRACE_MS;
      expect(await notifier.reconcile(eventId)).toBe(0);
    }

    // One seat taken and given back through a release that tells: told once, by the release.
    const again = await off.deps.holds.holdSeats({ eventId, fanId: "buyer2", seatIds: ["A-1-1"], holdSeconds: 3_600 });
    if (!again.ok) throw new Error(`hold failed: ${JSON.stringify(again)}`);
    now += RECONCILE_EVERY_MS;
    expect(await notifier.reconcile(eventId)).toBe(0);
    const released = await notifier.wrapHolds(off.deps.holds).release({
      eventId,
      holdId: again.hold.holdId,
      fanId: "buyer2",
    });
    expect(released.ok).toBe(true);
    await vi.waitFor(() => expect(mine()).toHaveLength(2), { timeout: 20_000, interval: 50 });
    for (let i = 0; i < 3; i++) {
      now += RECONCILE_EVERY_MS + RECONCILE_GRACE_MS;
      expect(await notifier.reconcile(eventId)).toBe(0);
    }
    expect(mine()).toHaveLength(2);
    expect(mine().flatMap((p) => p.payload.fans.map((f) => f.fanId))).toEqual(fans.slice(0, 6));
  });
});
