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

class Scope(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SCOPE_UNSPECIFIED: _ClassVar[Scope]
    SCOPE_OWNED_POOLS: _ClassVar[Scope]

class ExportFormat(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    EXPORT_FORMAT_UNSPECIFIED: _ClassVar[ExportFormat]
    EXPORT_FORMAT_CSV: _ClassVar[ExportFormat]
    EXPORT_FORMAT_JSONL: _ClassVar[ExportFormat]
SCOPE_UNSPECIFIED: Scope
SCOPE_OWNED_POOLS: Scope
EXPORT_FORMAT_UNSPECIFIED: ExportFormat
EXPORT_FORMAT_CSV: ExportFormat
EXPORT_FORMAT_JSONL: ExportFormat

class ExportRequest(_message.Message):
    __slots__ = ("start_time", "end_time", "scope", "pool_id", "format", "page_size", "page_token")
    START_TIME_FIELD_NUMBER: _ClassVar[int]
    END_TIME_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    POOL_ID_FIELD_NUMBER: _ClassVar[int]
    FORMAT_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    start_time: _timestamp_pb2.Timestamp
    end_time: _timestamp_pb2.Timestamp
    scope: Scope
    pool_id: str
    format: ExportFormat
    page_size: int
    page_token: str
    def __init__(self, start_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., end_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., scope: _Optional[_Union[Scope, str]] = ..., pool_id: _Optional[str] = ..., format: _Optional[_Union[ExportFormat, str]] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ExportResponse(_message.Message):
    __slots__ = ("content_type", "data", "rows", "next_page_token")
    CONTENT_TYPE_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    ROWS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    content_type: str
    data: bytes
    rows: int
    next_page_token: str
    def __init__(self, content_type: _Optional[str] = ..., data: _Optional[bytes] = ..., rows: _Optional[int] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class QueryRequest(_message.Message):
    __slots__ = ("start_time", "end_time", "pool_id", "hourly", "scope")
    START_TIME_FIELD_NUMBER: _ClassVar[int]
    END_TIME_FIELD_NUMBER: _ClassVar[int]
    POOL_ID_FIELD_NUMBER: _ClassVar[int]
    HOURLY_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    start_time: _timestamp_pb2.Timestamp
    end_time: _timestamp_pb2.Timestamp
    pool_id: str
    hourly: bool
    scope: Scope
    def __init__(self, start_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., end_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., pool_id: _Optional[str] = ..., hourly: _Optional[bool] = ..., scope: _Optional[_Union[Scope, str]] = ...) -> None: ...

class Usage(_message.Message):
    __slots__ = ("pool_id", "resource", "model", "amount", "hour", "tenant_id", "unhealthy_amount", "active_amount", "mean_utilization")
    POOL_ID_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    AMOUNT_FIELD_NUMBER: _ClassVar[int]
    HOUR_FIELD_NUMBER: _ClassVar[int]
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    UNHEALTHY_AMOUNT_FIELD_NUMBER: _ClassVar[int]
    ACTIVE_AMOUNT_FIELD_NUMBER: _ClassVar[int]
    MEAN_UTILIZATION_FIELD_NUMBER: _ClassVar[int]
    pool_id: str
    resource: str
    model: str
    amount: float
    hour: _timestamp_pb2.Timestamp
    tenant_id: str
    unhealthy_amount: float
    active_amount: float
    mean_utilization: float
    def __init__(self, pool_id: _Optional[str] = ..., resource: _Optional[str] = ..., model: _Optional[str] = ..., amount: _Optional[float] = ..., hour: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., tenant_id: _Optional[str] = ..., unhealthy_amount: _Optional[float] = ..., active_amount: _Optional[float] = ..., mean_utilization: _Optional[float] = ...) -> None: ...

class QueryResponse(_message.Message):
    __slots__ = ("totals", "hours", "unaggregated_records", "aggregation_lag")
    TOTALS_FIELD_NUMBER: _ClassVar[int]
    HOURS_FIELD_NUMBER: _ClassVar[int]
    UNAGGREGATED_RECORDS_FIELD_NUMBER: _ClassVar[int]
    AGGREGATION_LAG_FIELD_NUMBER: _ClassVar[int]
    totals: _containers.RepeatedCompositeFieldContainer[Usage]
    hours: _containers.RepeatedCompositeFieldContainer[Usage]
    unaggregated_records: int
    aggregation_lag: _duration_pb2.Duration
    def __init__(self, totals: _Optional[_Iterable[_Union[Usage, _Mapping]]] = ..., hours: _Optional[_Iterable[_Union[Usage, _Mapping]]] = ..., unaggregated_records: _Optional[int] = ..., aggregation_lag: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class UtilizationRequest(_message.Message):
    __slots__ = ("start_time", "end_time", "step", "lease_id", "pool_id", "scope")
    START_TIME_FIELD_NUMBER: _ClassVar[int]
    END_TIME_FIELD_NUMBER: _ClassVar[int]
    STEP_FIELD_NUMBER: _ClassVar[int]
    LEASE_ID_FIELD_NUMBER: _ClassVar[int]
    POOL_ID_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    start_time: _timestamp_pb2.Timestamp
    end_time: _timestamp_pb2.Timestamp
    step: _duration_pb2.Duration
    lease_id: str
    pool_id: str
    scope: Scope
    def __init__(self, start_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., end_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., step: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., lease_id: _Optional[str] = ..., pool_id: _Optional[str] = ..., scope: _Optional[_Union[Scope, str]] = ...) -> None: ...

class UtilizationPoint(_message.Message):
    __slots__ = ("time", "held_gpus", "active_share", "mean_utilization", "peak_memory_bytes", "gpu_seconds_held", "gpu_seconds_active")
    TIME_FIELD_NUMBER: _ClassVar[int]
    HELD_GPUS_FIELD_NUMBER: _ClassVar[int]
    ACTIVE_SHARE_FIELD_NUMBER: _ClassVar[int]
    MEAN_UTILIZATION_FIELD_NUMBER: _ClassVar[int]
    PEAK_MEMORY_BYTES_FIELD_NUMBER: _ClassVar[int]
    GPU_SECONDS_HELD_FIELD_NUMBER: _ClassVar[int]
    GPU_SECONDS_ACTIVE_FIELD_NUMBER: _ClassVar[int]
    time: _timestamp_pb2.Timestamp
    held_gpus: float
    active_share: float
    mean_utilization: float
    peak_memory_bytes: int
    gpu_seconds_held: int
    gpu_seconds_active: int
    def __init__(self, time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., held_gpus: _Optional[float] = ..., active_share: _Optional[float] = ..., mean_utilization: _Optional[float] = ..., peak_memory_bytes: _Optional[int] = ..., gpu_seconds_held: _Optional[int] = ..., gpu_seconds_active: _Optional[int] = ...) -> None: ...

class UtilizationResponse(_message.Message):
    __slots__ = ("points",)
    POINTS_FIELD_NUMBER: _ClassVar[int]
    points: _containers.RepeatedCompositeFieldContainer[UtilizationPoint]
    def __init__(self, points: _Optional[_Iterable[_Union[UtilizationPoint, _Mapping]]] = ...) -> None: ...
