"""The tunnel helper (better_compute.tunnel): its frames against the Go code's
(client/testdata/tunnel_frames.json, written by client/tunnel_test.go), and the whole helper
against a fake of the API's tunnel endpoint: a WebSocket server written here, apart from the
helper's own WebSocket code, that checks the key, the subprotocol and the masking, and plays the
node's end of the tunnel. No server of the project is needed."""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import io
import json
import os
import re
import socket
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from connectrpc.request import RequestContext

from better_compute import BetterCompute, tunnelsv1
from better_compute.tunnel import (
    ABORT,
    CLOSE_CODES,
    CLOSE_WRITE,
    DATA,
    MAX_PAYLOAD,
    REFUSALS,
    SUBPROTOCOL,
    Tunnel,
    TunnelAbortError,
    TunnelRefusedError,
    abort_payload,
    connect_tunnel,
    encode_message,
    open_tunnel,
    parse_abort,
    parse_message,
)

ROOT = Path(__file__).resolve().parent.parent
VECTORS = json.loads((ROOT.parent.parent / "client" / "testdata" / "tunnel_frames.json").read_text())
KEY = "bck_tunnel_test"
TRAILER = b"\n-- the node's last bytes --\n"


# ---- The frames are the Go code's.


def test_constants_codes_and_refusals_are_the_go_codes() -> None:
    assert SUBPROTOCOL == VECTORS["subprotocol"]
    assert MAX_PAYLOAD == VECTORS["max_payload"]
    assert CLOSE_CODES == {c["code"]: c["description"] for c in VECTORS["codes"]}
    assert REFUSALS == {r["status"]: r["reason"] for r in VECTORS["refusals"]}


@pytest.mark.parametrize("v", VECTORS["messages"], ids=lambda v: v["name"])
def test_message_vectors(v: dict[str, Any]) -> None:
    msg = bytes.fromhex(v["message"])
    frame_type, payload = parse_message(msg)
    assert frame_type == v["type"]
    if frame_type == ABORT:
        assert parse_abort(payload) == (v.get("parsed_code", v.get("code")), v.get("parsed_reason", ""))
        if not v.get("parse_only"):
            assert encode_message(ABORT, abort_payload(v["code"], v.get("reason", ""))) == msg
    else:
        assert payload == bytes.fromhex(v.get("payload", ""))
        assert encode_message(frame_type, payload) == msg


def test_malformed_messages_are_refused() -> None:
    for m in [*VECTORS["invalid_messages"], "00" + "ab" * (MAX_PAYLOAD + 1)]:
        with pytest.raises(TunnelAbortError):
            parse_message(bytes.fromhex(m))
    assert parse_message(b"\x00" + b"\xab" * MAX_PAYLOAD)[0] == DATA


# ---- The fake API: upgrades GET /api/tunnels/{ticket} and plays the node's end.


