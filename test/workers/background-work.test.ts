/**
 * Background work follows the work waiting, and an event's jobs end with it (issue 16): a sweep
 * runs because a hold expired and never for an event without holds; the outbox's common path
 * writes one update per purchase (the acknowledgment) and a confirmation whose job was never
 * added is still published by the backstop; a closed event's jobs all go from Redis once its
 * remaining work is done, a live event beside it keeps its own, and neither a restart nor a
 * reconnect arms it again.
 *
 * Each describe runs an in-process gateway with its workers on a redis-server of its own (the
 * queues' prefix is the production one, so no other test's workers may share it), against the
 * real local DynamoDB. DynamoDB commands are recorded by a middleware on the gateway's client.
 */
import type { Queue, Worker } from "bullmq";
import { Redis } from "ioredis";
import pino from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildApp } from "../../src/http/app.js";
import { keys, SWEEP_SHARDS, shardOf } from "../../src/inventory/keys.js";
import { purchaseIdOf } from "../../src/purchases/saga.js";
import { type SpawnedRedis, spawnRedis } from "../../src/local/redis.js";
import { buildServices, type ServicesConfig } from "../../src/services.js";
import { consumeBookings } from "../../src/workers/bookings-consumer.js";
import { QUEUE_PREFIX, reconcileScheduler } from "../../src/workers/queues.js";
import type { WorkerDeps } from "../../src/workers/workers.js";
import {
  ADMIN_TOKEN,
  type AdmittedFan,
  admitFans,
  createTable,
  eventInput,
  type Gateway,
  gatewayOf,
  putEvent,
  testServicesConfig,
  uniqueId,
} from "../gateway/harness.js";
import { pollUntil } from "../support/worker-process.js";

interface Sent {
  command: string;
  input: Record<string, unknown>;
}

interface Rig {
  redis: SpawnedRedis;
  tableName: string;
  gw: Gateway;
  sent: Sent[];
  close(): Promise<void>;
}

const logger = pino({ level: "silent" });
/**
 * A live event's backstops: a sweep per shard, the sweep that reads the sections, the seat-map
 * rebuild, the reconcile, the outbox.
 */
const LIVE_SCHEDULERS = SWEEP_SHARDS + 4;

async function startRig(
  options: { config?: Partial<ServicesConfig>; workers?: Pick<WorkerDeps, "outbox" | "ending"> } = {},
): Promise<Rig> {
  const redis = await spawnRedis();
  const tableName = await createTable();
  const services = buildServices({
    ...testServicesConfig({ tableName, redisUrl: redis.url }),
    redisOptions: { maxRetriesPerRequest: 1, enableAutoPipelining: true },
    queues: true,
    ...options.config,
  });
  const sent: Sent[] = [];
  services.clients.dynamo.middlewareStack.add(
    (next, context) => async (args) => {
      sent.push({ command: String(context.commandName), input: args.input as Record<string, unknown> });
      return next(args);
    },
    { step: "initialize", name: "testRecorder" },
  );
  const gw = gatewayOf(buildApp(services), services);
  services.startWorkers(options.workers ?? {});
  return {
    redis,
    tableName,
    gw,
    sent,
    close: async () => {
      await gw.close();
      await redis.close();
    },
  };
}

/** A string attribute value, marshalled or not. */
const s = (v: unknown): string | undefined =>
  typeof v === "string" ? v : ((v as { S?: string } | undefined)?.S ?? undefined);

/**
 * The sweeps' reads of an event: Queries of the held-seat / held-admission index (GSI2; the outbox
 * publisher's shards are GSI2 too, and not a sweep's), and of a section's seats filtered to
 * expired holds (the sweep's read of a section the seat map does not have).
 */
