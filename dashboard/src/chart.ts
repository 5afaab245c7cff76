// An inline SVG line chart of fractions (0..1) over time: one line per series (or a filled area),
// points at any step.
const SVG = "http://www.w3.org/2000/svg";
const COLORS = ["#2563eb", "#16a34a", "#d97706", "#dc2626", "#7c3aed", "#0891b2", "#db2777", "#4b5563"];

export interface Series {
  name: string;
  /** Points in time order: t in milliseconds since the epoch, v a fraction 0..1. */
  points: { t: number; v: number }[];
  /** Fill the area under the line (drawn beneath the lines). */
  area?: boolean;
}

function el<K extends keyof SVGElementTagNameMap>(tag: K, attrs: Record<string, string | number>, text?: string): SVGElementTagNameMap[K] {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
  if (text !== undefined) e.textContent = text;
  return e;
}

function tickLabel(t: number, spanMs: number): string {
  const d = new Date(t);
  const hm = `${String(d.getHours()).padStart(2, "0")}:${String(d.getMinutes()).padStart(2, "0")}`;
  if (spanMs <= 36 * 3600_000) return hm;
  return `${d.getMonth() + 1}/${d.getDate()}${spanMs <= 8 * 86400_000 ? " " + hm : ""}`;
}

export function lineChart(series: Series[], start: number, end: number, title: string, empty = "No metered use in this period"): SVGSVGElement {
  const W = 760, H = 240, L = 44, R = 24, T = 12, B = 28;
  const x = (t: number) => L + ((t - start) / Math.max(1, end - start)) * (W - L - R);
  const y = (v: number) => T + (1 - Math.max(0, Math.min(1, v))) * (H - T - B);
  const svg = el("svg", { viewBox: `0 0 ${W} ${H + 8 + 18 * Math.ceil(series.length / 4)}`, role: "img", class: "chart" });
  svg.append(el("title", {}, title));
  for (const v of [0, 0.25, 0.5, 0.75, 1]) {
    svg.append(el("line", { x1: L, x2: W - R, y1: y(v), y2: y(v), class: "grid" }));
    svg.append(el("text", { x: L - 6, y: y(v) + 4, "text-anchor": "end", class: "axis" }, `${v * 100}%`));
  }
  const span = end - start;
  const ticks = 6;
  for (let i = 0; i <= ticks; i++) {
    const t = start + (span * i) / ticks;
    svg.append(el("line", { x1: x(t), x2: x(t), y1: H - B, y2: H - B + 4, class: "grid" }));
    svg.append(el("text", { x: x(t), y: H - B + 16, "text-anchor": "middle", class: "axis" }, tickLabel(t, span)));
  }
  const drawn = series.filter((s) => s.points.length > 0);
  if (drawn.every((s) => s.points.every((p) => p.v === 0))) {
    svg.append(el("text", { x: (L + W - R) / 2, y: (T + H - B) / 2, "text-anchor": "middle", class: "chart-empty" }, empty));
  }
  drawn.forEach((s, i) => {
    const color = COLORS[i % COLORS.length];
    const d = s.points.map((p, j) => `${j === 0 ? "M" : "L"}${x(p.t).toFixed(1)},${y(p.v).toFixed(1)}`).join("");
    if (s.area && s.points.length > 0) {
      const first = s.points[0], last = s.points[s.points.length - 1];
      const fill = `${d}L${x(last.t).toFixed(1)},${y(0).toFixed(1)}L${x(first.t).toFixed(1)},${y(0).toFixed(1)}Z`;
      svg.append(el("path", { d: fill, fill: color, "fill-opacity": 0.18, stroke: "none", "data-area": s.name }));
    }
    svg.append(el("path", { d, fill: "none", stroke: color, "stroke-width": 2, "data-series": s.name }));
    const lx = L + (i % 4) * 180;
    const ly = H + 8 + 18 * Math.floor(i / 4);
    svg.append(el("rect", { x: lx, y: ly - 9, width: 10, height: 10, fill: color }));
    const peak = Math.max(...s.points.map((p) => p.v));
    svg.append(el("text", { x: lx + 14, y: ly, class: "legend" }, `${s.name} (peak ${(peak * 100).toFixed(0)}%)`));
  });
  return svg;
}
