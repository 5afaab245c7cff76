"""Iterating over paged lists."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, TypeVar

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator

__all__ = ["apaginate", "paginate"]


class _Page(Protocol):
    @property
    def next_page_token(self) -> str: ...


R = TypeVar("R", bound=_Page)
T = TypeVar("T")


def paginate(page: Callable[[str], R], items: Callable[[R], Iterable[T]]) -> Iterator[T]:
    """Yields every item of a paged list, calling ``page`` with each next page token until the
    server returns an empty one::

        for p in paginate(lambda token: bc.iam.list_principals(
                iamv1.ListPrincipalsRequest(page_token=token)), lambda r: r.principals):
            print(p.name)
    """
    token = ""
    while True:
        res = page(token)
        yield from items(res)
        token = res.next_page_token
        if not token:
            return


async def apaginate(
    page: Callable[[str], Awaitable[R]], items: Callable[[R], Iterable[T]]
) -> AsyncIterator[T]:
    """:func:`paginate` for the async clients: ``async for p in apaginate(...)``."""
    token = ""
    while True:
        res = await page(token)
        for item in items(res):
            yield item
        token = res.next_page_token
        if not token:
            return
