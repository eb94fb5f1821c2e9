/**
 * Events and their seats: create or replace (before the on-sale only), read, and the cached
 * layout the hold path prices seats with.
 */
import { randomUUID } from "node:crypto";
import { BatchWriteCommand, GetCommand, PutCommand, QueryCommand, UpdateCommand } from "@aws-sdk/lib-dynamodb";
import { GSI1 } from "../dynamodb/table.js";
import { iso, toEvent } from "./items.js";
import { gaCounterCapacity, gaCounters, ID_PATTERN, type ItemKey, keys, type SeatRef, seatIdOf } from "./keys.js";
import { TRANSACTION_MAX_ITEMS } from "./limits.js";
import { parseEventInput } from "./schema.js";
import {
  backoff,
  conditionalUpdate,
  conditionFailure,
  type Ctx,
  guard,
  type Item,
  mapLimit,
  optNum,
  queryPages,
  transact,
  type TransactItem,
} from "./store.js";
import type {
  CreateEventOptions,
  CreateEventResult,
  EventDefinition,
  EventRef,
  EventInput,
  GeneralAdmissionInput,
  OperatorRoomSettings,
  SectionInput,
} from "./types.js";

/** What the waiting room keeps on the event: its settings with the version they had in Redis. */
type KeptRoomSettings = Omit<OperatorRoomSettings, "updatedAt" | "version"> & { version: number };

/** A replacement that has not finished within this long is presumed crashed and may be taken over. */
const BUILD_LEASE_MS = 15 * 60_000;
const BATCH_SIZE = 25;
const BATCH_ATTEMPTS = 12;
/** How long a gateway keeps an on-sale event's layout (createEventCache). */
export const EVENT_CACHE_MS = 60_000;
/** The default request budget: DYNAMODB_TIMEOUT_MS x DYNAMODB_MAX_ATTEMPTS at their defaults. */
export const DEFAULT_REQUEST_BUDGET_MS = 5_000 * 3;
/** How long before its on-sale an event stops being replaceable, by default. */
export const DEFAULT_REPLACE_GUARD_MS = EVENT_CACHE_MS + DEFAULT_REQUEST_BUDGET_MS;

interface Layout {
  id: string;
  rows: number;
  seatsPerRow: number;
}

/**
 * The event item's mark of an event whose seat holds write no GSI2 expiry entry (every event PUT
 * since issue 30 item 2): its sweeps query no expiry partition. An event without it may have
 * seats held before, whose entries are still there to find (src/inventory/sweep.ts).
 */
export const SEAT_EXPIRIES = "seatmap";

export async function getEventItem(ctx: Ctx, eventId: string): Promise<Item | undefined> {
  const out = await ctx.doc.send(
    new GetCommand({ TableName: ctx.tableName, Key: keys.event(eventId), ConsistentRead: true }),
  );
  return out.Item;
}

export async function getEvent(ctx: Ctx, eventId: string): Promise<EventDefinition | null> {
  if (!ID_PATTERN.test(eventId)) return null;
  return guard("getEvent", async () => {
    const item = await getEventItem(ctx, eventId);
    return item ? toEvent(item) : null;
  });
}

/**
 * Keeps the waiting room's latest settings on the event item (one UpdateItem), only over an older
 * version (or none: an item kept before versions): saves that race, from several gateways or from an
 * operator and the admission loop, leave the settings Redis holds last, whatever order they reach
 * DynamoDB in. False when there is no such event or a newer version is kept. A replacement (PUT)
 * carries them over (keptRoomSettings).
 */
export async function saveRoomSettings(ctx: Ctx, eventId: string, settings: KeptRoomSettings): Promise<boolean> {
  if (!ID_PATTERN.test(eventId)) return false;
  return guard("saveRoomSettings", () =>
    conditionalUpdate(ctx, {
      Key: keys.event(eventId),
      UpdateExpression: "SET roomSettings = :s",
      ConditionExpression:
        "attribute_exists(PK) AND (attribute_not_exists(roomSettings.version) OR roomSettings.version < :v)",
      ExpressionAttributeValues: { ":s": { ...settings, updatedAt: iso(ctx.clock()) }, ":v": settings.version },
    }),
  );
}

/**
 * The operator closes the sale: `closedAt` is set once (a repeat keeps the first), and holds are
 * refused from then on (`onSale` below; another gateway's cache sees it within EVENT_CACHE_MS).
 * The closed event, or null when there is no complete event.
 */
export async function closeEvent(ctx: Ctx, eventId: string): Promise<EventDefinition | null> {
  if (!ID_PATTERN.test(eventId)) return null;
  return guard("closeEvent", async () => {
    try {
      const out = await ctx.doc.send(
        new UpdateCommand({
          TableName: ctx.tableName,
          Key: keys.event(eventId),
          UpdateExpression: "SET closedAt = if_not_exists(closedAt, :at)",
          ConditionExpression: "attribute_exists(PK) AND layoutComplete = :true",
          ExpressionAttributeValues: { ":at": iso(ctx.clock()), ":true": true },
          ReturnValues: "ALL_NEW",
        }),
      );
      return out.Attributes ? toEvent(out.Attributes) : null;
    } catch (err) {
      if (conditionFailure(err)) return null;
      throw err;
    }
  });
}

