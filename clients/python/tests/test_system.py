"""Calls a live Better Compute server through the generated sync and async clients.

Start a server with ``go run ./cmd/better-compute dev --fresh --port 0`` and set
BETTER_COMPUTE_URL to the "API:" URL it prints, for example http://127.0.0.1:43123/api.
"""

from __future__ import annotations

import asyncio
import os
from datetime import datetime, timedelta, timezone

import pytest
from connectrpc.compat import google_protobuf_json_codec

from better_compute import (
    BetterComputeHeaders,
    Code,
    ConnectError,
    InfoRequest,
    InfoResponse,
    SystemServiceClient,
    SystemServiceClientSync,
)


@pytest.fixture(scope="session")
def base_url() -> str:
    url = os.environ.get("BETTER_COMPUTE_URL", "")
    if not url:
        pytest.fail(
            "BETTER_COMPUTE_URL is not set. These tests call a live server: start one with "
            "`go run ./cmd/better-compute dev --fresh --port 0` and set BETTER_COMPUTE_URL to the "
            "printed API URL, e.g. http://127.0.0.1:43123/api",
            pytrace=False,
        )
    return url.rstrip("/")


def check_info(info: InfoResponse) -> None:
    assert isinstance(info, InfoResponse)
    assert info.version != ""
    assert info.HasField("server_time")
    skew = abs(info.server_time.ToDatetime(tzinfo=timezone.utc) - datetime.now(timezone.utc))
    assert skew < timedelta(minutes=1), f"server clock is {skew} away from ours"


@pytest.mark.parametrize("codec", ["binary", "json"])
def test_info_sync(base_url: str, codec: str) -> None:
    kwargs = {"codec": google_protobuf_json_codec()} if codec == "json" else {}
    with SystemServiceClientSync(
        base_url, interceptors=[BetterComputeHeaders()], **kwargs
    ) as client:
        check_info(client.info(InfoRequest()))


@pytest.mark.parametrize("codec", ["binary", "json"])
def test_info_async(base_url: str, codec: str) -> None:
    kwargs = {"codec": google_protobuf_json_codec()} if codec == "json" else {}

    async def call() -> InfoResponse:
        async with SystemServiceClient(
            base_url, interceptors=[BetterComputeHeaders()], **kwargs
        ) as client:
            return await client.info(InfoRequest())

    check_info(asyncio.run(call()))


def test_wrong_base_path_is_a_connect_error(base_url: str) -> None:
    with SystemServiceClientSync(f"{base_url}/no-such-prefix") as client:
        with pytest.raises(ConnectError) as excinfo:
            client.info(InfoRequest())
    assert excinfo.value.code == Code.UNIMPLEMENTED


def test_headers_interceptor_sets_headers() -> None:
    # The interceptor only touches request metadata; check it on a real RequestContext.
    from connectrpc.request import Headers, RequestContext

    for key, expected_auth in ((None, None), ("bc_example", "Bearer bc_example")):
        ctx = RequestContext(method=None, http_method="POST", request_headers=Headers())  # type: ignore[arg-type]
        BetterComputeHeaders(key).on_start_sync(ctx)
        assert ctx.request_headers["x-better-compute"] == "1"
        assert ctx.request_headers.get("authorization") == expected_auth
