// The Scaling panel of a pool's page: how the pool autoscales (the provision module's
// poolScaling/get): its settings, its machines by lifecycle step and the autoscaler's latest
// decisions, newest first. Where the module is not enabled the panel is left out, and a pool that
// does not autoscale gets one line: it never fails the page.
import { Code, ConnectError, timestampMs, type BetterCompute } from "@better-compute/client";

// The SDK's generated module API, used from its source like the rest of the SDK (its entry point
// exports only the core services).
import {
  MachineState,
  ProvisionModuleService,
  type GetPoolScalingResponse,
  type Machine,
  type ScalingDecision,
} from "../../clients/ts/src/gen/bettercompute/modules/provision/v1/provision_pb.js";
import { badge, h, shortId, table, when } from "./dom.js";

/** What poolScaling/get said of a pool: its scaling, that it has none, or that it cannot be read. */
type Scaling = { kind: "scaled"; res: GetPoolScalingResponse } | { kind: "none" } | { kind: "absent" } | { kind: "error"; message: string };

/**
 * Reads the pool's scaling through the session's transport (the key-guarded fetch). A deployment
 * without the provision module answers Unimplemented (no such procedure), and a key without
 * poolScaling.read PermissionDenied: the panel is then absent.
 */
async function readScaling(bc: BetterCompute, poolId: string): Promise<Scaling> {
  try {
    const res = await bc.transport.unary(ProvisionModuleService.method.getPoolScaling, undefined, undefined, undefined, { poolId });
    return { kind: "scaled", res: res.message };
  } catch (err) {
    const ce = ConnectError.from(err);
    switch (ce.code) {
      case Code.NotFound:
        return { kind: "none" };
      case Code.Unimplemented:
      case Code.PermissionDenied:
        return { kind: "absent" };
    }
    return { kind: "error", message: ce.rawMessage || String(err) };
  }
}

/** A number of milliseconds as "0 s", "90 s", "5 min", "2 h". */
function millis(ms: bigint): string {
  const s = Number(ms) / 1000;
  if (s >= 3600 && s % 3600 === 0) return `${s / 3600} h`;
  if (s >= 60 && s % 60 === 0) return `${s / 60} min`;
  return `${s} s`;
}

/** A machine state's name: "ready", "booting". */
function stateName(s: MachineState): string {
  return (MachineState[s] ?? String(s)).toLowerCase();
}

/** The lifecycle order of the states, for the summary. */
const STEP_ORDER = [
  MachineState.REQUESTED,
  MachineState.PROVISIONING,
  MachineState.BOOTING,
  MachineState.JOINED,
  MachineState.READY,
  MachineState.DELETING,
  MachineState.DRAINING,
  MachineState.DESTROYING,
  MachineState.FAILED,
  MachineState.GONE,
];

/** "2 ready, 1 booting": the machines counted by step, in lifecycle order. */
function byStep(machines: Machine[]): string {
  const counts = new Map<MachineState, number>();
  for (const m of machines) counts.set(m.state, (counts.get(m.state) ?? 0) + 1);
  const order = [...STEP_ORDER, ...[...counts.keys()].filter((s) => !STEP_ORDER.includes(s))];
  return order
    .filter((s) => counts.has(s))
    .map((s) => `${counts.get(s)} ${stateName(s)}`)
    .join(", ");
}

const ACTIONS: Record<string, string> = {
  scale_up: "scale up",
  scale_down: "scale down",
  replace_failed: "replace failed",
  blocked: "blocked",
};

function decisionRow(d: ScalingDecision): HTMLTableRowElement {
  return h(
    "tr",
    { "data-decision-action": d.action },
    h("td", null, when(d.time)),
    h("td", { class: "action" }, badge(ACTIONS[d.action] ?? d.action, d.action)),
    h("td", { class: "num count", title: d.machineIds.join("\n") || undefined }, String(d.count)),
    h("td", { class: "wrap reason" }, d.reason || "—"),
  );
}

function machineRow(m: Machine): HTMLTableRowElement {
  return h(
    "tr",
    { "data-machine-id": m.id },
    h("td", null, m.name, h("div", { class: "sub" }, shortId(m.id))),
    h("td", { class: "state" }, badge(stateName(m.state))),
    h("td", { title: m.nodeId || undefined }, m.nodeId ? shortId(m.nodeId) : "—"),
    h("td", null, when(m.updateTime ?? m.createTime)),
    h("td", { class: "wrap" }, m.reason || "—"),
  );
}

function panel(...children: (HTMLElement | string | false | null | undefined)[]): HTMLElement {
  return h("section", { class: "card wide", id: "scaling" }, h("h2", null, "Scaling"), ...children);
}

function scaledPanel(res: GetPoolScalingResponse): HTMLElement {
  const sc = res.scaling;
  const live = res.machines.filter((m) => m.state !== MachineState.GONE);
  const at = (d: ScalingDecision) => (d.time ? timestampMs(d.time) : 0);
  const decisions = [...res.decisions].sort((a, b) => at(b) - at(a));
  const fact = (label: string, value: string, key: string) => [h("dt", null, label), h("dd", { "data-setting": key }, value)];
  return panel(
    h(
      "dl",
      { class: "grant scaling-settings" },
      fact("Machine class", sc?.class ?? "—", "class"),
      fact("Min machines", String(sc?.min ?? 0), "min"),
      fact("Max machines", String(sc?.max ?? 0), "max"),
      fact("Scale-up delay", millis(sc?.scaleUpDelayMs ?? 0n), "scaleUpDelay"),
      fact("Scale-down idle time", millis(sc?.scaleDownIdleMs ?? 0n), "scaleDownIdle"),
      fact("Machines", `${sc?.machines ?? live.length}${live.length > 0 ? ` (${byStep(live)})` : ""}`, "machines"),
    ),
    h("h3", null, "Machines"),
    table(["Machine", "Step", "Node", "Since", "Reason"], live.map(machineRow), "No machines."),
    h("h3", null, "Recent decisions"),
    h(
      "div",
      { id: "scaling-decisions" },
      table(["When", "Decision", "Machines", "Reason"], decisions.map(decisionRow), "No decisions yet."),
    ),
    h(
      "p",
      { class: "sub" },
      "Pending leases that cannot fit for longer than the scale-up delay get the fewest machines that make them fit; " +
        "machines idle for the scale-down idle time are deleted down to min. Each decision is also an event " +
        "(pool.scaled_up, pool.scaled_down, pool.scale_blocked).",
    ),
  );
}

/**
 * The Scaling panel of a pool of the caller's tenant, and whether the pool autoscales (the page
 * then renders again every few seconds, following the decisions as they are made); el is null
 * where the provision module is not enabled or the key may not read the pool's scaling.
 */
export async function scalingPanel(bc: BetterCompute, poolId: string): Promise<{ el: HTMLElement | null; scaled: boolean }> {
  const s = await readScaling(bc, poolId);
  switch (s.kind) {
    case "absent":
      return { el: null, scaled: false };
    case "none":
      return { el: panel(h("p", { class: "empty", id: "scaling-none" }, "Not autoscaled.")), scaled: false };
    case "error":
      return { el: panel(h("p", { class: "sub", id: "scaling-error" }, `Could not read the pool's scaling: ${s.message}`)), scaled: false };
    case "scaled":
      return { el: scaledPanel(s.res), scaled: true };
  }
}
