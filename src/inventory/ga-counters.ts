/**
 * A general-admission area's stock lives in gaCounters(capacity) counter items (keys.ts), so that
 * no one partition carries every hold of the area. A hold takes its places from one counter, or
 * from several when none has them all (one transaction: every counter's `available >= part` or
 * nothing), and records where they came from (`from`: counter -> places) on its record and its
 * ledger entry; a release, a sweep and a confirmation move exactly those places on exactly those
 * counters.
 *
 * Which counters to try comes from a shield of estimates kept per process (and per store): each
 * counter's places as last seen. It starts at each counter's share, goes down by what this
 * process holds, up by what it gives back, and is set to the truth by every refusal (the
 * cancelled transaction's ALL_OLD image of the counter) and every full read. It only picks where
 * to try: DynamoDB's condition decides, so an estimate that is wrong costs one cancelled
 * transaction and corrects itself, and never lets an area go below zero or above capacity.
 */
import { GetCommand } from "@aws-sdk/lib-dynamodb";
import { gaCounterCapacity, gaCounters, keys } from "./keys.js";
import { type Ctx, type Item, num } from "./store.js";

/** Where a general-admission hold's places came from: counter index (as a string) -> places. */
export type Counters = Record<string, number>;

const estimates = new WeakMap<Ctx, Map<string, number[]>>();

/** The shield's estimates of one area (created at each counter's share). */
export function estimatesOf(ctx: Ctx, eventId: string, areaId: string, capacity: number): number[] {
  let byArea = estimates.get(ctx);
  if (!byArea) {
    byArea = new Map();
    estimates.set(ctx, byArea);
  }
  const key = `${eventId}/${areaId}`;
  let est = byArea.get(key);
  if (!est || est.length !== gaCounters(capacity)) {
    est = Array.from({ length: gaCounters(capacity) }, (_, k) => gaCounterCapacity(capacity, k));
    byArea.set(key, est);
  }
  return est;
}

/**
 * Counters to take `quantity` places from, by the estimates: from a random counter on, the
 * counters that seem to have places, each giving what it seems to have, until the quantity is
 * covered. Null when the estimates together have less.
 */
export function pickCounters(est: readonly number[], quantity: number, random = Math.random): Counters | null {
  const n = est.length;
  const start = Math.floor(random() * n);
  const parts: Counters = {};
  let left = quantity;
  for (let i = 0; i < n && left > 0; i++) {
    const k = (start + i) % n;
    const take = Math.min(Math.max(0, est[k] ?? 0), left);
    if (take <= 0) continue;
    parts[String(k)] = take;
    left -= take;
  }
  return left > 0 ? null : parts;
}

export function adjust(est: number[], parts: Counters, sign: 1 | -1): void {
  for (const [k, q] of Object.entries(parts)) {
    const i = Number(k);
    if (i >= 0 && i < est.length) est[i] = Math.max(0, (est[i] ?? 0) + sign * q);
  }
}

/** A hold's counters from its record or entry; a hold of the one-counter layout took from counter 0. */
export function countersOf(from: unknown, quantity: number): Counters {
  if (from && typeof from === "object" && !Array.isArray(from)) {
    const out: Counters = {};
    for (const [k, v] of Object.entries(from as Record<string, unknown>)) {
      if (/^[0-9]{1,2}$/.test(k) && typeof v === "number" && v > 0) out[k] = v;
    }
    if (Object.keys(out).length > 0) return out;
  }
  return { "0": quantity };
}

/** The first counter a hold took from: its record sits in that counter's expiry partition. */
export function firstCounter(parts: Counters): number {
  return Math.min(...Object.keys(parts).map(Number));
}

export interface CounterState {
  available: number;
  held: number;
}

/**
 * Every counter item of an area, read consistently and in parallel after counter 0 (which says
 * how many there are; absent: one). A counter missing past 0 is `undefined`. Null when the area
 * has no counter 0.
 */
export async function readCounterItems(
  ctx: Ctx,
  eventId: string,
  areaId: string,
): Promise<(Item | undefined)[] | null> {
  const read = async (k: number): Promise<Item | undefined> =>
    (
      await ctx.doc.send(
        new GetCommand({
          TableName: ctx.tableName,
          Key: keys.generalAdmission(eventId, areaId, k),
          ConsistentRead: true,
        }),
      )
    ).Item;
  const first = await read(0);
  if (!first) return null;
  const n = typeof first.counters === "number" ? first.counters : 1;
  const rest = await Promise.all(Array.from({ length: n - 1 }, (_, i) => read(i + 1)));
  return [first, ...rest];
}

/**
 * Every counter of an area (readCounterItems); the estimates are set to what was read. Null when
 * the area has no counter 0.
 */
export async function readCounters(
  ctx: Ctx,
  eventId: string,
  areaId: string,
  est?: number[],
): Promise<CounterState[] | null> {
  const items = await readCounterItems(ctx, eventId, areaId);
  if (!items) return null;
  const states = items.map((item) =>
    item ? { available: num(item, "available"), held: num(item, "held") } : { available: 0, held: 0 },
  );
  if (est) {
    for (let k = 0; k < Math.min(est.length, states.length); k++) est[k] = states[k]?.available ?? 0;
  }
  return states;
}
