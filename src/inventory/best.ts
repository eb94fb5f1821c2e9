/**
 * Best available seats, together: which `n` adjacent seats to propose for a fan who names a
 * quantity (and a tier or a section, and a top price) instead of seats. Pure: the claim path hands
 * in what the cached seat map says (src/claims/hold-service.ts); what it proposes is then written
 * with the plain hold's one conditional transaction (holds.ts writeSeatHold), so DynamoDB still
 * decides and nothing is sold twice whatever the cache said.
 *
 * The order (docs/API.md "Best available"), best first:
 * 1. no new single seat: a block that would leave one free seat alone between taken seats (or
 *    between a taken seat and the row's end) loses to any block that leaves none (pretix #1324:
 *    such a seat is all but unsellable). Only when every block would strand one is one taken.
 * 2. front rows first (row 1 is the front of every section);
 * 3. the fewest new odd gaps: most fans come in pairs, and a gap of odd length ends with a single
 *    seat when pairs fill it; on a row of even length, all-pairs requests then never strand a seat
 *    (each block keeps to the row's pair grid), however stale the map each of them saw;
 * 4. centre of the row first;
 * 5. the section the event lists first, then the lower seat number.
 * With `splitRows`, and only when no single row of the candidates has `n` free seats together,
 * the seats are two blocks on two adjacent rows of one section, the front one the larger, the back
 * one as close behind it as the row allows without stranding a seat.
 */
import type { SaleEvent } from "./events.js";
import { ID_PATTERN, parseSeatId, seatIdOf } from "./keys.js";
import { overLimit } from "./limits.js";
import type { CheckedSeatHold, LoadForSale } from "./holds.js";
import { guard } from "./store.js";
import type { HoldResult, SectionInput } from "./types.js";

export interface BestRequest {
  quantity: number;
  /** At most one of tier and section; neither: every section. */
  tier?: string;
  section?: string;
  /** Minor units: only sections whose seat price is at most this. */
  maxPrice?: number;
  /** Two adjacent rows may share the seats when no row has them together. Default false. */
  splitRows?: boolean;
}

/** A best-available request that passed every check a request can fail before reading seats. */
export interface BestPlan {
  readonly eventId: string;
  readonly fanId: string;
  readonly quantity: number;
  readonly splitRows: boolean;
  readonly holdSeconds: number;
  readonly maxSeatsPerFan: number;
  /** The sections the filters allow, in the event's order. */
  readonly sections: readonly SectionInput[];
}

export type BestCheck = { ok: true; plan: BestPlan } | Exclude<HoldResult, { ok: true }>;

/**
 * The checks of a best-available request: the fan, the event on sale, the quantity within the
 * limits, the filters naming something. Unknown section or tier: not_found; filters that allow
 * no section (a top price under every price): no_block_available with nothing left.
 */
export async function checkBest(
  loadForSale: LoadForSale,
  eventId: string,
  fanId: string,
  best: BestRequest,
  holdSeconds: number | undefined,
  validFan: (fanId: string) => boolean,
): Promise<BestCheck> {
  if (!validFan(fanId)) return { ok: false, reason: "invalid_request", message: "fanId must be 1..128 characters" };
  if (!Number.isInteger(best.quantity) || best.quantity < 1)
    return { ok: false, reason: "invalid_request", message: "quantity must be a positive integer" };
  if (best.tier !== undefined && best.section !== undefined)
    return { ok: false, reason: "invalid_request", message: "name a tier or a section, not both" };
  if (holdSeconds !== undefined && !(Number.isInteger(holdSeconds) && holdSeconds >= 1 && holdSeconds <= 86_400))
    return { ok: false, reason: "invalid_request", message: "holdSeconds must be 1..86400" };
  if (!ID_PATTERN.test(eventId)) return { ok: false, reason: "not_found", what: "event" };
  return guard("hold", async () => {
    const sale = await loadForSale(eventId);
    if (!sale) return { ok: false, reason: "not_found", what: "event" };
    if (!sale.onSale) return { ok: false, reason: "not_on_sale" };
    const tooMany = overLimit(sale.event.maxSeatsPerFan, "seats", best.quantity);
    if (tooMany) return tooMany;
    const named = candidateSections(sale, best);
    if (named === "unknown_section") return { ok: false, reason: "not_found", what: "section" };
    if (named === "unknown_tier") return { ok: false, reason: "not_found", what: "tier" };
    const plan: BestPlan = {
      eventId,
      fanId,
      quantity: best.quantity,
      splitRows: best.splitRows ?? false,
      holdSeconds: holdSeconds ?? sale.event.holdSeconds,
      maxSeatsPerFan: sale.event.maxSeatsPerFan,
      sections: named,
    };
    return { ok: true, plan };
  });
}

function candidateSections(sale: SaleEvent, best: BestRequest): SectionInput[] | "unknown_section" | "unknown_tier" {
  let sections = sale.event.sections;
  if (best.section !== undefined) {
    const section = sale.sections.get(best.section);
    if (!section) return "unknown_section";
    sections = [section];
  }
  if (best.tier !== undefined) {
    sections = sections.filter((s) => s.tier === best.tier);
    if (sections.length === 0) return "unknown_tier";
  }
  const maxPrice = best.maxPrice;
  return maxPrice === undefined ? sections : sections.filter((s) => s.price <= maxPrice);
}