/**
 * The operator opens the sale now: `onSaleAt` becomes now (its index key with it), so holds are
 * taken from now on (by this process at once, by the others within MUTABLE_EVENT_CACHE_MS: an event
 * not yet on sale is cached that long at most), and a replacement is refused from then on (the
 * replacement guard reads `onSaleAtMs`). Only an event whose layout is complete, not yet on sale and
 * not closed; an event already on sale is returned as it is (`changed: false`). Null for no
 * complete event, `closed` for a closed one.
 */
export async function openEventNow(
  ctx: Ctx,
  eventId: string,
): Promise<{ event: EventDefinition; changed: boolean } | null | "closed"> {
  if (!ID_PATTERN.test(eventId)) return null;
  return guard("openEventNow", async () => {
    const now = ctx.clock();
    try {
      const out = await ctx.doc.send(
        new UpdateCommand({
          TableName: ctx.tableName,
          Key: keys.event(eventId),
          UpdateExpression: "SET onSaleAt = :at, onSaleAtMs = :now, GSI1SK = :g1sk, updatedAt = :at",
          ConditionExpression:
            "attribute_exists(PK) AND layoutComplete = :true AND onSaleAtMs > :now AND attribute_not_exists(closedAt)",
          ExpressionAttributeValues: {
            ":at": iso(now),
            ":now": now,
            ":true": true,
            ":g1sk": keys.eventSortKey(iso(now), eventId),
          },
          ReturnValues: "ALL_NEW",
          ReturnValuesOnConditionCheckFailure: "ALL_OLD",
        }),
      );
      return out.Attributes ? { event: toEvent(out.Attributes), changed: true } : null;
    } catch (err) {
      const failed = conditionFailure(err);
      if (!failed) throw err;
      const item = failed.item;
      if (!item) return null;
      if (item.layoutComplete !== true) return null;
      const event = toEvent(item);
      if (event.closedAt !== undefined) return "closed";
      return { event, changed: false };
    }
  });
}

/** A closed event's jobs are all gone from Redis: nothing arms it again. False if not closed. */
export async function markEventJobsEnded(ctx: Ctx, eventId: string): Promise<boolean> {
  if (!ID_PATTERN.test(eventId)) return false;
  return guard("markEventJobsEnded", () =>
    conditionalUpdate(ctx, {
      Key: keys.event(eventId),
      UpdateExpression: "SET jobsEndedAt = if_not_exists(jobsEndedAt, :at)",
      ConditionExpression: "attribute_exists(closedAt)",
      ExpressionAttributeValues: { ":at": iso(ctx.clock()) },
    }),
  );
}

/** Shared by every caller of the cache (one per cached version): never changed by one. */
export interface SaleEvent {
  readonly event: EventDefinition;
  /** Layout complete, onSaleAt passed and not closed, by the inventory's clock at the time of asking. */
  readonly onSale: boolean;
  readonly sections: ReadonlyMap<string, SectionInput>;
  readonly areas: ReadonlyMap<string, GeneralAdmissionInput>;
}

/**
 * How long this process keeps an event that is not on sale yet. The operator may still replace it
 * (a PUT in this process forgets it at once), so another gateway may serve the old version for
 * this long: only ever a refusal (a replacement is refused within the replacement guard of the
 * stored on-sale, so an old version read here is never one on sale).
 */
export const MUTABLE_EVENT_CACHE_MS = 2_000;

export interface EventCache {
  /** The event as the hold path needs it, or null for an unknown event. */
  forSale(eventId: string): Promise<SaleEvent | null>;
  /** Drops the cached version (a replacement or creation in this process). */
  forget(eventId: string): void;
  /**
   * Whether the cached event has the section, without waiting and without reading: undefined when
   * this process cannot tell now (not cached, stale, still being read). The seat map's fast path
   * (src/http/fast-path.ts) asks this on every request.
   */
  hasSection(eventId: string, sectionId: string): boolean | undefined;
  /**
   * `forSale` without waiting: the cached version when it is read and fresh, else undefined (the
   * caller then awaits `forSale`). A hold refused from the seat map (src/http/fast-path.ts) asks.
   */
  peekForSale(eventId: string): SaleEvent | null | undefined;
  /** The cached definition alone, on the same terms as `peekForSale` (no copy made: a join asks). */
  peekEvent(eventId: string): EventDefinition | null | undefined;
}

/**
 * The one cache of events in this process: the hold path prices seats with it and the HTTP reads
 * (seat map, stream) serve it. Once an event is on sale and its layout complete it can never be
 * replaced again, so its layout is immutable and kept `ttlMs` (EVENT_CACHE_MS, on which the
 * replacement guard is built): holds then cost no read of the (single, hot) event item. Any other
 * version is kept MUTABLE_EVENT_CACHE_MS at most. Concurrent misses share one read.
 */
