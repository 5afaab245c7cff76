"""Exceptions of the Better Compute SDK, one class per Connect code.

Every failed call of a :class:`~better_compute.BetterCompute` or
:class:`~better_compute.AsyncBetterCompute` client raises a :class:`BetterComputeError`
subclass chosen by the error's Connect code: :class:`UnauthenticatedError` for a missing or
wrong API key, :class:`NotFoundError` for an unknown id, and so on. They are
:class:`connectrpc.errors.ConnectError` subclasses, so ``except ConnectError`` still catches
them, and ``.code``, ``.message`` and ``.details`` work as there.

An :class:`InvalidArgumentError` (and a :class:`FailedPreconditionError` caused by one field)
names the request fields it refused in ``.field_violations``, a list of :class:`FieldViolation`
decoded from the ``google.rpc.BadRequest`` detail the API attaches; :func:`field_violations`
reads them from any ConnectError.

The :class:`MapErrors` interceptor does the mapping; add it to a generated client's
``interceptors`` to get the same exceptions from it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from connectrpc.code import Code
from connectrpc.errors import ConnectError

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Iterator

    from connectrpc.request import RequestContext

__all__ = [
    "AbortedError",
    "AlreadyExistsError",
    "BetterComputeError",
    "CanceledError",
    "DataLossError",
    "DeadlineExceededError",
    "FailedPreconditionError",
    "FieldViolation",
    "InternalError",
    "InvalidArgumentError",
    "MapErrors",
    "NotFoundError",
    "OutOfRangeError",
    "PermissionDeniedError",
    "ResourceExhaustedError",
    "UnauthenticatedError",
    "UnavailableError",
    "UnimplementedError",
    "UnknownError",
    "error_from",
    "field_violations",
]


class BetterComputeError(ConnectError):
    """A call to the Better Compute API failed. Subclasses name the Connect code."""

    #: The code this class stands for; the base class takes any.
    CODE: Code | None = None

    def __init__(self, code: Code, message: str, details: Any = ()) -> None:
        super().__init__(code, message, details)

    def __str__(self) -> str:
        return f"{self.code.value}: {self.message}"

    @property
    def field_violations(self) -> list[FieldViolation]:
        """The request fields the API refused, in its order; empty when it named none."""
        return field_violations(self)


class CanceledError(BetterComputeError):
    CODE = Code.CANCELED


class UnknownError(BetterComputeError):
    CODE = Code.UNKNOWN


class InvalidArgumentError(BetterComputeError):
    CODE = Code.INVALID_ARGUMENT


class DeadlineExceededError(BetterComputeError):
    CODE = Code.DEADLINE_EXCEEDED


class NotFoundError(BetterComputeError):
    CODE = Code.NOT_FOUND


class AlreadyExistsError(BetterComputeError):
    CODE = Code.ALREADY_EXISTS


class PermissionDeniedError(BetterComputeError):
    CODE = Code.PERMISSION_DENIED


class ResourceExhaustedError(BetterComputeError):
    CODE = Code.RESOURCE_EXHAUSTED


class FailedPreconditionError(BetterComputeError):
    CODE = Code.FAILED_PRECONDITION


class AbortedError(BetterComputeError):
    CODE = Code.ABORTED


class OutOfRangeError(BetterComputeError):
    CODE = Code.OUT_OF_RANGE


class UnimplementedError(BetterComputeError):
    CODE = Code.UNIMPLEMENTED


class InternalError(BetterComputeError):
    CODE = Code.INTERNAL


class UnavailableError(BetterComputeError):
    CODE = Code.UNAVAILABLE


class DataLossError(BetterComputeError):
    CODE = Code.DATA_LOSS


class UnauthenticatedError(BetterComputeError):
    CODE = Code.UNAUTHENTICATED


_BY_CODE: dict[Code, type[BetterComputeError]] = {
    cls.CODE: cls
    for cls in BetterComputeError.__subclasses__()
    if cls.CODE is not None
}


def error_from(err: ConnectError) -> BetterComputeError:
    """Returns the SDK exception for a Connect error (the error itself when it is one)."""
    if isinstance(err, BetterComputeError):
        return err
    cls = _BY_CODE.get(err.code, BetterComputeError)
    return cls(err.code, err.message, err.details)


@dataclass(frozen=True)
class FieldViolation:
    """One request field the API refused: a ``google.rpc.BadRequest`` field violation."""

    #: The field's path: proto field names joined by dots, with ``[i]`` for a list item and
    #: ``["key"]`` for a map entry, for example ``pool_id`` or ``tolerations[0].operator``. A
    #: request header is named ``<Header-Name> header``.
    field: str
    #: What is wrong with the field, for example ``must be a UUID, got "x"``.
    description: str


_BAD_REQUEST = "google.rpc.BadRequest"


def field_violations(err: ConnectError) -> list[FieldViolation]:
    """Returns the bad request fields of ``err``'s ``google.rpc.BadRequest`` details, in order.

    Several when the API checked several fields; empty when there is no such detail.
    """
    out: list[FieldViolation] = []
    for detail in err.details:
        if detail.type_name != _BAD_REQUEST:
            continue
        try:
            found = list(_decode_bad_request(detail.message_bytes))
        except ValueError:
            continue  # a detail that does not decode says nothing about fields
        out.extend(found)
    return out


# google.rpc.BadRequest is decoded here rather than with generated code: a generated
# google/rpc/error_details_pb2 would clash with googleapis-common-protos, which many environments
# install. The fields read are BadRequest.field_violations (1) and, in each FieldViolation,
# field (1) and description (2); anything else is skipped, as protobuf parsers do.


def _decode_bad_request(data: bytes) -> Iterator[FieldViolation]:
    for number, wire_type, value in _fields(data):
        if number == 1 and wire_type == _LEN and isinstance(value, bytes):
            strings = {
                n: v
                for n, w, v in _fields(value)
                if n in (1, 2) and w == _LEN and isinstance(v, bytes)
            }
            yield FieldViolation(
                field=strings.get(1, b"").decode("utf-8", "replace"),
                description=strings.get(2, b"").decode("utf-8", "replace"),
            )


_LEN = 2  # the wire type of strings and messages


def _fields(data: bytes) -> Iterator[tuple[int, int, int | bytes]]:
    """Yields (field number, wire type, value) of a serialized message.

    Raises ValueError when the message is malformed.
    """
    i = 0
    while i < len(data):
        key, i = _varint(data, i)
        number, wire_type = key >> 3, key & 7
        value: int | bytes
        if wire_type == 0:
            value, i = _varint(data, i)
        elif wire_type == _LEN:
            size, i = _varint(data, i)
            value, i = data[i : i + size], i + size
        elif wire_type in (1, 5):
            size = 8 if wire_type == 1 else 4
            value, i = data[i : i + size], i + size
        else:
            raise ValueError(f"unsupported wire type {wire_type}")
        if i > len(data):
            raise ValueError("truncated message")
        yield number, wire_type, value


def _varint(data: bytes, i: int) -> tuple[int, int]:
    result = shift = 0
    while i < len(data) and shift < 64:
        b = data[i]
        i += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, i
        shift += 7
    raise ValueError("truncated varint")


REQ = TypeVar("REQ")
RES = TypeVar("RES")


class MapErrors:
    """Interceptor that raises :func:`error_from` of every ConnectError of a unary call.

    Works with the sync and the async clients: ``interceptors=[MapErrors()]``.
    """

    def intercept_unary_sync(
        self,
        call_next: Callable[[REQ, RequestContext], RES],
        request: REQ,
        ctx: RequestContext,
        /,
    ) -> RES:
        try:
            return call_next(request, ctx)
        except ConnectError as err:
            raise error_from(err) from err

    async def intercept_unary(
        self,
        call_next: Callable[[REQ, RequestContext], Awaitable[RES]],
        request: REQ,
        ctx: RequestContext,
        /,
    ) -> RES:
        try:
            return await call_next(request, ctx)
        except ConnectError as err:
            raise error_from(err) from err