function sweepQueries(sent: Sent[], eventId: string): string[] {
  return sent
    .filter(
      (c) =>
        c.command === "QueryCommand" &&
        (c.input.IndexName === "GSI2" || String(c.input.FilterExpression ?? "").includes("holdExpiresAt <= :now")),
    )
    .map((c) => s((c.input.ExpressionAttributeValues as Record<string, unknown>)?.[":pk"]) ?? "")
    .filter((pk) => pk.startsWith(`EVT#${eventId}#`))
    .filter((pk) => pk.includes("#EXP#") || pk.includes("#GAEXP#") || pk.includes("#SEC#"));
}

/** UpdateItems of one outbox record. */
function outboxUpdates(sent: Sent[], eventId: string, purchaseId: string): number {
  const key = keys.outbox(eventId, purchaseId);
  return sent.filter((c) => {
    if (c.command !== "UpdateCommand" && c.command !== "UpdateItemCommand") return false;
    const k = c.input.Key as Record<string, unknown> | undefined;
    return s(k?.PK) === key.PK && s(k?.SK) === key.SK;
  }).length;
}

async function hold(gw: Gateway, eventId: string, fan: AdmittedFan, seats: string[]): Promise<Response> {
  return gw.request(`/v1/events/${eventId}/holds`, { method: "POST", json: { seats }, token: fan.accessToken });
}

async function buy(gw: Gateway, eventId: string, fan: AdmittedFan, holdId: string): Promise<string> {
  const res = await gw.request(`/v1/events/${eventId}/holds/${holdId}/purchase`, {
    method: "POST",
    token: fan.accessToken,
    headers: { "idempotency-key": `k-${fan.fanId}` },
    json: { paymentToken: "tok_ok" },
  });
  expect(res.status).toBe(201);
  const body = (await res.json()) as { purchaseId: string; status: string };
  expect(body.status).toBe("confirmed");
  return body.purchaseId;
}

/** A purchase confirmed in the store alone: a saga that died between the commit and the job. */
async function confirmWithoutJob(gw: Gateway, eventId: string, fanId: string, seat: string): Promise<string> {
  const inventory = gw.deps.inventory;
  const held = await inventory.holds.holdSeats({ eventId, fanId, seatIds: [seat] });
  if (!held.ok) throw new Error(`hold ${seat}: ${held.reason}`);
  const purchaseId = purchaseIdOf(eventId, fanId, "crashed");
  expect((await inventory.purchases.createPending({ eventId, holdId: held.hold.holdId, fanId, purchaseId })).ok).toBe(
    true,
  );
  expect((await inventory.purchases.confirm({ eventId, holdId: held.hold.holdId, fanId, purchaseId })).ok).toBe(true);
  return purchaseId;
}

/** Every job scheduler and every delayed or waiting job of an event, on every queue. */
async function jobsOf(gw: Gateway, eventId: string): Promise<{ schedulers: string[]; jobs: string[] }> {
  const q = gw.deps.queues!;
  const schedulers: string[] = [];
  const jobs: string[] = [];
  for (const queue of [q.sweep, q.seatMapRefresh, q.reconcile, q.outbox] as Queue[]) {
    for (const sch of await queue.getJobSchedulers(0, -1)) {
      if ((sch.key ?? sch.id ?? "").includes(eventId)) schedulers.push(`${queue.name}/${sch.key ?? sch.id}`);
    }
    for (const job of await queue.getJobs(["delayed", "waiting", "prioritized"], 0, -1)) {
      if ((job?.data as { eventId?: string })?.eventId === eventId) jobs.push(`${queue.name}/${job.id}`);
    }
  }
  return { schedulers, jobs };
}

function startConsumer(rig: Rig, seen: Map<string, number>): Worker {
  const connection = new Redis(rig.redis.url, { maxRetriesPerRequest: null });
  const worker = consumeBookings({
    connection,
    prefix: QUEUE_PREFIX,
    inventory: rig.gw.deps.inventory,
    logger,
    concurrency: 4,
    handle: async (booking) => {
      seen.set(booking.purchaseId, (seen.get(booking.purchaseId) ?? 0) + 1);
    },
  });
  worker.on("closed", () => connection.disconnect());
  return worker;
}

