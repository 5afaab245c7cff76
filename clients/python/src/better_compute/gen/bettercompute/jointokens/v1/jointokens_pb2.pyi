import datetime

from bettercompute.api.v1 import options_pb2 as _options_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class JoinToken(_message.Message):
    __slots__ = ("id", "tenant_id", "description", "pool", "labels", "max_uses", "uses", "expire_time", "expired", "revoked", "revoke_time", "create_time")
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ID_FIELD_NUMBER: _ClassVar[int]
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    POOL_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    MAX_USES_FIELD_NUMBER: _ClassVar[int]
    USES_FIELD_NUMBER: _ClassVar[int]
    EXPIRE_TIME_FIELD_NUMBER: _ClassVar[int]
    EXPIRED_FIELD_NUMBER: _ClassVar[int]
    REVOKED_FIELD_NUMBER: _ClassVar[int]
    REVOKE_TIME_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    id: str
    tenant_id: str
    description: str
    pool: str
    labels: _containers.ScalarMap[str, str]
    max_uses: int
    uses: int
    expire_time: _timestamp_pb2.Timestamp
    expired: bool
    revoked: bool
    revoke_time: _timestamp_pb2.Timestamp
    create_time: _timestamp_pb2.Timestamp
    def __init__(self, id: _Optional[str] = ..., tenant_id: _Optional[str] = ..., description: _Optional[str] = ..., pool: _Optional[str] = ..., labels: _Optional[_Mapping[str, str]] = ..., max_uses: _Optional[int] = ..., uses: _Optional[int] = ..., expire_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., expired: _Optional[bool] = ..., revoked: _Optional[bool] = ..., revoke_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class CreateRequest(_message.Message):
    __slots__ = ("description", "pool", "labels", "max_uses", "expire_time")
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    POOL_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    MAX_USES_FIELD_NUMBER: _ClassVar[int]
    EXPIRE_TIME_FIELD_NUMBER: _ClassVar[int]
    description: str
    pool: str
    labels: _containers.ScalarMap[str, str]
    max_uses: int
    expire_time: _timestamp_pb2.Timestamp
    def __init__(self, description: _Optional[str] = ..., pool: _Optional[str] = ..., labels: _Optional[_Mapping[str, str]] = ..., max_uses: _Optional[int] = ..., expire_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class CreateResponse(_message.Message):
    __slots__ = ("join_token", "token", "ca_cert_hash")
    JOIN_TOKEN_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    CA_CERT_HASH_FIELD_NUMBER: _ClassVar[int]
    join_token: JoinToken
    token: str
    ca_cert_hash: str
    def __init__(self, join_token: _Optional[_Union[JoinToken, _Mapping]] = ..., token: _Optional[str] = ..., ca_cert_hash: _Optional[str] = ...) -> None: ...

class ListRequest(_message.Message):
    __slots__ = ("page_size", "page_token")
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListResponse(_message.Message):
    __slots__ = ("join_tokens", "next_page_token")
    JOIN_TOKENS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    join_tokens: _containers.RepeatedCompositeFieldContainer[JoinToken]
    next_page_token: str
    def __init__(self, join_tokens: _Optional[_Iterable[_Union[JoinToken, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class RevokeRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class RevokeResponse(_message.Message):
    __slots__ = ("join_token",)
    JOIN_TOKEN_FIELD_NUMBER: _ClassVar[int]
    join_token: JoinToken
    def __init__(self, join_token: _Optional[_Union[JoinToken, _Mapping]] = ...) -> None: ...
