import { describe, expect, it } from "vitest";
import { kendallTau, kendallTauNaive, outOfOrder, quantile, summarize } from "../../load/driver/stats.js";

describe("kendallTau", () => {
  it("is 1 for the same order and -1 for the reverse", () => {
    const a = Array.from({ length: 1000 }, (_, i) => i);
    expect(
      kendallTau(
        a,
        a.map((v) => v * 3 + 1),
      ),
    ).toBe(1);
    expect(
      kendallTau(
        a,
        a.map((v) => -v),
      ),
    ).toBe(-1);
  });

  it("matches known values", () => {
    // scipy.stats.kendalltau docs example (tau-b with ties)
    expect(kendallTau([12, 2, 1, 12, 2], [1, 4, 7, 1, 0])).toBeCloseTo(-0.47140452079103173, 12);
    // one adjacent swap among 4: (6 - 2) / 6
    expect(kendallTau([1, 2, 3, 4], [1, 3, 2, 4])).toBeCloseTo(2 / 3, 12);
    // independent halves: [1,2,3,4] vs [3,4,1,2] -> 2 concordant, 4 discordant
    expect(kendallTau([1, 2, 3, 4], [3, 4, 1, 2])).toBeCloseTo(-1 / 3, 12);
  });

  it("agrees with the O(n^2) definition on random data with ties", () => {
    let seed = 42;
    const rnd = (m: number) => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed % m;
    };
    for (let round = 0; round < 50; round++) {
      const n = 2 + rnd(200);
      const x = Array.from({ length: n }, () => rnd(round % 2 ? 10 : 1000));
      const y = Array.from({ length: n }, () => rnd(round % 3 ? 1000 : 7));
      const fast = kendallTau(x, y);
      const slow = kendallTauNaive(x, y);
      if (Number.isNaN(slow)) expect(fast).toBeNaN();
      else expect(fast).toBeCloseTo(slow, 10);
    }
  });

  it("is NaN without enough information and refuses lengths that differ", () => {
    expect(kendallTau([1], [1])).toBeNaN();
    expect(kendallTau([1, 1, 1], [1, 2, 3])).toBeNaN();
    expect(() => kendallTau([1, 2], [1])).toThrow();
  });

  it("handles 20,000 items quickly", () => {
    const n = 20_000;
    const x = Array.from({ length: n }, (_, i) => i);
    const y = x.map((v) => v + ((v * 7919) % 50));
    const t = performance.now();
    const tau = kendallTau(x, y);
    expect(performance.now() - t).toBeLessThan(2_000);
    expect(tau).toBeGreaterThan(0.9);
    expect(tau).toBeLessThanOrEqual(1);
  });
});

describe("quantiles", () => {
  it("takes the nearest rank", () => {
    const v = Array.from({ length: 100 }, (_, i) => i + 1);
    expect(quantile(v, 0.5)).toBe(50);
    expect(quantile(v, 0.99)).toBe(99);
    expect(quantile([], 0.5)).toBe(0);
    expect(summarize([3, 1, 2])).toEqual({ count: 3, p50: 2, p95: 3, p99: 3, max: 3 });
  });
});

describe("outOfOrder", () => {
  it("counts the items before an item ahead of them, ties allowed, where tau-b falls below 1", () => {
    // a batch decided in one millisecond: in order, though tau-b says otherwise
    expect(outOfOrder([1, 2, 3, 4], [10, 10, 10, 11])).toBe(0);
    expect(kendallTau([1, 2, 3, 4], [10, 10, 10, 11])).toBeLessThan(1);
    // place 4 decided before places 2 and 3: one fan out of order
    expect(outOfOrder([1, 2, 3, 4], [10, 20, 30, 15])).toBe(1);
    // the input's order does not matter; items tied in x are never out of order with each other
    expect(outOfOrder([4, 3, 2, 1], [15, 30, 20, 10])).toBe(1);
    expect(outOfOrder([1, 1, 2], [30, 10, 20])).toBe(1);
    expect(outOfOrder([3, 2, 1], [1, 2, 3])).toBe(2);
    expect(outOfOrder([], [])).toBe(0);
    expect(() => outOfOrder([1], [])).toThrow(/lengths differ/);
  });

  it("agrees with the definition on random inputs", () => {
    let seed = 7;
    const rand = () => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed / 2 ** 31;
    };
    for (let round = 0; round < 50; round++) {
      const n = 1 + Math.floor(rand() * 40);
      const x = Array.from({ length: n }, () => Math.floor(rand() * 10));
      const y = Array.from({ length: n }, () => Math.floor(rand() * 10));
      const slow = x.filter((xi, i) => x.some((xj, j) => xj < xi && y[j]! > y[i]!)).length;
      expect(outOfOrder(x, y)).toBe(slow);
    }
  });
});
