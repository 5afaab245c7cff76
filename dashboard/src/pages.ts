// The dashboard's pages. Each renders into root from fresh API calls; the app calls it again to
// refresh.
import {
  durationMs,
  leasesv1,
  paginate,
  timestampFromMs,
  timestampMs,
  usagev1,
  type BetterCompute,
  type Duration,
  type poolsv1,
} from "@better-compute/client";

import { apiPage } from "./api.js";
import { lineChart, type Series } from "./chart.js";
import { badge, bytes, h, meter, shortId, table, when } from "./dom.js";
import { gpusPage } from "./gpus.js";
import { nodesPage } from "./nodes.js";
import { fanOutsPage } from "./fanouts.js";
import { remediationsPage } from "./remediations.js";
import { showLeaseUtilization, utilizationPage } from "./utilization.js";
import { scalingPanel } from "./scaling.js";
import { liveRefresh, workflowsPage } from "./workflows.js";

export interface PageContext {
  bc: BetterCompute;
  /** The API the session is signed in to, for example "https://compute.example.com/api". */
  apiUrl: string;
  /** The caller's tenant, from iam/whoAmI. */
  tenant: { id: string; name: string };
  /** Shows a message above the page. */
  flash(message: string, kind?: "ok" | "error"): void;
  /** Renders the current page again. */
  refresh(): Promise<void>;
}

export interface Page {
  title: string;
  render(ctx: PageContext, root: HTMLElement): Promise<void>;
}

export async function collect<T>(it: AsyncIterable<T>, max: number): Promise<T[]> {
  const out: T[] = [];
  for await (const x of it) {
    out.push(x);
    if (out.length >= max) break;
  }
  return out;
}

export function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

const PERIODS: Record<string, number> = { "24h": 24 * 3600_000, "7d": 7 * 86400_000, "30d": 30 * 86400_000 };
let period = "24h";

/** The hours a period select covers: whole UTC hours ending with the current one. */
function periodRange(key: string): { start: number; end: number } {
  const hour = 3600_000;
  const end = Math.floor(Date.now() / hour) * hour + hour;
  return { start: end - PERIODS[key], end };
}

function periodSelect(ctx: PageContext, value: string, set: (v: string) => void): HTMLSelectElement {
  return h(
    "select",
    {
      "aria-label": "Period",
      onchange: (e: Event) => {
        set((e.target as HTMLSelectElement).value);
        void ctx.refresh();
      },
    },
    Object.keys(PERIODS).map((k) => h("option", { value: k, selected: k === value }, `last ${k}`)),
  );
}

/** What a lease or preemption holds: GPUs of a model, or CPUs and memory. */
function shape(gpus: number, gpuModel: string, cpus: number, memoryBytes: bigint): string {
  return gpus > 0 ? `${gpus} × ${gpuModel || "GPU"}` : `${cpus} CPUs, ${bytes(memoryBytes)}`;
}

/** Resources as lines: GPUs by model, CPUs, memory; empty when there is nothing. */
function resourceLines(r: poolsv1.Resources | undefined): string[] {
  if (!r) return [];
  const lines = Object.entries(r.gpus)
    .filter(([, n]) => n > 0)
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([m, n]) => `${n} × ${m}`);
  if (r.cpus > 0) lines.push(`${r.cpus} CPUs`);
  if (r.memoryBytes > 0n) lines.push(bytes(r.memoryBytes));
  return lines;
}

function resourceCell(r: poolsv1.Resources | undefined): HTMLTableCellElement {
  const lines = resourceLines(r);
  return h("td", { class: "res" }, lines.length === 0 ? "—" : lines.map((l) => h("div", null, l)));
}

/** Tenant names by id, from iam/listTenants (the caller's tenant and, for the root, its children); empty when not allowed. */
export async function tenantNames(ctx: PageContext): Promise<Map<string, string>> {
  const names = new Map<string, string>();
  if (ctx.tenant.id) names.set(ctx.tenant.id, ctx.tenant.name);
  try {
    const tenants = await collect(
      paginate((pageToken) => ctx.bc.iam.listTenants({ pageSize: 500, pageToken }), (r) => r.tenants),
      1000,
    );
    for (const t of tenants) if (!t.deleteTime) names.set(t.id, t.displayName || t.name);
  } catch {
    // Ids only.
  }
  return names;
}

