// The "Rolling workflows" example of README.md. `npm run typecheck` compiles it;
// test/workflows.test.ts runs it against canned answers and checks that the README shows its body
// as it is here.
import { type BetterCompute, durationFromMs, type workflowsv1 } from "../src/index.js";

/**
 * Upgrades the daemons of the nodes labelled role=gpu to version, two nodes at a time, following
 * the workflow (workflows.get every pollMs) until it finishes, and starting its failed nodes over
 * once if it pauses. Returns the finished workflow.
 */
export async function rollingUpgrade(bc: BetterCompute, version: string, pollMs = 2000): Promise<workflowsv1.Workflow> {
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
  const created = await bc.workflows.create({
    name: `upgrade the GPU nodes to ${version}`,
    action: { kind: { case: "upgrade", value: { version } } },
    target: { labelSelector: { role: "gpu" } },
    policy: { maxParallel: 2, minHealthy: durationFromMs(30_000) },
  });
  let w = created.workflow!;
  let retried = false;
  let shown = "";
  for (;;) {
    const { workflow, nodes } = await bc.workflows.get({ id: w.id });
    w = workflow!;
    const c = w.counts!;
    const line = `${w.state}: ${c.succeeded}/${c.total} upgraded, ${c.inProgress} in progress, ${c.failed} failed`;
    if (line !== shown) console.log((shown = line));
    if (w.state === "running") {
      await sleep(pollMs);
      continue;
    }
    if (w.state !== "paused") break; // succeeded, failed or cancelled
    for (const n of nodes.filter((n) => n.step === "failed")) console.log(n.hostname, "failed:", n.message);
    if (retried) throw new Error(`paused again: ${w.reason}`);
    // Paused (a node failed, maxFailures being 0): start the failed nodes over, once.
    await bc.workflows.resume({ id: w.id, retryFailed: true });
    retried = true;
  }
  return w;
}
