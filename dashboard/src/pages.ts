// The dashboard's pages. Each renders into root from fresh API calls; the app calls it again to
// refresh.
import {
  leasesv1,
  paginate,
  timestampFromMs,
  timestampMs,
  type BetterCompute,
  type nodesv1,
  type poolsv1,
} from "@better-compute/client";

import { lineChart, type Series } from "./chart.js";
import { badge, bytes, h, meter, shortId, table, when } from "./dom.js";

export interface PageContext {
  bc: BetterCompute;
  /** Shows a message above the page. */
  flash(message: string, kind?: "ok" | "error"): void;
  /** Renders the current page again. */
  refresh(): Promise<void>;
}

export interface Page {
  title: string;
  render(ctx: PageContext, root: HTMLElement): Promise<void>;
}

async function collect<T>(it: AsyncIterable<T>, max: number): Promise<T[]> {
  const out: T[] = [];
  for await (const x of it) {
    out.push(x);
    if (out.length >= max) break;
  }
  return out;
}

/** Maps with at most limit calls in flight. */
async function mapLimit<T, R>(xs: T[], limit: number, f: (x: T) => Promise<R>): Promise<R[]> {
  const out = new Array<R>(xs.length);
  let next = 0;
  const worker = async () => {
    while (next < xs.length) {
      const i = next++;
      out[i] = await f(xs[i]);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, xs.length) }, worker));
  return out;
}

function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

function gpuSummary(inv: nodesv1.Inventory | undefined): string {
  if (!inv) return "—";
  if (inv.gpus.length === 0) return "none";
  const byModel = new Map<string, number>();
  for (const g of inv.gpus) byModel.set(g.model, (byModel.get(g.model) ?? 0) + 1);
  return [...byModel].map(([m, n]) => `${n} × ${m}`).join(", ");
}

const canCordon = (s: string) => s === "joining" || s === "ready";
const canUncordon = (s: string) => s === "cordoned" || s === "draining" || s === "drained";
const canDrain = (s: string) => s === "joining" || s === "ready" || s === "cordoned";