class Peer:
    """The server's end of one WebSocket: reads the client's (masked) frames, writes unmasked ones."""

    def __init__(self, sock: socket.socket, buffered: bytes) -> None:
        self.sock = sock
        self.buf = bytearray(buffered)
        self.unmasked = 0  # client frames without a mask: a protocol violation
        self.data_sizes: list[int] = []  # payload sizes of the client's data messages

    def next(self) -> tuple[bool, int, bytes] | None:
        """The client's next frame, (fin, opcode, payload); None once the connection closed."""
        while (frame := self._take()) is None:
            try:
                chunk = self.sock.recv(1 << 17)
            except OSError:
                return None
            if not chunk:
                return None
            self.buf += chunk
        return frame

    def _take(self) -> tuple[bool, int, bytes] | None:
        b = self.buf
        if len(b) < 2:
            return None
        n, at = b[1] & 0x7F, 2
        if n == 126:
            if len(b) < 4:
                return None
            n, at = int.from_bytes(b[2:4], "big"), 4
        elif n == 127:
            if len(b) < 10:
                return None
            n, at = int.from_bytes(b[2:10], "big"), 10
        masked = bool(b[1] & 0x80)
        start = at + 4 if masked else at
        if len(b) < start + n:
            return None
        payload = bytes(b[start : start + n])
        if masked:
            key = bytes(b[at : at + 4])
            payload = bytes(x ^ key[i % 4] for i, x in enumerate(payload))
        else:
            self.unmasked += 1
        frame = (bool(b[0] & 0x80), b[0] & 0x0F, payload)
        del b[: start + n]
        if frame[1] == 0x2 and payload[:1] == bytes([DATA]):
            self.data_sizes.append(n - 1)
        return frame

    def send(self, opcode: int, payload: bytes, fin: bool = True) -> None:
        """Writes a frame, unmasked, as a server does; fin False for a fragment."""
        n = len(payload)
        first = (0x80 if fin else 0) | opcode
        if n < 126:
            head = bytes([first, n])
        elif n < 65536:
            head = bytes([first, 126]) + n.to_bytes(2, "big")
        else:
            head = bytes([first, 127]) + n.to_bytes(8, "big")
        self.sock.sendall(head + payload)

    def send_frame(self, frame_type: int, payload: bytes = b"") -> None:
        self.send(0x2, bytes([frame_type]) + payload)

    def close(self, code: int, reason: str = "") -> int | None:
        """Sends a close frame and waits for the client's; returns its code."""
        self.send(0x8, code.to_bytes(2, "big") + reason.encode())
        while (f := self.next()) is not None:
            if f[1] == 0x8:
                return int.from_bytes(f[2][:2], "big") if len(f[2]) >= 2 else 1005
        return None

    def drain(self) -> int | None:
        """Reads until the client closes or aborts; returns the code."""
        while (f := self.next()) is not None:
            if f[1] == 0x2 and f[2][:1] == bytes([ABORT]):
                return int.from_bytes(f[2][1:3], "big")
            if f[1] == 0x8:
                self.send(0x8, f[2])
                return int.from_bytes(f[2][:2], "big")
        return None


Behaviour = Callable[[Peer], object]


def echo(peer: Peer) -> object:
    """The echo of the Go fake (client/tunneltest): every data frame back; after the client's
    close-write, the trailer, a close-write, and a normal close."""
    while (f := peer.next()) is not None:
        fin, opcode, payload = f
        if opcode == 0x9:
            continue
        if opcode != 0x2:
            return f"opcode {opcode}"
        if payload[0] == DATA:
            peer.send(0x2, payload)
        elif payload[0] == CLOSE_WRITE:
            peer.send_frame(DATA, TRAILER)
            peer.send_frame(CLOSE_WRITE)
            code = peer.close(1000)
            return "ok" if code == 1000 else f"the client closed with {code}"
        else:
            return f"frame type {payload[0]}"
    return "the client went away"


