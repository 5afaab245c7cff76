// The Utilisation page: how the GPUs leased were used over time (usage/utilization, from the
// per-minute utilisation the daemons report), of the caller's whole tenant, one pool or one lease,
// as an area of the active share and a line of the mean utilisation; the efficiency table of
// held against active GPU-hours by tenant, pool and model (usage/query's activeAmount and
// meanUtilization; with "my pools" every tenant's in the caller's pools: what an owner charges
// back); and the caller's idle leases (Lease.idleSince, set by the pool's idle policy) with how
// long they have been idle. docs/gpus.md, "Efficiency and chargeback".
import { durationFromMs, leasesv1, paginate, timestampFromMs, timestampMs, usagev1 } from "@better-compute/client";

import { lineChart } from "./chart.js";
import { bytes, h, shortId, table, when } from "./dom.js";
import { collect, errorText, settle, tenantLabel, tenantNames, type Page, type PageContext } from "./pages.js";

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;

/** Each period's span and step: at most a few hundred points, well within usage/utilization's 1,440. */
const PERIODS: Record<string, { span: number; step: number }> = {
  "6h": { span: 6 * HOUR, step: 5 * MINUTE },
  "24h": { span: 24 * HOUR, step: 15 * MINUTE },
  "7d": { span: 7 * 24 * HOUR, step: HOUR },
  "30d": { span: 30 * 24 * HOUR, step: 6 * HOUR },
};

let utilPeriod = "24h";
let utilScope = usagev1.Scope.UNSPECIFIED;
/** What the chart shows: "" for the whole scope, "pool:<id>" or "lease:<id>". */
let utilTarget = "";

/** Makes the Utilisation page plot one of the caller's leases (the Leases page links to it). */
export function showLeaseUtilization(id: string): void {
  utilTarget = `lease:${id}`;
  utilScope = usagev1.Scope.UNSPECIFIED;
}

const SCOPES: [usagev1.Scope, string][] = [
  [usagev1.Scope.UNSPECIFIED, "my leases"],
  [usagev1.Scope.OWNED_POOLS, "all leases in my pools"],
];

/** "3 h 12 min", "2 d 4 h", "45 s": how long ago ms was. */
export function age(ms: number, now = Date.now()): string {
  const s = Math.max(0, Math.floor((now - ms) / 1000));
  if (s < 60) return `${s} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min`;
  const hrs = Math.floor(m / 60);
  if (hrs < 24) return m % 60 ? `${hrs} h ${m % 60} min` : `${hrs} h`;
  return hrs % 24 ? `${Math.floor(hrs / 24)} d ${hrs % 24} h` : `${Math.floor(hrs / 24)} d`;
}

const pct = (v: number) => `${v.toLocaleString(undefined, { maximumFractionDigits: 1 })}%`;
const gpuHours = (seconds: number) => (seconds / 3600).toLocaleString(undefined, { maximumFractionDigits: 2 });

function select(label: string, id: string, options: [string, string][], value: string, set: (v: string) => void, ctx: PageContext): HTMLSelectElement {
  return h(
    "select",
    {
      id,
      "aria-label": label,
      onchange: (e: Event) => {
        set((e.target as HTMLSelectElement).value);
        void ctx.refresh();
      },
    },
    options.map(([v, text]) => h("option", { value: v, selected: v === value }, text)),
  );
}

