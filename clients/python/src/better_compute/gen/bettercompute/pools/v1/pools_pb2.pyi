import datetime

from bettercompute.api.v1 import options_pb2 as _options_pb2
from google.protobuf import field_mask_pb2 as _field_mask_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Pool(_message.Message):
    __slots__ = ("id", "tenant_id", "name", "description", "node_selector", "node_ids", "capacity", "quota", "create_time", "update_time")
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
    def __init__(self, id: _Optional[str] = ..., tenant_id: _Optional[str] = ..., name: _Optional[str] = ..., description: _Optional[str] = ..., node_selector: _Optional[_Mapping[str, str]] = ..., node_ids: _Optional[_Iterable[str]] = ..., capacity: _Optional[_Union[Capacity, _Mapping]] = ..., quota: _Optional[_Union[Quota, _Mapping]] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., update_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

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
    __slots__ = ("name", "description", "node_selector", "node_ids")
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
    name: str
    description: str
    node_selector: _containers.ScalarMap[str, str]
    node_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, name: _Optional[str] = ..., description: _Optional[str] = ..., node_selector: _Optional[_Mapping[str, str]] = ..., node_ids: _Optional[_Iterable[str]] = ...) -> None: ...

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
    __slots__ = ("id", "description", "node_selector", "node_ids", "update_mask")
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
    id: str
    description: str
    node_selector: _containers.ScalarMap[str, str]
    node_ids: _containers.RepeatedScalarFieldContainer[str]
    update_mask: _field_mask_pb2.FieldMask
    def __init__(self, id: _Optional[str] = ..., description: _Optional[str] = ..., node_selector: _Optional[_Mapping[str, str]] = ..., node_ids: _Optional[_Iterable[str]] = ..., update_mask: _Optional[_Union[_field_mask_pb2.FieldMask, _Mapping]] = ...) -> None: ...

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
