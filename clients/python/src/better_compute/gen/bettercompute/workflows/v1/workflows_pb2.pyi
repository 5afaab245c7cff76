import datetime

from bettercompute.api.v1 import options_pb2 as _options_pb2
from bettercompute.daemon.v1 import commands_pb2 as _commands_pb2
from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Action(_message.Message):
    __slots__ = ("upgrade", "reboot", "drain", "configure", "exec", "gpu_reset", "diagnose")
    UPGRADE_FIELD_NUMBER: _ClassVar[int]
    REBOOT_FIELD_NUMBER: _ClassVar[int]
    DRAIN_FIELD_NUMBER: _ClassVar[int]
    CONFIGURE_FIELD_NUMBER: _ClassVar[int]
    EXEC_FIELD_NUMBER: _ClassVar[int]
    GPU_RESET_FIELD_NUMBER: _ClassVar[int]
    DIAGNOSE_FIELD_NUMBER: _ClassVar[int]
    upgrade: UpgradeAction
    reboot: RebootAction
    drain: DrainAction
    configure: _commands_pb2.ConfigurePayload
    exec: _commands_pb2.ExecPayload
    gpu_reset: _commands_pb2.GpuResetPayload
    diagnose: _commands_pb2.DiagnosePayload
    def __init__(self, upgrade: _Optional[_Union[UpgradeAction, _Mapping]] = ..., reboot: _Optional[_Union[RebootAction, _Mapping]] = ..., drain: _Optional[_Union[DrainAction, _Mapping]] = ..., configure: _Optional[_Union[_commands_pb2.ConfigurePayload, _Mapping]] = ..., exec: _Optional[_Union[_commands_pb2.ExecPayload, _Mapping]] = ..., gpu_reset: _Optional[_Union[_commands_pb2.GpuResetPayload, _Mapping]] = ..., diagnose: _Optional[_Union[_commands_pb2.DiagnosePayload, _Mapping]] = ...) -> None: ...

class UpgradeAction(_message.Message):
    __slots__ = ("version",)
    VERSION_FIELD_NUMBER: _ClassVar[int]
    version: str
    def __init__(self, version: _Optional[str] = ...) -> None: ...

