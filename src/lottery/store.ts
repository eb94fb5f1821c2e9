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
 * The same item names the event's drand chain (`drandChain`, with the seed, before the close;
 * never changed once set), takes the beacon (the chain's round verified by the caller:
 * `beaconRound`, `beaconSignature`, `beaconPreviousSignature`, and `beacon` = its randomness; set
 * once, never after the draw) and, at the draw, the sealed record (`membershipHash`, `size`,
 * `drawBeacon`, `drawKey`, `drawnAt`, `closedAt`, `drawRound`, `pages`), written only if no draw
 * is sealed and the beacon is still the one the order was computed with. The order itself goes first, in pages of the same partition
 * (`DRAW#<K[0:16]>#<page>`), so a sealed draw can be published and checked after Redis lost it
 * (docs/waiting-room.md, "The lottery, and how to check it").
 */
import { GetCommand, PutCommand, UpdateCommand, type DynamoDBDocumentClient } from "@aws-sdk/lib-dynamodb";
import { mapLimit } from "../concurrency.js";
import { guard } from "../inventory/store.js";
import { type DrandBeacon, type DrandChain, drandChainSchema } from "./drand.js";

export interface LotteryCommitment {
  seed: string;
  commitment: string;
  committedAt: string;
  /** The drand chain whose round is the draw's beacon, named before the close (src/lottery/drand.ts). */
  drandChain?: DrandChain;
  /**
   * The beacon value the draw takes, once recorded: the drand round's randomness (an event
   * without a chain has none; an item from before issue 29 may hold an operator's value).
   */
  beacon?: string;
  /** The drand round `beacon` is the randomness of, as verified when it was recorded. */
  beaconRound?: DrandBeacon;
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
  /** When the pre-queue closed (ISO): the drand round is the first published at or after it. */
  closedAt?: string;
  /** The drand round whose randomness `beacon` is (events with a chain). */
  round?: number;
}

export type BeaconOutcome =
  | { ok: true; beacon: string; beaconRound: DrandBeacon }
  | { ok: false; reason: "not_committed" | "drawn" }
  /** Another round is recorded already (recorded once). */
  | { ok: false; reason: "conflict"; beacon?: string; beaconRound?: DrandBeacon };

export type SealOutcome =
  | { ok: true; record: DrawRecord }
  /** The beacon recorded is not the one the draw was computed with: compute again. */
  | { ok: false; reason: "beacon_changed" }
  /** Another draw is sealed (a room recreated after a wipe, with another membership). */
  | { ok: false; reason: "other_draw"; record: DrawRecord };

export interface LotteryStore {
  /**
   * Commits `candidate` for the event if nothing is committed yet, and returns what is committed
   * (the candidate, or the seed an earlier call stored). A `drandChain` is added to a commitment
   * that has none and no draw yet; one never replaces another (the caller compares). Throws when
   * DynamoDB cannot answer.
   */
  commit(
    eventId: string,
    candidate: { seed: string; commitment: string; drandChain?: DrandChain | undefined },
  ): Promise<LotteryCommitment>;
  /** What is committed for the event, or null. */
  read(eventId: string): Promise<LotteryCommitment | null>;
  /**
   * Records the beacon: a drand round the caller verified and its randomness, once (the same again
   * is a no-op), never after the draw is sealed.
   */
  recordBeacon(eventId: string, beacon: { value: string; round: DrandBeacon }): Promise<BeaconOutcome>;
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
    ...(typeof item.closedAt === "string" ? { closedAt: item.closedAt } : {}),
    ...(typeof item.drawRound === "number" ? { round: item.drawRound } : {}),
  };
}

function beaconRoundOf(item: Record<string, unknown>): DrandBeacon | undefined {
  if (typeof item.beaconRound !== "number" || typeof item.beaconSignature !== "string") return undefined;
  return {
    round: item.beaconRound,
    signature: item.beaconSignature,
    ...(typeof item.beaconPreviousSignature === "string" ? { previousSignature: item.beaconPreviousSignature } : {}),
  };
}