describe("sweeps follow the holds", () => {
  let rig: Rig;
  beforeAll(async () => {
    rig = await startRig();
  }, 120_000);
  afterAll(async () => rig?.close());

  it("a hold's expiry brings the sweep of its shard, and an event without holds is never read", async () => {
    const { gw, sent } = rig;
    const busy = uniqueId("sw");
    const idle = uniqueId("sw");
    expect((await putEvent(gw, busy, eventInput({ holdSeconds: 2 }))).status).toBe(201);
    expect((await putEvent(gw, idle, eventInput({ holdSeconds: 2 }))).status).toBe(201);
    // The backstops run once when they are first armed (every shard of both events): let them.
    const sweep = gw.deps.queues!.sweep;
    await pollUntil(
      "the backstops' first sweeps",
      () => sweep.getJobCounts("completed", "active", "waiting"),
      (c) => (c.completed ?? 0) >= 2 && (c.active ?? 0) + (c.waiting ?? 0) === 0,
      { timeoutMs: 60_000 },
    );
    const from = sent.length;

    const fans = await admitFans(
      gw,
      busy,
      Array.from({ length: 12 }, (_, i) => `f${i}`),
    );
    const seats = fans.map((_, i) => `A-${Math.floor(i / 10) + 1}-${(i % 10) + 1}`);
    const held = await Promise.all(fans.map((fan, i) => hold(gw, busy, fan, [seats[i]!])));
    expect(held.map((r) => r.status)).toEqual(held.map(() => 201));
    const shards = new Set(seats.map((id) => shardOf(id)));

    // Swept with nobody asking, long before the 5-minute backstop.
    await pollUntil(
      "the expired holds swept",
      async () => (await gw.deps.inventory.seats.eventCounts({ eventId: busy }))?.seats,
      (c) => c?.held === 0 && c.expiredHolds === 0,
      { timeoutMs: 60_000, intervalMs: 200 },
    );
    // The job that reset the seats reads its shard's admission area after them: let it finish.
    await pollUntil(
      "the hold-driven sweeps done",
      async () =>
        (await sweep.getJobs(["active", "waiting", "delayed"], 0, -1)).filter((j) => j.id?.startsWith(`sweep-${busy}-`))
          .length,
      (n) => n === 0,
      { timeoutMs: 30_000 },
    );
    // The seats' candidates came from the seat map (the holds filled it): no expiry partition and
    // no section read; only the admission area's partition, when it falls in one of the shards.
    const busyReads = sweepQueries(sent.slice(from), busy);
    const expected = shards.has(shardOf("GA")) ? [keys.heldAdmissionsPartition(busy, "GA")] : [];
    expect(new Set(busyReads)).toEqual(new Set(expected));
    // Twelve holds at once: at most one sweep per shard and bucket (two buckets when they straddle one).
    const sweepJobs = (await sweep.getJobs(["completed"], 0, -1)).filter((j) => j.id?.startsWith(`sweep-${busy}-`));
    expect(sweepJobs.length).toBeGreaterThan(0);
    expect(sweepJobs.length).toBeLessThanOrEqual(shards.size * 2);
    expect(sweepQueries(sent.slice(from), idle)).toEqual([]);
  }, 180_000);
});

