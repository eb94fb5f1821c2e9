/**
 * The lottery's commitment, kept in DynamoDB so that a Redis wipe cannot re-roll the draw unseen
 * (issue 18 item 2). One item per event, written once and never replaced:
 *
 *   PK `EVT#<eventId>#LOTTERY`, SK `LOTTERY`, entity `LOTTERY`: seed (64 hex), commitment
 *   (hex SHA-256 of the seed string), committedAt (ISO)
 *
 * The item is created with `attribute_not_exists(PK)`: the first configure of an event commits a
 * seed; every later configure, and every restore after Redis lost the room, gets that same seed
 * back (a conditional put that fails reads the stored item, strongly consistent). Its own
 * partition, not an attribute of the event item: a replacement of the event (PUT) writes a new
 * event item, and the commitment must survive it.
 *
 * The same item takes the beacon (`beaconSource`, `beacon`: each set once, never after the draw)
 * and, at the draw, the sealed record (`membershipHash`, `size`, `drawBeacon`, `drawKey`,
 * `drawnAt`, `beaconMissed`, `pages`), written only if no draw is sealed and the beacon is still
 * the one the order was computed with. The order itself goes first, in pages of the same partition
 * (`DRAW#<K[0:16]>#<page>`), so a sealed draw can be published and checked after Redis lost it
 * (docs/waiting-room.md, "The lottery, and how to check it").
 */
import { GetCommand, PutCommand, UpdateCommand, type DynamoDBDocumentClient } from "@aws-sdk/lib-dynamodb";
import { mapLimit } from "../concurrency.js";
import { guard } from "../inventory/store.js";

export interface LotteryCommitment {
  seed: string;
  commitment: string;
  committedAt: string;
  /**
   * Where the beacon value comes from (say "drand quicknet round 12345678"), recorded by the
   * operator before the pre-queue closed; the value itself may come later, until the draw.
   */
  beaconSource?: string;
  /** The beacon value the draw takes, once recorded. */
  beacon?: string;
  /** The draw's record, once sealed: immutable from then on. */
  draw?: DrawRecord;
}

/** What the draw was computed from and gave, sealed in DynamoDB with the order's entries. */
export interface DrawRecord {
  membershipHash: string;
  size: number;
  /** The beacon the draw key took ("" for none). */
  beacon: string;
  drawKey: string;
  drawnAt: string;
  /** A beacon source was recorded but no value came in time: the draw took "" (public). */
  beaconMissed: boolean;
}

export type BeaconOutcome =
  | { ok: true; beaconSource?: string; beacon?: string }
  | { ok: false; reason: "not_committed" | "drawn" }
  /** Another source or value is recorded already (each is recorded once). */
  | { ok: false; reason: "conflict"; beaconSource?: string; beacon?: string };

export type SealOutcome =
  | { ok: true; record: DrawRecord }
  /** The beacon recorded is not the one the draw was computed with: compute again. */
  | { ok: false; reason: "beacon_changed" }
  /** Another draw is sealed (a room recreated after a wipe, with another membership). */
  | { ok: false; reason: "other_draw"; record: DrawRecord };

export interface LotteryStore {
  /**
   * How long after the close the draw waits for the value of a recorded beacon source; then it
   * draws with none, and says so (`beaconMissed`).
   */
  readonly beaconWaitMs: number;
  /**
   * Commits `candidate` for the event if nothing is committed yet, and returns what is committed
   * (the candidate, or the seed an earlier call stored). Throws when DynamoDB cannot answer.
   */
  commit(eventId: string, candidate: { seed: string; commitment: string }): Promise<LotteryCommitment>;
  /** What is committed for the event, or null. */
  read(eventId: string): Promise<LotteryCommitment | null>;
  /**
   * Records the beacon's source and/or value, each once (the same again is a no-op), never after
   * the draw is sealed. Whether the pre-queue has closed is the caller's check (a source is taken
   * only before the close).
   */
  recordBeacon(eventId: string, beacon: { source?: string; value?: string }): Promise<BeaconOutcome>;
  /**
   * Writes the order's entries (draw order) in pages, then seals the record, only if no draw is
   * sealed yet and the recorded beacon is still `record.beacon` (or none, for "").
   */
  seal(eventId: string, record: Omit<DrawRecord, "drawnAt">, order: readonly string[]): Promise<SealOutcome>;
  /** `limit` entries of the order of the draw with key `drawKey` from `offset` (0-based); [] past the end. */
  entries(eventId: string, drawKey: string, offset: number, limit: number): Promise<string[]>;
}

export const lotteryKey = (eventId: string) => ({ PK: `EVT#${eventId}#LOTTERY`, SK: "LOTTERY" });
/**
 * The order of the draw with key K, ENTRIES_PER_PAGE entries (64 hex each, concatenated) per item.
 * The key is in the sort key, so the pages of two draws (a room recreated after a wipe, drawing
 * another membership) never overwrite each other: the sealed record names the ones to read.
 */
