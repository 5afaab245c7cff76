// The nodes page: filters, search and server-side pages of nodes/list, with the true totals of
// nodes/summary, so a fleet of any size shows one page of rows and exact counts.
import { Code, ConnectError, type nodesv1 } from "@better-compute/client";

import { badge, bytes, h, shortId, table, when } from "./dom.js";
import type { Page } from "./pages.js";

const PAGE_SIZE = 100;
const STATES = ["joining", "ready", "cordoned", "draining", "drained", "retired"];

interface Filters {
  state: string;
  online: "" | "online" | "offline";
  gpuModel: string;
  pool: string;
  /** "key=value, key=value". */
  labels: string;
  /** A hostname prefix. */
  search: string;
}

const noFilters: Filters = { state: "", online: "", gpuModel: "", pool: "", labels: "", search: "" };
/** The applied filters and the page tokens visited under them (the current page last); they
 * outlive a render, which the app repeats every few seconds. */
let filters: Filters = { ...noFilters };
let tokens: string[] = [""];
/** What is typed in the text fields and not yet applied, kept across automatic refreshes. */
let draft: Pick<Filters, "pool" | "labels" | "search"> = { pool: "", labels: "", search: "" };

function apply(next: Filters): void {
  filters = next;
  draft = { pool: next.pool, labels: next.labels, search: next.search };
  tokens = [""];
}

const count = (n: bigint | number) => n.toLocaleString("en-US");

function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** Parses "key=value, key=value"; the API checks the syntax of keys and values. */
function parseLabels(s: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const part of s.split(",")) {
    const p = part.trim();
    if (!p) continue;
    const eq = p.indexOf("=");
    if (eq < 0) out[p] = "";
    else out[p.slice(0, eq).trim()] = p.slice(eq + 1).trim();
  }
  return out;
}

function request(f: Filters) {
  return {
    labelSelector: parseLabels(f.labels),
    states: f.state ? [f.state] : [],
    online: f.online === "" ? undefined : f.online === "online",
    gpuModel: f.gpuModel,
    pool: f.pool.trim(),
    hostnamePrefix: f.search.trim(),
  };
}

function gpuSummary(inv: nodesv1.Inventory | undefined): string {
  if (!inv) return "—";
  if (inv.gpus.length === 0) return "none";
  const byModel = new Map<string, number>();
  for (const g of inv.gpus) byModel.set(g.model, (byModel.get(g.model) ?? 0) + 1);
  return [...byModel].map(([m, n]) => `${n} × ${m}`).join(", ");
}

/** A badge when a node's GPUs need a look: quarantined as a whole, or some GPUs unhealthy. */
function gpuHealth(n: nodesv1.Node): HTMLElement | null {
  if (n.gpuQuarantined) return h("div", { class: "gpu-health" }, badge("GPUs quarantined", "unhealthy"));
  if (n.unhealthyGpus > 0) return h("div", { class: "gpu-health" }, badge(`${n.unhealthyGpus} unhealthy`, "unhealthy"));
  return null;
}

const canCordon = (s: string) => s === "joining" || s === "ready";
const canUncordon = (s: string) => s === "cordoned" || s === "draining" || s === "drained";
const canDrain = (s: string) => s === "joining" || s === "ready" || s === "cordoned";

function options(values: [string, string][], selected: string): HTMLOptionElement[] {
  return values.map(([v, label]) => h("option", { value: v, selected: v === selected }, label));
}

/** The filter form: selects apply at once, text fields on Enter or Apply. */
function filterForm(
  fleet: nodesv1.SummaryResponse,
  refresh: () => Promise<void>,
): { form: HTMLFormElement; restoreFocus: () => void } {
  const focused = document.activeElement instanceof HTMLInputElement ? document.activeElement.id : "";
  const text = (id: string, key: keyof typeof draft, placeholder: string) => {
    const input = h("input", { id, type: "search", placeholder, value: draft[key], "aria-label": placeholder });
    input.addEventListener("input", () => (draft[key] = input.value));
    return input;
  };
  const select = (id: string, key: "state" | "online" | "gpuModel", values: [string, string][], label: string) => {
    const el = h("select", { id, "aria-label": label }, options(values, filters[key]));
    el.addEventListener("change", () => {
      apply({ ...filters, ...draft, [key]: el.value });
      void refresh();
    });
    return el;
  };
  const models = fleet.gpuModels.map((m): [string, string] => [m.model, `${m.model || "(no model)"} (${count(m.nodes)} nodes)`]);
  if (filters.gpuModel && !fleet.gpuModels.some((m) => m.model === filters.gpuModel)) models.push([filters.gpuModel, filters.gpuModel]);
  const search = text("filter-search", "search", "Hostname starts with…");
  const fields = [
    search,
    select("filter-state", "state", [["", "Any state"], ...STATES.map((s): [string, string] => [s, s])], "State"),
    select("filter-online", "online", [["", "Online or not"], ["online", "Online"], ["offline", "Offline"]], "Online"),
    select("filter-gpu", "gpuModel", [["", "Any GPU model"], ...models], "GPU model"),
    text("filter-pool", "pool", "Pool"),
    text("filter-labels", "labels", "Labels: key=value, …"),
  ];
  const clear = h("button", { type: "button", id: "filter-clear" }, "Clear");
  clear.addEventListener("click", () => {
    apply({ ...noFilters });
    void refresh();
  });
  const form = h("form", { id: "node-filters", class: "filters" }, fields, h("button", { type: "submit", id: "filter-apply" }, "Apply"), clear);
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    apply({ ...filters, ...draft });
    void refresh();
  });
  const restoreFocus = () => {
    const el = focused ? form.querySelector<HTMLInputElement>(`#${focused}`) : null;
    if (el) {
      el.focus();
      el.setSelectionRange(el.value.length, el.value.length);
    }
  };
  return { form, restoreFocus };
}

