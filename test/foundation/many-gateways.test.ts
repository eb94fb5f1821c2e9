/**
 * Many gateways: three gateway processes (src/main.ts --role=gateway) and two worker processes
 * (--role=worker) on one redis-server and one local DynamoDB of their own
 * (test/chaos/support/cluster.ts), and 120 fans spread over the gateways: each fan sends each of
 * its requests to the next gateway in turn (fan i joins on gateway i mod 3, polls on the next,
 * holds on the next, buys on the next), so every token is checked by a gateway that did not
 * issue it.
 *
 *   1. Admission across gateways: the room opens at RATE fans a second while every fan polls;
 *      the waiting room is one in Redis, so however many gateways answer the polls, the k-th
 *      admission comes no earlier than RATE allows (from the moment the rate was set, plus the
 *      one second of budget a room may bank).
 *   2. A probe: a hold made on gateway 0 reaches the seat-map streams of gateways 1 and 2, its
 *      purchase on gateway 1 those of gateways 0 and 2.
 *   3. The crowd, all at once: 60 seats and a 20-place standing area for 119 fans, holds and
 *      purchases in flight together; some fans walk away from their hold (the sweep), some pay
 *      with a timeout (the reconciler), some are declined and release.
 *   4. Afterwards: no 5xx, no 401; the audit passes; every gateway's stream and section page
 *      show what DynamoDB holds; the outbox put exactly one booking job per confirmed purchase
 *      on the queue; both workers ran jobs. Then an oversold copy of the sale (a second
 *      confirmed purchase of a sold seat, written straight into the table) fails the audit, so
 *      the audit above could have failed.
 */
import { Queue } from "bullmq";
import { PutCommand, DynamoDBDocumentClient } from "@aws-sdk/lib-dynamodb";
import { afterAll, beforeAll, describe, expect, it, onTestFailed } from "vitest";
import { keys, purchaseShard } from "../../src/inventory/keys.js";
import { QUEUE_PREFIX, queueNames } from "../../src/workers/queues.js";
import { type Cluster, sleep, startCluster } from "../chaos/support/cluster.js";
import { seatIds } from "../chaos/support/fans.js";
import { type Answer, Traffic } from "../chaos/support/traffic.js";
import { ADMIN_TOKEN, eventInput, uniqueId } from "../gateway/harness.js";

const GATEWAYS = 3;
const WORKERS = 2;
const FANS = 120;
/** Admissions a second while the crowd polls (120 fans: about 6 s). */
const RATE = 20;
const SECTION = { id: "A", tier: "Floor", price: 10_000, rows: 6, seatsPerRow: 10 };
const STANDING = { id: "GA", tier: "Standing", price: 4_000, capacity: 20 };
/**
 * Long: on a loaded 2-core box a hold or a purchase in this crowd can take several seconds (the
 * local DynamoDB is one Node process); a hold that lapses under its buyer is no finding here.
 */
const HOLD_SECONDS = 30;

type Status = "available" | "held" | "sold";

let cluster: Cluster | undefined;
const streams: SeatStream[] = [];

beforeAll(async () => {
  cluster = await startCluster({
    gateways: 0,
    worker: false,
    // Generous: a 503 here would be the machine's load, not the design; none is expected.
    dynamoTimeoutMs: 10_000,
    dynamoMaxAttempts: 2,
    paymentTimeoutMs: 1_000,
    // The workers' "job done" lines (debug) say which worker ran which job.
    workerEnv: { LOG_LEVEL: "debug" },
  });
  const c = cluster;
  // In parallel: five processes loading tsx one after another would take most of a minute.
  await Promise.all([
    ...Array.from({ length: GATEWAYS }, () => c.startGateway()),
    c.startWorker(),
    ...Array.from({ length: WORKERS - 1 }, () => c.startAnotherWorker()),
  ]);
}, 180_000);

afterAll(async () => {
  for (const s of streams) s.close();
  await cluster?.close();
});

/** One fan: its requests go to the gateways in turn, starting at `first`. */
class Route {
  constructor(
    private readonly traffics: readonly Traffic[],
    private turn: number,
  ) {}
  next(): Traffic {
    return this.traffics[this.turn++ % this.traffics.length]!;
  }
}

