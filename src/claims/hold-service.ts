/**
 * The claim path for holds: the hot-seat shield in Redis filters holds that cannot win, DynamoDB
 * decides, and the seat-map cache is told the outcome (./seat-map-writes.ts). Redis never decides:
 * when it cannot answer, the shield is skipped and DynamoDB alone arbitrates. What a hold may ask
 * for (the event, the seat limit, a seat named twice) is the inventory's to decide, once.
 */
import {
  type BestPlan,
  type BestRequest,
  type Block,
  type CheckedSeatHold,
  checkedBlock,
  choose,
  type HoldResult,
  type Inventory,
  proposals,
  type ReleaseResult,
  SectionView,
  shardOf,
} from "../inventory/index.js";
import { setTimeout as sleep } from "node:timers/promises";
import type { Logger } from "../logger.js";
import type { Metrics } from "../metrics.js";
import type { SeatMapCache, ShieldResult } from "../seatmap/cache.js";
import type { SectionPages } from "../seatmap/pages.js";
import type { SeatMapWrites } from "./seat-map-writes.js";

export type HoldOutcome =
  | HoldResult
  /**
   * Refused by the shield: no DynamoDB request was made.
   */
  | { ok: false; reason: "seat_unavailable"; seats: string[]; stage: "shield" }
  | MapRefusal;

/** A hold refused from this process's own seat map (refuseFromMap): no Redis or DynamoDB request. */
export type MapRefusal = { ok: false; reason: "seat_unavailable"; seats: string[]; stage: "seat_map" };

export interface SeatHoldRequest {
  eventId: string;
  fanId: string;
  seatIds: string[];
  /** Default: the event's holdSeconds. */
  holdSeconds?: number;
  /**
   * The caller's own precondition, in flight (the route's session check): awaited beside the
   * shield, so both go to Redis in one round trip, and before anything else is answered. A
   * rejection is the caller's answer: it is rethrown, after the shield's lease is given back.
   */
  gate?: Promise<unknown>;
}

export interface GeneralAdmissionHoldRequest {
  eventId: string;
  fanId: string;
  areaId: string;
  quantity: number;
  /** Default: the event's holdSeconds. */
  holdSeconds?: number;
}

export interface BestHoldRequest {
  eventId: string;
  fanId: string;
  best: BestRequest;
  /** Default: the event's holdSeconds. */
  holdSeconds?: number;
  /** As SeatHoldRequest's: awaited beside the first read of the seat map. */
  gate?: Promise<unknown>;
}

/**
 * How many proposals one best-available request may lose before it answers no_block_available:
 * to the shield (a Redis round trip each, no DynamoDB request), and in DynamoDB (a transaction
 * each; the first one included).
 */
export const BEST_SHIELD_LOSSES = 60;
export const BEST_TRANSACTIONS = 8;
/**
 * After this many shield losses in a row the request reads the cached map again: in a rush the
 * map it read first falls behind (holds reach it a moment after DynamoDB granted them), and a
 * crowd keeps proposing the same front seats from it. `npm run bench:best` (2,000 fans, 64 in
 * flight, 5,000 seats): with 12 losses and no re-read, 81 fans were refused with 1,000 seats free;
 * with 24 losses and 4 transactions, the race test's crowd under the full suite refused 3 of 800.
 * Since a seat hold writes the fan's ledger before its seats (src/inventory/holds.ts), a
 * proposal's lease is held one DynamoDB request longer and a lost one costs the entry's taking
 * back: at 40 and 6, CI's loaded run refused 1 of 800 with pairs free; 60 and 8 now.
 */
const BEST_REREAD_AFTER = 4;
/** Blocks ranked per proposal: enough for a retry's pool (inventory/best.ts choose). */
const RANKED_BLOCKS = 1_024;