/** How a node's session reaches its gateway: "via h2" or "via websocket", the gateway in the title. */
function session(n: nodesv1.Node): HTMLElement {
  if (!n.connected) return h("div", { class: "sub" }, "no session");
  const via = n.transport || "h2";
  return h("div", { class: "sub transport", title: `connected via ${via} to ${n.gatewayId}` }, `via ${via}`);
}

export const nodesPage: Page = {
  title: "Nodes",
  async render(ctx, root) {
    const req = request(filters);
    const filtered = JSON.stringify(filters) !== JSON.stringify(noFilters);
    const fleet = await ctx.bc.nodes.summary({});
    let sum: nodesv1.SummaryResponse | undefined;
    let list: nodesv1.ListResponse | undefined;
    let problem = "";
    try {
      [sum, list] = await Promise.all([
        filtered ? ctx.bc.nodes.summary(req) : fleet,
        ctx.bc.nodes.list({ ...req, pageSize: PAGE_SIZE, pageToken: tokens[tokens.length - 1], includeInventory: true }),
      ]);
    } catch (err) {
      // A filter the API refuses is shown next to the filters; anything else is the app's to report.
      if (ConnectError.from(err).code !== Code.InvalidArgument) throw err;
      problem = ConnectError.from(err).rawMessage;
    }
    const act = (verb: "cordon" | "uncordon" | "drain", n: nodesv1.Node) => async (e: Event) => {
      (e.currentTarget as HTMLButtonElement).disabled = true;
      try {
        const res = await ctx.bc.nodes[verb]({ id: n.id });
        ctx.flash(`${n.hostname}: ${verb} done, now ${res.node?.state ?? "?"}`, "ok");
      } catch (err) {
        ctx.flash(`${n.hostname}: ${verb} failed: ${errorText(err)}`, "error");
      }
      await ctx.refresh();
    };
    const nodes = list?.nodes ?? [];
    const rows = nodes.map((n) => {
      const inv = n.inventory;
      return h(
        "tr",
        { "data-node-id": n.id, "data-hostname": n.hostname },
        h("td", null, h("strong", null, n.hostname), h("div", { class: "sub" }, shortId(n.id))),
        h("td", { class: "state" }, badge(n.state)),
        h("td", { class: "status" }, badge(n.online ? "online" : "offline"), session(n)),
        h("td", null, n.pool || "—"),
        h("td", { class: "wrap" }, inv ? `${inv.cpus} CPUs` : "—", inv?.cpuModel && h("div", { class: "sub" }, inv.cpuModel)),
        h("td", null, inv ? bytes(inv.memoryBytes) : "—"),
        h("td", { class: "gpus" }, gpuSummary(inv), gpuHealth(n)),
        h("td", null, inv ? `${inv.os} ${inv.kernel}`.trim() || "—" : "—"),
        h("td", null, n.daemonVersion || "—"),
        h("td", null, when(n.lastSeenTime)),
        h(
          "td",
          null,
          h(
            "div",
            { class: "actions" },
            canCordon(n.state) && h("button", { type: "button", onclick: act("cordon", n) }, "Cordon"),
            canUncordon(n.state) && h("button", { type: "button", onclick: act("uncordon", n) }, "Uncordon"),
            canDrain(n.state) && h("button", { type: "button", class: "warn", onclick: act("drain", n) }, "Drain"),
          ),
        ),
      );
    });
    const { form, restoreFocus } = filterForm(fleet, () => ctx.refresh());
    const total = sum?.total ?? 0n;
    const summary = sum
      ? `${count(total)} nodes: ${count(sum.states["ready"] ?? 0n)} ready, ${count(sum.online)} online, ${count(sum.gpus)} GPUs` +
        (filtered ? ` (of ${count(fleet.total)} in the fleet)` : "")
      : "";
    const first = (tokens.length - 1) * PAGE_SIZE;
    const prev = h("button", { type: "button", id: "nodes-prev", disabled: tokens.length === 1 }, "Previous");
    prev.addEventListener("click", () => {
      tokens.pop();
      void ctx.refresh();
    });
    const next = h("button", { type: "button", id: "nodes-next", disabled: !list?.nextPageToken }, "Next");
    next.addEventListener("click", () => {
      if (list?.nextPageToken) tokens.push(list.nextPageToken);
      void ctx.refresh();
    });
    const parts: HTMLElement[] = [
      h("h1", null, "Nodes"),
      form,
      ...(problem ? [h("p", { class: "error", id: "filter-error" }, problem)] : []),
      h("p", { class: "summary" }, summary),
      table(
        ["Node", "State", "Status", "Pool", "CPU", "Memory", "GPUs", "OS", "Daemon", "Last seen", ""],
        rows,
        filtered || problem ? "No nodes match these filters." : "No nodes yet. Create a join token and start bcd on a host.",
      ),
    ];
    if (rows.length > 0) {
      const range = `${count(first + 1)}–${count(first + rows.length)} of ${count(total)}`;
      parts.push(h("div", { class: "pager" }, prev, h("span", { id: "nodes-range" }, range), next));
    }
    root.replaceChildren(...parts);
    restoreFocus();
  },
};
