"""A minimal blocking Kafka-protocol client over a plain socket, built on ``litemq.protocol``.

For tests and tools that need to send exact bytes (including malformed ones) and read the
answer: ``WireClient(host, port).request(api_key, version, body) -> response message``.
``ssl_context`` wraps the socket in TLS; :meth:`WireClient.sasl_plain` and
:meth:`WireClient.sasl_scram` authenticate it (SaslHandshake v1 + SaslAuthenticate, KIP-152).
"""

from __future__ import annotations

import socket
import ssl
import struct

import scramp

from litemq.protocol import frames


class WireSaslError(Exception):
    """A SaslHandshake or SaslAuthenticate answered an error: ``error_code`` and ``error_message``."""

    def __init__(self, api_key: int, error_code: int, error_message: str | None) -> None:
        super().__init__(f"api_key={api_key} error_code={error_code}: {error_message}")
        self.api_key = api_key
        self.error_code = error_code
        self.error_message = error_message


class WireClient:
    """One TCP (or TLS) connection; requests are sent and answered one at a time.

    Args:
        ssl_context: a client :class:`ssl.SSLContext` to speak TLS (SSL / SASL_SSL listeners).
        server_hostname: the name checked against the broker certificate (default ``host``).
        source_address: the local ``(host, port)`` to connect from (another loopback address
            such as ``127.0.0.2`` looks like another client IP to the broker).
    """

    def __init__(self, host: str, port: int, timeout_s: float = 10.0, ssl_context: ssl.SSLContext | None = None,
                 server_hostname: str | None = None, source_address: tuple[str, int] | None = None) -> None:
        sock = socket.create_connection((host, port), timeout=timeout_s, source_address=source_address)
        if ssl_context is not None:
            try:
                sock = ssl_context.wrap_socket(sock, server_hostname=server_hostname or host)
            except BaseException:
                sock.close()
                raise
        self.sock = sock
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

    # ------------------------------------------------------------ SASL (KIP-43, KIP-152)
    def sasl_handshake(self, mechanism: str, version: int = 1):
        """SaslHandshake; returns the response, raises :class:`WireSaslError` on an error code."""
        resp = self.request(17, version, {"mechanism": mechanism})
        if resp.error_code:
            raise WireSaslError(17, resp.error_code, f"enabled mechanisms {list(resp.mechanisms)}")
        return resp

    def sasl_authenticate(self, auth_bytes: bytes, version: int = 2):
        """One SaslAuthenticate; returns the response, raises :class:`WireSaslError` on an error code."""
        resp = self.request(36, version, {"auth_bytes": auth_bytes})
        if resp.error_code:
            raise WireSaslError(36, resp.error_code, resp.error_message)
        return resp

    def sasl_plain(self, user: str, password: str, authzid: str = "", version: int = 2):
        """Authenticate with SASL/PLAIN (RFC 4616); returns the SaslAuthenticate response
        (``session_lifetime_ms`` from v1). Raises :class:`WireSaslError`."""
        self.sasl_handshake("PLAIN")
        return self.sasl_authenticate(f"{authzid}\0{user}\0{password}".encode(), version)

    def sasl_scram(self, mechanism: str, user: str, password: str, version: int = 2):
        """Authenticate with SCRAM-SHA-256/512 (RFC 5802/7677) and check the server signature;
        returns the last SaslAuthenticate response. Raises :class:`WireSaslError`, or
        ``scramp.ScramException`` when the server's proof is wrong."""
        self.sasl_handshake(mechanism)
        client = scramp.ScramClient([mechanism], user, password)
        first = self.sasl_authenticate(client.get_client_first().encode(), version)
        client.set_server_first(first.auth_bytes.decode())
        final = self.sasl_authenticate(client.get_client_final().encode(), version)
        client.set_server_final(final.auth_bytes.decode())
        return final

    def is_closed_by_peer(self, timeout_s: float = 5.0) -> bool:
        """True when the broker closes this connection within ``timeout_s``."""
        self.sock.settimeout(timeout_s)
        try:
            return self.sock.recv(1) == b""
        except (ConnectionResetError, BrokenPipeError, ssl.SSLError):
            return True
        except socket.timeout:
            return False

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> "WireClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
