"""Convenience clients: one object with a client for every API service.

    from better_compute import BetterCompute, nodesv1

    with BetterCompute("https://compute.example.com/api", api_key=KEY) as bc:
        for node in bc.nodes.list(nodesv1.ListRequest()).nodes:
            print(node.hostname, node.state)

Every call sends ``X-Better-Compute: 1`` and ``Authorization: Bearer <api_key>``, and raises a
:class:`~better_compute.errors.BetterComputeError` subclass when it fails.
:class:`AsyncBetterCompute` is the same with ``async`` methods.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Self

from connectrpc.client import ConnectClient, ConnectClientSync
from connectrpc.compat import google_protobuf_json_codec

from bettercompute.audit.v1.audit_connect import AuditServiceClient, AuditServiceClientSync
from bettercompute.commands.v1.commands_connect import CommandsServiceClient, CommandsServiceClientSync
from bettercompute.events.v1.events_connect import EventsServiceClient, EventsServiceClientSync
from bettercompute.iam.v1.iam_connect import IamServiceClient, IamServiceClientSync
from bettercompute.jointokens.v1.jointokens_connect import JoinTokensServiceClient, JoinTokensServiceClientSync
from bettercompute.leases.v1.leases_connect import LeasesServiceClient, LeasesServiceClientSync
from bettercompute.nodes.v1.nodes_connect import NodesServiceClient, NodesServiceClientSync
from bettercompute.pools.v1.pools_connect import PoolsServiceClient, PoolsServiceClientSync
from bettercompute.reservations.v1.reservations_connect import ReservationsServiceClient, ReservationsServiceClientSync
from bettercompute.gpus.v1.gpus_connect import GpusServiceClient, GpusServiceClientSync
from bettercompute.remediations.v1.remediations_connect import RemediationsServiceClient, RemediationsServiceClientSync
from bettercompute.system.v1.system_connect import SystemServiceClient, SystemServiceClientSync
from bettercompute.secrets.v1.secrets_connect import SecretsServiceClient, SecretsServiceClientSync
from bettercompute.auth.v1.auth_connect import AuthServiceClient, AuthServiceClientSync
from bettercompute.tunnels.v1.tunnels_connect import TunnelsServiceClient, TunnelsServiceClientSync
from bettercompute.usage.v1.usage_connect import UsageServiceClient, UsageServiceClientSync
from bettercompute.webhooks.v1.webhooks_connect import WebhooksServiceClient, WebhooksServiceClientSync
from bettercompute.workflows.v1.workflows_connect import WorkflowsServiceClient, WorkflowsServiceClientSync

from .errors import MapErrors
from .headers import BetterComputeHeaders

if TYPE_CHECKING:
    from collections.abc import Iterable
    from types import TracebackType

__all__ = ["AsyncBetterCompute", "BetterCompute"]


def _options(
    api_key: str | None,
    timeout_ms: int | None,
    json: bool,
    interceptors: Iterable[Any],
) -> dict[str, Any]:
    kw: dict[str, Any] = {
        "interceptors": [BetterComputeHeaders(api_key), MapErrors(), *interceptors],
        "timeout_ms": timeout_ms,
    }
    if json:
        kw["codec"] = google_protobuf_json_codec()
    return kw


class BetterCompute:
    """Synchronous clients for every service of the API at ``base_url``.

    Args:
        base_url: The API URL including its base path, for example
            ``https://compute.example.com/api`` (what ``better-compute dev`` prints as "API:").
        api_key: Sent as ``Authorization: Bearer <api_key>``; without one only public methods
            (``system.info``) answer.
        timeout_ms: Timeout of every call; none by default.
        json: Use the JSON encoding instead of binary protobuf.
        interceptors: More connectrpc interceptors, run after the SDK's own.
    """

    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        *,
        timeout_ms: int | None = None,
        json: bool = False,
        interceptors: Iterable[Any] = (),
    ) -> None:
        url = base_url.rstrip("/")
        kw = _options(api_key, timeout_ms, json, interceptors)
        self.system: SystemServiceClientSync = SystemServiceClientSync(url, **kw)
        self.iam: IamServiceClientSync = IamServiceClientSync(url, **kw)
        self.audit: AuditServiceClientSync = AuditServiceClientSync(url, **kw)
        self.events: EventsServiceClientSync = EventsServiceClientSync(url, **kw)
        self.webhooks: WebhooksServiceClientSync = WebhooksServiceClientSync(url, **kw)
        self.join_tokens: JoinTokensServiceClientSync = JoinTokensServiceClientSync(url, **kw)
        self.nodes: NodesServiceClientSync = NodesServiceClientSync(url, **kw)
        self.commands: CommandsServiceClientSync = CommandsServiceClientSync(url, **kw)
        self.pools: PoolsServiceClientSync = PoolsServiceClientSync(url, **kw)
        self.leases: LeasesServiceClientSync = LeasesServiceClientSync(url, **kw)
        self.reservations: ReservationsServiceClientSync = ReservationsServiceClientSync(url, **kw)
        self.gpus: GpusServiceClientSync = GpusServiceClientSync(url, **kw)
        self.remediations: RemediationsServiceClientSync = RemediationsServiceClientSync(url, **kw)
        self.usage: UsageServiceClientSync = UsageServiceClientSync(url, **kw)
        self.secrets: SecretsServiceClientSync = SecretsServiceClientSync(url, **kw)
        self.auth: AuthServiceClientSync = AuthServiceClientSync(url, **kw)
        self.tunnels: TunnelsServiceClientSync = TunnelsServiceClientSync(url, **kw)
        self.workflows: WorkflowsServiceClientSync = WorkflowsServiceClientSync(url, **kw)
        # For open_tunnel, which opens a WebSocket itself.
        self._api_key = api_key

    def _clients(self) -> list[Any]:
        return [v for k, v in vars(self).items() if not k.startswith("_")]

    def close(self) -> None:
        """Closes every service client."""
        for c in self._clients():
            # The base class's close: a service's own close() may be a method of the API
            # (tunnels.close).
            ConnectClientSync.close(c)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class AsyncBetterCompute:
    """Asynchronous clients for every service; takes the arguments of :class:`BetterCompute`."""

    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        *,
        timeout_ms: int | None = None,
        json: bool = False,
        interceptors: Iterable[Any] = (),
    ) -> None:
        url = base_url.rstrip("/")
        kw = _options(api_key, timeout_ms, json, interceptors)
        self.system: SystemServiceClient = SystemServiceClient(url, **kw)
        self.iam: IamServiceClient = IamServiceClient(url, **kw)
        self.audit: AuditServiceClient = AuditServiceClient(url, **kw)
        self.events: EventsServiceClient = EventsServiceClient(url, **kw)
        self.webhooks: WebhooksServiceClient = WebhooksServiceClient(url, **kw)
        self.join_tokens: JoinTokensServiceClient = JoinTokensServiceClient(url, **kw)
        self.nodes: NodesServiceClient = NodesServiceClient(url, **kw)
        self.commands: CommandsServiceClient = CommandsServiceClient(url, **kw)
        self.pools: PoolsServiceClient = PoolsServiceClient(url, **kw)
        self.leases: LeasesServiceClient = LeasesServiceClient(url, **kw)
        self.reservations: ReservationsServiceClient = ReservationsServiceClient(url, **kw)
        self.gpus: GpusServiceClient = GpusServiceClient(url, **kw)
        self.remediations: RemediationsServiceClient = RemediationsServiceClient(url, **kw)
        self.usage: UsageServiceClient = UsageServiceClient(url, **kw)
        self.secrets: SecretsServiceClient = SecretsServiceClient(url, **kw)
        self.auth: AuthServiceClient = AuthServiceClient(url, **kw)
        self.tunnels: TunnelsServiceClient = TunnelsServiceClient(url, **kw)
        self.workflows: WorkflowsServiceClient = WorkflowsServiceClient(url, **kw)

    def _clients(self) -> list[Any]:
        return [v for k, v in vars(self).items() if not k.startswith("_")]

    async def close(self) -> None:
        """Closes every service client."""
        for c in self._clients():
            await ConnectClient.close(c)  # not a service's close(), which may be the API's

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()
