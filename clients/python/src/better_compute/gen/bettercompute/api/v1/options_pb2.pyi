from google.protobuf import descriptor_pb2 as _descriptor_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor
METHOD_FIELD_NUMBER: _ClassVar[int]
method: _descriptor.FieldDescriptor
TABLE_FIELD_NUMBER: _ClassVar[int]
table: _descriptor.FieldDescriptor

class Method(_message.Message):
    __slots__ = ("group", "name", "permission", "public", "idempotent", "audit", "expensive")
    GROUP_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    PERMISSION_FIELD_NUMBER: _ClassVar[int]
    PUBLIC_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENT_FIELD_NUMBER: _ClassVar[int]
    AUDIT_FIELD_NUMBER: _ClassVar[int]
    EXPENSIVE_FIELD_NUMBER: _ClassVar[int]
    group: str
    name: str
    permission: str
    public: bool
    idempotent: bool
    audit: bool
    expensive: bool
    def __init__(self, group: _Optional[str] = ..., name: _Optional[str] = ..., permission: _Optional[str] = ..., public: _Optional[bool] = ..., idempotent: _Optional[bool] = ..., audit: _Optional[bool] = ..., expensive: _Optional[bool] = ...) -> None: ...

class Table(_message.Message):
    __slots__ = ("columns",)
    COLUMNS_FIELD_NUMBER: _ClassVar[int]
    columns: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, columns: _Optional[_Iterable[str]] = ...) -> None: ...