export interface HoldService {
  holdSeats(request: SeatHoldRequest): Promise<HoldOutcome>;
  /**
   * A hold answered without Redis or DynamoDB when it cannot win (src/http/fast-path.ts): the
   * request's own checks as holdSeats makes them first (checkSeats: the event's cached definition),
   * then `taken`, this process's seat map (src/seatmap/pages.ts): the seats it shows held or sold,
   * undefined for a seat it cannot answer for. Answers the refusal when the request passes its
   * checks and a seat is known taken, else null: the hold goes the whole way (holdSeats), which
   * answers every other case, a refused check included. Answered without a promise when the event
   * is in the cache and `taken` answers every seat at once (the refusal of a hot seat, mostly): a
   * promise hop per step was a visible share of that refusal's CPU.
   */
  refuseFromMap(
    request: SeatHoldRequest,
    taken: (seatId: string) => boolean | undefined | Promise<boolean | undefined>,
  ): MapRefusal | null | Promise<MapRefusal | null>;
  /**
   * Best available together (src/inventory/best.ts): the cached map proposes, the shield leases,
   * and the plain hold's conditional writes decide; a proposal lost on the way is marked taken and
   * the next one tried.
   */
  holdBest(request: BestHoldRequest): Promise<HoldResult>;
  holdGeneralAdmission(request: GeneralAdmissionHoldRequest): Promise<HoldResult>;
  release(request: { eventId: string; holdId: string; fanId: string }): Promise<ReleaseResult>;
}

/** Where a hold's expiry asks for its sweep (src/workers/queues.ts sweepScheduler). */
export interface SweepScheduler {
  /** The shards `shards` of the event hold something until `expiresAt` (epoch ms). */
  expiring(eventId: string, shards: readonly number[], expiresAt: number): Promise<void>;
}

export interface HoldServiceOptions {
  /** Absent (some tests): no sweep is asked for; the backstop sweeps. */
  sweeps?: SweepScheduler;
  inventory: Inventory;
  /** For the shield, and the statuses a best-available proposal starts from. */
  seatMap: Pick<SeatMapCache, "shield" | "statuses" | "sectionFromStore" | "availability">;
  seatMapWrites: SeatMapWrites;
  /**
   * This process's seat-map pages (src/seatmap/pages.ts): a best-available proposal starts from
   * them when every section it may use is trusted in memory, so its only Redis call before DynamoDB
   * is the shield's, beside the session check. Absent (some tests): the proposal reads Redis.
   */
  pages?: Pick<SectionPages, "peek">;
  metrics: Metrics;
  logger: Logger;
  /** How long a shield lease lasts: longer than a DynamoDB write, short enough to heal fast. */
  leaseMs?: number;
  /**
   * Told every hold's latency, whatever its outcome (a failure that took long is the overload
   * signal): the admission loop's claim p99 (src/stats/loop.ts).
   */
  latency?: { record(eventId: string, ms: number): void };
}

/** How long a fan refused for its seat limit has its holds checked against its ledger first. */
const AT_LIMIT_MS = 30_000;
/** Fans flagged at once per process (a crowd of fans at their limit): past it, the flags start over. */
const AT_LIMIT_KEPT = 100_000;

