import datetime

from bettercompute.api.v1 import options_pb2 as _options_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class MachineState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    MACHINE_STATE_UNSPECIFIED: _ClassVar[MachineState]
    MACHINE_STATE_REQUESTED: _ClassVar[MachineState]
    MACHINE_STATE_PROVISIONING: _ClassVar[MachineState]
    MACHINE_STATE_BOOTING: _ClassVar[MachineState]
    MACHINE_STATE_JOINED: _ClassVar[MachineState]
    MACHINE_STATE_READY: _ClassVar[MachineState]
    MACHINE_STATE_DELETING: _ClassVar[MachineState]
    MACHINE_STATE_DRAINING: _ClassVar[MachineState]
    MACHINE_STATE_DESTROYING: _ClassVar[MachineState]
    MACHINE_STATE_GONE: _ClassVar[MachineState]
    MACHINE_STATE_FAILED: _ClassVar[MachineState]
MACHINE_STATE_UNSPECIFIED: MachineState
MACHINE_STATE_REQUESTED: MachineState
MACHINE_STATE_PROVISIONING: MachineState
MACHINE_STATE_BOOTING: MachineState
MACHINE_STATE_JOINED: MachineState
MACHINE_STATE_READY: MachineState
MACHINE_STATE_DELETING: MachineState
MACHINE_STATE_DRAINING: MachineState
MACHINE_STATE_DESTROYING: MachineState
MACHINE_STATE_GONE: MachineState
MACHINE_STATE_FAILED: MachineState