const pageKey = (eventId: string, drawKey: string, page: number) => ({
  PK: `EVT#${eventId}#LOTTERY`,
  SK: `DRAW#${drawKey.slice(0, 16)}#${String(page).padStart(6, "0")}`,
});
/** 4,000 entries of 64 characters: 256 KB, under DynamoDB's 400 KB item limit. */
export const ENTRIES_PER_PAGE = 4_000;
const PAGE_WRITES_IN_FLIGHT = 4;
/** How long after the close a draw waits for a recorded beacon source's value: 10 minutes. */
export const BEACON_WAIT_MS = 600_000;
/** Pages kept in memory (a page of a draw key never changes): 64 pages are 16 MB. */
const PAGES_CACHED = 64;

const HEX64 = /^[0-9a-f]{64}$/;

const conditionFailed = (err: unknown) =>
  ((err as { cause?: { name?: string }; name?: string }).cause?.name ?? (err as Error).name) ===
  "ConditionalCheckFailedException";

function recordOf(item: Record<string, unknown>): DrawRecord | undefined {
  if (typeof item.drawnAt !== "string" || typeof item.membershipHash !== "string") return undefined;
  return {
    membershipHash: item.membershipHash,
    size: Number(item.size ?? 0),
    beacon: typeof item.drawBeacon === "string" ? item.drawBeacon : "",
    drawKey: String(item.drawKey ?? ""),
    drawnAt: item.drawnAt,
    beaconMissed: item.beaconMissed === true,
  };
}

