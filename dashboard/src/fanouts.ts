// The Fan-outs page: a fan-out's progress (commands/getFanOut), one command to many nodes
// (commands/fanOut, `better-compute commands run`). #/fanouts/<id> shows one: a bar of its
// finished commands, its commands counted by state and its first failures, refreshed live until
// it is done; #/fanouts asks for an id (the CLI and the API answer with it).
import { commandsv1 } from "@better-compute/client";

import { badge, h, meter, shortId, table, when } from "./dom.js";
import type { Page, PageContext } from "./pages.js";
import { liveRefresh } from "./workflows.js";

/** The fan-out id of #/fanouts/<id>, or "" without one. */
function fanOutId(): string {
  const [, id = ""] = location.hash.replace(/^#\/?/, "").split("/");
  return decodeURIComponent(id);
}

function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** A command state's name, lower case: "succeeded". */
function stateName(s: commandsv1.CommandState): string {
  return (commandsv1.CommandState[s] ?? "unknown").toLowerCase();
}

/** The counts as rows of a table: state, commands. */
function countRows(c: Omit<commandsv1.FanOutCounts, "$typeName" | "$unknown">): HTMLTableRowElement[] {
  const rows: [string, number][] = [
    ["pending", c.pending],
    ["sent", c.sent],
    ["acked", c.acked],
    ["succeeded", c.succeeded],
    ["failed", c.failed],
    ["expired", c.expired],
    ["cancelled", c.cancelled],
  ];
  return rows.map(([name, n]) => h("tr", { "data-state": name }, h("td", null, badge(name, `cmd-${name}`)), h("td", { class: "num" }, n)));
}

function failureRows(failures: commandsv1.Command[]): HTMLTableRowElement[] {
  return failures.map((c) => {
    const stderr = c.result?.stderr;
    const out = typeof stderr === "string" ? stderr : "";
    return h(
      "tr",
      null,
      h("td", { title: c.nodeId }, shortId(c.nodeId)),
      h("td", null, badge(stateName(c.state), `cmd-${stateName(c.state)}`)),
      h("td", { class: "wrap" }, c.error || out || "—"),
      h("td", null, when(c.finishTime)),
    );
  });
}

async function renderOne(ctx: PageContext, root: HTMLElement, id: string): Promise<void> {
  let res: commandsv1.GetFanOutResponse;
  try {
    res = await ctx.bc.commands.getFanOut({ id });
  } catch (err) {
    root.replaceChildren(h("h2", null, "Fan-out"), h("p", { class: "error" }, `commands/getFanOut: ${errorText(err)}`));
    return;
  }
  const f = res.fanOut!;
  const c = res.counts ?? { pending: 0, sent: 0, acked: 0, succeeded: 0, failed: 0, expired: 0, cancelled: 0 };
  const done = c.succeeded + c.failed + c.expired + c.cancelled;
  const bad = c.failed + c.expired + c.cancelled;
  root.replaceChildren(
    h("h2", null, "Fan-out ", h("code", null, f.id)),
    h(
      "p",
      { class: "sub" },
      `${f.type} to ${f.total} nodes, at most ${f.maxInFlight} at once · created `,
      when(f.createTime),
      " · deadline ",
      when(f.deadlineTime),
    ),
    h(
      "div",
      { id: "fanout-progress", "data-done": String(res.done) },
      meter(done, f.total, `${done}/${f.total} finished · ${c.sent + c.acked} in flight · ${c.pending} pending${bad ? ` · ${bad} failed` : ""}`),
      res.done ? badge(bad ? "done with failures" : "done", bad ? "rem-failed" : "rem-succeeded") : badge("running", "rem-running"),
    ),
    h("h3", null, "Commands by state"),
    table(["State", "Commands"], countRows(c), "No commands."),
    h("h3", null, "Failures"),
    table(["Node", "State", "Error", "Finished"], failureRows(res.failures), "No failures."),
    res.failures.length >= 20 ? h("p", { class: "sub" }, "The first 20; commands/list with fanOutId and state lists them all.") : "",
  );
  if (!res.done) liveRefresh(ctx, root);
}

export const fanOutsPage: Page = {
  title: "Fan-outs",
  async render(ctx, root) {
    const id = fanOutId();
    if (id) return renderOne(ctx, root, id);
    const input = h("input", { type: "text", id: "fanout-id", placeholder: "fan-out id", size: 40 });
    root.replaceChildren(
      h("h2", null, "Fan-outs"),
      h("p", null, "A fan-out is one command to many nodes (commands/fanOut, better-compute commands run). Open one by its id:"),
      h(
        "form",
        {
          onsubmit: (e: Event) => {
            e.preventDefault();
            const v = input.value.trim();
            if (v) location.hash = `#/fanouts/${encodeURIComponent(v)}`;
          },
        },
        input,
        h("button", { type: "submit" }, "Show"),
      ),
    );
  },
};