export function createEventCache(ctx: Ctx, ttlMs = EVENT_CACHE_MS): EventCache {
  type Layout = Omit<SaleEvent, "onSale">;
  const cache = new Map<string, { layout: Promise<Layout | null>; until: number; loaded?: Layout | null }>();
  const load = async (eventId: string): Promise<Layout | null> => {
    if (!ID_PATTERN.test(eventId)) return null;
    const item = await getEventItem(ctx, eventId);
    if (!item) return null;
    const event = toEvent(item);
    return {
      event,
      sections: new Map(event.sections.map((s) => [s.id, s])),
      areas: new Map(event.generalAdmission.map((g) => [g.id, g])),
    };
  };
  // Parsed once per cached version: a hold refused from the seat map (src/http/fast-path.ts) asks
  // on every request, and parsing the ISO date was a visible share of that refusal's profile.
  const onSaleAtMs = new WeakMap<EventDefinition, number>();
  const onSale = (event: EventDefinition) => {
    let at = onSaleAtMs.get(event);
    if (at === undefined) {
      at = Date.parse(event.onSaleAt);
      onSaleAtMs.set(event, at);
    }
    return event.layoutComplete && at <= ctx.clock() && event.closedAt === undefined;
  };
  // One answer per cached version and on-sale flag, not a copy per call: a refused hold asks on
  // every request (the copy was 2% of that refusal's profile).
  const sales = new WeakMap<Layout, SaleEvent>();
  const saleOf = (layout: Layout): SaleEvent => {
    const now = onSale(layout.event);
    let sale = sales.get(layout);
    if (sale?.onSale !== now) {
      sale = { ...layout, onSale: now };
      sales.set(layout, sale);
    }
    return sale;
  };
  const miss = async (eventId: string): Promise<Layout | null> => {
    if (cache.size > 1_000) cache.clear();
    const entry: { layout: Promise<Layout | null>; until: number; loaded?: Layout | null } = {
      layout: load(eventId),
      until: Date.now() + Math.min(ttlMs, MUTABLE_EVENT_CACHE_MS),
    };
    cache.set(eventId, entry);
    try {
      const layout = await entry.layout;
      if (layout && onSale(layout.event)) entry.until = Date.now() + ttlMs;
      entry.loaded = layout;
      return layout;
    } catch (err) {
      // A failed read is not kept.
      if (cache.get(eventId) === entry) cache.delete(eventId);
      throw err;
    }
  };
  return {
    async forSale(eventId) {
      const hit = cache.get(eventId);
      // A version already read is taken as it is, without a hop through its settled promise.
      const fresh = hit && hit.until > Date.now() ? hit : undefined;
      const layout = fresh ? (fresh.loaded !== undefined ? fresh.loaded : await fresh.layout) : await miss(eventId);
      return layout ? saleOf(layout) : null;
    },
    peekForSale(eventId) {
      const hit = cache.get(eventId);
      if (!hit || hit.until <= Date.now() || hit.loaded === undefined) return undefined;
      return hit.loaded ? saleOf(hit.loaded) : null;
    },
    peekEvent(eventId) {
      const hit = cache.get(eventId);
      if (!hit || hit.until <= Date.now() || hit.loaded === undefined) return undefined;
      return hit.loaded ? hit.loaded.event : null;
    },
    forget: (eventId) => void cache.delete(eventId),
    hasSection(eventId, sectionId) {
      const hit = cache.get(eventId);
      if (!hit || hit.until <= Date.now() || hit.loaded === undefined) return undefined;
      return hit.loaded?.sections.has(sectionId) ?? false;
    },
  };
}

export function seatExists(sale: SaleEvent, ref: SeatRef): SectionInput | undefined {
  const section = sale.sections.get(ref.sectionId);
  if (!section || ref.row > section.rows || ref.number > section.seatsPerRow) return undefined;
  return section;
}

function* seatRefs(layout: Layout): Generator<SeatRef> {
  for (let row = 1; row <= layout.rows; row++) {
    for (let number = 1; number <= layout.seatsPerRow; number++) yield { sectionId: layout.id, row, number };
  }
}

export function seatItem(eventId: string, section: SectionInput, ref: SeatRef): Item {
  const key = keys.seat(eventId, ref);
  return {
    ...key,
    entity: "SEAT",
    eventId,
    sectionId: section.id,
    seatId: seatIdOf(ref),
    row: ref.row,
    number: ref.number,
    tier: section.tier,
    price: section.price,
    status: "available",
  };
}

/**
 * An area's counter items (gaCounters(capacity) of them, keys.ts): each with its share of the
 * places, and `counter` / `counters` (its index, how many the area has).
 */
function areaItems(eventId: string, area: GeneralAdmissionInput): Item[] {
  const n = gaCounters(area.capacity);
  return Array.from({ length: n }, (_, k) => {
    const capacity = gaCounterCapacity(area.capacity, k);
    return {
      ...keys.generalAdmission(eventId, area.id, k),
      entity: "GA",
      eventId,
      areaId: area.id,
      tier: area.tier,
      price: area.price,
      capacity,
      available: capacity,
      held: 0,
      sold: 0,
      counter: k,
      counters: n,
    };
  });
}

/** Union of layouts, widest per section: a superset of every seat key that may exist. */
function mergeLayouts(...lists: Layout[][]): Layout[] {
  const byId = new Map<string, Layout>();
  for (const list of lists) {
    for (const l of list) {
      const prev = byId.get(l.id);
      byId.set(l.id, {
        id: l.id,
        rows: Math.max(prev?.rows ?? 0, l.rows),
        seatsPerRow: Math.max(prev?.seatsPerRow ?? 0, l.seatsPerRow),
      });
    }
  }
  return [...byId.values()];
}