export const nodesPage: Page = {
  title: "Nodes",
  async render(ctx, root) {
    const nodes = await collect(
      paginate((pageToken) => ctx.bc.nodes.list({ pageSize: 100, pageToken }), (r) => r.nodes),
      500,
    );
    // List leaves inventories out; Get has them.
    const inventories = await mapLimit(nodes, 6, (n) =>
      ctx.bc.nodes.get({ id: n.id }).then(
        (r) => r.node?.inventory,
        () => undefined,
      ),
    );
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
    const rows = nodes.map((n, i) => {
      const inv = inventories[i];
      return h(
        "tr",
        { "data-node-id": n.id, "data-hostname": n.hostname },
        h("td", null, h("strong", null, n.hostname), h("div", { class: "sub" }, shortId(n.id))),
        h("td", { class: "state" }, badge(n.state)),
        h("td", null, badge(n.online ? "online" : "offline"), n.connected ? null : h("div", { class: "sub" }, "no session")),
        h("td", null, n.pool || "—"),
        h("td", { class: "wrap" }, inv ? `${inv.cpus} CPUs` : "—", inv?.cpuModel && h("div", { class: "sub" }, inv.cpuModel)),
        h("td", null, inv ? bytes(inv.memoryBytes) : "—"),
        h("td", { class: "gpus" }, gpuSummary(inv)),
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
    const gpus = inventories.reduce((s, inv) => s + (inv?.gpus.length ?? 0), 0);
    const ready = nodes.filter((n) => n.state === "ready").length;
    const online = nodes.filter((n) => n.online).length;
    root.replaceChildren(
      h("h1", null, "Nodes"),
      h("p", { class: "summary" }, `${nodes.length} nodes: ${ready} ready, ${online} online, ${gpus} GPUs`),
      table(
        ["Node", "State", "Status", "Pool", "CPU", "Memory", "GPUs", "OS", "Daemon", "Last seen", ""],
        rows,
        "No nodes yet. Create a join token and start bcd on a host.",
      ),
    );
  },
};

const PERIODS: Record<string, number> = { "24h": 24 * 3600_000, "7d": 7 * 86400_000, "30d": 30 * 86400_000 };
let period = "24h";

function poolCard(p: poolsv1.Pool): HTMLElement {
  const c = p.capacity;
  const gpuRows = (c?.gpus ?? []).map((g) =>
    meter(g.allocated, g.total, `${g.model}: ${g.allocated} of ${g.total} GPUs leased, ${g.available} available`),
  );
  return h(
    "section",
    { class: "card", "data-pool-id": p.id },
    h("h2", null, p.name),
    p.description && h("p", { class: "sub" }, p.description),
    h("p", null, `${c?.nodes ?? 0} nodes, ${c?.schedulableNodes ?? 0} schedulable`),
    gpuRows,
    meter(Number(c?.cpusAllocated ?? 0n), Number(c?.cpus ?? 0n), `CPUs: ${c?.cpusAllocated ?? 0n} of ${c?.cpus ?? 0n} leased`),
    meter(
      Number(c?.memoryAllocatedBytes ?? 0n),
      Number(c?.memoryBytes ?? 0n),
      `Memory: ${bytes(c?.memoryAllocatedBytes ?? 0n)} of ${bytes(c?.memoryBytes ?? 0n)} leased`,
    ),
  );
}

async function utilisation(ctx: PageContext, pools: poolsv1.Pool[]): Promise<HTMLElement> {
  const hour = 3600_000;
  const end = Math.floor(Date.now() / hour) * hour + hour;
  const start = end - PERIODS[period];
  const res = await ctx.bc.usage.query({ startTime: timestampFromMs(start), endTime: timestampFromMs(end), hourly: true });
  const series: Series[] = pools.map((p) => {
    const gpus = (p.capacity?.gpus ?? []).reduce((s, g) => s + g.total, 0);
    const resource = gpus > 0 ? "gpu" : "cpu";
    const perHour = (gpus > 0 ? gpus : Number(p.capacity?.cpus ?? 0n)) * 3600;
    const used = new Map<number, number>();
    for (const u of res.hours) {
      if (u.poolId !== p.id || u.resource !== resource || !u.hour) continue;
      const t = timestampMs(u.hour);
      used.set(t, (used.get(t) ?? 0) + u.amount);
    }
    const points = [];
    for (let t = start; t < end; t += hour) points.push({ t, v: perHour > 0 ? (used.get(t) ?? 0) / perHour : 0 });
    return { name: `${p.name} (${resource.toUpperCase()})`, points };
  });
  const select = h(
    "select",
    {
      "aria-label": "Period",
      onchange: (e: Event) => {
        period = (e.target as HTMLSelectElement).value;
        void ctx.refresh();
      },
    },
    Object.keys(PERIODS).map((k) => h("option", { value: k, selected: k === period }, `last ${k}`)),
  );
  const lag = res.unaggregatedRecords > 0n ? ` ${res.unaggregatedRecords} metering records are not added up yet.` : "";
  return h(
    "section",
    { class: "card wide", id: "utilisation" },
    h("h2", null, "Pool utilisation ", select),
    lineChart(series, start, end, `Pool utilisation, last ${period}`),
    h(
      "p",
      { class: "sub" },
      `Each hour's GPU-seconds (CPU-seconds for pools without GPUs) from usage/query, over the pool's capacity now.${lag}`,
    ),
  );
}

export const poolsPage: Page = {
  title: "Pools",
  async render(ctx, root) {
    const pools = await collect(
      paginate((pageToken) => ctx.bc.pools.list({ pageSize: 100, pageToken }), (r) => r.pools),
      200,
    );
    root.replaceChildren(
      h("h1", null, "Pools"),
      pools.length === 0
        ? h("p", { class: "empty" }, "No pools yet. Create one with pools/create.")
        : h("div", { class: "cards" }, pools.map(poolCard)),
      await utilisation(ctx, pools),
    );
  },
};

let leaseState = leasesv1.LeaseState.UNSPECIFIED;

function stateName(s: leasesv1.LeaseState): string {
  return (leasesv1.LeaseState[s] ?? String(s)).toLowerCase().replace("_", " ");
}

export const leasesPage: Page = {
  title: "Leases",
  async render(ctx, root) {
    const [leases, pools] = await Promise.all([
      collect(paginate((pageToken) => ctx.bc.leases.list({ state: leaseState, pageSize: 100, pageToken }), (r) => r.leases), 500),
      collect(paginate((pageToken) => ctx.bc.pools.list({ pageSize: 100, pageToken }), (r) => r.pools), 200),
    ]);
    const poolName = new Map(pools.map((p) => [p.id, p.name]));
    // Newest first.
    leases.reverse();
    const rows = leases.map((l) => {
      const shape = l.gpus > 0 ? `${l.gpus} × ${l.gpuModel || "GPU"}` : `${l.cpus} CPUs, ${bytes(l.memoryBytes)}`;
      const held = [...new Set(l.allocations.filter((a) => !a.endTime).map((a) => a.hostname || shortId(a.nodeId)))];
      return h(
        "tr",
        { "data-lease-id": l.id },
        h("td", null, shortId(l.id)),
        h("td", null, poolName.get(l.poolId) ?? shortId(l.poolId)),
        h("td", null, shape),
        h("td", { class: "state" }, badge(stateName(l.state), leasesv1.LeaseState[l.state]?.toLowerCase()), l.reason && h("div", { class: "sub" }, l.reason)),
        h("td", null, held.join(", ") || "—"),
        h("td", null, when(l.createTime)),
        h("td", null, when(l.placeTime)),
        h("td", null, when(l.endTime)),
      );
    });
    const states = Object.values(leasesv1.LeaseState).filter((v): v is leasesv1.LeaseState => typeof v === "number");
    const filter = h(
      "select",
      {
        "aria-label": "State",
        onchange: (e: Event) => {
          leaseState = Number((e.target as HTMLSelectElement).value) as leasesv1.LeaseState;
          void ctx.refresh();
        },
      },
      states.map((s) => h("option", { value: s, selected: s === leaseState }, s === leasesv1.LeaseState.UNSPECIFIED ? "all states" : stateName(s))),
    );
    root.replaceChildren(
      h("h1", null, "Leases ", filter),
      table(["Lease", "Pool", "Shape", "State", "Holds", "Created", "Placed", "Ends"], rows, "No leases."),
    );
  },
};

export const activityPage: Page = {
  title: "Activity",
  async render(ctx, root) {
    const [events, audit] = await Promise.all([ctx.bc.events.list({ pageSize: 50 }), ctx.bc.audit.list({ pageSize: 50 })]);
    root.replaceChildren(
      h("h1", null, "Activity"),
      h("div", { class: "two" },
        h(
          "section",
          { id: "events" },
          h("h2", null, "Recent events"),
          table(
            ["When", "Type", "Subject"],
            events.events.map((e) => h("tr", null, h("td", null, when(e.createTime)), h("td", null, e.type), h("td", null, e.subject))),
            "No events yet.",
          ),
        ),
        h(
          "section",
          { id: "audit" },
          h("h2", null, "Audit log"),
          table(
            ["When", "Method", "Target", "Outcome", "Principal"],
            audit.events.map((a) =>
              h(
                "tr",
                null,
                h("td", null, when(a.createTime)),
                h("td", null, a.method),
                h("td", null, a.target || "—"),
                h("td", null, badge(a.outcome, a.outcome === "ok" ? "ok" : "failed")),
                h("td", null, a.principalId ? shortId(a.principalId) : "—"),
              ),
            ),
            "No audited calls yet.",
          ),
        ),
      ),
    );
  },
};

export const pages: Record<string, Page> = {
  nodes: nodesPage,
  pools: poolsPage,
  leases: leasesPage,
  activity: activityPage,
};
