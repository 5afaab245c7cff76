"""Tunnels: a byte stream to a TCP port on a node's loopback, as a socket-like object.

    from better_compute import BetterCompute, open_tunnel

    with BetterCompute(URL, api_key=KEY) as bc, open_tunnel(bc, node_id, 22) as t:
        t.sendall(b"SSH-2.0-me\\r\\n")
        t.shutdown(socket.SHUT_WR)          # half-close: the node's end reads EOF
        while data := t.recv(65536):        # b"" once the node's end closed its side
            print(data)

:func:`open_tunnel` creates a ticket with ``tunnels.create`` and opens it, with the client's API
key, as a WebSocket of the subprotocol ``bettercompute.tunnel.v1`` (docs/tunnels.md): one binary
message is one frame, a type byte (0 data, 1 close-write, 2 abort) and its payload. The
WebSocket is spoken here, over the standard library's ``socket`` and ``ssl``, so the SDK needs
no WebSocket package. A tunnel that ends otherwise than by both sides closing raises
:class:`TunnelAbortError` (its ``code`` is a close code of :data:`CLOSE_CODES`); a refused
opening raises :class:`TunnelRefusedError` with the HTTP status (:data:`REFUSALS`).
"""

from __future__ import annotations

import base64
import hashlib
import os
import socket
import ssl
import threading
import time
from http import HTTPStatus
from typing import TYPE_CHECKING, Self
from urllib.parse import urlsplit

from bettercompute.tunnels.v1 import tunnels_pb2

if TYPE_CHECKING:
    from types import TracebackType

    from .client import BetterCompute

__all__ = [
    "ABORT",
    "CLOSE_CODES",
    "CLOSE_WRITE",
    "DATA",
    "MAX_PAYLOAD",
    "REFUSALS",
    "SUBPROTOCOL",
    "Tunnel",
    "TunnelAbortError",
    "TunnelRefusedError",
    "abort_payload",
    "connect_tunnel",
    "encode_message",
    "open_tunnel",
    "parse_abort",
    "parse_message",
]

SUBPROTOCOL = "bettercompute.tunnel.v1"
"""The WebSocket subprotocol of tunnels."""

MAX_PAYLOAD = 64 * 1024
"""The largest payload of one frame: :meth:`Tunnel.sendall` cuts data into frames of at most this."""

DATA = 0
"""Frame type: bytes of the stream."""
CLOSE_WRITE = 1
"""Frame type: the sender sends no more (a half-close); the other direction keeps flowing."""
ABORT = 2
"""Frame type: the tunnel ends at once, with a close code and a reason."""

CLOSE_CODES: dict[int, str] = {
    1000: "closed by both sides",
    1001: "the API is shutting down",
    1011: "internal error",
    4000: "idle for too long",
    4001: "the lease that allowed the tunnel ended",
    4002: "the node was revoked, retired or drained",
    4003: "the node's daemon does not allow the port",
    4004: "the node is offline or did not answer",
    4005: "nothing listens on the port on the node",
    4006: "the gateway or the node's stream went away",
    4007: "protocol error",
    4008: "closed by an operator",
    4009: "a connection at one end was reset",
}
"""Why a tunnel ended: the WebSocket close codes of docs/tunnels.md and what each means."""

REFUSALS: dict[int, str] = {
    401: "an API key is required",
    404: "no such ticket",
    403: "the ticket is another tenant's",
    409: "the ticket was used already",
    410: "the ticket expired",
    426: f"a WebSocket upgrade with subprotocol {SUBPROTOCOL} is required",
    429: "too many open tunnels for the node or the tenant",
    503: "the node has no session with a gateway",
    412: "the tunnel is no longer allowed (lease ended, node gone)",
}
"""Why the API refused to open a tunnel, by HTTP status (docs/tunnels.md); nothing was opened."""

