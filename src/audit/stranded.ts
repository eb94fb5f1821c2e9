/**
 * Single seats left stranded: a free seat whose neighbours on its row are both held or sold (a
 * row's end counts as taken). After a sell-out these are the seats nobody buying two or more
 * together can have (pretix #1324); the best-available order (src/inventory/best.ts) avoids
 * making them. A figure of the report, not a check: a fan who picks seats by hand may leave one,
 * and nothing is wrong with the sale for it.
 */
import { type EventDefinition, type SeatView, seatIdOf, strandedInRow } from "../inventory/index.js";

export interface StrandedSeats {
  /** Every stranded seat of the event. */
  count: number;
  /** The first of them (at most the audit's maxOffenders), section by section, row by row. */
  seats: string[];
  /** Stranded seats per section (sections with none are left out). */
  bySection: Record<string, number>;
}

export function strandedSeats(
  event: EventDefinition,
  seats: ReadonlyMap<string, SeatView>,
  maxListed = 20,
): StrandedSeats {
  const out: StrandedSeats = { count: 0, seats: [], bySection: {} };
  for (const section of event.sections) {
    for (let row = 1; row <= section.rows; row++) {
      const id = (i: number) => seatIdOf({ sectionId: section.id, row, number: i + 1 });
      // A seat the read did not return counts as taken: it is nobody's to sell.
      const taken = (i: number) => (seats.get(id(i))?.status ?? "sold") !== "available";
      for (const i of strandedInRow(section.seatsPerRow, taken)) {
        out.count++;
        out.bySection[section.id] = (out.bySection[section.id] ?? 0) + 1;
        if (out.seats.length < maxListed) out.seats.push(id(i));
      }
    }
  }
  return out;
}