class RebootAction(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class DrainAction(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class Target(_message.Message):
    __slots__ = ("pool_id", "label_selector", "node_ids")
    class LabelSelectorEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    POOL_ID_FIELD_NUMBER: _ClassVar[int]
    LABEL_SELECTOR_FIELD_NUMBER: _ClassVar[int]
    NODE_IDS_FIELD_NUMBER: _ClassVar[int]
    pool_id: str
    label_selector: _containers.ScalarMap[str, str]
    node_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, pool_id: _Optional[str] = ..., label_selector: _Optional[_Mapping[str, str]] = ..., node_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class Policy(_message.Message):
    __slots__ = ("max_parallel", "max_failures", "min_healthy", "drain_deadline", "step_timeout")
    MAX_PARALLEL_FIELD_NUMBER: _ClassVar[int]
    MAX_FAILURES_FIELD_NUMBER: _ClassVar[int]
    MIN_HEALTHY_FIELD_NUMBER: _ClassVar[int]
    DRAIN_DEADLINE_FIELD_NUMBER: _ClassVar[int]
    STEP_TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    max_parallel: int
    max_failures: int
    min_healthy: _duration_pb2.Duration
    drain_deadline: _duration_pb2.Duration
    step_timeout: _duration_pb2.Duration
    def __init__(self, max_parallel: _Optional[int] = ..., max_failures: _Optional[int] = ..., min_healthy: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., drain_deadline: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., step_timeout: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class Workflow(_message.Message):
    __slots__ = ("id", "tenant_id", "name", "action", "target", "policy", "state", "reason", "counts", "origin", "created_by", "create_time", "update_time", "finish_time")
    ID_FIELD_NUMBER: _ClassVar[int]
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    POLICY_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    COUNTS_FIELD_NUMBER: _ClassVar[int]
    ORIGIN_FIELD_NUMBER: _ClassVar[int]
    CREATED_BY_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TIME_FIELD_NUMBER: _ClassVar[int]
    FINISH_TIME_FIELD_NUMBER: _ClassVar[int]
    id: str
    tenant_id: str
    name: str
    action: Action
    target: Target
    policy: Policy
    state: str
    reason: str
    counts: Counts
    origin: str
    created_by: str
    create_time: _timestamp_pb2.Timestamp
    update_time: _timestamp_pb2.Timestamp
    finish_time: _timestamp_pb2.Timestamp
    def __init__(self, id: _Optional[str] = ..., tenant_id: _Optional[str] = ..., name: _Optional[str] = ..., action: _Optional[_Union[Action, _Mapping]] = ..., target: _Optional[_Union[Target, _Mapping]] = ..., policy: _Optional[_Union[Policy, _Mapping]] = ..., state: _Optional[str] = ..., reason: _Optional[str] = ..., counts: _Optional[_Union[Counts, _Mapping]] = ..., origin: _Optional[str] = ..., created_by: _Optional[str] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., update_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., finish_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class Counts(_message.Message):
    __slots__ = ("total", "pending", "in_progress", "succeeded", "failed", "skipped")
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    PENDING_FIELD_NUMBER: _ClassVar[int]
    IN_PROGRESS_FIELD_NUMBER: _ClassVar[int]
    SUCCEEDED_FIELD_NUMBER: _ClassVar[int]
    FAILED_FIELD_NUMBER: _ClassVar[int]
    SKIPPED_FIELD_NUMBER: _ClassVar[int]
    total: int
    pending: int
    in_progress: int
    succeeded: int
    failed: int
    skipped: int
    def __init__(self, total: _Optional[int] = ..., pending: _Optional[int] = ..., in_progress: _Optional[int] = ..., succeeded: _Optional[int] = ..., failed: _Optional[int] = ..., skipped: _Optional[int] = ...) -> None: ...

class NodeProgress(_message.Message):
    __slots__ = ("node_id", "hostname", "position", "step", "attempt", "command_id", "message", "admit_time", "step_time", "finish_time")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    HOSTNAME_FIELD_NUMBER: _ClassVar[int]
    POSITION_FIELD_NUMBER: _ClassVar[int]
    STEP_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    COMMAND_ID_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    ADMIT_TIME_FIELD_NUMBER: _ClassVar[int]
    STEP_TIME_FIELD_NUMBER: _ClassVar[int]
    FINISH_TIME_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    hostname: str
    position: int
    step: str
    attempt: int
    command_id: str
    message: str
    admit_time: _timestamp_pb2.Timestamp
    step_time: _timestamp_pb2.Timestamp
    finish_time: _timestamp_pb2.Timestamp
    def __init__(self, node_id: _Optional[str] = ..., hostname: _Optional[str] = ..., position: _Optional[int] = ..., step: _Optional[str] = ..., attempt: _Optional[int] = ..., command_id: _Optional[str] = ..., message: _Optional[str] = ..., admit_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., step_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., finish_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class CreateRequest(_message.Message):
    __slots__ = ("name", "action", "target", "policy", "paused")
    NAME_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    POLICY_FIELD_NUMBER: _ClassVar[int]
    PAUSED_FIELD_NUMBER: _ClassVar[int]
    name: str
    action: Action
    target: Target
    policy: Policy
    paused: bool
    def __init__(self, name: _Optional[str] = ..., action: _Optional[_Union[Action, _Mapping]] = ..., target: _Optional[_Union[Target, _Mapping]] = ..., policy: _Optional[_Union[Policy, _Mapping]] = ..., paused: _Optional[bool] = ...) -> None: ...

class CreateResponse(_message.Message):
    __slots__ = ("workflow",)
    WORKFLOW_FIELD_NUMBER: _ClassVar[int]
    workflow: Workflow
    def __init__(self, workflow: _Optional[_Union[Workflow, _Mapping]] = ...) -> None: ...

class GetRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class GetResponse(_message.Message):
    __slots__ = ("workflow", "nodes")
    WORKFLOW_FIELD_NUMBER: _ClassVar[int]
    NODES_FIELD_NUMBER: _ClassVar[int]
    workflow: Workflow
    nodes: _containers.RepeatedCompositeFieldContainer[NodeProgress]
    def __init__(self, workflow: _Optional[_Union[Workflow, _Mapping]] = ..., nodes: _Optional[_Iterable[_Union[NodeProgress, _Mapping]]] = ...) -> None: ...

class ListRequest(_message.Message):
    __slots__ = ("states", "page_size", "page_token")
    STATES_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    states: _containers.RepeatedScalarFieldContainer[str]
    page_size: int
    page_token: str
    def __init__(self, states: _Optional[_Iterable[str]] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListResponse(_message.Message):
    __slots__ = ("workflows", "next_page_token")
    WORKFLOWS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    workflows: _containers.RepeatedCompositeFieldContainer[Workflow]
    next_page_token: str
    def __init__(self, workflows: _Optional[_Iterable[_Union[Workflow, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class PauseRequest(_message.Message):
    __slots__ = ("id", "reason")
    ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    id: str
    reason: str
    def __init__(self, id: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class PauseResponse(_message.Message):
    __slots__ = ("workflow",)
    WORKFLOW_FIELD_NUMBER: _ClassVar[int]
    workflow: Workflow
    def __init__(self, workflow: _Optional[_Union[Workflow, _Mapping]] = ...) -> None: ...

class ResumeRequest(_message.Message):
    __slots__ = ("id", "retry_failed", "max_failures")
    ID_FIELD_NUMBER: _ClassVar[int]
    RETRY_FAILED_FIELD_NUMBER: _ClassVar[int]
    MAX_FAILURES_FIELD_NUMBER: _ClassVar[int]
    id: str
    retry_failed: bool
    max_failures: int
    def __init__(self, id: _Optional[str] = ..., retry_failed: _Optional[bool] = ..., max_failures: _Optional[int] = ...) -> None: ...

class ResumeResponse(_message.Message):
    __slots__ = ("workflow",)
    WORKFLOW_FIELD_NUMBER: _ClassVar[int]
    workflow: Workflow
    def __init__(self, workflow: _Optional[_Union[Workflow, _Mapping]] = ...) -> None: ...

class CancelRequest(_message.Message):
    __slots__ = ("id", "reason")
    ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    id: str
    reason: str
    def __init__(self, id: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class CancelResponse(_message.Message):
    __slots__ = ("workflow",)
    WORKFLOW_FIELD_NUMBER: _ClassVar[int]
    workflow: Workflow
    def __init__(self, workflow: _Optional[_Union[Workflow, _Mapping]] = ...) -> None: ...