_CODE_GATEWAY_LOST = 4006
_CODE_PROTOCOL = 4007
_CODE_RESET = 4009
_MAX_REASON = 123  # bytes: what a WebSocket close frame can carry
_MAX_HEAD = 16 * 1024  # of the upgrade's response headers
_WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
_OP_CONTINUATION, _OP_TEXT, _OP_BINARY, _OP_CLOSE, _OP_PING, _OP_PONG = 0x0, 0x1, 0x2, 0x8, 0x9, 0xA


class TunnelAbortError(Exception):
    """A tunnel that ended before both sides closed it: ``code`` (a close code, for example 4005:
    nothing listens on the port on the node) and ``reason``."""

    def __init__(self, code: int, reason: str = "") -> None:
        what = f"{code} ({CLOSE_CODES.get(code, 'unknown')})"
        super().__init__(f"tunnel aborted: {what}: {reason}" if reason else f"tunnel aborted: {what}")
        self.code = code
        self.reason = reason


class TunnelRefusedError(Exception):
    """A tunnel the API refused to open: the HTTP ``status`` (:data:`REFUSALS`) and ``reason``,
    the API's text: the documented reason and a detail ("the ticket was used already: a ticket
    opens one tunnel: create another")."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(f"tunnel refused: HTTP {status}: {reason}")
        self.status = status
        self.reason = reason


def encode_message(frame_type: int, payload: bytes = b"") -> bytes:
    """A frame as its WebSocket message: the type byte, then the payload."""
    if len(payload) > MAX_PAYLOAD:
        raise ValueError(f"a frame's payload is at most {MAX_PAYLOAD} bytes")
    return bytes([frame_type]) + bytes(payload)


def parse_message(msg: bytes) -> tuple[int, bytes]:
    """Reads a WebSocket message as a frame, ``(type, payload)``; raises on a malformed one."""
    if not msg or msg[0] > ABORT or len(msg) - 1 > MAX_PAYLOAD:
        raise TunnelAbortError(_CODE_PROTOCOL, f"a WebSocket message of {len(msg)} bytes")
    return msg[0], bytes(msg[1:])


def abort_payload(code: int, reason: str) -> bytes:
    """An abort frame's payload: the code (uint16, big endian), then the reason, cut to 123 bytes
    of UTF-8 (never inside a character)."""
    r = reason.encode()
    if len(r) > _MAX_REASON:
        n = _MAX_REASON
        while n > 0 and r[n] & 0xC0 == 0x80:
            n -= 1
        r = r[:n]
    return code.to_bytes(2, "big") + r


def parse_abort(payload: bytes) -> tuple[int, str]:
    """Reads an abort frame's payload, ``(code, reason)``."""
    if len(payload) < 2:
        return _CODE_PROTOCOL, "abort frame without a code"
    return int.from_bytes(payload[:2], "big"), bytes(payload[2:]).decode(errors="replace")


def _ws_frame(opcode: int, payload: bytes | memoryview, frame_type: int | None = None) -> bytes:
    """A masked client WebSocket frame; with frame_type, its byte comes before payload."""
    body = bytes(payload) if frame_type is None else bytes([frame_type]) + bytes(payload)
    n = len(body)
    if n < 126:
        head = bytes([0x80 | opcode, 0x80 | n])
    elif n < 65536:
        head = bytes([0x80 | opcode, 0x80 | 126]) + n.to_bytes(2, "big")
    else:
        head = bytes([0x80 | opcode, 0x80 | 127]) + n.to_bytes(8, "big")
    key = os.urandom(4)
    return head + key + _mask(body, key)


