// The API page: a reference rendered from the OpenAPI document the API serves, public, at
// {apiUrl}/openapi.json. It needs no key, so it works signed in and signed out. The document's text
// goes into the page as text nodes only.
import { badge, h, table } from "./dom.js";
import type { Page } from "./pages.js";
import { prose } from "./prose.js";

interface Schema {
  type?: string | string[];
  title?: string;
  description?: string;
  format?: string;
  contentEncoding?: string;
  enum?: string[];
  $ref?: string;
  items?: Schema;
  additionalProperties?: Schema | boolean;
  properties?: Record<string, Schema>;
}

interface Example {
  body: string;
  status?: number;
  note?: string;
}

interface Operation {
  operationId: string;
  summary?: string;
  description?: string;
  tags?: string[];
  requestBody?: { content?: Record<string, { schema?: Schema }> };
  responses?: Record<string, { content?: Record<string, { schema?: Schema }> }>;
  "x-better-compute-procedure"?: string;
  "x-better-compute-permission"?: string;
  "x-better-compute-public"?: boolean;
  "x-better-compute-idempotent"?: boolean;
  "x-better-compute-audited"?: boolean;
  "x-better-compute-module"?: string;
  "x-better-compute-example"?: Example;
}

interface OpenApi {
  info?: { title?: string; version?: string; description?: string };
  tags?: { name: string; description?: string }[];
  paths?: Record<string, { post?: Operation }>;
  components?: { schemas?: Record<string, Schema> };
}

/** A method of the document: its route below the base path ("nodes/list") and operation. */
interface Method {
  route: string;
  group: string;
  op: Operation;
}

/** The hash of a method's entry: #/api/nodes/list. */
export const methodHash = (route: string) => `#/api/${route}`;

/** Fetches the document without credentials: it is public, and the key is never sent for it. */
async function fetchDocument(apiUrl: string): Promise<OpenApi> {
  const url = `${apiUrl}/openapi.json`;
  let res: Response;
  try {
    res = await fetch(url, { credentials: "omit", redirect: "error", referrerPolicy: "no-referrer", cache: "no-store" });
  } catch {
    const origin = new URL(apiUrl).origin;
    throw new Error(
      origin === location.origin
        ? `Could not reach the API at ${apiUrl}.`
        : `Could not reach the API at ${apiUrl}. A page on ${location.origin} can read it only if the API lists ` +
            `${location.origin} in cors.allowedOrigins.`,
    );
  }
  if (!res.ok) throw new Error(`GET ${url} answered ${res.status} ${res.statusText}`.trim());
  const doc = (await res.json()) as OpenApi;
  if (!doc || typeof doc !== "object" || typeof doc.paths !== "object") throw new Error(`${url} is not an OpenAPI document`);
  return doc;
}

const REF_PREFIX = "#/components/schemas/";

function refName(s: Schema): string | null {
  return typeof s.$ref === "string" && s.$ref.startsWith(REF_PREFIX) ? s.$ref.slice(REF_PREFIX.length) : null;
}

function shortName(name: string): string {
  return name.slice(name.lastIndexOf(".") + 1);
}

/** The request or 200 response message of an operation, by name. */
function messageOf(content: Record<string, { schema?: Schema }> | undefined): string | null {
  const schema = content?.["application/json"]?.schema;
  return schema ? refName(schema) : null;
}

/** Quotes s for a POSIX shell. */
function shellQuote(s: string): string {
  return `'${s.replace(/'/g, `'\\''`)}'`;
}

const FIXTURE = /\$[A-Z][A-Z0-9_]*/;

/**
 * The example as a curl command line for the API at apiUrl. A body that names fixtures
 * ($NODE_ID) comes from a here-document so the shell fills them in; anything else the shell would
 * expand there is escaped.
 */
export function curlExample(apiUrl: string, route: string, op: Operation): string {
  const body = op["x-better-compute-example"]?.body ?? "{}";
  const lines = [`curl -sS -X POST ${shellQuote(`${apiUrl}/${route}`)} \\`];
  if (!op["x-better-compute-public"]) {
    lines.push(`  -H "Authorization: Bearer $BETTER_COMPUTE_API_KEY" -H 'X-Better-Compute: 1' \\`);
  }
  if (FIXTURE.test(body) && !body.split("\n").includes("EOF")) {
    const escaped = body.replace(/[\\`]/g, "\\$&").replace(/\$(?![A-Z][A-Z0-9_]*)/g, "\\$");
    lines.push(`  -H 'Content-Type: application/json' -d @- <<EOF`, escaped, "EOF");
  } else {
    lines.push(`  -H 'Content-Type: application/json' -d ${shellQuote(body)}`);
  }
  return lines.join("\n");
}

