/**
 * A small inline-SVG line chart of the last N samples: no library, nothing fetched. The chart is
 * one image to assistive technology, named with its latest and highest values.
 */
const SVG = "http://www.w3.org/2000/svg";
const WIDTH = 240;
const HEIGHT = 64;

function svg<K extends keyof SVGElementTagNameMap>(tag: K, attrs: Record<string, string>): SVGElementTagNameMap[K] {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, v);
  return el;
}

export class Sparkline {
  readonly element: SVGSVGElement;
  private readonly values: number[] = [];
  private readonly line: SVGPolylineElement;
  private readonly area: SVGPolygonElement;
  private readonly peak: SVGTextElement;
  private readonly title: SVGTitleElement;

  constructor(
    private readonly label: string,
    private readonly capacity = 120,
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
    this.render();
  }

  push(value: number): void {
    this.values.push(Number.isFinite(value) ? Math.max(0, value) : 0);
    if (this.values.length > this.capacity) this.values.shift();
    this.render();
  }

  get latest(): number {
    return this.values[this.values.length - 1] ?? 0;
  }

  private render() {
    const max = Math.max(1, ...this.values);
    const step = WIDTH / Math.max(1, this.capacity - 1);
    // Newest sample at the right edge; the line grows leftwards as samples arrive.
    const offset = (this.capacity - this.values.length) * step;
    const points = this.values.map((v, i) => {
      const x = offset + i * step;
      const y = HEIGHT - 2 - (v / max) * (HEIGHT - 18);
      return `${x.toFixed(1)},${y.toFixed(1)}`;
    });
    this.line.setAttribute("points", points.join(" "));
    this.area.setAttribute(
      "points",
      points.length > 0 ? `${offset.toFixed(1)},${HEIGHT} ${points.join(" ")} ${WIDTH},${HEIGHT}` : "",
    );
    const peak = Math.max(0, ...this.values);
    this.peak.textContent = `max ${this.format(peak)}`;
    this.title.textContent = `${this.label}: now ${this.format(this.latest)}, highest ${this.format(peak)} over the last ${this.values.length} samples`;
  }
}
