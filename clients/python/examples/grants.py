"""The "Sharing a pool with another tenant" example of README.md.

tests/test_examples.py imports it, runs it against canned answers (no server) and checks that the
README shows each function's body as it is here.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from better_compute import BetterCompute, leasesv1, poolsv1, usagev1


def grant_pool(bc: BetterCompute, pool_id: str, tenant_id: str) -> None:
    """The owner (bc) grants its pool pool_id to tenant tenant_id."""
    grant = bc.pools.grant(poolsv1.GrantRequest(
        pool_id=pool_id,
        tenant_id=tenant_id,
        nominal=poolsv1.Resources(gpus={"NVIDIA H100 80GB HBM3": 4}),
        borrowing_limit=poolsv1.Resources(gpus={"NVIDIA H100 80GB HBM3": 4}),
        weight=1,
    )).grant
    print("granted", grant.id)


def lease_from_granted_pool(grantee: BetterCompute, pool_id: str) -> None:
    """The grantee, with its own API key, lists its pools and leases from the granted pool_id."""
    for p in grantee.pools.list(poolsv1.ListRequest()).pools:
        if p.granted:
            print(p.id, p.name, "nominal", dict(p.grant.nominal.gpus), "borrowable", dict(p.grant.borrowable.gpus))
    lease = grantee.leases.create(leasesv1.CreateRequest(
        pool_id=pool_id, gpus=2, gpu_model="NVIDIA H100 80GB HBM3", priority=100, duration=timedelta(hours=1))).lease
    while lease.state == leasesv1.LEASE_STATE_PENDING:
        time.sleep(1)
        lease = grantee.leases.get(leasesv1.GetRequest(id=lease.id)).lease
    if lease.state != leasesv1.LEASE_STATE_PLACED:
        raise RuntimeError(f"lease {leasesv1.LeaseState.Name(lease.state)}: {lease.reason}")
    for a in lease.allocations:
        print(a.node_id, a.hostname, "GPU", a.gpu_index, a.gpu_uuid)
    if lease.borrowing:
        print("beyond the nominal quota: preempted first when the capacity is needed back")


def list_and_revoke_grants(bc: BetterCompute, pool_id: str, tenant_id: str) -> None:
    """The owner lists the grants of its pool pool_id and revokes tenant tenant_id's."""
    for g in bc.pools.list_grants(poolsv1.ListGrantsRequest(pool_id=pool_id)).grants:
        print(g.tenant_id, "uses", dict(g.used.gpus), "borrows", dict(g.borrowed.gpus))
    bc.pools.revoke_grant(poolsv1.RevokeGrantRequest(pool_id=pool_id, tenant_id=tenant_id))


def usage_by_tenant(bc: BetterCompute, csv_path: str) -> None:
    """The owner reads the last 30 days' usage of its pools by tenant and writes it as CSV."""
    end = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    start = end - timedelta(days=30)
    usage = bc.usage.query(usagev1.QueryRequest(start_time=start, end_time=end, scope=usagev1.SCOPE_OWNED_POOLS))
    for u in usage.totals:
        print(u.tenant_id, u.pool_id, u.resource, u.model, u.amount)  # GPU-, CPU- or MiB-seconds
    export = bc.usage.export(usagev1.ExportRequest(
        start_time=start, end_time=end, scope=usagev1.SCOPE_OWNED_POOLS, format=usagev1.EXPORT_FORMAT_CSV))
    Path(csv_path).write_bytes(export.data)