/** Copies text, through the Clipboard API or, where it is refused, the selection of pre. */
async function copy(text: string, pre: HTMLElement): Promise<boolean> {
  try {
    await navigator.clipboard.writeText(text);
    return true;
  } catch {
    const range = document.createRange();
    range.selectNodeContents(pre);
    const sel = getSelection();
    sel?.removeAllRanges();
    sel?.addRange(range);
    return document.execCommand("copy");
  }
}

/** Renders schemas: types as text with buttons that expand a referenced message or enum below the row. */
class Schemas {
  constructor(private readonly all: Record<string, Schema>) {}

  /** The fields of a message as a table, or its values for an enum. */
  body(name: string): HTMLElement {
    const s = this.all[name];
    if (!s) return h("p", { class: "empty" }, `${name} is not in the document.`);
    if (s.enum) return this.enumValues(s);
    const props = Object.entries(s.properties ?? {});
    if (props.length === 0) {
      return h("p", { class: "empty" }, s.additionalProperties ? "Any JSON object." : "No fields: send {}.");
    }
    return table(
      ["Field", "Type", "Description"],
      props.map(([field, p]) => this.row(field, p)),
      "",
    );
  }

  /** A request or response message: its description and fields. */
  message(name: string): HTMLElement {
    const d = this.all[name]?.description;
    return h("div", { class: "api-message", "data-type": name }, d && h("div", { class: "api-prose sub" }, prose(d)), this.body(name));
  }

  /** A message or enum's name, description and body, as an expanded type shows it. */
  block(name: string): HTMLElement {
    const s = this.all[name];
    return h(
      "div",
      { class: "api-type", "data-type": name },
      h("div", { class: "api-type-name" }, h("code", null, name), s?.enum && badge("enum")),
      s?.description && !s.enum && h("div", { class: "api-prose" }, prose(s.description)),
      this.body(name),
    );
  }

