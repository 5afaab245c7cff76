import datetime

from bettercompute.api.v1 import options_pb2 as _options_pb2
from bettercompute.daemon.v1 import commands_pb2 as _commands_pb2
from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class CommandState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    COMMAND_STATE_UNSPECIFIED: _ClassVar[CommandState]
    COMMAND_STATE_PENDING: _ClassVar[CommandState]
    COMMAND_STATE_SENT: _ClassVar[CommandState]
    COMMAND_STATE_ACKED: _ClassVar[CommandState]
    COMMAND_STATE_SUCCEEDED: _ClassVar[CommandState]
    COMMAND_STATE_FAILED: _ClassVar[CommandState]
    COMMAND_STATE_EXPIRED: _ClassVar[CommandState]
    COMMAND_STATE_CANCELLED: _ClassVar[CommandState]
COMMAND_STATE_UNSPECIFIED: CommandState
COMMAND_STATE_PENDING: CommandState
COMMAND_STATE_SENT: CommandState
COMMAND_STATE_ACKED: CommandState
COMMAND_STATE_SUCCEEDED: CommandState
COMMAND_STATE_FAILED: CommandState
COMMAND_STATE_EXPIRED: CommandState
COMMAND_STATE_CANCELLED: CommandState

class FanOutSelector(_message.Message):
    __slots__ = ("labels", "pool", "node_ids", "gpu_model", "states", "online", "limit")
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    LABELS_FIELD_NUMBER: _ClassVar[int]
    POOL_FIELD_NUMBER: _ClassVar[int]
    NODE_IDS_FIELD_NUMBER: _ClassVar[int]
    GPU_MODEL_FIELD_NUMBER: _ClassVar[int]
    STATES_FIELD_NUMBER: _ClassVar[int]
    ONLINE_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    labels: _containers.ScalarMap[str, str]
    pool: str
    node_ids: _containers.RepeatedScalarFieldContainer[str]
    gpu_model: str
    states: _containers.RepeatedScalarFieldContainer[str]
    online: bool
    limit: int
    def __init__(self, labels: _Optional[_Mapping[str, str]] = ..., pool: _Optional[str] = ..., node_ids: _Optional[_Iterable[str]] = ..., gpu_model: _Optional[str] = ..., states: _Optional[_Iterable[str]] = ..., online: _Optional[bool] = ..., limit: _Optional[int] = ...) -> None: ...

class FanOutRequest(_message.Message):
    __slots__ = ("selector", "exec", "drain", "undrain", "upgrade", "configure", "reboot", "collect_inventory", "echo", "gpu_reset", "diagnose", "idempotency_key", "timeout", "max_in_flight")
    SELECTOR_FIELD_NUMBER: _ClassVar[int]
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
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    MAX_IN_FLIGHT_FIELD_NUMBER: _ClassVar[int]
    selector: FanOutSelector
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
    idempotency_key: str
    timeout: _duration_pb2.Duration
    max_in_flight: int
    def __init__(self, selector: _Optional[_Union[FanOutSelector, _Mapping]] = ..., exec: _Optional[_Union[_commands_pb2.ExecPayload, _Mapping]] = ..., drain: _Optional[_Union[_commands_pb2.DrainPayload, _Mapping]] = ..., undrain: _Optional[_Union[_commands_pb2.UndrainPayload, _Mapping]] = ..., upgrade: _Optional[_Union[_commands_pb2.UpgradePayload, _Mapping]] = ..., configure: _Optional[_Union[_commands_pb2.ConfigurePayload, _Mapping]] = ..., reboot: _Optional[_Union[_commands_pb2.RebootPayload, _Mapping]] = ..., collect_inventory: _Optional[_Union[_commands_pb2.CollectInventoryPayload, _Mapping]] = ..., echo: _Optional[_Union[_commands_pb2.EchoPayload, _Mapping]] = ..., gpu_reset: _Optional[_Union[_commands_pb2.GpuResetPayload, _Mapping]] = ..., diagnose: _Optional[_Union[_commands_pb2.DiagnosePayload, _Mapping]] = ..., idempotency_key: _Optional[str] = ..., timeout: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., max_in_flight: _Optional[int] = ...) -> None: ...