class MachineClass(_message.Message):
    __slots__ = ("name", "tenant_id", "provider", "params", "has_credentials", "create_time")
    NAME_FIELD_NUMBER: _ClassVar[int]
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    PROVIDER_FIELD_NUMBER: _ClassVar[int]
    PARAMS_FIELD_NUMBER: _ClassVar[int]
    HAS_CREDENTIALS_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    name: str
    tenant_id: str
    provider: str
    params: _struct_pb2.Struct
    has_credentials: bool
    create_time: _timestamp_pb2.Timestamp
    def __init__(self, name: _Optional[str] = ..., tenant_id: _Optional[str] = ..., provider: _Optional[str] = ..., params: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., has_credentials: _Optional[bool] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class MachineStep(_message.Message):
    __slots__ = ("state", "time", "detail")
    STATE_FIELD_NUMBER: _ClassVar[int]
    TIME_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    state: MachineState
    time: _timestamp_pb2.Timestamp
    detail: str
    def __init__(self, state: _Optional[_Union[MachineState, str]] = ..., time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., detail: _Optional[str] = ...) -> None: ...

class Machine(_message.Message):
    __slots__ = ("id", "tenant_id", "name", "state", "reason", "provider_id", "node_id", "steps", "create_time", "update_time")
    ID_FIELD_NUMBER: _ClassVar[int]
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    CLASS_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    PROVIDER_ID_FIELD_NUMBER: _ClassVar[int]
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    STEPS_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TIME_FIELD_NUMBER: _ClassVar[int]
    id: str
    tenant_id: str
    name: str
    state: MachineState
    reason: str
    provider_id: str
    node_id: str
    steps: _containers.RepeatedCompositeFieldContainer[MachineStep]
    create_time: _timestamp_pb2.Timestamp
    update_time: _timestamp_pb2.Timestamp
    def __init__(self, id: _Optional[str] = ..., tenant_id: _Optional[str] = ..., name: _Optional[str] = ..., state: _Optional[_Union[MachineState, str]] = ..., reason: _Optional[str] = ..., provider_id: _Optional[str] = ..., node_id: _Optional[str] = ..., steps: _Optional[_Iterable[_Union[MachineStep, _Mapping]]] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., update_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., **kwargs) -> None: ...

class CreateClassRequest(_message.Message):
    __slots__ = ("name", "provider", "params", "credentials")
    NAME_FIELD_NUMBER: _ClassVar[int]
    PROVIDER_FIELD_NUMBER: _ClassVar[int]
    PARAMS_FIELD_NUMBER: _ClassVar[int]
    CREDENTIALS_FIELD_NUMBER: _ClassVar[int]
    name: str
    provider: str
    params: _struct_pb2.Struct
    credentials: bytes
    def __init__(self, name: _Optional[str] = ..., provider: _Optional[str] = ..., params: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., credentials: _Optional[bytes] = ...) -> None: ...

class CreateClassResponse(_message.Message):
    __slots__ = ()
    CLASS_FIELD_NUMBER: _ClassVar[int]
    def __init__(self, **kwargs) -> None: ...

class GetClassRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class GetClassResponse(_message.Message):
    __slots__ = ()
    CLASS_FIELD_NUMBER: _ClassVar[int]
    def __init__(self, **kwargs) -> None: ...

class ListClassesRequest(_message.Message):
    __slots__ = ("page_size", "page_token")
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListClassesResponse(_message.Message):
    __slots__ = ("classes", "next_page_token")
    CLASSES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    classes: _containers.RepeatedCompositeFieldContainer[MachineClass]
    next_page_token: str
    def __init__(self, classes: _Optional[_Iterable[_Union[MachineClass, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class DeleteClassRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class DeleteClassResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class CreateMachineRequest(_message.Message):
    __slots__ = ("name",)
    CLASS_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ..., **kwargs) -> None: ...

class CreateMachineResponse(_message.Message):
    __slots__ = ("machine",)
    MACHINE_FIELD_NUMBER: _ClassVar[int]
    machine: Machine
    def __init__(self, machine: _Optional[_Union[Machine, _Mapping]] = ...) -> None: ...

class GetMachineRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class GetMachineResponse(_message.Message):
    __slots__ = ("machine",)
    MACHINE_FIELD_NUMBER: _ClassVar[int]
    machine: Machine
    def __init__(self, machine: _Optional[_Union[Machine, _Mapping]] = ...) -> None: ...

class ListMachinesRequest(_message.Message):
    __slots__ = ("page_size", "page_token")
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    CLASS_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., **kwargs) -> None: ...

class ListMachinesResponse(_message.Message):
    __slots__ = ("machines", "next_page_token")
    MACHINES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    machines: _containers.RepeatedCompositeFieldContainer[Machine]
    next_page_token: str
    def __init__(self, machines: _Optional[_Iterable[_Union[Machine, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class DeleteMachineRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class DeleteMachineResponse(_message.Message):
    __slots__ = ("machine",)
    MACHINE_FIELD_NUMBER: _ClassVar[int]
    machine: Machine
    def __init__(self, machine: _Optional[_Union[Machine, _Mapping]] = ...) -> None: ...

class PowerCycleMachineRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class PowerCycleMachineResponse(_message.Message):
    __slots__ = ("machine",)
    MACHINE_FIELD_NUMBER: _ClassVar[int]
    machine: Machine
    def __init__(self, machine: _Optional[_Union[Machine, _Mapping]] = ...) -> None: ...

class BootConfigRequest(_message.Message):
    __slots__ = ("ticket",)
    TICKET_FIELD_NUMBER: _ClassVar[int]
    ticket: str
    def __init__(self, ticket: _Optional[str] = ...) -> None: ...

class BootConfigResponse(_message.Message):
    __slots__ = ("machine_id", "name", "join_token", "gateway_endpoint", "root_ca_pem")
    MACHINE_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    JOIN_TOKEN_FIELD_NUMBER: _ClassVar[int]
    GATEWAY_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    ROOT_CA_PEM_FIELD_NUMBER: _ClassVar[int]
    machine_id: str
    name: str
    join_token: str
    gateway_endpoint: str
    root_ca_pem: str
    def __init__(self, machine_id: _Optional[str] = ..., name: _Optional[str] = ..., join_token: _Optional[str] = ..., gateway_endpoint: _Optional[str] = ..., root_ca_pem: _Optional[str] = ...) -> None: ...

class PoolScaling(_message.Message):
    __slots__ = ("pool_id", "min", "max", "scale_up_delay_ms", "scale_down_idle_ms", "machines", "create_time", "update_time")
    POOL_ID_FIELD_NUMBER: _ClassVar[int]
    CLASS_FIELD_NUMBER: _ClassVar[int]
    MIN_FIELD_NUMBER: _ClassVar[int]
    MAX_FIELD_NUMBER: _ClassVar[int]
    SCALE_UP_DELAY_MS_FIELD_NUMBER: _ClassVar[int]
    SCALE_DOWN_IDLE_MS_FIELD_NUMBER: _ClassVar[int]
    MACHINES_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TIME_FIELD_NUMBER: _ClassVar[int]
    pool_id: str
    min: int
    max: int
    scale_up_delay_ms: int
    scale_down_idle_ms: int
    machines: int
    create_time: _timestamp_pb2.Timestamp
    update_time: _timestamp_pb2.Timestamp
    def __init__(self, pool_id: _Optional[str] = ..., min: _Optional[int] = ..., max: _Optional[int] = ..., scale_up_delay_ms: _Optional[int] = ..., scale_down_idle_ms: _Optional[int] = ..., machines: _Optional[int] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., update_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., **kwargs) -> None: ...

class ScalingDecision(_message.Message):
    __slots__ = ("action", "count", "machine_ids", "reason", "time")
    ACTION_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    MACHINE_IDS_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    TIME_FIELD_NUMBER: _ClassVar[int]
    action: str
    count: int
    machine_ids: _containers.RepeatedScalarFieldContainer[str]
    reason: str
    time: _timestamp_pb2.Timestamp
    def __init__(self, action: _Optional[str] = ..., count: _Optional[int] = ..., machine_ids: _Optional[_Iterable[str]] = ..., reason: _Optional[str] = ..., time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class SetPoolScalingRequest(_message.Message):
    __slots__ = ("pool_id", "min", "max", "scale_up_delay_ms", "scale_down_idle_ms")
    POOL_ID_FIELD_NUMBER: _ClassVar[int]
    CLASS_FIELD_NUMBER: _ClassVar[int]
    MIN_FIELD_NUMBER: _ClassVar[int]
    MAX_FIELD_NUMBER: _ClassVar[int]
    SCALE_UP_DELAY_MS_FIELD_NUMBER: _ClassVar[int]
    SCALE_DOWN_IDLE_MS_FIELD_NUMBER: _ClassVar[int]
    pool_id: str
    min: int
    max: int
    scale_up_delay_ms: int
    scale_down_idle_ms: int
    def __init__(self, pool_id: _Optional[str] = ..., min: _Optional[int] = ..., max: _Optional[int] = ..., scale_up_delay_ms: _Optional[int] = ..., scale_down_idle_ms: _Optional[int] = ..., **kwargs) -> None: ...

class SetPoolScalingResponse(_message.Message):
    __slots__ = ("scaling",)
    SCALING_FIELD_NUMBER: _ClassVar[int]
    scaling: PoolScaling
    def __init__(self, scaling: _Optional[_Union[PoolScaling, _Mapping]] = ...) -> None: ...

class GetPoolScalingRequest(_message.Message):
    __slots__ = ("pool_id",)
    POOL_ID_FIELD_NUMBER: _ClassVar[int]
    pool_id: str
    def __init__(self, pool_id: _Optional[str] = ...) -> None: ...

class GetPoolScalingResponse(_message.Message):
    __slots__ = ("scaling", "machines", "decisions")
    SCALING_FIELD_NUMBER: _ClassVar[int]
    MACHINES_FIELD_NUMBER: _ClassVar[int]
    DECISIONS_FIELD_NUMBER: _ClassVar[int]
    scaling: PoolScaling
    machines: _containers.RepeatedCompositeFieldContainer[Machine]
    decisions: _containers.RepeatedCompositeFieldContainer[ScalingDecision]
    def __init__(self, scaling: _Optional[_Union[PoolScaling, _Mapping]] = ..., machines: _Optional[_Iterable[_Union[Machine, _Mapping]]] = ..., decisions: _Optional[_Iterable[_Union[ScalingDecision, _Mapping]]] = ...) -> None: ...

class ListPoolScalingRequest(_message.Message):
    __slots__ = ("page_size", "page_token")
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListPoolScalingResponse(_message.Message):
    __slots__ = ("scalings", "next_page_token")
    SCALINGS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    scalings: _containers.RepeatedCompositeFieldContainer[PoolScaling]
    next_page_token: str
    def __init__(self, scalings: _Optional[_Iterable[_Union[PoolScaling, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class DeletePoolScalingRequest(_message.Message):
    __slots__ = ("pool_id",)
    POOL_ID_FIELD_NUMBER: _ClassVar[int]
    pool_id: str
    def __init__(self, pool_id: _Optional[str] = ...) -> None: ...

class DeletePoolScalingResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...
