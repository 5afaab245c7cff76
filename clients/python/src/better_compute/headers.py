"""The interceptor that sets the headers the API expects."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from connectrpc.request import RequestContext

__all__ = ["CLIENT_HEADER", "BetterComputeHeaders"]

#: Header sent on every request so the server can tell API clients from browser navigation.
CLIENT_HEADER = "X-Better-Compute"


class BetterComputeHeaders:
    """Interceptor that sets ``X-Better-Compute: 1`` and, given an API key, ``Authorization``.

    Works with both the async and the sync clients (it is a connectrpc metadata interceptor):
    pass it in ``interceptors=[BetterComputeHeaders(api_key)]``.
    """

    def __init__(self, api_key: str | None = None) -> None:
        self._api_key = api_key

    def _apply(self, ctx: RequestContext) -> None:
        ctx.request_headers[CLIENT_HEADER] = "1"
        if self._api_key:
            ctx.request_headers["Authorization"] = f"Bearer {self._api_key}"

    async def on_start(self, ctx: RequestContext) -> None:
        self._apply(ctx)

    async def on_end(self, token: None, ctx: RequestContext, error: Exception | None, /) -> None:
        return

    def on_start_sync(self, ctx: RequestContext, /) -> None:
        self._apply(ctx)

    def on_end_sync(self, token: None, ctx: RequestContext, error: Exception | None, /) -> None:
        return
