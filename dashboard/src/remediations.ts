// The Remediations page: the repairs of GPUs and nodes that health marked bad, each climbing its
// ladder of steps (drain, gpuReset, reboot, powerCycle, diagnose, verify, service). The ones in
// progress (waiting, running) come first, then the most recently ended, each with where it is on
// its ladder as a strip of marks from its history; #/remediations/<id> shows one with its full
// history, Cancel (waiting, running) and Return from service (service). docs/remediation.md.
import { paginate, remediationsv1, timestampMs, type Timestamp } from "@better-compute/client";

import { badge, h, shortId, table, when } from "./dom.js";
import type { Page, PageContext } from "./pages.js";
import { canOperate, liveRefresh } from "./workflows.js";

/** The most remediations read for the list; the API lists oldest first. */
const MAX_READ = 5000;
/** The most ended remediations the list shows, the most recently ended first. */
const MAX_ENDED = 50;

const S = remediationsv1.State;
const STATES = [S.WAITING, S.RUNNING, S.SUCCEEDED, S.SERVICE, S.RETURNED, S.CANCELLED, S.FAILED];

/** A state's name, lower case: "running". */
export function stateName(s: remediationsv1.State): string {
  return (S[s] ?? "unknown").toLowerCase();
}

const inProgress = (s: remediationsv1.State) => s === S.WAITING || s === S.RUNNING;

let listState: remediationsv1.State = S.UNSPECIFIED;