function layoutsOf(value: unknown): Layout[] {
  if (!Array.isArray(value)) return [];
  return (value as Item[]).map((l) => ({
    id: String(l.id),
    rows: Number(l.rows),
    seatsPerRow: Number(l.seatsPerRow),
  }));
}

type WriteRequest = { PutRequest: { Item: Item } } | { DeleteRequest: { Key: ItemKey } };

/**
 * Creates the event and all its seats, or replaces an event that has not gone on sale.
 *
 * Order, chosen so a crash at any point is repaired by running the same PUT again:
 *  1. conditional write of the event item (new layout, `layoutComplete: false`, a build lease, and
 *     `staleSections`: every layout whose seats may still exist), so holds are refused meanwhile;
 *  2. delete the seats of stale layouts that the new layout lacks, put every seat: BatchWriteItem
 *     where no seat can exist yet, conditional writes where one may (a held or sold seat or area is
 *     never overwritten; it is left as it is and reported in `kept`);
 *  3. `layoutComplete: true`, stale lists removed, conditional on still owning the build.
 *
 * A replacement is refused once the stored event's on-sale is within `guardMs` (every gateway's
 * event cache plus the request budget): past that, a gateway may start selling before our write
 * lands, and one that cached the event keeps selling without reading it again.
 */
export async function createEvent(
  ctx: Ctx,
  eventId: string,
  input: EventInput,
  options: CreateEventOptions = {},
  guardMs = DEFAULT_REPLACE_GUARD_MS,
): Promise<CreateEventResult> {
  if (!ID_PATTERN.test(eventId)) {
    return { ok: false, reason: "invalid_request", issues: ["eventId: must match ^[A-Za-z0-9_]{1,32}$"] };
  }
  const parsed = parseEventInput(input);
  if (!parsed.ok) return { ok: false, reason: "invalid_request", issues: parsed.issues };
  const def = parsed.value;

  return guard("createEvent", async () => {
    const existing = await getEventItem(ctx, eventId);
    // Read after the item: a slow read must not lend its start time to the checks below.
    const now = ctx.clock();
    // The event item may be rewritten only while no gateway can be selling it, however late our
    // write lands (within the request budget) and whatever a gateway has cached.
    const deadline = now + guardMs;
    const refused = existing ? refuseReplacement(existing, now, deadline, guardMs) : null;
    if (refused) return refused;

    const build = buildOf(eventId, def, existing, now);
    const claimed = await claimEventItem(ctx, build, existing, now, deadline, guardMs);
    if (claimed) return claimed;
    const staleCounters = await countersOfAreas(ctx, eventId, build.staleAreas);
    const written = await writeLayout(ctx, planLayout(eventId, def, build, staleCounters), options);
    if (!(await finishBuild(ctx, eventId, build.buildId))) return { ok: false, reason: "conflict" };
    const event: EventDefinition = toEvent({ ...build.item, layoutComplete: true });
    return { ok: true, created: !existing, event, ...written };
  });
}

type Refusal = Extract<CreateEventResult, { reason: "on_sale" | "replacement_closed" | "conflict" }>;

/** On sale, too close to its on-sale, or being rebuilt by another live replacement. */
function refuseReplacement(existing: Item, now: number, deadline: number, guardMs: number): Refusal | null {
  const old = toEvent(existing);
  const onSaleAtMs = Date.parse(old.onSaleAt);
  if (onSaleAtMs <= now) return { ok: false, reason: "on_sale", event: old };
  if (onSaleAtMs <= deadline) {
    return { ok: false, reason: "replacement_closed", event: old, replaceableUntil: onSaleAtMs - guardMs };
  }
  if (!old.layoutComplete && (optNum(existing, "buildLeaseUntil") ?? 0) > now) return { ok: false, reason: "conflict" };
  return null;
}

interface Build {
  buildId: string;
  /** The new event item, `layoutComplete: false` until the seats are written. */
  item: Item;
  layouts: Layout[];
  /** Every layout and area of earlier versions whose items may still exist. */
  staleSections: Layout[];
  staleAreas: string[];
}

