"""The README's "Sharing a pool with another tenant" example (examples/grants.py), run against
canned answers: no server is needed, the calls never leave the client."""

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

from better_compute import BetterCompute, leasesv1, poolsv1, usagev1

ROOT = Path(__file__).resolve().parent.parent
H100 = "NVIDIA H100 80GB HBM3"


def _load_example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("better_compute_examples_grants", ROOT / "examples" / "grants.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


grants = _load_example()


class Canned:
    """Interceptor that records every call in ``calls`` and answers it from ``answers``, by method
    name (an empty response for a method without one), instead of sending it."""

    def __init__(self, **answers: Any) -> None:
        self.answers = answers
        self.calls: list[tuple[str, Any]] = []

    def intercept_unary_sync(self, call_next: Callable[..., Any], request: Any, ctx: RequestContext, /) -> Any:
        name = ctx.method.name
        self.calls.append((name, request))
        return self.answers[name] if name in self.answers else ctx.method.output()


def canned_client(**answers: Any) -> tuple[BetterCompute, Canned]:
    canned = Canned(**answers)
    return BetterCompute("http://canned.invalid/api", "bck_canned", interceptors=[canned]), canned


def test_readme_shows_the_example() -> None:
    readme = (ROOT / "README.md").read_text()
    example = (ROOT / "examples" / "grants.py").read_text()
    section = readme.partition("\n## Sharing a pool with another tenant\n")[2]
    blocks = re.findall(r"^```python\n(.*?)^```$", section, re.M | re.S)
    assert len(blocks) == 4
    for b in blocks:
        indented = re.sub(r"^(?=.)", "    ", b, flags=re.M)
        assert indented in example, f"README.md shows code that is not in examples/grants.py:\n{b}"


def test_grant_pool(capsys: pytest.CaptureFixture[str]) -> None:
    bc, canned = canned_client(Grant=poolsv1.GrantResponse(grant=poolsv1.Grant(id="grant-1")))
    with bc:
        grants.grant_pool(bc, "pool-1", "tenant-2")
    assert canned.calls == [("Grant", poolsv1.GrantRequest(
        pool_id="pool-1",
        tenant_id="tenant-2",
        nominal=poolsv1.Resources(gpus={H100: 4}),
        borrowing_limit=poolsv1.Resources(gpus={H100: 4}),
        weight=1,
    ))]
    assert capsys.readouterr().out == "granted grant-1\n"


def test_lease_from_granted_pool(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(grants.time, "sleep", lambda _: None)
    grant = poolsv1.Grant(nominal=poolsv1.Resources(gpus={H100: 4}), borrowable=poolsv1.Resources(gpus={H100: 4}))
    grantee, canned = canned_client(
        List=poolsv1.ListResponse(pools=[
            poolsv1.Pool(id="own", name="own"),
            poolsv1.Pool(id="pool-1", name="shared", granted=True, grant=grant),
        ]),
        Create=leasesv1.CreateResponse(lease=leasesv1.Lease(id="lease-1", state=leasesv1.LEASE_STATE_PENDING)),
        Get=leasesv1.GetResponse(lease=leasesv1.Lease(
            id="lease-1",
            state=leasesv1.LEASE_STATE_PLACED,
            borrowing=True,
            allocations=[leasesv1.Allocation(node_id="node-1", hostname="gpu-1", gpu_index=3, gpu_uuid="GPU-abc")],
        )),
    )
    with grantee:
        grants.lease_from_granted_pool(grantee, "pool-1")
    assert [m for m, _ in canned.calls] == ["List", "Create", "Get"]
    assert canned.calls[1][1] == leasesv1.CreateRequest(
        pool_id="pool-1", gpus=2, gpu_model=H100, priority=100, duration=timedelta(hours=1))
    assert canned.calls[2][1] == leasesv1.GetRequest(id="lease-1")
    assert capsys.readouterr().out.splitlines() == [
        f"pool-1 shared nominal {{'{H100}': 4}} borrowable {{'{H100}': 4}}",
        "node-1 gpu-1 GPU 3 GPU-abc",
        "beyond the nominal quota: preempted first when the capacity is needed back",
    ]


def test_lease_not_placed_raises() -> None:
    grantee, _ = canned_client(Create=leasesv1.CreateResponse(lease=leasesv1.Lease(
        id="lease-1", state=leasesv1.LEASE_STATE_FAILED, reason="the grant was revoked")))
    with grantee, pytest.raises(RuntimeError, match="^lease LEASE_STATE_FAILED: the grant was revoked$"):
        grants.lease_from_granted_pool(grantee, "pool-1")


def test_list_and_revoke_grants(capsys: pytest.CaptureFixture[str]) -> None:
    bc, canned = canned_client(ListGrants=poolsv1.ListGrantsResponse(grants=[poolsv1.Grant(
        tenant_id="tenant-2", used=poolsv1.Resources(gpus={H100: 6}), borrowed=poolsv1.Resources(gpus={H100: 2}))]))
    with bc:
        grants.list_and_revoke_grants(bc, "pool-1", "tenant-2")
    assert canned.calls == [
        ("ListGrants", poolsv1.ListGrantsRequest(pool_id="pool-1")),
        ("RevokeGrant", poolsv1.RevokeGrantRequest(pool_id="pool-1", tenant_id="tenant-2")),
    ]
    assert capsys.readouterr().out == f"tenant-2 uses {{'{H100}': 6}} borrows {{'{H100}': 2}}\n"


def test_usage_by_tenant(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    csv = b"period_start,period_end,tenant_id,pool_id,pool_name,resource,model,quantity,unit,unhealthy_quantity,active_quantity,mean_utilization\n"
    bc, canned = canned_client(
        Query=usagev1.QueryResponse(totals=[
            usagev1.Usage(tenant_id="tenant-2", pool_id="pool-1", resource="gpu", model=H100, amount=7200)]),
        Export=usagev1.ExportResponse(content_type="text/csv", data=csv),
    )
    with bc:
        grants.usage_by_tenant(bc, str(tmp_path / "usage.csv"))
    assert (tmp_path / "usage.csv").read_bytes() == csv
    assert [m for m, _ in canned.calls] == ["Query", "Export"]
    query, export = canned.calls[0][1], canned.calls[1][1]
    assert query.scope == usagev1.SCOPE_OWNED_POOLS
    assert export.scope == usagev1.SCOPE_OWNED_POOLS
    assert export.format == usagev1.EXPORT_FORMAT_CSV
    end = query.end_time.ToDatetime()
    assert (end.minute, end.second, end.microsecond) == (0, 0, 0)
    assert end - query.start_time.ToDatetime() == timedelta(days=30)
    assert (export.start_time, export.end_time) == (query.start_time, query.end_time)
    assert capsys.readouterr().out == f"tenant-2 pool-1 gpu {H100} 7200.0\n"
