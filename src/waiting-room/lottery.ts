/**
 * The pre-queue lottery, as anyone can recompute it. A 32-byte random seed is drawn when an
 * event's waiting room is configured; its commitment (SHA-256 of the seed string) is published
 * from then on, the seed itself only after the draw. The order is
 *
 *   pre-queued fans sorted by the lowercase hex SHA-1 of `${seed}:${fanId}` (UTF-8), ascending,
 *   ties (never seen in practice) broken by the fanId's UTF-8 bytes;
 *
 * which is exactly the byte order of the Redis ZSET member `sha1hex(seed:fanId) .. fanId` the Lua
 * side ranks by (lua/waiting-room/includes/prequeue.lua). Place k in that order is position k.
 */
import { createHash, randomBytes } from "node:crypto";

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

/** A fan's lottery key: the bytes Redis sorts the pre-queue by. */
export function lotteryKey(seed: string, fanId: string): Buffer {
  const digest = createHash("sha1").update(`${seed}:${fanId}`, "utf8").digest("hex");
  return Buffer.from(digest + fanId, "utf8");
}

/** The pre-queue fans in lottery order: index i holds position i + 1. */
export function lotteryOrder(seed: string, fanIds: Iterable<string>): string[] {
  return [...new Set(fanIds)]
    .map((fanId) => ({ fanId, key: lotteryKey(seed, fanId) }))
    .sort((a, b) => Buffer.compare(a.key, b.key))
    .map((e) => e.fanId);
}