function buildOf(eventId: string, def: EventInput, existing: Item | undefined, now: number): Build {
  const buildId = randomUUID();
  const layouts: Layout[] = def.sections.map(({ id, rows, seatsPerRow }) => ({ id, rows, seatsPerRow }));
  const staleSections = existing ? mergeLayouts(layoutsOf(existing.sections), layoutsOf(existing.staleSections)) : [];
  const staleAreas = existing
    ? [
        ...new Set([
          ...layoutsOf(existing.generalAdmission).map((g) => g.id),
          ...(Array.isArray(existing.staleAreas) ? (existing.staleAreas as string[]) : []),
        ]),
      ]
    : [];
  const totalSeats = layouts.reduce((n, l) => n + l.rows * l.seatsPerRow, 0);
  const version = existing ? Number(existing.version) + 1 : 1;
  const roomSettings = keptRoomSettings(existing, def.waitingRoom);
  const item: Item = {
    ...keys.event(eventId),
    entity: "EVENT",
    eventId,
    name: def.name,
    onSaleAt: iso(Date.parse(def.onSaleAt)),
    onSaleAtMs: Date.parse(def.onSaleAt),
    holdSeconds: def.holdSeconds,
    maxSeatsPerFan: def.maxSeatsPerFan,
    sections: def.sections,
    generalAdmission: def.generalAdmission,
    waitingRoom: def.waitingRoom,
    version,
    layoutComplete: false,
    totalSeats,
    createdAt: existing ? existing.createdAt : iso(now),
    updatedAt: iso(now),
    buildId,
    buildLeaseUntil: now + BUILD_LEASE_MS,
    staleSections,
    staleAreas,
    GSI1PK: keys.eventsPartition,
    GSI1SK: keys.eventSortKey(iso(Date.parse(def.onSaleAt)), eventId),
    // Its purchases are in GSI3 only (no purchase exists before the on-sale, so a replacement of
    // an event made before GSI3 may say so too).
    purchasesIndex: "GSI3",
    // Its seat holds write no GSI2 expiry entry: its sweeps query no expiry partition (sweep.ts).
    seatExpiries: SEAT_EXPIRIES,
    ...(roomSettings ? { roomSettings } : {}),
  };
  return { buildId, item, layouts, staleSections, staleAreas };
}

const BLOCK_FIELDS = ["admitPerSecond", "maxActive", "sessionSeconds"] as const;

/**
 * A replacement keeps the waiting room's settings the operator or the admission loop set since
 * (paused, closed, the bot and loop settings, the rates), as the room in Redis keeps them: only a
 * field of the `waitingRoom` block that the new body changes from the old body is the new body's.
 * Undefined when none were kept (the PUT's block is in force).
 */
function keptRoomSettings(existing: Item | undefined, block: EventInput["waitingRoom"]): Item | undefined {
  const kept = existing?.roomSettings;
  if (!kept || typeof kept !== "object") return undefined;
  const before = (existing.waitingRoom ?? {}) as Item;
  const merged: Item = { ...(kept as Item) };
  for (const name of BLOCK_FIELDS) if (before[name] !== block[name]) merged[name] = block[name];
  return merged;
}

/**
 * The replacement's condition on the kept settings: the copy it carried over is still the one
 * stored, so a change kept meanwhile (another gateway's PATCH) is not overwritten by an older one.
 */
function keptSettingsCondition(existing: Item): { expression: string; values: Record<string, unknown> } {
  const kept = existing.roomSettings as Item | undefined;
  if (!kept || typeof kept !== "object") return { expression: " AND attribute_not_exists(roomSettings)", values: {} };
  if (typeof kept.version !== "number") return { expression: "", values: {} };
  return { expression: " AND roomSettings.version = :rv", values: { ":rv": kept.version } };
}

/** Step 1: the event item, conditional on what was read (or on there being none). Null when written. */
async function claimEventItem(
  ctx: Ctx,
  build: Build,
  existing: Item | undefined,
  now: number,
  deadline: number,
  guardMs: number,
): Promise<Refusal | null> {
  try {
    await ctx.doc.send(
      new PutCommand({
        TableName: ctx.tableName,
        Item: build.item,
        ...(existing
          ? {
              // DynamoDB has no clock of its own here: `:deadline` is ours, read just before sending.
              ConditionExpression:
                "version = :v AND onSaleAtMs > :deadline AND (layoutComplete = :true OR buildLeaseUntil < :now)" +
                keptSettingsCondition(existing).expression,
              ExpressionAttributeValues: {
                ":v": existing.version,
                ":deadline": deadline,
                ":now": now,
                ":true": true,
                ...keptSettingsCondition(existing).values,
              },
            }
          : { ConditionExpression: "attribute_not_exists(PK)" }),
        ReturnValuesOnConditionCheckFailure: "ALL_OLD",
      }),
    );
    return null;
  } catch (err) {
    const failed = conditionFailure(err);
    if (!failed) throw err;
    const onSaleAtMs = failed.item ? Number(failed.item.onSaleAtMs) : Number.POSITIVE_INFINITY;
    if (failed.item && onSaleAtMs <= now) return { ok: false, reason: "on_sale", event: toEvent(failed.item) };
    if (failed.item && onSaleAtMs <= deadline) {
      return {
        ok: false,
        reason: "replacement_closed",
        event: toEvent(failed.item),
        replaceableUntil: onSaleAtMs - guardMs,
      };
    }
    return { ok: false, reason: "conflict" };
  }
}

interface LayoutPlan {
  /** Puts where nothing can exist yet: unconditional batches. */
  fast: WriteRequest[];
  /** Puts and deletes where a seat or area of an earlier layout may exist: one condition each. */
  careful: LayoutWrite[];
}

/**
 * Only keys of a layout written before (the stale ones) can hold a seat or area a fan holds or
 * bought: those are written one condition each, the rest (all of a first creation) in
 * unconditional batches, since nothing can be there to overwrite.
 */
/**
 * How many counter items each area of a replaced layout has (its counter 0 says; none when it has
 * no counter 0), so that a replacement deletes exactly those it no longer needs.
 */
