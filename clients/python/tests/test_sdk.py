"""The convenience clients against a live server.

scripts/test starts ``better-compute dev`` and exports BETTER_COMPUTE_URL and
BETTER_COMPUTE_API_KEY (the admin key it prints as "API key:").
"""

from __future__ import annotations

import asyncio
import os
import time

import pytest
from connectrpc.errors import ErrorDetail
from protobuf.wkt import Any

from better_compute import (
    AsyncBetterCompute,
    BetterCompute,
    BetterComputeError,
    Code,
    ConnectError,
    FieldViolation,
    InvalidArgumentError,
    NotFoundError,
    UnauthenticatedError,
    apaginate,
    commandsv1,
    daemonv1,
    error_from,
    field_violations,
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


@pytest.mark.parametrize("json", [False, True])
def test_invalid_request_names_the_field(server: tuple[str, str], json: bool) -> None:
    url, key = server
    with BetterCompute(url, key, json=json) as bc:
        with pytest.raises(InvalidArgumentError) as excinfo:
            bc.nodes.get(nodesv1.GetRequest(id="not-a-uuid"))
    assert excinfo.value.field_violations == [
        FieldViolation(field="id", description='must be a UUID, got "not-a-uuid"')
    ]


@pytest.mark.parametrize("json", [False, True])
def test_typed_commands(server: tuple[str, str], json: bool) -> None:
    url, key = server
    node_id = "00000000-0000-0000-0000-000000000000"
    with BetterCompute(url, key, json=json) as bc:
        with pytest.raises(InvalidArgumentError) as excinfo:
            bc.commands.create(commandsv1.CreateRequest(node_id=node_id))
        assert [v.field for v in excinfo.value.field_violations] == ["payload"]
        with pytest.raises(InvalidArgumentError) as excinfo:
            bc.commands.create(commandsv1.CreateRequest(node_id=node_id, exec=daemonv1.ExecPayload(path="nvidia-smi")))
        assert [v.field for v in excinfo.value.field_violations] == ["exec.path"]
        # A valid command for a node that does not exist.
        with pytest.raises(NotFoundError):
            bc.commands.create(
                commandsv1.CreateRequest(
                    node_id=node_id, exec=daemonv1.ExecPayload(path="/usr/bin/nvidia-smi", args=["-L"])
                )
            )


def _string(number: int, value: str) -> bytes:
    raw = value.encode()
    return bytes([number << 3 | 2, len(raw)]) + raw


def test_field_violations_decoding() -> None:
    # Two violations, one with fields this SDK does not read (reason, 3; a varint, 9); then a
    # detail of another type and a truncated one, which say nothing about fields.
    first = _string(1, "pool_id") + _string(2, "must be a UUID") + _string(3, "BAD") + b"\x48\x01"
    second = _string(1, "tolerations[0].operator") + _string(2, "must be Equal or Exists")
    bad_request = bytes([0x0A, len(first)]) + first + bytes([0x0A, len(second)]) + second
    details = [
        ErrorDetail(Any(type_url="type.googleapis.com/google.rpc.BadRequest", value=bad_request)),
        ErrorDetail(Any(type_url="type.googleapis.com/google.rpc.ErrorInfo", value=_string(1, "X"))),
        ErrorDetail(Any(type_url="type.googleapis.com/google.rpc.BadRequest", value=b"\x0a\x7f")),
    ]
    err = error_from(ConnectError(Code.INVALID_ARGUMENT, "bad", details))
    want = [
        FieldViolation(field="pool_id", description="must be a UUID"),
        FieldViolation(field="tolerations[0].operator", description="must be Equal or Exists"),
    ]
    assert isinstance(err, InvalidArgumentError)
    assert err.field_violations == want
    assert field_violations(ConnectError(Code.INVALID_ARGUMENT, "bad", details)) == want
    assert error_from(ConnectError(Code.NOT_FOUND, "gone")).field_violations == []


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