class FanOut(_message.Message):
    __slots__ = ("id", "type", "selector", "total", "max_in_flight", "idempotency_key", "deadline_time", "create_time")
    ID_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    SELECTOR_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    MAX_IN_FLIGHT_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_TIME_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    id: str
    type: str
    selector: FanOutSelector
    total: int
    max_in_flight: int
    idempotency_key: str
    deadline_time: _timestamp_pb2.Timestamp
    create_time: _timestamp_pb2.Timestamp
    def __init__(self, id: _Optional[str] = ..., type: _Optional[str] = ..., selector: _Optional[_Union[FanOutSelector, _Mapping]] = ..., total: _Optional[int] = ..., max_in_flight: _Optional[int] = ..., idempotency_key: _Optional[str] = ..., deadline_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class FanOutResponse(_message.Message):
    __slots__ = ("fan_out",)
    FAN_OUT_FIELD_NUMBER: _ClassVar[int]
    fan_out: FanOut
    def __init__(self, fan_out: _Optional[_Union[FanOut, _Mapping]] = ...) -> None: ...

class GetFanOutRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class FanOutCounts(_message.Message):
    __slots__ = ("pending", "sent", "acked", "succeeded", "failed", "expired", "cancelled")
    PENDING_FIELD_NUMBER: _ClassVar[int]
    SENT_FIELD_NUMBER: _ClassVar[int]
    ACKED_FIELD_NUMBER: _ClassVar[int]
    SUCCEEDED_FIELD_NUMBER: _ClassVar[int]
    FAILED_FIELD_NUMBER: _ClassVar[int]
    EXPIRED_FIELD_NUMBER: _ClassVar[int]
    CANCELLED_FIELD_NUMBER: _ClassVar[int]
    pending: int
    sent: int
    acked: int
    succeeded: int
    failed: int
    expired: int
    cancelled: int
    def __init__(self, pending: _Optional[int] = ..., sent: _Optional[int] = ..., acked: _Optional[int] = ..., succeeded: _Optional[int] = ..., failed: _Optional[int] = ..., expired: _Optional[int] = ..., cancelled: _Optional[int] = ...) -> None: ...

class GetFanOutResponse(_message.Message):
    __slots__ = ("fan_out", "counts", "done", "failures")
    FAN_OUT_FIELD_NUMBER: _ClassVar[int]
    COUNTS_FIELD_NUMBER: _ClassVar[int]
    DONE_FIELD_NUMBER: _ClassVar[int]
    FAILURES_FIELD_NUMBER: _ClassVar[int]
    fan_out: FanOut
    counts: FanOutCounts
    done: bool
    failures: _containers.RepeatedCompositeFieldContainer[Command]
    def __init__(self, fan_out: _Optional[_Union[FanOut, _Mapping]] = ..., counts: _Optional[_Union[FanOutCounts, _Mapping]] = ..., done: _Optional[bool] = ..., failures: _Optional[_Iterable[_Union[Command, _Mapping]]] = ...) -> None: ...

class Command(_message.Message):
    __slots__ = ("id", "tenant_id", "node_id", "type", "exec", "drain", "undrain", "upgrade", "configure", "reboot", "collect_inventory", "echo", "gpu_reset", "diagnose", "state", "idempotency_key", "deadline_time", "attempts", "result", "error", "create_time", "send_time", "ack_time", "finish_time", "update_time")
    ID_FIELD_NUMBER: _ClassVar[int]
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
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
    STATE_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_TIME_FIELD_NUMBER: _ClassVar[int]
    ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    SEND_TIME_FIELD_NUMBER: _ClassVar[int]
    ACK_TIME_FIELD_NUMBER: _ClassVar[int]
    FINISH_TIME_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TIME_FIELD_NUMBER: _ClassVar[int]
    id: str
    tenant_id: str
    node_id: str
    type: str
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
    state: CommandState
    idempotency_key: str
    deadline_time: _timestamp_pb2.Timestamp
    attempts: int
    result: _struct_pb2.Struct
    error: str
    create_time: _timestamp_pb2.Timestamp
    send_time: _timestamp_pb2.Timestamp
    ack_time: _timestamp_pb2.Timestamp
    finish_time: _timestamp_pb2.Timestamp
    update_time: _timestamp_pb2.Timestamp
    def __init__(self, id: _Optional[str] = ..., tenant_id: _Optional[str] = ..., node_id: _Optional[str] = ..., type: _Optional[str] = ..., exec: _Optional[_Union[_commands_pb2.ExecPayload, _Mapping]] = ..., drain: _Optional[_Union[_commands_pb2.DrainPayload, _Mapping]] = ..., undrain: _Optional[_Union[_commands_pb2.UndrainPayload, _Mapping]] = ..., upgrade: _Optional[_Union[_commands_pb2.UpgradePayload, _Mapping]] = ..., configure: _Optional[_Union[_commands_pb2.ConfigurePayload, _Mapping]] = ..., reboot: _Optional[_Union[_commands_pb2.RebootPayload, _Mapping]] = ..., collect_inventory: _Optional[_Union[_commands_pb2.CollectInventoryPayload, _Mapping]] = ..., echo: _Optional[_Union[_commands_pb2.EchoPayload, _Mapping]] = ..., gpu_reset: _Optional[_Union[_commands_pb2.GpuResetPayload, _Mapping]] = ..., diagnose: _Optional[_Union[_commands_pb2.DiagnosePayload, _Mapping]] = ..., state: _Optional[_Union[CommandState, str]] = ..., idempotency_key: _Optional[str] = ..., deadline_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., attempts: _Optional[int] = ..., result: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., error: _Optional[str] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., send_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., ack_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., finish_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., update_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class GetRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class GetResponse(_message.Message):
    __slots__ = ("command",)
    COMMAND_FIELD_NUMBER: _ClassVar[int]
    command: Command
    def __init__(self, command: _Optional[_Union[Command, _Mapping]] = ...) -> None: ...

class ListRequest(_message.Message):
    __slots__ = ("node_id", "state", "page_size", "page_token", "fan_out_id")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    FAN_OUT_ID_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    state: CommandState
    page_size: int
    page_token: str
    fan_out_id: str
    def __init__(self, node_id: _Optional[str] = ..., state: _Optional[_Union[CommandState, str]] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., fan_out_id: _Optional[str] = ...) -> None: ...

class ListResponse(_message.Message):
    __slots__ = ("commands", "next_page_token")
    COMMANDS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    commands: _containers.RepeatedCompositeFieldContainer[Command]
    next_page_token: str
    def __init__(self, commands: _Optional[_Iterable[_Union[Command, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class CancelRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class CancelResponse(_message.Message):
    __slots__ = ("command",)
    COMMAND_FIELD_NUMBER: _ClassVar[int]
    command: Command
    def __init__(self, command: _Optional[_Union[Command, _Mapping]] = ...) -> None: ...

class CreateRequest(_message.Message):
    __slots__ = ("node_id", "label_selector", "exec", "drain", "undrain", "upgrade", "configure", "reboot", "collect_inventory", "echo", "gpu_reset", "diagnose", "idempotency_key", "timeout")
    class LabelSelectorEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    LABEL_SELECTOR_FIELD_NUMBER: _ClassVar[int]
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
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    label_selector: _containers.ScalarMap[str, str]
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
    idempotency_key: str
    timeout: _duration_pb2.Duration
    def __init__(self, node_id: _Optional[str] = ..., label_selector: _Optional[_Mapping[str, str]] = ..., exec: _Optional[_Union[_commands_pb2.ExecPayload, _Mapping]] = ..., drain: _Optional[_Union[_commands_pb2.DrainPayload, _Mapping]] = ..., undrain: _Optional[_Union[_commands_pb2.UndrainPayload, _Mapping]] = ..., upgrade: _Optional[_Union[_commands_pb2.UpgradePayload, _Mapping]] = ..., configure: _Optional[_Union[_commands_pb2.ConfigurePayload, _Mapping]] = ..., reboot: _Optional[_Union[_commands_pb2.RebootPayload, _Mapping]] = ..., collect_inventory: _Optional[_Union[_commands_pb2.CollectInventoryPayload, _Mapping]] = ..., echo: _Optional[_Union[_commands_pb2.EchoPayload, _Mapping]] = ..., gpu_reset: _Optional[_Union[_commands_pb2.GpuResetPayload, _Mapping]] = ..., diagnose: _Optional[_Union[_commands_pb2.DiagnosePayload, _Mapping]] = ..., idempotency_key: _Optional[str] = ..., timeout: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class CreateResponse(_message.Message):
    __slots__ = ("commands",)
    COMMANDS_FIELD_NUMBER: _ClassVar[int]
    commands: _containers.RepeatedCompositeFieldContainer[Command]
    def __init__(self, commands: _Optional[_Iterable[_Union[Command, _Mapping]]] = ...) -> None: ...
