"""The socket edge: one :class:`Connection` (an ``asyncio.Protocol``) per client.

A connection is a pump: it cuts the byte stream into size-prefixed frames, hands each frame to
``litemq.protocol`` (sans-I/O) to decode, dispatches the request, and writes responses back
**in request order** (Kafka clients pipeline requests and match responses by order and
correlation id). Socket errors are handled here and nowhere else.

Broken framing (a negative or over-limit size, an undecodable header or body, an unknown API
key, a version we do not serve) closes that connection after one log line; every other client
keeps being served. Response parts that are :class:`~litemq.protocol.regions.FileRegion` go out
with ``loop.sendfile`` (zero copy) on plaintext sockets; on TLS connections they are read with
``pread`` in the default executor and written through the TLS transport.

Each connection belongs to one listener (``listener_name``, ``security_protocol``). On SSL and
SASL_SSL listeners the TLS handshake runs first (``loop.start_tls``, bounded by
``limits.TLS_HANDSHAKE_TIMEOUT_MS``); a failed handshake (a plaintext client, a missing or
untrusted client certificate) closes that connection with one log line. ``principal`` is the
connection's :class:`~litemq.security.principal.KafkaPrincipal`: ``User:ANONYMOUS``, or on SSL
the verified client certificate's subject DN; SASL replaces it after authentication.

A connection over a connection limit is closed as soon as it is made, unserved: more than
``max.connections`` (never more than ``limits.MAX_CONNECTIONS``) on the broker, or more than
``max.connections.per.ip`` (or the IP's ``max.connections.per.ip.overrides`` entry) from one
address (Kafka ``ConnectionQuotas``; Kafka holds the accept back at ``max.connections``).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import ssl
import struct
import time
from collections import deque
from typing import TYPE_CHECKING, Any, Callable, Coroutine, Protocol

from litemq import limits
from litemq.broker.client_quota_manager import (
    CONNECTION_CREATION_RATE,
    CONSUMER_BYTE_RATE,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    REQUEST_QUOTA_EXEMPT_API_KEYS,
    ClientQuotaManager,
)
from litemq.broker.context import RequestContext
from litemq.config import parse_ip_overrides
from litemq.broker.handlers.sasl import authenticate_raw
from litemq.broker.handlers.sasl import new_session as new_sasl_session
from litemq.protocol import frames
from litemq.protocol.errors import DecodeError, ErrorCode
from litemq.protocol.messages import request_spec, response_spec
from litemq.protocol.regions import FileRegion
from litemq.security.principal import ANONYMOUS, KafkaPrincipal
from litemq.security.tls import principal_of

if TYPE_CHECKING:
    from litemq.config import BrokerConfig
    from litemq.metrics import BrokerMetrics


class ServerRuntime(Protocol):
    """What a :class:`Connection` uses of the broker runtime
    (:class:`~litemq.broker.broker.BrokerRuntime`, which satisfies it structurally). Declared here
    so this module does not import ``broker.py``, which imports it."""

    config: BrokerConfig
    """The broker's settings (the SASL session of a new connection reads its mechanisms)."""
    loop: asyncio.AbstractEventLoop | None
    """The event loop the broker runs on (set by ``start()``)."""
    connections: set[Connection]
    """Open client connections; each connection adds itself when made and discards itself when lost."""
    handlers: dict[int, Callable[..., Any]]
    """api_key -> handler(ctx, request) returning a body, a coroutine producing one, or None (acks=0)."""
    metrics: BrokerMetrics
    """Request metrics: ``on_response(api_key, version, started)`` per answered request."""
    client_quotas: ClientQuotaManager
    """Client quota rates and throttle times (:mod:`litemq.broker.client_quota_manager`)."""

    @property
    def metadata(self) -> Any:
        """The cluster metadata (SCRAM credentials for SASL/SCRAM connections; ``client_quotas``)."""

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task:
        """Run ``coro`` as a task the runtime keeps a reference to (and cancels on stop)."""

    def supports(self, api_key: int, version: int) -> bool:
        """True when ``api_key`` is served at ``version``."""

    def api_versions_body(self, error_unsupported: bool = False) -> dict:
        """The ApiVersions response body (UNSUPPORTED_VERSION when ``error_unsupported``)."""


log = logging.getLogger(__name__)

