// A tiny DOM builder and formatters. Text always goes in as text nodes, never as HTML.
import { timestampDate, type Timestamp } from "@better-compute/client";

type Child = Node | string | number | null | undefined | false;
type Attrs = Record<string, string | number | boolean | ((e: Event) => void) | undefined | null>;

export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attrs?: Attrs | null,
  ...children: (Child | Child[])[]
): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs ?? {})) {
    if (v === undefined || v === null || v === false) continue;
    if (typeof v === "function") el.addEventListener(k.replace(/^on/, ""), v);
    else if (v === true) el.setAttribute(k, "");
    else el.setAttribute(k, String(v));
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    el.append(typeof c === "object" ? c : String(c));
  }
  return el;
}

export function table(headers: string[], rows: HTMLTableRowElement[], empty: string): HTMLElement {
  if (rows.length === 0) return h("p", { class: "empty" }, empty);
  return h(
    "div",
    { class: "table-wrap" },
    h("table", null, h("thead", null, h("tr", null, headers.map((t) => h("th", null, t)))), h("tbody", null, rows)),
  );
}

export function badge(text: string, kind: string = text): HTMLElement {
  return h("span", { class: `badge badge-${kind.replace(/[^a-z0-9_-]/gi, "")}` }, text);
}

export function bytes(n: bigint | number): string {
  let v = Number(n);
  const units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${v >= 100 || i === 0 ? Math.round(v) : v.toFixed(1)} ${units[i]}`;
}

/** "3 min ago" in a <time> whose title is the exact time; "—" for unset. */
export function when(ts: Timestamp | undefined): HTMLElement | string {
  if (!ts) return "—";
  const d = timestampDate(ts);
  const s = Math.round((Date.now() - d.getTime()) / 1000);
  const abs = Math.abs(s);
  const [n, unit] =
    abs < 60 ? [abs, "s"] : abs < 3600 ? [Math.round(abs / 60), "min"] : abs < 86400 ? [Math.round(abs / 3600), "h"] : [Math.round(abs / 86400), "d"];
  const text = s >= 0 ? `${n} ${unit} ago` : `in ${n} ${unit}`;
  return h("time", { datetime: d.toISOString(), title: d.toISOString() }, text);
}

export function shortId(id: string): string {
  return id.length > 13 ? id.slice(0, 8) + "…" : id;
}

/** A bar showing used of total, with the numbers as text. */
export function meter(used: number, total: number, label: string): HTMLElement {
  const pct = total > 0 ? Math.min(100, (used / total) * 100) : 0;
  const fill = h("div", { class: "meter-fill" });
  fill.style.width = `${pct.toFixed(1)}%`; // CSSOM, which a style-src 'self' policy allows
  return h(
    "div",
    { class: "meter", title: `${pct.toFixed(0)}%` },
    h("div", { class: "meter-label" }, label),
    h("div", { class: "meter-track" }, fill),
  );
}
