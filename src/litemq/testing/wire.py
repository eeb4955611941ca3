"""A minimal blocking Kafka-protocol client over a plain socket, built on ``litemq.protocol``.

For tests and tools that need to send exact bytes (including malformed ones) and read the
answer: ``WireClient(host, port).request(api_key, version, body) -> response message``.
"""

from __future__ import annotations

import socket
import struct

from litemq.protocol import frames


class WireClient:
    """One TCP connection; requests are sent and answered one at a time."""

    def __init__(self, host: str, port: int, timeout_s: float = 10.0) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout_s)
        self._correlation_id = 0

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def read_frame(self) -> bytes:
        """One response frame without its size prefix; ConnectionError when the peer closed."""
        size = struct.unpack(">i", self._read_exact(4))[0]
        return self._read_exact(size)

    def _read_exact(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("connection closed by broker")
            buf += chunk
        return bytes(buf)

    def request(self, api_key: int, version: int, body, client_id: str | None = "wire-test"):
        """Send one request and return the decoded response body."""
        self._correlation_id += 1
        self.send_raw(frames.encode_request(api_key, version, self._correlation_id, client_id, body))
        corr, msg = frames.decode_response(api_key, version, self.read_frame())
        assert corr == self._correlation_id, (corr, self._correlation_id)
        return msg

    def is_closed_by_peer(self, timeout_s: float = 5.0) -> bool:
        """True when the broker closes this connection within ``timeout_s``."""
        self.sock.settimeout(timeout_s)
        try:
            return self.sock.recv(1) == b""
        except (ConnectionResetError, BrokenPipeError):
            return True
        except socket.timeout:
            return False

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> "WireClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