/** A tenant's name with its id below, or the id when the name is not known; "you" for the caller's. */
export function tenantLabel(ctx: PageContext, names: Map<string, string>, id: string): HTMLElement | string {
  if (!id) return "—";
  const name = id === ctx.tenant.id ? `you${names.get(id) ? ` (${names.get(id)})` : ""}` : names.get(id);
  return name ? h("span", { "data-tenant-id": id }, name, h("div", { class: "sub" }, id)) : h("span", { "data-tenant-id": id }, id);
}

function seconds(d: Duration | undefined, unset: number): string {
  const s = d ? durationMs(d) / 1000 : unset;
  return s % 60 === 0 && s >= 60 ? `${s / 60} min` : `${s} s`;
}

/** What a granted pool's card says of the caller's grant. */
const grantFacts: [string, "nominal" | "used" | "borrowed" | "borrowable"][] = [
  ["Nominal", "nominal"],
  ["Used", "used"],
  ["Borrowed", "borrowed"],
  ["Borrowable", "borrowable"],
];

function poolCard(ctx: PageContext, names: Map<string, string>, p: poolsv1.Pool, grants: number | null): HTMLElement {
  const c = p.capacity;
  const gpuRows = (c?.gpus ?? []).map((g) =>
    meter(g.allocated, g.total, `${g.model}: ${g.allocated} of ${g.total} GPUs leased, ${g.available} available`),
  );
  const g = p.grant;
  return h(
    "section",
    { class: "card", "data-pool-id": p.id, "data-granted": p.granted ? "true" : undefined },
    h("h2", null, h("a", { href: poolHash(p.id), class: "pool-link" }, p.name), p.granted && badge("granted")),
    p.description && h("p", { class: "sub" }, p.description),
    p.granted && h("p", { class: "granted-by" }, "granted by ", tenantLabel(ctx, names, p.tenantId)),
    h("p", null, `${c?.nodes ?? 0} nodes, ${c?.schedulableNodes ?? 0} schedulable`),
    gpuRows,
    meter(Number(c?.cpusAllocated ?? 0n), Number(c?.cpus ?? 0n), `CPUs: ${c?.cpusAllocated ?? 0n} of ${c?.cpus ?? 0n} leased`),
    meter(
      Number(c?.memoryAllocatedBytes ?? 0n),
      Number(c?.memoryBytes ?? 0n),
      `Memory: ${bytes(c?.memoryAllocatedBytes ?? 0n)} of ${bytes(c?.memoryBytes ?? 0n)} leased`,
    ),
    p.granted
      ? h(
          "dl",
          { class: "grant" },
          grantFacts.flatMap(([label, r]) => [h("dt", null, label), h("dd", null, resourceLines(g?.[r]).join(", ") || "none")]),
          h("dt", null, "Weight"),
          h("dd", null, String(g?.weight ?? "—")),
        )
      : h(
          "p",
          { class: "sub" },
          `Preempted leases keep their devices ${seconds(p.preemptionGracePeriod, 30)}` +
            (p.priorityPreemption ? "; higher priority preempts lower within a tenant." : ".") +
            (grants === null ? "" : grants === 0 ? " Not granted to other tenants." : ` Granted to ${grants} tenant${grants === 1 ? "" : "s"}.`),
        ),
  );
}

async function utilisation(ctx: PageContext, pools: poolsv1.Pool[]): Promise<HTMLElement> {
  const hour = 3600_000;
  const { start, end } = periodRange(period);
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
  const select = periodSelect(ctx, period, (v) => (period = v));
  const lag = res.unaggregatedRecords > 0n ? ` ${res.unaggregatedRecords} metering records are not added up yet.` : "";
  return h(
    "section",
    { class: "card wide", id: "utilisation" },
    h("h2", null, "Pool utilisation ", select),
    lineChart(series, start, end, `Pool utilisation, last ${period}`),
    h(
      "p",
      { class: "sub" },
      `Each hour's GPU-seconds (CPU-seconds for pools without GPUs) of your leases, from usage/query, over the pool's capacity now.${lag}`,
    ),
  );
}

/**
 * The form to grant one of the caller's pools: kept across the page's refreshes (the page is
 * rendered again every few seconds), one per signed-in context.
 */
interface GrantForm {
  el: HTMLFormElement;
  /** Offers these pools, keeping the choice when it is still one of them. */
  update(owned: poolsv1.Pool[], names: Map<string, string>): void;
}

const grantForms = new WeakMap<PageContext, GrantForm>();

