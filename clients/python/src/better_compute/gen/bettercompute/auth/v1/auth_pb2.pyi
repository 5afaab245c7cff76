import datetime

from bettercompute.api.v1 import options_pb2 as _options_pb2
from bettercompute.iam.v1 import iam_pb2 as _iam_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class AuthMethodKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    AUTH_METHOD_KIND_UNSPECIFIED: _ClassVar[AuthMethodKind]
    AUTH_METHOD_KIND_OIDC: _ClassVar[AuthMethodKind]
    AUTH_METHOD_KIND_JWT: _ClassVar[AuthMethodKind]
AUTH_METHOD_KIND_UNSPECIFIED: AuthMethodKind
AUTH_METHOD_KIND_OIDC: AuthMethodKind
AUTH_METHOD_KIND_JWT: AuthMethodKind

class AuthMethod(_message.Message):
    __slots__ = ("id", "tenant_id", "name", "display_name", "kind", "issuer", "client_id", "client_secret", "scopes", "redirect_uris", "jwks_url", "audiences", "claim_paths", "rules", "create_time", "update_time")
    ID_FIELD_NUMBER: _ClassVar[int]
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    DISPLAY_NAME_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    ISSUER_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    CLIENT_SECRET_FIELD_NUMBER: _ClassVar[int]
    SCOPES_FIELD_NUMBER: _ClassVar[int]
    REDIRECT_URIS_FIELD_NUMBER: _ClassVar[int]
    JWKS_URL_FIELD_NUMBER: _ClassVar[int]
    AUDIENCES_FIELD_NUMBER: _ClassVar[int]
    CLAIM_PATHS_FIELD_NUMBER: _ClassVar[int]
    RULES_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TIME_FIELD_NUMBER: _ClassVar[int]
    id: str
    tenant_id: str
    name: str
    display_name: str
    kind: AuthMethodKind
    issuer: str
    client_id: str
    client_secret: str
    scopes: _containers.RepeatedScalarFieldContainer[str]
    redirect_uris: _containers.RepeatedScalarFieldContainer[str]
    jwks_url: str
    audiences: _containers.RepeatedScalarFieldContainer[str]
    claim_paths: ClaimPaths
    rules: _containers.RepeatedCompositeFieldContainer[BindingRule]
    create_time: _timestamp_pb2.Timestamp
    update_time: _timestamp_pb2.Timestamp
    def __init__(self, id: _Optional[str] = ..., tenant_id: _Optional[str] = ..., name: _Optional[str] = ..., display_name: _Optional[str] = ..., kind: _Optional[_Union[AuthMethodKind, str]] = ..., issuer: _Optional[str] = ..., client_id: _Optional[str] = ..., client_secret: _Optional[str] = ..., scopes: _Optional[_Iterable[str]] = ..., redirect_uris: _Optional[_Iterable[str]] = ..., jwks_url: _Optional[str] = ..., audiences: _Optional[_Iterable[str]] = ..., claim_paths: _Optional[_Union[ClaimPaths, _Mapping]] = ..., rules: _Optional[_Iterable[_Union[BindingRule, _Mapping]]] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., update_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ClaimPaths(_message.Message):
    __slots__ = ("groups", "email", "name")
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    EMAIL_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    groups: str
    email: str
    name: str
    def __init__(self, groups: _Optional[str] = ..., email: _Optional[str] = ..., name: _Optional[str] = ...) -> None: ...

class BindingRule(_message.Message):
    __slots__ = ("priority", "selectors", "tenant_id", "roles")
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    SELECTORS_FIELD_NUMBER: _ClassVar[int]
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    ROLES_FIELD_NUMBER: _ClassVar[int]
    priority: int
    selectors: _containers.RepeatedCompositeFieldContainer[ClaimSelector]
    tenant_id: str
    roles: _containers.RepeatedScalarFieldContainer[_iam_pb2.Role]
    def __init__(self, priority: _Optional[int] = ..., selectors: _Optional[_Iterable[_Union[ClaimSelector, _Mapping]]] = ..., tenant_id: _Optional[str] = ..., roles: _Optional[_Iterable[_Union[_iam_pb2.Role, str]]] = ...) -> None: ...

class ClaimSelector(_message.Message):
    __slots__ = ("claim", "values")
    CLAIM_FIELD_NUMBER: _ClassVar[int]
    VALUES_FIELD_NUMBER: _ClassVar[int]
    claim: str
    values: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, claim: _Optional[str] = ..., values: _Optional[_Iterable[str]] = ...) -> None: ...

class CreateAuthMethodRequest(_message.Message):
    __slots__ = ("auth_method",)
    AUTH_METHOD_FIELD_NUMBER: _ClassVar[int]
    auth_method: AuthMethod
    def __init__(self, auth_method: _Optional[_Union[AuthMethod, _Mapping]] = ...) -> None: ...

