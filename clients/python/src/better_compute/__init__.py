"""Python SDK of the Better Compute API.

:class:`BetterCompute` (sync) and :class:`AsyncBetterCompute` hold a client for every service;
failed calls raise a :class:`BetterComputeError` subclass named after the Connect code
(:class:`UnauthenticatedError`, :class:`NotFoundError`, ...), whose ``field_violations`` list
the request fields an :class:`InvalidArgumentError` refused. :func:`open_tunnel` opens a tunnel
to a port on a node (:mod:`better_compute.tunnel`). The messages of each API package are in a
module named after it (``nodesv1.ListRequest``, ``leasesv1.CreateRequest``, ...), the
generated code being the top-level package ``bettercompute``
(``bettercompute.nodes.v1.nodes_pb2``), which this distribution installs next to
``better_compute``. The generated clients (``NodesServiceClientSync``, ...) are exported too;
give them ``interceptors=[BetterComputeHeaders(api_key), MapErrors()]``.

    from better_compute import BetterCompute, nodesv1

    with BetterCompute("http://127.0.0.1:3000/api", api_key=KEY) as bc:
        for node in bc.nodes.list(nodesv1.ListRequest()).nodes:
            print(node.hostname, node.state)
"""

from __future__ import annotations

from importlib import metadata as _metadata

from bettercompute.audit.v1 import audit_pb2 as auditv1
from bettercompute.commands.v1 import commands_pb2 as commandsv1
from bettercompute.daemon.v1 import commands_pb2 as daemonv1
from bettercompute.events.v1 import events_pb2 as eventsv1
from bettercompute.iam.v1 import iam_pb2 as iamv1
from bettercompute.jointokens.v1 import jointokens_pb2 as jointokensv1
from bettercompute.leases.v1 import leases_pb2 as leasesv1
from bettercompute.nodes.v1 import nodes_pb2 as nodesv1
from bettercompute.pools.v1 import pools_pb2 as poolsv1
from bettercompute.reservations.v1 import reservations_pb2 as reservationsv1
from bettercompute.gpus.v1 import gpus_pb2 as gpusv1
from bettercompute.remediations.v1 import remediations_pb2 as remediationsv1
from bettercompute.system.v1 import system_pb2 as systemv1
from bettercompute.secrets.v1 import secrets_pb2 as secretsv1
from bettercompute.auth.v1 import auth_pb2 as authv1
from bettercompute.tunnels.v1 import tunnels_pb2 as tunnelsv1
from bettercompute.usage.v1 import usage_pb2 as usagev1
from bettercompute.webhooks.v1 import webhooks_pb2 as webhooksv1
from bettercompute.workflows.v1 import workflows_pb2 as workflowsv1
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
from bettercompute.system.v1.system_pb2 import InfoRequest, InfoResponse
from connectrpc.code import Code
from connectrpc.errors import ConnectError

from .client import AsyncBetterCompute, BetterCompute
from .errors import (
    AbortedError,
    AlreadyExistsError,
    BetterComputeError,
    CanceledError,
    DataLossError,
    DeadlineExceededError,
    FailedPreconditionError,
    FieldViolation,
    InternalError,
    InvalidArgumentError,
    NotFoundError,
    OutOfRangeError,
    PermissionDeniedError,
    ResourceExhaustedError,
    UnauthenticatedError,
    UnavailableError,
    UnimplementedError,
    UnknownError,
    MapErrors,
    error_from,
    field_violations,
)
from .headers import CLIENT_HEADER, BetterComputeHeaders
from .pagination import apaginate, paginate
from .tunnel import Tunnel, TunnelAbortError, TunnelRefusedError, connect_tunnel, open_tunnel

__all__ = [
    "AbortedError",
    "AlreadyExistsError",
    "AsyncBetterCompute",
    "AuditServiceClient",
    "AuditServiceClientSync",
    "BetterCompute",
    "BetterComputeError",
    "BetterComputeHeaders",
    "CLIENT_HEADER",
    "CanceledError",
    "Code",
    "CommandsServiceClient",
    "CommandsServiceClientSync",
    "ConnectError",
    "DataLossError",
    "DeadlineExceededError",
    "EventsServiceClient",
    "EventsServiceClientSync",
    "FailedPreconditionError",
    "FieldViolation",
    "IamServiceClient",
    "IamServiceClientSync",
    "InfoRequest",
    "InfoResponse",
    "InternalError",
    "InvalidArgumentError",
    "JoinTokensServiceClient",
    "JoinTokensServiceClientSync",
    "LeasesServiceClient",
    "LeasesServiceClientSync",
    "MapErrors",
    "NodesServiceClient",
    "NodesServiceClientSync",
    "NotFoundError",
    "OutOfRangeError",
    "PermissionDeniedError",
    "PoolsServiceClient",
    "PoolsServiceClientSync",
    "ReservationsServiceClient",
    "GpusServiceClient",
    "GpusServiceClientSync",
    "RemediationsServiceClient",
    "RemediationsServiceClientSync",
    "ReservationsServiceClientSync",
    "ResourceExhaustedError",
    "SystemServiceClient",
    "SystemServiceClientSync",
    "Tunnel",
    "TunnelAbortError",
    "TunnelRefusedError",
    "TunnelsServiceClient",
    "TunnelsServiceClientSync",
    "UnauthenticatedError",
    "UnavailableError",
    "UnimplementedError",
    "UnknownError",
    "SecretsServiceClient",
    "SecretsServiceClientSync",
    "AuthServiceClient",
    "AuthServiceClientSync",
    "UsageServiceClient",
    "UsageServiceClientSync",
    "WebhooksServiceClient",
    "WebhooksServiceClientSync",
    "WorkflowsServiceClient",
    "WorkflowsServiceClientSync",
    "apaginate",
    "auditv1",
    "commandsv1",
    "connect_tunnel",
    "daemonv1",
    "error_from",
    "eventsv1",
    "field_violations",
    "iamv1",
    "jointokensv1",
    "leasesv1",
    "nodesv1",
    "open_tunnel",
    "paginate",
    "poolsv1",
    "reservationsv1",
    "gpusv1",
    "remediationsv1",
    "systemv1",
    "secretsv1",
    "authv1",
    "tunnelsv1",
    "usagev1",
    "webhooksv1",
    "workflowsv1",
]

try:
    # The installed distribution's version: pyproject.toml's, which is the SDKs' clients/VERSION.
    __version__ = _metadata.version("better-compute")
except _metadata.PackageNotFoundError:  # imported from a source tree that was never installed
    __version__ = "0+unknown"
