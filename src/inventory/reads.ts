/**
 * Reads for the seat map and operator stats. Each is a Query on one partition (a section) or a
 * GetItem; never a Scan.
 */
import { QueryCommand } from "@aws-sdk/lib-dynamodb";
import { getEventItem } from "./events.js";
import { readCounterItems } from "./ga-counters.js";
import { toEvent, toSeatView } from "./items.js";
import { ID_PATTERN, keys } from "./keys.js";
import { type Ctx, guard, num, optNum, queryPages } from "./store.js";
import type { EventCounts, EventRef, GeneralAdmissionCounts, SeatPage, SectionCounts } from "./types.js";

const SEAT_SK = /^SEAT#\d{5}#\d{5}$/;

function encodeCursor(sk: unknown): string | undefined {
  return typeof sk === "string" ? Buffer.from(sk, "utf8").toString("base64url") : undefined;
}

function decodeCursor(cursor: string): string | null {
  const sk = Buffer.from(cursor, "base64url").toString("utf8");
  return SEAT_SK.test(sk) ? sk : null;
}

export interface SeatPageOptions {
  /** Seats per page, 1..1000 (default 1000). */
  limit?: number;
  cursor?: string;
  /** Strongly consistent (default false: the seat map may lag by a moment anyway). */
  consistent?: boolean;
}

/** A page of a section's seats, in row and seat order, with their effective status. */
export async function listSectionSeats(
  ctx: Ctx,
  eventId: string,
  sectionId: string,
  options: SeatPageOptions = {},
): Promise<SeatPage | null> {
  if (!ID_PATTERN.test(eventId) || !ID_PATTERN.test(sectionId)) return null;
  const start = options.cursor !== undefined ? decodeCursor(options.cursor) : undefined;
  if (start === null) return null;
  const partition = keys.sectionPartition(eventId, sectionId);
  return guard("listSectionSeats", async () => {
    const now = ctx.clock();
    const out = await ctx.doc.send(
      new QueryCommand({
        TableName: ctx.tableName,
        KeyConditionExpression: "PK = :pk AND begins_with(SK, :seat)",
        ExpressionAttributeValues: { ":pk": partition, ":seat": "SEAT#" },
        Limit: Math.max(1, Math.min(options.limit ?? 1_000, 1_000)),
        ConsistentRead: options.consistent ?? false,
        ...(start ? { ExclusiveStartKey: { PK: partition, SK: start } } : {}),
      }),
    );
    const nextCursor = out.LastEvaluatedKey ? encodeCursor(out.LastEvaluatedKey.SK) : undefined;
    return {
      seats: (out.Items ?? []).map((item) => toSeatView(item, now)),
      ...(nextCursor !== undefined ? { nextCursor } : {}),
    };
  });
}

/**
 * The stored status of every seat of a section, in pages: one Query of the section's partition
 * projecting only status and expiry. It reads the whole section (about 62 read units for 2,000
 * seats): fine for operator stats, which the gateway caches, and for the seat map's count while
 * Redis is away (cached per process); not for fans. There is no index of available seats: keeping
 * one cost a write unit on every hold, release and expiry (docs/data-model.md "Capacity notes").
 */
async function tallySection(ctx: Ctx, eventId: string, sectionId: string, now: number) {
  const partition = keys.sectionPartition(eventId, sectionId);
  const tally = { available: 0, held: 0, expiredHolds: 0, sold: 0 };
  const purchases = new Set<string>();
  for await (const page of queryPages(ctx, {
    KeyConditionExpression: "PK = :pk AND begins_with(SK, :seat)",
    // A read unit is the whole item's whatever the projection: the purchase ids cost nothing more.
    ProjectionExpression: "#status, holdExpiresAt, purchaseId",
    ExpressionAttributeNames: { "#status": "status" },
    ExpressionAttributeValues: { ":pk": partition, ":seat": "SEAT#" },
  })) {
    for (const item of page.Items ?? []) {
      if (item.status === "sold") {
        tally.sold++;
        if (typeof item.purchaseId === "string") purchases.add(item.purchaseId);
      } else if (item.status === "held") {
        if ((optNum(item, "holdExpiresAt") ?? 0) <= now) tally.expiredHolds++;
        else tally.held++;
      } else if (item.status === "available") tally.available++;
    }
  }
  return { tally, purchases };
}