export function createLotteryStore(deps: {
  doc: DynamoDBDocumentClient;
  tableName: string;
  clock?: () => number;
  /** Default BEACON_WAIT_MS. */
  beaconWaitMs?: number;
}): LotteryStore {
  const { doc, tableName } = deps;
  const clock = deps.clock ?? Date.now;

  async function read(eventId: string): Promise<LotteryCommitment | null> {
    const out = await guard("readLotteryCommitment", () =>
      doc.send(new GetCommand({ TableName: tableName, Key: lotteryKey(eventId), ConsistentRead: true })),
    );
    const item = out.Item;
    if (!item) return null;
    const { seed, commitment, committedAt, beaconSource, beacon } = item as Record<string, unknown>;
    if (typeof seed !== "string" || !HEX64.test(seed) || typeof commitment !== "string") {
      throw new Error(`the lottery commitment of ${eventId} is malformed`);
    }
    const draw = recordOf(item);
    return {
      seed,
      commitment,
      committedAt: String(committedAt ?? ""),
      ...(typeof beaconSource === "string" ? { beaconSource } : {}),
      ...(typeof beacon === "string" ? { beacon } : {}),
      ...(draw ? { draw } : {}),
    };
  }

  const pages = new Map<string, Promise<string>>();
  const page = (eventId: string, drawKey: string, n: number): Promise<string> => {
    const key = `${eventId}\n${drawKey}\n${n}`;
    const hit = pages.get(key);
    if (hit) return hit;
    if (pages.size >= PAGES_CACHED) pages.delete(pages.keys().next().value as string);
    const load = guard("readLotteryPage", () =>
      doc.send(new GetCommand({ TableName: tableName, Key: pageKey(eventId, drawKey, n), ConsistentRead: true })),
    ).then((out) => String(out.Item?.entries ?? ""));
    pages.set(key, load);
    load.catch(() => pages.delete(key));
    return load;
  };

  const store: LotteryStore = {
    beaconWaitMs: deps.beaconWaitMs ?? BEACON_WAIT_MS,
    read,
    async recordBeacon(eventId, beacon) {
      const names: Record<string, string> = {};
      const values: Record<string, unknown> = {};
      const sets: string[] = [];
      const conditions = ["attribute_exists(PK)", "attribute_not_exists(drawnAt)"];
      if (beacon.source !== undefined) {
        names["#src"] = "beaconSource";
        values[":src"] = beacon.source;
        sets.push("#src = :src");
        conditions.push("(attribute_not_exists(#src) OR #src = :src)");
      }
      if (beacon.value !== undefined) {
        names["#val"] = "beacon";
        values[":val"] = beacon.value;
        sets.push("#val = :val");
        conditions.push("(attribute_not_exists(#val) OR #val = :val)");
      }
      if (sets.length === 0) throw new Error("recordBeacon: neither a source nor a value");
      try {
        const out = await guard("recordBeacon", () =>
          doc.send(
            new UpdateCommand({
              TableName: tableName,
              Key: lotteryKey(eventId),
              UpdateExpression: `SET ${sets.join(", ")}`,
              ConditionExpression: conditions.join(" AND "),
              ExpressionAttributeNames: names,
              ExpressionAttributeValues: values,
              ReturnValues: "ALL_NEW",
            }),
          ),
        );
        const item = (out.Attributes ?? {}) as Record<string, unknown>;
        return {
          ok: true,
          ...(typeof item.beaconSource === "string" ? { beaconSource: item.beaconSource } : {}),
          ...(typeof item.beacon === "string" ? { beacon: item.beacon } : {}),
        };
      } catch (err) {
        if (!conditionFailed(err)) throw err;
      }
      const stored = await read(eventId);
      if (!stored) return { ok: false, reason: "not_committed" };
      if (stored.draw) return { ok: false, reason: "drawn" };
      return {
        ok: false,
        reason: "conflict",
        ...(stored.beaconSource === undefined ? {} : { beaconSource: stored.beaconSource }),
        ...(stored.beacon === undefined ? {} : { beacon: stored.beacon }),
      };
    },
    async seal(eventId, record, order) {
      const existing = await read(eventId);
      if (existing?.draw) {
        return existing.draw.membershipHash === record.membershipHash && existing.draw.drawKey === record.drawKey
          ? { ok: true, record: existing.draw }
          : { ok: false, reason: "other_draw", record: existing.draw };
      }
      // The pages first: a seal is only ever read with all of its pages in place. A rerun after a
      // crash writes the same pages again.
      const count = Math.ceil(order.length / ENTRIES_PER_PAGE);
      await mapLimit(
        Array.from({ length: count }, (_, i) => i),
        PAGE_WRITES_IN_FLIGHT,
        (n) =>
          guard("writeLotteryPage", () =>
            doc.send(
              new PutCommand({
                TableName: tableName,
                Item: {
                  ...pageKey(eventId, record.drawKey, n),
                  entity: "LOTTERY_PAGE",
                  eventId,
                  entries: order.slice(n * ENTRIES_PER_PAGE, (n + 1) * ENTRIES_PER_PAGE).join(""),
                },
              }),
            ),
          ),
      );
      const drawnAt = new Date(clock()).toISOString();
      try {
        await guard("sealLottery", () =>
          doc.send(
            new UpdateCommand({
              TableName: tableName,
              Key: lotteryKey(eventId),
              UpdateExpression:
                "SET membershipHash = :m, #size = :n, drawBeacon = :b, drawKey = :k, drawnAt = :at, beaconMissed = :missed, pages = :pages",
              ConditionExpression:
                record.beacon === ""
                  ? "attribute_exists(PK) AND attribute_not_exists(drawnAt) AND (attribute_not_exists(beacon) OR beacon = :empty)"
                  : "attribute_exists(PK) AND attribute_not_exists(drawnAt) AND beacon = :b",
              ExpressionAttributeNames: { "#size": "size" },
              ExpressionAttributeValues: {
                ":m": record.membershipHash,
                ":n": record.size,
                ":b": record.beacon,
                ":k": record.drawKey,
                ":at": drawnAt,
                ":missed": record.beaconMissed,
                ":pages": count,
                ...(record.beacon === "" ? { ":empty": "" } : {}),
              },
            }),
          ),
        );
      } catch (err) {
        if (!conditionFailed(err)) throw err;
        const now = await read(eventId);
        if (now?.draw) return store.seal(eventId, record, order);
        return { ok: false, reason: "beacon_changed" };
      }
      return { ok: true, record: { ...record, drawnAt } };
    },
    async entries(eventId, drawKey, offset, limit) {
      const out: string[] = [];
      let at = offset;
      while (out.length < limit) {
        const n = Math.floor(at / ENTRIES_PER_PAGE);
        const text = await page(eventId, drawKey, n);
        const from = (at - n * ENTRIES_PER_PAGE) * 64;
        if (from >= text.length) break;
        const take = Math.min(limit - out.length, (text.length - from) / 64);
        for (let i = 0; i < take; i++) out.push(text.slice(from + i * 64, from + (i + 1) * 64));
        at += take;
      }
      return out;
    },
    async commit(eventId, candidate) {
      const committedAt = new Date(clock()).toISOString();
      try {
        await guard("commitLottery", () =>
          doc.send(
            new PutCommand({
              TableName: tableName,
              Item: { ...lotteryKey(eventId), entity: "LOTTERY", eventId, ...candidate, committedAt },
              ConditionExpression: "attribute_not_exists(PK)",
            }),
          ),
        );
        return { ...candidate, committedAt };
      } catch (err) {
        const name = (err as { cause?: { name?: string }; name?: string }).cause?.name ?? (err as Error).name;
        if (name !== "ConditionalCheckFailedException") throw err;
      }
      const stored = await read(eventId);
      if (!stored) throw new Error(`the lottery commitment of ${eventId} vanished`);
      return stored;
    },
  };
  return store;
}
