/**
 * A small inline-SVG line chart of timed points over a window that ends at the newest one: no
 * library, nothing fetched. An hour of samples is more points than the chart has pixels, so each
 * pixel column shows the highest value that falls in it (a peak never vanishes between pixels).
 * The chart is one image to assistive technology, named with its latest and highest values.
 */
const SVG = "http://www.w3.org/2000/svg";
const WIDTH = 240;
const HEIGHT = 64;

function svg<K extends keyof SVGElementTagNameMap>(tag: K, attrs: Record<string, string>): SVGElementTagNameMap[K] {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, v);
  return el;
}

export interface TimedPoint {
  at: number;
  value: number;
}

/** "the last 12 minutes", "the last 45 seconds". */
export function spanText(ms: number): string {
  const minutes = Math.round(ms / 60_000);
  if (minutes >= 2) return `the last ${minutes} minutes`;
  return `the last ${Math.max(1, Math.round(ms / 1000))} seconds`;
}

/** At most one point per pixel column (its highest value), x in [0, WIDTH]. */
export function columns(points: readonly TimedPoint[], end: number, spanMs: number): { x: number; value: number }[] {
  const start = end - spanMs;
  const byColumn = new Map<number, number>();
  for (const p of points) {
    if (p.at < start || p.at > end) continue;
    const x = Math.round(((p.at - start) / Math.max(1, spanMs)) * WIDTH);
    const value = Number.isFinite(p.value) ? Math.max(0, p.value) : 0;
    byColumn.set(x, Math.max(byColumn.get(x) ?? 0, value));
  }
  return [...byColumn.entries()].sort((a, b) => a[0] - b[0]).map(([x, value]) => ({ x, value }));
}

export class Sparkline {
  readonly element: SVGSVGElement;
  private readonly line: SVGPolylineElement;
  private readonly area: SVGPolygonElement;
  private readonly peak: SVGTextElement;
  private readonly title: SVGTitleElement;
  private last = 0;

  constructor(
    private readonly label: string,
    private readonly format: (v: number) => string = (v) => v.toLocaleString(),
  ) {
    this.element = svg("svg", {
      viewBox: `0 0 ${WIDTH} ${HEIGHT}`,
      preserveAspectRatio: "none",
      role: "img",
      class: "sparkline",
    });
    this.title = svg("title", {});
    this.area = svg("polygon", { class: "area", points: "" });
    this.line = svg("polyline", { class: "line", points: "", fill: "none" });
    this.peak = svg("text", { x: "4", y: "12", class: "peak" });
    this.element.append(
      this.title,
      svg("line", { x1: "0", y1: String(HEIGHT - 0.5), x2: String(WIDTH), y2: String(HEIGHT - 0.5), class: "axis" }),
      this.area,
      this.line,
      this.peak,
    );
    this.show([], 0, 1);
  }

  get latest(): number {
    return this.last;
  }

  /** Draws `points` over the `spanMs` that end at `end` (the newest sample at the right edge). */
  show(points: readonly TimedPoint[], end: number, spanMs: number): void {
    const cols = columns(points, end, spanMs);
    const max = Math.max(1, ...cols.map((c) => c.value));
    const coords = cols.map((c) => `${c.x.toFixed(1)},${(HEIGHT - 2 - (c.value / max) * (HEIGHT - 18)).toFixed(1)}`);
    this.line.setAttribute("points", coords.join(" "));
    const first = cols[0];
    const lastCol = cols[cols.length - 1];
    this.area.setAttribute(
      "points",
      first && lastCol ? `${first.x.toFixed(1)},${HEIGHT} ${coords.join(" ")} ${lastCol.x.toFixed(1)},${HEIGHT}` : "",
    );
    this.last = points[points.length - 1]?.value ?? 0;
    const peak = Math.max(0, ...cols.map((c) => c.value));
    this.peak.textContent = `max ${this.format(peak)}`;
    this.title.textContent =
      cols.length === 0
        ? `${this.label}: no samples yet`
        : `${this.label}: now ${this.format(this.last)}, highest ${this.format(peak)} over ${spanText(spanMs)}`;
  }
}