class FakeAPI:
    """The HTTP side: checks the key, the ticket and the subprotocol, refuses as the API does, and
    upgrades a ticket to run its behaviour; results[ticket] is what the behaviour returned."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.base = f"ws://127.0.0.1:{self.listener.getsockname()[1]}"
        self.behaviours: dict[str, Behaviour] = {}
        self.results: dict[str, Future[object]] = {}
        self.upgrades: list[dict[str, str]] = []
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def ticket(self, name: str, behaviour: Behaviour) -> str:
        with self.lock:
            self.behaviours[name] = behaviour
            self.results[name] = Future()
        return f"{self.base}/api/tunnels/{name}"

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            buf = b""
            while b"\r\n\r\n" not in buf:
                chunk = conn.recv(4096)
                if not chunk:
                    return
                buf += chunk
            head, _, rest = buf.partition(b"\r\n\r\n")
            lines = head.decode().split("\r\n")
            path = lines[0].split(" ")[1]
            headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
            name = path.removeprefix("/api/tunnels/")

            def refuse(status: int, reason: str) -> None:
                body = f"{reason}\n".encode() if reason else b""
                conn.sendall(
                    f"HTTP/1.1 {status} Refused\r\nContent-Type: text/plain; charset=utf-8\r\n"
                    f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode() + body
                )

            with self.lock:
                behaviour = self.behaviours.pop(name, None)  # single use
            if headers.get("authorization") != f"Bearer {KEY}":
                return refuse(401, "an API key is required")
            if m := re.fullmatch(r"refuse-(\d+)(-quietly)?", name):
                return refuse(int(m[1]), "" if m[2] else f"{REFUSALS.get(int(m[1]), 'refused')}: by the test")
            if SUBPROTOCOL not in [p.strip() for p in headers.get("sec-websocket-protocol", "").split(",")]:
                return refuse(426, "no subprotocol")
            if behaviour is None:
                return refuse(404, "no such ticket")
            accept = base64.b64encode(hashlib.sha1((headers["sec-websocket-key"] + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest()).decode()
            conn.sendall(
                "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                f"Sec-WebSocket-Accept: {accept}\r\nSec-WebSocket-Protocol: {SUBPROTOCOL}\r\n\r\n".encode()
            )
            self.upgrades.append(headers)
            peer = Peer(conn, rest)
            try:
                result = behaviour(peer)
            except BaseException as e:  # noqa: BLE001 - reported to the test
                result = f"behaviour failed: {e!r}"
            self.results[name].set_result(f"{peer.unmasked} unmasked frames" if peer.unmasked else result)


@pytest.fixture(scope="module")
def api() -> Iterator[FakeAPI]:
    fake = FakeAPI()
    yield fake
    fake.listener.close()


def read_all(t: Tunnel) -> bytes:
    out = bytearray()
    while data := t.recv(1 << 16):
        out += data
    return bytes(out)


def test_bytes_both_ways_in_frames_of_at_most_64_kib_and_half_close(api: FakeAPI) -> None:
    sizes: list[int] = []

    def behaviour(peer: Peer) -> object:
        r = echo(peer)
        sizes.extend(peer.data_sizes)
        return r

    data = os.urandom(1024 * 1024 + 3)
    with connect_tunnel(api.ticket("echo", behaviour), KEY) as t:

        def send() -> None:
            t.sendall(data)
            t.shutdown(socket.SHUT_WR)

        sender = threading.Thread(target=send)
        sender.start()
        got = read_all(t)
        sender.join()
        assert got == data + TRAILER
        assert t.recv(10) == b""
    assert api.results["echo"].result(timeout=10) == "ok"
    assert max(sizes) == MAX_PAYLOAD and sum(sizes) == len(data)
    assert api.upgrades[-1]["authorization"] == f"Bearer {KEY}"
    assert api.upgrades[-1]["x-better-compute"] == "1"


def test_pings_fragments_and_a_receive_timeout(api: FakeAPI) -> None:
    go = threading.Event()

    def behaviour(peer: Peer) -> object:
        peer.send(0x9, b"p1")
        pong = peer.next()
        if pong is None or pong[1] != 0xA or pong[2] != b"p1":
            return f"no pong: {pong}"
        go.wait(10)
        msg = bytes([DATA]) + b"fragmented hello"
        peer.send(0x2, msg[:3], fin=False)
        peer.send(0x9, b"p2")  # a control frame between fragments
        peer.send(0x0, msg[3:9], fin=False)
        peer.send(0x0, msg[9:])
        pong = peer.next()
        if pong is None or pong[1] != 0xA or pong[2] != b"p2":
            return f"no pong: {pong}"
        return echo(peer)

    with connect_tunnel(api.ticket("ping", behaviour), KEY) as t:
        t.settimeout(0.2)
        with pytest.raises(TimeoutError):  # answers the ping on the way; nothing else came
            t.recv(100)
        go.set()
        t.settimeout(10)
        assert t.recv(100) == b"fragmented hello"
        t.sendall(b"bye")
        t.shutdown(socket.SHUT_WR)
        assert read_all(t) == b"bye" + TRAILER
    assert api.results["ping"].result(timeout=10) == "ok"


def abort_frame(peer: Peer) -> object:
    peer.next()
    peer.send_frame(ABORT, abort_payload(4005, "dial tcp 127.0.0.1:22: connection refused"))
    return peer.close(4005, "dial tcp 127.0.0.1:22: connection refused")


def close_code(peer: Peer) -> object:
    peer.next()
    return peer.close(4005, "dial tcp 127.0.0.1:22: connection refused")


@pytest.mark.parametrize("behaviour", [abort_frame, close_code])
def test_an_abort_raises_with_its_code(api: FakeAPI, behaviour: Behaviour) -> None:
    name = behaviour.__name__
    with connect_tunnel(api.ticket(name, behaviour), KEY) as t:
        t.sendall(b"SSH-2.0-test\r\n")
        with pytest.raises(TunnelAbortError) as e:
            t.recv(10)
        assert (e.value.code, e.value.reason) == (4005, "dial tcp 127.0.0.1:22: connection refused")
        assert "4005" in str(e.value)
        with pytest.raises(TunnelAbortError):
            t.sendall(b"x")
    assert api.results[name].result(timeout=10) == 4005  # the client answered the close with its code


def test_close_before_both_sides_closed_resets(api: FakeAPI) -> None:
    t = connect_tunnel(api.ticket("reset", Peer.drain), KEY)
    t.sendall(b"x")
    t.close()
    assert api.results["reset"].result(timeout=10) == 4009


@pytest.mark.parametrize(
    ("ticket", "status", "reason"),
    [
        ("refuse-409", 409, "the ticket was used already: by the test"),
        ("refuse-599", 599, "refused: by the test"),
        ("refuse-503-quietly", 503, "the node has no session with a gateway"),
        ("refuse-502-quietly", 502, "Bad Gateway"),
    ],
)
def test_refusals_carry_the_status_and_the_apis_reason(api: FakeAPI, ticket: str, status: int, reason: str) -> None:
    with pytest.raises(TunnelRefusedError) as e:
        connect_tunnel(f"{api.base}/api/tunnels/{ticket}", KEY)
    assert (e.value.status, e.value.reason) == (status, reason)
    assert str(status) in str(e.value)


def test_a_wrong_key_is_refused(api: FakeAPI) -> None:
    with pytest.raises(TunnelRefusedError) as e:
        connect_tunnel(api.ticket("wrong-key", echo), "bck_wrong")
    assert (e.value.status, e.value.reason) == (401, "an API key is required")


# ---- open_tunnel, through a client whose tunnels.create is answered here.


class Canned:
    """Interceptor that answers tunnels/create with a ticket of the fake, recording the requests."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.calls: list[Any] = []

    def intercept_unary_sync(self, call_next: Callable[..., Any], request: Any, ctx: RequestContext, /) -> Any:
        self.calls.append(request)
        return tunnelsv1.CreateResponse(
            ticket="t", url=self.url, tunnel=tunnelsv1.Tunnel(id="tunnel-1", node_id=request.node_id, port=request.port)
        )