class CreateAuthMethodResponse(_message.Message):
    __slots__ = ("auth_method",)
    AUTH_METHOD_FIELD_NUMBER: _ClassVar[int]
    auth_method: AuthMethod
    def __init__(self, auth_method: _Optional[_Union[AuthMethod, _Mapping]] = ...) -> None: ...

class ListAuthMethodsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListAuthMethodsResponse(_message.Message):
    __slots__ = ("auth_methods",)
    AUTH_METHODS_FIELD_NUMBER: _ClassVar[int]
    auth_methods: _containers.RepeatedCompositeFieldContainer[AuthMethod]
    def __init__(self, auth_methods: _Optional[_Iterable[_Union[AuthMethod, _Mapping]]] = ...) -> None: ...

class UpdateAuthMethodRequest(_message.Message):
    __slots__ = ("auth_method",)
    AUTH_METHOD_FIELD_NUMBER: _ClassVar[int]
    auth_method: AuthMethod
    def __init__(self, auth_method: _Optional[_Union[AuthMethod, _Mapping]] = ...) -> None: ...

class UpdateAuthMethodResponse(_message.Message):
    __slots__ = ("auth_method",)
    AUTH_METHOD_FIELD_NUMBER: _ClassVar[int]
    auth_method: AuthMethod
    def __init__(self, auth_method: _Optional[_Union[AuthMethod, _Mapping]] = ...) -> None: ...

class DeleteAuthMethodRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class DeleteAuthMethodResponse(_message.Message):
    __slots__ = ("sessions_ended",)
    SESSIONS_ENDED_FIELD_NUMBER: _ClassVar[int]
    sessions_ended: int
    def __init__(self, sessions_ended: _Optional[int] = ...) -> None: ...

class ListLoginMethodsRequest(_message.Message):
    __slots__ = ("tenant",)
    TENANT_FIELD_NUMBER: _ClassVar[int]
    tenant: str
    def __init__(self, tenant: _Optional[str] = ...) -> None: ...

class LoginMethod(_message.Message):
    __slots__ = ("name", "display_name", "device_flow")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DISPLAY_NAME_FIELD_NUMBER: _ClassVar[int]
    DEVICE_FLOW_FIELD_NUMBER: _ClassVar[int]
    name: str
    display_name: str
    device_flow: bool
    def __init__(self, name: _Optional[str] = ..., display_name: _Optional[str] = ..., device_flow: _Optional[bool] = ...) -> None: ...

class ListLoginMethodsResponse(_message.Message):
    __slots__ = ("methods",)
    METHODS_FIELD_NUMBER: _ClassVar[int]
    methods: _containers.RepeatedCompositeFieldContainer[LoginMethod]
    def __init__(self, methods: _Optional[_Iterable[_Union[LoginMethod, _Mapping]]] = ...) -> None: ...

class StartLoginRequest(_message.Message):
    __slots__ = ("tenant", "method", "redirect_uri")
    TENANT_FIELD_NUMBER: _ClassVar[int]
    METHOD_FIELD_NUMBER: _ClassVar[int]
    REDIRECT_URI_FIELD_NUMBER: _ClassVar[int]
    tenant: str
    method: str
    redirect_uri: str
    def __init__(self, tenant: _Optional[str] = ..., method: _Optional[str] = ..., redirect_uri: _Optional[str] = ...) -> None: ...

