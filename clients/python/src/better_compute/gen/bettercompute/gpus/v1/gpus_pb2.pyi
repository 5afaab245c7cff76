import datetime

from bettercompute.api.v1 import options_pb2 as _options_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class HealthState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    HEALTH_STATE_UNSPECIFIED: _ClassVar[HealthState]
    HEALTH_STATE_HEALTHY: _ClassVar[HealthState]
    HEALTH_STATE_DEGRADED: _ClassVar[HealthState]
    HEALTH_STATE_UNHEALTHY: _ClassVar[HealthState]
HEALTH_STATE_UNSPECIFIED: HealthState
HEALTH_STATE_HEALTHY: HealthState
HEALTH_STATE_DEGRADED: HealthState
HEALTH_STATE_UNHEALTHY: HealthState

class Gpu(_message.Message):
    __slots__ = ("uuid", "node_id", "hostname", "index", "model", "serial", "pci_bus_id", "memory_bytes", "present", "health", "reasons", "health_change_time", "manual_quarantine", "lease_id", "clear_time")
    UUID_FIELD_NUMBER: _ClassVar[int]
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    HOSTNAME_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    SERIAL_FIELD_NUMBER: _ClassVar[int]
    PCI_BUS_ID_FIELD_NUMBER: _ClassVar[int]
    MEMORY_BYTES_FIELD_NUMBER: _ClassVar[int]
    PRESENT_FIELD_NUMBER: _ClassVar[int]
    HEALTH_FIELD_NUMBER: _ClassVar[int]
    REASONS_FIELD_NUMBER: _ClassVar[int]
    HEALTH_CHANGE_TIME_FIELD_NUMBER: _ClassVar[int]
    MANUAL_QUARANTINE_FIELD_NUMBER: _ClassVar[int]
    LEASE_ID_FIELD_NUMBER: _ClassVar[int]
    CLEAR_TIME_FIELD_NUMBER: _ClassVar[int]
    uuid: str
    node_id: str
    hostname: str
    index: int
    model: str
    serial: str
    pci_bus_id: str
    memory_bytes: int
    present: bool
    health: HealthState
    reasons: _containers.RepeatedCompositeFieldContainer[HealthReason]
    health_change_time: _timestamp_pb2.Timestamp
    manual_quarantine: ManualQuarantine
    lease_id: str
    clear_time: _timestamp_pb2.Timestamp
    def __init__(self, uuid: _Optional[str] = ..., node_id: _Optional[str] = ..., hostname: _Optional[str] = ..., index: _Optional[int] = ..., model: _Optional[str] = ..., serial: _Optional[str] = ..., pci_bus_id: _Optional[str] = ..., memory_bytes: _Optional[int] = ..., present: _Optional[bool] = ..., health: _Optional[_Union[HealthState, str]] = ..., reasons: _Optional[_Iterable[_Union[HealthReason, _Mapping]]] = ..., health_change_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., manual_quarantine: _Optional[_Union[ManualQuarantine, _Mapping]] = ..., lease_id: _Optional[str] = ..., clear_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class HealthReason(_message.Message):
    __slots__ = ("check", "code", "count", "first_seen_time", "last_seen_time", "effect", "detail", "description")
    CHECK_FIELD_NUMBER: _ClassVar[int]
    CODE_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    FIRST_SEEN_TIME_FIELD_NUMBER: _ClassVar[int]
    LAST_SEEN_TIME_FIELD_NUMBER: _ClassVar[int]
    EFFECT_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    check: str
    code: int
    count: int
    first_seen_time: _timestamp_pb2.Timestamp
    last_seen_time: _timestamp_pb2.Timestamp
    effect: str
    detail: str
    description: str
    def __init__(self, check: _Optional[str] = ..., code: _Optional[int] = ..., count: _Optional[int] = ..., first_seen_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., last_seen_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., effect: _Optional[str] = ..., detail: _Optional[str] = ..., description: _Optional[str] = ...) -> None: ...

class ManualQuarantine(_message.Message):
    __slots__ = ("principal_id", "reason", "time")
    PRINCIPAL_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    TIME_FIELD_NUMBER: _ClassVar[int]
    principal_id: str
    reason: str
    time: _timestamp_pb2.Timestamp
    def __init__(self, principal_id: _Optional[str] = ..., reason: _Optional[str] = ..., time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class HealthChange(_message.Message):
    __slots__ = ("time", "to", "reasons", "principal_id")
    TIME_FIELD_NUMBER: _ClassVar[int]
    FROM_FIELD_NUMBER: _ClassVar[int]
    TO_FIELD_NUMBER: _ClassVar[int]
    REASONS_FIELD_NUMBER: _ClassVar[int]
    PRINCIPAL_ID_FIELD_NUMBER: _ClassVar[int]
    time: _timestamp_pb2.Timestamp
    to: HealthState
    reasons: _containers.RepeatedCompositeFieldContainer[HealthReason]
    principal_id: str
    def __init__(self, time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., to: _Optional[_Union[HealthState, str]] = ..., reasons: _Optional[_Iterable[_Union[HealthReason, _Mapping]]] = ..., principal_id: _Optional[str] = ..., **kwargs) -> None: ...

class ListRequest(_message.Message):
    __slots__ = ("health", "model", "node_id", "pool", "page_size", "page_token", "present")
    HEALTH_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    POOL_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    PRESENT_FIELD_NUMBER: _ClassVar[int]
    health: _containers.RepeatedScalarFieldContainer[HealthState]
    model: str
    node_id: str
    pool: str
    page_size: int
    page_token: str
    present: bool
    def __init__(self, health: _Optional[_Iterable[_Union[HealthState, str]]] = ..., model: _Optional[str] = ..., node_id: _Optional[str] = ..., pool: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., present: _Optional[bool] = ...) -> None: ...

class ListResponse(_message.Message):
    __slots__ = ("gpus", "next_page_token")
    GPUS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    gpus: _containers.RepeatedCompositeFieldContainer[Gpu]
    next_page_token: str
    def __init__(self, gpus: _Optional[_Iterable[_Union[Gpu, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class GetRequest(_message.Message):
    __slots__ = ("uuid", "history_size")
    UUID_FIELD_NUMBER: _ClassVar[int]
    HISTORY_SIZE_FIELD_NUMBER: _ClassVar[int]
    uuid: str
    history_size: int
    def __init__(self, uuid: _Optional[str] = ..., history_size: _Optional[int] = ...) -> None: ...

class GetResponse(_message.Message):
    __slots__ = ("gpu", "history")
    GPU_FIELD_NUMBER: _ClassVar[int]
    HISTORY_FIELD_NUMBER: _ClassVar[int]
    gpu: Gpu
    history: _containers.RepeatedCompositeFieldContainer[HealthChange]
    def __init__(self, gpu: _Optional[_Union[Gpu, _Mapping]] = ..., history: _Optional[_Iterable[_Union[HealthChange, _Mapping]]] = ...) -> None: ...

class SummaryRequest(_message.Message):
    __slots__ = ("pool",)
    POOL_FIELD_NUMBER: _ClassVar[int]
    pool: str
    def __init__(self, pool: _Optional[str] = ...) -> None: ...

class SummaryResponse(_message.Message):
    __slots__ = ("states", "reasons", "quarantined_nodes", "nodes_driver_not_answering")
    STATES_FIELD_NUMBER: _ClassVar[int]
    REASONS_FIELD_NUMBER: _ClassVar[int]
    QUARANTINED_NODES_FIELD_NUMBER: _ClassVar[int]
    NODES_DRIVER_NOT_ANSWERING_FIELD_NUMBER: _ClassVar[int]
    states: _containers.RepeatedCompositeFieldContainer[StateCount]
    reasons: _containers.RepeatedCompositeFieldContainer[ReasonCount]
    quarantined_nodes: int
    nodes_driver_not_answering: int
    def __init__(self, states: _Optional[_Iterable[_Union[StateCount, _Mapping]]] = ..., reasons: _Optional[_Iterable[_Union[ReasonCount, _Mapping]]] = ..., quarantined_nodes: _Optional[int] = ..., nodes_driver_not_answering: _Optional[int] = ...) -> None: ...

class StateCount(_message.Message):
    __slots__ = ("model", "health", "gpus")
    MODEL_FIELD_NUMBER: _ClassVar[int]
    HEALTH_FIELD_NUMBER: _ClassVar[int]
    GPUS_FIELD_NUMBER: _ClassVar[int]
    model: str
    health: HealthState
    gpus: int
    def __init__(self, model: _Optional[str] = ..., health: _Optional[_Union[HealthState, str]] = ..., gpus: _Optional[int] = ...) -> None: ...

class ReasonCount(_message.Message):
    __slots__ = ("check", "code", "effect", "gpus")
    CHECK_FIELD_NUMBER: _ClassVar[int]
    CODE_FIELD_NUMBER: _ClassVar[int]
    EFFECT_FIELD_NUMBER: _ClassVar[int]
    GPUS_FIELD_NUMBER: _ClassVar[int]
    check: str
    code: int
    effect: str
    gpus: int
    def __init__(self, check: _Optional[str] = ..., code: _Optional[int] = ..., effect: _Optional[str] = ..., gpus: _Optional[int] = ...) -> None: ...

class QuarantineRequest(_message.Message):
    __slots__ = ("uuid", "reason")
    UUID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    uuid: str
    reason: str
    def __init__(self, uuid: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class QuarantineResponse(_message.Message):
    __slots__ = ("gpu",)
    GPU_FIELD_NUMBER: _ClassVar[int]
    gpu: Gpu
    def __init__(self, gpu: _Optional[_Union[Gpu, _Mapping]] = ...) -> None: ...

class ClearRequest(_message.Message):
    __slots__ = ("uuid",)
    UUID_FIELD_NUMBER: _ClassVar[int]
    uuid: str
    def __init__(self, uuid: _Optional[str] = ...) -> None: ...

class ClearResponse(_message.Message):
    __slots__ = ("gpu",)
    GPU_FIELD_NUMBER: _ClassVar[int]
    gpu: Gpu
    def __init__(self, gpu: _Optional[_Union[Gpu, _Mapping]] = ...) -> None: ...
