"""Exceptions of the Better Compute SDK, one class per Connect code.

Every failed call of a :class:`~better_compute.BetterCompute` or
:class:`~better_compute.AsyncBetterCompute` client raises a :class:`BetterComputeError`
subclass chosen by the error's Connect code: :class:`UnauthenticatedError` for a missing or
wrong API key, :class:`NotFoundError` for an unknown id, and so on. They are
:class:`connectrpc.errors.ConnectError` subclasses, so ``except ConnectError`` still catches
them, and ``.code``, ``.message`` and ``.details`` work as there.

The :class:`MapErrors` interceptor does the mapping; add it to a generated client's
``interceptors`` to get the same exceptions from it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

from connectrpc.code import Code
from connectrpc.errors import ConnectError

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from connectrpc.request import RequestContext

__all__ = [
    "AbortedError",
    "AlreadyExistsError",
    "BetterComputeError",
    "CanceledError",
    "DataLossError",
    "DeadlineExceededError",
    "FailedPreconditionError",
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
]


class BetterComputeError(ConnectError):
    """A call to the Better Compute API failed. Subclasses name the Connect code."""

    #: The code this class stands for; the base class takes any.
    CODE: Code | None = None

    def __init__(self, code: Code, message: str, details: Any = ()) -> None:
        super().__init__(code, message, details)

    def __str__(self) -> str:
        return f"{self.code.value}: {self.message}"


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
