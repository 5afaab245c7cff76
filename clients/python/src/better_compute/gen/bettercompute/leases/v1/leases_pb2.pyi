import datetime

from bettercompute.api.v1 import options_pb2 as _options_pb2
from bettercompute.pools.v1 import pools_pb2 as _pools_pb2
from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class LeaseState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    LEASE_STATE_UNSPECIFIED: _ClassVar[LeaseState]
    LEASE_STATE_PENDING: _ClassVar[LeaseState]
    LEASE_STATE_PLACED: _ClassVar[LeaseState]
    LEASE_STATE_AT_RISK: _ClassVar[LeaseState]
    LEASE_STATE_RELEASED: _ClassVar[LeaseState]
    LEASE_STATE_EXPIRED: _ClassVar[LeaseState]
    LEASE_STATE_FAILED: _ClassVar[LeaseState]
    LEASE_STATE_PREEMPTED: _ClassVar[LeaseState]

class TopologyMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TOPOLOGY_MODE_UNSPECIFIED: _ClassVar[TopologyMode]
    TOPOLOGY_MODE_PREFERRED: _ClassVar[TopologyMode]
    TOPOLOGY_MODE_REQUIRED: _ClassVar[TopologyMode]
LEASE_STATE_UNSPECIFIED: LeaseState
LEASE_STATE_PENDING: LeaseState
LEASE_STATE_PLACED: LeaseState
LEASE_STATE_AT_RISK: LeaseState
LEASE_STATE_RELEASED: LeaseState
LEASE_STATE_EXPIRED: LeaseState
LEASE_STATE_FAILED: LeaseState
LEASE_STATE_PREEMPTED: LeaseState
TOPOLOGY_MODE_UNSPECIFIED: TopologyMode
TOPOLOGY_MODE_PREFERRED: TopologyMode
TOPOLOGY_MODE_REQUIRED: TopologyMode

class Toleration(_message.Message):
    __slots__ = ("key", "operator", "value", "effect")
    KEY_FIELD_NUMBER: _ClassVar[int]
    OPERATOR_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    EFFECT_FIELD_NUMBER: _ClassVar[int]
    key: str
    operator: str
    value: str
    effect: str
    def __init__(self, key: _Optional[str] = ..., operator: _Optional[str] = ..., value: _Optional[str] = ..., effect: _Optional[str] = ...) -> None: ...

