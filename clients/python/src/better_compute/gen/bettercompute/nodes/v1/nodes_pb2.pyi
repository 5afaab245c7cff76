import datetime

from bettercompute.api.v1 import options_pb2 as _options_pb2
from bettercompute.gpus.v1 import gpus_pb2 as _gpus_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Node(_message.Message):
    __slots__ = ("id", "tenant_id", "hostname", "pool", "labels", "state", "daemon_version", "connected", "gateway_id", "connect_time", "last_seen_time", "cert_expire_time", "revoked", "revoke_time", "join_token_id", "create_time", "update_time", "inventory", "online", "online_change_time", "taints", "spec", "spec_generation", "observed_generation", "conditions", "state_change_time", "reduced", "transport", "unhealthy_gpus", "gpu_quarantined")
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ID_FIELD_NUMBER: _ClassVar[int]
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    HOSTNAME_FIELD_NUMBER: _ClassVar[int]
    POOL_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    DAEMON_VERSION_FIELD_NUMBER: _ClassVar[int]
    CONNECTED_FIELD_NUMBER: _ClassVar[int]
    GATEWAY_ID_FIELD_NUMBER: _ClassVar[int]
    CONNECT_TIME_FIELD_NUMBER: _ClassVar[int]
    LAST_SEEN_TIME_FIELD_NUMBER: _ClassVar[int]
    CERT_EXPIRE_TIME_FIELD_NUMBER: _ClassVar[int]
    REVOKED_FIELD_NUMBER: _ClassVar[int]
    REVOKE_TIME_FIELD_NUMBER: _ClassVar[int]
    JOIN_TOKEN_ID_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TIME_FIELD_NUMBER: _ClassVar[int]
    INVENTORY_FIELD_NUMBER: _ClassVar[int]
    ONLINE_FIELD_NUMBER: _ClassVar[int]
    ONLINE_CHANGE_TIME_FIELD_NUMBER: _ClassVar[int]
    TAINTS_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    SPEC_GENERATION_FIELD_NUMBER: _ClassVar[int]
    OBSERVED_GENERATION_FIELD_NUMBER: _ClassVar[int]
    CONDITIONS_FIELD_NUMBER: _ClassVar[int]
    STATE_CHANGE_TIME_FIELD_NUMBER: _ClassVar[int]
    REDUCED_FIELD_NUMBER: _ClassVar[int]
    TRANSPORT_FIELD_NUMBER: _ClassVar[int]
    UNHEALTHY_GPUS_FIELD_NUMBER: _ClassVar[int]
    GPU_QUARANTINED_FIELD_NUMBER: _ClassVar[int]
    id: str
    tenant_id: str
    hostname: str
    pool: str
    labels: _containers.ScalarMap[str, str]
    state: str
    daemon_version: str
    connected: bool
    gateway_id: str
    connect_time: _timestamp_pb2.Timestamp
    last_seen_time: _timestamp_pb2.Timestamp
    cert_expire_time: _timestamp_pb2.Timestamp
    revoked: bool
    revoke_time: _timestamp_pb2.Timestamp
    join_token_id: str
    create_time: _timestamp_pb2.Timestamp
    update_time: _timestamp_pb2.Timestamp
    inventory: Inventory
    online: bool
    online_change_time: _timestamp_pb2.Timestamp
    taints: _containers.RepeatedCompositeFieldContainer[Taint]
    spec: NodeSpec
    spec_generation: int
    observed_generation: int
    conditions: _containers.RepeatedCompositeFieldContainer[Condition]
    state_change_time: _timestamp_pb2.Timestamp
    reduced: bool
    transport: str
    unhealthy_gpus: int
    gpu_quarantined: bool
    def __init__(self, id: _Optional[str] = ..., tenant_id: _Optional[str] = ..., hostname: _Optional[str] = ..., pool: _Optional[str] = ..., labels: _Optional[_Mapping[str, str]] = ..., state: _Optional[str] = ..., daemon_version: _Optional[str] = ..., connected: _Optional[bool] = ..., gateway_id: _Optional[str] = ..., connect_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., last_seen_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., cert_expire_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., revoked: _Optional[bool] = ..., revoke_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., join_token_id: _Optional[str] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., update_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., inventory: _Optional[_Union[Inventory, _Mapping]] = ..., online: _Optional[bool] = ..., online_change_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., taints: _Optional[_Iterable[_Union[Taint, _Mapping]]] = ..., spec: _Optional[_Union[NodeSpec, _Mapping]] = ..., spec_generation: _Optional[int] = ..., observed_generation: _Optional[int] = ..., conditions: _Optional[_Iterable[_Union[Condition, _Mapping]]] = ..., state_change_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., reduced: _Optional[bool] = ..., transport: _Optional[str] = ..., unhealthy_gpus: _Optional[int] = ..., gpu_quarantined: _Optional[bool] = ...) -> None: ...