/** The proposed seats as a checked seat hold, for writeSeatHold (priced by their sections). */
export function checkedBlock(plan: BestPlan, block: Block): CheckedSeatHold {
  const prices = new Map(plan.sections.map((s) => [s.id, s.price]));
  const refs = block.seats.map((id) => parseSeatId(id)!);
  return {
    eventId: plan.eventId,
    fanId: plan.fanId,
    seatIds: [...block.seats],
    refs,
    amount: refs.reduce((sum, r) => sum + (prices.get(r.sectionId) ?? 0), 0),
    holdSeconds: plan.holdSeconds,
    maxSeatsPerFan: plan.maxSeatsPerFan,
  };
}

/**
 * One section as a proposal sees it: a byte per seat, row-major (row 1 first), 1 when taken (held,
 * sold, or not known to the map). `take` marks seats lost to another fan since the map was read.
 */
export class SectionView {
  readonly taken: Uint8Array;

  constructor(
    readonly section: SectionInput,
    /** The section's place in the event's list (the last tie-break). */
    readonly order: number,
  ) {
    this.taken = new Uint8Array(section.rows * section.seatsPerRow).fill(1);
  }

  /** From the cached map: seat ids and their status characters (`a` available), in the same order. */
  static fromStatuses(section: SectionInput, order: number, ids: readonly string[], statuses: string): SectionView {
    const view = new SectionView(section, order);
    for (let i = 0; i < ids.length; i++) {
      if (statuses.charCodeAt(i) !== 97 /* a */) continue;
      const at = view.indexOf(ids[i]!);
      if (at !== -1) view.taken[at] = 0;
    }
    return view;
  }

  /** The seat's place in `taken`, or -1 when it is not a seat of this section. */
  indexOf(seatId: string): number {
    const ref = parseSeatId(seatId);
    const { id, rows, seatsPerRow } = this.section;
    if (!ref || ref.sectionId !== id || ref.row > rows || ref.number > seatsPerRow) return -1;
    return (ref.row - 1) * seatsPerRow + ref.number - 1;
  }

  take(seatIds: Iterable<string>): void {
    for (const seatId of seatIds) {
      const at = this.indexOf(seatId);
      if (at !== -1) this.taken[at] = 1;
    }
  }

  /** Free seats in the view. */
  available(): number {
    let n = 0;
    for (const t of this.taken) if (t === 0) n++;
    return n;
  }
}

/** A proposal: the seats, and how it ranks (lower is better, compared in order). */
export interface Block {
  seats: string[];
  sectionId: string;
  /** The (front) row. */
  row: number;
  /** Single seats it would strand; then row; then new odd gaps; then twice the distance from the centre. */
  score: readonly number[];
}

/** One run of seats within a row, and what taking it leaves. */
interface Piece {
  start: number;
  orphans: number;
  oddDelta: number;
  centre: number;
}

const odd = (n: number) => (n % 2 === 1 ? 1 : 0);

/** Every way to take `n` together from the free runs of one row (`row0`: 0-based), unranked. */
function piecesOfRow(view: SectionView, row0: number, n: number): Piece[] {
  const w = view.section.seatsPerRow;
  const base = row0 * w;
  const out: Piece[] = [];
  for (let gs = 0; gs < w; ) {
    if (view.taken[base + gs] === 1) {
      gs++;
      continue;
    }
    let ge = gs;
    while (ge + 1 < w && view.taken[base + ge + 1] === 0) ge++;
    const len = ge - gs + 1;
    for (let s = gs; s + n - 1 <= ge; s++) {
      const left = s - gs;
      const right = ge - (s + n - 1);
      out.push({
        start: s,
        orphans: (left === 1 ? 1 : 0) + (right === 1 ? 1 : 0),
        oddDelta: odd(left) + odd(right) - odd(len),
        // Twice the distance of the block's centre from the row's: integers, same order.
        centre: Math.abs(2 * s + n - 1 - (w - 1)),
      });
    }
    gs = ge + 1;
  }
  return out;
}

const seatsOf = (view: SectionView, row0: number, start: number, n: number): string[] =>
  Array.from({ length: n }, (_, i) => seatIdOf({ sectionId: view.section.id, row: row0 + 1, number: start + i + 1 }));

function compareScores(a: readonly number[], b: readonly number[]): number {
  for (let i = 0; i < a.length; i++) {
    const d = (a[i] ?? 0) - (b[i] ?? 0);
    if (d !== 0) return d;
  }
  return 0;
}

/** A block before it is named: where it is and how it ranks. */
interface Candidate {
  view: SectionView;
  row0: number;
  start: number;
  score: number[];
}

/**
 * The best `limit` single-row blocks of `n` in the views, best first (the module's header gives
 * the order). Only those are named: a section of thousands of seats ranks thousands of places.
 */