async function countersOfAreas(ctx: Ctx, eventId: string, areaIds: string[]): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  await mapLimit(areaIds, 16, async (areaId) => {
    const got = await ctx.doc.send(
      new GetCommand({
        TableName: ctx.tableName,
        Key: keys.generalAdmission(eventId, areaId, 0),
        ConsistentRead: true,
      }),
    );
    out.set(areaId, got.Item ? (typeof got.Item.counters === "number" ? got.Item.counters : 1) : 0);
  });
  return out;
}

function planLayout(eventId: string, def: EventInput, build: Build, staleCounters: Map<string, number>): LayoutPlan {
  const { layouts, staleSections, staleAreas } = build;
  const fast: WriteRequest[] = [];
  const careful: LayoutWrite[] = [];
  const staleById = new Map(staleSections.map((l) => [l.id, l]));
  const mayExist = (ref: SeatRef): boolean => {
    const stale = staleById.get(ref.sectionId);
    return stale !== undefined && ref.row <= stale.rows && ref.number <= stale.seatsPerRow;
  };
  // Deletes: seats of stale layouts outside the new one, and areas that are gone.
  const inNew = new Map(layouts.map((l) => [l.id, l]));
  for (const stale of staleSections) {
    const kept = inNew.get(stale.id);
    for (const ref of seatRefs(stale)) {
      if (kept && ref.row <= kept.rows && ref.number <= kept.seatsPerRow) continue;
      careful.push({ kind: "seat", id: seatIdOf(ref), delete: keys.seat(eventId, ref) });
    }
  }
  const newAreas = new Set(def.generalAdmission.map((g) => g.id));
  // An old area's counters, as many as it has (counter 0 said, countersOfAreas).
  for (const areaId of staleAreas) {
    if (newAreas.has(areaId)) continue;
    for (let k = 0; k < Math.max(1, staleCounters.get(areaId) ?? 1); k++)
      careful.push({ kind: "area", id: areaId, delete: keys.generalAdmission(eventId, areaId, k) });
  }
  for (const section of def.sections) {
    for (const ref of seatRefs(section)) {
      const seat = seatItem(eventId, section, ref);
      if (mayExist(ref)) careful.push({ kind: "seat", id: seatIdOf(ref), put: seat });
      else fast.push({ PutRequest: { Item: seat } });
    }
  }
  const oldAreas = new Set(staleAreas);
  for (const area of def.generalAdmission) {
    const items = areaItems(eventId, area);
    if (!oldAreas.has(area.id)) {
      for (const item of items) fast.push({ PutRequest: { Item: item } });
      continue;
    }
    for (const item of items) careful.push({ kind: "area", id: area.id, put: item });
    for (let k = items.length; k < (staleCounters.get(area.id) ?? 0); k++)
      careful.push({ kind: "area", id: area.id, delete: keys.generalAdmission(eventId, area.id, k) });
  }
  return { fast, careful };
}

/** Step 2: the careful writes, then the batches, reporting progress as each chunk lands. */
async function writeLayout(
  ctx: Ctx,
  plan: LayoutPlan,
  options: CreateEventOptions,
): Promise<{ seatsWritten: number; itemsDeleted: number; kept: { seats: string[]; areas: string[] } }> {
  let seatsWritten = 0;
  let written = 0;
  let deleted = 0;
  const total = plan.fast.length + plan.careful.length;
  const kept = { seats: [] as string[], areas: [] as string[] };
  const concurrency = options.concurrency ?? 16;
  const report = () => options.onProgress?.({ written, deleted, total });
  await writeCarefully(ctx, plan.careful, concurrency, (done, taken) => {
    for (const w of done) {
      if (w.put) {
        written++;
        if (w.kind === "seat") seatsWritten++;
      } else deleted++;
    }
    for (const w of taken) {
      const list = kept[w.kind === "seat" ? "seats" : "areas"];
      // An area is named once however many of its counters were taken.
      if (w.kind === "seat" || !list.includes(w.id)) list.push(w.id);
    }
    report();
  });
  await batchWrite(ctx, plan.fast, concurrency, (batch) => {
    for (const r of batch) {
      written++;
      if ("PutRequest" in r && r.PutRequest.Item.entity === "SEAT") seatsWritten++;
    }
    report();
  });
  return { seatsWritten, itemsDeleted: deleted, kept };
}

/** Step 3: the layout is complete, if this build still owns the event item. */
async function finishBuild(ctx: Ctx, eventId: string, buildId: string): Promise<boolean> {
  return conditionalUpdate(ctx, {
    Key: keys.event(eventId),
    UpdateExpression:
      "SET layoutComplete = :true, updatedAt = :at REMOVE buildId, buildLeaseUntil, staleSections, staleAreas",
    ConditionExpression: "buildId = :build",
    ExpressionAttributeValues: { ":true": true, ":at": iso(ctx.clock()), ":build": buildId },
  });
}

/** A seat or area of a replaced layout that may exist: put or deleted only while nobody has it. */
interface LayoutWrite {
  kind: "seat" | "area";
  /** The seat id or area id. */
  id: string;
  put?: Item;
  delete?: ItemKey;
}