class Taint(_message.Message):
    __slots__ = ("key", "value", "effect")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    EFFECT_FIELD_NUMBER: _ClassVar[int]
    key: str
    value: str
    effect: str
    def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ..., effect: _Optional[str] = ...) -> None: ...

class NodeSpec(_message.Message):
    __slots__ = ("labels", "taints", "daemon_version", "config", "secrets", "tunnel_ports")
    LABELS_FIELD_NUMBER: _ClassVar[int]
    TAINTS_FIELD_NUMBER: _ClassVar[int]
    DAEMON_VERSION_FIELD_NUMBER: _ClassVar[int]
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    SECRETS_FIELD_NUMBER: _ClassVar[int]
    TUNNEL_PORTS_FIELD_NUMBER: _ClassVar[int]
    labels: LabelSet
    taints: _containers.RepeatedCompositeFieldContainer[Taint]
    daemon_version: str
    config: _struct_pb2.Struct
    secrets: _containers.RepeatedScalarFieldContainer[str]
    tunnel_ports: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, labels: _Optional[_Union[LabelSet, _Mapping]] = ..., taints: _Optional[_Iterable[_Union[Taint, _Mapping]]] = ..., daemon_version: _Optional[str] = ..., config: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., secrets: _Optional[_Iterable[str]] = ..., tunnel_ports: _Optional[_Iterable[int]] = ...) -> None: ...

class LabelSet(_message.Message):
    __slots__ = ("values",)
    class ValuesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    VALUES_FIELD_NUMBER: _ClassVar[int]
    values: _containers.ScalarMap[str, str]
    def __init__(self, values: _Optional[_Mapping[str, str]] = ...) -> None: ...

class Condition(_message.Message):
    __slots__ = ("type", "status", "reason", "message", "last_transition_time", "observed_generation")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    LAST_TRANSITION_TIME_FIELD_NUMBER: _ClassVar[int]
    OBSERVED_GENERATION_FIELD_NUMBER: _ClassVar[int]
    type: str
    status: str
    reason: str
    message: str
    last_transition_time: _timestamp_pb2.Timestamp
    observed_generation: int
    def __init__(self, type: _Optional[str] = ..., status: _Optional[str] = ..., reason: _Optional[str] = ..., message: _Optional[str] = ..., last_transition_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., observed_generation: _Optional[int] = ...) -> None: ...

