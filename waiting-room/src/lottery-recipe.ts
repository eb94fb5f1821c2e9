/**
 * The draw's recipe (docs/waiting-room.md, src/lottery/draw.ts) on WebCrypto, as a browser
 * recomputes it. A second implementation on purpose: the page checks the gateway with code that
 * shares nothing with it but the published recipe (test/pages/lottery-model.test.ts holds the
 * two to the same answers).
 *
 *   entry(fanId) = SHA-256hex(UTF-8 fanId)
 *   M            = SHA-256hex(e1 + "\n" + ... + en + "\n"), the distinct entries ascending
 *   K            = SHA-256hex(seed + ":" + M + ":" + beacon)
 *   order        = entries ascending by SHA-256hex(K + ":" + entry), ties by the entry
 *
 * WebCrypto digests are promises, so a membership of many thousands is ranked in batches (one
 * batch of digests in flight at once, as pow-worker.ts does) with a pause between batches that
 * lets the page draw and answer clicks. No DOM here: it runs under Node too.
 */

const HEX = Array.from({ length: 256 }, (_, b) => b.toString(16).padStart(2, "0"));
const HEX64 = /^[0-9a-f]{64}$/;
const encoder = new TextEncoder();

/** True where the browser offers SHA-256 (WebCrypto needs a secure context: https or localhost). */
export function canDigest(): boolean {
  return typeof globalThis.crypto?.subtle?.digest === "function";
}

function hexOf(buffer: ArrayBuffer): string {
  let out = "";
  for (const b of new Uint8Array(buffer)) out += HEX[b];
  return out;
}

/** Lowercase hex SHA-256 of the UTF-8 string. */
export async function sha256hex(s: string): Promise<string> {
  return hexOf(await crypto.subtle.digest("SHA-256", encoder.encode(s)));
}

/** What a fan id is published (and ranked) as. */
export function entryOf(fanId: string): Promise<string> {
  return sha256hex(fanId);
}

export function isEntry(s: string): boolean {
  return HEX64.test(s);
}

/** M over the distinct entries, ascending, each followed by "\n". */
export function membershipHash(entries: Iterable<string>): Promise<string> {
  const sorted = [...new Set(entries)].sort();
  return sha256hex(sorted.map((e) => `${e}\n`).join(""));
}

/** K = SHA-256hex(seed + ":" + M + ":" + beacon). */
export function drawKey(seed: string, membership: string, beacon = ""): Promise<string> {
  return sha256hex(`${seed}:${membership}:${beacon}`);
}

/** How a long computation shares the page: `batch` digests at once, then `pause()`. */
export interface Pace {
  batch: number;
  pause: () => Promise<void>;
  /** After each batch: how many of `total` are done. */
  progress?: (done: number, total: number) => void;
}

/** A pause that lets the page draw and handle input before the next batch. */
export const yieldToPage = (): Promise<void> => new Promise((resolve) => setTimeout(resolve, 0));

export const DEFAULT_PACE: Pace = { batch: 512, pause: yieldToPage };

/** The distinct entries in draw order: index i holds position i + 1. */
export async function drawOrder(key: string, entries: Iterable<string>, pace: Pace = DEFAULT_PACE): Promise<string[]> {
  const distinct = [...new Set(entries)];
  const ranked: { entry: string; rank: string }[] = [];
  const batch = Math.max(1, Math.floor(pace.batch));
  for (let i = 0; i < distinct.length; i += batch) {
    const slice = distinct.slice(i, i + batch);
    const ranks = await Promise.all(slice.map((entry) => sha256hex(`${key}:${entry}`)));
    for (let j = 0; j < slice.length; j++) ranked.push({ entry: slice[j] as string, rank: ranks[j] as string });
    pace.progress?.(ranked.length, distinct.length);
    if (i + batch < distinct.length) await pace.pause();
  }
  ranked.sort((a, b) =>
    a.rank < b.rank ? -1 : a.rank > b.rank ? 1 : a.entry < b.entry ? -1 : a.entry > b.entry ? 1 : 0,
  );
  return ranked.map((r) => r.entry);
}

/** What the gateway published about a drawn pre-queue. */
export interface PublishedDraw {
  commitment: string;
  seed: string;
  /** M as the gateway recorded it at the draw. */
  membershipHash: string;
  beacon?: string | undefined;
  /** The pre-queue's size as recorded at the draw. */
  size: number;
  /** The membership in the order the gateway says it drew (position 1 first). */
  entries: readonly string[];
}

export type CheckName = "commitment" | "entriesWellFormed" | "size" | "membershipHash" | "order";
export const CHECK_NAMES: readonly CheckName[] = ["commitment", "entriesWellFormed", "size", "membershipHash", "order"];

export interface DrawCheck {
  pass: boolean;
  checks: Record<CheckName, boolean>;
  /** The recomputed order (entries; index i has position i + 1). */
  order: string[];
  /** The first position where the published order departs from the recomputed one (0: none). */
  firstMismatch: number;
}

/**
 * Each check of the draw, as src/lottery/draw.ts verifyDraw makes them: the seed against its
 * commitment, the entries' form, the size, M recomputed against the recorded M, and the order
 * recomputed (from the recorded M, so a membership changed after the draw cannot bring a matching
 * order along) against the published one, place by place.
 */
export async function checkDraw(p: PublishedDraw, pace: Pace = DEFAULT_PACE): Promise<DrawCheck> {
  const commitment = (await sha256hex(p.seed)) === p.commitment.toLowerCase();
  const entriesWellFormed = p.entries.every(isEntry) && new Set(p.entries).size === p.entries.length;
  const size = p.entries.length === p.size;
  const membership = (await membershipHash(p.entries)) === p.membershipHash;
  const order = await drawOrder(await drawKey(p.seed, p.membershipHash, p.beacon ?? ""), p.entries, pace);
  let firstMismatch = 0;
  for (let i = 0; i < Math.max(order.length, p.entries.length); i++) {
    if (order[i] !== p.entries[i]) {
      firstMismatch = i + 1;
      break;
    }
  }
  const checks = { commitment, entriesWellFormed, size, membershipHash: membership, order: firstMismatch === 0 };
  return { pass: CHECK_NAMES.every((name) => checks[name]), checks, order, firstMismatch };
}
