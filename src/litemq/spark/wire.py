"""A minimal blocking Kafka-protocol reader used by Spark executors (the read fast path).

It speaks only what a range read needs: Metadata v7 (partition leaders), Fetch v11 (topic
names, isolation level, log start offset, aborted transactions) and ListOffsets v5, over one
TCP connection per broker, with LiteMQ's sans-I/O codec (:mod:`litemq.protocol`). These
versions are served by LiteMQ and by every Kafka broker from 2.3 to 4.x.

Connections may use TLS and SASL (PLAIN, SCRAM-SHA-256/512, OAUTHBEARER), configured with
librdkafka's settings (:mod:`litemq.spark.wire_security`); :func:`supports` tells the reader
when to fall back to confluent-kafka (GSSAPI, keystores, or any other client setting this
module ignores).

Errors: :class:`WireError` (with the Kafka error code when there is one), ``OSError`` for
connection failures (``ssl.SSLError`` included),
:class:`~litemq.spark.wire_security.AuthError` when authentication fails,
:class:`~litemq.protocol.errors.DecodeError` for malformed responses.
"""

from __future__ import annotations

import socket
import struct
import time

import scramp

from litemq.protocol import frames
from litemq.spark.wire_security import SECURITY_SETTINGS, AuthError, Security, security_from_config

METADATA, FETCH, LIST_OFFSETS, SASL_HANDSHAKE, SASL_AUTHENTICATE = 3, 1, 2, 17, 36
METADATA_V, FETCH_V, LIST_OFFSETS_V, SASL_HANDSHAKE_V, SASL_AUTHENTICATE_V = 7, 11, 5, 1, 1
_SESSION_RENEW_FRACTION = 0.9
"""A SASL session with a lifetime (KIP-368) is replaced by a new connection after this much of it."""

OFFSET_OUT_OF_RANGE = 1
RETRIABLE = {3, 5, 6, 7, 9, 13, 14, 15, 19, 56, 74, 75, 100}  # unknown partition, leader moves, epochs...

_SIZE = struct.Struct(">i")
_CLIENT_ID = "litemq-spark"

# Client settings the fast path honours or that do not change what is read.
_HARMLESS = {
    "bootstrap.servers", "security.protocol", "group.id", "client.id", "isolation.level",
    "fetch.max.bytes", "max.partition.fetch.bytes", "fetch.min.bytes", "fetch.wait.max.ms",
    "enable.auto.commit", "auto.offset.reset", "enable.partition.eof", "session.timeout.ms",
    "socket.timeout.ms", "request.timeout.ms", "max.poll.records", "check.crcs",
    "metadata.max.age.ms", "reconnect.backoff.ms", "retry.backoff.ms", "client.rack",
    "api.version.request", "broker.address.family", "log_level",
}


class WireError(Exception):
    """A Kafka error code in a response (``code``), or an unusable answer."""

    def __init__(self, message: str, code: int = -1) -> None:
        super().__init__(message)
        self.code = code


def supports(config: dict) -> bool:
    """True if ``config`` (librdkafka-style client settings) can be served by this module."""
    return all(k in _HARMLESS or k in SECURITY_SETTINGS for k in config) and security_from_config(config) is not None


