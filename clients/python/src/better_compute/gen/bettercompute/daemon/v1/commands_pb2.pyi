from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ExecPayload(_message.Message):
    __slots__ = ("path", "args", "env", "dir", "timeout_seconds", "max_output_bytes")
    class EnvEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    PATH_FIELD_NUMBER: _ClassVar[int]
    ARGS_FIELD_NUMBER: _ClassVar[int]
    ENV_FIELD_NUMBER: _ClassVar[int]
    DIR_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_SECONDS_FIELD_NUMBER: _ClassVar[int]
    MAX_OUTPUT_BYTES_FIELD_NUMBER: _ClassVar[int]
    path: str
    args: _containers.RepeatedScalarFieldContainer[str]
    env: _containers.ScalarMap[str, str]
    dir: str
    timeout_seconds: float
    max_output_bytes: int
    def __init__(self, path: _Optional[str] = ..., args: _Optional[_Iterable[str]] = ..., env: _Optional[_Mapping[str, str]] = ..., dir: _Optional[str] = ..., timeout_seconds: _Optional[float] = ..., max_output_bytes: _Optional[int] = ...) -> None: ...

class DrainPayload(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class UndrainPayload(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class UpgradePayload(_message.Message):
    __slots__ = ("version",)
    VERSION_FIELD_NUMBER: _ClassVar[int]
    version: str
    def __init__(self, version: _Optional[str] = ...) -> None: ...

class ConfigurePayload(_message.Message):
    __slots__ = ("config",)
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    config: _struct_pb2.Struct
    def __init__(self, config: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class RebootPayload(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class CollectInventoryPayload(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class EchoPayload(_message.Message):
    __slots__ = ("data",)
    DATA_FIELD_NUMBER: _ClassVar[int]
    data: _struct_pb2.Struct
    def __init__(self, data: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class GpuResetPayload(_message.Message):
    __slots__ = ("uuid",)
    UUID_FIELD_NUMBER: _ClassVar[int]
    uuid: str
    def __init__(self, uuid: _Optional[str] = ...) -> None: ...

class DiagnosePayload(_message.Message):
    __slots__ = ("level",)
    LEVEL_FIELD_NUMBER: _ClassVar[int]
    level: int
    def __init__(self, level: _Optional[int] = ...) -> None: ...

class DiagnoseResult(_message.Message):
    __slots__ = ("result", "level", "tests", "dcgm_version")
    RESULT_FIELD_NUMBER: _ClassVar[int]
    LEVEL_FIELD_NUMBER: _ClassVar[int]
    TESTS_FIELD_NUMBER: _ClassVar[int]
    DCGM_VERSION_FIELD_NUMBER: _ClassVar[int]
    result: str
    level: int
    tests: _containers.RepeatedCompositeFieldContainer[DiagnoseTest]
    dcgm_version: str
    def __init__(self, result: _Optional[str] = ..., level: _Optional[int] = ..., tests: _Optional[_Iterable[_Union[DiagnoseTest, _Mapping]]] = ..., dcgm_version: _Optional[str] = ...) -> None: ...

class DiagnoseTest(_message.Message):
    __slots__ = ("name", "result", "gpu_indexes", "info")
    NAME_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    GPU_INDEXES_FIELD_NUMBER: _ClassVar[int]
    INFO_FIELD_NUMBER: _ClassVar[int]
    name: str
    result: str
    gpu_indexes: _containers.RepeatedScalarFieldContainer[int]
    info: str
    def __init__(self, name: _Optional[str] = ..., result: _Optional[str] = ..., gpu_indexes: _Optional[_Iterable[int]] = ..., info: _Optional[str] = ...) -> None: ...
