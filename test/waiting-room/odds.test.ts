import { describe, expect, it } from "vitest";
import { MIN_ADMITTED, oddsAt } from "../../src/waiting-room/odds.js";

const figures = { left: 100, capacity: 200, admitted: 50, maxSeatsPerFan: 4 };

describe("oddsAt", () => {
  it("uses the seats taken per admitted fan once enough fans were admitted", () => {
    // 100 taken by 50 fans: 2 a fan; 49 ahead and this fan need 100.
    expect(oddsAt(49, figures)).toEqual({
      chance: 1,
      seatsLeft: 100,
      fansAhead: 49,
      seatsPerFan: 2,
      basis: "conversion",
    });
    expect(oddsAt(99, figures).chance).toBe(0.5);
    expect(oddsAt(199, figures).chance).toBe(0.25);
  });

  it("falls back to the limit (the worst case) with too few admitted or nothing taken", () => {
    expect(oddsAt(9, { ...figures, admitted: MIN_ADMITTED - 1 })).toMatchObject({
      chance: 1,
      basis: "limit",
      seatsPerFan: 4,
    });
    expect(oddsAt(49, { ...figures, left: 200 })).toMatchObject({ chance: 1, basis: "limit" });
    expect(oddsAt(99, { ...figures, left: 200 })).toMatchObject({ chance: 0.5, basis: "limit" });
  });

  it("says no chance when nothing is left, and never more than certainty", () => {
    expect(oddsAt(0, { ...figures, left: 0, capacity: 200 }).chance).toBe(0);
    expect(oddsAt(0, { ...figures, left: 1_000, capacity: 1_000, admitted: 0 }).chance).toBe(1);
    // Rounds down: 1/3 is 0.33, never shown as better than it is.
    expect(oddsAt(2, { left: 1, capacity: 1, admitted: 0, maxSeatsPerFan: 1 }).chance).toBe(0.33);
  });
});
