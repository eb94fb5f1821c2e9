/**
 * The driver's scenarios as objects (load/driver/scenarios/*.ts), without a gateway: the event each
 * sets up, how its fans arrive and behave, and the poll wait every fan keeps (load/poll.ts).
 */
import { describe, expect, it } from "vitest";
import { SCENARIO_NAMES, SCENARIOS } from "../../load/driver/scenarios/index.js";
import { pollDelaySeconds } from "../../load/poll.js";

const seatsOf = (sections: { rows: number; seatsPerRow: number }[]) =>
  sections.reduce((n, s) => n + s.rows * s.seatsPerRow, 0);

describe("driver scenarios", () => {
  it("are the seven the CLI takes, each with its defaults", () => {
    expect(SCENARIO_NAMES).toEqual(["spike", "hot-seat", "abandon", "bots", "soak", "best", "line"]);
    expect(SCENARIOS.line.defaults).toEqual({ fans: 100_000, rate: 2_000, duration: 180 });
    expect(SCENARIOS.spike.defaults).toEqual({ fans: 2_000, rate: 1_000, duration: 30 });
    expect(SCENARIOS.soak.defaults).toEqual({ fans: 0, rate: 20, duration: 300 });
  });

  it("lay out the seats asked for, about 0.8 a fan when not (soak: 2 a fan), FRONT first on hot-seat", () => {
    for (const name of SCENARIO_NAMES) {
      const plan = SCENARIOS[name].setup({ fans: 100, rate: 10, duration: 10, seats: 40 }, 100);
      expect(seatsOf(plan.sections), name).toBe(40);
    }
    // Rows of up to 50: a part row is laid out whole (130 asked, three rows of 50).
    expect(seatsOf(SCENARIOS.spike.setup({ fans: 100, rate: 10, duration: 10, seats: 130 }, 100).sections)).toBe(150);
    expect(seatsOf(SCENARIOS.spike.setup({ fans: 50, rate: 10, duration: 10 }, 50).sections)).toBe(40);
    expect(seatsOf(SCENARIOS.soak.setup({ fans: 0, rate: 5, duration: 10 }, 50).sections)).toBe(100);
    expect(SCENARIOS.spike.setup({ fans: 6_000, rate: 10, duration: 10 }, 6_000).sections.map((s) => s.id)).toEqual([
      "A",
      "B",
      "C",
      "D",
    ]);
    const hot = SCENARIOS["hot-seat"].setup({ fans: 100, rate: 10, duration: 10 }, 100);
    expect(hot.sections[0]).toEqual({ id: "FRONT", rows: 1, seatsPerRow: 20 });
    // abandon's holds lapse within the run, so their seats sell again.
    expect(SCENARIOS.abandon.setup({ fans: 10, rate: 10, duration: 10 }, 10).holdSeconds).toBe(20);
  });

  it("bring their fans at their own pace: soak over its duration, bots' over the first half", () => {
    expect(SCENARIOS.spike.arrivals({ fans: 50, rate: 25, duration: 5 })).toEqual({ fans: 50, perSecond: 25 });
    expect(SCENARIOS.soak.arrivals({ fans: 0, rate: 20, duration: 30 })).toEqual({ fans: 600, perSecond: 20 });
    expect(SCENARIOS.soak.arrivals({ fans: 90, rate: 20, duration: 30 })).toEqual({ fans: 90, perSecond: 3 });
    expect(SCENARIOS.bots.arrivals({ fans: 200, rate: 100, duration: 20 })).toEqual({ fans: 200, perSecond: 20 });
  });

  it("differ where their fans do: abandon's leave, release or lapse; hot-seat's go for the front row", () => {
    const { fan } = SCENARIOS.abandon;
    expect([0, 1, 2, 3].map((i) => fan.leavesAfterMs?.(i) !== undefined)).toEqual([true, false, false, true]);
    expect([0, 1, 2, 3, 6].map((i) => fan.afterHold?.(i))).toEqual(["buy", "release", "lapse", "buy", "release"]);
    expect(SCENARIOS.spike.fan).toEqual({});
    const hot = SCENARIOS["hot-seat"].fan;
    const sections = [
      { id: "FRONT", rows: 1, seatsPerRow: 20 },
      { id: "A", rows: 1, seatsPerRow: 50 },
    ];
    expect(hot.sectionOrder?.(sections, 0)).toEqual(["FRONT", "A"]);
    expect(hot.sectionOrder?.(sections, 3)).toEqual(["A"]);
    expect(hot.choose?.(["FRONT-1-1", "FRONT-1-2", "FRONT-1-3"], 2, 0)).toEqual(["FRONT-1-1", "FRONT-1-2"]);
    expect(SCENARIOS.bots.thresholds).toEqual(["bot_requests_accepted<1"]);
    // best's fans name no seat: they ask for two together in Floor, on rows of even length.
    expect([0, 1, 7].map((i) => SCENARIOS.best.fan.best?.(i))).toEqual(
      Array.from({ length: 3 }, () => ({ quantity: 2, tier: "Floor" })),
    );
    expect(SCENARIOS.spike.fan.best).toBeUndefined();
    const plan = SCENARIOS.best.setup({ fans: 100, rate: 10, duration: 10 }, 100);
    expect(plan.sections).toEqual([{ id: "A", rows: 4, seatsPerRow: 20 }]);
  });
});

describe("the poll wait", () => {
  it("follows the gateway's pollAfterSeconds (30 s far back) plus a little, capped only when asked", () => {
    expect(pollDelaySeconds(30, 0)).toBe(30);
    expect(pollDelaySeconds(30, 1)).toBe(32);
    expect(pollDelaySeconds(undefined, 0)).toBe(1);
    // maxPollSeconds (--max-poll), for short runs: the wait asked for is capped, the jitter stays.
    expect(pollDelaySeconds(30, 0, 5)).toBe(5);
    expect(pollDelaySeconds(30, 1, 0.5)).toBeCloseTo(0.55);
  });
});