interface Fan {
  i: number;
  fanId: string;
  route: Route;
  queueToken: string;
  position: number;
  accessToken?: string;
  /** Test clock when the poll that carried the access token was answered. */
  admittedAt?: number;
}

/** A gateway's seat-map stream, read as it comes: the last status it told of each seat. */
interface SeatStream {
  gateway: number;
  last: Map<string, Status>;
  events: number;
  ready: Promise<void>;
  close(): void;
}

function openSeatStream(url: string, eventId: string, gateway: number): SeatStream {
  const controller = new AbortController();
  const last = new Map<string, Status>();
  const stream: SeatStream = { gateway, last, events: 0, ready: Promise.resolve(), close: () => controller.abort() };
  stream.ready = (async () => {
    const res = await fetch(`${url}/v1/events/${eventId}/seatmap/stream`, { signal: controller.signal });
    if (res.status !== 200) throw new Error(`stream on gateway ${gateway}: ${res.status}`);
    const reader = res.body!.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    let readyResolve: () => void = () => undefined;
    const ready = new Promise<void>((resolve) => {
      readyResolve = resolve;
    });
    void (async () => {
      try {
        for (;;) {
          const { value, done } = await reader.read();
          if (done) return;
          buffer += decoder.decode(value, { stream: true });
          let end = buffer.indexOf("\n\n");
          while (end >= 0) {
            const frame = buffer.slice(0, end);
            buffer = buffer.slice(end + 2);
            end = buffer.indexOf("\n\n");
            const event = /^event: (.+)$/m.exec(frame)?.[1];
            const data = /^data: (.+)$/m.exec(frame)?.[1];
            if (event === "ready") readyResolve();
            if (event === "seat" && data) {
              const change = JSON.parse(data) as { id: string; status: Status };
              last.set(change.id, change.status);
              stream.events++;
            }
          }
        }
      } catch {
        // aborted at the end of the test
      }
    })();
    await ready;
  })();
  return stream;
}

/** Polls `check` until it returns true; throws with `what` after `timeoutMs`. */
async function eventually(what: () => string, check: () => Promise<boolean> | boolean, timeoutMs = 30_000) {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`not within ${timeoutMs} ms: ${what()}`);
    await sleep(100);
  }
}

function retryAfterMs(answer: Answer, fallbackMs = 300): number {
  const header = Number(answer.headers.get("retry-after"));
  const base = Number.isFinite(header) && header > 0 ? header * 1000 : fallbackMs;
  return base * (0.5 + Math.random() * 0.5);
}