function grantForm(ctx: PageContext): GrantForm {
  const existing = grantForms.get(ctx);
  if (existing) return existing;
  let pools: poolsv1.Pool[] = [];
  const pool = h("select", { id: "grant-pool", name: "pool", required: true });
  const tenant = h("input", {
    id: "grant-tenant",
    name: "tenant",
    required: true,
    maxlength: 64,
    autocomplete: "off",
    spellcheck: "false",
    placeholder: "tenant id",
    list: "grant-tenants",
  });
  const tenants = h("datalist", { id: "grant-tenants" });
  const model = h("select", { id: "grant-model", name: "model" });
  const num = (id: string, value: number, min: number, max: number) =>
    h("input", { id, name: id, type: "number", inputmode: "numeric", min, max, step: 1, value, required: true });
  const nominal = num("grant-nominal", 0, 0, 1_000_000);
  const borrow = num("grant-borrowing", 0, 0, 1_000_000);
  const weight = num("grant-weight", 1, 1, 1000);
  const button = h("button", { type: "submit", id: "grant-submit" }, "Grant");
  const error = h("p", { class: "error", id: "grant-error", role: "alert" });
  const field = (label: string, input: HTMLElement) => h("label", null, h("span", null, label), input);

  const setOptions = (select: HTMLSelectElement, options: [string, string][], empty: string) => {
    const keep = select.value;
    select.replaceChildren(
      ...(options.length === 0 ? [h("option", { value: "" }, empty)] : options.map(([v, text]) => h("option", { value: v }, text))),
    );
    if (options.some(([v]) => v === keep)) select.value = keep;
  };
  const updateModels = () => {
    const p = pools.find((x) => x.id === pool.value);
    setOptions(model, (p?.capacity?.gpus ?? []).map((g) => [g.model, g.model]), "no GPUs");
    model.disabled = model.options.length === 1 && model.value === "";
  };
  pool.addEventListener("change", updateModels);

  const whole = (input: HTMLInputElement, label: string, min: number, max: number): number => {
    const n = Number(input.value);
    if (input.value.trim() === "" || !Number.isInteger(n) || n < min || n > max) {
      throw new Error(`${label} must be a whole number from ${min} to ${max}.`);
    }
    return n;
  };
  const el = h(
    "form",
    { class: "grant-form", id: "grant-form", novalidate: true },
    h("h3", null, "Grant a pool"),
    h(
      "div",
      { class: "fields" },
      field("Pool", pool),
      field("Tenant", tenant),
      field("GPU model", model),
      field("Nominal GPUs", nominal),
      field("Borrowing limit GPUs", borrow),
      field("Weight", weight),
      button,
    ),
    tenants,
    error,
    h(
      "p",
      { class: "sub" },
      "The tenant may always lease its nominal GPUs when they exist, and borrow up to the limit beyond them while they " +
        "sit idle (borrowed leases are preempted first). Weight is its share of idle capacity among borrowers. " +
        "Granting replaces the tenant's grant in the pool.",
    ),
  );
  el.addEventListener("submit", async (e) => {
    e.preventDefault();
    error.textContent = "";
    const p = pools.find((x) => x.id === pool.value);
    const tenantId = tenant.value.trim();
    let req;
    try {
      if (!p) throw new Error("Choose a pool.");
      if (!tenantId) throw new Error("Enter the id of the tenant to grant the pool to.");
      if (tenantId === ctx.tenant.id) throw new Error("A pool is not granted to its own tenant.");
      const gpus = (n: number): Record<string, number> => (model.value && n > 0 ? { [model.value]: n } : {});
      const n = whole(nominal, "Nominal GPUs", 0, 1_000_000);
      const b = whole(borrow, "Borrowing limit GPUs", 0, 1_000_000);
      if ((n > 0 || b > 0) && !model.value) throw new Error(`${p.name} has no GPUs to grant.`);
      req = {
        poolId: p.id,
        tenantId,
        nominal: { gpus: gpus(n) },
        borrowingLimit: { gpus: gpus(b) },
        weight: whole(weight, "Weight", 1, 1000),
      };
    } catch (err) {
      error.textContent = errorText(err);
      return;
    }
    button.disabled = true;
    try {
      const res = await ctx.bc.pools.grant(req);
      ctx.flash(`${p.name}: granted to ${res.grant?.tenantId ?? tenantId}`, "ok");
      tenant.value = "";
      nominal.value = "0";
      borrow.value = "0";
      weight.value = "1";
    } catch (err) {
      error.textContent = `Grant failed: ${errorText(err)}`;
    } finally {
      button.disabled = false;
    }
    await ctx.refresh();
  });
  const form: GrantForm = {
    el,
    update(owned, names) {
      pools = owned;
      setOptions(pool, owned.map((p) => [p.id, p.name]), "no pools");
      updateModels();
      tenants.replaceChildren(
        ...[...names].filter(([id]) => id !== ctx.tenant.id).map(([id, name]) => h("option", { value: id }, name)),
      );
    },
  };
  grantForms.set(ctx, form);
  return form;
}

