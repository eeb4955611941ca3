"""The socket edge: one :class:`Connection` (an ``asyncio.Protocol``) per client.

A connection is a pump: it cuts the byte stream into size-prefixed frames, hands each frame to
``litemq.protocol`` (sans-I/O) to decode, dispatches the request, and writes responses back
**in request order** (Kafka clients pipeline requests and match responses by order and
correlation id). Socket errors are handled here and nowhere else.

Broken framing (a negative or over-limit size, an undecodable header or body, an unknown API
key, a version we do not serve) closes that connection after one log line; every other client
keeps being served. Response parts that are :class:`~litemq.protocol.regions.FileRegion` go out
with ``loop.sendfile`` (zero copy on plaintext sockets).
"""

from __future__ import annotations

import asyncio
import logging
import struct
import time
from collections import deque
from typing import TYPE_CHECKING, Any

from litemq import limits
from litemq.broker.handlers.sasl import new_session as new_sasl_session
from litemq.protocol import frames
from litemq.protocol.errors import DecodeError
from litemq.protocol.messages import request_spec
from litemq.protocol.regions import FileRegion

if TYPE_CHECKING:
    from litemq.broker.broker import BrokerRuntime

log = logging.getLogger(__name__)

_SIZE = struct.Struct(">i")
_SENDFILE_MIN_BYTES = 64 * 1024
"""File regions smaller than this are read with pread and written like bytes (cheaper)."""


class RequestContext:
    """What a handler knows about the request besides its body."""

    __slots__ = ("header", "connection", "runtime")

    def __init__(self, header: frames.RequestHeader, connection: "Connection", runtime: "BrokerRuntime") -> None:
        self.header = header
        self.connection = connection
        self.runtime = runtime

    @property
    def version(self) -> int:
        return self.header.api_version

    @property
    def client_id(self) -> str | None:
        return self.header.client_id


class _Slot:
    """A response position in the connection's ordered output queue."""

    __slots__ = ("parts", "ready")

    def __init__(self) -> None:
        self.parts: list[Any] | None = None
        self.ready = False


class Connection(asyncio.Protocol):
    """One client connection. See the module docstring for the rules it enforces."""

    def __init__(self, runtime: "BrokerRuntime") -> None:
        self.runtime = runtime
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
        self._close_when_flushed = False
        self._close_linger_s = 0.0
        self.sasl_session = new_sasl_session(self)
        """SASL state (litemq.security.sasl.SaslSession) on SASL_PLAINTEXT/SASL_SSL listeners, else None."""

    # ------------------------------------------------------------ asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.runtime.connections.add(self)
        transport.set_write_buffer_limits(high=limits.MAX_CONNECTION_WRITE_BUFFER_BYTES // 4)

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        self.runtime.connections.discard(self)
        if self._writer_task is not None:
            self._writer_task.cancel()

    def pause_writing(self) -> None:
        self._write_paused = True
        self._update_reading()

    def resume_writing(self) -> None:
        self._write_paused = False
        self._update_reading()

    def data_received(self, data: bytes) -> None:
        buf = self._buf
        buf += data
        pos = 0
        n = len(buf)
        while n - pos >= 4 and not self._held:
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
            frame = bytes(buf[pos + 4 : pos + 4 + size])
            pos += 4 + size
            self._handle_frame(frame)
            if self._closed:
                return
        if pos:
            del buf[:pos]

    # ------------------------------------------------------------ requests
    def _handle_frame(self, frame: bytes) -> None:
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
        try:
            result = handler(ctx, request)
        except Exception as exc:  # a handler bug must not take the broker down
            log.exception("handler for api_key=%d v%d failed", api_key, version)
            self.abort(f"internal error: {exc}")
            return
        if asyncio.iscoroutine(result):
            task = runtime.loop.create_task(result)
            task.add_done_callback(lambda t: self._task_done(t, header, slot))
        elif slot is not None:
            self._respond(slot, header, result)

    def _task_done(self, task: asyncio.Task, header: frames.RequestHeader, slot: _Slot | None) -> None:
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None:
            log.error("handler for api_key=%d v%d failed: %r", header.api_key, header.api_version, exc,
                      exc_info=exc)
            self.abort(f"internal error: {exc}")
            return
        if slot is not None:
            self._respond(slot, header, task.result())

    def _respond(self, slot: _Slot, header: frames.RequestHeader, body: Any) -> None:
        if self._closed:
            return
        try:
            parts = frames.encode_response(header.correlation_id, header.api_key, header.api_version, body)
        except Exception as exc:
            log.exception("cannot encode response api_key=%d v%d", header.api_key, header.api_version)
            self.abort(f"internal error encoding response: {exc}")
            return
        self._finish(slot, parts)

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
        if self._closed or self.transport is None:
            return
        if self._writer_task is None:
            # Fast path: nothing queued behind a sendfile; write bytes directly.
            for i, part in enumerate(parts):
                if isinstance(part, FileRegion):
                    if part.length < _SENDFILE_MIN_BYTES:
                        self.transport.write(part.read())
                        continue
                    self._pending_parts.extend(parts[i:])
                    self._writer_task = self.runtime.loop.create_task(self._drain_pending())
                    return
                self.transport.write(part)
        else:
            self._pending_parts.extend(parts)

    async def _drain_pending(self) -> None:
        loop = self.runtime.loop
        try:
            while self._pending_parts and not self._closed:
                part = self._pending_parts.popleft()
                if isinstance(part, FileRegion):
                    if part.length < _SENDFILE_MIN_BYTES:
                        self.transport.write(part.read())
                        continue
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
        if self.transport is None or self._closed:
            return
        should_pause = (self._write_paused or self._held
                        or len(self._slots) >= limits.MAX_IN_FLIGHT_REQUESTS_PER_CONNECTION)
        if should_pause and not self._paused_reading:
            self._paused_reading = True
            self.transport.pause_reading()
        elif not should_pause and self._paused_reading:
            self._paused_reading = False
            self.transport.resume_reading()

    # ------------------------------------------------------------ authentication hooks
    def hold_requests(self) -> None:
        """Decode no further request until :meth:`release_requests` (a SASL step is running)."""
        self._held = True
        self._update_reading()

    def release_requests(self) -> None:
        """Resume decoding requests, starting with those that arrived while held."""
        self._held = False
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
