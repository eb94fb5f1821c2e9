import { randomUUID } from "node:crypto";
import { Redis } from "ioredis";
import pino from "pino";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { createMetrics } from "../../src/metrics.js";
import { createSeatMapCache, type SeatRow, seatMapKeys } from "../../src/seatmap/cache.js";

// The source stands in for the inventory's section read: this file tests the Redis side (cache,
// versions, pub/sub, shield). The gateway tests run the same cache against the real DynamoDB.
function section(prefix: string, rows: number, perRow: number): SeatRow[] {
  const seats: SeatRow[] = [];
  for (let r = 1; r <= rows; r++)
    for (let n = 1; n <= perRow; n++) seats.push({ id: `${prefix}-${r}-${n}`, status: "available" });
  return seats;
}

describe("seat-map cache and hot-seat shield (real Redis)", () => {
  let redis: Redis;
  let sub: Redis;
  const metrics = createMetrics();
  const logger = pino({ level: "silent" });
  const sections = new Map<string, SeatRow[]>();
  let loads = 0;
  const source = {
    loadSection: async (_eventId: string, sectionId: string) => {
      loads++;
      return sections.get(sectionId) ?? null;
    },
  };

  beforeAll(() => {
    redis = new Redis(inject("redisUrl"));
    sub = new Redis(inject("redisUrl"));
    sections.set("A", section("A", 10, 20));
    sections.set("B", section("B", 2, 5));
  });
  afterAll(() => {
    redis.disconnect();
    sub.disconnect();
  });

  it("loads a section once on a miss, then serves it from Redis with a stable version", async () => {
    const eventId = `e${randomUUID().slice(0, 8)}`;
    const cache = createSeatMapCache({ redis, source, metrics, logger });
    loads = 0;
    const [a, b] = await Promise.all([cache.getSection(eventId, "A"), cache.getSection(eventId, "A")]);
    expect(a?.seats).toHaveLength(200);
    expect(a?.seats[0]).toEqual({ id: "A-1-1", status: "available" });
    expect(b?.version).toBe(a?.version);
    const again = await cache.getSection(eventId, "A");
    expect(again?.version).toBe(a?.version);
    expect(loads).toBeLessThanOrEqual(2);
    expect(await cache.getSection(eventId, "Z")).toBeNull();
    expect(await cache.availability(eventId)).toEqual({ A: 200 });
  });

  it("applies changes write-through, bumps the version, publishes them, and never un-sells a seat", async () => {
    const eventId = `e${randomUUID().slice(0, 8)}`;
    const cache = createSeatMapCache({ redis, source, metrics, logger });
    const before = await cache.getSection(eventId, "B");
    const received: unknown[] = [];
    await sub.subscribe(seatMapKeys.channel(eventId));
    const got = new Promise<void>((resolve) => {
      sub.on("message", (_channel, message) => {
        received.push(...(JSON.parse(message) as unknown[]));
        if (received.length >= 3) resolve();
      });
    });

    await cache.apply(eventId, [
      { id: "B-1-1", status: "held", holdExpiresAt: Date.now() + 60_000 },
      { id: "B-1-2", status: "sold" },
    ]);
    await cache.apply(eventId, [
      { id: "B-1-2", status: "available" },
      { id: "B-1-3", status: "held", holdExpiresAt: 1 },
    ]);
    await got;
    await sub.unsubscribe();

    const after = await cache.getSection(eventId, "B");
    expect(after?.version).not.toBe(before?.version);
    const status = Object.fromEntries(after!.seats.map((s) => [s.id, s.status]));
    expect(status["B-1-1"]).toBe("held");
    expect(status["B-1-2"]).toBe("sold");
    expect(status["B-1-3"]).toBe("held");
    expect(await cache.availability(eventId)).toEqual({ B: 7 });
    expect(received).toEqual(
      expect.arrayContaining([
        { id: "B-1-1", status: "held" },
        { id: "B-1-2", status: "sold" },
        { id: "B-1-3", status: "held" },
      ]),
    );
    expect(received).not.toContainEqual({ id: "B-1-2", status: "available" });
  });

  it("lets exactly one of 500 concurrent hold attempts through to the store for one seat", async () => {
    const eventId = `e${randomUUID().slice(0, 8)}`;
    const cache = createSeatMapCache({ redis, source, metrics, logger });
    await cache.getSection(eventId, "A");
    const clients = Array.from({ length: 8 }, () => new Redis(inject("redisUrl")));
    try {
      const caches = clients.map((c) => createSeatMapCache({ redis: c, source, metrics, logger }));
      const results = await Promise.all(
        Array.from({ length: 500 }, (_, i) => caches[i % caches.length]!.shield(eventId, ["A-1-1", "A-1-2"], 5_000)),
      );
      expect(results.filter((r) => r.kind === "leased")).toHaveLength(1);
      const lost = results.filter((r) => r.kind === "lost");
      expect(lost).toHaveLength(499);
      expect(lost.every((r) => r.kind === "lost" && r.seats.length > 0)).toBe(true);
    } finally {
      for (const c of clients) c.disconnect();
    }
  });

  it("refuses sold and unexpired held seats, passes expired holds, and frees leases on release", async () => {
    const eventId = `e${randomUUID().slice(0, 8)}`;
    const cache = createSeatMapCache({ redis, source, metrics, logger });
    await cache.getSection(eventId, "A");
    await cache.apply(eventId, [
      { id: "A-2-1", status: "sold" },
      { id: "A-2-2", status: "held", holdExpiresAt: Date.now() + 60_000 },
      { id: "A-2-3", status: "held", holdExpiresAt: Date.now() - 1_000 },
    ]);
    const refused = await cache.shield(eventId, ["A-2-1", "A-2-2", "A-2-4"], 5_000);
    expect(refused).toEqual({ kind: "lost", seats: ["A-2-1", "A-2-2"] });

    const first = await cache.shield(eventId, ["A-2-3", "A-2-4"], 5_000);
    expect(first.kind).toBe("leased");
    expect((await cache.shield(eventId, ["A-2-4"], 5_000)).kind).toBe("lost");
    if (first.kind !== "leased") throw new Error("expected a lease");
    await first.release();
    expect((await cache.shield(eventId, ["A-2-4"], 5_000)).kind).toBe("leased");
  });

  it("warms a cold section before shielding it, and bypasses only a section the source does not know", async () => {
    const eventId = `e${randomUUID().slice(0, 8)}`;
    const cache = createSeatMapCache({ redis, source, metrics, logger });
    loads = 0;
    const cold = await Promise.all(Array.from({ length: 50 }, () => cache.shield(eventId, ["A-3-3"], 5_000)));
    expect(cold.filter((r) => r.kind === "leased")).toHaveLength(1);
    expect(loads).toBe(1);
    // Unknown to the cache and to the source: DynamoDB decides (and will say not found).
    expect((await cache.shield(eventId, ["Z-1-1"], 5_000)).kind).toBe("bypass");
  });
});

