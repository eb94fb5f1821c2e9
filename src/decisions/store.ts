/**
 * What the waiting room decides about a person that must outlive Redis (issue 29 item 3), kept in
 * DynamoDB where a room Redis lost comes back from:
 *
 *   invite claim  PK `EVT#<e>#INVITE#<sha256hex(identity)>`, SK `INVITE`, entity `INVITE_CLAIM`:
 *                 identity, fanId (the fan id holding the identity's place), claimedAt. Written
 *                 once, with `attribute_not_exists(PK) OR fanId = :fan`: the first fan id keeps
 *                 the identity for good, whatever Redis forgets. One partition per identity: no
 *                 hot key however many invites an on-sale takes.
 *   revocation    PK `EVT#<e>#REVOKED`, SK `FAN#<fanKeyHash(fanId)>`, entity `REVOCATION`: fanId,
 *                 revokedAt.
 *                 One partition per event (revocations are an operator's rare act); a restore
 *                 reads it whole (a Query, paged) and the new room refuses those fans a place.
 *
 * Failed conditions are values (the holder), never exceptions; a DynamoDB failure is thrown as the
 * inventory's unavailable error (`guard`), which the waiting room answers as `unavailable`.
 */
import { createHash } from "node:crypto";
import { DeleteCommand, PutCommand, QueryCommand, type DynamoDBDocumentClient } from "@aws-sdk/lib-dynamodb";
import { fanKeyHash } from "../inventory/keys.js";
import { conditionFailure, guard } from "../inventory/store.js";

export interface DecisionStore {
  /**
   * Claims the invite identity for `fanId` unless another fan id holds it: answers the holder
   * (`fanId` when the claim is this fan's).
   */
  claimIdentity(eventId: string, identity: string, fanId: string): Promise<IdentityClaim>;
  /**
   * Takes back a claim this fan id made a moment ago (its place was not the invite's to give):
   * deleted only while `fanId` still holds it.
   */
  releaseIdentity(eventId: string, identity: string, fanId: string): Promise<void>;
  /** Records that the operator revoked the fan (idempotent). */
  recordRevocation(eventId: string, fanId: string): Promise<void>;
  /** Every fan the operator revoked in this event (what a restored room refuses). */
  revokedFans(eventId: string): Promise<string[]>;
}

/** The identity's holder, and whether this call made the claim (none was stored before). */
export interface IdentityClaim {
  holder: string;
  fresh: boolean;
}

export const inviteClaimKey = (eventId: string, identity: string) => ({
  PK: `EVT#${eventId}#INVITE#${createHash("sha256").update(identity).digest("hex")}`,
  SK: "INVITE",
});
/** The fan id is in the item, not the key: keys never carry a fan id in clear (docs/data-model.md). */
export const revocationKey = (eventId: string, fanId: string) => ({
  PK: `EVT#${eventId}#REVOKED`,
  SK: `FAN#${fanKeyHash(fanId)}`,
});

export function createDecisionStore(deps: {
  doc: DynamoDBDocumentClient;
  tableName: string;
  clock?: () => number;
}): DecisionStore {
  const { doc, tableName } = deps;
  const clock = deps.clock ?? Date.now;
  return {
    claimIdentity: (eventId, identity, fanId) =>
      guard("claimInviteIdentity", async () => {
        try {
          const out = await doc.send(
            new PutCommand({
              TableName: tableName,
              Item: {
                ...inviteClaimKey(eventId, identity),
                entity: "INVITE_CLAIM",
                eventId,
                identity,
                fanId,
                claimedAt: new Date(clock()).toISOString(),
              },
              // The same fan again rewrites its own claim (a retry); another fan id is refused.
              ConditionExpression: "attribute_not_exists(PK) OR fanId = :fan",
              ExpressionAttributeValues: { ":fan": fanId },
              ReturnValues: "ALL_OLD",
              ReturnValuesOnConditionCheckFailure: "ALL_OLD",
            }),
          );
          return { holder: fanId, fresh: out.Attributes === undefined };
        } catch (err) {
          const failed = conditionFailure(err);
          if (!failed) throw err;
          const holder = failed.item?.fanId;
          if (typeof holder !== "string") throw new Error(`the invite claim of ${eventId} has no holder`);
          return { holder, fresh: false };
        }
      }),

    releaseIdentity: (eventId, identity, fanId) =>
      guard("releaseInviteIdentity", async () => {
        try {
          await doc.send(
            new DeleteCommand({
              TableName: tableName,
              Key: inviteClaimKey(eventId, identity),
              ConditionExpression: "fanId = :fan",
              ExpressionAttributeValues: { ":fan": fanId },
            }),
          );
        } catch (err) {
          if (!conditionFailure(err)) throw err;
        }
      }),

    recordRevocation: (eventId, fanId) =>
      guard("recordRevocation", async () => {
        await doc.send(
          new PutCommand({
            TableName: tableName,
            Item: {
              ...revocationKey(eventId, fanId),
              entity: "REVOCATION",
              eventId,
              fanId,
              revokedAt: new Date(clock()).toISOString(),
            },
          }),
        );
      }),

    revokedFans: (eventId) =>
      guard("revokedFans", async () => {
        const fans: string[] = [];
        let start: Record<string, unknown> | undefined;
        do {
          const out = await doc.send(
            new QueryCommand({
              TableName: tableName,
              KeyConditionExpression: "PK = :pk",
              ExpressionAttributeValues: { ":pk": `EVT#${eventId}#REVOKED` },
              ProjectionExpression: "fanId",
              ConsistentRead: true,
              ...(start ? { ExclusiveStartKey: start } : {}),
            }),
          );
          for (const item of out.Items ?? []) if (typeof item.fanId === "string") fans.push(item.fanId);
          start = out.LastEvaluatedKey;
        } while (start);
        return fans;
      }),
  };
}
