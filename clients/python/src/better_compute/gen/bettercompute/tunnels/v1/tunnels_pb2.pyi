import datetime

from bettercompute.api.v1 import options_pb2 as _options_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Tunnel(_message.Message):
    __slots__ = ("id", "tenant_id", "node_id", "port", "lease_id", "principal_id", "create_time", "expire_time", "open_time", "close_time", "close_code", "close_reason", "bytes_to_node", "bytes_from_node")
    ID_FIELD_NUMBER: _ClassVar[int]
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    LEASE_ID_FIELD_NUMBER: _ClassVar[int]
    PRINCIPAL_ID_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    EXPIRE_TIME_FIELD_NUMBER: _ClassVar[int]
    OPEN_TIME_FIELD_NUMBER: _ClassVar[int]
    CLOSE_TIME_FIELD_NUMBER: _ClassVar[int]
    CLOSE_CODE_FIELD_NUMBER: _ClassVar[int]
    CLOSE_REASON_FIELD_NUMBER: _ClassVar[int]
    BYTES_TO_NODE_FIELD_NUMBER: _ClassVar[int]
    BYTES_FROM_NODE_FIELD_NUMBER: _ClassVar[int]
    id: str
    tenant_id: str
    node_id: str
    port: int
    lease_id: str
    principal_id: str
    create_time: _timestamp_pb2.Timestamp
    expire_time: _timestamp_pb2.Timestamp
    open_time: _timestamp_pb2.Timestamp
    close_time: _timestamp_pb2.Timestamp
    close_code: int
    close_reason: str
    bytes_to_node: int
    bytes_from_node: int
    def __init__(self, id: _Optional[str] = ..., tenant_id: _Optional[str] = ..., node_id: _Optional[str] = ..., port: _Optional[int] = ..., lease_id: _Optional[str] = ..., principal_id: _Optional[str] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., expire_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., open_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., close_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., close_code: _Optional[int] = ..., close_reason: _Optional[str] = ..., bytes_to_node: _Optional[int] = ..., bytes_from_node: _Optional[int] = ...) -> None: ...

class CreateRequest(_message.Message):
    __slots__ = ("node_id", "port")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    port: int
    def __init__(self, node_id: _Optional[str] = ..., port: _Optional[int] = ...) -> None: ...

class CreateResponse(_message.Message):
    __slots__ = ("ticket", "url", "expire_time", "tunnel")
    TICKET_FIELD_NUMBER: _ClassVar[int]
    URL_FIELD_NUMBER: _ClassVar[int]
    EXPIRE_TIME_FIELD_NUMBER: _ClassVar[int]
    TUNNEL_FIELD_NUMBER: _ClassVar[int]
    ticket: str
    url: str
    expire_time: _timestamp_pb2.Timestamp
    tunnel: Tunnel
    def __init__(self, ticket: _Optional[str] = ..., url: _Optional[str] = ..., expire_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., tunnel: _Optional[_Union[Tunnel, _Mapping]] = ...) -> None: ...

class ListRequest(_message.Message):
    __slots__ = ("node_id", "include_closed", "page_size", "page_token")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_CLOSED_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    include_closed: bool
    page_size: int
    page_token: str
    def __init__(self, node_id: _Optional[str] = ..., include_closed: _Optional[bool] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListResponse(_message.Message):
    __slots__ = ("tunnels", "next_page_token")
    TUNNELS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    tunnels: _containers.RepeatedCompositeFieldContainer[Tunnel]
    next_page_token: str
    def __init__(self, tunnels: _Optional[_Iterable[_Union[Tunnel, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class CloseTunnelRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class CloseTunnelResponse(_message.Message):
    __slots__ = ("tunnel",)
    TUNNEL_FIELD_NUMBER: _ClassVar[int]
    tunnel: Tunnel
    def __init__(self, tunnel: _Optional[_Union[Tunnel, _Mapping]] = ...) -> None: ...
