// The Workflows page: rolling operations over many nodes (upgrade, reboot, drain, configure,
// exec), listed with their progress, and one workflow's nodes step by step, with Pause, Resume
// and Cancel. #/workflows lists them; #/workflows/<id> shows one.
import { durationMs, iamv1, paginate, type Duration, type workflowsv1 } from "@better-compute/client";

import { badge, h, shortId, table, when } from "./dom.js";
import type { Page, PageContext } from "./pages.js";

/** How often a page showing an unfinished workflow renders again. */
const LIVE_MS = 2000;
/** The most node rows a workflow's page shows. */
const MAX_NODE_ROWS = 1000;

const STATES = ["running", "paused", "succeeded", "failed", "cancelled"];
const finished = (state: string) => state === "succeeded" || state === "failed" || state === "cancelled";
const inProgressSteps = new Set(["cordon", "drain", "act", "verify", "uncordon"]);

let listState = "";
/** "Retry failed" as last ticked, by workflow id: the page is rendered again every few seconds. */
const retryChoice = new Map<string, boolean>();
let liveTimer: ReturnType<typeof setTimeout> | undefined;

/** The workflow id of #/workflows/<id>, or "" on the list. */
function detailId(): string {
  const [, id = ""] = location.hash.replace(/^#\/?/, "").split("/");
  return decodeURIComponent(id);
}

/** Renders the page again in LIVE_MS while it still shows what it showed (same hash, visible). */
export function liveRefresh(ctx: PageContext, root: HTMLElement): void {
  clearTimeout(liveTimer);
  const hash = location.hash;
  liveTimer = setTimeout(() => {
    if (root.isConnected && location.hash === hash && document.visibilityState === "visible") void ctx.refresh();
  }, LIVE_MS);
}

/** Whether the caller's roles include workflows.operate (owner, admin, operator), from iam/whoAmI once per sign-in. */
const operators = new WeakMap<PageContext, Promise<boolean>>();

export function canOperate(ctx: PageContext): Promise<boolean> {
  let p = operators.get(ctx);
  if (!p) {
    const operating = new Set([iamv1.Role.OWNER, iamv1.Role.ADMIN, iamv1.Role.OPERATOR]);
    p = ctx.bc.iam.whoAmI({}).then(
      (me) => me.roles.some((r) => operating.has(r)),
      () => true, // unknown: offer the buttons, the API decides
    );
    operators.set(ctx, p);
  }
  return p;
}

function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

function actionText(a: workflowsv1.Action | undefined): string {
  const k = a?.kind;
  switch (k?.case) {
    case "upgrade":
      return `upgrade to ${k.value.version}`;
    case "reboot":
    case "drain":
      return k.case;
    case "configure":
      return `configure (${Object.keys(k.value.config?.fields ?? {}).length} keys)`;
    case "exec":
      return ["exec", k.value.path, ...k.value.args].join(" ");
  }
  return "—";
}

function targetText(t: workflowsv1.Target | undefined): string {
  if (t?.poolId) return `pool ${t.poolId}`;
  const sel = Object.entries(t?.labelSelector ?? {});
  if (sel.length > 0) return `labels ${sel.sort(([a], [b]) => a.localeCompare(b)).map(([k, v]) => `${k}=${v}`).join(", ")}`;
  if (t?.nodeIds.length) return `${t.nodeIds.length} nodes by id`;
  return "—";
}

function durationText(d: Duration | undefined, unset: string): string {
  if (!d) return unset;
  const s = durationMs(d) / 1000;
  if (s >= 3600 && s % 3600 === 0) return `${s / 3600} h`;
  if (s >= 60 && s % 60 === 0) return `${s / 60} min`;
  return `${s} s`;
}

function policyText(p: workflowsv1.Policy | undefined): string {
  return (
    `${Math.max(p?.maxParallel ?? 1, 1)} at a time, pauses after ${(p?.maxFailures ?? 0) + 1} failed, ` +
    `healthy for ${durationText(p?.minHealthy, "0 s")}, drain deadline ${durationText(p?.drainDeadline, "1 h")}, ` +
    `step timeout ${durationText(p?.stepTimeout, "15 min")}`
  );
}

/** The counts as one stacked bar (succeeded, skipped, failed, in progress, pending) with the numbers as text. */
function progressBar(c: workflowsv1.Counts | undefined): HTMLElement {
  const total = c?.total ?? 0;
  const parts: [string, number, string][] = [
    ["succeeded", c?.succeeded ?? 0, "succeeded"],
    ["skipped", c?.skipped ?? 0, "skipped"],
    ["failed", c?.failed ?? 0, "failed"],
    ["in-progress", c?.inProgress ?? 0, "in progress"],
    ["pending", c?.pending ?? 0, "pending"],
  ];
  const summary = parts
    .filter(([, n], i) => n > 0 || i === 0)
    .map(([, n, label]) => `${n} ${label}`)
    .join(", ");
  const track = h("div", { class: "stack-track" });
  for (const [kind, n] of parts) {
    if (n <= 0 || total <= 0) continue;
    const seg = h("span", { class: `stack-${kind}` });
    seg.style.width = `${((n / total) * 100).toFixed(2)}%`; // CSSOM, which a style-src 'self' policy allows
    track.append(seg);
  }
  return h(
    "div",
    { class: "stack", title: `${summary} of ${total}` },
    track,
    h("div", { class: "stack-label" }, `${c?.succeeded ?? 0}/${total} done`, (c?.failed ?? 0) > 0 && ` · ${c?.failed} failed`),
  );
}

function stateCell(w: workflowsv1.Workflow): HTMLElement[] {
  return [badge(w.state || "unknown"), ...(w.reason && w.state !== "running" ? [h("div", { class: "sub wrap" }, w.reason)] : [])];
}

/** Calls act on w, flashing what happened, then renders the page again. */
function action(ctx: PageContext, w: workflowsv1.Workflow, verb: string, act: () => Promise<{ workflow?: workflowsv1.Workflow }>) {
  return async (e: Event) => {
    (e.currentTarget as HTMLButtonElement).disabled = true;
    const name = w.name || shortId(w.id);
    try {
      const res = await act();
      ctx.flash(`${name}: ${verb}, now ${res.workflow?.state ?? "?"}`, "ok");
    } catch (err) {
      ctx.flash(`${name}: ${verb} failed: ${errorText(err)}`, "error");
    }
    await ctx.refresh();
  };
}

/** Pause, Resume (with "retry failed") and Cancel, as the workflow's state allows. */
function controls(ctx: PageContext, w: workflowsv1.Workflow): HTMLElement | null {
  if (finished(w.state)) return null;
  const retry = h("input", {
    type: "checkbox",
    id: "retry-failed",
    checked: retryChoice.get(w.id) ?? (w.counts?.failed ?? 0) > 0,
    onchange: (e: Event) => retryChoice.set(w.id, (e.target as HTMLInputElement).checked),
  });
  return h(
    "div",
    { class: "actions workflow-actions" },
    w.state === "running" &&
      h("button", { type: "button", id: "workflow-pause", onclick: action(ctx, w, "paused", () => ctx.bc.workflows.pause({ id: w.id, reason: "paused from the dashboard" })) }, "Pause"),
    w.state === "paused" && [
      h(
        "button",
        { type: "button", id: "workflow-resume", onclick: action(ctx, w, "resumed", () => ctx.bc.workflows.resume({ id: w.id, retryFailed: retry.checked })) },
        "Resume",
      ),
      h("label", { class: "check", for: "retry-failed" }, retry, " retry failed nodes"),
    ],
    h(
      "button",
      {
        type: "button",
        class: "warn",
        id: "workflow-cancel",
        onclick: (e: Event) => {
          if (!confirm(`Cancel ${w.name || w.id}? No more nodes are admitted and the nodes it cordoned are uncordoned.`)) return;
          return action(ctx, w, "cancelled", () => ctx.bc.workflows.cancel({ id: w.id, reason: "cancelled from the dashboard" }))(e);
        },
      },
      "Cancel",
    ),
  );
}

async function renderList(ctx: PageContext, root: HTMLElement): Promise<void> {
  const workflows: workflowsv1.Workflow[] = [];
  for await (const w of paginate(
    (pageToken) => ctx.bc.workflows.list({ states: listState ? [listState] : [], pageSize: 100, pageToken }),
    (r) => r.workflows,
  )) {
    workflows.push(w);
    if (workflows.length >= 200) break;
  }
  const filter = h(
    "select",
    {
      "aria-label": "State",
      id: "workflow-state",
      onchange: (e: Event) => {
        listState = (e.target as HTMLSelectElement).value;
        void ctx.refresh();
      },
    },
    h("option", { value: "", selected: listState === "" }, "all states"),
    STATES.map((s) => h("option", { value: s, selected: s === listState }, s)),
  );
  const rows = workflows.map((w) =>
    h(
      "tr",
      { "data-workflow-id": w.id, "data-state": w.state },
      h("td", null, h("a", { href: `#/workflows/${encodeURIComponent(w.id)}` }, w.name || shortId(w.id)), h("div", { class: "sub" }, shortId(w.id))),
      h("td", { class: "wrap" }, actionText(w.action)),
      h("td", { class: "state" }, stateCell(w)),
      h("td", { class: "progress" }, progressBar(w.counts)),
      h("td", null, when(w.createTime), w.origin === "spec" && h("div", { class: "sub" }, "from a node spec")),
    ),
  );
  root.replaceChildren(
    h("h1", null, "Workflows ", filter),
    table(["Workflow", "Action", "State", "Progress", "Created"], rows, "No workflows. Start one with `better-compute workflow run` or workflows/create."),
    h(
      "p",
      { class: "sub" },
      "A workflow upgrades, reboots, drains, configures or runs a program on many nodes, a few at a time: each node is " +
        "cordoned, drained, acted on, verified and uncordoned. More failed nodes than it tolerates pause it.",
    ),
  );
  if (workflows.some((w) => !finished(w.state))) liveRefresh(ctx, root);
}

function nodeRows(nodes: workflowsv1.NodeProgress[]): HTMLTableRowElement[] {
  return nodes.map((n) =>
    h(
      "tr",
      { "data-node-id": n.nodeId, "data-step": n.step },
      h("td", null, String(n.position + 1)),
      h("td", null, h("strong", null, n.hostname || shortId(n.nodeId)), h("div", { class: "sub" }, shortId(n.nodeId))),
      h("td", { class: "state" }, badge(n.step, inProgressSteps.has(n.step) ? "in-progress" : n.step)),
      h("td", null, n.attempt > 0 ? String(n.attempt) : "—"),
      h("td", { class: "wrap" }, n.message || "—"),
      h("td", null, when(n.admitTime)),
      h("td", null, when(n.stepTime)),
      h("td", null, when(n.finishTime)),
    ),
  );
}

async function renderDetail(ctx: PageContext, root: HTMLElement, id: string): Promise<void> {
  const [res, operate] = await Promise.all([ctx.bc.workflows.get({ id }), canOperate(ctx)]);
  const w = res.workflow!;
  let nodes = res.nodes;
  let note = "";
  if (nodes.length > MAX_NODE_ROWS) {
    nodes = nodes.filter((n) => n.step === "failed" || inProgressSteps.has(n.step)).slice(0, MAX_NODE_ROWS);
    note = `${res.nodes.length} nodes; showing the ${nodes.length} in their steps or failed.`;
  }
  const facts: [string, HTMLElement | string][] = [
    ["Action", actionText(w.action)],
    ["Target", targetText(w.target)],
    ["Policy", policyText(w.policy)],
    ["Created", h("span", null, when(w.createTime), w.createdBy && ` by ${w.createdBy}`, w.origin === "spec" && " (for a node spec)")],
    ["Updated", when(w.updateTime)],
    ["Finished", when(w.finishTime)],
  ];
  root.replaceChildren(
    h("p", { class: "crumbs" }, h("a", { href: "#/workflows" }, "← Workflows")),
    h("h1", { "data-workflow-id": w.id }, w.name || shortId(w.id), " ", badge(w.state || "unknown")),
    h(
      "section",
      { class: "card wide workflow", id: "workflow" },
      w.reason && h("p", { class: w.state === "failed" || w.state === "paused" ? "error" : "sub", id: "workflow-reason" }, w.reason),
      progressBar(w.counts),
      h("dl", { class: "grant" }, facts.flatMap(([k, v]) => [h("dt", null, k), h("dd", null, v)])),
      operate ? controls(ctx, w) : !finished(w.state) && h("p", { class: "sub" }, "Your role may only look at workflows."),
    ),
    table(["#", "Node", "Step", "Attempt", "Message", "Admitted", "Step since", "Finished"], nodeRows(nodes), "This workflow took no nodes."),
    note && h("p", { class: "sub" }, note),
  );
  if (!finished(w.state)) liveRefresh(ctx, root);
}

export const workflowsPage: Page = {
  title: "Workflows",
  render(ctx, root) {
    clearTimeout(liveTimer);
    const id = detailId();
    return id ? renderDetail(ctx, root, id) : renderList(ctx, root);
  },
};