/** The grants of the caller's pools, and the form to grant one. */
function grantsSection(
  ctx: PageContext,
  names: Map<string, string>,
  owned: poolsv1.Pool[],
  grants: poolsv1.Grant[] | Error,
): HTMLElement {
  const poolName = new Map(owned.map((p) => [p.id, p.name]));
  const revoke = (g: poolsv1.Grant) => async (e: Event) => {
    (e.currentTarget as HTMLButtonElement).disabled = true;
    const pool = poolName.get(g.poolId) ?? shortId(g.poolId);
    try {
      await ctx.bc.pools.revokeGrant({ poolId: g.poolId, tenantId: g.tenantId });
      ctx.flash(`${pool}: grant to ${names.get(g.tenantId) ?? g.tenantId} revoked`, "ok");
    } catch (err) {
      ctx.flash(`${pool}: revoking the grant failed: ${errorText(err)}`, "error");
    }
    await ctx.refresh();
  };
  const form = grantForm(ctx);
  form.update(owned, names);
  return h(
    "section",
    { class: "card wide", id: "grants" },
    h("h2", null, "Grants"),
    grants instanceof Error
      ? h("p", { class: "error" }, `Could not list grants: ${errorText(grants)}`)
      : table(
          ["Pool", "Tenant", "Weight", "Nominal", "Borrowing limit", "Used", "Borrowed", "Borrowable", "Granted", ""],
          grants.map((g) =>
            h(
              "tr",
              { "data-grant-id": g.id, "data-pool-id": g.poolId, "data-tenant-id": g.tenantId },
              h("td", null, poolName.get(g.poolId) ?? shortId(g.poolId)),
              h("td", { class: "tenant" }, tenantLabel(ctx, names, g.tenantId)),
              h("td", null, String(g.weight)),
              resourceCell(g.nominal),
              resourceCell(g.borrowingLimit),
              resourceCell(g.used),
              resourceCell(g.borrowed),
              resourceCell(g.borrowable),
              h("td", null, when(g.updateTime ?? g.createTime)),
              h("td", null, h("button", { type: "button", class: "warn", onclick: revoke(g) }, "Revoke")),
            ),
          ),
          "No grants: no other tenant may lease from your pools.",
        ),
    form.el,
  );
}

/** What was preempted in the caller's pools in the last 24 hours. */
function preemptionsSection(
  ctx: PageContext,
  names: Map<string, string>,
  pools: poolsv1.Pool[],
  preemptions: poolsv1.Preemption[] | Error,
): HTMLElement {
  const poolName = new Map(pools.map((p) => [p.id, p.name]));
  return h(
    "section",
    { class: "card wide", id: "preemptions" },
    h("h2", null, "Preemptions in the last 24 hours"),
    preemptions instanceof Error
      ? h("p", { class: "error" }, `Could not list preemptions: ${errorText(preemptions)}`)
      : table(
          ["When", "Lease", "Pool", "Tenant", "Shape", "Priority", "Reason"],
          preemptions.map((x) =>
            h(
              "tr",
              { "data-lease-id": x.leaseId },
              h("td", null, when(x.preemptTime)),
              h("td", { title: x.leaseId }, shortId(x.leaseId)),
              h("td", null, poolName.get(x.poolId) ?? shortId(x.poolId)),
              h("td", { class: "tenant" }, tenantLabel(ctx, names, x.tenantId)),
              h("td", null, shape(x.gpus, x.gpuModel, x.cpus, x.memoryBytes)),
              h("td", null, String(x.priority)),
              h("td", { class: "wrap" }, x.reason || "—"),
            ),
          ),
          "No preemptions in the last 24 hours.",
        ),
  );
}

