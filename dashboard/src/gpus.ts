// The GPUs page: the tenant's GPUs by model and health and the reasons that hold them degraded or
// unhealthy (gpus/summary), and the degraded and unhealthy GPUs themselves with their node,
// reasons and holding lease (gpus/list with a health filter).
import { gpusv1 } from "@better-compute/client";

import { badge, h, shortId, table, when } from "./dom.js";
import type { Page } from "./pages.js";

const PAGE_SIZE = 100;
const STATES = [gpusv1.HealthState.HEALTHY, gpusv1.HealthState.DEGRADED, gpusv1.HealthState.UNHEALTHY];

const count = (n: bigint | number) => n.toLocaleString("en-US");

/** A health state's name, lower case: "unhealthy". */
export function healthName(s: gpusv1.HealthState): string {
  return (gpusv1.HealthState[s] ?? "unknown").toLowerCase();
}

/** One reason as a line: "xid 79: GPU has fallen off the bus (quarantine_gpu)". */
function reasonLine(r: gpusv1.HealthReason): string {
  const what = r.code ? `${r.check} ${r.code}` : r.check;
  return `${what}${r.description ? `: ${r.description}` : ""} (${r.effect})`;
}

export const gpusPage: Page = {
  title: "GPUs",
  async render(ctx, root) {
    const [sum, list] = await Promise.all([
      ctx.bc.gpus.summary({}),
      ctx.bc.gpus.list({ health: [gpusv1.HealthState.UNHEALTHY, gpusv1.HealthState.DEGRADED], pageSize: PAGE_SIZE }),
    ]);
    // Models by row, health states by column.
    const byModel = new Map<string, Map<gpusv1.HealthState, bigint>>();
    const totals = new Map<gpusv1.HealthState, bigint>();
    for (const s of sum.states) {
      const row = byModel.get(s.model) ?? new Map<gpusv1.HealthState, bigint>();
      row.set(s.health, (row.get(s.health) ?? 0n) + s.gpus);
      byModel.set(s.model, row);
      totals.set(s.health, (totals.get(s.health) ?? 0n) + s.gpus);
    }
    const stateRows = [...byModel].map(([model, row]) =>
      h(
        "tr",
        { "data-model": model },
        h("td", null, model || "(no model)"),
        STATES.map((s) => h("td", { class: "num", "data-health": healthName(s) }, count(row.get(s) ?? 0n))),
      ),
    );
    const reasonRows = sum.reasons.map((r) =>
      h(
        "tr",
        { "data-check": r.check },
        h("td", null, r.check),
        h("td", { class: "num" }, r.code ? String(r.code) : "—"),
        h("td", null, r.effect),
        h("td", { class: "num" }, count(r.gpus)),
      ),
    );
    const gpuRows = list.gpus.map((g) =>
      h(
        "tr",
        { "data-gpu-uuid": g.uuid },
        h("td", null, h("strong", null, g.uuid), h("div", { class: "sub" }, `index ${g.index}${g.present ? "" : " · missing"}`)),
        h("td", null, g.hostname, h("div", { class: "sub" }, shortId(g.nodeId))),
        h("td", null, g.model || "—"),
        h("td", { class: "health" }, badge(healthName(g.health))),
        h(
          "td",
          { class: "wrap" },
          g.reasons.map((r) => h("div", null, reasonLine(r))),
          g.manualQuarantine && h("div", { class: "sub" }, `quarantined by hand: ${g.manualQuarantine.reason}`),
        ),
        h("td", null, g.leaseId ? h("span", { title: g.leaseId }, shortId(g.leaseId)) : "free"),
        h("td", null, when(g.healthChangeTime)),
      ),
    );
    const unhealthy = totals.get(gpusv1.HealthState.UNHEALTHY) ?? 0n;
    const degraded = totals.get(gpusv1.HealthState.DEGRADED) ?? 0n;
    const all = [...totals.values()].reduce((a, b) => a + b, 0n);
    root.replaceChildren(
      h("h1", null, "GPUs"),
      h(
        "p",
        { class: "summary", id: "gpu-summary" },
        `${count(all)} GPUs: ${count(unhealthy)} unhealthy, ${count(degraded)} degraded; ` +
          `${count(sum.quarantinedNodes)} nodes quarantined, ${count(sum.nodesDriverNotAnswering)} whose driver does not answer`,
      ),
      h(
        "div",
        { class: "two" },
        h(
          "section",
          { id: "gpu-states" },
          h("h2", null, "By model and health"),
          table(["Model", ...STATES.map(healthName)], stateRows, "No GPUs yet."),
        ),
        h(
          "section",
          { id: "gpu-reasons" },
          h("h2", null, "Why degraded or unhealthy"),
          table(["Check", "Code", "Effect", "GPUs"], reasonRows, "No GPU is degraded or unhealthy."),
        ),
      ),
      h(
        "section",
        { id: "gpu-problems" },
        h("h2", null, "Unhealthy and degraded GPUs"),
        table(["GPU", "Node", "Model", "Health", "Reasons", "Lease", "Since"], gpuRows, "All GPUs are healthy."),
        list.nextPageToken && h("p", { class: "sub" }, `The first ${PAGE_SIZE} shown.`),
      ),
    );
  },
};
