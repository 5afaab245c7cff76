"""The convenience clients against a live server.

scripts/test starts ``better-compute dev`` and exports BETTER_COMPUTE_URL and
BETTER_COMPUTE_API_KEY (the admin key it prints as "API key:").
"""

from __future__ import annotations

import asyncio
import os
import time

import pytest

from better_compute import (
    AsyncBetterCompute,
    BetterCompute,
    BetterComputeError,
    Code,
    ConnectError,
    NotFoundError,
    UnauthenticatedError,
    apaginate,
    iamv1,
    nodesv1,
    paginate,
)


@pytest.fixture(scope="session")
def server() -> tuple[str, str]:
    url = os.environ.get("BETTER_COMPUTE_URL", "").rstrip("/")
    key = os.environ.get("BETTER_COMPUTE_API_KEY", "")
    if not url or not key:
        pytest.fail(
            "BETTER_COMPUTE_URL and BETTER_COMPUTE_API_KEY must be set: start a server with "
            "`go run ./cmd/better-compute dev --fresh --port 0` and use the printed API URL and "
            "API key",
            pytrace=False,
        )
    return url, key


@pytest.mark.parametrize("json", [False, True])
def test_call_succeeds(server: tuple[str, str], json: bool) -> None:
    url, key = server
    with BetterCompute(url, key, json=json) as bc:
        me = bc.iam.who_am_i(iamv1.WhoAmIRequest())
        assert me.principal.name == "dev-admin"
        assert iamv1.ROLE_OWNER in me.roles
        assert isinstance(list(bc.nodes.list(nodesv1.ListRequest()).nodes), list)


def test_call_succeeds_async(server: tuple[str, str]) -> None:
    url, key = server

    async def call() -> str:
        async with AsyncBetterCompute(url, key) as bc:
            return (await bc.iam.who_am_i(iamv1.WhoAmIRequest())).principal.name

    assert asyncio.run(call()) == "dev-admin"


@pytest.mark.parametrize("key", [None, "bck_nope_nope"])
def test_auth_failure_is_unauthenticated_error(server: tuple[str, str], key: str | None) -> None:
    url, _ = server
    with BetterCompute(url, key) as bc, pytest.raises(UnauthenticatedError) as excinfo:
        bc.iam.who_am_i(iamv1.WhoAmIRequest())
    err = excinfo.value
    assert isinstance(err, BetterComputeError)
    assert isinstance(err, ConnectError)
    assert err.code == Code.UNAUTHENTICATED
    assert err.message


def test_auth_failure_async(server: tuple[str, str]) -> None:
    url, _ = server

    async def call() -> None:
        async with AsyncBetterCompute(url, "bck_nope_nope") as bc:
            await bc.iam.who_am_i(iamv1.WhoAmIRequest())

    with pytest.raises(UnauthenticatedError):
        asyncio.run(call())


def test_unknown_id_is_not_found_error(server: tuple[str, str]) -> None:
    url, key = server
    with BetterCompute(url, key) as bc, pytest.raises(NotFoundError):
        bc.nodes.get(nodesv1.GetRequest(id="00000000-0000-0000-0000-000000000000"))


def test_pagination(server: tuple[str, str]) -> None:
    url, key = server
    prefix = f"py-page-{time.time_ns():x}"
    with BetterCompute(url, key) as bc:
        want = {
            bc.iam.create_principal(
                iamv1.CreatePrincipalRequest(
                    kind=iamv1.PRINCIPAL_KIND_SERVICE_ACCOUNT, name=f"{prefix}-{i}"
                )
            ).principal.id
            for i in range(5)
        }
        pages = 0

        def page(token: str) -> iamv1.ListPrincipalsResponse:
            nonlocal pages
            pages += 1
            return bc.iam.list_principals(
                iamv1.ListPrincipalsRequest(page_size=2, page_token=token)
            )

        seen = [p.id for p in paginate(page, lambda r: r.principals)]
    assert len(seen) == len(set(seen)), "a principal came twice"
    assert want <= set(seen)
    assert pages >= 3

    async def all_async() -> list[str]:
        async with AsyncBetterCompute(url, key) as abc:
            return [
                p.id
                async for p in apaginate(
                    lambda t: abc.iam.list_principals(
                        iamv1.ListPrincipalsRequest(page_size=2, page_token=t)
                    ),
                    lambda r: r.principals,
                )
            ]

    assert sorted(asyncio.run(all_async())) == sorted(seen)
