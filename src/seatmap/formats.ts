/**
 * The two bodies of a section's seat map, serialized from one cached version:
 *
 * - `json`: `{"sectionId", "version", "seats": [{"id", "status"}]}`, every seat spelled out (the
 *   original form, ~37 bytes a seat);
 * - `compact`: `{"sectionId", "version", "layout": [[row, firstSeat, count]], "status": "aah…s"}`,
 *   the layout as runs of consecutive seat numbers in one row, in seat order, and one character a
 *   seat in that same order (`a`vailable, `h`eld, `s`old): what the cache itself holds, ~1 byte a
 *   seat before compression. Seat ids are `<sectionId>-<row>-<firstSeat + k>`.
 *
 * Pure functions, no I/O: each runs once per version (src/seatmap/pages.ts).
 */
import type { CachedSection, SeatStatus } from "./cache.js";

export type SectionFormat = "json" | "compact";

/** `[row, first seat number, how many consecutive seats]`. */
export type LayoutRun = [row: number, firstSeat: number, count: number];

export interface CompactSection {
  sectionId: string;
  version: string;
  layout: LayoutRun[];
  status: string;
}

const statusChar: Record<SeatStatus, string> = { available: "a", held: "h", sold: "s" };
const charStatus: Record<string, SeatStatus> = { a: "available", h: "held", s: "sold" };

/** `<section>-<row>-<number>` as the inventory writes it (src/inventory/keys.ts: no leading zeros). */
const SEAT_ID = /^([A-Za-z0-9_]{1,32})-([1-9][0-9]{0,4})-([1-9][0-9]{0,4})$/;

export function sectionJson(section: CachedSection): string {
  return JSON.stringify({ sectionId: section.sectionId, version: section.version, seats: section.seats });
}

export function compactSection(section: CachedSection): CompactSection {
  const layout: LayoutRun[] = [];
  let status = "";
  let run: LayoutRun | undefined;
  for (const seat of section.seats) {
    const m = SEAT_ID.exec(seat.id);
    // The inventory makes every seat id; one of another shape is a bug upstream, not a layout.
    if (!m || m[1] !== section.sectionId) throw new Error(`seat id ${seat.id} is not <section>-<row>-<number>`);
    const row = Number(m[2]);
    const number = Number(m[3]);
    if (run && run[0] === row && run[1] + run[2] === number) run[2]++;
    else {
      run = [row, number, 1];
      layout.push(run);
    }
    status += statusChar[seat.status];
  }
  return { sectionId: section.sectionId, version: section.version, layout, status };
}

export function sectionCompactJson(section: CachedSection): string {
  return JSON.stringify(compactSection(section));
}

/** The seats a compact body describes, in its order (what clients do; here for tests). */
export function expandCompact(compact: CompactSection): { id: string; status: SeatStatus }[] {
  const seats: { id: string; status: SeatStatus }[] = [];
  for (const [row, first, count] of compact.layout) {
    for (let k = 0; k < count; k++) {
      const status = charStatus[compact.status[seats.length] ?? ""] ?? "sold";
      seats.push({ id: `${compact.sectionId}-${row}-${first + k}`, status });
    }
  }
  return seats;
}