class _Conn:
    """One connection: TCP, then TLS and SASL when ``security`` asks for them.

    Raises OSError (``ssl.SSLError`` too) when it cannot connect, AuthError when the broker
    refuses the login."""

    def __init__(self, host: str, port: int, timeout_s: float, security: Security | None = None) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout_s)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.corr = 0
        self.renew_at: float | None = None
        """Monotonic time after which the connection is replaced (its SASL session ends soon)."""
        try:
            if security is not None and security.tls:
                self.sock = security.ssl_context().wrap_socket(self.sock, server_hostname=host)
            if security is not None and security.mechanism is not None:
                self._authenticate(security)
        except BaseException:
            self.close()
            raise

    @property
    def stale(self) -> bool:
        return self.renew_at is not None and time.monotonic() >= self.renew_at

    def _sasl(self, mechanism: str, token: bytes):
        resp = self.call(SASL_AUTHENTICATE, SASL_AUTHENTICATE_V, {"auth_bytes": token})
        if resp.error_code:
            raise AuthError(f"SASL {mechanism} authentication failed: {resp.error_message}", resp.error_code)
        return resp

    def _authenticate(self, sec: Security) -> None:
        """SaslHandshake v1 and SaslAuthenticate v1 exchange for ``sec.mechanism`` (KIP-152)."""
        mechanism = sec.mechanism
        hs = self.call(SASL_HANDSHAKE, SASL_HANDSHAKE_V, {"mechanism": mechanism})
        if hs.error_code:
            raise AuthError(f"SASL mechanism {mechanism} refused (error {hs.error_code}); the broker offers "
                            f"{list(hs.mechanisms)}", hs.error_code)
        if mechanism == "PLAIN":
            last = self._sasl(mechanism, f"\0{sec.username}\0{sec.password}".encode())
        elif mechanism.startswith("SCRAM-"):
            client = scramp.ScramClient([mechanism], sec.username, sec.password)
            try:
                first = self._sasl(mechanism, client.get_client_first().encode())
                client.set_server_first(first.auth_bytes.decode())
                last = self._sasl(mechanism, client.get_client_final().encode())
                client.set_server_final(last.auth_bytes.decode())  # the broker proves it knows the key
            except scramp.ScramException as exc:
                raise AuthError(f"SASL {mechanism}: {exc}") from None
        else:  # OAUTHBEARER, RFC 7628: an error is a JSON challenge the client acknowledges with ^A
            last = self._sasl(mechanism, sec.oauth_initial_response())
            if last.auth_bytes:
                self._sasl(mechanism, b"\x01")
                raise AuthError(f"SASL OAUTHBEARER: {bytes(last.auth_bytes).decode(errors='replace')}", 58)
        if last.session_lifetime_ms > 0:
            self.renew_at = time.monotonic() + last.session_lifetime_ms / 1000 * _SESSION_RENEW_FRACTION

    def call(self, api_key: int, version: int, body):
        self.corr += 1
        self.sock.sendall(frames.encode_request(api_key, version, self.corr, _CLIENT_ID, body))
        (size,) = _SIZE.unpack(self._recv(4))
        frame = self._recv(size)
        corr, msg = frames.decode_response(api_key, version, memoryview(frame))
        if corr != self.corr:
            raise WireError(f"correlation id {corr} != {self.corr}")
        return msg

    def _recv(self, n: int) -> bytearray:
        buf = bytearray(n)
        view = memoryview(buf)
        got = 0
        while got < n:
            k = self.sock.recv_into(view[got:], n - got)
            if k == 0:
                raise ConnectionError("broker closed the connection")
            got += k
        return buf

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


