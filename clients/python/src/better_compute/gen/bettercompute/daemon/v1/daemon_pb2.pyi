import datetime

from bettercompute.daemon.v1 import commands_pb2 as _commands_pb2
from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class JoinRequest(_message.Message):
    __slots__ = ("token", "csr", "hostname")
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    CSR_FIELD_NUMBER: _ClassVar[int]
    HOSTNAME_FIELD_NUMBER: _ClassVar[int]
    token: str
    csr: bytes
    hostname: str
    def __init__(self, token: _Optional[str] = ..., csr: _Optional[bytes] = ..., hostname: _Optional[str] = ...) -> None: ...

class JoinResponse(_message.Message):
    __slots__ = ("node_id", "certificate_chain", "root_ca", "trust_domain", "not_after")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    CERTIFICATE_CHAIN_FIELD_NUMBER: _ClassVar[int]
    ROOT_CA_FIELD_NUMBER: _ClassVar[int]
    TRUST_DOMAIN_FIELD_NUMBER: _ClassVar[int]
    NOT_AFTER_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    certificate_chain: bytes
    root_ca: bytes
    trust_domain: str
    not_after: _timestamp_pb2.Timestamp
    def __init__(self, node_id: _Optional[str] = ..., certificate_chain: _Optional[bytes] = ..., root_ca: _Optional[bytes] = ..., trust_domain: _Optional[str] = ..., not_after: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class RenewRequest(_message.Message):
    __slots__ = ("csr",)
    CSR_FIELD_NUMBER: _ClassVar[int]
    csr: bytes
    def __init__(self, csr: _Optional[bytes] = ...) -> None: ...

class RenewResponse(_message.Message):
    __slots__ = ("certificate_chain", "not_after")
    CERTIFICATE_CHAIN_FIELD_NUMBER: _ClassVar[int]
    NOT_AFTER_FIELD_NUMBER: _ClassVar[int]
    certificate_chain: bytes
    not_after: _timestamp_pb2.Timestamp
    def __init__(self, certificate_chain: _Optional[bytes] = ..., not_after: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class SecretRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class SecretResponse(_message.Message):
    __slots__ = ("value",)
    VALUE_FIELD_NUMBER: _ClassVar[int]
    value: bytes
    def __init__(self, value: _Optional[bytes] = ...) -> None: ...

class SessionRequest(_message.Message):
    __slots__ = ("hello", "heartbeat", "ack", "result", "event", "gpu_health", "gpu_usage")
    HELLO_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_FIELD_NUMBER: _ClassVar[int]
    ACK_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    EVENT_FIELD_NUMBER: _ClassVar[int]
    GPU_HEALTH_FIELD_NUMBER: _ClassVar[int]
    GPU_USAGE_FIELD_NUMBER: _ClassVar[int]
    hello: Hello
    heartbeat: Heartbeat
    ack: CommandAck
    result: CommandResult
    event: Event
    gpu_health: GpuHealth
    gpu_usage: GpuUsage
    def __init__(self, hello: _Optional[_Union[Hello, _Mapping]] = ..., heartbeat: _Optional[_Union[Heartbeat, _Mapping]] = ..., ack: _Optional[_Union[CommandAck, _Mapping]] = ..., result: _Optional[_Union[CommandResult, _Mapping]] = ..., event: _Optional[_Union[Event, _Mapping]] = ..., gpu_health: _Optional[_Union[GpuHealth, _Mapping]] = ..., gpu_usage: _Optional[_Union[GpuUsage, _Mapping]] = ...) -> None: ...

class SessionResponse(_message.Message):
    __slots__ = ("welcome", "command", "goodbye", "tunnel_open")
    WELCOME_FIELD_NUMBER: _ClassVar[int]
    COMMAND_FIELD_NUMBER: _ClassVar[int]
    GOODBYE_FIELD_NUMBER: _ClassVar[int]
    TUNNEL_OPEN_FIELD_NUMBER: _ClassVar[int]
    welcome: Welcome
    command: Command
    goodbye: Goodbye
    tunnel_open: TunnelOpen
    def __init__(self, welcome: _Optional[_Union[Welcome, _Mapping]] = ..., command: _Optional[_Union[Command, _Mapping]] = ..., goodbye: _Optional[_Union[Goodbye, _Mapping]] = ..., tunnel_open: _Optional[_Union[TunnelOpen, _Mapping]] = ...) -> None: ...

class TunnelOpen(_message.Message):
    __slots__ = ("tunnel_id", "port")
    TUNNEL_ID_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    tunnel_id: str
    port: int
    def __init__(self, tunnel_id: _Optional[str] = ..., port: _Optional[int] = ...) -> None: ...

class Hello(_message.Message):
    __slots__ = ("daemon_version", "inventory", "time")
    DAEMON_VERSION_FIELD_NUMBER: _ClassVar[int]
    INVENTORY_FIELD_NUMBER: _ClassVar[int]
    TIME_FIELD_NUMBER: _ClassVar[int]
    daemon_version: str
    inventory: Inventory
    time: _timestamp_pb2.Timestamp
    def __init__(self, daemon_version: _Optional[str] = ..., inventory: _Optional[_Union[Inventory, _Mapping]] = ..., time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

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
    __slots__ = ("index", "model", "memory_bytes", "uuid", "serial", "pci_bus_id", "numa_node", "vbios_version", "mig_mode", "power_limit_watts", "persistence_mode", "minor_number", "links", "near_nics")
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
    links: _containers.RepeatedCompositeFieldContainer[GpuLink]
    near_nics: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, index: _Optional[int] = ..., model: _Optional[str] = ..., memory_bytes: _Optional[int] = ..., uuid: _Optional[str] = ..., serial: _Optional[str] = ..., pci_bus_id: _Optional[str] = ..., numa_node: _Optional[int] = ..., vbios_version: _Optional[str] = ..., mig_mode: _Optional[str] = ..., power_limit_watts: _Optional[float] = ..., persistence_mode: _Optional[bool] = ..., minor_number: _Optional[int] = ..., links: _Optional[_Iterable[_Union[GpuLink, _Mapping]]] = ..., near_nics: _Optional[_Iterable[str]] = ...) -> None: ...

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

class Heartbeat(_message.Message):
    __slots__ = ("time",)
    TIME_FIELD_NUMBER: _ClassVar[int]
    time: _timestamp_pb2.Timestamp
    def __init__(self, time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class CommandAck(_message.Message):
    __slots__ = ("command_id",)
    COMMAND_ID_FIELD_NUMBER: _ClassVar[int]
    command_id: str
    def __init__(self, command_id: _Optional[str] = ...) -> None: ...

class CommandResult(_message.Message):
    __slots__ = ("command_id", "success", "result", "error")
    COMMAND_ID_FIELD_NUMBER: _ClassVar[int]
    SUCCESS_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    command_id: str
    success: bool
    result: _struct_pb2.Struct
    error: str
    def __init__(self, command_id: _Optional[str] = ..., success: _Optional[bool] = ..., result: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., error: _Optional[str] = ...) -> None: ...

class Event(_message.Message):
    __slots__ = ("type", "data", "time")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    TIME_FIELD_NUMBER: _ClassVar[int]
    type: str
    data: _struct_pb2.Struct
    time: _timestamp_pb2.Timestamp
    def __init__(self, type: _Optional[str] = ..., data: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class GpuHealth(_message.Message):
    __slots__ = ("signals", "probe_error", "time")
    SIGNALS_FIELD_NUMBER: _ClassVar[int]
    PROBE_ERROR_FIELD_NUMBER: _ClassVar[int]
    TIME_FIELD_NUMBER: _ClassVar[int]
    signals: _containers.RepeatedCompositeFieldContainer[GpuSignal]
    probe_error: str
    time: _timestamp_pb2.Timestamp
    def __init__(self, signals: _Optional[_Iterable[_Union[GpuSignal, _Mapping]]] = ..., probe_error: _Optional[str] = ..., time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class GpuSignal(_message.Message):
    __slots__ = ("gpu_uuid", "pci_bus_id", "check", "code", "count", "first_seen", "last_seen", "detail")
    GPU_UUID_FIELD_NUMBER: _ClassVar[int]
    PCI_BUS_ID_FIELD_NUMBER: _ClassVar[int]
    CHECK_FIELD_NUMBER: _ClassVar[int]
    CODE_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    FIRST_SEEN_FIELD_NUMBER: _ClassVar[int]
    LAST_SEEN_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    gpu_uuid: str
    pci_bus_id: str
    check: str
    code: int
    count: int
    first_seen: _timestamp_pb2.Timestamp
    last_seen: _timestamp_pb2.Timestamp
    detail: str
    def __init__(self, gpu_uuid: _Optional[str] = ..., pci_bus_id: _Optional[str] = ..., check: _Optional[str] = ..., code: _Optional[int] = ..., count: _Optional[int] = ..., first_seen: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., last_seen: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., detail: _Optional[str] = ...) -> None: ...

class GpuUsage(_message.Message):
    __slots__ = ("minute", "interval", "gpus")
    MINUTE_FIELD_NUMBER: _ClassVar[int]
    INTERVAL_FIELD_NUMBER: _ClassVar[int]
    GPUS_FIELD_NUMBER: _ClassVar[int]
    minute: _timestamp_pb2.Timestamp
    interval: _duration_pb2.Duration
    gpus: _containers.RepeatedCompositeFieldContainer[GpuUsageSummary]
    def __init__(self, minute: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., interval: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., gpus: _Optional[_Iterable[_Union[GpuUsageSummary, _Mapping]]] = ...) -> None: ...

class GpuUsageSummary(_message.Message):
    __slots__ = ("uuid", "index", "samples", "util_min", "util_mean", "util_max", "sm_active", "memory_used_max_bytes", "memory_total_bytes", "power_mean_watts", "power_max_watts", "temperature_max_c", "active_seconds")
    UUID_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    SAMPLES_FIELD_NUMBER: _ClassVar[int]
    UTIL_MIN_FIELD_NUMBER: _ClassVar[int]
    UTIL_MEAN_FIELD_NUMBER: _ClassVar[int]
    UTIL_MAX_FIELD_NUMBER: _ClassVar[int]
    SM_ACTIVE_FIELD_NUMBER: _ClassVar[int]
    MEMORY_USED_MAX_BYTES_FIELD_NUMBER: _ClassVar[int]
    MEMORY_TOTAL_BYTES_FIELD_NUMBER: _ClassVar[int]
    POWER_MEAN_WATTS_FIELD_NUMBER: _ClassVar[int]
    POWER_MAX_WATTS_FIELD_NUMBER: _ClassVar[int]
    TEMPERATURE_MAX_C_FIELD_NUMBER: _ClassVar[int]
    ACTIVE_SECONDS_FIELD_NUMBER: _ClassVar[int]
    uuid: str
    index: int
    samples: int
    util_min: float
    util_mean: float
    util_max: float
    sm_active: bool
    memory_used_max_bytes: int
    memory_total_bytes: int
    power_mean_watts: float
    power_max_watts: float
    temperature_max_c: float
    active_seconds: int
    def __init__(self, uuid: _Optional[str] = ..., index: _Optional[int] = ..., samples: _Optional[int] = ..., util_min: _Optional[float] = ..., util_mean: _Optional[float] = ..., util_max: _Optional[float] = ..., sm_active: _Optional[bool] = ..., memory_used_max_bytes: _Optional[int] = ..., memory_total_bytes: _Optional[int] = ..., power_mean_watts: _Optional[float] = ..., power_max_watts: _Optional[float] = ..., temperature_max_c: _Optional[float] = ..., active_seconds: _Optional[int] = ...) -> None: ...

class Welcome(_message.Message):
    __slots__ = ("node_id", "heartbeat_interval_seconds", "server_time", "max_result_bytes", "max_event_bytes")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_INTERVAL_SECONDS_FIELD_NUMBER: _ClassVar[int]
    SERVER_TIME_FIELD_NUMBER: _ClassVar[int]
    MAX_RESULT_BYTES_FIELD_NUMBER: _ClassVar[int]
    MAX_EVENT_BYTES_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    heartbeat_interval_seconds: int
    server_time: _timestamp_pb2.Timestamp
    max_result_bytes: int
    max_event_bytes: int
    def __init__(self, node_id: _Optional[str] = ..., heartbeat_interval_seconds: _Optional[int] = ..., server_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., max_result_bytes: _Optional[int] = ..., max_event_bytes: _Optional[int] = ...) -> None: ...

class Command(_message.Message):
    __slots__ = ("id", "idempotency_key", "deadline", "exec", "drain", "undrain", "upgrade", "configure", "reboot", "collect_inventory", "echo", "gpu_reset", "diagnose")
    ID_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_FIELD_NUMBER: _ClassVar[int]
    EXEC_FIELD_NUMBER: _ClassVar[int]
    DRAIN_FIELD_NUMBER: _ClassVar[int]
    UNDRAIN_FIELD_NUMBER: _ClassVar[int]
    UPGRADE_FIELD_NUMBER: _ClassVar[int]
    CONFIGURE_FIELD_NUMBER: _ClassVar[int]
    REBOOT_FIELD_NUMBER: _ClassVar[int]
    COLLECT_INVENTORY_FIELD_NUMBER: _ClassVar[int]
    ECHO_FIELD_NUMBER: _ClassVar[int]
    GPU_RESET_FIELD_NUMBER: _ClassVar[int]
    DIAGNOSE_FIELD_NUMBER: _ClassVar[int]
    id: str
    idempotency_key: str
    deadline: _timestamp_pb2.Timestamp
    exec: _commands_pb2.ExecPayload
    drain: _commands_pb2.DrainPayload
    undrain: _commands_pb2.UndrainPayload
    upgrade: _commands_pb2.UpgradePayload
    configure: _commands_pb2.ConfigurePayload
    reboot: _commands_pb2.RebootPayload
    collect_inventory: _commands_pb2.CollectInventoryPayload
    echo: _commands_pb2.EchoPayload
    gpu_reset: _commands_pb2.GpuResetPayload
    diagnose: _commands_pb2.DiagnosePayload
    def __init__(self, id: _Optional[str] = ..., idempotency_key: _Optional[str] = ..., deadline: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., exec: _Optional[_Union[_commands_pb2.ExecPayload, _Mapping]] = ..., drain: _Optional[_Union[_commands_pb2.DrainPayload, _Mapping]] = ..., undrain: _Optional[_Union[_commands_pb2.UndrainPayload, _Mapping]] = ..., upgrade: _Optional[_Union[_commands_pb2.UpgradePayload, _Mapping]] = ..., configure: _Optional[_Union[_commands_pb2.ConfigurePayload, _Mapping]] = ..., reboot: _Optional[_Union[_commands_pb2.RebootPayload, _Mapping]] = ..., collect_inventory: _Optional[_Union[_commands_pb2.CollectInventoryPayload, _Mapping]] = ..., echo: _Optional[_Union[_commands_pb2.EchoPayload, _Mapping]] = ..., gpu_reset: _Optional[_Union[_commands_pb2.GpuResetPayload, _Mapping]] = ..., diagnose: _Optional[_Union[_commands_pb2.DiagnosePayload, _Mapping]] = ...) -> None: ...

class Goodbye(_message.Message):
    __slots__ = ("reason",)
    REASON_FIELD_NUMBER: _ClassVar[int]
    reason: str
    def __init__(self, reason: _Optional[str] = ...) -> None: ...