export function createHoldService(options: HoldServiceOptions): HoldService {
  const { inventory, seatMap, seatMapWrites, metrics, logger } = options;
  const leaseMs = options.leaseMs ?? 3_000;

  /**
   * A granted hold asks for the sweep of its shards at its expiry. Fire and forget: a hold is
   * never refused or slowed for it, and an expired hold is free to the next fan anyway (the hold
   * condition); a sweep that is lost only leaves the stored status to the backstop.
   */
  const sweepAtExpiry = (result: HoldResult, shards: () => number[]) => {
    if (!result.ok || !options.sweeps) return;
    options.sweeps
      .expiring(result.hold.eventId, shards(), Date.parse(result.hold.expiresAt))
      .catch((err: unknown) =>
        logger.debug({ err: (err as Error).message }, "hold's sweep not queued; the backstop sweeps it"),
      );
  };

  /**
   * The seats `taken` shows held or sold, as the refusal (counted), or null when it shows none or
   * cannot say for one. Awaits only a seat whose page must be read first.
   */
  const refusedSeats = (
    seatIds: readonly string[],
    taken: (seatId: string) => boolean | undefined | Promise<boolean | undefined>,
  ): MapRefusal | null | Promise<MapRefusal | null> => {
    const lost: string[] = [];
    for (let i = 0; i < seatIds.length; i++) {
      const known = taken(seatIds[i] as string);
      if (known instanceof Promise) return refusedAfterReads(seatIds, i, known, lost, taken);
      if (known === undefined) return null;
      if (known) lost.push(seatIds[i] as string);
    }
    return refusal(lost);
  };
  const refusedAfterReads = async (
    seatIds: readonly string[],
    from: number,
    first: Promise<boolean | undefined>,
    lost: string[],
    taken: (seatId: string) => boolean | undefined | Promise<boolean | undefined>,
  ): Promise<MapRefusal | null> => {
    for (let i = from; i < seatIds.length; i++) {
      const known = i === from ? await first : await taken(seatIds[i] as string);
      if (known === undefined) return null;
      if (known) lost.push(seatIds[i] as string);
    }
    return refusal(lost);
  };
  const refusal = (lost: string[]): MapRefusal | null => {
    if (lost.length === 0) return null;
    metrics.holds.inc({ outcome: "seat_unavailable" });
    metrics.conflicts.inc({ stage: "seat_map" });
    return { ok: false, reason: "seat_unavailable", seats: lost, stage: "seat_map" };
  };

  /** Counts one claim-path write, by what it was for in the fan's terms (hold, release). */
  const counted = async <R extends { ok: boolean; reason?: string }>(
    operation: "hold" | "release",
    write: () => Promise<R>,
  ): Promise<R> => {
    try {
      const result = await write();
      metrics.dynamoRequests.inc({ operation, outcome: result.ok ? "ok" : (result.reason ?? "refused") });
      if (operation === "hold") metrics.holds.inc({ outcome: result.ok ? "granted" : (result.reason ?? "refused") });
      return result;
    } catch (err) {
      metrics.dynamoRequests.inc({ operation, outcome: "error" });
      throw err;
    }
  };

  const shieldFor = async (eventId: string, seatIds: string[]) => {
    try {
      return await seatMap.shield(eventId, seatIds, leaseMs);
    } catch (err) {
      logger.warn({ err: (err as Error).message, eventId }, "shield unavailable; DynamoDB decides alone");
      return { kind: "bypass" as const, release: async () => {} };
    }
  };

  /**
   * What the cached map says of the plan's sections, as proposal views. Sections the availability
   * counts say cannot have the seats are not read. Redis away: DynamoDB's (cached a moment).
   */
  /**
   * The sections a best request may use, as the cached map shows them; sections whose count says
   * they have fewer free seats than asked are not read, but their free seats count in `skipped`
   * (a refusal says how many seats are left where the fan asked, together or not).
   */
  const viewsOf = async (plan: BestPlan): Promise<{ views: SectionView[]; skipped: number }> => {
    const { eventId, quantity } = plan;
    let counts: Record<string, number> = {};
    try {
      counts = await seatMap.availability(eventId);
    } catch {
      // Unknown counts: every section is read.
    }
    const wanted = plan.sections.filter((s) => (counts[s.id] ?? quantity) >= quantity);
    const skipped = plan.sections
      .filter((s) => (counts[s.id] ?? quantity) < quantity)
      .reduce((n, s) => n + (counts[s.id] ?? 0), 0);
    const read = async (sectionId: string) => {
      try {
        return await seatMap.statuses(eventId, sectionId);
      } catch (err) {
        logger.debug({ err: (err as Error).message, eventId }, "seat map unavailable; proposing from DynamoDB");
        const stored = await seatMap.sectionFromStore(eventId, sectionId);
        return stored
          ? {
              ids: stored.seats.map((s) => s.id),
              statuses: stored.seats.map((s) => (s.status === "available" ? "a" : "h")).join(""),
            }
          : null;
      }
    };
    const order = new Map(plan.sections.map((s, i) => [s.id, i]));
    const views = await Promise.all(
      wanted.map(async (section) => {
        const st = await read(section.id);
        return st ? SectionView.fromStatuses(section, order.get(section.id) ?? 0, st.ids, st.statuses) : null;
      }),
    );
    return { views: views.filter((v): v is SectionView => v !== null), skipped };
  };

  /**
   * The plan's sections as this process's seat-map pages show them, without I/O, or null when a
   * page is not trusted in memory (not read lately by the map's readers, a change heard of since,
   * Redis down): then the proposal reads Redis (viewsOf). It starts no page read itself: under a
   * crowd of holds every change drops a page, and reloading whole sections for proposals cost more
   * than the statuses viewsOf reads (the 800-fan race ran twice as long).
   */
  const viewsInMemory = (plan: BestPlan): SectionView[] | null => {
    if (!options.pages) return null;
    const now = Date.now();
    const views: SectionView[] = [];
    for (const [order, section] of plan.sections.entries()) {
      const page = options.pages.peek(plan.eventId, section.id);
      if (!page) return null;
      views.push(SectionView.fromStatuses(section, order, page.ids, page.statuses(now)));
    }
    return views;
  };

  /**
   * `pending` once `gate` (the caller's precondition, in flight) has passed. Both were issued in
   * the same tick, so ioredis' auto-pipelining sent them in one write. When the gate refuses,
   * `undo` gives back what `pending` took and the refusal is rethrown.
   */
  const behindGate = async <T>(
    gate: Promise<unknown> | undefined,
    pending: Promise<T>,
    undo: (taken: T) => Promise<void>,
  ): Promise<T> => {
    if (gate) {
      try {
        await gate;
      } catch (refused) {
        await pending.then(undo, () => undefined);
        throw refused;
      }
    }
    return pending;
  };

  /**
   * A granted hold told to the seat map, and its lease given back, in the same tick: one write to
   * Redis after DynamoDB (a pipeline runs in order, so the map's change lands before the lease
   * goes). Awaited (neither throws): the fan's next read, on this process, shows the seats held.
   */
  const heldAndReleased = (
    hold: { eventId: string; seats: string[]; expiresAt: string },
    release: () => Promise<void>,
  ) => Promise.all([seatMapWrites.held(hold.eventId, hold.seats, Date.parse(hold.expiresAt)), release()]);

  const timed = <A extends { eventId: string }, R>(hold: (request: A) => Promise<R>) => {
    const latency = options.latency;
    if (!latency) return hold;
    return async (request: A): Promise<R> => {
      const started = performance.now();
      try {
        return await hold(request);
      } finally {
        latency.record(request.eventId, performance.now() - started);
      }
    };
  };

  /**
   * Fans refused for their seat limit lately, per event (until when): their next holds read the
   * fan's ledger before leasing anything. Without it, a fan at the limit asking again and again for
   * a seat leases it for each request's DynamoDB write and every other fan is told it is taken
   * meanwhile; with it, only the first such request per process does. A fan not flagged pays
   * nothing; a flag outliving the limit (the fan released a hold) costs one read per hold.
   */
  const atLimit = new Map<string, number>();
  const limitKey = (eventId: string, fanId: string) => `${eventId}\n${fanId}`;
  const flagLimit = (eventId: string, fanId: string, result: HoldResult) => {
    const key = limitKey(eventId, fanId);
    if (result.ok) {
      atLimit.delete(key);
      return;
    }
    if (result.reason !== "seat_limit_exceeded") return;
    if (atLimit.size >= AT_LIMIT_KEPT) atLimit.clear();
    atLimit.set(key, Date.now() + AT_LIMIT_MS);
  };
  /**
   * For a flagged fan, the refusal its ledger gives now, answered after the gate (resolves null:
   * go on). A fan not flagged: null, synchronously, so the caller awaits nothing and its shield
   * still leaves in the gate's tick. Never rejects but with the gate's refusal.
   */
  const refusedAtLimit = (
    request: { eventId: string; fanId: string; maxSeatsPerFan: number; seats: number },
    gate: Promise<unknown> | undefined,
  ): Promise<HoldResult | null> | null => {
    const key = limitKey(request.eventId, request.fanId);
    const until = atLimit.get(key);
    if (until === undefined) return null;
    if (until <= Date.now()) {
      atLimit.delete(key);
      return null;
    }
    return inventory.holds
      .fanOverLimit(request)
      .catch(() => null)
      .then(async (over) => {
        if (!over) return null;
        await gate;
        metrics.holds.inc({ outcome: over.reason });
        flagLimit(request.eventId, request.fanId, over);
        return over;
      });
  };

  const service: HoldService = {
    async holdSeats({ eventId, fanId, seatIds, holdSeconds, gate }) {
      // What the request is wrong in itself for (a seat named twice, too many, unknown, not on
      // sale) is refused as such first, whatever state the seats are in; then the shield. The
      // gate's refusal comes before either.
      const check = await inventory.holds.checkSeats({ eventId, fanId, seatIds, holdSeconds });
      if (!check.ok) {
        await gate;
        metrics.holds.inc({ outcome: check.reason });
        return check;
      }
      const { maxSeatsPerFan, refs } = check.checked;
      const atLimitCheck = refusedAtLimit({ eventId, fanId, maxSeatsPerFan, seats: refs.length }, gate);
      const over = atLimitCheck && (await atLimitCheck);
      if (over) return over;
      // Issued in the same tick as the gate's call (when the event was in memory, checkSeats did
      // no I/O): ioredis' auto-pipelining sends the two in one write.
      const shield = await behindGate(gate, shieldFor(eventId, seatIds), (s) =>
        s.kind === "lost" ? Promise.resolve() : s.release(),
      );
      if (shield.kind === "lost") {
        metrics.holds.inc({ outcome: "seat_unavailable" });
        metrics.conflicts.inc({ stage: "shield" });
        return { ok: false, reason: "seat_unavailable", seats: shield.seats, stage: "shield" };
      }
      let release = shield.release;
      try {
        // One seat or many, a hold is one transaction: the seats, the hold record and the fan's ledger.
        const result = await counted("hold", () => inventory.holds.writeSeats(check.checked));
        flagLimit(eventId, fanId, result);
        if (result.ok) {
          sweepAtExpiry(result, () => result.hold.seats.map(shardOf));
          await heldAndReleased(result.hold, release);
          release = async () => {};
        } else if (result.reason === "seat_unavailable") {
          metrics.conflicts.inc({ stage: "dynamodb" });
          seatMapWrites.stale(eventId, result.seats);
        }
        return result;
      } finally {
        await release();
      }
    },

    refuseFromMap({ eventId, fanId, seatIds, holdSeconds }, taken) {
      // The checks first, as holdSeats: only seats of the event's sections reach the map.
      const request = { eventId, fanId, seatIds, holdSeconds };
      const now = inventory.holds.checkSeatsNow(request);
      if (now === undefined) {
        return inventory.holds.checkSeats(request).then((check) => (check.ok ? refusedSeats(seatIds, taken) : null));
      }
      return now.ok ? refusedSeats(seatIds, taken) : null;
    },

    async holdBest({ eventId, fanId, best, holdSeconds, gate }) {
      const check = await inventory.holds.checkBest({ eventId, fanId, best, holdSeconds });
      if (!check.ok) {
        await gate;
        metrics.holds.inc({ outcome: check.reason });
        return check;
      }
      const { plan } = check;
      const atLimitCheck = refusedAtLimit(
        { eventId, fanId, maxSeatsPerFan: plan.maxSeatsPerFan, seats: plan.quantity },
        gate,
      );
      const over = atLimitCheck && (await atLimitCheck);
      if (over) return over;
      let views: SectionView[];
      let skipped = 0;
      /** The first proposal's lease, sent beside the gate's call, when the map in memory proposed it. */
      let leased: { block: Block; shield: Promise<ShieldResult> } | undefined;
      const inMemory = viewsInMemory(plan);
      const firstBlock = inMemory && choose(proposals(inMemory, plan.quantity, plan.splitRows, RANKED_BLOCKS), 0);
      if (inMemory && firstBlock) {
        // Proposed from memory: the shield's lease is the one Redis call before DynamoDB, and it
        // goes out in the gate's write (given back if the gate refuses).
        views = inMemory;
        leased = {
          block: firstBlock,
          shield: behindGate(gate, shieldFor(eventId, firstBlock.seats), (s) =>
            s.kind === "lost" ? Promise.resolve() : s.release(),
          ),
        };
      } else {
        // The map's first read goes out beside the gate's call (it only reads: nothing to give back).
        ({ views, skipped } = await behindGate(gate, viewsOf(plan), async () => {}));
      }
      const left = () => views.reduce((n, v) => n + v.available(), skipped);
      /** Seats this request saw lost: a re-read map may not show them taken yet. */
      const seen = new Set<string>();
      const lost = (seats: readonly string[]) => {
        for (const id of seats) seen.add(id);
        for (const v of views) v.take(seats);
      };
      type Refusal = Exclude<HoldResult, { ok: true }>;
      const noBlock = (): Refusal => ({ ok: false, reason: "no_block_available", available: left() });
      let attempt = 0;
      let shieldLosses = 0;
      let transactions = 1;
      let release = async () => {};

      /** The next proposal that the shield lets through (leased), or the answer when there is none. */
      const propose = async (): Promise<CheckedSeatHold | Refusal> => {
        for (;;) {
          let block: Block | null | undefined;
          let shield: ShieldResult;
          if (leased) {
            block = leased.block;
            const pending = leased.shield;
            leased = undefined;
            shield = await pending;
          } else {
            block = choose(proposals(views, plan.quantity, plan.splitRows, RANKED_BLOCKS), attempt);
            if (!block) return noBlock();
            shield = await shieldFor(eventId, block.seats);
          }
          if (shield.kind !== "lost") {
            release = shield.release;
            return checkedBlock(plan, block);
          }
          metrics.conflicts.inc({ stage: "shield" });
          lost(shield.seats);
          attempt++;
          if (++shieldLosses >= BEST_SHIELD_LOSSES) return noBlock();
          if (shieldLosses % BEST_REREAD_AFTER === 0) {
            // A pause growing with the losses, at random, before reading the map again: the
            // writes of the crowd's winners land in it, and the losers do not all come back at
            // once. (On a loaded machine, the full suite, 3 of 800 fans were refused with pairs
            // free at 24 losses and 4 transactions, no pause.)
            await sleep(Math.random() * 2 * (shieldLosses / BEST_REREAD_AFTER));
            ({ views, skipped } = await viewsOf(plan));
            for (const v of views) v.take(seen);
          }
        }
      };

      const first = await propose();
      if ("ok" in first) {
        metrics.holds.inc({ outcome: first.reason });
        return first;
      }
      try {
        const result = await counted("hold", () =>
          inventory.holds.writeSeats(first, async (taken) => {
            metrics.conflicts.inc({ stage: "dynamodb" });
            seatMapWrites.stale(eventId, taken);
            lost(taken);
            await release();
            release = async () => {};
            attempt++;
            if (++transactions > BEST_TRANSACTIONS) return noBlock();
            // The map proposed seats DynamoDB had granted already: it lags, so read it again.
            ({ views, skipped } = await viewsOf(plan));
            for (const v of views) v.take(seen);
            return propose();
          }),
        );
        flagLimit(eventId, fanId, result);
        if (result.ok) {
          sweepAtExpiry(result, () => result.hold.seats.map(shardOf));
          await heldAndReleased(result.hold, release);
          release = async () => {};
        }
        return result;
      } finally {
        await release();
      }
    },

    async holdGeneralAdmission({ eventId, fanId, areaId, quantity, holdSeconds }) {
      const result = await counted("hold", () =>
        inventory.holds.holdGeneralAdmission({ eventId, fanId, areaId, quantity, holdSeconds }),
      );
      // An area is swept by the shard its id falls in (src/inventory/sweep.ts).
      sweepAtExpiry(result, () => [shardOf(areaId)]);
      return result;
    },

    async release({ eventId, holdId, fanId }) {
      const result = await counted("release", () => inventory.holds.release({ eventId, holdId, fanId }));
      // Awaited (it never throws): the fan's next read, on this process, shows the seats free.
      if (result.ok) await seatMapWrites.released(eventId, result.releasedSeats);
      return result;
    },
  };
  return {
    ...service,
    holdSeats: timed(service.holdSeats),
    holdBest: timed(service.holdBest),
    holdGeneralAdmission: timed(service.holdGeneralAdmission),
  };
}