export function createLotteryStore(deps: {
  doc: DynamoDBDocumentClient;
  tableName: string;
  clock?: () => number;
}): LotteryStore {
  const { doc, tableName } = deps;
  const clock = deps.clock ?? Date.now;

  async function read(eventId: string): Promise<LotteryCommitment | null> {
    const out = await guard("readLotteryCommitment", () =>
      doc.send(new GetCommand({ TableName: tableName, Key: lotteryKey(eventId), ConsistentRead: true })),
    );
    const item = out.Item;
    if (!item) return null;
    const { seed, commitment, committedAt, beacon, drandChain } = item as Record<string, unknown>;
    if (typeof seed !== "string" || !HEX64.test(seed) || typeof commitment !== "string") {
      throw new Error(`the lottery commitment of ${eventId} is malformed`);
    }
    const chain = drandChain === undefined ? undefined : drandChainSchema.safeParse(drandChain);
    if (chain && !chain.success) throw new Error(`the drand chain of ${eventId}'s lottery is malformed`);
    const draw = recordOf(item);
    const round = beaconRoundOf(item);
    return {
      seed,
      commitment,
      committedAt: String(committedAt ?? ""),
      ...(chain ? { drandChain: chain.data } : {}),
      ...(typeof beacon === "string" ? { beacon } : {}),
      ...(round ? { beaconRound: round } : {}),
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
    read,
    async recordBeacon(eventId, beacon) {
      const { round } = beacon;
      try {
        const out = await guard("recordBeacon", () =>
          doc.send(
            new UpdateCommand({
              TableName: tableName,
              Key: lotteryKey(eventId),
              UpdateExpression:
                "SET beacon = :val, beaconRound = :round, beaconSignature = :sig" +
                (round.previousSignature === undefined ? "" : ", beaconPreviousSignature = :prev"),
              // A chain named: only a commitment with a chain takes a round (the caller verified it
              // against that chain).
              ConditionExpression:
                "attribute_exists(PK) AND attribute_exists(drandChain) AND attribute_not_exists(drawnAt) AND (attribute_not_exists(beacon) OR beacon = :val)",
              ExpressionAttributeValues: {
                ":val": beacon.value,
                ":round": round.round,
                ":sig": round.signature,
                ...(round.previousSignature === undefined ? {} : { ":prev": round.previousSignature }),
              },
              ReturnValues: "ALL_NEW",
            }),
          ),
        );
        const item = (out.Attributes ?? {}) as Record<string, unknown>;
        return { ok: true, beacon: String(item.beacon), beaconRound: beaconRoundOf(item) ?? round };
      } catch (err) {
        if (!conditionFailed(err)) throw err;
      }
      const stored = await read(eventId);
      if (!stored?.drandChain) return { ok: false, reason: "not_committed" };
      if (stored.draw) return { ok: false, reason: "drawn" };
      return {
        ok: false,
        reason: "conflict",
        ...(stored.beacon === undefined ? {} : { beacon: stored.beacon }),
        ...(stored.beaconRound === undefined ? {} : { beaconRound: stored.beaconRound }),
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
                "SET membershipHash = :m, #size = :n, drawBeacon = :b, drawKey = :k, drawnAt = :at, pages = :pages" +
                (record.closedAt === undefined ? "" : ", closedAt = :closed") +
                (record.round === undefined ? "" : ", drawRound = :round"),
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
                ":pages": count,
                ...(record.closedAt === undefined ? {} : { ":closed": record.closedAt }),
                ...(record.round === undefined ? {} : { ":round": record.round }),
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
      const { drandChain, ...seed } = candidate;
      try {
        await guard("commitLottery", () =>
          doc.send(
            new PutCommand({
              TableName: tableName,
              Item: {
                ...lotteryKey(eventId),
                entity: "LOTTERY",
                eventId,
                ...seed,
                committedAt,
                ...(drandChain ? { drandChain } : {}),
              },
              ConditionExpression: "attribute_not_exists(PK)",
            }),
          ),
        );
        return { ...seed, committedAt, ...(drandChain ? { drandChain } : {}) };
      } catch (err) {
        if (!conditionFailed(err)) throw err;
      }
      const stored = await read(eventId);
      if (!stored) throw new Error(`the lottery commitment of ${eventId} vanished`);
      if (!drandChain || stored.drandChain || stored.draw || stored.beacon !== undefined) return stored;
      // An event first stored without a chain names one now (before its close: the caller's
      // check). Set once: of racing names the first stays.
      try {
        await guard("nameDrandChain", () =>
          doc.send(
            new UpdateCommand({
              TableName: tableName,
              Key: lotteryKey(eventId),
              UpdateExpression: "SET drandChain = :chain",
              ConditionExpression:
                "attribute_exists(PK) AND attribute_not_exists(drandChain) AND attribute_not_exists(drawnAt) AND attribute_not_exists(beacon)",
              ExpressionAttributeValues: { ":chain": drandChain },
            }),
          ),
        );
      } catch (err) {
        if (!conditionFailed(err)) throw err;
      }
      return (await read(eventId)) ?? stored;
    },
  };
  return store;
}