def test_open_tunnel_creates_a_ticket_and_opens_it_with_the_clients_key(api: FakeAPI) -> None:
    canned = Canned(api.ticket("open", echo))
    with BetterCompute("http://canned.invalid/api", KEY, interceptors=[canned]) as bc, open_tunnel(bc, "node-1", 22) as t:
        assert t.tunnel is not None and t.tunnel.id == "tunnel-1"
        t.sendall(b"hello")
        t.shutdown(socket.SHUT_WR)
        assert read_all(t) == b"hello" + TRAILER
    assert canned.calls == [tunnelsv1.CreateRequest(node_id="node-1", port=22)]


def test_open_tunnel_refuses_a_bad_port_or_no_key_before_creating_anything(api: FakeAPI) -> None:
    canned = Canned(api.ticket("nothing", echo))
    with BetterCompute("http://canned.invalid/api", interceptors=[canned]) as bc:
        with pytest.raises(ValueError, match="port"):
            open_tunnel(bc, "node-1", 70000)
        with pytest.raises(ValueError, match="API key"):
            open_tunnel(bc, "node-1", 22)
    assert canned.calls == []


def _load_example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("better_compute_examples_tunnel", ROOT / "examples" / "tunnel.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_readme_example(api: FakeAPI, capsys: pytest.CaptureFixture[str]) -> None:
    readme = (ROOT / "README.md").read_text()
    source = (ROOT / "examples" / "tunnel.py").read_text()
    section = readme.partition("\n## Tunnels\n")[2].partition("\n## ")[0]
    blocks = re.findall(r"^```python\n(.*?)^```$", section, re.M | re.S)
    assert len(blocks) == 1
    assert re.sub(r"^(?=.)", "    ", blocks[0], flags=re.M) in source, "README.md shows code that is not in examples/tunnel.py"

    example = _load_example()
    sink = io.BytesIO()
    with BetterCompute("http://canned.invalid/api", KEY, interceptors=[Canned(api.ticket("example", echo))]) as bc:
        example.copy_through_tunnel(bc, "node-1", io.BytesIO(b"SSH-2.0-example\r\n"), sink)
    assert sink.getvalue() == b"SSH-2.0-example\r\n" + TRAILER
    assert capsys.readouterr().out == "tunnel tunnel-1 open\n"
    assert api.results["example"].result(timeout=10) == "ok"
