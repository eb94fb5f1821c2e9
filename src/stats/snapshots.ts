/**
 * The operator's authoritative counts (seats and areas by status, purchases by status), computed at
 * most once per interval per event across every gateway, and kept in Redis for all of them.
 *
 * Why: counting an event's seats reads every seat item from DynamoDB (src/inventory/reads.ts
 * sectionCounts: a 100,000-seat event is 100,000 items), and purchases by status are 64 COUNT
 * Queries. Answered per request, every console open on the event paid that once a second. Now a
 * read finds the latest snapshot in Redis; when it is older than the interval, one process (the
 * one that takes the event's lease, SET NX PX for one interval) computes the next one while the
 * others answer the previous one, so the store sees one count per interval per event however many
 * consoles, dashboards and gateways ask. The stats sampler (src/stats/sampler.ts) reads through
 * here too, so while it runs a snapshot is seldom older than one interval.
 *
 * The figures are the authoritative store's as of the snapshot's `at` (the computing process's
 * clock), at most about one interval old; `source` says where this answer came from. With Redis
 * down nobody can share a snapshot: each process keeps its own for one interval (`process`).
 */
import type { EventCounts, PurchaseStatus } from "../inventory/index.js";
import { InventoryUnavailableError } from "../inventory/index.js";
import { redisReady } from "../redis/availability.js";
import type { RedisClient } from "../redis/scripts.js";
import { statsKeys } from "./keys.js";

/** Counts are recomputed when older than this (and nobody recomputed them within it). */
export const COUNTS_INTERVAL_MS = 5_000;
/** A snapshot stays in Redis this long after it was stored, for readers while the next is computed. */
const SNAPSHOT_TTL_MS = 600_000;
/** How long a read with no snapshot at all waits for the process computing the first one. */
const DEFAULT_WAIT_MS = 15_000;
const WAIT_STEP_MS = 50;

export type PurchaseCounts = Record<PurchaseStatus, number>;

export interface CountsSource {
  /** Seats and areas by status; null for an unknown event. */
  seats(eventId: string): Promise<EventCounts | null>;
  /** `seats`: the counts just read, whose sold seats name the confirmed purchases of seats. */
  purchases(eventId: string, seats: EventCounts): Promise<PurchaseCounts>;
}

export interface CountsSnapshot {
  /** When the counts were read from the store, epoch ms. */
  at: number;
  /**
   * `snapshot`: the one in Redis (computed by this or another gateway); `computed`: computed for
   * this read; `process`: Redis is down, this process's own.
   */
  source: "snapshot" | "computed" | "process";
  seats: Omit<EventCounts, "eventId">;
  purchases: PurchaseCounts;
}

type Stored = Omit<CountsSnapshot, "source">;

export interface CountsSnapshots {
  readonly intervalMs: number;
  /** The event's counts, at most about one interval old; null for an unknown event. */
  latest(eventId: string): Promise<CountsSnapshot | null>;
}

export function createCountsSnapshots(options: {
  redis: RedisClient;
  source: CountsSource;
  /** This process, in the lease. */
  id: string;
  intervalMs?: number;
  waitMs?: number;
  clock?: () => number;
}): CountsSnapshots {
  const { redis, source, id } = options;
  const intervalMs = options.intervalMs ?? COUNTS_INTERVAL_MS;
  const waitMs = options.waitMs ?? DEFAULT_WAIT_MS;
  const clock = options.clock ?? Date.now;
  // Concurrent reads in this process share one trip (one GET, at most one count).
  const inFlight = new Map<string, Promise<CountsSnapshot | null>>();
  // Redis down: this process's own snapshots, one interval each.
  const own = new Map<string, Stored>();

  const compute = async (eventId: string): Promise<Stored | null> => {
    const at = clock();
    // In turn: the purchase counts take the confirmed purchases of seats from the seats' read.
    const counts = await source.seats(eventId);
    if (!counts) return null;
    const purchases = await source.purchases(eventId, counts);
    const { eventId: _, soldSeatPurchases: __, ...seats } = counts;
    return { at, seats, purchases };
  };

  const parse = (raw: string | null): Stored | null => {
    if (!raw) return null;
    try {
      const value = JSON.parse(raw) as Stored;
      return typeof value.at === "number" && value.seats && value.purchases ? value : null;
    } catch {
      return null;
    }
  };

  const fresh = (s: Stored): boolean => clock() - s.at < intervalMs;

  async function shared(eventId: string): Promise<CountsSnapshot | null> {
    const keys = statsKeys(eventId);
    const deadline = clock() + waitMs;
    for (;;) {
      const stored = parse(await redis.get(keys.counts));
      if (stored && fresh(stored)) return { ...stored, source: "snapshot" };
      if ((await redis.set(keys.countsLease, id, "PX", intervalMs, "NX")) === "OK") {
        let next: Stored | null;
        try {
          next = await compute(eventId);
        } catch (err) {
          // The store cannot count now: the previous figures, if any, say more than a 503. The
          // lease stays, so a store in trouble is asked again once per interval, not per read.
          if (stored && err instanceof InventoryUnavailableError) return { ...stored, source: "snapshot" };
          throw err;
        }
        if (!next) {
          // An unknown event (or one gone): nothing to keep; the next read may ask again.
          await redis.del(keys.countsLease);
          return null;
        }
        await redis.set(keys.counts, JSON.stringify(next), "PX", SNAPSHOT_TTL_MS);
        return { ...next, source: "computed" };
      }
      // Another process counts now: its predecessor, if any, is the answer meanwhile.
      if (stored) return { ...stored, source: "snapshot" };
      if (clock() > deadline) throw new InventoryUnavailableError(`the counts of ${eventId} are still being computed`);
      await new Promise((resolve) => setTimeout(resolve, WAIT_STEP_MS));
    }
  }

  async function alone(eventId: string): Promise<CountsSnapshot | null> {
    const kept = own.get(eventId) ?? null;
    if (kept && fresh(kept)) return { ...kept, source: "process" };
    const next = await compute(eventId);
    if (!next) return null;
    if (own.size >= 1_000) own.clear();
    own.set(eventId, next);
    return { ...next, source: "process" };
  }

  const read = async (eventId: string): Promise<CountsSnapshot | null> => {
    if (!redisReady(redis)) return alone(eventId);
    try {
      return await shared(eventId);
    } catch (err) {
      if (err instanceof InventoryUnavailableError) throw err;
      // A Redis call failed (the store's errors are InventoryUnavailableError): count alone.
      return alone(eventId);
    }
  };

  return {
    intervalMs,
    latest(eventId) {
      let pending = inFlight.get(eventId);
      if (!pending) {
        pending = read(eventId).finally(() => inFlight.delete(eventId));
        inFlight.set(eventId, pending);
      }
      return pending;
    },
  };
}
