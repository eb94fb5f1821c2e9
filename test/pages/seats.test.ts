/** Seat ids, the compact section format and the grid's keyboard steps, as the pages read them. */
import { describe, expect, it } from "vitest";
import {
  describeSeat,
  expandCompact,
  layoutRows,
  listSeats,
  parseSeatId,
  stepInGrid,
} from "../../waiting-room/src/seats.js";

describe("seat ids on the pages", () => {
  it("parses section, row and number, and refuses anything else", () => {
    expect(parseSeatId("A-12-7")).toEqual({ section: "A", row: "12", number: "7" });
    for (const bad of ["A-12", "A--7", "A-1-2-3", ""]) expect(parseSeatId(bad)).toBeNull();
    expect(describeSeat("A-12-7")).toBe("Section A, row 12, seat 7");
    expect(describeSeat("GA")).toBe("GA");
    expect(listSeats(["A-1-1", "A-1-2", "A-1-3"])).toBe("A-1-1, A-1-2 and A-1-3");
  });

  it("expands the compact body into seats in order, an unknown status counting as sold", () => {
    const seats = expandCompact({
      sectionId: "B",
      version: "v",
      layout: [
        [1, 3, 2],
        [4, 1, 2],
      ],
      status: "ahs",
    });
    expect(seats).toEqual([
      { id: "B-1-3", status: "available" },
      { id: "B-1-4", status: "held" },
      { id: "B-4-1", status: "sold" },
      { id: "B-4-2", status: "sold" },
    ]);
  });

  it("lays rows and seats out in numeric order", () => {
    const rows = layoutRows(["A-10-1", "A-2-10", "A-2-9", "A-1-1"]);
    expect(rows).toEqual([
      { label: "1", seats: ["A-1-1"] },
      { label: "2", seats: ["A-2-9", "A-2-10"] },
      { label: "10", seats: ["A-10-1"] },
    ]);
  });
});

describe("moving through the seat grid with the keyboard", () => {
  const rows = layoutRows(["A-1-1", "A-1-2", "A-1-3", "A-1-4", "A-2-1", "A-2-2"]);

  it("arrows step to the neighbour and stop at the edges", () => {
    expect(stepInGrid(rows, "A-1-2", "ArrowRight")).toBe("A-1-3");
    expect(stepInGrid(rows, "A-1-4", "ArrowRight")).toBe("A-1-4");
    expect(stepInGrid(rows, "A-1-1", "ArrowLeft")).toBe("A-1-1");
    expect(stepInGrid(rows, "A-1-1", "ArrowUp")).toBeUndefined();
    expect(stepInGrid(rows, "A-2-2", "ArrowDown")).toBeUndefined();
  });

  it("up and down keep the column, or the end of a shorter row; Home and End go to the row's ends", () => {
    expect(stepInGrid(rows, "A-1-4", "ArrowDown")).toBe("A-2-2");
    expect(stepInGrid(rows, "A-2-1", "ArrowUp")).toBe("A-1-1");
    expect(stepInGrid(rows, "A-1-3", "Home")).toBe("A-1-1");
    expect(stepInGrid(rows, "A-1-1", "End")).toBe("A-1-4");
    expect(stepInGrid(rows, "Z-1-1", "End")).toBeUndefined();
  });
});