_SIZE = struct.Struct(">i")
_SENDFILE_MIN_BYTES = 64 * 1024
_TLS_CHUNK_BYTES = 256 * 1024
"""File regions go through a TLS transport in reads of this size."""
"""File regions smaller than this are read with pread and written like bytes (cheaper)."""


_ip_overrides = functools.lru_cache(maxsize=4)(parse_ip_overrides)
"""``max.connections.per.ip.overrides`` parsed (validated when set); cached by its text."""
_refusal_log = [0.0, 0]
"""(monotonic time of the last refused-connection log line, refusals not logged since)."""


class _Slot:
    """A response position in the connection's ordered output queue."""

    __slots__ = ("parts", "ready", "started", "throttle_ms", "busy_s")

    def __init__(self) -> None:
        self.parts: list[Any] | None = None
        self.ready = False
        self.started = time.perf_counter()  # request latency metrics (litemq.metrics)
        self.throttle_ms = 0
        """Throttle time a client quota already set (Produce: ``producer_byte_rate``)."""
        self.busy_s = -1.0
        """Seconds the event loop spent on the request so far (-1: no quota measures it)."""


class Connection(asyncio.Protocol):
    """One client connection. See the module docstring for the rules it enforces.

    Args:
        runtime: the broker.
        listener_name: the listener (upper case, Kafka's ``ListenerName``) it arrived on.
        security_protocol: that listener's protocol (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL).
        ssl_context: the listener's server context on SSL/SASL_SSL listeners, else None.

    Attributes:
        listener_name, security_protocol: as given.
        client_host: the peer's IP address.
        principal: who the connection is (``User:ANONYMOUS`` until TLS or SASL says otherwise).
    """

    def __init__(self, runtime: ServerRuntime, listener_name: str = "PLAINTEXT",
                 security_protocol: str = "PLAINTEXT", ssl_context: ssl.SSLContext | None = None) -> None:
        self.runtime = runtime
        self.listener_name = listener_name
        self.security_protocol = security_protocol
        self.client_host = "?"
        self.principal: KafkaPrincipal = ANONYMOUS
        self._ssl_context = ssl_context
        self._handshaking = False
        self._tls = False
        self._writable: asyncio.Future | None = None
        self.transport: asyncio.Transport | None = None
        self.peer = "?"
        self._buf = bytearray()
        self._slots: deque[_Slot] = deque()
        self._closed = False
        self._paused_reading = False
        self._write_paused = False
        self._writer_task: asyncio.Task | None = None
        self._pending_parts: deque[Any] = deque()
        self._held = False
        self._throttle_timer: asyncio.TimerHandle | None = None
        self._close_when_flushed = False
        self._close_linger_s = 0.0
        self.sasl_session = new_sasl_session(self)
        """SASL state (litemq.security.sasl.SaslSession) on SASL_PLAINTEXT/SASL_SSL listeners, else None."""
        self.client_software: tuple[str, str] | None = None
        """(name, version) the client's ApiVersions v3+ gave (KIP-511), else None."""
        self.close_callbacks: dict[str, Callable[[], None]] = {}
        """Run once when the connection is lost, by name (one per listener; KIP-932: the share
        sessions opened on this connection end with it, Kafka ``ShareSessionCache``'s
        disconnect listener)."""

    # ------------------------------------------------------------ asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.client_host = peer[0] if peer else "?"
        self.runtime.connections.add(self)
        limit = self._connection_limit()
        if limit is not None:
            self._refuse(transport, limit)
            return
        if self.runtime.metadata.client_quotas.entities and self._connection_throttled(transport):
            return
        if self._ssl_context is not None:
            # Bytes read before start_tls takes over would be TLS records fed to the Kafka
            # framing: stop reading now; start_tls resumes the socket under its TLS protocol.
            self._handshaking = True
            transport.pause_reading()
            self.runtime.spawn(self._start_tls(transport))
            return
        transport.set_write_buffer_limits(high=limits.MAX_CONNECTION_WRITE_BUFFER_BYTES // 4)

    async def _start_tls(self, raw: asyncio.BaseTransport) -> None:
        """Server side of the TLS handshake; then the connection serves requests over TLS."""
        if self._closed or raw.is_closing():
            return
        try:
            tls = await self.runtime.loop.start_tls(
                raw, self, self._ssl_context, server_side=True,
                ssl_handshake_timeout=limits.TLS_HANDSHAKE_TIMEOUT_MS / 1000)
        except (OSError, asyncio.TimeoutError, ConnectionError) as exc:  # ssl.SSLError is an OSError
            if not self._closed:
                self._closed = True
                self.runtime.connections.discard(self)
            if isinstance(exc, ssl.SSLError):  # not TLS (a plaintext client), no/untrusted certificate, ...
                log.warning("closing connection from %s on listener %s: TLS handshake failed: %s",
                            self.peer, self.listener_name, exc.reason or exc)
            else:  # the client went away or stalled (port probes, health checks)
                log.info("connection from %s on listener %s ended before the TLS handshake finished: %s",
                         self.peer, self.listener_name, str(exc) or type(exc).__name__)
            raw.abort()
            return
        if self._closed:
            tls.abort()
            return
        self.transport = tls
        self._tls = True
        try:
            self.principal = principal_of(tls.get_extra_info("ssl_object"))
        except ValueError as exc:
            self.abort(f"cannot identify the client certificate: {exc}")
            return
        self._handshaking = False
        tls.set_write_buffer_limits(high=limits.MAX_CONNECTION_WRITE_BUFFER_BYTES // 4)
        self._update_reading()
        if self._buf:
            self.data_received(b"")

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        self.runtime.connections.discard(self)
        callbacks, self.close_callbacks = self.close_callbacks, {}
        for callback in callbacks.values():
            try:
                callback()
            except Exception:  # noqa: BLE001 - one listener must not keep the others from running
                log.exception("connection close callback failed")
        if self._writer_task is not None:
            self._writer_task.cancel()
        if self._throttle_timer is not None:
            self._throttle_timer.cancel()
            self._throttle_timer = None

    def pause_writing(self) -> None:
        self._write_paused = True
        self._update_reading()

    def resume_writing(self) -> None:
        self._write_paused = False
        if self._writable is not None and not self._writable.done():
            self._writable.set_result(None)
        self._update_reading()

    def data_received(self, data: bytes) -> None:
        buf = self._buf
        buf += data
        if self._handshaking:
            # TLS data that arrived between the handshake and _start_tls resuming: bounded by
            # the frame check below once processing starts; nothing is parsed yet.
            if len(buf) > limits.MAX_REQUEST_FRAME_BYTES + 4:
                self.abort("too much data before the TLS handshake finished")
            return
        pos = 0
        n = len(buf)
        while n - pos >= 4 and not self._held and self._throttle_timer is None:
            (size,) = _SIZE.unpack_from(buf, pos)
            if size < 0 or size > limits.MAX_REQUEST_FRAME_BYTES:
                self.abort(f"frame size {size} outside 0..{limits.MAX_REQUEST_FRAME_BYTES}")
                return
            if size > limits.MAX_SASL_RECEIVE_BYTES and self.sasl_session is not None \
                    and not self.sasl_session.authenticated:
                self.abort(f"Failing SASL authentication due to invalid receive size ({size} bytes before "
                           f"authentication, limit {limits.MAX_SASL_RECEIVE_BYTES})")
                return
            if n - pos - 4 < size:
                break
            with memoryview(buf) as mv:  # one copy (a slice of the bytearray would be a second)
                frame = bytes(mv[pos + 4 : pos + 4 + size])
            pos += 4 + size
            self._handle_frame(frame)
            if self._closed:
                return
        if pos:
            del buf[:pos]

    # ------------------------------------------------------------ requests
    def _handle_frame(self, frame: bytes) -> None:
        session = self.sasl_session
        if session is not None and session.expects_raw_token:
            self._raw_sasl_token(frame)
            return
        try:
            header, body_offset = frames.decode_request_header(frame)
        except DecodeError as exc:
            self.abort(f"undecodable request header: {exc}")
            return
        runtime = self.runtime
        api_key, version = header.api_key, header.api_version
        if self.sasl_session is not None:
            refusal = self.sasl_session.refusal(api_key, time.monotonic() * 1000.0)
            if refusal is not None:  # Kafka: IllegalSaslState / expired session (KIP-368)
                if self.sasl_session.authenticated:
                    runtime.metrics.on_authentication(self.listener_name, "expired_connections_killed")
                self.abort(refusal)
                return
        if api_key == 18 and not runtime.supports(api_key, version):
            # KIP-511: an ApiVersions request of a version we do not know is answered in v0
            # format with UNSUPPORTED_VERSION and our ranges, so the client can retry.
            slot = self._new_slot()
            body = runtime.api_versions_body(error_unsupported=True)
            self._finish(slot, frames.encode_response(header.correlation_id, 18, 0, body))
            return
        if not runtime.supports(api_key, version):
            self.abort(f"unsupported api_key={api_key} version={version} (client_id={header.client_id!r})")
            return
        try:
            request, _end = request_spec(api_key).decode(frame, version, body_offset)
        except DecodeError as exc:
            self.abort(f"malformed api_key={api_key} v{version} body: {exc}")
            return
        handler = runtime.handlers[api_key]
        ctx = RequestContext(header, self, runtime)
        # acks=0 produce gets no response at all (Kafka protocol guide).
        expects_response = not (api_key == 0 and request.acks == 0)
        slot = self._new_slot() if expects_response else None
        measured = bool(runtime.metadata.client_quotas.entities)  # any client quota at all (one call)
        if measured:
            busy_from = time.perf_counter()
            throttle_ms = self._quota_before(runtime.client_quotas, api_key, header, request, len(frame))
            if slot is None:  # acks=0: no response to carry it; the connection is muted all the same
                self.throttle(throttle_ms, PRODUCER_BYTE_RATE)
            else:
                slot.throttle_ms = throttle_ms
        try:
            result = handler(ctx, request)
        except Exception as exc:  # a handler bug must not take the broker down
            self._handler_failed(exc, header, slot)
            return
        if measured and slot is not None and api_key not in REQUEST_QUOTA_EXEMPT_API_KEYS:
            slot.busy_s = time.perf_counter() - busy_from
        if isinstance(result, asyncio.Future):  # a handler's own future (produce acks=all): no task
            result.add_done_callback(lambda t: self._task_done(t, header, slot))
        elif asyncio.iscoroutine(result):
            task = runtime.spawn(result)
            task.add_done_callback(lambda t: self._task_done(t, header, slot))
        elif slot is not None:
            self._respond(slot, header, result)

    def _task_done(self, task: asyncio.Future, header: frames.RequestHeader, slot: _Slot | None) -> None:
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None:
            self._handler_failed(exc, header, slot)
            return
        if slot is not None:
            self._respond(slot, header, task.result())

    def _handler_failed(self, exc: BaseException, header: frames.RequestHeader, slot: _Slot | None) -> None:
        """A handler raised. Where the response has a top-level error code the request is
        answered, as Kafka's ``KafkaApis.handleError`` answers every request with
        ``getErrorResponse``: an OSError (disk full, no file descriptor, I/O error) is a storage
        failure, not a bug, answered KAFKA_STORAGE_ERROR and logged in one line; anything else
        is answered UNKNOWN_SERVER_ERROR with the traceback logged. A response with per-item
        codes only (their handlers answer storage errors themselves) closes the connection,
        the traceback logged."""
        api_key, version = header.api_key, header.api_version
        storage = isinstance(exc, OSError) and not isinstance(exc, ConnectionError)
        if storage:
            log.error("api_key=%d v%d failed on storage: %s", api_key, version, exc)
        else:
            log.error("handler for api_key=%d v%d failed: %r", api_key, version, exc, exc_info=exc)
        spec = response_spec(api_key)
        if spec.has_field("error_code", version):
            if slot is not None:
                code = ErrorCode.KAFKA_STORAGE_ERROR if storage else ErrorCode.UNKNOWN_SERVER_ERROR
                self._respond(slot, header, spec.new(error_code=code))
            return
        self.abort(f"internal error: {exc}")

    def _respond(self, slot: _Slot, header: frames.RequestHeader, body: Any) -> None:
        if self._closed:
            return
        encode_from = time.perf_counter()
        try:
            parts = frames.encode_response(header.correlation_id, header.api_key, header.api_version, body)
        except Exception as exc:
            log.exception("cannot encode response api_key=%d v%d", header.api_key, header.api_version)
            self.abort(f"internal error encoding response: {exc}")
            return
        if slot.throttle_ms or slot.busy_s >= 0:
            parts = self._quota_after(slot, header, body, parts, encode_from)
            if parts is None:
                return
        self._finish(slot, parts)
        self.runtime.metrics.on_response(header.api_key, header.api_version, slot.started)

    # ------------------------------------------------------------ client quotas
    def _quota_before(self, quotas: ClientQuotaManager, api_key: int, header: frames.RequestHeader,
                      request: Any, frame_bytes: int) -> int:
        """Before a request's handler runs, with client quotas in force: record a Produce
        request's size (its throttle time is returned) and cap a Fetch at what the consumer
        byte rate lets through in one window (Kafka ``maxValueInQuotaWindow``)."""
        client_id = header.client_id or ""
        if api_key == 0:
            return quotas.record(PRODUCER_BYTE_RATE, self.principal.name, client_id, frame_bytes)
        if api_key == 1 and header.api_version >= 3:
            cap = quotas.max_fetch_bytes(self.principal.name, client_id)
            if cap is not None and request.max_bytes > cap:
                request.max_bytes = max(cap, 1)
                request.min_bytes = min(request.min_bytes, request.max_bytes)
        return 0

    def _quota_after(self, slot: _Slot, header: frames.RequestHeader, body: Any, parts: list[Any],
                     encode_from: float) -> list[Any] | None:
        """With client quotas in force, once a response is encoded: record a Fetch response's
        size and the request's event-loop time, put the largest throttle time earned into the
        response and mute the connection for it. A Fetch response that violates the consumer
        byte rate is replaced by an empty one (Kafka ``getThrottledResponse``). Returns the
        parts to send (None when encoding failed and the connection was closed)."""
        quotas = self.runtime.client_quotas
        user, client_id = self.principal.name, header.client_id or ""
        throttle_ms, key = slot.throttle_ms, PRODUCER_BYTE_RATE
        if header.api_key == 1:
            size = sum(p.length if isinstance(p, FileRegion) else len(p) for p in parts)
            fetch_ms = quotas.record(CONSUMER_BYTE_RATE, user, client_id, size)
            if fetch_ms > 0:
                quotas.unrecord(CONSUMER_BYTE_RATE, user, client_id, size)
                throttle_ms, key = fetch_ms, CONSUMER_BYTE_RATE
                given = body if isinstance(body, dict) else {}
                session_id = given.get("session_id", 0)
                if session_id:  # KIP-227: what the dropped response carried is sent again later
                    session_id = self.runtime.fetch_sessions.response_dropped(session_id, given.get("responses", ()))
                body = {"throttle_time_ms": 0, "error_code": given.get("error_code", 0),
                        "session_id": session_id, "responses": [], "node_endpoints": []}
        if slot.busy_s >= 0:
            busy_s = slot.busy_s + (time.perf_counter() - encode_from)
            request_ms = quotas.record(REQUEST_PERCENTAGE, user, client_id, busy_s * 100.0)
            if request_ms > throttle_ms:
                throttle_ms, key = request_ms, REQUEST_PERCENTAGE
        if throttle_ms <= 0:
            return parts
        if isinstance(body, dict) and "throttle_time_ms" in body:
            body["throttle_time_ms"] = max(int(body["throttle_time_ms"] or 0), throttle_ms)
            try:
                parts = frames.encode_response(header.correlation_id, header.api_key, header.api_version, body)
            except Exception as exc:
                log.exception("cannot encode response api_key=%d v%d", header.api_key, header.api_version)
                self.abort(f"internal error encoding response: {exc}")
                return None
        self.throttle(throttle_ms, key)
        return parts

    def throttle(self, throttle_ms: int, quota_key: str) -> None:
        """Read no further request from this connection for ``throttle_ms`` (KIP-219: the
        response carrying the throttle time goes out at once; the channel stays muted)."""
        if throttle_ms <= 0 or self._closed:
            return
        self.runtime.client_quotas.note_throttle(quota_key, throttle_ms)
        if self._throttle_timer is not None:
            if self._throttle_timer.when() >= self.runtime.loop.time() + throttle_ms / 1000:
                return
            self._throttle_timer.cancel()
        self._throttle_timer = self.runtime.loop.call_later(throttle_ms / 1000, self._end_throttle)
        self._update_reading()

    def _connection_limit(self) -> str | None:
        """The connection limit this new connection breaks, by its config name, or None (Kafka
        ``ConnectionQuotas``): more than ``max.connections`` (at most ``limits.MAX_CONNECTIONS``)
        on the broker, or than its IP's ``max.connections.per.ip`` (or its override)."""
        cfg = self.runtime.config
        conns = self.runtime.connections
        if len(conns) > min(cfg.max_connections, limits.MAX_CONNECTIONS):
            return "max.connections"
        per_ip = cfg.max_connections_per_ip
        if cfg.max_connections_per_ip_overrides:
            per_ip = _ip_overrides(cfg.max_connections_per_ip_overrides).get(self.client_host, per_ip)
        if per_ip < len(conns) and sum(1 for c in conns if c.client_host == self.client_host) > per_ip:
            return "max.connections.per.ip"
        return None

    def _refuse(self, transport: asyncio.BaseTransport, limit: str) -> None:
        """Close a connection over ``limit`` at once, unserved (Kafka closes it on accept; it
        waits to accept past ``max.connections`` instead), with at most one log line a second."""
        self._closed = True
        self.runtime.connections.discard(self)
        refused = self.runtime.metrics.connections_refused
        refused[limit] = refused.get(limit, 0) + 1
        now = time.monotonic()
        if now - _refusal_log[0] >= 1.0:
            log.warning("refused connection from %s: over %s (%d refused since the last such line)",
                        self.peer, limit, _refusal_log[1] + 1)
            _refusal_log[:] = [now, 0]
        else:
            _refusal_log[1] += 1
        transport.close()

    def _connection_throttled(self, transport: asyncio.BaseTransport) -> bool:
        """KIP-612: a connection that breaks its IP's ``connection_creation_rate`` is not served
        and is closed after the throttle time (Kafka ``ConnectionQuotas``); True when it is."""
        throttle_ms = self.runtime.client_quotas.record_connection(self.client_host)
        if throttle_ms <= 0:
            return False
        self.runtime.client_quotas.note_throttle(CONNECTION_CREATION_RATE, throttle_ms)
        log.debug("connection from %s throttled for %d ms (connection_creation_rate), then closed",
                  self.peer, throttle_ms)
        transport.pause_reading()
        self._paused_reading = True
        self._throttle_timer = self.runtime.loop.call_later(throttle_ms / 1000, self._close_throttled)
        return True

    def _close_throttled(self) -> None:
        self._throttle_timer = None
        if not self._closed and self.transport is not None:
            self._closed = True
            self.transport.abort()

    def _end_throttle(self) -> None:
        self._throttle_timer = None
        self._resume_decoding()

    def _new_slot(self) -> _Slot:
        slot = _Slot()
        self._slots.append(slot)
        self._update_reading()
        return slot

    def _finish(self, slot: _Slot, parts: list[Any]) -> None:
        slot.parts = parts
        slot.ready = True
        slots = self._slots
        while slots and slots[0].ready:
            self._write_parts(slots.popleft().parts)
        self._update_reading()
        self._maybe_close_flushed()

    # ------------------------------------------------------------ output
    def _write_parts(self, parts: list[Any]) -> None:
        # A lost connection is closing before connection_lost() runs: asyncio logs a warning
        # for every write after the fifth (a paused broker's resumed acks=all answers: ~1,000
        # lines in 50 ms), so nothing more is written to it.
        if self._closed or self.transport is None or self.transport.is_closing():
            return
        if self._writer_task is None:
            # Fast path: nothing queued behind a sendfile; write bytes directly.
            for i, part in enumerate(parts):
                if isinstance(part, FileRegion):
                    if part.length < _SENDFILE_MIN_BYTES:
                        self.transport.write(part.read())
                        continue
                    self._pending_parts.extend(parts[i:])
                    self._writer_task = self.runtime.spawn(self._drain_pending())
                    return
                self.transport.write(part)
        else:
            self._pending_parts.extend(parts)

    async def _write_region_tls(self, region: FileRegion) -> int:
        """Copy a file region through the TLS transport (sendfile cannot encrypt): ``pread``
        chunks of ``_TLS_CHUNK_BYTES`` in the default executor, each written once the transport
        has room. asyncio's own sendfile fallback is not used: it reads at the shared file
        object's position (and skips the seek for offset 0), which concurrent fetches of one
        segment would corrupt. Returns the bytes written (short when the segment shrank)."""
        loop = self.runtime.loop
        fd = region.file.fileno()
        pos, end = region.position, region.position + region.length
        while pos < end and not self._closed:
            data = await loop.run_in_executor(None, os.pread, fd, min(_TLS_CHUNK_BYTES, end - pos), pos)
            if not data:
                break
            self.transport.write(data)
            pos += len(data)
            if self._write_paused:
                self._writable = loop.create_future()
                await self._writable
                self._writable = None
        return pos - region.position

    async def _drain_pending(self) -> None:
        loop = self.runtime.loop
        try:
            while self._pending_parts and not self._closed and not self.transport.is_closing():
                part = self._pending_parts.popleft()
                if isinstance(part, FileRegion):
                    if part.length < _SENDFILE_MIN_BYTES:
                        self.transport.write(part.read())
                        continue
                    if self._tls:
                        sent = await self._write_region_tls(part)
                    else:
                        sent = await loop.sendfile(self.transport, part.file, part.position, part.length)
                    if sent != part.length:
                        self.abort(f"short sendfile ({sent} of {part.length} bytes): segment changed")
                        return
                else:
                    self.transport.write(part)
        except (ConnectionError, OSError) as exc:
            self.abort(f"write failed: {exc}")
        finally:
            self._writer_task = None
            self._maybe_close_flushed()

    def _update_reading(self) -> None:
        if self.transport is None or self._closed or self._handshaking:
            return
        should_pause = (self._write_paused or self._held or self._throttle_timer is not None
                        or len(self._slots) >= limits.MAX_IN_FLIGHT_REQUESTS_PER_CONNECTION)
        if should_pause and not self._paused_reading:
            self._paused_reading = True
            self.transport.pause_reading()
        elif not should_pause and self._paused_reading:
            self._paused_reading = False
            self.transport.resume_reading()

    # ------------------------------------------------------------ authentication hooks
    def _raw_sasl_token(self, token: bytes) -> None:
        """A raw SASL token after SaslHandshake v0: answered with a raw size-prefixed token in
        order with the responses before it; a failed authentication closes the connection."""
        slot = self._new_slot()
        self.hold_requests()

        def done(task: asyncio.Future) -> None:
            if task.cancelled():
                return
            exc = task.exception()
            if exc is not None:
                log.error("SASL token of %s failed: %r", self.peer, exc, exc_info=exc)
            out = None if exc is not None else task.result()
            if out is None:
                self._close_now()
                return
            self._finish(slot, [_SIZE.pack(len(out)) + out])
            self.release_requests()

        self.runtime.spawn(authenticate_raw(self, token)).add_done_callback(done)

    # ------------------------------------------------------------ authentication hooks
    def hold_requests(self) -> None:
        """Decode no further request until :meth:`release_requests` (a SASL step is running)."""
        self._held = True
        self._update_reading()

    def release_requests(self) -> None:
        """Resume decoding requests, starting with those that arrived while held."""
        self._held = False
        self._resume_decoding()

    def _resume_decoding(self) -> None:
        """Read again unless something else holds the connection, and decode the requests that
        arrived meanwhile (a SASL step or a quota throttle ended)."""
        self._update_reading()
        if self._buf and not self._closed:
            self.data_received(b"")

    def close_after_responses(self, linger_s: float = 0.0) -> None:
        """Close the connection ``linger_s`` after every pending response is written (failed
        authentication); nothing more is read from it meanwhile (see :meth:`hold_requests`)."""
        self._close_when_flushed = True
        self._close_linger_s = linger_s
        self._maybe_close_flushed()

    def _maybe_close_flushed(self) -> None:
        if (self._close_when_flushed and not self._closed and not self._slots and self._writer_task is None
                and self.transport is not None):
            self._close_when_flushed = False
            if self._close_linger_s > 0:
                self.runtime.loop.call_later(self._close_linger_s, self._close_now)
            else:
                self._close_now()

    def _close_now(self) -> None:
        if not self._closed and self.transport is not None:
            self._closed = True
            self.transport.close()  # writes what is buffered, then closes

    def abort(self, reason: str) -> None:
        """Close this connection at once after logging ``reason`` once (bad input)."""
        if self._closed:
            return
        self._closed = True
        log.warning("closing connection from %s: %s", self.peer, reason)
        if self.transport is not None:
            self.transport.abort()