export const utilizationPage: Page = {
  title: "Utilisation",
  async render(ctx, root) {
    const { span, step } = PERIODS[utilPeriod];
    const end = Math.floor(Date.now() / step) * step + step;
    const start = end - span;
    // usage/query counts whole hours: the hours that start in the period.
    const hourStart = Math.floor(start / HOUR) * HOUR;
    const scope = utilScope;
    const target = utilTarget;
    const req = {
      startTime: timestampFromMs(start),
      endTime: timestampFromMs(end),
      step: durationFromMs(step),
      scope,
      poolId: target.startsWith("pool:") ? target.slice(5) : "",
      leaseId: target.startsWith("lease:") ? target.slice(6) : "",
    };
    const [pools, leases, names, series, usage] = await Promise.all([
      collect(paginate((pageToken) => ctx.bc.pools.list({ pageSize: 100, pageToken }), (r) => r.pools), 200),
      collect(
        paginate((pageToken) => ctx.bc.leases.list({ state: leasesv1.LeaseState.PLACED, pageSize: 100, pageToken }), (r) => r.leases),
        500,
      ),
      tenantNames(ctx),
      settle(ctx.bc.usage.utilization(req)),
      settle(ctx.bc.usage.query({ startTime: timestampFromMs(hourStart), endTime: timestampFromMs(end), scope })),
    ]);
    const poolName = new Map(pools.map((p) => [p.id, p.name]));
    const pickable = scope === usagev1.Scope.OWNED_POOLS ? pools.filter((p) => p.tenantId === ctx.tenant.id) : pools;
    const targets: [string, string][] = [
      ["", scope === usagev1.Scope.OWNED_POOLS ? "every pool of mine" : "all my leases"],
      ...pickable.map((p): [string, string] => [`pool:${p.id}`, `pool ${p.name}`]),
      ...leases.filter((l) => l.gpus > 0).map((l): [string, string] => [`lease:${l.id}`, `lease ${shortId(l.id)} (${poolName.get(l.poolId) ?? shortId(l.poolId)})`]),
    ];
    if (target && !targets.some(([v]) => v === target)) targets.push([target, target.replace(":", " ")]);

    // The chart: steps without a sample (nothing held, or nothing reported) as 0.
    let chart: HTMLElement | SVGSVGElement;
    let facts = "";
    if (series instanceof Error) {
      chart = h("p", { class: "error" }, `Could not read utilisation: ${errorText(series)}`);
    } else {
      const byTime = new Map(series.points.map((p) => [p.time ? timestampMs(p.time) : 0, p]));
      const active: { t: number; v: number }[] = [];
      const mean: { t: number; v: number }[] = [];
      for (let t = start; t < end; t += step) {
        const p = byTime.get(t);
        active.push({ t, v: p ? p.activeShare : 0 });
        mean.push({ t, v: p ? p.meanUtilization / 100 : 0 });
      }
      chart = lineChart(
        [
          { name: "active share", points: active, area: true },
          { name: "mean utilisation", points: mean },
        ],
        start,
        end,
        "GPU utilisation over time",
        "No utilisation reported in this period",
      );
      chart.setAttribute("id", "utilization-chart");
      const held = Math.max(0, ...series.points.map((p) => p.heldGpus));
      const memory = series.points.reduce((m, p) => (p.peakMemoryBytes > m ? p.peakMemoryBytes : m), 0n);
      const heldSeconds = series.points.reduce((s, p) => s + Number(p.gpuSecondsHeld), 0);
      const activeSeconds = series.points.reduce((s, p) => s + Number(p.gpuSecondsActive), 0);
      facts =
        series.points.length === 0
          ? ""
          : `${gpuHours(heldSeconds)} GPU-hours sampled, ${gpuHours(activeSeconds)} active; at most ` +
            `${held.toLocaleString(undefined, { maximumFractionDigits: 1 })} GPUs held on average over a step; peak memory ${bytes(memory)}.`;
    }

    // The efficiency table: GPU rows only.
    let efficiency: HTMLElement;
    if (usage instanceof Error) {
      efficiency = h("p", { class: "error" }, `Could not read usage: ${errorText(usage)}`);
    } else {
      const rows = usage.totals
        .filter((u) => u.resource === "gpu")
        .sort(
          (a, b) =>
            a.tenantId.localeCompare(b.tenantId) ||
            (poolName.get(a.poolId) ?? a.poolId).localeCompare(poolName.get(b.poolId) ?? b.poolId) ||
            a.model.localeCompare(b.model),
        );
      efficiency = table(
        ["Tenant", "Pool", "Model", "Held GPU-hours", "Active GPU-hours", "Active", "Mean utilisation"],
        rows.map((u) =>
          h(
            "tr",
            { "data-tenant-id": u.tenantId, "data-pool-id": u.poolId },
            h("td", { class: "tenant" }, tenantLabel(ctx, names, u.tenantId)),
            h("td", null, poolName.get(u.poolId) ?? shortId(u.poolId)),
            h("td", null, u.model || "—"),
            h("td", { class: "num" }, gpuHours(u.amount)),
            h("td", { class: "num" }, gpuHours(u.activeAmount)),
            h("td", { class: "num" }, u.amount > 0 ? pct(Math.min(100, (u.activeAmount / u.amount) * 100)) : "—"),
            h("td", { class: "num" }, u.meanUtilization === undefined ? "—" : pct(u.meanUtilization)),
          ),
        ),
        "No metered GPU use in this period.",
      );
    }

    // The caller's idle leases, the longest idle first.
    const idle = leases
      .filter((l) => l.idleSince)
      .sort((a, b) => timestampMs(a.idleSince!) - timestampMs(b.idleSince!));
    const idleRows = idle.map((l) => {
      const show = h("button", { type: "button", class: "link" }, "Show");
      show.addEventListener("click", () => {
        showLeaseUtilization(l.id);
        void ctx.refresh();
      });
      return h(
        "tr",
        { "data-lease-id": l.id },
        h("td", null, h("span", { title: l.id }, shortId(l.id))),
        h("td", null, poolName.get(l.poolId) ?? shortId(l.poolId)),
        h("td", null, `${l.gpus} × ${l.gpuModel || "GPU"}`),
        h("td", { class: "idle-age" }, age(timestampMs(l.idleSince!)), h("div", { class: "sub" }, when(l.idleSince))),
        h("td", { class: "num" }, l.utilization ? pct(l.utilization.meanUtilization) : "—"),
        h("td", null, show),
      );
    });

    root.replaceChildren(
      h(
        "h1",
        null,
        "Utilisation ",
        select("Scope", "utilization-scope", SCOPES.map(([s, t]) => [String(s), t]), String(scope), (v) => {
          utilScope = Number(v) as usagev1.Scope;
          utilTarget = "";
        }, ctx),
        select("Period", "utilization-period", Object.keys(PERIODS).map((k) => [k, `last ${k}`]), utilPeriod, (v) => (utilPeriod = v), ctx),
        select("Pool or lease", "utilization-target", targets, target, (v) => (utilTarget = v), ctx),
      ),
      h(
        "section",
        { id: "utilization", "data-target": target },
        chart,
        h(
          "p",
          { class: "sub" },
          `${facts} A GPU is active in a second it is at least 5% utilised; steps of ${age(0, step)} from ` +
            `${new Date(start).toISOString().slice(0, 16)}Z.`,
        ),
      ),
      h(
        "section",
        { id: "efficiency" },
        h("h2", null, "Efficiency: GPU-hours held and active"),
        efficiency,
        h(
          "p",
          { class: "sub" },
          (scope === usagev1.Scope.OWNED_POOLS
            ? "Every tenant's leases in your pools, by tenant: what you charge back. "
            : "Your tenant's leases, in your pools and in pools granted to you. ") +
            "Held is metered; active and the mean utilisation come from the minutes the daemons reported.",
        ),
      ),
      h(
        "section",
        { id: "idle-leases" },
        h("h2", null, "Idle leases"),
        table(["Lease", "Pool", "GPUs", "Idle for", "Mean utilisation", ""], idleRows, "None of your leases is idle."),
        h("p", { class: "sub" }, "Your placed leases that their pool's idle policy found idle, until they are busy again."),
      ),
    );
  },
};
