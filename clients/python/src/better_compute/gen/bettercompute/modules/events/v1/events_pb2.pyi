import datetime

from bettercompute.api.v1 import options_pb2 as _options_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class GetStatusRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetStatusResponse(_message.Message):
    __slots__ = ("stream", "subject_filter", "servers", "last_event_id", "published", "last_error", "update_time")
    STREAM_FIELD_NUMBER: _ClassVar[int]
    SUBJECT_FILTER_FIELD_NUMBER: _ClassVar[int]
    SERVERS_FIELD_NUMBER: _ClassVar[int]
    LAST_EVENT_ID_FIELD_NUMBER: _ClassVar[int]
    PUBLISHED_FIELD_NUMBER: _ClassVar[int]
    LAST_ERROR_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TIME_FIELD_NUMBER: _ClassVar[int]
    stream: str
    subject_filter: str
    servers: _containers.RepeatedScalarFieldContainer[str]
    last_event_id: str
    published: int
    last_error: str
    update_time: _timestamp_pb2.Timestamp
    def __init__(self, stream: _Optional[str] = ..., subject_filter: _Optional[str] = ..., servers: _Optional[_Iterable[str]] = ..., last_event_id: _Optional[str] = ..., published: _Optional[int] = ..., last_error: _Optional[str] = ..., update_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...
