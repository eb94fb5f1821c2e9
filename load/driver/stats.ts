/**
 * Statistics of the load driver: Kendall's tau-b in O(n log n) (Knight's algorithm, the one
 * scipy uses) and latency percentiles.
 */

/**
 * How many items come strictly before (in `y`) an item strictly before them in `x`: for a line,
 * the fans admitted before some fan ahead of them. 0 when `y` never decreases along `x`, ties
 * allowed (tau-b is below 1 then whenever several items tie in `y` alone: fans admitted in one
 * batch share a millisecond). O(n log n).
 */
export function outOfOrder(x: readonly number[], y: readonly number[]): number {
  if (x.length !== y.length) throw new Error(`outOfOrder: lengths differ (${x.length} vs ${y.length})`);
  const idx = Array.from({ length: x.length }, (_, i) => i).sort((a, b) => x[a]! - x[b]! || y[a]! - y[b]!);
  let count = 0;
  // the largest y of the items strictly before in x; those tied in x with the current one wait
  let maxBefore = Number.NEGATIVE_INFINITY;
  for (let i = 0; i < idx.length; ) {
    let j = i;
    while (j < idx.length && x[idx[j]!] === x[idx[i]!]) j++;
    for (let k = i; k < j; k++) if (y[idx[k]!]! < maxBefore) count++;
    for (let k = i; k < j; k++) maxBefore = Math.max(maxBefore, y[idx[k]!]!);
    i = j;
  }
  return count;
}

/** Number of pairs among `t` tied items. */
const pairs = (t: number) => (t * (t - 1)) / 2;

/**
 * Kendall's tau-b between `x` and `y` (same length): 1 when they order the items the same way,
 * -1 when in reverse, ties corrected. NaN when fewer than 2 items or when one side is constant.
 */
export function kendallTau(x: readonly number[], y: readonly number[]): number {
  if (x.length !== y.length) throw new Error(`kendallTau: lengths differ (${x.length} vs ${y.length})`);
  const n = x.length;
  if (n < 2) return Number.NaN;
  // sort by x, then y
  const idx = Array.from({ length: n }, (_, i) => i);
  idx.sort((a, b) => x[a]! - x[b]! || y[a]! - y[b]!);
  const xs = idx.map((i) => x[i]!);
  let ys = idx.map((i) => y[i]!);

  let tiesX = 0; // pairs tied on x
  let tiesXY = 0; // pairs tied on both
  for (let i = 0, runX = 1, runXY = 1; i <= n; i++) {
    if (i > 0 && i < n && xs[i] === xs[i - 1]) {
      runX++;
      if (ys[i] === ys[i - 1]) runXY++;
      else {
        tiesXY += pairs(runXY);
        runXY = 1;
      }
    } else if (i > 0) {
      tiesX += pairs(runX);
      tiesXY += pairs(runXY);
      runX = 1;
      runXY = 1;
    }
  }

  // merge sort ys, counting the swaps (discordant pairs, ties in y not counted)
  let swaps = 0;
  let buf = new Array<number>(n);
  for (let width = 1; width < n; width *= 2) {
    for (let lo = 0; lo < n; lo += 2 * width) {
      const mid = Math.min(lo + width, n);
      const hi = Math.min(lo + 2 * width, n);
      let i = lo;
      let j = mid;
      let k = lo;
      while (i < mid && j < hi) {
        if (ys[j]! < ys[i]!) {
          buf[k++] = ys[j++]!;
          swaps += mid - i;
        } else buf[k++] = ys[i++]!;
      }
      while (i < mid) buf[k++] = ys[i++]!;
      while (j < hi) buf[k++] = ys[j++]!;
    }
    [ys, buf] = [buf, ys];
  }

  let tiesY = 0;
  for (let i = 1, run = 1; i <= n; i++) {
    if (i < n && ys[i] === ys[i - 1]) run++;
    else {
      tiesY += pairs(run);
      run = 1;
    }
  }

  const total = pairs(n);
  const concordantMinusDiscordant = total - tiesX - tiesY + tiesXY - 2 * swaps;
  const denominator = Math.sqrt((total - tiesX) * (total - tiesY));
  return denominator === 0 ? Number.NaN : concordantMinusDiscordant / denominator;
}

/** The O(n^2) definition, for tests. */
export function kendallTauNaive(x: readonly number[], y: readonly number[]): number {
  let c = 0;
  let d = 0;
  let tx = 0;
  let ty = 0;
  for (let i = 0; i < x.length; i++) {
    for (let j = i + 1; j < x.length; j++) {
      const a = Math.sign(x[i]! - x[j]!);
      const b = Math.sign(y[i]! - y[j]!);
      if (a === 0 && b === 0) continue;
      if (a === 0) tx++;
      else if (b === 0) ty++;
      else if (a === b) c++;
      else d++;
    }
  }
  const den = Math.sqrt((c + d + tx) * (c + d + ty));
  return den === 0 ? Number.NaN : (c - d) / den;
}

/** The q-quantile (0..1) of sorted values, nearest rank. */
export function quantile(sorted: readonly number[], q: number): number {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))]!;
}

export interface LatencySummary {
  count: number;
  p50: number;
  p95: number;
  p99: number;
  max: number;
}

export function summarize(values: readonly number[]): LatencySummary {
  const sorted = [...values].sort((a, b) => a - b);
  return {
    count: sorted.length,
    p50: quantile(sorted, 0.5),
    p95: quantile(sorted, 0.95),
    p99: quantile(sorted, 0.99),
    max: sorted.at(-1) ?? 0,
  };
}