  /** An enum's values with what each means, from its description's "- `VALUE`: meaning" lines. */
  private enumValues(s: Schema): HTMLElement {
    const meaning = new Map<string, string>();
    const rest: string[] = [];
    for (const line of (s.description ?? "").split("\n")) {
      const m = /^- `([^`]+)`: (.*)$/.exec(line);
      if (m) meaning.set(m[1], m[2]);
      else rest.push(line);
    }
    return h(
      "div",
      null,
      rest.join("\n").trim() && h("div", { class: "api-prose" }, prose(rest.join("\n"))),
      table(
        ["Value", "Meaning"],
        (s.enum ?? []).map((v) =>
          h("tr", { "data-enum-value": v }, h("td", null, h("code", null, v)), h("td", { class: "wrap api-prose" }, prose(meaning.get(v) ?? ""))),
        ),
        "No values.",
      ),
    );
  }

  private row(field: string, p: Schema): HTMLTableRowElement {
    const row = h("tr", { "data-field": field });
    row.append(
      h("td", null, h("code", null, field)),
      h("td", { class: "api-type-cell" }, this.type(p, row)),
      h("td", { class: "wrap api-prose" }, prose(p.description ?? "")),
    );
    return row;
  }

  /** A property's type as text, a referenced type as a button that expands it below row. */
  private type(p: Schema, row: HTMLTableRowElement): (Node | string)[] {
    const ref = refName(p);
    if (ref) return [this.expander(ref, row)];
    const types = Array.isArray(p.type) ? p.type : p.type ? [p.type] : [];
    if (types.includes("array") && p.items) return ["array of ", ...this.type(p.items, row)];
    if (types.includes("object") && p.additionalProperties && typeof p.additionalProperties === "object") {
      return ["map of string to ", ...this.type(p.additionalProperties, row)];
    }
    if (types.length === 0) return ["any JSON"];
    const detail = p.format ?? p.contentEncoding;
    const out: (Node | string)[] = [types.join(" | ")];
    if (detail) out.push(" ", h("span", { class: "sub" }, `(${detail})`));
    if (p.enum) out.push(": ", ...p.enum.flatMap((v, i) => [i > 0 ? ", " : "", h("code", null, v)]));
    return out;
  }

  private expander(name: string, row: HTMLTableRowElement): HTMLButtonElement {
    const isEnum = !!this.all[name]?.enum;
    const button = h(
      "button",
      { type: "button", class: "api-type-link", "aria-expanded": "false", "data-type": name, title: name },
      shortName(name),
      isEnum && h("span", { class: "sub" }, " (enum)"),
    );
    let nested: HTMLTableRowElement | null = null;
    button.addEventListener("click", () => {
      if (nested) {
        nested.remove();
        nested = null;
        button.setAttribute("aria-expanded", "false");
        return;
      }
      nested = h("tr", { class: "api-nested" }, h("td", { colspan: 3 }, this.block(name)));
      row.after(nested);
      button.setAttribute("aria-expanded", "true");
    });
    return button;
  }
}

function methodBadges(op: Operation): HTMLElement[] {
  const out: HTMLElement[] = [];
  const perm = op["x-better-compute-permission"];
  if (perm) out.push(h("span", { class: "badge badge-permission", title: "Permission the key needs" }, perm));
  if (op["x-better-compute-public"]) out.push(badge("public", "public"));
  if (op["x-better-compute-idempotent"]) out.push(badge("idempotent", "idempotent"));
  if (op["x-better-compute-audited"]) out.push(badge("audited", "audited"));
  const mod = op["x-better-compute-module"];
  if (mod) out.push(h("span", { class: "badge badge-module", title: "Served only where this module is enabled" }, `module: ${mod}`));
  return out;
}

/** One method's details, built when it is first opened. */
function methodBody(apiUrl: string, basePath: string, m: Method, schemas: Schemas): HTMLElement[] {
  const { op } = m;
  const req = messageOf(op.requestBody?.content);
  const res = messageOf(op.responses?.["200"]?.content);
  const example = op["x-better-compute-example"];
  const command = curlExample(apiUrl, m.route, op);
  const pre = h("pre", { class: "api-curl" }, h("code", null, command));
  const copied = h("span", { class: "sub api-copied", role: "status" });
  const copyButton = h("button", { type: "button", class: "api-copy" }, "Copy");
  copyButton.addEventListener("click", async () => {
    copied.textContent = (await copy(command, pre)) ? "Copied." : "Select the command and copy it.";
  });
  const status = example?.status ?? 200;
  return [
    h(
      "p",
      { class: "api-route" },
      h("code", null, `POST ${basePath}/${m.route}`),
      op["x-better-compute-procedure"] && h("span", { class: "sub" }, ` also ${op["x-better-compute-procedure"]} (Connect, gRPC, gRPC-Web)`),
    ),
    h("div", { class: "api-prose" }, prose(op.description ?? op.summary ?? "")),
    h("h3", null, "Request ", req && h("code", { class: "sub" }, req)),
    req ? schemas.message(req) : h("p", { class: "empty" }, "Not described."),
    h("h3", null, "Response ", res && h("code", { class: "sub" }, res)),
    res ? schemas.message(res) : h("p", { class: "empty" }, "Not described."),
    h("h3", null, "Example ", copyButton, copied),
    pre,
    h(
      "p",
      { class: "sub" },
      `Answers ${status} in better-compute dev.`,
      example?.note ? ` ${example.note}` : "",
      /\$[A-Z]/.test(example?.body ?? "") ? " Set the $NAMES it uses (ids of your resources) first." : "",
    ),
  ];
}

/** The rendered reference of one API, kept across the app's refreshes so filters and expanded parts stay. */
interface Reference {
  view: HTMLElement;
  /** Opens and scrolls to the method a hash names, or to the top. */
  show(hash: string): void;
}

function build(apiUrl: string, doc: OpenApi): Reference {
  const basePath = new URL(apiUrl).pathname;
  const schemas = new Schemas(doc.components?.schemas ?? {});
  const methods: Method[] = Object.entries(doc.paths ?? {})
    .filter(([, item]) => item.post)
    .map(([path, item]) => {
      const route = path.replace(/^\//, "");
      return { route, group: item.post!.tags?.[0] ?? route.split("/")[0], op: item.post! };
    })
    .sort((a, b) => a.route.localeCompare(b.route));
  const tagText = new Map((doc.tags ?? []).map((t) => [t.name, t.description ?? ""]));
  const groups = [...new Set(methods.map((m) => m.group))].sort((a, b) => a.localeCompare(b));

  const entries = new Map<string, { el: HTMLDetailsElement; link: HTMLElement; operationId: string; open(): void }>();
  const sections: HTMLElement[] = [];
  const indexGroups: HTMLElement[] = [];
  for (const g of groups) {
    const items = methods.filter((m) => m.group === g);
    const list: HTMLElement[] = [];
    const links: HTMLElement[] = [];
    for (const m of items) {
      const el = h(
        "details",
        { class: "api-method", id: `method-${m.route}`, "data-route": m.route },
        h(
          "summary",
          null,
          h("code", { class: "api-name" }, m.route),
          h("span", { class: "api-summary" }, m.op.summary ?? ""),
          h("span", { class: "api-badges" }, methodBadges(m.op)),
        ),
      );
      let built = false;
      const open = () => {
        if (built) return;
        built = true;
        el.append(h("div", { class: "api-method-body" }, methodBody(apiUrl, basePath, m, schemas)));
      };
      el.addEventListener("toggle", () => el.open && open());
      const link = h("li", { "data-route": m.route }, h("a", { href: methodHash(m.route) }, m.route.slice(g.length + 1) || m.route));
      entries.set(m.route, { el, link, operationId: m.op.operationId ?? "", open });
      list.push(el);
      links.push(link);
    }
    sections.push(
      h(
        "section",
        { class: "api-group", id: `group-${g}`, "data-group": g },
        h("h2", null, g),
        tagText.get(g) && h("div", { class: "api-prose sub" }, prose(tagText.get(g)!)),
        list,
      ),
    );
    indexGroups.push(h("li", { "data-group": g }, h("span", { class: "api-index-group" }, g), h("ul", null, links)));
  }

  const none = h("p", { class: "empty", hidden: true }, "No method matches.");
  const filter = h("input", {
    id: "api-filter",
    type: "search",
    placeholder: "Filter methods, e.g. nodes/list",
    "aria-label": "Filter methods by name",
    autocomplete: "off",
    spellcheck: "false",
  });
  filter.addEventListener("input", () => {
    const q = filter.value.trim().toLowerCase();
    let shown = 0;
    for (const [route, e] of entries) {
      const hit = !q || route.toLowerCase().includes(q) || e.operationId.toLowerCase().includes(q);
      e.el.hidden = !hit;
      e.link.hidden = !hit;
      if (hit) shown++;
    }
    for (const s of [...sections, ...indexGroups]) {
      s.hidden = ![...s.querySelectorAll<HTMLElement>("[data-route]")].some((x) => !x.hidden);
    }
    none.hidden = shown > 0;
  });

  const info = doc.info ?? {};
  const view = h(
    "div",
    { class: "api", id: "api" },
    h(
      "aside",
      { class: "api-index" },
      filter,
      h("ul", { id: "api-index" }, indexGroups),
    ),
    h(
      "div",
      { class: "api-main" },
      h("h1", null, info.title ?? "API", info.version && h("span", { class: "badge" }, info.version)),
      h(
        "p",
        { class: "sub" },
        `${methods.length} methods at ${apiUrl}, from `,
        h("a", { href: `${apiUrl}/openapi.json`, rel: "noreferrer", target: "_blank" }, "openapi.json"),
        " (OpenAPI 3.1).",
      ),
      h("section", { class: "card api-overview", id: "api-overview" }, h("h2", null, "Overview"), h("div", { class: "api-prose" }, prose(info.description ?? ""))),
      none,
      sections,
    ),
  );

  return {
    view,
    show(hash) {
      const target = decodeURIComponent(hash.replace(/^#\/?api\/?/, ""));
      const e = entries.get(target);
      if (!e) {
        window.scrollTo(0, 0);
        return;
      }
      if (e.el.hidden) {
        filter.value = "";
        filter.dispatchEvent(new Event("input"));
      }
      e.open();
      e.el.open = true;
      e.el.scrollIntoView({ block: "start" });
    },
  };
}

const references = new Map<string, Promise<Reference>>();
let shownHash: string | null = null;

/**
 * Renders the reference of the API at apiUrl into root: fetched once (again after a failure), then
 * the same elements put back, so the filter and the opened methods outlive a refresh.
 */
export async function renderReference(apiUrl: string, root: HTMLElement): Promise<void> {
  let ref = references.get(apiUrl);
  if (!ref) {
    ref = fetchDocument(apiUrl).then((doc) => build(apiUrl, doc));
    references.set(apiUrl, ref);
    ref.catch(() => references.delete(apiUrl));
  }
  const r = await ref;
  if (r.view.parentElement === root && shownHash === location.hash) return;
  if (r.view.parentElement !== root) root.replaceChildren(r.view);
  shownHash = location.hash;
  r.show(location.hash);
}

export const apiPage: Page = {
  title: "API",
  render: (ctx, root) => renderReference(ctx.apiUrl, root),
};