def _mask(data: bytes, key: bytes) -> bytes:
    n = len(data)
    if n == 0:
        return b""
    k = (key * (n // 4 + 1))[:n]
    return (int.from_bytes(data, "little") ^ int.from_bytes(k, "little")).to_bytes(n, "little")


def open_tunnel(
    bc: BetterCompute,
    node_id: str,
    port: int,
    *,
    api_key: str | None = None,
    timeout: float | None = 30.0,
    ssl_context: ssl.SSLContext | None = None,
) -> Tunnel:
    """Opens a tunnel to ``port`` on the loopback of node ``node_id``.

    Creates a ticket with ``bc.tunnels.create`` and opens it as a WebSocket with the client's API
    key (or ``api_key``). ``timeout`` bounds the opening (seconds; the open tunnel blocks until
    :meth:`Tunnel.settimeout` says otherwise); ``ssl_context`` verifies a ``wss://`` API (default:
    the system's CAs). The node's spec, or the pool of a lease the caller holds on it, must list
    the port in ``tunnel_ports``, and its daemon must allow it.

    Raises:
        TunnelRefusedError: the API refused the upgrade (nothing was opened).
        BetterComputeError: ``tunnels.create`` failed (for example a port not allowed).
    """
    if not 1 <= port <= 65535:
        raise ValueError(f"port must be 1 to 65535, got {port}")
    key = api_key if api_key is not None else bc._api_key
    if not key:
        raise ValueError("open_tunnel needs an API key: create the client with api_key, or pass api_key")
    res = bc.tunnels.create(tunnels_pb2.CreateRequest(node_id=node_id, port=port))
    t = connect_tunnel(res.url, key, timeout=timeout, ssl_context=ssl_context)
    t.tunnel = res.tunnel
    return t


def connect_tunnel(
    url: str,
    api_key: str,
    *,
    timeout: float | None = 30.0,
    ssl_context: ssl.SSLContext | None = None,
) -> Tunnel:
    """Opens a ticket's URL (``tunnels.create``'s ``url``) as a tunnel; :func:`open_tunnel` does both."""
    u = urlsplit(url)
    if u.scheme not in ("ws", "wss", "http", "https") or not u.hostname:
        raise ValueError(f"a tunnel URL is ws:// or wss://, got {url!r}")
    secure = u.scheme in ("wss", "https")
    deadline = None if timeout is None else time.monotonic() + timeout
    sock: socket.socket = socket.create_connection((u.hostname, u.port or (443 if secure else 80)), timeout=timeout)
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if secure:
            sock = (ssl_context or ssl.create_default_context()).wrap_socket(sock, server_hostname=u.hostname)
        key = base64.b64encode(os.urandom(16)).decode()
        path = (u.path or "/") + (f"?{u.query}" if u.query else "")
        sock.sendall(
            (
                f"GET {path} HTTP/1.1\r\nHost: {u.netloc.rpartition('@')[2]}\r\n"
                "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
                f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Protocol: {SUBPROTOCOL}\r\n"
                f"Authorization: Bearer {api_key}\r\nX-Better-Compute: 1\r\n\r\n"
            ).encode()
        )
        status, headers, rest = _read_response_head(sock, deadline)
        if status != 101:
            raise TunnelRefusedError(status, _refusal_reason(sock, headers, rest, deadline, status))
        accept = base64.b64encode(hashlib.sha1((key + _WS_GUID).encode()).digest()).decode()
        if headers.get("upgrade", "").lower() != "websocket" or headers.get("sec-websocket-accept") != accept:
            raise ConnectionError("the API's answer to the tunnel's upgrade is not a WebSocket handshake")
        if headers.get("sec-websocket-protocol") != SUBPROTOCOL:
            raise ConnectionError(f"the API chose subprotocol {headers.get('sec-websocket-protocol')!r}, not {SUBPROTOCOL}")
        sock.settimeout(None)
        return Tunnel(sock, rest)
    except BaseException:
        sock.close()
        raise


def _recv_by(sock: socket.socket, deadline: float | None) -> bytes:
    if deadline is not None:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the tunnel's upgrade timed out")
        sock.settimeout(left)
    return sock.recv(65536)


def _read_response_head(sock: socket.socket, deadline: float | None) -> tuple[int, dict[str, str], bytes]:
    """Reads the status and headers (names in lower case) of the upgrade's response, and the
    bytes that came after them."""
    buf = b""
    while b"\r\n\r\n" not in buf:
        if len(buf) > _MAX_HEAD:
            raise ConnectionError("the API's answer to the tunnel's upgrade has headers over 16 KiB")
        chunk = _recv_by(sock, deadline)
        if not chunk:
            raise ConnectionError("the API closed the connection during the tunnel's upgrade")
        buf += chunk
    head, _, rest = buf.partition(b"\r\n\r\n")
    lines = head.decode("iso-8859-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/") or not parts[1].isdigit():
        raise ConnectionError(f"the API answered the tunnel's upgrade with {lines[0]!r}")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        name = name.strip().lower()
        headers[name] = f"{headers[name]}, {value.strip()}" if name in headers else value.strip()
    return int(parts[1]), headers, rest


def _refusal_reason(sock: socket.socket, headers: dict[str, str], body: bytes, deadline: float | None, status: int) -> str:
    """Why the upgrade was refused: the first line of a text/plain body (the API writes the
    documented reason and a detail; at most 1 KiB of it is read), else the documented reason of
    the status, else its phrase."""
    if headers.get("content-type", "").startswith("text/plain"):
        want = min(int(headers.get("content-length", "1024") or 0), 1024)
        try:
            while len(body) < want:
                chunk = _recv_by(sock, deadline)
                if not chunk:
                    break
                body += chunk
        except OSError:
            pass
        if line := body[:1024].decode(errors="replace").split("\n")[0].strip():
            return line
    if status in REFUSALS:
        return REFUSALS[status]
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "refused"


def _parse_ws_frame(b: bytearray) -> tuple[bool, int, bytes] | None:
    """Takes one WebSocket frame, (fin, opcode, payload), off the start of b; None until it is
    all there."""
    if len(b) < 2:
        return None
    if b[0] & 0x70:
        raise TunnelAbortError(_CODE_PROTOCOL, "a WebSocket frame with reserved bits")
    n, off = b[1] & 0x7F, 2
    if n == 126:
        if len(b) < 4:
            return None
        n, off = int.from_bytes(b[2:4], "big"), 4
    elif n == 127:
        if len(b) < 10:
            return None
        n, off = int.from_bytes(b[2:10], "big"), 10
    if n > 1 + MAX_PAYLOAD:
        raise TunnelAbortError(_CODE_PROTOCOL, f"a WebSocket frame of {n} bytes")
    key = bytes(b[off : off + 4]) if b[1] & 0x80 else None
    if key is not None:
        off += 4
    if len(b) < off + n:
        return None
    payload = bytes(b[off : off + n])
    if key is not None:
        payload = _mask(payload, key)
    fin, opcode = bool(b[0] & 0x80), b[0] & 0x0F
    del b[: off + n]
    return fin, opcode, payload


class _NormalClose(Exception):
    """The API closed the WebSocket normally (both sides had closed)."""


class Tunnel:
    """An open tunnel, used like a connected socket.

    :meth:`sendall` sends (in frames of at most 64 KiB), :meth:`shutdown` with
    ``socket.SHUT_WR`` half-closes (the node's end reads EOF, and its answer keeps coming),
    :meth:`recv` returns ``b""`` once the node's end closed its side. An aborted tunnel raises
    :class:`TunnelAbortError` from both. :meth:`close` (or leaving a ``with`` block) before both
    sides closed resets the tunnel (4009 at the node's end). One thread may receive while another
    sends. :meth:`settimeout` bounds each receive (a timed-out receive loses nothing); a send that
    times out breaks the tunnel. Keep receiving while the tunnel is open, as with a socket: the
    API's pings are answered by receiving (and, once the node's end closed its side, by a thread
    of the tunnel's own).

    ``tunnel`` is the tunnel ``tunnels.create`` returned (its ``id`` for ``tunnels.close``), or
    None when opened with :func:`connect_tunnel`.
    """

    def __init__(self, sock: socket.socket, buffered: bytes = b"") -> None:
        self.tunnel: tunnels_pb2.Tunnel | None = None
        self._sock = sock
        self._buf = bytearray(buffered)  # received, not yet parsed
        self._fragments: bytearray | None = None
        self._pending = memoryview(b"")  # unread bytes of the last data frame
        self._rlock = threading.Lock()
        self._wlock = threading.RLock()  # re-entered by _fail from a failed send
        self._read_done = False  # the node's end's close-write came
        self._write_done = False  # ours went
        self._close_sent = False
        self._error: BaseException | None = None  # what ended the tunnel
        self._closed = False
        self._drainer: threading.Thread | None = None

    # ---- receiving

    def recv(self, bufsize: int) -> bytes:
        """Up to ``bufsize`` bytes from the node's end; ``b""`` once it closed its side."""
        with self._rlock:
            while not self._pending:
                if self._read_done:
                    return b""
                self._check()
                try:
                    frame_type, payload = parse_message(self._next_message())
                except TimeoutError:
                    raise
                except (OSError, TunnelAbortError, _NormalClose) as e:
                    raise self._fail(e) from None
                if frame_type == DATA:
                    self._pending = memoryview(payload)
                elif frame_type == CLOSE_WRITE:
                    self._read_done = True
                    self._drainer = threading.Thread(target=self._drain, name="better-compute tunnel", daemon=True)
                    self._drainer.start()
                    return b""
                else:
                    raise self._fail(TunnelAbortError(*parse_abort(payload)))
            out = bytes(self._pending[:bufsize])
            self._pending = self._pending[len(out) :]
            return out

    def _drain(self) -> None:
        """Reads what follows the node's end's close-write: nothing but an abort, until the API
        closes the WebSocket."""
        while not self._closed:
            try:
                frame_type, payload = parse_message(self._next_message())
            except TimeoutError:
                continue
            except _NormalClose:
                return
            except (OSError, TunnelAbortError) as e:
                self._fail(e)
                return
            if frame_type == ABORT:
                self._fail(TunnelAbortError(*parse_abort(payload)))
            else:
                self._fail(TunnelAbortError(_CODE_PROTOCOL, "a frame after close-write"))
            return

    def _next_message(self) -> bytes:
        """The next data message, answering control frames on the way."""
        while True:
            fin, opcode, payload = self._next_ws_frame()
            if opcode == _OP_PING:
                self._send_ws(_OP_PONG, payload)
            elif opcode == _OP_PONG:
                pass
            elif opcode == _OP_CLOSE:
                code, reason = parse_abort(payload) if len(payload) >= 2 else (1005, "")
                self._send_close(code, reason)  # the answer: the same code
                if code not in (1000, 1005):
                    raise TunnelAbortError(code, reason)
                if not self._read_done:
                    raise TunnelAbortError(_CODE_GATEWAY_LOST, "the stream ended without closing")
                raise _NormalClose()
            elif opcode == _OP_BINARY and self._fragments is None:
                if fin:
                    return payload
                self._fragments = bytearray(payload)
            elif opcode == _OP_CONTINUATION and self._fragments is not None:
                self._fragments += payload
                if len(self._fragments) > 1 + MAX_PAYLOAD:
                    raise TunnelAbortError(_CODE_PROTOCOL, f"a message over {1 + MAX_PAYLOAD} bytes")
                if fin:
                    msg, self._fragments = bytes(self._fragments), None
                    return msg
            else:
                raise TunnelAbortError(_CODE_PROTOCOL, f"an unexpected WebSocket frame (opcode {opcode})")

    def _next_ws_frame(self) -> tuple[bool, int, bytes]:
        """Reads one WebSocket frame: (fin, opcode, payload)."""
        while (frame := _parse_ws_frame(self._buf)) is None:
            chunk = self._sock.recv(2 * MAX_PAYLOAD)
            if not chunk:
                raise ConnectionError("tunnel: the connection to the API was lost")
            self._buf += chunk
        return frame

    # ---- sending

    def sendall(self, data: bytes | bytearray | memoryview) -> None:
        """Sends all of ``data``, in frames of at most 64 KiB."""
        view = memoryview(data).cast("B")
        with self._wlock:
            self._check()
            if self._write_done:
                raise BrokenPipeError("tunnel: send after shutdown(SHUT_WR)")
            try:
                for off in range(0, len(view), MAX_PAYLOAD):
                    self._sock.sendall(_ws_frame(_OP_BINARY, view[off : off + MAX_PAYLOAD], DATA))
            except OSError as e:
                raise self._fail(e) from None

    def send(self, data: bytes | bytearray | memoryview) -> int:
        """Sends all of ``data`` (as :meth:`sendall`) and returns its length."""
        self.sendall(data)
        return len(memoryview(data).cast("B"))

    def shutdown(self, how: int) -> None:
        """``socket.SHUT_WR`` (or ``SHUT_RDWR``) half-closes: the node's end reads EOF, and
        receiving goes on. ``SHUT_RD`` does nothing."""
        if how == socket.SHUT_RD:
            return
        with self._wlock:
            if self._write_done:
                return
            self._check()
            try:
                self._sock.sendall(_ws_frame(_OP_BINARY, b"", CLOSE_WRITE))
            except OSError as e:
                raise self._fail(e) from None
            self._write_done = True

    def _send_ws(self, opcode: int, payload: bytes) -> None:
        with self._wlock:
            if not self._close_sent:
                self._sock.sendall(_ws_frame(opcode, payload))

    def _send_close(self, code: int, reason: str, wait: float = -1) -> None:
        """Sends a close frame, once; errors are moot by then. With wait, gives up after that
        many seconds of another thread's send blocking it."""
        if not self._wlock.acquire(timeout=wait):
            return
        try:
            if self._close_sent:
                return
            self._close_sent = True
            self._sock.sendall(_ws_frame(_OP_CLOSE, b"" if code == 1005 else abort_payload(code, reason)))
        except OSError:
            pass
        finally:
            self._wlock.release()

    # ---- the end

    def _check(self) -> None:
        if self._error is not None:
            raise self._error

    def _fail(self, err: BaseException) -> BaseException:
        """Ends the tunnel for err, unless it ended already, and returns what ended it."""
        if self._error is None:
            if isinstance(err, TunnelAbortError):
                if err.code == _CODE_PROTOCOL:  # ours to report
                    try:
                        with self._wlock:
                            self._sock.sendall(_ws_frame(_OP_BINARY, abort_payload(err.code, err.reason), ABORT))
                    except OSError:
                        pass
                self._send_close(err.code, err.reason)
            elif isinstance(err, _NormalClose):
                err = TunnelAbortError(_CODE_GATEWAY_LOST, "the stream ended without closing")
            self._error = err
            self._shut()
        return self._error

    def _shut(self) -> None:
        try:
            self._sock.shutdown(socket.SHUT_RDWR)  # wakes a blocked receive
        except OSError:
            pass

    def close(self) -> None:
        """Ends the tunnel: normally once both sides closed their side, else as a reset."""
        if self._closed:
            return
        if self._error is None:
            if self._read_done and self._write_done:
                self._send_close(1000, "", wait=2)
            else:
                self._send_close(_CODE_RESET, "the client closed the tunnel", wait=2)
            self._error = OSError("tunnel: closed")
            # Let the API answer the close (the drainer reads it), so the end is clean.
            if self._drainer is not None:
                self._drainer.join(timeout=2)
        self._closed = True
        self._shut()
        self._sock.close()

    def settimeout(self, timeout: float | None) -> None:
        """Bounds each receive (and send) to ``timeout`` seconds; None blocks."""
        self._sock.settimeout(timeout)

    def gettimeout(self) -> float | None:
        """The timeout of :meth:`settimeout`."""
        return self._sock.gettimeout()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