class InventoryRecord(_message.Message):
    __slots__ = ("inventory", "record_time")
    INVENTORY_FIELD_NUMBER: _ClassVar[int]
    RECORD_TIME_FIELD_NUMBER: _ClassVar[int]
    inventory: Inventory
    record_time: _timestamp_pb2.Timestamp
    def __init__(self, inventory: _Optional[_Union[Inventory, _Mapping]] = ..., record_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class Inventory(_message.Message):
    __slots__ = ("hostname", "os", "kernel", "cpu_model", "cpus", "memory_bytes", "gpus", "disks", "nics", "gpu_driver", "gpu_probe_error")
    HOSTNAME_FIELD_NUMBER: _ClassVar[int]
    OS_FIELD_NUMBER: _ClassVar[int]
    KERNEL_FIELD_NUMBER: _ClassVar[int]
    CPU_MODEL_FIELD_NUMBER: _ClassVar[int]
    CPUS_FIELD_NUMBER: _ClassVar[int]
    MEMORY_BYTES_FIELD_NUMBER: _ClassVar[int]
    GPUS_FIELD_NUMBER: _ClassVar[int]
    DISKS_FIELD_NUMBER: _ClassVar[int]
    NICS_FIELD_NUMBER: _ClassVar[int]
    GPU_DRIVER_FIELD_NUMBER: _ClassVar[int]
    GPU_PROBE_ERROR_FIELD_NUMBER: _ClassVar[int]
    hostname: str
    os: str
    kernel: str
    cpu_model: str
    cpus: int
    memory_bytes: int
    gpus: _containers.RepeatedCompositeFieldContainer[Gpu]
    disks: _containers.RepeatedCompositeFieldContainer[Disk]
    nics: _containers.RepeatedCompositeFieldContainer[Nic]
    gpu_driver: GpuDriver
    gpu_probe_error: str
    def __init__(self, hostname: _Optional[str] = ..., os: _Optional[str] = ..., kernel: _Optional[str] = ..., cpu_model: _Optional[str] = ..., cpus: _Optional[int] = ..., memory_bytes: _Optional[int] = ..., gpus: _Optional[_Iterable[_Union[Gpu, _Mapping]]] = ..., disks: _Optional[_Iterable[_Union[Disk, _Mapping]]] = ..., nics: _Optional[_Iterable[_Union[Nic, _Mapping]]] = ..., gpu_driver: _Optional[_Union[GpuDriver, _Mapping]] = ..., gpu_probe_error: _Optional[str] = ...) -> None: ...

class Gpu(_message.Message):
    __slots__ = ("index", "model", "memory_bytes", "uuid", "serial", "pci_bus_id", "numa_node", "vbios_version", "mig_mode", "power_limit_watts", "persistence_mode", "minor_number", "health", "health_reasons", "links", "near_nics")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    MEMORY_BYTES_FIELD_NUMBER: _ClassVar[int]
    UUID_FIELD_NUMBER: _ClassVar[int]
    SERIAL_FIELD_NUMBER: _ClassVar[int]
    PCI_BUS_ID_FIELD_NUMBER: _ClassVar[int]
    NUMA_NODE_FIELD_NUMBER: _ClassVar[int]
    VBIOS_VERSION_FIELD_NUMBER: _ClassVar[int]
    MIG_MODE_FIELD_NUMBER: _ClassVar[int]
    POWER_LIMIT_WATTS_FIELD_NUMBER: _ClassVar[int]
    PERSISTENCE_MODE_FIELD_NUMBER: _ClassVar[int]
    MINOR_NUMBER_FIELD_NUMBER: _ClassVar[int]
    HEALTH_FIELD_NUMBER: _ClassVar[int]
    HEALTH_REASONS_FIELD_NUMBER: _ClassVar[int]
    LINKS_FIELD_NUMBER: _ClassVar[int]
    NEAR_NICS_FIELD_NUMBER: _ClassVar[int]
    index: int
    model: str
    memory_bytes: int
    uuid: str
    serial: str
    pci_bus_id: str
    numa_node: int
    vbios_version: str
    mig_mode: str
    power_limit_watts: float
    persistence_mode: bool
    minor_number: int
    health: _gpus_pb2.HealthState
    health_reasons: _containers.RepeatedCompositeFieldContainer[_gpus_pb2.HealthReason]
    links: _containers.RepeatedCompositeFieldContainer[GpuLink]
    near_nics: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, index: _Optional[int] = ..., model: _Optional[str] = ..., memory_bytes: _Optional[int] = ..., uuid: _Optional[str] = ..., serial: _Optional[str] = ..., pci_bus_id: _Optional[str] = ..., numa_node: _Optional[int] = ..., vbios_version: _Optional[str] = ..., mig_mode: _Optional[str] = ..., power_limit_watts: _Optional[float] = ..., persistence_mode: _Optional[bool] = ..., minor_number: _Optional[int] = ..., health: _Optional[_Union[_gpus_pb2.HealthState, str]] = ..., health_reasons: _Optional[_Iterable[_Union[_gpus_pb2.HealthReason, _Mapping]]] = ..., links: _Optional[_Iterable[_Union[GpuLink, _Mapping]]] = ..., near_nics: _Optional[_Iterable[str]] = ...) -> None: ...

class GpuLink(_message.Message):
    __slots__ = ("peer_index", "peer_uuid", "path", "nvlinks")
    PEER_INDEX_FIELD_NUMBER: _ClassVar[int]
    PEER_UUID_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    NVLINKS_FIELD_NUMBER: _ClassVar[int]
    peer_index: int
    peer_uuid: str
    path: str
    nvlinks: int
    def __init__(self, peer_index: _Optional[int] = ..., peer_uuid: _Optional[str] = ..., path: _Optional[str] = ..., nvlinks: _Optional[int] = ...) -> None: ...

class GpuDriver(_message.Message):
    __slots__ = ("driver_version", "cuda_version", "fabric_manager_state", "fabric_manager_status")
    DRIVER_VERSION_FIELD_NUMBER: _ClassVar[int]
    CUDA_VERSION_FIELD_NUMBER: _ClassVar[int]
    FABRIC_MANAGER_STATE_FIELD_NUMBER: _ClassVar[int]
    FABRIC_MANAGER_STATUS_FIELD_NUMBER: _ClassVar[int]
    driver_version: str
    cuda_version: str
    fabric_manager_state: str
    fabric_manager_status: str
    def __init__(self, driver_version: _Optional[str] = ..., cuda_version: _Optional[str] = ..., fabric_manager_state: _Optional[str] = ..., fabric_manager_status: _Optional[str] = ...) -> None: ...