/**
 * A seat is free to overwrite when it is missing, available, or held by a hold that has expired
 * (such a hold can no longer be bought: confirm requires the seat still held by it, unexpired);
 * an area, when nobody holds or has bought any of it. One level of parentheses, as in holds.ts.
 */
const SEAT_FREE = "attribute_not_exists(PK) OR #status = :available OR (#status = :held AND holdExpiresAt <= :now)";
const AREA_FREE = "attribute_not_exists(PK) OR (held = :zero AND sold = :zero)";

function conditional(ctx: Ctx, w: LayoutWrite, now: number): TransactItem {
  const condition =
    w.kind === "seat"
      ? {
          ConditionExpression: SEAT_FREE,
          ExpressionAttributeNames: { "#status": "status" },
          ExpressionAttributeValues: { ":available": "available", ":held": "held", ":now": now },
        }
      : { ConditionExpression: AREA_FREE, ExpressionAttributeValues: { ":zero": 0 } };
  return w.put
    ? { Put: { TableName: ctx.tableName, Item: w.put, ...condition } }
    : { Delete: { TableName: ctx.tableName, Key: w.delete, ...condition } };
}

/**
 * The conditional writes of a replacement, in transactions of 100 (BatchWriteItem carries no
 * condition), `concurrency` in flight. A transaction cancelled by failed conditions names the
 * items that failed: those are held or sold, left as they are, reported to `onDone` as taken,
 * and the rest is sent again. A gateway that still has the old event cached may hold a seat at
 * any moment; each seat's own condition, evaluated by DynamoDB, is what decides.
 */
async function writeCarefully(
  ctx: Ctx,
  writes: LayoutWrite[],
  concurrency: number,
  onDone: (done: LayoutWrite[], taken: LayoutWrite[]) => void,
): Promise<void> {
  const chunks: LayoutWrite[][] = [];
  for (let i = 0; i < writes.length; i += TRANSACTION_MAX_ITEMS)
    chunks.push(writes.slice(i, i + TRANSACTION_MAX_ITEMS));
  await mapLimit(chunks, concurrency, async (chunk) => {
    let pending = chunk;
    const taken: LayoutWrite[] = [];
    while (pending.length > 0) {
      const now = ctx.clock();
      const out = await transact(
        ctx,
        pending.map((w) => conditional(ctx, w, now)),
        BATCH_ATTEMPTS,
      );
      if (out.ok) break;
      if (out.contention) throw new Error(`layout write: ${pending.length} items kept colliding with other writes`);
      const failed = new Set(out.reasons.flatMap((r, i) => (r.code === "ConditionalCheckFailed" ? [i] : [])));
      taken.push(...pending.filter((_, i) => failed.has(i)));
      pending = pending.filter((_, i) => !failed.has(i));
    }
    onDone(
      chunk.filter((w) => !taken.includes(w)),
      taken,
    );
  });
}

/**
 * BatchWriteItem in chunks of 25, `concurrency` chunks in flight. UnprocessedItems (and
 * throttling) are retried with exponential backoff and jitter; `onDone` sees each chunk once it
 * is fully written.
 */
async function batchWrite(
  ctx: Ctx,
  requests: WriteRequest[],
  concurrency: number,
  onDone: (batch: WriteRequest[]) => void,
): Promise<void> {
  const chunks: WriteRequest[][] = [];
  for (let i = 0; i < requests.length; i += BATCH_SIZE) chunks.push(requests.slice(i, i + BATCH_SIZE));
  await mapLimit(chunks, concurrency, async (chunk) => {
    let pending = chunk;
    for (let attempt = 0; pending.length > 0; attempt++) {
      if (attempt >= BATCH_ATTEMPTS)
        throw new Error(`BatchWriteItem: ${pending.length} items unprocessed after ${attempt} attempts`);
      if (attempt > 0) await backoff(attempt, 25, 2_000);
      try {
        const out = await ctx.doc.send(new BatchWriteCommand({ RequestItems: { [ctx.tableName]: pending } }));
        pending = (out.UnprocessedItems?.[ctx.tableName] ?? []) as WriteRequest[];
      } catch (err) {
        const name = (err as { name?: string }).name;
        if (
          name !== "ProvisionedThroughputExceededException" &&
          name !== "ThrottlingException" &&
          name !== "RequestLimitExceeded"
        ) {
          throw err;
        }
      }
    }
    onDone(chunk);
  });
}