describe("the outbox's common path", () => {
  let rig: Rig;
  let consumer: Worker;
  const seen = new Map<string, number>();
  beforeAll(async () => {
    rig = await startRig();
    consumer = startConsumer(rig, seen);
  }, 120_000);
  afterAll(async () => {
    await consumer?.close();
    await rig?.close();
  });

  it("writes one update per purchase (the acknowledgment); a confirmation whose job was never added is published by the backstop", async () => {
    const { gw, sent } = rig;
    const eventId = uniqueId("ob");
    expect((await putEvent(gw, eventId)).status).toBe(201);
    const fans = await admitFans(
      gw,
      eventId,
      Array.from({ length: 8 }, (_, i) => `b${i}`),
    );
    const purchaseIds = await Promise.all(
      fans.map(async (fan, i) => {
        const res = await hold(gw, eventId, fan, [`B-1-${i + 1}`]);
        expect(res.status).toBe(201);
        return buy(gw, eventId, fan, ((await res.json()) as { holdId: string }).holdId);
      }),
    );
    const states = () =>
      Promise.all(
        purchaseIds.map(async (purchaseId) => (await gw.deps.inventory.outbox.get({ eventId, purchaseId }))?.state),
      );
    await pollUntil("every booking acknowledged", states, (all) => all.every((st) => st === "acknowledged"), {
      timeoutMs: 60_000,
      intervalMs: 100,
    });
    expect(purchaseIds.map((id) => seen.get(id))).toEqual(purchaseIds.map(() => 1));
    // The confirmation's Put is in its transaction; the record's only UpdateItem is the acknowledgment.
    expect(purchaseIds.map((id) => outboxUpdates(sent, eventId, id))).toEqual(purchaseIds.map(() => 1));

    // A saga that died between its commit and the job: the record stays unsent until the backstop.
    const crashed = await confirmWithoutJob(gw, eventId, "crashed-fan", "A-5-10");
    const record = await pollUntil(
      "the crashed confirmation published and acknowledged",
      () => gw.deps.inventory.outbox.get({ eventId, purchaseId: crashed }),
      (r) => r?.state === "acknowledged",
      { timeoutMs: 150_000, intervalMs: 250 },
    );
    expect(record?.publishedAt).toBeDefined();
    expect(seen.get(crashed)).toBe(1);
    // Marked published by the publisher, then acknowledged: the crash case costs the second write.
    expect(outboxUpdates(sent, eventId, crashed)).toBe(2);
  }, 240_000);
});