/** The remediation id of #/remediations/<id>, or "" on the list. */
function detailId(): string {
  const [, id = ""] = location.hash.replace(/^#\/?/, "").split("/");
  return decodeURIComponent(id);
}

function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** A span of time as "45 s", "3 min 20 s", "2 h 5 min", "1 d 3 h". */
export function spanText(ms: number): string {
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 60) return `${s} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return s % 60 ? `${m} min ${s % 60} s` : `${m} min`;
  const hrs = Math.floor(m / 60);
  if (hrs < 24) return m % 60 ? `${hrs} h ${m % 60} min` : `${hrs} h`;
  const d = Math.floor(hrs / 24);
  return hrs % 24 ? `${d} d ${hrs % 24} h` : `${d} d`;
}

const ms = (t: Timestamp | undefined) => (t ? timestampMs(t) : undefined);

/** From a to b (now while b is unset), or "—" without a. */
function between(a: Timestamp | undefined, b: Timestamp | undefined): string {
  const from = ms(a);
  if (from === undefined) return "—";
  return spanText((ms(b) ?? Date.now()) - from);
}

/** A step as text: "diagnose (level 3)", "verify (10 min)". */
function stepText(st: remediationsv1.Step | undefined): string {
  if (!st) return "—";
  if (st.level > 0) return `${st.action} (level ${st.level})`;
  if (st.window) return `${st.action} (${spanText(Number(st.window.seconds) * 1000 + st.window.nanos / 1e6)})`;
  return st.action;
}

/**
 * The mark of each of r's steps: the outcome of its last history entry (passed, failed, skipped,
 * unavailable, cancelled, returned), "current" for the step a running remediation is in, else
 * "pending".
 */
export function stepMarks(r: remediationsv1.Remediation): string[] {
  const marks = r.steps.map(() => "pending");
  for (const e of r.history) if (e.step >= 0 && e.step < marks.length) marks[e.step] = e.outcome || "pending";
  if (r.state === S.RUNNING && r.step >= 0 && r.step < marks.length) {
    const last = [...r.history].reverse().find((e) => e.step === r.step);
    if (!last || !last.endTime) marks[r.step] = "current";
  }
  return marks;
}

/** Where r is on its ladder: "3/8 diagnose". */
export function positionText(r: remediationsv1.Remediation): string {
  if (r.steps.length === 0) return "—";
  if (r.state === S.WAITING && r.history.length === 0) return `0/${r.steps.length} waiting`;
  const i = Math.min(Math.max(r.step, 0), r.steps.length - 1);
  return `${i + 1}/${r.steps.length} ${r.steps[i].action}`;
}

/** The ladder as a strip of marks, one per step, each titled with its step and mark. */
function ladderStrip(r: remediationsv1.Remediation, labels = false): HTMLElement {
  const marks = stepMarks(r);
  return h(
    "div",
    { class: labels ? "ladder ladder-labelled" : "ladder", "data-marks": marks.join(",") },
    r.steps.map((st, i) =>
      h(
        "span",
        { class: `ladder-step ladder-${marks[i].replace(/[^a-z]/g, "")}`, title: `${i + 1}. ${stepText(st)}: ${marks[i]}` },
        labels ? st.action : "",
      ),
    ),
  );
}

function hostCell(r: remediationsv1.Remediation): HTMLElement[] {
  return [h("strong", null, r.hostname || shortId(r.nodeId)), h("div", { class: "sub", title: r.nodeId }, shortId(r.nodeId))];
}

function gpuCell(r: remediationsv1.Remediation): (HTMLElement | string)[] {
  if (!r.gpuUuid) return ["whole node"];
  return [h("span", { title: r.gpuUuid }, shortId(r.gpuUuid)), r.gpuSerial ? h("div", { class: "sub" }, `serial ${r.gpuSerial}`) : ""];
}

const SERVICE_HINT = "needs people: repair or replace it, then Return from service";

function stateCell(r: remediationsv1.Remediation): (HTMLElement | string)[] {
  const name = stateName(r.state);
  return [badge(name, `rem-${name}`), r.state === S.SERVICE ? h("div", { class: "sub wrap service-hint" }, SERVICE_HINT) : ""];
}

/** Time in remediation (running, waiting) or time to repair (ended). */
function timeCell(r: remediationsv1.Remediation): (HTMLElement | string)[] {
  const ended = !inProgress(r.state);
  return [between(r.createTime, ended ? r.endTime : undefined), h("div", { class: "sub" }, ended ? "time to repair" : "so far")];
}

/** Calls act on r, flashing what happened, then renders the page again. */
function action(ctx: PageContext, r: remediationsv1.Remediation, verb: string, act: () => Promise<{ remediation?: remediationsv1.Remediation }>) {
  return async (e: Event) => {
    e.stopPropagation();
    (e.currentTarget as HTMLButtonElement).disabled = true;
    const name = `${r.hostname || shortId(r.nodeId)} (${shortId(r.id)})`;
    try {
      const res = await act();
      ctx.flash(`${name}: ${verb}, now ${res.remediation ? stateName(res.remediation.state) : "?"}`, "ok");
    } catch (err) {
      ctx.flash(`${name}: ${verb} failed: ${errorText(err)}`, "error");
    }
    await ctx.refresh();
  };
}

/** Cancel (waiting, running) and Return from service (service), as r's state allows. */
function controls(ctx: PageContext, r: remediationsv1.Remediation): HTMLElement | null {
  if (inProgress(r.state)) {
    return h(
      "div",
      { class: "actions remediation-actions" },
      h(
        "button",
        {
          type: "button",
          class: "warn remediation-cancel",
          onclick: (e: Event) => {
            e.stopPropagation();
            if (!confirm(`Cancel the remediation of ${r.hostname}? It takes no further step; a node it drained stays drained.`)) return;
            return action(ctx, r, "cancelled", () => ctx.bc.remediations.cancel({ id: r.id }))(e);
          },
        },
        "Cancel",
      ),
    );
  }
  if (r.state === S.SERVICE) {
    return h(
      "div",
      { class: "actions remediation-actions" },
      h(
        "button",
        {
          type: "button",
          class: "remediation-return",
          onclick: (e: Event) => {
            e.stopPropagation();
            if (!confirm(`Return ${r.hostname}${r.gpuUuid ? ` (GPU ${r.gpuUuid})` : ""} to service? Its GPU is cleared and the node made ready.`)) return;
            return action(ctx, r, "returned to service", () => ctx.bc.remediations.returnFromService({ id: r.id }))(e);
          },
        },
        "Return from service",
      ),
    );
  }
  return null;
}

async function readAll(ctx: PageContext, state: remediationsv1.State): Promise<remediationsv1.Remediation[]> {
  const out: remediationsv1.Remediation[] = [];
  for await (const r of paginate(
    (pageToken) => ctx.bc.remediations.list({ state, pageSize: 500, pageToken }),
    (res) => res.remediations,
  )) {
    out.push(r);
    if (out.length >= MAX_READ) break;
  }
  return out;
}

async function renderList(ctx: PageContext, root: HTMLElement): Promise<void> {
  const [all, operate] = await Promise.all([readAll(ctx, listState), canOperate(ctx)]);
  const running = all.filter((r) => inProgress(r.state)).sort((a, b) => (ms(a.createTime) ?? 0) - (ms(b.createTime) ?? 0));
  const endedAll = all.filter((r) => !inProgress(r.state)).sort((a, b) => (ms(b.endTime) ?? 0) - (ms(a.endTime) ?? 0));
  const ended = endedAll.slice(0, MAX_ENDED);
  const filter = h(
    "select",
    {
      "aria-label": "State",
      id: "remediation-state",
      onchange: (e: Event) => {
        listState = Number((e.target as HTMLSelectElement).value) as remediationsv1.State;
        void ctx.refresh();
      },
    },
    h("option", { value: String(S.UNSPECIFIED), selected: listState === S.UNSPECIFIED }, "all states"),
    STATES.map((s) => h("option", { value: String(s), selected: s === listState }, stateName(s))),
  );
  const row = (r: remediationsv1.Remediation) => {
    const href = `#/remediations/${encodeURIComponent(r.id)}`;
    return h(
      "tr",
      {
        "data-remediation-id": r.id,
        "data-state": stateName(r.state),
        class: "clickable",
        onclick: (e: Event) => {
          if ((e.target as HTMLElement).closest("a, button")) return;
          location.hash = href;
        },
      },
      h("td", null, hostCell(r)),
      h("td", null, gpuCell(r)),
      h("td", { class: "wrap" }, r.reason || "—"),
      h("td", null, r.ladder || "—"),
      h("td", { class: "state" }, stateCell(r)),
      h("td", { class: "position" }, h("a", { href }, positionText(r)), ladderStrip(r)),
      h("td", { class: "num duration" }, timeCell(r)),
      h("td", null, when(r.createTime)),
      h("td", null, operate && controls(ctx, r)),
    );
  };
  const headers = ["Node", "GPU", "Reason", "Ladder", "State", "Step", "Time", "Started", ""];
  const filtered = listState !== S.UNSPECIFIED;
  const parts: (HTMLElement | string | false)[] = [
    h("h1", null, "Remediations ", filter),
    h(
      "p",
      { class: "summary", id: "remediation-summary" },
      `${running.filter((r) => r.state === S.RUNNING).length} running, ${running.filter((r) => r.state === S.WAITING).length} waiting, ` +
        `${all.filter((r) => r.state === S.SERVICE).length} in service`,
    ),
    (!filtered || inProgress(listState)) &&
      h(
        "section",
        { id: "remediations-active" },
        h("h2", null, "In progress"),
        table(headers, running.map(row), "No remediation is waiting or running."),
      ),
    (!filtered || !inProgress(listState)) &&
      h(
        "section",
        { id: "remediations-ended" },
        h("h2", null, "Recently ended"),
        table(headers, ended.map(row), "No remediation has ended yet."),
        endedAll.length > ended.length && h("p", { class: "sub" }, `The ${MAX_ENDED} most recently ended of ${endedAll.length} shown.`),
      ),
    all.length >= MAX_READ && h("p", { class: "sub" }, `The first ${MAX_READ} remediations read; filter by state to see others.`),
    !operate && h("p", { class: "sub" }, "Your role may only look at remediations."),
    h(
      "p",
      { class: "sub" },
      "A remediation repairs a GPU or node that health marked bad: it drains the node, tries a fix (a GPU reset, a reboot, " +
        "a power cycle) and checks it (DCGM diagnostics, a clean window of health signals), tries the next fix if a check " +
        "fails, and at the top of its ladder hands the hardware to people (service).",
    ),
  ];
  root.replaceChildren(...parts.filter((p): p is HTMLElement | string => p !== false));
  if (running.length > 0) liveRefresh(ctx, root);
}