/** The event aggregate: the event item and its layout (seats and areas are written with it). */
export interface EventStore {
  /** Creates an event and writes all its seats, or replaces one that is not on sale yet. */
  create(args: EventRef & { input: EventInput } & CreateEventOptions): Promise<CreateEventResult>;
  /** A consistent read of the event item (the waiting room's restore, the seat-map loader, audits). */
  get(args: EventRef): Promise<EventDefinition | null>;
  /**
   * The event from this process's one event cache (createEventCache): kept 60 s once on sale (it
   * can no longer change), 2 s before (a replacement elsewhere shows within that; here, at once).
   */
  cached(args: EventRef): Promise<EventDefinition | null>;
  /** From the same cache, synchronously: whether the event has the section; undefined when it cannot tell now. */
  hasSection(args: EventRef & { sectionId: string }): boolean | undefined;
  /** The cached event without waiting: undefined when this process cannot tell now; null: none. */
  peek(args: EventRef): EventDefinition | null | undefined;
  /**
   * Keeps the operator's waiting-room settings on the event (restored with them after a Redis
   * loss). False when there is no such event.
   */
  saveRoomSettings(args: EventRef & { settings: KeptRoomSettings }): Promise<boolean>;
  /**
   * Events with a complete layout, latest on-sale first, at most `limit` (GSI1, eventually
   * consistent): for startup work, never for a request. Events stored before the index existed
   * are not listed.
   */
  list(args: { limit: number }): Promise<EventDefinition[]>;
  /**
   * Events with a complete layout, latest on-sale first, a page at a time (GSI1, eventually
   * consistent; the cursor is opaque): the operator's list. Null for a cursor this never gave.
   */
  listPage(args: {
    limit: number;
    cursor?: string | undefined;
  }): Promise<{ events: EventDefinition[]; cursor?: string } | null>;
  /** Opens the sale now (see openEventNow). */
  openNow(args: EventRef): Promise<{ event: EventDefinition; changed: boolean } | null | "closed">;
  /** Closes the sale (holds refused from then on); the event, or null for no complete event. */
  close(args: EventRef): Promise<EventDefinition | null>;
  /** Records that a closed event's jobs are all gone; false when it is not closed. */
  markJobsEnded(args: EventRef): Promise<boolean>;
}

export function createEventStore(ctx: Ctx, cache: EventCache, replaceGuardMs: number): EventStore {
  return {
    async create({ eventId, input, ...options }) {
      try {
        return await createEvent(ctx, eventId, input, options, replaceGuardMs);
      } finally {
        // A version read while the layout was written (or before) must not outlive the write here.
        cache.forget(eventId);
      }
    },
    get: ({ eventId }) => getEvent(ctx, eventId),
    cached: ({ eventId }) => guard("cachedEvent", async () => (await cache.forSale(eventId))?.event ?? null),
    hasSection: ({ eventId, sectionId }) => cache.hasSection(eventId, sectionId),
    peek: ({ eventId }) => cache.peekEvent(eventId),
    saveRoomSettings: ({ eventId, settings }) => saveRoomSettings(ctx, eventId, settings),
    list: ({ limit }) => listEvents(ctx, limit),
    listPage: ({ limit, cursor }) => listEventsPage(ctx, limit, cursor),
    async openNow({ eventId }) {
      try {
        return await openEventNow(ctx, eventId);
      } finally {
        cache.forget(eventId);
      }
    },
    async close({ eventId }) {
      try {
        return await closeEvent(ctx, eventId);
      } finally {
        // This process refuses holds at once; the others within their cache's time.
        cache.forget(eventId);
      }
    },
    markJobsEnded: ({ eventId }) => markEventJobsEnded(ctx, eventId),
  };
}

async function listEventsPage(
  ctx: Ctx,
  limit: number,
  cursor: string | undefined,
): Promise<{ events: EventDefinition[]; cursor?: string } | null> {
  let start: Record<string, string> | undefined;
  if (cursor !== undefined) {
    try {
      const parsed = JSON.parse(Buffer.from(cursor, "base64url").toString("utf8")) as Record<string, unknown>;
      const { PK, SK, GSI1PK, GSI1SK } = parsed;
      if (
        GSI1PK !== keys.eventsPartition ||
        typeof PK !== "string" ||
        !/^EVT#[A-Za-z0-9_]{1,32}$/.test(PK) ||
        SK !== "EVENT" ||
        typeof GSI1SK !== "string" ||
        GSI1SK.length > 100
      ) {
        return null;
      }
      start = { PK, SK, GSI1PK, GSI1SK };
    } catch {
      return null;
    }
  }
  return guard("listEventsPage", async () => {
    const out = await ctx.doc.send(
      new QueryCommand({
        TableName: ctx.tableName,
        IndexName: GSI1,
        KeyConditionExpression: "GSI1PK = :pk",
        ExpressionAttributeValues: { ":pk": keys.eventsPartition },
        ScanIndexForward: false,
        Limit: limit,
        ...(start ? { ExclusiveStartKey: start } : {}),
      }),
    );
    // An event being built (a first PUT under way) is not listed; a page may then hold fewer.
    const events = (out.Items ?? []).map((item) => toEvent(item)).filter((e) => e.layoutComplete);
    const next = out.LastEvaluatedKey;
    return next ? { events, cursor: Buffer.from(JSON.stringify(next)).toString("base64url") } : { events };
  });
}

async function listEvents(ctx: Ctx, limit: number): Promise<EventDefinition[]> {
  return guard("listEvents", async () => {
    const events: EventDefinition[] = [];
    for await (const page of queryPages(ctx, {
      IndexName: GSI1,
      KeyConditionExpression: "GSI1PK = :pk",
      ExpressionAttributeValues: { ":pk": keys.eventsPartition },
      ScanIndexForward: false,
    })) {
      for (const item of page.Items ?? []) {
        const event = toEvent(item);
        if (event.layoutComplete) events.push(event);
        if (events.length >= limit) return events;
      }
    }
    return events;
  });
}