export function rankBlocks(views: readonly SectionView[], n: number, limit = Number.POSITIVE_INFINITY): Block[] {
  const all: Candidate[] = [];
  for (const view of views) {
    if (n > view.section.seatsPerRow) continue;
    for (let row0 = 0; row0 < view.section.rows; row0++) {
      for (const p of piecesOfRow(view, row0, n)) {
        all.push({ view, row0, start: p.start, score: [p.orphans, row0, p.oddDelta, p.centre, view.order, p.start] });
      }
    }
  }
  all.sort((a, b) => compareScores(a.score, b.score));
  return all.slice(0, limit).map((c) => ({
    seats: seatsOf(c.view, c.row0, c.start, n),
    sectionId: c.view.section.id,
    row: c.row0 + 1,
    score: c.score,
  }));
}

const bestPiece = (pieces: Piece[]): Piece | undefined =>
  pieces.reduce<Piece | undefined>(
    (best, p) =>
      !best ||
      compareScores(
        [p.orphans, p.oddDelta, p.centre, p.start],
        [best.orphans, best.oddDelta, best.centre, best.start],
      ) < 0
        ? p
        : best,
    undefined,
  );

/**
 * Blocks of `n` over two adjacent rows of one section, best first: the front row takes the larger
 * share (ceil(n/2) first, then more lopsided splits), at its best place; the back row the place
 * nearest behind it. For when no row has `n` free together (splitRows).
 */
export function rankSplitBlocks(views: readonly SectionView[], n: number): Block[] {
  const out: Block[] = [];
  if (n < 2) return out;
  for (const view of views) {
    const w = view.section.seatsPerRow;
    for (let row0 = 0; row0 + 1 < view.section.rows; row0++) {
      for (let front = Math.ceil(n / 2); front < n; front++) {
        const back = n - front;
        if (front > w) continue;
        const f = bestPiece(piecesOfRow(view, row0, front));
        if (!f) continue;
        const fCentre = 2 * f.start + front - 1;
        const behind = piecesOfRow(view, row0 + 1, back).reduce<{ p: Piece; d: number } | undefined>((best, p) => {
          const d = Math.abs(2 * p.start + back - 1 - fCentre);
          const better = !best || p.orphans < best.p.orphans || (p.orphans === best.p.orphans && d < best.d);
          return better ? { p, d } : best;
        }, undefined);
        if (!behind) continue;
        out.push({
          seats: [...seatsOf(view, row0, f.start, front), ...seatsOf(view, row0 + 1, behind.p.start, back)],
          sectionId: view.section.id,
          row: row0 + 1,
          score: [f.orphans + behind.p.orphans, row0, front - Math.ceil(n / 2), behind.d, view.order],
        });
      }
    }
  }
  return out.sort((a, b) => compareScores(a.score, b.score));
}

/**
 * The blocks to propose, best first: single-row ones, or (with `splitRows`, when there is none)
 * two-row ones.
 */
export function proposals(views: readonly SectionView[], n: number, splitRows: boolean, limit?: number): Block[] {
  const single = rankBlocks(views, n, limit);
  return single.length > 0 || !splitRows ? single : rankSplitBlocks(views, n);
}

/**
 * Seats left alone: a free seat whose neighbours on its row are both taken, a row's end counting
 * as taken (the audit's figure after a sell-out). `taken(row0, i)` for 0-based positions.
 */
export function strandedInRow(width: number, taken: (i: number) => boolean): number[] {
  const out: number[] = [];
  for (let i = 0; i < width; i++) {
    if (taken(i)) continue;
    const leftTaken = i === 0 || taken(i - 1);
    const rightTaken = i === width - 1 || taken(i + 1);
    // A row of one seat has no neighbour to be stranded by.
    if (leftTaken && rightTaken && width > 1) out.push(i);
  }
  return out;
}

/**
 * The block to try on attempt `attempt` (0 first): the best one, then, once other fans have taken
 * what this fan proposed, one at random among the best 2^attempt of the best one's kind (as many
 * single seats stranded, as many odd gaps made). Fans who read the same map all propose the same
 * block first; spreading the retries keeps a crowd from racing for one block after another, and
 * keeping to the best one's kind keeps a retry from stranding a seat the first choice would not.
 */
export function choose(
  blocks: readonly Block[],
  attempt: number,
  random: () => number = Math.random,
): Block | undefined {
  const best = blocks[0];
  if (!best || attempt === 0) return best;
  // Up to 1,024 (the blocks the claim path ranks): with 128, a crowd of 800 on rows of 25 kept
  // drawing from blocks already leased and 400 of them were refused with half the seats free
  // (test/gateway/best-available.test.ts, "a crowd smaller than the tier").
  const limit = 2 ** Math.min(attempt, 10);
  const pool: Block[] = [];
  for (const b of blocks) {
    if (pool.length >= limit) break;
    if (b.score[0] === best.score[0] && b.score[2] === best.score[2]) pool.push(b);
  }
  return pool[Math.floor(random() * pool.length)] ?? best;
}