describe("many gateways: three gateway processes and two workers on one Redis and one DynamoDB", () => {
  it("sells out through every gateway at once, admission at one rate, the audit passing", async () => {
    const c = cluster!;
    onTestFailed(() => console.log(c.recentLogs(40)));
    expect(c.gateways).toHaveLength(GATEWAYS);
    expect(c.workerProcesses).toHaveLength(WORKERS);
    const traffics = c.gateways.map((g) => new Traffic(() => g.url));
    const eventId = uniqueId("mg");
    const ev = `/v1/events/${eventId}`;
    await c.putEvent(
      eventId,
      eventInput({
        holdSeconds: HOLD_SECONDS,
        maxSeatsPerFan: 4,
        sections: [SECTION],
        generalAdmission: [STANDING],
        // Closed until the crowd has joined; then RATE a second (below).
        waitingRoom: { admitPerSecond: 0, maxActive: 10_000, sessionSeconds: 600 },
      }),
    );
    for (const [g, gw] of c.gateways.entries()) streams.push(openSeatStream(gw.url!, eventId, g));
    await Promise.all(streams.map((s) => s.ready));

    // ---- 1. everyone joins at once, spread over the gateways; then the room opens at RATE ----
    const fans: Fan[] = await Promise.all(
      Array.from({ length: FANS }, async (_, i) => {
        const fanId = `fan${i}`;
        const route = new Route(traffics, i % GATEWAYS);
        for (;;) {
          const res = await route.next().request(`${ev}/queue`, { method: "POST", json: { fanId }, kind: "join" });
          if (res.status === 201) {
            const body = res.body as { queueToken: string; position: number };
            return { i, fanId, route, queueToken: body.queueToken, position: body.position };
          }
          if (res.status !== 503 && res.status !== 0) throw new Error(`join ${fanId}: ${res.status}`);
          await sleep(retryAfterMs(res));
        }
      }),
    );
    expect(new Set(fans.map((f) => f.position)).size).toBe(FANS);

    const openedAt = Date.now();
    const opened = await traffics[1]!.request(`/v1/admin/events/${eventId}/waiting-room`, {
      method: "PATCH",
      json: { admitPerSecond: RATE },
      token: ADMIN_TOKEN,
      kind: "admin",
    });
    expect(opened.status).toBe(200);
    await Promise.all(
      fans.map(async (fan) => {
        while (!fan.accessToken) {
          const res = await fan.route.next().request(`${ev}/queue/status`, { token: fan.queueToken, kind: "status" });
          const body = res.body as { accessToken?: string; pollAfterSeconds?: number } | null;
          if (res.status === 200 && body?.accessToken) {
            fan.accessToken = body.accessToken;
            fan.admittedAt = res.endedAt;
          } else if (Date.now() - openedAt > 90_000) {
            throw new Error(`${fan.fanId} not admitted: ${res.status} ${JSON.stringify(res.body)}`);
          } else {
            await sleep(res.status === 200 ? 400 : retryAfterMs(res));
          }
        }
      }),
    );
    // The k-th admission (by the time its answer came back, which is after the admission) no
    // earlier than RATE allows from the moment the rate was sent, plus one second of budget.
    const admittedAt = fans.map((f) => f.admittedAt!).sort((a, b) => a - b);
    const tooEarly = admittedAt
      .map((at, k) => ({ k: k + 1, allowed: Math.floor((RATE * (at - openedAt)) / 1000) + RATE + 1 }))
      .filter(({ k, allowed }) => k > allowed);
    const admissionSeconds = (admittedAt.at(-1)! - openedAt) / 1000;
    console.info(
      `admission: ${FANS} fans over ${GATEWAYS} gateways in ${admissionSeconds.toFixed(1)} s at ${RATE}/s ` +
        `(${(FANS / admissionSeconds).toFixed(1)}/s observed)`,
    );
    expect(tooEarly).toEqual([]);

    // ---- 2. a probe: a change made on one gateway reaches the streams of the others ----
    const probe = fans[0]!;
    const probeSeat = "A-1-1";
    const probeHold = await traffics[0]!.request(`${ev}/holds`, {
      method: "POST",
      token: probe.accessToken!,
      json: { seats: [probeSeat] },
      kind: "hold",
    });
    expect(probeHold.status).toBe(201);
    const probeHoldId = (probeHold.body as { holdId: string }).holdId;
    await eventually(
      () => "the probe's hold on the streams of gateways 1 and 2",
      () => streams[1]!.last.get(probeSeat) === "held" && streams[2]!.last.get(probeSeat) === "held",
    );
    const probeBuy = await traffics[1]!.request(`${ev}/holds/${probeHoldId}/purchase`, {
      method: "POST",
      token: probe.accessToken!,
      headers: { "idempotency-key": "probe-k1" },
      json: { paymentToken: "tok_ok" },
      kind: "purchase",
    });
    expect(probeBuy.status).toBe(201);
    await eventually(
      () => "the probe's purchase on the streams of gateways 0 and 2",
      () => streams[0]!.last.get(probeSeat) === "sold" && streams[2]!.last.get(probeSeat) === "sold",
    );

    // ---- 3. the crowd, all at once ----
    const free = seatIds(SECTION).filter((s) => s !== probeSeat);
    const pick = (n: number) => {
      const out: string[] = [];
      while (out.length < n && free.length > 0) out.push(free.splice(Math.floor(Math.random() * free.length), 1)[0]!);
      return out;
    };
    const outcomes: Record<string, number> = {};
    const note = (what: string) => {
      outcomes[what] = (outcomes[what] ?? 0) + 1;
    };
    const tokenOf = (fan: Fan) => (fan.i % 20 === 7 ? "tok_timeout" : fan.i % 20 === 13 ? "tok_decline" : "tok_ok");

    async function buy(fan: Fan, holdId: string): Promise<number> {
      for (let attempt = 0; ; attempt++) {
        const res = await fan.route.next().request(`${ev}/holds/${holdId}/purchase`, {
          method: "POST",
          token: fan.accessToken!,
          headers: { "idempotency-key": `${fan.fanId}-k1` },
          json: { paymentToken: tokenOf(fan) },
          kind: "purchase",
        });
        if ((res.status !== 503 && res.status !== 0) || attempt >= 10) return res.status;
        await sleep(retryAfterMs(res));
      }
    }

    async function shop(fan: Fan): Promise<void> {
      const standing = fan.i % 4 === 0;
      for (let attempt = 0; attempt < 8; attempt++) {
        const want = 1 + (Math.floor(fan.i / 4) % 2);
        const seats = standing ? [] : pick(want);
        if (!standing && seats.length === 0) return note("nothing left to try");
        const res = await fan.route.next().request(`${ev}/holds`, {
          method: "POST",
          token: fan.accessToken!,
          json: standing ? { generalAdmission: { id: STANDING.id, quantity: want } } : { seats },
          kind: "hold",
        });
        if (res.status === 409) {
          note(standing ? "standing sold out" : "lost a seat (409)");
          if (standing) return;
          continue;
        }
        if (res.status !== 201) {
          free.push(...seats);
          note(`hold ${res.status}`);
          if (res.status === 503 || res.status === 0) await sleep(retryAfterMs(res));
          continue;
        }
        const holdId = (res.body as { holdId: string }).holdId;
        if (fan.i % 10 === 9) return note("walked away from the hold");
        const bought = await buy(fan, holdId);
        note(`purchase ${bought}`);
        if (bought === 402) {
          const released = await fan.route.next().request(`${ev}/holds/${holdId}`, {
            method: "DELETE",
            token: fan.accessToken!,
            kind: "release",
          });
          note(`release ${released.status}`);
        }
        return;
      }
    }

    await Promise.all(fans.slice(1).map((f) => shop(f)));
    console.info(`the crowd: ${JSON.stringify(outcomes)}`);

    // ---- 4. afterwards ----
    await c.waitUntilSettled(eventId);
    // The sweeper resets the walked-away holds once they expire (the lapsed-hold check reads DynamoDB).
    let stored = await c.storedSeats(eventId, [SECTION.id]);
    await eventually(
      () => `${stored.filter((s) => s.status === "held").length} seats still held in DynamoDB`,
      async () => {
        stored = await c.storedSeats(eventId, [SECTION.id]);
        return stored.every((s) => s.status !== "held");
      },
      60_000,
    );
    const truth = new Map(stored.map((s) => [s.id, s.status as Status]));
    const sold = stored.filter((s) => s.status === "sold").length;
    expect(sold).toBeGreaterThan(0);

    // Every gateway's stream and in-memory section page say what DynamoDB says, seat by seat.
    const pages = new Map<number, Map<string, Status>>();
    const mismatches = () => {
      const out: string[] = [];
      for (const s of streams) {
        for (const [id, status] of truth) {
          const seen = s.last.get(id) ?? "available";
          if (seen !== status) out.push(`stream ${s.gateway}: ${id} ${seen}, stored ${status}`);
        }
      }
      for (const [g, page] of pages) {
        for (const [id, status] of truth) {
          if (page.get(id) !== status) out.push(`page of gateway ${g}: ${id} ${page.get(id)}, stored ${status}`);
        }
      }
      return out;
    };
    await eventually(
      () => mismatches().slice(0, 10).join("; "),
      async () => {
        for (const [g, traffic] of traffics.entries()) {
          const res = await traffic.request(`${ev}/sections/${SECTION.id}/seats`, { kind: "seatmap" });
          const body = res.body as { seats: Array<{ id: string; status: Status }> };
          pages.set(g, new Map(body.seats.map((s) => [s.id, s.status])));
        }
        return mismatches().length === 0;
      },
    );

    const report = await c.audit(eventId);
    expect(report.checks.filter((check) => check.status === "fail")).toEqual([]);
    expect(report.ok).toBe(true);
    const counts = await c.purchaseCounts(eventId);
    expect(counts.confirmed).toBeGreaterThan(0);

    // The outbox: one job per confirmed purchase on the bookings queue, whichever worker published it.
    const confirmed = await c.inventory.purchases.list({ eventId, status: "confirmed", limit: 1_000 });
    const confirmedIds = confirmed.purchases.map((p) => p.purchaseId).sort();
    const bookings = new Queue(queueNames.bookings, { connection: c.redis, prefix: QUEUE_PREFIX });
    let booked: string[] = [];
    try {
      await eventually(
        () => `${booked.length} booking jobs for ${confirmedIds.length} confirmed purchases`,
        async () => {
          const jobs = await bookings.getJobs(["waiting", "active", "completed", "failed", "delayed", "prioritized"]);
          booked = jobs
            .map((j) => j.data as { eventId: string; purchaseId: string })
            .filter((d) => d.eventId === eventId)
            .map((d) => d.purchaseId)
            .sort();
          return booked.length >= confirmedIds.length;
        },
      );
    } finally {
      await bookings.close();
    }
    expect(booked).toEqual(confirmedIds);

    // Both workers ran jobs: sweeps, the outbox, reconciles.
    const jobsBy = c.workerProcesses.map((w) => {
      const byQueue: Record<string, number> = {};
      for (const line of w.logs) {
        if (!line.includes('"job done"')) continue;
        const queue = /"queue":"([^"]+)"/.exec(line)?.[1] ?? "?";
        byQueue[queue] = (byQueue[queue] ?? 0) + 1;
      }
      return byQueue;
    });
    console.info(`jobs done by worker: ${JSON.stringify(jobsBy)}`);
    for (const byQueue of jobsBy) expect(Object.values(byQueue).reduce((a, b) => a + b, 0)).toBeGreaterThan(0);

    // Every gateway served every kind of fan request; none refused a token another issued.
    const total = { requests: 0, serverErrors: 0, unavailable: 0, noAnswer: 0 };
    for (const [g, t] of traffics.entries()) {
      console.info(`gateway ${g}: ${t.summary()}; ${JSON.stringify(t.counts.byKind)}`);
      expect(t.violations).toEqual([]);
      for (const kind of ["join", "status", "hold", "purchase"]) {
        expect(
          Object.values(t.counts.byKind[kind] ?? {}).reduce((a, b) => a + b, 0),
          `${kind} on ${g}`,
        ).toBeGreaterThan(0);
      }
      for (const [kind, statuses] of Object.entries(t.counts.byKind)) expect(statuses["401"], kind).toBeUndefined();
      total.requests += t.counts.total;
      total.serverErrors += t.counts.serverErrors;
      total.unavailable += t.counts.unavailable;
      total.noAnswer += t.counts.noAnswer;
    }
    console.info(
      `${total.requests} requests; ${sold} seats and ${report.totals.generalAdmission.sold} standing places sold; ` +
        `purchases ${JSON.stringify(counts)}; stream events seen: ${streams.map((s) => s.events).join(", ")}`,
    );
    expect(total).toMatchObject({ serverErrors: 0, unavailable: 0, noAnswer: 0 });

    // The audit could have failed: the same sale with one seat sold twice does.
    const soldSeat = stored.find((s) => s.status === "sold")!;
    const twin = `${eventId}-twin`;
    await DynamoDBDocumentClient.from(c.dynamo).send(
      new PutCommand({
        TableName: c.tableName,
        Item: {
          ...keys.purchase(eventId, twin),
          entity: "PURCHASE",
          eventId,
          purchaseId: twin,
          holdId: "f".repeat(32),
          fanId: "fan-twin",
          status: "confirmed",
          seats: [soldSeat.id],
          amount: SECTION.price,
          createdAt: new Date().toISOString(),
          confirmedAt: new Date().toISOString(),
          // Confirmed, its booking not acknowledged yet: among the open purchases (GSI3).
          outboxState: "unsent",
          GSI3PK: keys.openPurchasesPartition(eventId, purchaseShard(twin)),
          GSI3SK: keys.openPurchaseSortKey(new Date().toISOString(), twin),
        },
      }),
    );
    const oversold = await c.audit(eventId);
    expect(oversold.ok).toBe(false);
    expect(oversold.checks.filter((check) => check.status === "fail").map((check) => check.name)).toContain(
      "seats_sold_once",
    );
  }, 300_000);
});
