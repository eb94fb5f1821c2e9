/**
 * The draw nobody can bias (issue 18 item 2), as anyone recomputes it from what is published.
 * The order is fixed only once the pre-queue closes, from three inputs:
 *
 *   seed  64 lowercase hex characters, committed (commitment = SHA-256hex(seed)) before the
 *         pre-queue opens, revealed at the draw;
 *   M     the membership hash of the closed pre-queue;
 *   B     an optional public beacon value the operator recorded before the close (e.g. a drand
 *         round's randomness), "" when none.
 *
 * Exactly:
 *
 *   entry(fanId) = SHA-256hex(UTF-8 fanId)          (what is published, not the fan id: a fan id
 *                                                     would let anyone take that fan's place)
 *   M            = SHA-256hex(e1 + "\n" + e2 + "\n" + ... + en + "\n"), the distinct entries in
 *                  ascending order (64 lowercase hex characters each, so byte order = string order)
 *   K            = SHA-256hex(seed + ":" + M + ":" + B)
 *   order        = the entries sorted ascending by SHA-256hex(K + ":" + entry), ties (never seen)
 *                  by the entry; the k-th has position k
 *
 * (SHA-256hex: lowercase hex of the SHA-256 of the UTF-8 string.) Whoever reads Redis before the
 * close learns nothing of the order (it needs the seed, which Redis readers do not get, and M,
 * which is not fixed until the close); the seed was committed before anyone joined, so the
 * operator cannot choose it after seeing the membership; and a beacon published after the close
 * makes even the holder of the seed unable to predict the order while fans can still join.
 */
import { createHash } from "node:crypto";

const sha256hex = (s: string) => createHash("sha256").update(s, "utf8").digest("hex");

const HEX64 = /^[0-9a-f]{64}$/;

/** What a fan id is published as (and ranked by): lowercase hex SHA-256 of its UTF-8 bytes. */
export function entryOf(fanId: string): string {
  return sha256hex(fanId);
}

/** M: SHA-256hex over the distinct entries, ascending, each followed by "\n". */
export function membershipHash(entries: Iterable<string>): string {
  const sorted = [...new Set(entries)].sort();
  const h = createHash("sha256");
  for (const e of sorted) h.update(`${e}\n`, "utf8");
  return h.digest("hex");
}

/** K = SHA-256hex(seed + ":" + M + ":" + B). */
export function drawKey(seed: string, membership: string, beacon = ""): string {
  return sha256hex(`${seed}:${membership}:${beacon}`);
}

/** The entries in draw order: index i holds position i + 1. */
export function drawOrder(key: string, entries: Iterable<string>): string[] {
  return [...new Set(entries)]
    .map((entry) => ({ entry, rank: sha256hex(`${key}:${entry}`) }))
    .sort((a, b) => (a.rank < b.rank ? -1 : a.rank > b.rank ? 1 : a.entry < b.entry ? -1 : a.entry > b.entry ? 1 : 0))
    .map((e) => e.entry);
}

/** What the gateway publishes about a draw (queue info `lottery`, and the membership pages). */
export interface PublishedDraw {
  commitment: string;
  seed: string;
  /** M as the gateway recorded it at the draw. */
  membershipHash: string;
  beacon?: string | undefined;
  /** The pre-queue's size as recorded at the draw. */
  size: number;
  /** The published membership: entries in the order the gateway says it drew (position 1 first). */
  entries: readonly string[];
}

export interface DrawCheck {
  pass: boolean;
  /** Each check, true when it holds. */
  checks: {
    commitment: boolean;
    entriesWellFormed: boolean;
    size: boolean;
    membershipHash: boolean;
    order: boolean;
  };
  /** The recomputed order's first positions (entries). */
  first: string[];
  /** The first position where the published order differs from the recomputed one (0: none). */
  firstMismatch: number;
}

/**
 * Recomputes the draw from what was published: the seed against its commitment, M from the
 * membership against the recorded M, and the order from the seed, M and the beacon against the
 * published order. Any fan added, removed or moved after the close fails at least one check.
 */
export function verifyDraw(p: PublishedDraw, firstCount = 10): DrawCheck {
  const commitment = sha256hex(p.seed) === p.commitment.toLowerCase();
  const entriesWellFormed = p.entries.every((e) => HEX64.test(e)) && new Set(p.entries).size === p.entries.length;
  const size = p.entries.length === p.size;
  const m = membershipHash(p.entries);
  const membership = m === p.membershipHash;
  // The order is recomputed from the recorded M: a membership changed after the draw cannot
  // bring its own matching order along.
  const order = drawOrder(drawKey(p.seed, p.membershipHash, p.beacon ?? ""), p.entries);
  let firstMismatch = 0;
  for (let i = 0; i < Math.max(order.length, p.entries.length); i++) {
    if (order[i] !== p.entries[i]) {
      firstMismatch = i + 1;
      break;
    }
  }
  const checks = { commitment, entriesWellFormed, size, membershipHash: membership, order: firstMismatch === 0 };
  return { pass: Object.values(checks).every(Boolean), checks, first: order.slice(0, firstCount), firstMismatch };
}