class StartLoginResponse(_message.Message):
    __slots__ = ("authorization_url", "state", "expire_time")
    AUTHORIZATION_URL_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    EXPIRE_TIME_FIELD_NUMBER: _ClassVar[int]
    authorization_url: str
    state: str
    expire_time: _timestamp_pb2.Timestamp
    def __init__(self, authorization_url: _Optional[str] = ..., state: _Optional[str] = ..., expire_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class CompleteLoginRequest(_message.Message):
    __slots__ = ("state", "code")
    STATE_FIELD_NUMBER: _ClassVar[int]
    CODE_FIELD_NUMBER: _ClassVar[int]
    state: str
    code: str
    def __init__(self, state: _Optional[str] = ..., code: _Optional[str] = ...) -> None: ...

class CompleteLoginResponse(_message.Message):
    __slots__ = ("login",)
    LOGIN_FIELD_NUMBER: _ClassVar[int]
    login: Login
    def __init__(self, login: _Optional[_Union[Login, _Mapping]] = ...) -> None: ...

class ExchangeTokenResponse(_message.Message):
    __slots__ = ("login",)
    LOGIN_FIELD_NUMBER: _ClassVar[int]
    login: Login
    def __init__(self, login: _Optional[_Union[Login, _Mapping]] = ...) -> None: ...

class Login(_message.Message):
    __slots__ = ("session_token", "expire_time", "principal", "tenant", "roles")
    SESSION_TOKEN_FIELD_NUMBER: _ClassVar[int]
    EXPIRE_TIME_FIELD_NUMBER: _ClassVar[int]
    PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    ROLES_FIELD_NUMBER: _ClassVar[int]
    session_token: str
    expire_time: _timestamp_pb2.Timestamp
    principal: _iam_pb2.Principal
    tenant: _iam_pb2.Tenant
    roles: _containers.RepeatedScalarFieldContainer[_iam_pb2.Role]
    def __init__(self, session_token: _Optional[str] = ..., expire_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., principal: _Optional[_Union[_iam_pb2.Principal, _Mapping]] = ..., tenant: _Optional[_Union[_iam_pb2.Tenant, _Mapping]] = ..., roles: _Optional[_Iterable[_Union[_iam_pb2.Role, str]]] = ...) -> None: ...

class StartDeviceLoginRequest(_message.Message):
    __slots__ = ("tenant", "method")
    TENANT_FIELD_NUMBER: _ClassVar[int]
    METHOD_FIELD_NUMBER: _ClassVar[int]
    tenant: str
    method: str
    def __init__(self, tenant: _Optional[str] = ..., method: _Optional[str] = ...) -> None: ...

class StartDeviceLoginResponse(_message.Message):
    __slots__ = ("handle", "user_code", "verification_uri", "verification_uri_complete", "interval_seconds", "expire_time")
    HANDLE_FIELD_NUMBER: _ClassVar[int]
    USER_CODE_FIELD_NUMBER: _ClassVar[int]
    VERIFICATION_URI_FIELD_NUMBER: _ClassVar[int]
    VERIFICATION_URI_COMPLETE_FIELD_NUMBER: _ClassVar[int]
    INTERVAL_SECONDS_FIELD_NUMBER: _ClassVar[int]
    EXPIRE_TIME_FIELD_NUMBER: _ClassVar[int]
    handle: str
    user_code: str
    verification_uri: str
    verification_uri_complete: str
    interval_seconds: int
    expire_time: _timestamp_pb2.Timestamp
    def __init__(self, handle: _Optional[str] = ..., user_code: _Optional[str] = ..., verification_uri: _Optional[str] = ..., verification_uri_complete: _Optional[str] = ..., interval_seconds: _Optional[int] = ..., expire_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class PollDeviceLoginRequest(_message.Message):
    __slots__ = ("handle",)
    HANDLE_FIELD_NUMBER: _ClassVar[int]
    handle: str
    def __init__(self, handle: _Optional[str] = ...) -> None: ...

class PollDeviceLoginResponse(_message.Message):
    __slots__ = ("pending", "login")
    PENDING_FIELD_NUMBER: _ClassVar[int]
    LOGIN_FIELD_NUMBER: _ClassVar[int]
    pending: bool
    login: Login
    def __init__(self, pending: _Optional[bool] = ..., login: _Optional[_Union[Login, _Mapping]] = ...) -> None: ...

class ExchangeTokenRequest(_message.Message):
    __slots__ = ("tenant", "method", "token")
    TENANT_FIELD_NUMBER: _ClassVar[int]
    METHOD_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    tenant: str
    method: str
    token: str
    def __init__(self, tenant: _Optional[str] = ..., method: _Optional[str] = ..., token: _Optional[str] = ...) -> None: ...

class SignOutRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class SignOutResponse(_message.Message):
    __slots__ = ("ended",)
    ENDED_FIELD_NUMBER: _ClassVar[int]
    ended: bool
    def __init__(self, ended: _Optional[bool] = ...) -> None: ...

class Session(_message.Message):
    __slots__ = ("id", "tenant_id", "principal_id", "method", "kind", "create_time", "last_used_time", "expire_time")
    ID_FIELD_NUMBER: _ClassVar[int]
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    PRINCIPAL_ID_FIELD_NUMBER: _ClassVar[int]
    METHOD_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    LAST_USED_TIME_FIELD_NUMBER: _ClassVar[int]
    EXPIRE_TIME_FIELD_NUMBER: _ClassVar[int]
    id: str
    tenant_id: str
    principal_id: str
    method: str
    kind: str
    create_time: _timestamp_pb2.Timestamp
    last_used_time: _timestamp_pb2.Timestamp
    expire_time: _timestamp_pb2.Timestamp
    def __init__(self, id: _Optional[str] = ..., tenant_id: _Optional[str] = ..., principal_id: _Optional[str] = ..., method: _Optional[str] = ..., kind: _Optional[str] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., last_used_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., expire_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ListSessionsRequest(_message.Message):
    __slots__ = ("page_size", "page_token")
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListSessionsResponse(_message.Message):
    __slots__ = ("sessions", "next_page_token")
    SESSIONS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    sessions: _containers.RepeatedCompositeFieldContainer[Session]
    next_page_token: str
    def __init__(self, sessions: _Optional[_Iterable[_Union[Session, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class RevokeSessionRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class RevokeSessionResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...