describe("an event's jobs end with it", () => {
  let rig: Rig;
  let consumer: Worker;
  const seen = new Map<string, number>();
  beforeAll(async () => {
    rig = await startRig({
      config: { eventCloseGraceMs: 500 },
      workers: {
        outbox: { checkAfterMs: 300, maxCheckAfterMs: 1_000, unsentMarginMs: 500 },
        ending: { recheckMs: 300, quietMs: 1_500 },
      },
    });
    consumer = startConsumer(rig, seen);
  }, 120_000);
  afterAll(async () => {
    await consumer?.close();
    await rig?.close();
  });

  it("closed: holds refused, its remaining work finished, then no job of it left; a live one keeps its own; a restart and a reconnect do not arm it", async () => {
    const { gw } = rig;
    const ending = uniqueId("en");
    const live = uniqueId("lv");
    expect((await putEvent(gw, ending, eventInput({ holdSeconds: 2 }))).status).toBe(201);
    expect((await putEvent(gw, live, eventInput({ holdSeconds: 2 }))).status).toBe(201);
    expect((await jobsOf(gw, ending)).schedulers).toHaveLength(LIVE_SCHEDULERS);

    // Work left at the close: a hold to sweep, a bought seat's booking, a purchase left pending
    // (no charge, no reconcile job), and a confirmation whose booking job was never added.
    const [fan, other, late] = await admitFans(gw, ending, ["e1", "e2", "e3"]);
    const bought = await hold(gw, ending, fan!, ["A-1-1"]);
    expect(bought.status).toBe(201);
    const boughtId = await buy(gw, ending, fan!, ((await bought.json()) as { holdId: string }).holdId);
    expect((await hold(gw, ending, other!, ["A-1-2"])).status).toBe(201);
    const pendingHold = await gw.deps.inventory.holds.holdSeats({ eventId: ending, fanId: "p1", seatIds: ["A-2-1"] });
    if (!pendingHold.ok) throw new Error(pendingHold.reason);
    const pendingId = purchaseIdOf(ending, "p1", "never-charged");
    expect(
      (
        await gw.deps.inventory.purchases.createPending({
          eventId: ending,
          holdId: pendingHold.hold.holdId,
          fanId: "p1",
          purchaseId: pendingId,
        })
      ).ok,
    ).toBe(true);
    // Its reconcile job, as a saga queues one before the charge, due long after the end's work.
    await reconcileScheduler(gw.deps.queues!).schedule(ending, pendingId, 10 * 60_000);
    const crashedId = await confirmWithoutJob(gw, ending, "p2", "A-3-1");

    // Several closes at once (two operators): one closing time.
    const closes = await Promise.all(
      [1, 2, 3].map(() => gw.request(`/v1/admin/events/${ending}/close`, { method: "POST", token: ADMIN_TOKEN })),
    );
    expect(closes.map((r) => r.status)).toEqual([200, 200, 200]);
    const bodies = (await Promise.all(closes.map((r) => r.json()))) as { closedAt: string; jobsEndAt: string }[];
    expect(new Set(bodies.map((b) => b.closedAt)).size).toBe(1);
    expect(
      (await gw.request(`/v1/admin/events/${uniqueId("no")}/close`, { method: "POST", token: ADMIN_TOKEN })).status,
    ).toBe(404);
    expect((await gw.request(`/v1/admin/events/${ending}/close`, { method: "POST" })).status).toBe(401);
    const refused = await hold(gw, ending, late!, ["B-1-1"]);
    // The hold route's answer to `not_on_sale`, as before the on-sale.
    expect(refused.status).toBe(403);
    expect(((await refused.json()) as { error: { message: string } }).error.message).toBe("the event is not on sale");
    // Its backstops go at once; its end run waits for the last hold.
    expect((await jobsOf(gw, ending)).schedulers).toEqual([]);

    const ended = await pollUntil(
      "the closed event's jobs ended",
      () => gw.deps.inventory.events.get({ eventId: ending }),
      (e) => e?.jobsEndedAt !== undefined,
      { timeoutMs: 150_000, intervalMs: 250 },
    );
    // Its work was done first: the pending purchase resolved, every booking acknowledged, the holds swept.
    const pending = await gw.deps.inventory.purchases.get({ eventId: ending, purchaseId: pendingId });
    expect(pending?.status).toBe("failed");
    for (const purchaseId of [boughtId, crashedId]) {
      expect((await gw.deps.inventory.outbox.get({ eventId: ending, purchaseId }))?.state).toBe("acknowledged");
      expect(seen.get(purchaseId)).toBe(1);
    }
    const counts = (await gw.deps.inventory.seats.eventCounts({ eventId: ending }))?.seats;
    expect({ held: counts?.held, expiredHolds: counts?.expiredHolds }).toEqual({ held: 0, expiredHolds: 0 });
    expect(Date.parse(ended!.jobsEndedAt!)).toBeGreaterThanOrEqual(Date.parse(bodies[0]!.jobsEndAt));

    expect(await jobsOf(gw, ending)).toEqual({ schedulers: [], jobs: [] });
    expect((await jobsOf(gw, live)).schedulers).toHaveLength(LIVE_SCHEDULERS);

    // A reconnect arms what this process remembers, as it is now: the ended event is forgotten.
    // (The queues' connection: BullMQ's producers have their own, and the schedules are its keys.)
    gw.deps.queues!.connection.disconnect(true);
    await pollUntil(
      "the ended event forgotten",
      async () => gw.deps.eventJobs!.remembered(),
      (ids) => !ids.includes(ending),
      {
        timeoutMs: 30_000,
      },
    );
    expect(gw.deps.eventJobs!.remembered()).toContain(live);

    // A restart arms the stored events that have not ended.
    const restarted = buildServices({
      ...testServicesConfig({ tableName: rig.tableName, redisUrl: rig.redis.url }),
      queues: true,
    });
    try {
      await restarted.eventJobs!.armStored();
      expect(restarted.eventJobs!.remembered()).toContain(live);
      expect(restarted.eventJobs!.remembered()).not.toContain(ending);
    } finally {
      await restarted.close();
    }
    expect(await jobsOf(gw, ending)).toEqual({ schedulers: [], jobs: [] });
    expect((await jobsOf(gw, live)).schedulers).toHaveLength(LIVE_SCHEDULERS);
  }, 300_000);
});
