/** The section bodies and the content negotiation, as pure functions (no I/O). */
import { describe, expect, it } from "vitest";
import { negotiateEncoding } from "../../src/http/encoding.js";
import type { CachedSection, SeatStatus } from "../../src/seatmap/cache.js";
import { compactSection, expandCompact, sectionCompactJson, sectionJson } from "../../src/seatmap/formats.js";

const STATUSES: SeatStatus[] = ["available", "held", "sold"];

function section(ids: string[]): CachedSection {
  return {
    sectionId: "A",
    version: "0123456789abcdef.7",
    seats: ids.map((id, i) => ({ id, status: STATUSES[(i * 7) % 3]! })),
  };
}

const grid = (rows: number, perRow: number) =>
  Array.from({ length: rows * perRow }, (_, i) => `A-${Math.floor(i / perRow) + 1}-${(i % perRow) + 1}`);

describe("section bodies", () => {
  it("json is the section as it always was: sectionId, version, seats", () => {
    const s = section(grid(2, 3));
    expect(sectionJson(s)).toBe(JSON.stringify(s));
  });

  it("compact is one run per row and one character per seat, and expands back to the same seats", () => {
    const s = section(grid(20, 50));
    const compact = compactSection(s);
    expect(compact.layout).toHaveLength(20);
    expect(compact.layout[0]).toEqual([1, 1, 50]);
    expect(compact.status).toHaveLength(1_000);
    expect(compact.status).toMatch(/^[ahs]+$/);
    expect(expandCompact(compact)).toEqual(s.seats);
    expect(JSON.parse(sectionCompactJson(s))).toEqual(compact);
  });

  it("a layout with gaps and rows of different lengths (a replaced layout keeps sold seats) still round-trips", () => {
    const ids = ["A-1-1", "A-1-2", "A-1-5", "A-2-1", "A-10-3", "A-10-4", "A-10-5", "A-11-99999"];
    const s = section(ids);
    const compact = compactSection(s);
    expect(compact.layout).toEqual([
      [1, 1, 2],
      [1, 5, 1],
      [2, 1, 1],
      [10, 3, 3],
      [11, 99999, 1],
    ]);
    expect(expandCompact(compact)).toEqual(s.seats);
  });

  it("an empty section is an empty layout", () => {
    expect(compactSection(section([]))).toEqual({
      sectionId: "A",
      version: "0123456789abcdef.7",
      layout: [],
      status: "",
    });
  });

  it("a seat id of another shape is refused, not drawn somewhere wrong", () => {
    expect(() => compactSection(section(["A-1-1", "B-1-2"]))).toThrow(/B-1-2/);
    expect(() => compactSection(section(["A-01-1"]))).toThrow(/A-01-1/);
  });
});

describe("Accept-Encoding", () => {
  it.each([
    [undefined, "identity"],
    ["", "identity"],
    ["gzip, deflate, br", "br"],
    ["gzip, deflate, br, zstd", "br"],
    ["gzip", "gzip"],
    ["x-gzip", "gzip"],
    ["deflate", "identity"],
    ["br;q=0, gzip", "gzip"],
    ["br;q=0.5, gzip;q=0.8", "gzip"],
    ["gzip;q=1.0, br;q=1.0", "br"],
    ["gzip;q=0, br;q=0", "identity"],
    ["identity;q=0, gzip", "gzip"],
    ["*", "br"],
    ["*;q=0, gzip;q=0.1", "gzip"],
    ["br;q=0, *", "gzip"],
    ["GZIP ; Q=0.9", "gzip"],
    ["br;q=zero, gzip", "gzip"],
    ["gzip;q=0.2, identity", "identity"],
  ] as const)("%j -> %s", (header, expected) => {
    expect(negotiateEncoding(header)).toBe(expected);
    // Remembered answers are the same answers.
    expect(negotiateEncoding(header)).toBe(expected);
  });
});