class Lease(_message.Message):
    __slots__ = ("id", "tenant_id", "pool_id", "gpus", "gpu_model", "cpus", "memory_bytes", "spread", "tolerations", "reservation_id", "duration", "state", "reason", "allocations", "create_time", "place_time", "end_time", "priority", "borrowing", "preempt_time", "topology", "nodes", "gpus_per_node", "gang_topology", "members", "gang_domain", "on_unhealthy_member", "reserved_start_time", "utilization", "idle_since", "idle_opt_out", "lent")
    ID_FIELD_NUMBER: _ClassVar[int]
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    POOL_ID_FIELD_NUMBER: _ClassVar[int]
    GPUS_FIELD_NUMBER: _ClassVar[int]
    GPU_MODEL_FIELD_NUMBER: _ClassVar[int]
    CPUS_FIELD_NUMBER: _ClassVar[int]
    MEMORY_BYTES_FIELD_NUMBER: _ClassVar[int]
    SPREAD_FIELD_NUMBER: _ClassVar[int]
    TOLERATIONS_FIELD_NUMBER: _ClassVar[int]
    RESERVATION_ID_FIELD_NUMBER: _ClassVar[int]
    DURATION_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    ALLOCATIONS_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    PLACE_TIME_FIELD_NUMBER: _ClassVar[int]
    END_TIME_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    BORROWING_FIELD_NUMBER: _ClassVar[int]
    PREEMPT_TIME_FIELD_NUMBER: _ClassVar[int]
    TOPOLOGY_FIELD_NUMBER: _ClassVar[int]
    NODES_FIELD_NUMBER: _ClassVar[int]
    GPUS_PER_NODE_FIELD_NUMBER: _ClassVar[int]
    GANG_TOPOLOGY_FIELD_NUMBER: _ClassVar[int]
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    GANG_DOMAIN_FIELD_NUMBER: _ClassVar[int]
    ON_UNHEALTHY_MEMBER_FIELD_NUMBER: _ClassVar[int]
    RESERVED_START_TIME_FIELD_NUMBER: _ClassVar[int]
    UTILIZATION_FIELD_NUMBER: _ClassVar[int]
    IDLE_SINCE_FIELD_NUMBER: _ClassVar[int]
    IDLE_OPT_OUT_FIELD_NUMBER: _ClassVar[int]
    LENT_FIELD_NUMBER: _ClassVar[int]
    id: str
    tenant_id: str
    pool_id: str
    gpus: int
    gpu_model: str
    cpus: int
    memory_bytes: int
    spread: bool
    tolerations: _containers.RepeatedCompositeFieldContainer[Toleration]
    reservation_id: str
    duration: _duration_pb2.Duration
    state: LeaseState
    reason: str
    allocations: _containers.RepeatedCompositeFieldContainer[Allocation]
    create_time: _timestamp_pb2.Timestamp
    place_time: _timestamp_pb2.Timestamp
    end_time: _timestamp_pb2.Timestamp
    priority: int
    borrowing: bool
    preempt_time: _timestamp_pb2.Timestamp
    topology: TopologyMode
    nodes: int
    gpus_per_node: int
    gang_topology: GangTopology
    members: _containers.RepeatedCompositeFieldContainer[Member]
    gang_domain: str
    on_unhealthy_member: _pools_pb2.UnhealthyLeaseAction
    reserved_start_time: _timestamp_pb2.Timestamp
    utilization: Utilization
    idle_since: _timestamp_pb2.Timestamp
    idle_opt_out: bool
    lent: Lent
    def __init__(self, id: _Optional[str] = ..., tenant_id: _Optional[str] = ..., pool_id: _Optional[str] = ..., gpus: _Optional[int] = ..., gpu_model: _Optional[str] = ..., cpus: _Optional[int] = ..., memory_bytes: _Optional[int] = ..., spread: _Optional[bool] = ..., tolerations: _Optional[_Iterable[_Union[Toleration, _Mapping]]] = ..., reservation_id: _Optional[str] = ..., duration: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., state: _Optional[_Union[LeaseState, str]] = ..., reason: _Optional[str] = ..., allocations: _Optional[_Iterable[_Union[Allocation, _Mapping]]] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., place_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., end_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., priority: _Optional[int] = ..., borrowing: _Optional[bool] = ..., preempt_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., topology: _Optional[_Union[TopologyMode, str]] = ..., nodes: _Optional[int] = ..., gpus_per_node: _Optional[int] = ..., gang_topology: _Optional[_Union[GangTopology, _Mapping]] = ..., members: _Optional[_Iterable[_Union[Member, _Mapping]]] = ..., gang_domain: _Optional[str] = ..., on_unhealthy_member: _Optional[_Union[_pools_pb2.UnhealthyLeaseAction, str]] = ..., reserved_start_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., utilization: _Optional[_Union[Utilization, _Mapping]] = ..., idle_since: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., idle_opt_out: _Optional[bool] = ..., lent: _Optional[_Union[Lent, _Mapping]] = ...) -> None: ...

