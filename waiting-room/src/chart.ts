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