class Disk(_message.Message):
    __slots__ = ("name", "size_bytes", "model")
    NAME_FIELD_NUMBER: _ClassVar[int]
    SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    name: str
    size_bytes: int
    model: str
    def __init__(self, name: _Optional[str] = ..., size_bytes: _Optional[int] = ..., model: _Optional[str] = ...) -> None: ...

class Nic(_message.Message):
    __slots__ = ("name", "mac", "speed_mbps", "addresses")
    NAME_FIELD_NUMBER: _ClassVar[int]
    MAC_FIELD_NUMBER: _ClassVar[int]
    SPEED_MBPS_FIELD_NUMBER: _ClassVar[int]
    ADDRESSES_FIELD_NUMBER: _ClassVar[int]
    name: str
    mac: str
    speed_mbps: int
    addresses: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, name: _Optional[str] = ..., mac: _Optional[str] = ..., speed_mbps: _Optional[int] = ..., addresses: _Optional[_Iterable[str]] = ...) -> None: ...

class ListRequest(_message.Message):
    __slots__ = ("label_selector", "page_size", "page_token", "states", "online", "gpu_model", "pool", "hostname_prefix", "include_inventory")
    class LabelSelectorEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    LABEL_SELECTOR_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    STATES_FIELD_NUMBER: _ClassVar[int]
    ONLINE_FIELD_NUMBER: _ClassVar[int]
    GPU_MODEL_FIELD_NUMBER: _ClassVar[int]
    POOL_FIELD_NUMBER: _ClassVar[int]
    HOSTNAME_PREFIX_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_INVENTORY_FIELD_NUMBER: _ClassVar[int]
    label_selector: _containers.ScalarMap[str, str]
    page_size: int
    page_token: str
    states: _containers.RepeatedScalarFieldContainer[str]
    online: bool
    gpu_model: str
    pool: str
    hostname_prefix: str
    include_inventory: bool
    def __init__(self, label_selector: _Optional[_Mapping[str, str]] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., states: _Optional[_Iterable[str]] = ..., online: _Optional[bool] = ..., gpu_model: _Optional[str] = ..., pool: _Optional[str] = ..., hostname_prefix: _Optional[str] = ..., include_inventory: _Optional[bool] = ...) -> None: ...

