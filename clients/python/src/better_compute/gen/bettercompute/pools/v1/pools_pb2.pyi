import datetime

from bettercompute.api.v1 import options_pb2 as _options_pb2
from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import field_mask_pb2 as _field_mask_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class IdleAction(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    IDLE_ACTION_UNSPECIFIED: _ClassVar[IdleAction]
    IDLE_ACTION_NOTIFY: _ClassVar[IdleAction]
    IDLE_ACTION_RELEASE: _ClassVar[IdleAction]
    IDLE_ACTION_LEND: _ClassVar[IdleAction]

class UnhealthyLeaseAction(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    UNHEALTHY_LEASE_ACTION_UNSPECIFIED: _ClassVar[UnhealthyLeaseAction]
    UNHEALTHY_LEASE_ACTION_KEEP: _ClassVar[UnhealthyLeaseAction]
    UNHEALTHY_LEASE_ACTION_END: _ClassVar[UnhealthyLeaseAction]
IDLE_ACTION_UNSPECIFIED: IdleAction
IDLE_ACTION_NOTIFY: IdleAction
IDLE_ACTION_RELEASE: IdleAction
IDLE_ACTION_LEND: IdleAction
UNHEALTHY_LEASE_ACTION_UNSPECIFIED: UnhealthyLeaseAction
UNHEALTHY_LEASE_ACTION_KEEP: UnhealthyLeaseAction
UNHEALTHY_LEASE_ACTION_END: UnhealthyLeaseAction

class Pool(_message.Message):
    __slots__ = ("id", "tenant_id", "name", "description", "node_selector", "node_ids", "capacity", "quota", "create_time", "update_time", "preemption_grace_period", "priority_preemption", "granted", "grant", "tunnel_ports", "gpu_health_policy", "topology_levels", "gang_reservation_wait", "remediation", "idle_policy")
    class NodeSelectorEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ID_FIELD_NUMBER: _ClassVar[int]
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    NODE_SELECTOR_FIELD_NUMBER: _ClassVar[int]
    NODE_IDS_FIELD_NUMBER: _ClassVar[int]
    CAPACITY_FIELD_NUMBER: _ClassVar[int]
    QUOTA_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TIME_FIELD_NUMBER: _ClassVar[int]
    PREEMPTION_GRACE_PERIOD_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_PREEMPTION_FIELD_NUMBER: _ClassVar[int]
    GRANTED_FIELD_NUMBER: _ClassVar[int]
    GRANT_FIELD_NUMBER: _ClassVar[int]
    TUNNEL_PORTS_FIELD_NUMBER: _ClassVar[int]
    GPU_HEALTH_POLICY_FIELD_NUMBER: _ClassVar[int]
    TOPOLOGY_LEVELS_FIELD_NUMBER: _ClassVar[int]
    GANG_RESERVATION_WAIT_FIELD_NUMBER: _ClassVar[int]
    REMEDIATION_FIELD_NUMBER: _ClassVar[int]
    IDLE_POLICY_FIELD_NUMBER: _ClassVar[int]
    id: str
    tenant_id: str
    name: str
    description: str
    node_selector: _containers.ScalarMap[str, str]
    node_ids: _containers.RepeatedScalarFieldContainer[str]
    capacity: Capacity
    quota: Quota
    create_time: _timestamp_pb2.Timestamp
    update_time: _timestamp_pb2.Timestamp
    preemption_grace_period: _duration_pb2.Duration
    priority_preemption: bool
    granted: bool
    grant: Grant
    tunnel_ports: _containers.RepeatedScalarFieldContainer[int]
    gpu_health_policy: GpuHealthPolicy
    topology_levels: _containers.RepeatedScalarFieldContainer[str]
    gang_reservation_wait: _duration_pb2.Duration
    remediation: RemediationPolicy
    idle_policy: IdlePolicy
    def __init__(self, id: _Optional[str] = ..., tenant_id: _Optional[str] = ..., name: _Optional[str] = ..., description: _Optional[str] = ..., node_selector: _Optional[_Mapping[str, str]] = ..., node_ids: _Optional[_Iterable[str]] = ..., capacity: _Optional[_Union[Capacity, _Mapping]] = ..., quota: _Optional[_Union[Quota, _Mapping]] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., update_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., preemption_grace_period: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., priority_preemption: _Optional[bool] = ..., granted: _Optional[bool] = ..., grant: _Optional[_Union[Grant, _Mapping]] = ..., tunnel_ports: _Optional[_Iterable[int]] = ..., gpu_health_policy: _Optional[_Union[GpuHealthPolicy, _Mapping]] = ..., topology_levels: _Optional[_Iterable[str]] = ..., gang_reservation_wait: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., remediation: _Optional[_Union[RemediationPolicy, _Mapping]] = ..., idle_policy: _Optional[_Union[IdlePolicy, _Mapping]] = ...) -> None: ...

class RemediationPolicy(_message.Message):
    __slots__ = ("disabled", "max_nodes", "failure_domain_label", "rules", "ladders")
    DISABLED_FIELD_NUMBER: _ClassVar[int]
    MAX_NODES_FIELD_NUMBER: _ClassVar[int]
    FAILURE_DOMAIN_LABEL_FIELD_NUMBER: _ClassVar[int]
    RULES_FIELD_NUMBER: _ClassVar[int]
    LADDERS_FIELD_NUMBER: _ClassVar[int]
    disabled: bool
    max_nodes: int
    failure_domain_label: str
    rules: _containers.RepeatedCompositeFieldContainer[RemediationRule]
    ladders: _containers.RepeatedCompositeFieldContainer[RemediationLadder]
    def __init__(self, disabled: _Optional[bool] = ..., max_nodes: _Optional[int] = ..., failure_domain_label: _Optional[str] = ..., rules: _Optional[_Iterable[_Union[RemediationRule, _Mapping]]] = ..., ladders: _Optional[_Iterable[_Union[RemediationLadder, _Mapping]]] = ...) -> None: ...

class IdlePolicy(_message.Message):
    __slots__ = ("min_utilization", "window", "action", "grace", "allow_opt_out", "tunnel_counts_as_use")
    MIN_UTILIZATION_FIELD_NUMBER: _ClassVar[int]
    WINDOW_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    GRACE_FIELD_NUMBER: _ClassVar[int]
    ALLOW_OPT_OUT_FIELD_NUMBER: _ClassVar[int]
    TUNNEL_COUNTS_AS_USE_FIELD_NUMBER: _ClassVar[int]
    min_utilization: float
    window: _duration_pb2.Duration
    action: IdleAction
    grace: _duration_pb2.Duration
    allow_opt_out: bool
    tunnel_counts_as_use: bool
    def __init__(self, min_utilization: _Optional[float] = ..., window: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., action: _Optional[_Union[IdleAction, str]] = ..., grace: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., allow_opt_out: _Optional[bool] = ..., tunnel_counts_as_use: _Optional[bool] = ...) -> None: ...

class RemediationRule(_message.Message):
    __slots__ = ("check", "codes", "ladder")
    CHECK_FIELD_NUMBER: _ClassVar[int]
    CODES_FIELD_NUMBER: _ClassVar[int]
    LADDER_FIELD_NUMBER: _ClassVar[int]
    check: str
    codes: _containers.RepeatedScalarFieldContainer[int]
    ladder: str
    def __init__(self, check: _Optional[str] = ..., codes: _Optional[_Iterable[int]] = ..., ladder: _Optional[str] = ...) -> None: ...

class RemediationLadder(_message.Message):
    __slots__ = ("name", "steps")
    NAME_FIELD_NUMBER: _ClassVar[int]
    STEPS_FIELD_NUMBER: _ClassVar[int]
    name: str
    steps: _containers.RepeatedCompositeFieldContainer[RemediationStep]
    def __init__(self, name: _Optional[str] = ..., steps: _Optional[_Iterable[_Union[RemediationStep, _Mapping]]] = ...) -> None: ...

class RemediationStep(_message.Message):
    __slots__ = ("action", "level", "window")
    ACTION_FIELD_NUMBER: _ClassVar[int]
    LEVEL_FIELD_NUMBER: _ClassVar[int]
    WINDOW_FIELD_NUMBER: _ClassVar[int]
    action: str
    level: int
    window: _duration_pb2.Duration
    def __init__(self, action: _Optional[str] = ..., level: _Optional[int] = ..., window: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class GpuHealthPolicy(_message.Message):
    __slots__ = ("rules", "on_unhealthy_lease")
    RULES_FIELD_NUMBER: _ClassVar[int]
    ON_UNHEALTHY_LEASE_FIELD_NUMBER: _ClassVar[int]
    rules: _containers.RepeatedCompositeFieldContainer[GpuHealthRule]
    on_unhealthy_lease: UnhealthyLeaseAction
    def __init__(self, rules: _Optional[_Iterable[_Union[GpuHealthRule, _Mapping]]] = ..., on_unhealthy_lease: _Optional[_Union[UnhealthyLeaseAction, str]] = ...) -> None: ...

class GpuHealthRule(_message.Message):
    __slots__ = ("check", "codes", "min_count", "effect", "window")
    CHECK_FIELD_NUMBER: _ClassVar[int]
    CODES_FIELD_NUMBER: _ClassVar[int]
    MIN_COUNT_FIELD_NUMBER: _ClassVar[int]
    EFFECT_FIELD_NUMBER: _ClassVar[int]
    WINDOW_FIELD_NUMBER: _ClassVar[int]
    check: str
    codes: _containers.RepeatedScalarFieldContainer[int]
    min_count: int
    effect: str
    window: _duration_pb2.Duration
    def __init__(self, check: _Optional[str] = ..., codes: _Optional[_Iterable[int]] = ..., min_count: _Optional[int] = ..., effect: _Optional[str] = ..., window: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class Resources(_message.Message):
    __slots__ = ("gpus", "cpus", "memory_bytes")
    class GpusEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    GPUS_FIELD_NUMBER: _ClassVar[int]
    CPUS_FIELD_NUMBER: _ClassVar[int]
    MEMORY_BYTES_FIELD_NUMBER: _ClassVar[int]
    gpus: _containers.ScalarMap[str, int]
    cpus: int
    memory_bytes: int
    def __init__(self, gpus: _Optional[_Mapping[str, int]] = ..., cpus: _Optional[int] = ..., memory_bytes: _Optional[int] = ...) -> None: ...

class Grant(_message.Message):
    __slots__ = ("id", "pool_id", "tenant_id", "nominal", "borrowing_limit", "weight", "used", "borrowed", "borrowable", "create_time", "update_time", "revoke_time")
    ID_FIELD_NUMBER: _ClassVar[int]
    POOL_ID_FIELD_NUMBER: _ClassVar[int]
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    NOMINAL_FIELD_NUMBER: _ClassVar[int]
    BORROWING_LIMIT_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_FIELD_NUMBER: _ClassVar[int]
    USED_FIELD_NUMBER: _ClassVar[int]
    BORROWED_FIELD_NUMBER: _ClassVar[int]
    BORROWABLE_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TIME_FIELD_NUMBER: _ClassVar[int]
    REVOKE_TIME_FIELD_NUMBER: _ClassVar[int]
    id: str
    pool_id: str
    tenant_id: str
    nominal: Resources
    borrowing_limit: Resources
    weight: int
    used: Resources
    borrowed: Resources
    borrowable: Resources
    create_time: _timestamp_pb2.Timestamp
    update_time: _timestamp_pb2.Timestamp
    revoke_time: _timestamp_pb2.Timestamp
    def __init__(self, id: _Optional[str] = ..., pool_id: _Optional[str] = ..., tenant_id: _Optional[str] = ..., nominal: _Optional[_Union[Resources, _Mapping]] = ..., borrowing_limit: _Optional[_Union[Resources, _Mapping]] = ..., weight: _Optional[int] = ..., used: _Optional[_Union[Resources, _Mapping]] = ..., borrowed: _Optional[_Union[Resources, _Mapping]] = ..., borrowable: _Optional[_Union[Resources, _Mapping]] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., update_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., revoke_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class Capacity(_message.Message):
    __slots__ = ("nodes", "schedulable_nodes", "gpus", "cpus", "cpus_allocated", "memory_bytes", "memory_allocated_bytes")
    NODES_FIELD_NUMBER: _ClassVar[int]
    SCHEDULABLE_NODES_FIELD_NUMBER: _ClassVar[int]
    GPUS_FIELD_NUMBER: _ClassVar[int]
    CPUS_FIELD_NUMBER: _ClassVar[int]
    CPUS_ALLOCATED_FIELD_NUMBER: _ClassVar[int]
    MEMORY_BYTES_FIELD_NUMBER: _ClassVar[int]
    MEMORY_ALLOCATED_BYTES_FIELD_NUMBER: _ClassVar[int]
    nodes: int
    schedulable_nodes: int
    gpus: _containers.RepeatedCompositeFieldContainer[GpuCapacity]
    cpus: int
    cpus_allocated: int
    memory_bytes: int
    memory_allocated_bytes: int
    def __init__(self, nodes: _Optional[int] = ..., schedulable_nodes: _Optional[int] = ..., gpus: _Optional[_Iterable[_Union[GpuCapacity, _Mapping]]] = ..., cpus: _Optional[int] = ..., cpus_allocated: _Optional[int] = ..., memory_bytes: _Optional[int] = ..., memory_allocated_bytes: _Optional[int] = ...) -> None: ...

class GpuCapacity(_message.Message):
    __slots__ = ("model", "total", "schedulable", "allocated", "available")
    MODEL_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    SCHEDULABLE_FIELD_NUMBER: _ClassVar[int]
    ALLOCATED_FIELD_NUMBER: _ClassVar[int]
    AVAILABLE_FIELD_NUMBER: _ClassVar[int]
    model: str
    total: int
    schedulable: int
    allocated: int
    available: int
    def __init__(self, model: _Optional[str] = ..., total: _Optional[int] = ..., schedulable: _Optional[int] = ..., allocated: _Optional[int] = ..., available: _Optional[int] = ...) -> None: ...

class Quota(_message.Message):
    __slots__ = ("max_gpus", "max_cpus", "max_memory_bytes", "max_leases")
    MAX_GPUS_FIELD_NUMBER: _ClassVar[int]
    MAX_CPUS_FIELD_NUMBER: _ClassVar[int]
    MAX_MEMORY_BYTES_FIELD_NUMBER: _ClassVar[int]
    MAX_LEASES_FIELD_NUMBER: _ClassVar[int]
    max_gpus: int
    max_cpus: int
    max_memory_bytes: int
    max_leases: int
    def __init__(self, max_gpus: _Optional[int] = ..., max_cpus: _Optional[int] = ..., max_memory_bytes: _Optional[int] = ..., max_leases: _Optional[int] = ...) -> None: ...

class CreateRequest(_message.Message):
    __slots__ = ("name", "description", "node_selector", "node_ids", "preemption_grace_period", "priority_preemption", "tunnel_ports", "gpu_health_policy", "topology_levels", "gang_reservation_wait", "remediation", "idle_policy")
    class NodeSelectorEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    NODE_SELECTOR_FIELD_NUMBER: _ClassVar[int]
    NODE_IDS_FIELD_NUMBER: _ClassVar[int]
    PREEMPTION_GRACE_PERIOD_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_PREEMPTION_FIELD_NUMBER: _ClassVar[int]
    TUNNEL_PORTS_FIELD_NUMBER: _ClassVar[int]
    GPU_HEALTH_POLICY_FIELD_NUMBER: _ClassVar[int]
    TOPOLOGY_LEVELS_FIELD_NUMBER: _ClassVar[int]
    GANG_RESERVATION_WAIT_FIELD_NUMBER: _ClassVar[int]
    REMEDIATION_FIELD_NUMBER: _ClassVar[int]
    IDLE_POLICY_FIELD_NUMBER: _ClassVar[int]
    name: str
    description: str
    node_selector: _containers.ScalarMap[str, str]
    node_ids: _containers.RepeatedScalarFieldContainer[str]
    preemption_grace_period: _duration_pb2.Duration
    priority_preemption: bool
    tunnel_ports: _containers.RepeatedScalarFieldContainer[int]
    gpu_health_policy: GpuHealthPolicy
    topology_levels: _containers.RepeatedScalarFieldContainer[str]
    gang_reservation_wait: _duration_pb2.Duration
    remediation: RemediationPolicy
    idle_policy: IdlePolicy
    def __init__(self, name: _Optional[str] = ..., description: _Optional[str] = ..., node_selector: _Optional[_Mapping[str, str]] = ..., node_ids: _Optional[_Iterable[str]] = ..., preemption_grace_period: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., priority_preemption: _Optional[bool] = ..., tunnel_ports: _Optional[_Iterable[int]] = ..., gpu_health_policy: _Optional[_Union[GpuHealthPolicy, _Mapping]] = ..., topology_levels: _Optional[_Iterable[str]] = ..., gang_reservation_wait: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., remediation: _Optional[_Union[RemediationPolicy, _Mapping]] = ..., idle_policy: _Optional[_Union[IdlePolicy, _Mapping]] = ...) -> None: ...

class CreateResponse(_message.Message):
    __slots__ = ("pool",)
    POOL_FIELD_NUMBER: _ClassVar[int]
    pool: Pool
    def __init__(self, pool: _Optional[_Union[Pool, _Mapping]] = ...) -> None: ...

class GetRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class GetResponse(_message.Message):
    __slots__ = ("pool",)
    POOL_FIELD_NUMBER: _ClassVar[int]
    pool: Pool
    def __init__(self, pool: _Optional[_Union[Pool, _Mapping]] = ...) -> None: ...

class ListRequest(_message.Message):
    __slots__ = ("page_size", "page_token")
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListResponse(_message.Message):
    __slots__ = ("pools", "next_page_token")
    POOLS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    pools: _containers.RepeatedCompositeFieldContainer[Pool]
    next_page_token: str
    def __init__(self, pools: _Optional[_Iterable[_Union[Pool, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class UpdateRequest(_message.Message):
    __slots__ = ("id", "description", "node_selector", "node_ids", "update_mask", "preemption_grace_period", "priority_preemption", "tunnel_ports", "gpu_health_policy", "topology_levels", "gang_reservation_wait", "remediation", "idle_policy")
    class NodeSelectorEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ID_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    NODE_SELECTOR_FIELD_NUMBER: _ClassVar[int]
    NODE_IDS_FIELD_NUMBER: _ClassVar[int]
    UPDATE_MASK_FIELD_NUMBER: _ClassVar[int]
    PREEMPTION_GRACE_PERIOD_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_PREEMPTION_FIELD_NUMBER: _ClassVar[int]
    TUNNEL_PORTS_FIELD_NUMBER: _ClassVar[int]
    GPU_HEALTH_POLICY_FIELD_NUMBER: _ClassVar[int]
    TOPOLOGY_LEVELS_FIELD_NUMBER: _ClassVar[int]
    GANG_RESERVATION_WAIT_FIELD_NUMBER: _ClassVar[int]
    REMEDIATION_FIELD_NUMBER: _ClassVar[int]
    IDLE_POLICY_FIELD_NUMBER: _ClassVar[int]
    id: str
    description: str
    node_selector: _containers.ScalarMap[str, str]
    node_ids: _containers.RepeatedScalarFieldContainer[str]
    update_mask: _field_mask_pb2.FieldMask
    preemption_grace_period: _duration_pb2.Duration
    priority_preemption: bool
    tunnel_ports: _containers.RepeatedScalarFieldContainer[int]
    gpu_health_policy: GpuHealthPolicy
    topology_levels: _containers.RepeatedScalarFieldContainer[str]
    gang_reservation_wait: _duration_pb2.Duration
    remediation: RemediationPolicy
    idle_policy: IdlePolicy
    def __init__(self, id: _Optional[str] = ..., description: _Optional[str] = ..., node_selector: _Optional[_Mapping[str, str]] = ..., node_ids: _Optional[_Iterable[str]] = ..., update_mask: _Optional[_Union[_field_mask_pb2.FieldMask, _Mapping]] = ..., preemption_grace_period: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., priority_preemption: _Optional[bool] = ..., tunnel_ports: _Optional[_Iterable[int]] = ..., gpu_health_policy: _Optional[_Union[GpuHealthPolicy, _Mapping]] = ..., topology_levels: _Optional[_Iterable[str]] = ..., gang_reservation_wait: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., remediation: _Optional[_Union[RemediationPolicy, _Mapping]] = ..., idle_policy: _Optional[_Union[IdlePolicy, _Mapping]] = ...) -> None: ...

class UpdateResponse(_message.Message):
    __slots__ = ("pool",)
    POOL_FIELD_NUMBER: _ClassVar[int]
    pool: Pool
    def __init__(self, pool: _Optional[_Union[Pool, _Mapping]] = ...) -> None: ...

class DeleteRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class DeleteResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class SetQuotaRequest(_message.Message):
    __slots__ = ("pool_id", "quota")
    POOL_ID_FIELD_NUMBER: _ClassVar[int]
    QUOTA_FIELD_NUMBER: _ClassVar[int]
    pool_id: str
    quota: Quota
    def __init__(self, pool_id: _Optional[str] = ..., quota: _Optional[_Union[Quota, _Mapping]] = ...) -> None: ...

class SetQuotaResponse(_message.Message):
    __slots__ = ("pool",)
    POOL_FIELD_NUMBER: _ClassVar[int]
    pool: Pool
    def __init__(self, pool: _Optional[_Union[Pool, _Mapping]] = ...) -> None: ...

class GrantRequest(_message.Message):
    __slots__ = ("pool_id", "tenant_id", "nominal", "borrowing_limit", "weight")
    POOL_ID_FIELD_NUMBER: _ClassVar[int]
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    NOMINAL_FIELD_NUMBER: _ClassVar[int]
    BORROWING_LIMIT_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_FIELD_NUMBER: _ClassVar[int]
    pool_id: str
    tenant_id: str
    nominal: Resources
    borrowing_limit: Resources
    weight: int
    def __init__(self, pool_id: _Optional[str] = ..., tenant_id: _Optional[str] = ..., nominal: _Optional[_Union[Resources, _Mapping]] = ..., borrowing_limit: _Optional[_Union[Resources, _Mapping]] = ..., weight: _Optional[int] = ...) -> None: ...

class GrantResponse(_message.Message):
    __slots__ = ("grant",)
    GRANT_FIELD_NUMBER: _ClassVar[int]
    grant: Grant
    def __init__(self, grant: _Optional[_Union[Grant, _Mapping]] = ...) -> None: ...

class RevokeGrantRequest(_message.Message):
    __slots__ = ("pool_id", "tenant_id")
    POOL_ID_FIELD_NUMBER: _ClassVar[int]
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    pool_id: str
    tenant_id: str
    def __init__(self, pool_id: _Optional[str] = ..., tenant_id: _Optional[str] = ...) -> None: ...

class RevokeGrantResponse(_message.Message):
    __slots__ = ("grant",)
    GRANT_FIELD_NUMBER: _ClassVar[int]
    grant: Grant
    def __init__(self, grant: _Optional[_Union[Grant, _Mapping]] = ...) -> None: ...

class ListGrantsRequest(_message.Message):
    __slots__ = ("pool_id", "include_revoked", "page_size", "page_token")
    POOL_ID_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_REVOKED_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    pool_id: str
    include_revoked: bool
    page_size: int
    page_token: str
    def __init__(self, pool_id: _Optional[str] = ..., include_revoked: _Optional[bool] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListGrantsResponse(_message.Message):
    __slots__ = ("grants", "next_page_token")
    GRANTS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    grants: _containers.RepeatedCompositeFieldContainer[Grant]
    next_page_token: str
    def __init__(self, grants: _Optional[_Iterable[_Union[Grant, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class ListPreemptionsRequest(_message.Message):
    __slots__ = ("pool_id", "since_time", "page_size", "page_token")
    POOL_ID_FIELD_NUMBER: _ClassVar[int]
    SINCE_TIME_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    pool_id: str
    since_time: _timestamp_pb2.Timestamp
    page_size: int
    page_token: str
    def __init__(self, pool_id: _Optional[str] = ..., since_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class Preemption(_message.Message):
    __slots__ = ("lease_id", "pool_id", "tenant_id", "gpus", "gpu_model", "cpus", "memory_bytes", "priority", "reason", "preempt_time")
    LEASE_ID_FIELD_NUMBER: _ClassVar[int]
    POOL_ID_FIELD_NUMBER: _ClassVar[int]
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    GPUS_FIELD_NUMBER: _ClassVar[int]
    GPU_MODEL_FIELD_NUMBER: _ClassVar[int]
    CPUS_FIELD_NUMBER: _ClassVar[int]
    MEMORY_BYTES_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    PREEMPT_TIME_FIELD_NUMBER: _ClassVar[int]
    lease_id: str
    pool_id: str
    tenant_id: str
    gpus: int
    gpu_model: str
    cpus: int
    memory_bytes: int
    priority: int
    reason: str
    preempt_time: _timestamp_pb2.Timestamp
    def __init__(self, lease_id: _Optional[str] = ..., pool_id: _Optional[str] = ..., tenant_id: _Optional[str] = ..., gpus: _Optional[int] = ..., gpu_model: _Optional[str] = ..., cpus: _Optional[int] = ..., memory_bytes: _Optional[int] = ..., priority: _Optional[int] = ..., reason: _Optional[str] = ..., preempt_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ListPreemptionsResponse(_message.Message):
    __slots__ = ("preemptions", "next_page_token")
    PREEMPTIONS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    preemptions: _containers.RepeatedCompositeFieldContainer[Preemption]
    next_page_token: str
    def __init__(self, preemptions: _Optional[_Iterable[_Union[Preemption, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...
