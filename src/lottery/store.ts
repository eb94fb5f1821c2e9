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
 */
import { GetCommand, PutCommand, type DynamoDBDocumentClient } from "@aws-sdk/lib-dynamodb";
import { guard } from "../inventory/store.js";

export interface LotteryCommitment {
  seed: string;
  commitment: string;
  committedAt: string;
}

export interface LotteryStore {
  /**
   * Commits `candidate` for the event if nothing is committed yet, and returns what is committed
   * (the candidate, or the seed an earlier call stored). Throws when DynamoDB cannot answer.
   */
  commit(eventId: string, candidate: { seed: string; commitment: string }): Promise<LotteryCommitment>;
  /** What is committed for the event, or null. */
  read(eventId: string): Promise<LotteryCommitment | null>;
}

export const lotteryKey = (eventId: string) => ({ PK: `EVT#${eventId}#LOTTERY`, SK: "LOTTERY" });

const HEX64 = /^[0-9a-f]{64}$/;

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
    const { seed, commitment, committedAt } = item as Record<string, unknown>;
    if (typeof seed !== "string" || !HEX64.test(seed) || typeof commitment !== "string") {
      throw new Error(`the lottery commitment of ${eventId} is malformed`);
    }
    return { seed, commitment, committedAt: String(committedAt ?? "") };
  }

  return {
    read,
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
}
