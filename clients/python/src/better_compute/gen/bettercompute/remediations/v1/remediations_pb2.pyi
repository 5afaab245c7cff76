import datetime

from bettercompute.api.v1 import options_pb2 as _options_pb2
from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class State(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    STATE_UNSPECIFIED: _ClassVar[State]
    STATE_WAITING: _ClassVar[State]
    STATE_RUNNING: _ClassVar[State]
    STATE_SUCCEEDED: _ClassVar[State]
    STATE_SERVICE: _ClassVar[State]
    STATE_RETURNED: _ClassVar[State]
    STATE_CANCELLED: _ClassVar[State]
    STATE_FAILED: _ClassVar[State]
STATE_UNSPECIFIED: State
STATE_WAITING: State
STATE_RUNNING: State
STATE_SUCCEEDED: State
STATE_SERVICE: State
STATE_RETURNED: State
STATE_CANCELLED: State
STATE_FAILED: State

class Remediation(_message.Message):
    __slots__ = ("id", "node_id", "hostname", "gpu_uuid", "gpu_serial", "reason", "ladder", "policy_version", "state", "steps", "step", "history", "failure_domain", "create_time", "update_time", "end_time", "principal_id")
    ID_FIELD_NUMBER: _ClassVar[int]
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    HOSTNAME_FIELD_NUMBER: _ClassVar[int]
    GPU_UUID_FIELD_NUMBER: _ClassVar[int]
    GPU_SERIAL_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    LADDER_FIELD_NUMBER: _ClassVar[int]
    POLICY_VERSION_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    STEPS_FIELD_NUMBER: _ClassVar[int]
    STEP_FIELD_NUMBER: _ClassVar[int]
    HISTORY_FIELD_NUMBER: _ClassVar[int]
    FAILURE_DOMAIN_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TIME_FIELD_NUMBER: _ClassVar[int]
    END_TIME_FIELD_NUMBER: _ClassVar[int]
    PRINCIPAL_ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    node_id: str
    hostname: str
    gpu_uuid: str
    gpu_serial: str
    reason: str
    ladder: str
    policy_version: str
    state: State
    steps: _containers.RepeatedCompositeFieldContainer[Step]
    step: int
    history: _containers.RepeatedCompositeFieldContainer[HistoryEntry]
    failure_domain: str
    create_time: _timestamp_pb2.Timestamp
    update_time: _timestamp_pb2.Timestamp
    end_time: _timestamp_pb2.Timestamp
    principal_id: str
    def __init__(self, id: _Optional[str] = ..., node_id: _Optional[str] = ..., hostname: _Optional[str] = ..., gpu_uuid: _Optional[str] = ..., gpu_serial: _Optional[str] = ..., reason: _Optional[str] = ..., ladder: _Optional[str] = ..., policy_version: _Optional[str] = ..., state: _Optional[_Union[State, str]] = ..., steps: _Optional[_Iterable[_Union[Step, _Mapping]]] = ..., step: _Optional[int] = ..., history: _Optional[_Iterable[_Union[HistoryEntry, _Mapping]]] = ..., failure_domain: _Optional[str] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., update_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., end_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., principal_id: _Optional[str] = ...) -> None: ...

class Step(_message.Message):
    __slots__ = ("action", "level", "window")
    ACTION_FIELD_NUMBER: _ClassVar[int]
    LEVEL_FIELD_NUMBER: _ClassVar[int]
    WINDOW_FIELD_NUMBER: _ClassVar[int]
    action: str
    level: int
    window: _duration_pb2.Duration
    def __init__(self, action: _Optional[str] = ..., level: _Optional[int] = ..., window: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class HistoryEntry(_message.Message):
    __slots__ = ("step", "action", "outcome", "detail", "start_time", "end_time")
    STEP_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    START_TIME_FIELD_NUMBER: _ClassVar[int]
    END_TIME_FIELD_NUMBER: _ClassVar[int]
    step: int
    action: str
    outcome: str
    detail: str
    start_time: _timestamp_pb2.Timestamp
    end_time: _timestamp_pb2.Timestamp
    def __init__(self, step: _Optional[int] = ..., action: _Optional[str] = ..., outcome: _Optional[str] = ..., detail: _Optional[str] = ..., start_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., end_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class CreateRequest(_message.Message):
    __slots__ = ("node_id", "gpu_uuid", "reason", "ladder")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    GPU_UUID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    LADDER_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    gpu_uuid: str
    reason: str
    ladder: str
    def __init__(self, node_id: _Optional[str] = ..., gpu_uuid: _Optional[str] = ..., reason: _Optional[str] = ..., ladder: _Optional[str] = ...) -> None: ...

class CreateResponse(_message.Message):
    __slots__ = ("remediation",)
    REMEDIATION_FIELD_NUMBER: _ClassVar[int]
    remediation: Remediation
    def __init__(self, remediation: _Optional[_Union[Remediation, _Mapping]] = ...) -> None: ...

class GetRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class GetResponse(_message.Message):
    __slots__ = ("remediation",)
    REMEDIATION_FIELD_NUMBER: _ClassVar[int]
    remediation: Remediation
    def __init__(self, remediation: _Optional[_Union[Remediation, _Mapping]] = ...) -> None: ...

class ListRequest(_message.Message):
    __slots__ = ("state", "node_id", "gpu_uuid", "page_size", "page_token")
    STATE_FIELD_NUMBER: _ClassVar[int]
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    GPU_UUID_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    state: State
    node_id: str
    gpu_uuid: str
    page_size: int
    page_token: str
    def __init__(self, state: _Optional[_Union[State, str]] = ..., node_id: _Optional[str] = ..., gpu_uuid: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListResponse(_message.Message):
    __slots__ = ("remediations", "next_page_token")
    REMEDIATIONS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    remediations: _containers.RepeatedCompositeFieldContainer[Remediation]
    next_page_token: str
    def __init__(self, remediations: _Optional[_Iterable[_Union[Remediation, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class CancelRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class CancelResponse(_message.Message):
    __slots__ = ("remediation",)
    REMEDIATION_FIELD_NUMBER: _ClassVar[int]
    remediation: Remediation
    def __init__(self, remediation: _Optional[_Union[Remediation, _Mapping]] = ...) -> None: ...

class ReturnFromServiceRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class ReturnFromServiceResponse(_message.Message):
    __slots__ = ("remediation",)
    REMEDIATION_FIELD_NUMBER: _ClassVar[int]
    remediation: Remediation
    def __init__(self, remediation: _Optional[_Union[Remediation, _Mapping]] = ...) -> None: ...