class ListResponse(_message.Message):
    __slots__ = ("nodes", "next_page_token")
    NODES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    nodes: _containers.RepeatedCompositeFieldContainer[Node]
    next_page_token: str
    def __init__(self, nodes: _Optional[_Iterable[_Union[Node, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class SummaryRequest(_message.Message):
    __slots__ = ("label_selector", "states", "online", "gpu_model", "pool", "hostname_prefix")
    class LabelSelectorEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    LABEL_SELECTOR_FIELD_NUMBER: _ClassVar[int]
    STATES_FIELD_NUMBER: _ClassVar[int]
    ONLINE_FIELD_NUMBER: _ClassVar[int]
    GPU_MODEL_FIELD_NUMBER: _ClassVar[int]
    POOL_FIELD_NUMBER: _ClassVar[int]
    HOSTNAME_PREFIX_FIELD_NUMBER: _ClassVar[int]
    label_selector: _containers.ScalarMap[str, str]
    states: _containers.RepeatedScalarFieldContainer[str]
    online: bool
    gpu_model: str
    pool: str
    hostname_prefix: str
    def __init__(self, label_selector: _Optional[_Mapping[str, str]] = ..., states: _Optional[_Iterable[str]] = ..., online: _Optional[bool] = ..., gpu_model: _Optional[str] = ..., pool: _Optional[str] = ..., hostname_prefix: _Optional[str] = ...) -> None: ...

class SummaryResponse(_message.Message):
    __slots__ = ("total", "states", "online", "offline", "gpus", "gpu_models")
    class StatesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    STATES_FIELD_NUMBER: _ClassVar[int]
    ONLINE_FIELD_NUMBER: _ClassVar[int]
    OFFLINE_FIELD_NUMBER: _ClassVar[int]
    GPUS_FIELD_NUMBER: _ClassVar[int]
    GPU_MODELS_FIELD_NUMBER: _ClassVar[int]
    total: int
    states: _containers.ScalarMap[str, int]
    online: int
    offline: int
    gpus: int
    gpu_models: _containers.RepeatedCompositeFieldContainer[GpuModelCount]
    def __init__(self, total: _Optional[int] = ..., states: _Optional[_Mapping[str, int]] = ..., online: _Optional[int] = ..., offline: _Optional[int] = ..., gpus: _Optional[int] = ..., gpu_models: _Optional[_Iterable[_Union[GpuModelCount, _Mapping]]] = ...) -> None: ...

class GpuModelCount(_message.Message):
    __slots__ = ("model", "gpus", "nodes")
    MODEL_FIELD_NUMBER: _ClassVar[int]
    GPUS_FIELD_NUMBER: _ClassVar[int]
    NODES_FIELD_NUMBER: _ClassVar[int]
    model: str
    gpus: int
    nodes: int
    def __init__(self, model: _Optional[str] = ..., gpus: _Optional[int] = ..., nodes: _Optional[int] = ...) -> None: ...

class GetRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class GetResponse(_message.Message):
    __slots__ = ("node",)
    NODE_FIELD_NUMBER: _ClassVar[int]
    node: Node
    def __init__(self, node: _Optional[_Union[Node, _Mapping]] = ...) -> None: ...

class RevokeRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class RevokeResponse(_message.Message):
    __slots__ = ("node",)
    NODE_FIELD_NUMBER: _ClassVar[int]
    node: Node
    def __init__(self, node: _Optional[_Union[Node, _Mapping]] = ...) -> None: ...

class CordonRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class CordonResponse(_message.Message):
    __slots__ = ("node",)
    NODE_FIELD_NUMBER: _ClassVar[int]
    node: Node
    def __init__(self, node: _Optional[_Union[Node, _Mapping]] = ...) -> None: ...

class UncordonRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class UncordonResponse(_message.Message):
    __slots__ = ("node",)
    NODE_FIELD_NUMBER: _ClassVar[int]
    node: Node
    def __init__(self, node: _Optional[_Union[Node, _Mapping]] = ...) -> None: ...

class DrainRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class DrainResponse(_message.Message):
    __slots__ = ("node",)
    NODE_FIELD_NUMBER: _ClassVar[int]
    node: Node
    def __init__(self, node: _Optional[_Union[Node, _Mapping]] = ...) -> None: ...

class RetireRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class RetireResponse(_message.Message):
    __slots__ = ("node",)
    NODE_FIELD_NUMBER: _ClassVar[int]
    node: Node
    def __init__(self, node: _Optional[_Union[Node, _Mapping]] = ...) -> None: ...

class LabelRequest(_message.Message):
    __slots__ = ("id", "set", "remove")
    class SetEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ID_FIELD_NUMBER: _ClassVar[int]
    SET_FIELD_NUMBER: _ClassVar[int]
    REMOVE_FIELD_NUMBER: _ClassVar[int]
    id: str
    set: _containers.ScalarMap[str, str]
    remove: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, id: _Optional[str] = ..., set: _Optional[_Mapping[str, str]] = ..., remove: _Optional[_Iterable[str]] = ...) -> None: ...

class LabelResponse(_message.Message):
    __slots__ = ("node",)
    NODE_FIELD_NUMBER: _ClassVar[int]
    node: Node
    def __init__(self, node: _Optional[_Union[Node, _Mapping]] = ...) -> None: ...

class UpdateSpecRequest(_message.Message):
    __slots__ = ("id", "spec", "expected_generation")
    ID_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_GENERATION_FIELD_NUMBER: _ClassVar[int]
    id: str
    spec: NodeSpec
    expected_generation: int
    def __init__(self, id: _Optional[str] = ..., spec: _Optional[_Union[NodeSpec, _Mapping]] = ..., expected_generation: _Optional[int] = ...) -> None: ...

class UpdateSpecResponse(_message.Message):
    __slots__ = ("node",)
    NODE_FIELD_NUMBER: _ClassVar[int]
    node: Node
    def __init__(self, node: _Optional[_Union[Node, _Mapping]] = ...) -> None: ...

class InventoryHistoryRequest(_message.Message):
    __slots__ = ("id", "page_size", "page_token")
    ID_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    id: str
    page_size: int
    page_token: str
    def __init__(self, id: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class InventoryHistoryResponse(_message.Message):
    __slots__ = ("records", "next_page_token")
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    records: _containers.RepeatedCompositeFieldContainer[InventoryRecord]
    next_page_token: str
    def __init__(self, records: _Optional[_Iterable[_Union[InventoryRecord, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...
