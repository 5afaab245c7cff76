"""The README's "Rolling workflows" example (examples/rolling_upgrade.py), run against canned
answers: no server is needed, the calls never leave the client."""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from connectrpc.request import RequestContext

from better_compute import BetterCompute, workflowsv1

ROOT = Path(__file__).resolve().parent.parent


def _load_example() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "better_compute_examples_rolling_upgrade", ROOT / "examples" / "rolling_upgrade.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


example = _load_example()


class Canned:
    """Interceptor that records every call in ``calls`` and answers it from ``answers``, by method
    name: each call takes the next answer, the last one repeating (an empty response for a method
    without any)."""

    def __init__(self, **answers: list[Any]) -> None:
        self.answers = answers
        self.calls: list[tuple[str, Any]] = []

    def intercept_unary_sync(self, call_next: Callable[..., Any], request: Any, ctx: RequestContext, /) -> Any:
        name = ctx.method.name
        self.calls.append((name, request))
        queue = self.answers.get(name, [])
        if not queue:
            return ctx.method.output()
        return queue.pop(0) if len(queue) > 1 else queue[0]


def canned_client(**answers: list[Any]) -> tuple[BetterCompute, Canned]:
    canned = Canned(**answers)
    return BetterCompute("http://canned.invalid/api", "bck_canned", interceptors=[canned]), canned


def got(state: str, succeeded: int, in_progress: int, failed: int) -> workflowsv1.GetResponse:
    """A workflows.get answer for workflow w1 of 4 nodes; gpu-2 failed when failed > 0."""
    return workflowsv1.GetResponse(
        workflow=workflowsv1.Workflow(
            id="w1",
            state=state,
            reason="1 node failed" if failed else "",
            counts=workflowsv1.Counts(total=4, succeeded=succeeded, in_progress=in_progress, failed=failed,
                                      pending=4 - succeeded - in_progress - failed),
        ),
        nodes=[
            workflowsv1.NodeProgress(node_id="n1", hostname="gpu-1", step="succeeded" if succeeded else "act"),
            workflowsv1.NodeProgress(node_id="n2", hostname="gpu-2", step="failed" if failed else "pending",
                                     message="rolled back" if failed else ""),
        ],
    )


CREATED = workflowsv1.CreateResponse(workflow=workflowsv1.Workflow(id="w1", state="running"))


def test_readme_shows_the_example() -> None:
    readme = (ROOT / "README.md").read_text()
    source = (ROOT / "examples" / "rolling_upgrade.py").read_text()
    section = readme.partition("\n## Rolling workflows\n")[2].partition("\n## ")[0]
    blocks = re.findall(r"^```python\n(.*?)^```$", section, re.M | re.S)
    assert len(blocks) == 1
    indented = re.sub(r"^(?=.)", "    ", blocks[0], flags=re.M)
    assert indented in source, f"README.md shows code that is not in examples/rolling_upgrade.py:\n{blocks[0]}"


def test_rolling_upgrade_retries_failed_nodes_once(capsys: pytest.CaptureFixture[str]) -> None:
    bc, canned = canned_client(
        Create=[CREATED],
        Get=[got("running", 0, 2, 0), got("running", 0, 2, 0), got("paused", 1, 0, 1), got("running", 1, 1, 0),
             got("succeeded", 4, 0, 0)],
    )
    with bc:
        w = example.rolling_upgrade(bc, "1.4.0", poll_seconds=0)
    assert w.state == "succeeded"
    assert [m for m, _ in canned.calls] == ["Create", "Get", "Get", "Get", "Resume", "Get", "Get"]
    assert canned.calls[0][1] == workflowsv1.CreateRequest(
        name="upgrade the GPU nodes to 1.4.0",
        action=workflowsv1.Action(upgrade=workflowsv1.UpgradeAction(version="1.4.0")),
        target=workflowsv1.Target(label_selector={"role": "gpu"}),
        policy=workflowsv1.Policy(max_parallel=2, min_healthy=timedelta(seconds=30)),
    )
    assert canned.calls[4][1] == workflowsv1.ResumeRequest(id="w1", retry_failed=True)
    assert capsys.readouterr().out.splitlines() == [
        "running: 0/4 upgraded, 2 in progress, 0 failed",
        "paused: 1/4 upgraded, 0 in progress, 1 failed",
        "gpu-2 failed: rolled back",
        "running: 1/4 upgraded, 1 in progress, 0 failed",
        "succeeded: 4/4 upgraded, 0 in progress, 0 failed",
    ]


def test_rolling_upgrade_gives_up_when_paused_again() -> None:
    bc, canned = canned_client(Create=[CREATED], Get=[got("paused", 1, 0, 1)])
    with bc, pytest.raises(RuntimeError, match="^paused again: 1 node failed$"):
        example.rolling_upgrade(bc, "1.4.0", poll_seconds=0)
    assert [m for m, _ in canned.calls] == ["Create", "Get", "Resume", "Get"]