describe("seat-map fills do not lose changes applied while they read the store (real Redis)", () => {
  let redis: Redis;
  const metrics = createMetrics();
  const logger = pino({ level: "silent" });
  beforeAll(() => {
    redis = new Redis(inject("redisUrl"));
  });
  afterAll(() => {
    redis.disconnect();
  });

  /** The store: a section's rows; a read copies them at once, then answers when `gate` says. */
  function gatedStore(rows: SeatRow[]) {
    const truth = new Map(rows.map((r) => [r.id, { ...r }]));
    let gate: () => Promise<void> = async () => {};
    const reads: string[] = [];
    return {
      truth,
      reads,
      setGate(g: () => Promise<void>) {
        gate = g;
      },
      set(id: string, status: SeatRow["status"], holdExpiresAt?: number) {
        truth.set(id, { id, status, ...(holdExpiresAt ? { holdExpiresAt } : {}) });
      },
      source: {
        loadSection: async (_eventId: string, sectionId: string, options?: { consistent?: boolean }) => {
          reads.push(`${sectionId}:${options?.consistent === true ? "consistent" : "eventual"}`);
          const snapshot = [...truth.values()].map((r) => ({ ...r }));
          await gate();
          return snapshot;
        },
      },
    };
  }

  const statusOf = async (cache: ReturnType<typeof createSeatMapCache>, eventId: string) =>
    Object.fromEntries((await cache.getSection(eventId, "G"))!.seats.map((seat) => [seat.id, seat.status]));

  it("replays a sale, a release and a hold made during a miss fill and during a rebuild", async () => {
    const eventId = `e${randomUUID().slice(0, 8)}`;
    const later = Date.now() + 60_000;
    const store = gatedStore(section("G", 1, 6));
    store.set("G-1-1", "held", later);
    store.set("G-1-2", "held", later);
    store.set("G-1-5", "sold");
    const cache = createSeatMapCache({ redis, source: store.source, metrics, logger });

    // A miss: the store is read, then three seats change and are applied before the fill writes.
    let release!: () => void;
    let reading!: () => void;
    const readStarted = new Promise<void>((r) => {
      reading = r;
    });
    store.setGate(() => {
      reading();
      return new Promise<void>((r) => {
        release = r;
      });
    });
    const first = cache.getSection(eventId, "G");
    await readStarted;
    store.set("G-1-1", "sold");
    store.set("G-1-2", "available");
    store.set("G-1-3", "held", later);
    await cache.apply(eventId, [
      { id: "G-1-1", status: "sold" },
      { id: "G-1-2", status: "available" },
      { id: "G-1-3", status: "held", holdExpiresAt: later },
    ]);
    // A late 'held' for a seat the store already had sold changes nothing.
    await cache.apply(eventId, [{ id: "G-1-5", status: "held", holdExpiresAt: later }]);
    release();
    const filled = await first;
    expect(Object.fromEntries(filled!.seats.map((seat) => [seat.id, seat.status]))).toEqual({
      "G-1-1": "sold",
      "G-1-2": "available",
      "G-1-3": "held",
      "G-1-4": "available",
      "G-1-5": "sold",
      "G-1-6": "available",
    });
    expect(await cache.availability(eventId)).toEqual({ G: 3 });
    expect(store.reads).toEqual(["G:consistent"]);

    // A rebuild, the same way: the seat sold during it stays sold.
    const rebuildRead = new Promise<void>((r) => {
      reading = r;
    });
    const rebuilt = cache.rebuild(eventId, "G");
    await rebuildRead;
    store.set("G-1-4", "sold");
    store.set("G-1-3", "available");
    await cache.apply(eventId, [
      { id: "G-1-4", status: "sold" },
      { id: "G-1-3", status: "available" },
    ]);
    release();
    expect(await rebuilt).toBe(true);
    expect(await statusOf(cache, eventId)).toEqual(
      Object.fromEntries([...store.truth.values()].map((seat) => [seat.id, seat.status])),
    );
    expect(await cache.availability(eventId)).toEqual({ G: 3 });
  });

  it("agrees with the store after 60 seats change three times each while 4 clients rebuild without pause", async () => {
    const eventId = `e${randomUUID().slice(0, 8)}`;
    const store = gatedStore(section("G", 6, 10));
    store.setGate(() => new Promise<void>((r) => setTimeout(r, 5 + Math.random() * 20)));
    const clients = Array.from({ length: 4 }, () => new Redis(inject("redisUrl")));
    try {
      const caches = clients.map((c) => createSeatMapCache({ redis: c, source: store.source, metrics, logger }));
      await caches[0]!.getSection(eventId, "G");
      let writing = true;
      // Rebuilds run back to back from every client until the last change is applied, so changes
      // land while a rebuild has read the store and not yet written it.
      const rebuilders = caches.map(async (cache) => {
        let rebuilt = 0;
        while (writing) if (await cache.rebuild(eventId, "G")) rebuilt++;
        return rebuilt;
      });
      // Each writer owns one seat (so its changes reach Redis in the order the store made them):
      // held, then released or held again, then sold or released; each applied after the store.
      const writers = [...store.truth.keys()].map(async (id, i) => {
        const cache = caches[i % caches.length]!;
        const steps: SeatRow["status"][] = ["held", i % 2 ? "available" : "held", i % 3 ? "sold" : "available"];
        for (const status of steps) {
          await new Promise((r) => setTimeout(r, Math.random() * 60));
          const holdExpiresAt = status === "held" ? Date.now() + 60_000 : undefined;
          store.set(id, status, holdExpiresAt);
          await cache.apply(eventId, [{ id, status, ...(holdExpiresAt ? { holdExpiresAt } : {}) }]);
        }
      });
      await Promise.all(writers);
      writing = false;
      const rebuilt = await Promise.all(rebuilders);
      expect(Math.min(...rebuilt), "rebuilds per client").toBeGreaterThan(0);
      const cached = await statusOf(caches[1]!, eventId);
      const truth = Object.fromEntries([...store.truth.values()].map((seat) => [seat.id, seat.status]));
      expect(cached).toEqual(truth);
      expect(await caches[2]!.availability(eventId)).toEqual({
        G: Object.values(truth).filter((status) => status === "available").length,
      });
    } finally {
      for (const c of clients) c.disconnect();
    }
  });

  it("does not cache a fill whose journal was lost; the reader gets the store's answer", async () => {
    const eventId = `e${randomUUID().slice(0, 8)}`;
    const store = gatedStore(section("G", 1, 4));
    const cache = createSeatMapCache({ redis, source: store.source, metrics, logger });
    // Redis loses the journal between the fill's start and its write (a restart, say).
    store.setGate(async () => {
      await redis.del(seatMapKeys.section(eventId, "G").journal);
    });
    const got = await cache.getSection(eventId, "G");
    expect(got?.version).toMatch(/^db\./);
    expect(got?.seats).toHaveLength(4);
    expect(await cache.version(eventId, "G")).toBeNull();
    expect(await cache.rebuild(eventId, "G")).toBe(false);
    // With the journal intact the next fill caches it.
    store.setGate(async () => {});
    expect(await cache.rebuild(eventId, "G")).toBe(true);
    expect(await cache.version(eventId, "G")).not.toBeNull();
  });
});