/** Seats of a section stored as available (a held seat whose hold expired is not counted). */
export async function countAvailable(ctx: Ctx, eventId: string, sectionId: string): Promise<number> {
  if (!ID_PATTERN.test(eventId) || !ID_PATTERN.test(sectionId)) return 0;
  return guard(
    "countAvailable",
    async () => (await tallySection(ctx, eventId, sectionId, ctx.clock())).tally.available,
  );
}

/** Counts of one section, from one read of its partition (tallySection). */
export async function sectionCounts(
  ctx: Ctx,
  eventId: string,
  sectionId: string,
  total: number,
): Promise<SectionCounts> {
  return (await sectionTally(ctx, eventId, sectionId, total)).counts;
}

async function sectionTally(
  ctx: Ctx,
  eventId: string,
  sectionId: string,
  total: number,
): Promise<{ counts: SectionCounts; purchases: Set<string> }> {
  const { tally, purchases } = await guard("sectionCounts", () => tallySection(ctx, eventId, sectionId, ctx.clock()));
  return { counts: { sectionId, total, ...tally }, purchases };
}

/**
 * An area's counts, summed over its counters (keys.ts gaCounters): counter 0 says how many the
 * area has (`counters`; absent: one), the others are read in parallel. Every read consistent.
 */
export async function getGeneralAdmission(
  ctx: Ctx,
  eventId: string,
  areaId: string,
): Promise<GeneralAdmissionCounts | null> {
  if (!ID_PATTERN.test(eventId) || !ID_PATTERN.test(areaId)) return null;
  return guard("getGeneralAdmission", async () => {
    const items = await readCounterItems(ctx, eventId, areaId);
    if (!items) return null;
    const counts: GeneralAdmissionCounts = { areaId, capacity: 0, available: 0, held: 0, sold: 0 };
    for (const item of items) {
      if (!item) continue;
      counts.capacity += num(item, "capacity");
      counts.available += num(item, "available");
      counts.held += num(item, "held");
      counts.sold += num(item, "sold");
    }
    return counts;
  });
}

/** Per-section and per-event counts for operator stats; sections are counted in parallel. */
export async function eventCounts(ctx: Ctx, eventId: string): Promise<EventCounts | null> {
  if (!ID_PATTERN.test(eventId)) return null;
  const item = await guard("eventCounts", () => getEventItem(ctx, eventId));
  if (!item) return null;
  const event = toEvent(item);
  const [tallies, areas] = await Promise.all([
    Promise.all(event.sections.map((s) => sectionTally(ctx, eventId, s.id, s.rows * s.seatsPerRow))),
    Promise.all(event.generalAdmission.map((g) => getGeneralAdmission(ctx, eventId, g.id))),
  ]);
  const sections = tallies.map((t) => t.counts);
  const soldSeatPurchases = new Set(tallies.flatMap((t) => [...t.purchases])).size;
  const seats = { total: 0, available: 0, held: 0, expiredHolds: 0, sold: 0 };
  for (const s of sections) {
    seats.total += s.total;
    seats.available += s.available;
    seats.held += s.held;
    seats.expiredHolds += s.expiredHolds;
    seats.sold += s.sold;
  }
  const generalAdmission: Record<string, GeneralAdmissionCounts> = {};
  for (const a of areas) if (a) generalAdmission[a.areaId] = a;
  return { eventId, seats, sections, generalAdmission, soldSeatPurchases };
}

/** What the seat map, the stats and the audit read: seats and areas with their effective status. */
export interface SeatReads {
  /** null for an unknown event or section, or a malformed cursor. */
  listSection(args: EventRef & { sectionId: string } & SeatPageOptions): Promise<SeatPage | null>;
  countAvailable(args: EventRef & { sectionId: string }): Promise<number>;
  eventCounts(args: EventRef): Promise<EventCounts | null>;
  generalAdmission(args: EventRef & { areaId: string }): Promise<GeneralAdmissionCounts | null>;
}

export function createSeatReads(ctx: Ctx): SeatReads {
  return {
    listSection: ({ eventId, sectionId, ...options }) => listSectionSeats(ctx, eventId, sectionId, options),
    countAvailable: ({ eventId, sectionId }) => countAvailable(ctx, eventId, sectionId),
    eventCounts: ({ eventId }) => eventCounts(ctx, eventId),
    generalAdmission: ({ eventId, areaId }) => getGeneralAdmission(ctx, eventId, areaId),
  };
}