class Lent(_message.Message):
    __slots__ = ("since", "gpus", "borrowers", "wake_time")
    SINCE_FIELD_NUMBER: _ClassVar[int]
    GPUS_FIELD_NUMBER: _ClassVar[int]
    BORROWERS_FIELD_NUMBER: _ClassVar[int]
    WAKE_TIME_FIELD_NUMBER: _ClassVar[int]
    since: _timestamp_pb2.Timestamp
    gpus: int
    borrowers: int
    wake_time: _timestamp_pb2.Timestamp
    def __init__(self, since: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., gpus: _Optional[int] = ..., borrowers: _Optional[int] = ..., wake_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class Utilization(_message.Message):
    __slots__ = ("gpu_seconds_held", "gpu_seconds_active", "mean_utilization", "peak_memory_bytes", "sampled_minutes", "last_sample_time")
    GPU_SECONDS_HELD_FIELD_NUMBER: _ClassVar[int]
    GPU_SECONDS_ACTIVE_FIELD_NUMBER: _ClassVar[int]
    MEAN_UTILIZATION_FIELD_NUMBER: _ClassVar[int]
    PEAK_MEMORY_BYTES_FIELD_NUMBER: _ClassVar[int]
    SAMPLED_MINUTES_FIELD_NUMBER: _ClassVar[int]
    LAST_SAMPLE_TIME_FIELD_NUMBER: _ClassVar[int]
    gpu_seconds_held: int
    gpu_seconds_active: int
    mean_utilization: float
    peak_memory_bytes: int
    sampled_minutes: int
    last_sample_time: _timestamp_pb2.Timestamp
    def __init__(self, gpu_seconds_held: _Optional[int] = ..., gpu_seconds_active: _Optional[int] = ..., mean_utilization: _Optional[float] = ..., peak_memory_bytes: _Optional[int] = ..., sampled_minutes: _Optional[int] = ..., last_sample_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class GangTopology(_message.Message):
    __slots__ = ("level", "mode")
    LEVEL_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    level: str
    mode: TopologyMode
    def __init__(self, level: _Optional[str] = ..., mode: _Optional[_Union[TopologyMode, str]] = ...) -> None: ...

class Member(_message.Message):
    __slots__ = ("rank", "node_id", "hostname", "addresses", "gpu_indexes", "domain", "healthy", "health_reason")
    class DomainEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    RANK_FIELD_NUMBER: _ClassVar[int]
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    HOSTNAME_FIELD_NUMBER: _ClassVar[int]
    ADDRESSES_FIELD_NUMBER: _ClassVar[int]
    GPU_INDEXES_FIELD_NUMBER: _ClassVar[int]
    DOMAIN_FIELD_NUMBER: _ClassVar[int]
    HEALTHY_FIELD_NUMBER: _ClassVar[int]
    HEALTH_REASON_FIELD_NUMBER: _ClassVar[int]
    rank: int
    node_id: str
    hostname: str
    addresses: _containers.RepeatedScalarFieldContainer[str]
    gpu_indexes: _containers.RepeatedScalarFieldContainer[int]
    domain: _containers.ScalarMap[str, str]
    healthy: bool
    health_reason: str
    def __init__(self, rank: _Optional[int] = ..., node_id: _Optional[str] = ..., hostname: _Optional[str] = ..., addresses: _Optional[_Iterable[str]] = ..., gpu_indexes: _Optional[_Iterable[int]] = ..., domain: _Optional[_Mapping[str, str]] = ..., healthy: _Optional[bool] = ..., health_reason: _Optional[str] = ...) -> None: ...

class Allocation(_message.Message):
    __slots__ = ("node_id", "hostname", "gpu_index", "gpu_uuid", "gpu_model", "cpus", "memory_bytes", "start_time", "end_time", "topology")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    HOSTNAME_FIELD_NUMBER: _ClassVar[int]
    GPU_INDEX_FIELD_NUMBER: _ClassVar[int]
    GPU_UUID_FIELD_NUMBER: _ClassVar[int]
    GPU_MODEL_FIELD_NUMBER: _ClassVar[int]
    CPUS_FIELD_NUMBER: _ClassVar[int]
    MEMORY_BYTES_FIELD_NUMBER: _ClassVar[int]
    START_TIME_FIELD_NUMBER: _ClassVar[int]
    END_TIME_FIELD_NUMBER: _ClassVar[int]
    TOPOLOGY_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    hostname: str
    gpu_index: int
    gpu_uuid: str
    gpu_model: str
    cpus: int
    memory_bytes: int
    start_time: _timestamp_pb2.Timestamp
    end_time: _timestamp_pb2.Timestamp
    topology: str
    def __init__(self, node_id: _Optional[str] = ..., hostname: _Optional[str] = ..., gpu_index: _Optional[int] = ..., gpu_uuid: _Optional[str] = ..., gpu_model: _Optional[str] = ..., cpus: _Optional[int] = ..., memory_bytes: _Optional[int] = ..., start_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., end_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., topology: _Optional[str] = ...) -> None: ...

class CreateRequest(_message.Message):
    __slots__ = ("pool_id", "gpus", "gpu_model", "cpus", "memory_bytes", "duration", "spread", "tolerations", "reservation_id", "priority", "topology", "nodes", "gpus_per_node", "gang_topology", "on_unhealthy_member", "idle_opt_out")
    POOL_ID_FIELD_NUMBER: _ClassVar[int]
    GPUS_FIELD_NUMBER: _ClassVar[int]
    GPU_MODEL_FIELD_NUMBER: _ClassVar[int]
    CPUS_FIELD_NUMBER: _ClassVar[int]
    MEMORY_BYTES_FIELD_NUMBER: _ClassVar[int]
    DURATION_FIELD_NUMBER: _ClassVar[int]
    SPREAD_FIELD_NUMBER: _ClassVar[int]
    TOLERATIONS_FIELD_NUMBER: _ClassVar[int]
    RESERVATION_ID_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    TOPOLOGY_FIELD_NUMBER: _ClassVar[int]
    NODES_FIELD_NUMBER: _ClassVar[int]
    GPUS_PER_NODE_FIELD_NUMBER: _ClassVar[int]
    GANG_TOPOLOGY_FIELD_NUMBER: _ClassVar[int]
    ON_UNHEALTHY_MEMBER_FIELD_NUMBER: _ClassVar[int]
    IDLE_OPT_OUT_FIELD_NUMBER: _ClassVar[int]
    pool_id: str
    gpus: int
    gpu_model: str
    cpus: int
    memory_bytes: int
    duration: _duration_pb2.Duration
    spread: bool
    tolerations: _containers.RepeatedCompositeFieldContainer[Toleration]
    reservation_id: str
    priority: int
    topology: TopologyMode
    nodes: int
    gpus_per_node: int
    gang_topology: GangTopology
    on_unhealthy_member: _pools_pb2.UnhealthyLeaseAction
    idle_opt_out: bool
    def __init__(self, pool_id: _Optional[str] = ..., gpus: _Optional[int] = ..., gpu_model: _Optional[str] = ..., cpus: _Optional[int] = ..., memory_bytes: _Optional[int] = ..., duration: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., spread: _Optional[bool] = ..., tolerations: _Optional[_Iterable[_Union[Toleration, _Mapping]]] = ..., reservation_id: _Optional[str] = ..., priority: _Optional[int] = ..., topology: _Optional[_Union[TopologyMode, str]] = ..., nodes: _Optional[int] = ..., gpus_per_node: _Optional[int] = ..., gang_topology: _Optional[_Union[GangTopology, _Mapping]] = ..., on_unhealthy_member: _Optional[_Union[_pools_pb2.UnhealthyLeaseAction, str]] = ..., idle_opt_out: _Optional[bool] = ...) -> None: ...

class CreateResponse(_message.Message):
    __slots__ = ("lease",)
    LEASE_FIELD_NUMBER: _ClassVar[int]
    lease: Lease
    def __init__(self, lease: _Optional[_Union[Lease, _Mapping]] = ...) -> None: ...

class GetRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class GetResponse(_message.Message):
    __slots__ = ("lease",)
    LEASE_FIELD_NUMBER: _ClassVar[int]
    lease: Lease
    def __init__(self, lease: _Optional[_Union[Lease, _Mapping]] = ...) -> None: ...

class ListRequest(_message.Message):
    __slots__ = ("pool_id", "state", "page_size", "page_token")
    POOL_ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    pool_id: str
    state: LeaseState
    page_size: int
    page_token: str
    def __init__(self, pool_id: _Optional[str] = ..., state: _Optional[_Union[LeaseState, str]] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListResponse(_message.Message):
    __slots__ = ("leases", "next_page_token")
    LEASES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    leases: _containers.RepeatedCompositeFieldContainer[Lease]
    next_page_token: str
    def __init__(self, leases: _Optional[_Iterable[_Union[Lease, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class ExtendRequest(_message.Message):
    __slots__ = ("id", "by")
    ID_FIELD_NUMBER: _ClassVar[int]
    BY_FIELD_NUMBER: _ClassVar[int]
    id: str
    by: _duration_pb2.Duration
    def __init__(self, id: _Optional[str] = ..., by: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class ExtendResponse(_message.Message):
    __slots__ = ("lease",)
    LEASE_FIELD_NUMBER: _ClassVar[int]
    lease: Lease
    def __init__(self, lease: _Optional[_Union[Lease, _Mapping]] = ...) -> None: ...

class ReleaseRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class ReleaseResponse(_message.Message):
    __slots__ = ("lease",)
    LEASE_FIELD_NUMBER: _ClassVar[int]
    lease: Lease
    def __init__(self, lease: _Optional[_Union[Lease, _Mapping]] = ...) -> None: ...

class WakeRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class WakeResponse(_message.Message):
    __slots__ = ("lease",)
    LEASE_FIELD_NUMBER: _ClassVar[int]
    lease: Lease
    def __init__(self, lease: _Optional[_Union[Lease, _Mapping]] = ...) -> None: ...
