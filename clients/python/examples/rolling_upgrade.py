"""The "Rolling workflows" example of README.md.

tests/test_workflow_example.py runs it against canned answers (no server) and checks that the
README shows its body as it is here.
"""

from __future__ import annotations

import time
from datetime import timedelta

from better_compute import BetterCompute, workflowsv1


def rolling_upgrade(bc: BetterCompute, version: str, poll_seconds: float = 2.0) -> workflowsv1.Workflow:
    """Upgrades the daemons of the nodes labelled role=gpu to version, two nodes at a time,
    following the workflow (workflows.get every poll_seconds) until it finishes, and starting its
    failed nodes over once if it pauses. Returns the finished workflow."""
    w = bc.workflows.create(workflowsv1.CreateRequest(
        name=f"upgrade the GPU nodes to {version}",
        action=workflowsv1.Action(upgrade=workflowsv1.UpgradeAction(version=version)),
        target=workflowsv1.Target(label_selector={"role": "gpu"}),
        policy=workflowsv1.Policy(max_parallel=2, min_healthy=timedelta(seconds=30)),
    )).workflow
    retried = False
    shown = ""
    while True:
        res = bc.workflows.get(workflowsv1.GetRequest(id=w.id))
        w, c = res.workflow, res.workflow.counts
        line = f"{w.state}: {c.succeeded}/{c.total} upgraded, {c.in_progress} in progress, {c.failed} failed"
        if line != shown:
            print(line)
            shown = line
        if w.state == "running":
            time.sleep(poll_seconds)
            continue
        if w.state != "paused":
            break  # succeeded, failed or cancelled
        for n in res.nodes:
            if n.step == "failed":
                print(n.hostname, "failed:", n.message)
        if retried:
            raise RuntimeError(f"paused again: {w.reason}")
        # Paused (a node failed, max_failures being 0): start the failed nodes over, once.
        bc.workflows.resume(workflowsv1.ResumeRequest(id=w.id, retry_failed=True))
        retried = True
    return w