/** Settles a call to its value or its error, so one failing section does not fail the page. */
export function settle<T>(p: Promise<T>): Promise<T | Error> {
  return p.catch((err: unknown) => (err instanceof Error ? err : new Error(String(err))));
}

/** Keeps the focused form field focused across a re-render that moves it. */
function keepFocus(render: () => void): void {
  const active = document.activeElement;
  render();
  if (active instanceof HTMLElement && active !== document.activeElement && active.isConnected) active.focus();
}

/** The hash of a pool's page: #/pools/<id>. */
const poolHash = (id: string) => `#/pools/${encodeURIComponent(id)}`;

/** The pool id of #/pools/<id>, or "" on the list. */
function poolPageId(): string {
  const [, id = ""] = location.hash.replace(/^#\/?/, "").split("/");
  return decodeURIComponent(id);
}

/**
 * One pool's page: its card and, for a pool of the caller's tenant, its Scaling panel; rendered
 * again every few seconds while the pool autoscales, so its decisions show as they are made.
 */
async function renderPool(ctx: PageContext, root: HTMLElement, id: string): Promise<void> {
  const [res, names] = await Promise.all([ctx.bc.pools.get({ id }), tenantNames(ctx)]);
  const p = res.pool;
  if (!p) throw new Error(`pool ${id} not found`);
  const scaling = p.granted ? { el: null, scaled: false } : await scalingPanel(ctx.bc, p.id);
  root.replaceChildren(
    h("p", { class: "crumbs" }, h("a", { href: "#/pools" }, "← Pools")),
    h("h1", { "data-pool-page": p.id }, p.name, p.granted && badge("granted")),
    h("div", { class: "cards" }, poolCard(ctx, names, p, null)),
    ...(scaling.el ? [scaling.el] : []),
  );
  if (scaling.scaled) liveRefresh(ctx, root);
}

export const poolsPage: Page = {
  title: "Pools",
  async render(ctx, root) {
    const id = poolPageId();
    if (id) return renderPool(ctx, root, id);
    const pools = await collect(
      paginate((pageToken) => ctx.bc.pools.list({ pageSize: 100, pageToken }), (r) => r.pools),
      200,
    );
    const owned = pools.filter((p) => !p.granted);
    const ownedIds = new Set(owned.map((p) => p.id));
    const [names, chart, grants, preemptions] = await Promise.all([
      tenantNames(ctx),
      utilisation(ctx, pools),
      owned.length === 0
        ? null
        : settle(
            collect(
              paginate((pageToken) => ctx.bc.pools.listGrants({ pageSize: 500, pageToken }), (r) => r.grants),
              5000,
            ).then((gs) => gs.filter((g) => ownedIds.has(g.poolId))),
          ),
      owned.length === 0
        ? null
        : settle(
            collect(
              paginate((pageToken) => ctx.bc.pools.listPreemptions({ pageSize: 500, pageToken }), (r) => r.preemptions),
              1000,
            ),
          ),
    ]);
    const grantCount = (p: poolsv1.Pool) =>
      !grants || grants instanceof Error ? null : new Set(grants.filter((g) => g.poolId === p.id).map((g) => g.tenantId)).size;
    keepFocus(() =>
      root.replaceChildren(
        h("h1", null, "Pools"),
        pools.length === 0
          ? h("p", { class: "empty" }, "No pools yet. Create one with pools/create.")
          : h("div", { class: "cards" }, pools.map((p) => poolCard(ctx, names, p, grantCount(p)))),
        ...[
          grants && grantsSection(ctx, names, owned, grants),
          preemptions && preemptionsSection(ctx, names, owned, preemptions),
        ].filter((x) => x !== null),
        chart,
      ),
    );
  },
};

let leaseState = leasesv1.LeaseState.UNSPECIFIED;

function stateName(s: leasesv1.LeaseState): string {
  return (leasesv1.LeaseState[s] ?? String(s)).toLowerCase().replace("_", " ");
}

/**
 * A lease's GPU use from its utilisation roll-up: the mean utilisation and the active share of
 * the GPU-time sampled, with a link to its plot on the Utilisation page; "—" before a sample.
 */
function gpuUse(l: leasesv1.Lease): HTMLElement | string {
  const u = l.utilization;
  if (!u || u.gpuSecondsHeld === 0n) return "—";
  const active = (Number(u.gpuSecondsActive) / Number(u.gpuSecondsHeld)) * 100;
  const link = h("a", { href: "#/utilization" }, "plot");
  link.addEventListener("click", () => showLeaseUtilization(l.id));
  return h(
    "span",
    null,
    `${u.meanUtilization.toFixed(0)}% mean`,
    h("div", { class: "sub" }, `${active.toFixed(0)}% active · `, link),
  );
}

export const leasesPage: Page = {
  title: "Leases",
  async render(ctx, root) {
    const [leases, pools] = await Promise.all([
      collect(paginate((pageToken) => ctx.bc.leases.list({ state: leaseState, pageSize: 100, pageToken }), (r) => r.leases), 500),
      collect(paginate((pageToken) => ctx.bc.pools.list({ pageSize: 100, pageToken }), (r) => r.pools), 200),
    ]);
    const poolOf = new Map(pools.map((p) => [p.id, p]));
    // Newest first.
    leases.reverse();
    const rows = leases.map((l) => {
      const held = [...new Set(l.allocations.filter((a) => !a.endTime).map((a) => a.hostname || shortId(a.nodeId)))];
      const pool = poolOf.get(l.poolId);
      return h(
        "tr",
        { "data-lease-id": l.id },
        h("td", null, shortId(l.id)),
        h("td", null, pool?.name ?? shortId(l.poolId), pool?.granted && h("div", { class: "sub" }, "granted")),
        h("td", null, shape(l.gpus, l.gpuModel, l.cpus, l.memoryBytes)),
        h("td", { class: "priority" }, String(l.priority)),
        h(
          "td",
          { class: "state" },
          badge(stateName(l.state), leasesv1.LeaseState[l.state]?.toLowerCase()),
          l.borrowing && [" ", badge("borrowing")],
          l.idleSince && [" ", badge("idle")],
          l.idleSince && h("div", { class: "sub" }, "idle since ", when(l.idleSince)),
          l.lent && [" ", badge("lent")],
          l.lent &&
            h(
              "div",
              { class: "sub" },
              `${l.lent.gpus} GPUs lent `,
              when(l.lent.since),
              ` to ${l.lent.borrowers} lease${l.lent.borrowers === 1 ? "" : "s"}`,
              l.lent.wakeTime && [", waking since ", when(l.lent.wakeTime)],
            ),
          l.preemptTime && h("div", { class: "sub" }, "preempted ", when(l.preemptTime)),
          l.reason && h("div", { class: "sub" }, l.reason),
        ),
        h("td", null, held.join(", ") || "—"),
        h("td", { class: "gpu-use" }, gpuUse(l)),
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
      table(["Lease", "Pool", "Shape", "Priority", "State", "Holds", "GPU use", "Created", "Placed", "Ends"], rows, "No leases."),
      h(
        "p",
        { class: "sub" },
        "Higher priority is placed first and preempted last. A borrowing lease runs beyond its tenant's nominal quota in " +
          "the pool and is the first to be preempted when a tenant within its quota needs the capacity back.",
      ),
    );
  },
};

let usageScope = usagev1.Scope.UNSPECIFIED;
let usagePeriod = "24h";

const SCOPES: [usagev1.Scope, string][] = [
  [usagev1.Scope.UNSPECIFIED, "my usage"],
  [usagev1.Scope.OWNED_POOLS, "usage in my pools by tenant"],
];

/**
 * An amount of usage/query (GPU-, CPU- or MiB-seconds) in hours, with its unit, and the part of
 * it held on an unhealthy GPU (to be credited) when there is one.
 */
function usageAmount(u: usagev1.Usage): string {
  const perHour = u.resource === "memory" ? 1024 * 3600 : 3600;
  const fmt = (amount: number) => (amount / perHour).toLocaleString(undefined, { maximumFractionDigits: 2 });
  const unit = u.resource === "gpu" ? "GPU-hours" : u.resource === "cpu" ? "CPU-hours" : u.resource === "memory" ? "GiB-hours" : `${u.resource}-hours`;
  const unhealthy = u.unhealthyAmount > 0 ? ` (${fmt(u.unhealthyAmount)} on unhealthy GPUs)` : "";
  return `${fmt(u.amount)} ${unit}${unhealthy}`;
}

function utcHour(ms: number): string {
  return new Date(ms).toISOString().slice(0, 13).replace("T", "-") + "h";
}

/** Saves usage/export's CSV of the period and scope as a file. */
async function downloadCsv(ctx: PageContext, button: HTMLButtonElement, scope: usagev1.Scope, start: number, end: number): Promise<void> {
  button.disabled = true;
  try {
    const res = await ctx.bc.usage.export({
      startTime: timestampFromMs(start),
      endTime: timestampFromMs(end),
      scope,
      format: usagev1.ExportFormat.CSV,
    });
    const name = `usage-${scope === usagev1.Scope.OWNED_POOLS ? "my-pools" : "mine"}-${utcHour(start)}-to-${utcHour(end)}.csv`;
    const url = URL.createObjectURL(new Blob([res.data.slice()], { type: res.contentType || "text/csv" }));
    const a = h("a", { href: url, download: name, hidden: true });
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 60_000);
    ctx.flash(`Saved ${res.rows} rows as ${name}`, "ok");
  } catch (err) {
    ctx.flash(`Export failed: ${errorText(err)}`, "error");
  } finally {
    button.disabled = false;
  }
}

export const usagePage: Page = {
  title: "Usage",
  async render(ctx, root) {
    const { start, end } = periodRange(usagePeriod);
    const scope = usageScope;
    const [pools, names, res] = await Promise.all([
      collect(paginate((pageToken) => ctx.bc.pools.list({ pageSize: 100, pageToken }), (r) => r.pools), 200),
      tenantNames(ctx),
      settle(ctx.bc.usage.query({ startTime: timestampFromMs(start), endTime: timestampFromMs(end), scope })),
    ]);
    const poolName = new Map(pools.map((p) => [p.id, p.name]));
    const scopeSelect = h(
      "select",
      {
        id: "usage-scope",
        "aria-label": "Scope",
        onchange: (e: Event) => {
          usageScope = Number((e.target as HTMLSelectElement).value) as usagev1.Scope;
          void ctx.refresh();
        },
      },
      SCOPES.map(([s, text]) => h("option", { value: s, selected: s === scope }, text)),
    );
    const csv = h("button", { type: "button", id: "usage-csv" }, "Download CSV");
    csv.addEventListener("click", () => void downloadCsv(ctx, csv, scope, start, end));
    let body: HTMLElement;
    if (res instanceof Error) {
      body = h("p", { class: "error" }, `Could not read usage: ${errorText(res)}`);
    } else {
      const totals = [...res.totals].sort(
        (a, b) =>
          a.tenantId.localeCompare(b.tenantId) ||
          (poolName.get(a.poolId) ?? a.poolId).localeCompare(poolName.get(b.poolId) ?? b.poolId) ||
          a.resource.localeCompare(b.resource) ||
          a.model.localeCompare(b.model),
      );
      const lag = res.unaggregatedRecords > 0n ? ` ${res.unaggregatedRecords} metering records are not added up yet.` : "";
      body = h(
        "div",
        null,
        table(
          ["Tenant", "Pool", "Resource", "Model", "Used"],
          totals.map((u) =>
            h(
              "tr",
              { "data-pool-id": u.poolId, "data-tenant-id": u.tenantId },
              h("td", { class: "tenant" }, tenantLabel(ctx, names, u.tenantId)),
              h("td", null, poolName.get(u.poolId) ?? shortId(u.poolId)),
              h("td", null, u.resource),
              h("td", null, u.model || "—"),
              h("td", { class: "num" }, usageAmount(u)),
            ),
          ),
          scope === usagev1.Scope.OWNED_POOLS ? "No metered use of your pools in this period." : "No metered use in this period.",
        ),
        h(
          "p",
          { class: "sub" },
          (scope === usagev1.Scope.OWNED_POOLS
            ? "Every tenant's leases in your pools, yours and your grantees': what you charge back."
            : "Your tenant's leases, in your pools and in pools granted to you.") +
            ` Whole UTC hours from ${new Date(start).toISOString().slice(0, 16)}Z to ${new Date(end).toISOString().slice(0, 16)}Z.${lag}`,
        ),
      );
    }
    root.replaceChildren(
      h("h1", null, "Usage ", scopeSelect, periodSelect(ctx, usagePeriod, (v) => (usagePeriod = v)), csv),
      h("section", { id: "usage" }, body),
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
  gpus: gpusPage,
  remediations: remediationsPage,
  pools: poolsPage,
  leases: leasesPage,
  workflows: workflowsPage,
  fanouts: fanOutsPage,
  usage: usagePage,
  utilization: utilizationPage,
  activity: activityPage,
  api: apiPage,
};
