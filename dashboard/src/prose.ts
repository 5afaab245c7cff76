// The API document's descriptions as elements: paragraphs, "- " lists and `code`, all as text
// nodes (the text comes from the API and is never parsed as HTML).
import { h } from "./dom.js";

/** A line's text with its `code` spans as <code>. */
function inline(text: string): (Node | string)[] {
  const parts = text.split("`");
  if (parts.length % 2 === 0) return [text]; // an unpaired backtick: no code spans
  return parts.map((part, i) => (i % 2 === 1 ? h("code", null, part) : part));
}

/** Paragraphs separated by blank lines; a block whose lines start with "- " is a list. */
export function prose(text: string): HTMLElement[] {
  const out: HTMLElement[] = [];
  for (const block of text.split(/\n\s*\n/)) {
    const lines = block.split("\n").filter((l) => l.trim() !== "");
    if (lines.length === 0) continue;
    if (lines[0].startsWith("- ")) {
      const items: string[] = [];
      for (const l of lines) {
        if (l.startsWith("- ")) items.push(l.slice(2));
        else items[items.length - 1] += " " + l.trim();
      }
      out.push(h("ul", null, items.map((i) => h("li", null, inline(i)))));
    } else {
      out.push(h("p", null, inline(lines.map((l) => l.trim()).join(" "))));
    }
  }
  return out;
}
