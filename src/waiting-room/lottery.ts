/**
 * The pre-queue lottery, as anyone can recompute it. A 32-byte random seed is drawn when an
 * event's waiting room is first configured and committed (SHA-256 of the seed string) in DynamoDB
 * (src/lottery/store.ts); the commitment is published from then on, the seed only after the draw.
 * The order is fixed only once the pre-queue closes, from the seed, the hash of the closed
 * pre-queue's membership and an optional beacon: the recipe is src/lottery/draw.ts, and
 * `lotteryOrder` below is that recipe applied to fan ids. Place k in that order is position k.
 */
import { createHash, randomBytes } from "node:crypto";
import { drawKey, drawOrder, entryOf, membershipHash } from "../lottery/draw.js";

/** A fresh seed: 64 lowercase hex characters. */
export function generateSeed(): string {
  return randomBytes(32).toString("hex");
}

/** The published commitment: lowercase hex SHA-256 of the seed string. */
export function commitmentOf(seed: string): string {
  return createHash("sha256").update(seed, "utf8").digest("hex");
}

export function seedMatchesCommitment(seed: string, commitment: string): boolean {
  return commitmentOf(seed) === commitment.toLowerCase();
}

/** The pre-queue fans in draw order (index i holds position i + 1), for a beacon ("" for none). */
export function lotteryOrder(seed: string, fanIds: Iterable<string>, beacon = ""): string[] {
  const fanOf = new Map<string, string>();
  for (const fanId of fanIds) fanOf.set(entryOf(fanId), fanId);
  const key = drawKey(seed, membershipHash(fanOf.keys()), beacon);
  return drawOrder(key, fanOf.keys()).map((entry) => fanOf.get(entry)!);
}