function historyRows(r: remediationsv1.Remediation): HTMLTableRowElement[] {
  return r.history.map((e) =>
    h(
      "tr",
      { "data-step": e.step, "data-outcome": e.outcome },
      h("td", null, String(e.step + 1)),
      h("td", null, stepText(r.steps[e.step]) === "—" ? e.action : stepText(r.steps[e.step])),
      h("td", { class: "state" }, e.outcome ? badge(e.outcome, `rem-${e.outcome}`) : badge("running", "rem-running")),
      h("td", { class: "wrap" }, e.detail || "—"),
      h("td", null, when(e.startTime)),
      h("td", { class: "num" }, e.endTime ? between(e.startTime, e.endTime) : `${between(e.startTime, undefined)} so far`),
    ),
  );
}

async function renderDetail(ctx: PageContext, root: HTMLElement, id: string): Promise<void> {
  const [res, operate] = await Promise.all([ctx.bc.remediations.get({ id }), canOperate(ctx)]);
  const r = res.remediation!;
  const ended = !inProgress(r.state);
  const facts: [string, HTMLElement | string | (HTMLElement | string)[]][] = [
    ["Node", h("span", null, r.hostname || "—", " ", h("span", { class: "sub" }, r.nodeId))],
    ["GPU", r.gpuUuid ? `${r.gpuUuid}${r.gpuSerial ? ` (serial ${r.gpuSerial})` : ""}` : "the whole node"],
    ["Reason", r.reason || "—"],
    ["Ladder", `${r.ladder || "—"}${r.policyVersion ? ` (policy ${r.policyVersion})` : ""}`],
    ["Step", positionText(r)],
    ["Failure domain", r.failureDomain || "—"],
    ["Started", h("span", null, when(r.createTime), r.principalId ? ` by hand (${shortId(r.principalId)})` : " by health")],
    [ended ? "Time to repair" : "In remediation", between(r.createTime, ended ? r.endTime : undefined)],
    ["Ended", when(r.endTime)],
  ];
  root.replaceChildren(
    h("p", { class: "crumbs" }, h("a", { href: "#/remediations" }, "← Remediations")),
    h("h1", { "data-remediation-id": r.id }, `Remediation of ${r.hostname || shortId(r.nodeId)} `, ...stateCell(r).slice(0, 1)),
    h(
      "section",
      { class: "card wide remediation", id: "remediation" },
      r.state === S.SERVICE && h("p", { class: "error", id: "remediation-service" }, `The top of the ladder: ${SERVICE_HINT}.`),
      ladderStrip(r, true),
      h("dl", { class: "grant" }, facts.flatMap(([k, v]) => [h("dt", null, k), h("dd", null, v)])),
      operate ? controls(ctx, r) : (inProgress(r.state) || r.state === S.SERVICE) && h("p", { class: "sub" }, "Your role may only look at remediations."),
    ),
    h("h2", null, "History"),
    table(["#", "Action", "Outcome", "Detail", "Started", "Duration"], historyRows(r), "No step taken yet."),
    h("h2", null, "Ladder"),
    table(
      ["#", "Step", "Mark"],
      r.steps.map((st, i) => h("tr", { "data-ladder-step": i }, h("td", null, String(i + 1)), h("td", null, stepText(st)), h("td", null, stepMarks(r)[i]))),
      "No steps.",
    ),
  );
  if (!ended) liveRefresh(ctx, root);
}

export const remediationsPage: Page = {
  title: "Remediations",
  render(ctx, root) {
    const id = detailId();
    return id ? renderDetail(ctx, root, id) : renderList(ctx, root);
  },
};