export interface LoopChartSeries {
  rate: readonly TimedPoint[];
  finishing: readonly TimedPoint[];
  p99: readonly TimedPoint[];
  target: readonly TimedPoint[];
}

/**
 * The admission loop on one chart: the rate it set and the rate sessions finished at (per second,
 * one scale), the claim path's p99 and its target (ms, the other scale, the target dashed). Where
 * the p99 line crosses the target the rate line should turn down; where the finishing line sits
 * under the rate, checkout is not keeping up.
 */
export class LoopChart {
  readonly element: SVGSVGElement;
  private readonly lines: Record<keyof LoopChartSeries, SVGPolylineElement>;
  private readonly title: SVGTitleElement;
  /** The two scales' tops, as text beside the chart (a wide chart would stretch text drawn in it). */
  readonly scales: HTMLElement;

  constructor(private readonly label: string) {
    this.element = svg("svg", {
      viewBox: `0 0 ${WIDTH} ${HEIGHT}`,
      preserveAspectRatio: "none",
      role: "img",
      class: "sparkline loop-chart",
    });
    this.title = svg("title", {});
    this.scales = document.createElement("span");
    this.scales.className = "chart-unit loop-scales";
    // Colours as attributes (the stylesheet's .line is the one-series chart's).
    const line = (cls: string, stroke: string, dash = "") =>
      svg("polyline", {
        class: `loop-line ${cls}`,
        points: "",
        fill: "none",
        stroke,
        "stroke-width": "2",
        "vector-effect": "non-scaling-stroke",
        ...(dash ? { "stroke-dasharray": dash } : {}),
      });
    this.lines = {
      rate: line("loop-rate", "#4b3fd6"),
      finishing: line("loop-finishing", "#1f8a4c"),
      p99: line("loop-p99", "#c2410c"),
      target: line("loop-target", "#c2410c", "4 3"),
    };
    this.element.append(
      this.title,
      svg("line", { x1: "0", y1: String(HEIGHT - 0.5), x2: String(WIDTH), y2: String(HEIGHT - 0.5), class: "axis" }),
      this.lines.target,
      this.lines.p99,
      this.lines.finishing,
      this.lines.rate,
    );
    this.show({ rate: [], finishing: [], p99: [], target: [] }, 0, 1);
  }

  show(series: LoopChartSeries, end: number, spanMs: number): void {
    const cols = {
      rate: columns(series.rate, end, spanMs),
      finishing: columns(series.finishing, end, spanMs),
      p99: columns(series.p99, end, spanMs),
      target: columns(series.target, end, spanMs),
    };
    const top = (names: (keyof LoopChartSeries)[]) => Math.max(1, ...names.flatMap((n) => cols[n].map((c) => c.value)));
    const perSecond = top(["rate", "finishing"]);
    const ms = top(["p99", "target"]);
    for (const name of Object.keys(cols) as (keyof LoopChartSeries)[]) {
      const max = name === "p99" || name === "target" ? ms : perSecond;
      this.lines[name].setAttribute(
        "points",
        cols[name]
          .map((c) => `${c.x.toFixed(1)},${(HEIGHT - 2 - (c.value / max) * (HEIGHT - 18)).toFixed(1)}`)
          .join(" "),
      );
    }
    const last = (points: readonly TimedPoint[]) => points[points.length - 1]?.value;
    const rate = last(series.rate);
    this.scales.textContent = `top of the chart: ${perSecond.toLocaleString()}/s · ${Math.round(ms).toLocaleString()} ms`;
    if (rate === undefined) {
      this.title.textContent = `${this.label}: no steps yet`;
      return;
    }
    const finishing = last(series.finishing);
    const p99 = last(series.p99);
    const target = last(series.target);
    this.title.textContent =
      `${this.label}: rate set ${rate.toLocaleString()}/s, sessions finishing ` +
      `${finishing === undefined ? "unknown" : `${finishing.toLocaleString()}/s`}, claim p99 ` +
      `${p99 === undefined ? "no claims" : `${Math.round(p99).toLocaleString()} ms`}` +
      `${target === undefined ? "" : ` (target ${target.toLocaleString()} ms)`} over ${spanText(spanMs)}`;
  }
}
