/**
 * Seat ids and the compact section format, the one copy inside the pages (the pages are a bundle
 * of their own, so they do not import the server's src/inventory/keys.ts; the id is `A-12-7`,
 * section, row and number, as docs/API.md writes it).
 */
import type { CompactSectionSeats, SeatStatus, SectionSeats } from "./types.js";

export interface SeatRef {
  section: string;
  row: string;
  number: string;
}

export function parseSeatId(id: string): SeatRef | null {
  const parts = id.split("-");
  if (parts.length !== 3 || parts.some((p) => p === "")) return null;
  return { section: parts[0]!, row: parts[1]!, number: parts[2]! };
}

export function seatIdOf(section: string, row: string | number, number: string | number): string {
  return `${section}-${row}-${number}`;
}

export function sectionOf(id: string): string | undefined {
  return parseSeatId(id)?.section;
}

export function describeSeat(id: string): string {
  const ref = parseSeatId(id);
  return ref ? `Section ${ref.section}, row ${ref.row}, seat ${ref.number}` : id;
}

export const STATUS_WORD: Record<SeatStatus, string> = {
  available: "available",
  held: "held by another fan",
  sold: "sold",
};

export function isSeatStatus(value: unknown): value is SeatStatus {
  return value === "available" || value === "held" || value === "sold";
}

/** Numbers in numeric order, anything else after them in text order. */
export function compareLabels(a: string, b: string): number {
  const na = Number(a);
  const nb = Number(b);
  if (Number.isFinite(na) && Number.isFinite(nb)) return na - nb;
  if (Number.isFinite(na)) return -1;
  if (Number.isFinite(nb)) return 1;
  return a < b ? -1 : a > b ? 1 : 0;
}

/** "A-1-1", "A-1-1 and A-1-2", "A-1-1, A-1-2 and A-1-3" */
export function listSeats(ids: string[]): string {
  if (ids.length <= 1) return ids.join("");
  return `${ids.slice(0, -1).join(", ")} and ${ids[ids.length - 1]}`;
}

const STATUS_OF: Record<string, SeatStatus> = { a: "available", h: "held", s: "sold" };

/** The seats of a compact section body, in order (a 1,000-seat section is ~1 KB, not ~37 KB). */
export function expandCompact(body: CompactSectionSeats): SectionSeats["seats"] {
  const seats: SectionSeats["seats"] = [];
  for (const [row, first, count] of body.layout) {
    for (let k = 0; k < count; k++) {
      seats.push({
        id: seatIdOf(body.sectionId, row, first + k),
        status: STATUS_OF[body.status[seats.length] ?? ""] ?? "sold",
      });
    }
  }
  return seats;
}

export interface SeatRow {
  label: string;
  seats: string[];
}

/** Seat ids laid out as the grid shows them: rows in label order, seats in number order. */
export function layoutRows(ids: Iterable<string>): SeatRow[] {
  const byRow = new Map<string, string[]>();
  for (const id of ids) {
    const ref = parseSeatId(id);
    if (!ref) continue;
    let row = byRow.get(ref.row);
    if (!row) {
      row = [];
      byRow.set(ref.row, row);
    }
    row.push(id);
  }
  return [...byRow.keys()].sort(compareLabels).map((label) => ({
    label,
    seats: (byRow.get(label) ?? []).sort((a, b) => compareLabels(parseSeatId(a)!.number, parseSeatId(b)!.number)),
  }));
}

export type GridKey = "ArrowLeft" | "ArrowRight" | "ArrowUp" | "ArrowDown" | "Home" | "End";

export function isGridKey(key: string): key is GridKey {
  return ["ArrowLeft", "ArrowRight", "ArrowUp", "ArrowDown", "Home", "End"].includes(key);
}

/**
 * Where a key moves the focus from `from`: arrows to the neighbour (up and down keep the column
 * or the end of a shorter row), Home/End to the ends of the row; undefined at the edge.
 */
export function stepInGrid(rows: SeatRow[], from: string, key: GridKey): string | undefined {
  const rowIndex = rows.findIndex((r) => r.seats.includes(from));
  if (rowIndex < 0) return undefined;
  const row = rows[rowIndex]!.seats;
  const col = row.indexOf(from);
  switch (key) {
    case "ArrowLeft":
      return row[Math.max(0, col - 1)];
    case "ArrowRight":
      return row[Math.min(row.length - 1, col + 1)];
    case "ArrowUp": {
      const above = rows[rowIndex - 1]?.seats;
      return above?.[Math.min(col, above.length - 1)];
    }
    case "ArrowDown": {
      const below = rows[rowIndex + 1]?.seats;
      return below?.[Math.min(col, below.length - 1)];
    }
    case "Home":
      return row[0];
    case "End":
      return row[row.length - 1];
  }
}
