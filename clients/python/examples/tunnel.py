"""The "Tunnels" example of README.md.

tests/test_tunnel.py runs it against a fake of the API's tunnel endpoint (no server) and checks
that the README shows its body as it is here.
"""

from __future__ import annotations

import socket
import threading
from typing import BinaryIO

from better_compute import BetterCompute, TunnelAbortError, open_tunnel


def copy_through_tunnel(bc: BetterCompute, node_id: str, source: BinaryIO, sink: BinaryIO) -> None:
    """Opens a tunnel to port 22 of node node_id and copies bytes: source to the node's sshd, its answer to sink."""
    with open_tunnel(bc, node_id, 22) as t:
        print("tunnel", t.tunnel.id, "open")

        def send() -> None:
            try:
                while data := source.read(65536):
                    t.sendall(data)
                t.shutdown(socket.SHUT_WR)  # the node's end reads EOF; its answer keeps coming
            except TunnelAbortError:
                pass  # recv raises it too

        sender = threading.Thread(target=send, daemon=True)
        sender.start()
        try:
            while data := t.recv(65536):  # b"" once the node's end closed its side
                sink.write(data)
        except TunnelAbortError as e:  # why, for example 4005: nothing listens on the port on the node
            print("tunnel aborted:", e.code, e.reason)
            raise
        sender.join()
