/**
 * The best-available order (src/inventory/best.ts), as a pure function of a section's statuses:
 * no I/O. The race through the claim path is test/claims/best-available.test.ts.
 */
import { describe, expect, it } from "vitest";
import {
  type Block,
  choose,
  proposals,
  rankBlocks,
  SectionView,
  type SectionInput,
  strandedInRow,
} from "../../src/inventory/index.js";

const section = (rows: number, seatsPerRow: number, id = "F"): SectionInput => ({
  id,
  tier: "floor",
  price: 100,
  rows,
  seatsPerRow,
});

/** A view from rows drawn as strings: `.` free, `x` taken. */
function viewOf(rows: string[], id = "F", order = 0): SectionView {
  const s = section(rows.length, rows[0]!.length, id);
  const ids: string[] = [];
  let statuses = "";
  rows.forEach((line, r) => {
    [...line].forEach((ch, i) => {
      ids.push(`${id}-${r + 1}-${i + 1}`);
      statuses += ch === "." ? "a" : "h";
    });
  });
  return SectionView.fromStatuses(s, order, ids, statuses);
}

const best = (views: SectionView[], n: number, splitRows = false): string[] | undefined =>
  proposals(views, n, splitRows)[0]?.seats;

/** Draws a view's rows back as strings. */
function draw(view: SectionView): string[] {
  const { rows, seatsPerRow } = view.section;
  return Array.from({ length: rows }, (_, r) =>
    Array.from({ length: seatsPerRow }, (_, i) => (view.taken[r * seatsPerRow + i] ? "x" : ".")).join(""),
  );
}

describe("best available order", () => {
  it("takes the centre of the front row first", () => {
    expect(best([viewOf(["..........", ".........."])], 2)).toEqual(["F-1-5", "F-1-6"]);
    expect(best([viewOf(["...........", "..........."])], 3)).toEqual(["F-1-5", "F-1-6", "F-1-7"]);
    // Off the centre by one rather than leave two odd gaps (3 and 3) on a row of 9.
    expect(best([viewOf(["........."])], 3)).toEqual(["F-1-3", "F-1-4", "F-1-5"]);
  });

  it("leaves no single seat when another block exists, even one row back", () => {
    // Row 1 has 3 free together: any pair there strands one seat; row 2 has room.
    expect(best([viewOf(["xxx...xxxx", ".........."])], 2)).toEqual(["F-2-5", "F-2-6"]);
    // When every block strands a seat, one is taken all the same.
    expect(best([viewOf(["xxx...xxxx"])], 2)).toHaveLength(2);
  });

  it("keeps gaps even on a row of even length: a row of 8 gets pairs off the exact centre", () => {
    // The exact centre (4-5) would leave 3 and 3, each ending with a single seat among pairs.
    expect(best([viewOf(["........"])], 2)).toEqual(["F-1-3", "F-1-4"]);
  });

  it("all pairs on even rows sell out with no seat stranded, whatever order they come in", () => {
    const view = viewOf(["..........", "........", "......"].map((r) => r.padEnd(10, "x")));
    for (let i = 0; i < 100; i++) {
      const block = choose(proposals([view], 2, false, 64), i % 5, () => (i * 0.37) % 1);
      if (!block) break;
      view.take(block.seats);
    }
    for (const row of draw(view)) expect(row).toBe("xxxxxxxxxx");
  });

  it("fills a gap that fits exactly before opening a new one in the same row", () => {
    expect(best([viewOf(["xx..xxx...xx"])], 2)).toEqual(["F-1-3", "F-1-4"]);
  });

  it("orders sections by the event's list after rows", () => {
    const a = viewOf(["xxxxxx", "......"], "A", 0);
    const b = viewOf(["......", "......"], "B", 1);
    expect(best([a, b], 2)).toEqual(["B-1-3", "B-1-4"]);
    const c = viewOf(["......", "......"], "C", 0);
    expect(best([b, c], 2)).toEqual(["C-1-3", "C-1-4"]);
  });

  it("splits over two adjacent rows only when asked and no row has the seats together", () => {
    const view = () => viewOf(["xx..xxxx", "x..xxxxx", "xxxxxxxx"]);
    expect(best([view()], 4)).toBeUndefined();
    expect(best([view()], 4, true)).toEqual(["F-1-3", "F-1-4", "F-2-2", "F-2-3"]);
    // The front row takes the larger share, with no seat stranded: 3 in front, 1 at a gap's end.
    expect(best([viewOf(["xx...xxx", "x...xxxx"])], 4, true)).toEqual(["F-1-3", "F-1-4", "F-1-5", "F-2-4"]);
    // A row that has them together is always preferred to a split.
    expect(best([viewOf(["x..x....", "........"])], 3, true)).toEqual(["F-2-3", "F-2-4", "F-2-5"]);
  });

  it("a block larger than the row never fits on one row", () => {
    expect(rankBlocks([viewOf(["...."])], 5)).toEqual([]);
  });

  it("a retry picks among the best of the first choice's kind only", () => {
    const view = viewOf(["............", "............"]);
    const ranked = proposals([view], 2, false, 1_024);
    const first = ranked[0]!;
    const kinds = new Set<string>();
    for (let i = 0; i < 200; i++) {
      const b = choose(ranked, 6, () => i / 200) as Block;
      kinds.add(`${b.score[0]}/${b.score[2]}`);
    }
    expect(kinds).toEqual(new Set([`${first.score[0]}/${first.score[2]}`]));
    expect(choose(ranked, 0)).toBe(first);
  });
});

describe("stranded seats", () => {
  const stranded = (row: string) => strandedInRow(row.length, (i) => row[i] === "x");
  it("counts a free seat between taken ones, or at a row's end next to one", () => {
    expect(stranded("x.x..x")).toEqual([1]);
    expect(stranded(".xx..x.")).toEqual([0, 6]);
    expect(stranded("......")).toEqual([]);
    expect(stranded(".")).toEqual([]);
  });
});