class WireClient:
    """Blocking client: ``fetch`` of one partition at a time from its leader.

    Args:
        bootstrap_servers: ``"host:port[,host:port...]"``.
        timeout_s: socket timeout per request (seconds).
        security: TLS/SASL of every connection (:func:`~litemq.spark.wire_security.security_from_config`);
            None: plain TCP.
    """

    def __init__(self, bootstrap_servers: str, timeout_s: float = 30.0, security: Security | None = None) -> None:
        self.bootstrap = [_split_hostport(s) for s in bootstrap_servers.split(",") if s.strip()]
        self.timeout_s = timeout_s
        self.security = security
        self._conns: dict[object, _Conn] = {}
        self._brokers: dict[int, tuple[str, int]] = {}
        self._leaders: dict[tuple[str, int], int] = {}

    def close(self) -> None:
        for c in self._conns.values():
            c.close()
        self._conns.clear()

    def __enter__(self) -> "WireClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _bootstrap_conn(self) -> _Conn:
        if "boot" in self._conns and self._conns["boot"].stale:
            self._drop("boot")
        if "boot" in self._conns:
            return self._conns["boot"]
        last: Exception | None = None
        for host, port in self.bootstrap:
            try:
                c = _Conn(host, port, self.timeout_s, self.security)
            except OSError as exc:
                last = exc
                continue
            self._conns["boot"] = c
            return c
        raise ConnectionError(f"no bootstrap server reachable: {self.bootstrap}: {last}")

    def refresh_metadata(self, topics: list[str]) -> None:
        """Learn brokers and partition leaders of ``topics``. Raises WireError, OSError."""
        c = self._bootstrap_conn()
        try:
            md = c.call(METADATA, METADATA_V, {"topics": [{"name": t} for t in topics],
                                               "allow_auto_topic_creation": False})
        except (OSError, ConnectionError):
            self._drop("boot")
            raise
        self._brokers = {b.node_id: (b.host, b.port) for b in md.brokers}
        for t in md.topics:
            if t.error_code:
                raise WireError(f"metadata for topic {t.name!r}: error {t.error_code}", t.error_code)
            for p in t.partitions:
                self._leaders[(t.name, p.partition_index)] = p.leader_id

    def _drop(self, key) -> None:
        c = self._conns.pop(key, None)
        if c is not None:
            c.close()

    def _leader_conn(self, topic: str, partition: int) -> tuple[int, _Conn]:
        leader = self._leaders.get((topic, partition))
        if leader is None or leader < 0 or leader not in self._brokers:
            self.refresh_metadata([topic])
            leader = self._leaders.get((topic, partition), -1)
            if leader < 0 or leader not in self._brokers:
                raise WireError(f"{topic}-{partition}: no leader", 5)
        c = self._conns.get(leader)
        if c is not None and c.stale:
            self._drop(leader)
            c = None
        if c is None:
            host, port = self._brokers[leader]
            c = _Conn(host, port, self.timeout_s, self.security)
            self._conns[leader] = c
        return leader, c

    def fetch(self, topic: str, partition: int, offset: int, *, max_bytes: int = 8 << 20,
              max_wait_ms: int = 500, isolation_level: int = 0, retries: int = 5):
        """One Fetch of ``topic``-``partition`` from ``offset``.

        Returns the response's partition entry (``records``, ``high_watermark``,
        ``last_stable_offset``, ``log_start_offset``, ``aborted_transactions``). Retries leader
        changes and connection drops ``retries`` times; raises WireError with ``code`` 1
        (OFFSET_OUT_OF_RANGE) when ``offset`` is outside the log, WireError for other errors.
        """
        body = {"replica_id": -1, "max_wait_ms": max_wait_ms, "min_bytes": 1, "max_bytes": max_bytes,
                "isolation_level": isolation_level, "session_id": 0, "session_epoch": -1,
                "topics": [{"topic": topic, "partitions": [
                    {"partition": partition, "current_leader_epoch": -1, "fetch_offset": offset,
                     "log_start_offset": -1, "partition_max_bytes": max_bytes}]}],
                "forgotten_topics_data": [], "rack_id": ""}
        attempt = 0
        while True:
            leader = None
            try:
                leader, c = self._leader_conn(topic, partition)
                resp = c.call(FETCH, FETCH_V, body)
                if resp.error_code:
                    raise WireError(f"fetch: error {resp.error_code}", resp.error_code)
                p = resp.responses[0].partitions[0]
                if p.error_code:
                    raise WireError(f"fetch {topic}-{partition}@{offset}: error {p.error_code}", p.error_code)
                return p
            except (OSError, ConnectionError, WireError) as exc:
                code = getattr(exc, "code", -1)
                if isinstance(exc, WireError) and code not in RETRIABLE:
                    raise
                attempt += 1
                if leader is not None:
                    self._drop(leader)
                self._leaders.pop((topic, partition), None)
                if attempt > retries:
                    raise
                time.sleep(min(0.1 * 2 ** attempt, 2.0))

    def list_offset(self, topic: str, partition: int, timestamp: int, isolation_level: int = 0) -> int:
        """ListOffsets for one partition: -2 earliest, -1 latest, else first offset with a
        timestamp >= ``timestamp`` ms (-1 if none). Raises WireError."""
        _, c = self._leader_conn(topic, partition)
        resp = c.call(LIST_OFFSETS, LIST_OFFSETS_V, {
            "replica_id": -1, "isolation_level": isolation_level,
            "topics": [{"name": topic, "partitions": [
                {"partition_index": partition, "current_leader_epoch": -1, "timestamp": timestamp}]}]})
        p = resp.topics[0].partitions[0]
        if p.error_code:
            raise WireError(f"list offsets {topic}-{partition}: error {p.error_code}", p.error_code)
        return p.offset


def _split_hostport(s: str) -> tuple[str, int]:
    s = s.strip()
    scheme, sep, rest = s.partition("://")
    if sep and scheme.lower() in ("plaintext", "ssl", "sasl_plaintext", "sasl_ssl"):
        s = rest
    host, _, port = s.rpartition(":")
    return host.strip("[]"), int(port)
