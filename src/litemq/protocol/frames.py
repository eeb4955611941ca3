"""Kafka request/response framing: size prefix and request/response headers.

Source: Kafka 3.9 ``RequestHeader.json`` (v0: api_key, api_version, correlation_id; v1: + the
client id as an INT16-prefixed nullable string; v2: + a tagged-field section, the client id
stays non-compact) and ``ResponseHeader.json`` (v0: correlation_id; v1: + tagged fields).
A request uses header v2 when its API is flexible at that version, else v1; v0 only for
ControlledShutdown v0. A response uses header v1 when flexible, except ApiVersions responses
which always use v0 (KIP-511) so any client can read them.

Frames given to the decoders here exclude the 4-byte big-endian size prefix; the encoders
include it.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from litemq import limits
from litemq.protocol import primitives as P
from litemq.protocol.errors import DecodeError
from litemq.protocol.messages import _NAMES, request_spec, response_spec
from litemq.protocol.regions import FileRegion

_REQ_HDR = struct.Struct(">hhi")
_SIZE_CORR = struct.Struct(">ii")
_I32 = struct.Struct(">i")

API_VERSIONS_KEY = 18
CONTROLLED_SHUTDOWN_KEY = 7


class RequestHeader(NamedTuple):
    """A decoded request header (Kafka ``RequestHeader`` v0-v2).

    ``client_id`` is None when absent (header v0) or null. ``header_version`` is the version
    the header was parsed as.
    """

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    header_version: int = 1


def request_header_version(api_key: int, api_version: int) -> int:
    """Request header version (0, 1 or 2) for ``api_key`` at ``api_version``.

    Unknown api keys and versions outside the schema's valid range give 1 (parse leniently so
    the broker can answer or close).
    """
    if api_key not in _NAMES:
        return 1
    spec = request_spec(api_key)
    if not spec.supports(api_version):
        return 1
    if api_key == CONTROLLED_SHUTDOWN_KEY and api_version == 0:
        return 0
    return 2 if spec.is_flexible(api_version) else 1


def response_header_version(api_key: int, api_version: int) -> int:
    """Response header version (0 or 1): 1 if the response is flexible, except ApiVersions
    (always 0). Unknown keys/versions give 0."""
    if api_key == API_VERSIONS_KEY or api_key not in _NAMES:
        return 0
    spec = response_spec(api_key)
    if not spec.supports(api_version):
        return 0
    return 1 if spec.is_flexible(api_version) else 0


def _cached(fn):
    """Memoize a header-version function of (api_key, api_version) (bounded cache)."""
    cache: dict[tuple[int, int], int] = {}

    def get(api_key: int, api_version: int) -> int:
        k = (api_key, api_version)
        hv = cache.get(k)
        if hv is None:
            hv = fn(api_key, api_version)
            if len(cache) < 4096:
                cache[k] = hv
        return hv

    return get


_req_header_version_cached = _cached(request_header_version)
_resp_header_version_cached = _cached(response_header_version)


def decode_request_header(frame) -> tuple[RequestHeader, int]:
    """Parse the request header at the start of ``frame`` (bytes/bytearray/memoryview of one
    request without its size prefix) -> ``(header, body_offset)``.

    Raises DecodeError if the header is truncated or malformed (client id longer than
    ``limits.MAX_CLIENT_ID_BYTES``, bad UTF-8, bad tagged fields).
    """
    end = len(frame)
    if end < 8:
        raise DecodeError(f"request header truncated ({end} bytes)")
    api_key, api_version, corr = _REQ_HDR.unpack_from(frame, 0)
    hv = _req_header_version_cached(api_key, api_version)
    if hv == 0:
        return RequestHeader(api_key, api_version, corr, None, 0), 8
    pos = 8
    try:
        (n,) = P.I16.unpack_from(frame, pos)
        pos += 2
        if n == -1:
            client_id = None
        elif n < 0:
            raise DecodeError(f"invalid client id length {n}")
        else:
            if n > limits.MAX_CLIENT_ID_BYTES:
                raise DecodeError(f"client id length {n} exceeds the limit {limits.MAX_CLIENT_ID_BYTES}")
            if n > end - pos:
                raise DecodeError(f"client id length {n} exceeds the {end - pos} bytes left")
            client_id = str(frame[pos : pos + n], "utf-8")
            pos += n
        if hv == 2:
            pos = P.skip_tagged(frame, pos, end)
    except (struct.error, IndexError):
        raise DecodeError("request header truncated") from None
    except UnicodeDecodeError:
        raise DecodeError("client id is not valid UTF-8") from None
    return RequestHeader(api_key, api_version, corr, client_id, hv), pos


def _frame(head: bytes, parts: list) -> list:
    """Prefix ``parts`` with the 4-byte size and ``head``; merge with the first bytes part."""
    size = len(head)
    for p in parts:
        size += p.length if isinstance(p, FileRegion) else len(p)
    first = _I32.pack(size) + head
    if parts and not isinstance(parts[0], FileRegion):
        return [first + parts[0], *parts[1:]]
    return [first, *parts]


def encode_response(correlation_id: int, api_key: int, api_version: int, body) -> list:
    """Encode a whole response frame -> ``list[bytes | FileRegion]``, size prefix and response
    header included (header v1 if flexible, ApiVersions always v0).

    ``body`` is a message object or a Mapping. Raises ValueError if it cannot be encoded and
    KeyError for an unknown api key.
    """
    parts = response_spec(api_key).encode_parts(body, api_version)
    hv = _resp_header_version_cached(api_key, api_version)
    head = _I32.pack(correlation_id) + (b"\x00" if hv == 1 else b"")
    return _frame(head, parts)


def encode_request(api_key: int, api_version: int, correlation_id: int, client_id: str | None, body) -> bytes:
    """Encode a whole request frame (size prefix, header, body) -> bytes."""
    spec = request_spec(api_key)
    hv = request_header_version(api_key, api_version)
    if not spec.supports(api_version):
        raise ValueError(f"{spec.name}: unsupported version {api_version}")
    b = bytearray(_REQ_HDR.pack(api_key, api_version, correlation_id))
    if hv >= 1:
        P.write_nstr(b, client_id)
    if hv == 2:
        b.append(0)
    spec._encode_into(body, api_version, b, None)
    return _I32.pack(len(b)) + bytes(b)


def decode_response(api_key: int, api_version: int, frame) -> tuple[int, object]:
    """Decode one response frame (without size prefix) -> ``(correlation_id, message)``.

    Raises DecodeError if malformed, KeyError for an unknown api key.
    """
    spec = response_spec(api_key)
    if len(frame) < 4:
        raise DecodeError("response header truncated")
    (corr,) = _I32.unpack_from(frame, 0)
    pos = 4
    if _resp_header_version_cached(api_key, api_version) == 1:
        try:
            pos = P.skip_tagged(frame, pos, len(frame))
        except (struct.error, IndexError):
            raise DecodeError("response header truncated") from None
    msg, _ = spec.decode(frame, api_version, pos)
    return corr, msg
