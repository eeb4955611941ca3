"""Readers and writers for the Kafka protocol's primitive types (sans-I/O).

Source: the Kafka protocol guide (https://kafka.apache.org/protocol.html#protocol_types) and
``org.apache.kafka.common.protocol.{Readable,Writable,ByteUtils}`` (Kafka 3.9); compact
("flexible") encodings are from KIP-482.

Readers take ``(buf, pos, end)`` where ``buf`` is ``bytes``/``bytearray``/``memoryview`` (format
``B``), ``pos`` the offset to read at and ``end`` the offset one past the last readable byte,
and return ``(value, new_pos)``. Every length or count is checked against the bytes left and
against :mod:`litemq.limits` before anything is allocated; malformed input raises
:class:`~litemq.protocol.errors.DecodeError`. Fixed-width reads that run past the buffer raise
``struct.error``/``IndexError``, which :class:`~litemq.protocol.schema.MessageSpec.decode`
turns into ``DecodeError``.

Writers append to a ``bytearray`` ``b``; they raise ``ValueError`` for values that cannot be
encoded (a null in a non-nullable field, a string longer than 32767 bytes in an INT16-prefixed
string, ...).
"""

from __future__ import annotations

import struct
import uuid as _uuid_mod

from litemq import limits
from litemq.protocol.errors import DecodeError
from litemq.protocol.regions import FileRegion, RecordsParts

I8 = struct.Struct(">b")
I16 = struct.Struct(">h")
I32 = struct.Struct(">i")
I64 = struct.Struct(">q")
U16 = struct.Struct(">H")

ZERO_UUID = _uuid_mod.UUID(int=0)
_ZERO16 = bytes(16)
_UUID = _uuid_mod.UUID

_MAX_STR = limits.MAX_STRING_BYTES
_MAX_ARR = limits.MAX_ARRAY_ELEMENTS
_MAX_TAGS = limits.MAX_TAGGED_FIELDS

_i16_unpack = I16.unpack_from
_i32_unpack = I32.unpack_from
_i16_pack = I16.pack
_i32_pack = I32.pack


# ----------------------------------------------------------------------------- varints


def _read_uleb(buf, pos: int, max_shift: int, what: str) -> tuple[int, int]:
    v = 0
    shift = 0
    while True:
        b = buf[pos]
        pos += 1
        v |= (b & 0x7F) << shift
        if b < 0x80:
            return v, pos
        shift += 7
        if shift > max_shift:
            raise DecodeError(what.rstrip(":"))


def read_uvarint(buf, pos: int) -> tuple[int, int]:
    """Unsigned LEB128 varint of at most 5 bytes (Kafka ``readUnsignedVarint``, 32-bit)."""
    b = buf[pos]
    if b < 0x80:
        return b, pos + 1
    return _read_uleb(buf, pos, 28, "unsigned varint longer than 5 bytes:")


def read_uvarlong(buf, pos: int) -> tuple[int, int]:
    """Unsigned LEB128 varint of at most 10 bytes (64-bit)."""
    return _read_uleb(buf, pos, 63, "unsigned varlong longer than 10 bytes:")


def read_varint(buf, pos: int) -> tuple[int, int]:
    """Zig-zag signed varint (int32, at most 5 bytes)."""
    v, pos = read_uvarint(buf, pos)
    if v > 0xFFFFFFFF:
        raise DecodeError("varint out of int32 range")
    return (v >> 1) ^ -(v & 1), pos


def read_varlong(buf, pos: int) -> tuple[int, int]:
    """Zig-zag signed varlong (int64, at most 10 bytes)."""
    v, pos = read_uvarlong(buf, pos)
    if v > 0xFFFFFFFFFFFFFFFF:
        raise DecodeError("varlong out of int64 range")
    return (v >> 1) ^ -(v & 1), pos


_UVARINT_1 = [bytes([i]) for i in range(128)]


def write_uvarint(b: bytearray, v: int) -> None:
    """Append unsigned varint ``v`` (0 <= v < 2**32) to ``b``."""
    if v < 0x80:
        b.append(v)
        return
    if v < 0 or v > 0xFFFFFFFF:
        raise ValueError(f"unsigned varint out of range: {v}")
    while v >= 0x80:
        b.append((v & 0x7F) | 0x80)
        v >>= 7
    b.append(v)


def uvarint_bytes(v: int) -> bytes:
    """Unsigned varint ``v`` as ``bytes``."""
    if v < 0x80:
        return _UVARINT_1[v]
    b = bytearray()
    write_uvarint(b, v)
    return bytes(b)


def write_varint(b: bytearray, v: int) -> None:
    """Append zig-zag signed varint (int32) ``v``."""
    write_uvarint(b, ((v << 1) ^ (v >> 31)) & 0xFFFFFFFF)


def write_varlong(b: bytearray, v: int) -> None:
    """Append zig-zag signed varlong (int64) ``v``."""
    u = ((v << 1) ^ (v >> 63)) & 0xFFFFFFFFFFFFFFFF
    while u >= 0x80:
        b.append((u & 0x7F) | 0x80)
        u >>= 7
    b.append(u)


# ----------------------------------------------------------------------------- lengths


def _check_len(n: int, pos: int, end: int, what: str, limit: int) -> None:
    if n > end - pos:
        raise DecodeError(f"{what} length {n} exceeds the {end - pos} bytes left")
    if n > limit:
        raise DecodeError(f"{what} length {n} exceeds the limit {limit}")


def read_count(buf, pos: int, end: int, min_elem: int, nullable: bool) -> tuple[int, int]:
    """INT32 array count; -1 (only if ``nullable``) is returned as -1 meaning null.

    ``min_elem`` is the smallest encoded size of one element (bytes), used to reject counts that
    cannot fit in the bytes left before any list is built.
    """
    (n,) = _i32_unpack(buf, pos)
    pos += 4
    if n < 0:
        if n == -1 and nullable:
            return -1, pos
        raise DecodeError(f"invalid array length {n}")
    if n > _MAX_ARR:
        raise DecodeError(f"array length {n} exceeds the limit {_MAX_ARR}")
    if n * min_elem > end - pos:
        raise DecodeError(f"array length {n} cannot fit in the {end - pos} bytes left")
    return n, pos


def read_ccount(buf, pos: int, end: int, min_elem: int, nullable: bool) -> tuple[int, int]:
    """COMPACT_ARRAY count (uvarint N+1; 0 = null, only if ``nullable``)."""
    n = buf[pos]
    if n < 0x80:
        pos += 1
    else:
        n, pos = read_uvarint(buf, pos)
    n -= 1
    if n < 0:
        if nullable:
            return -1, pos
        raise DecodeError("null array in a non-nullable field")
    if n > _MAX_ARR:
        raise DecodeError(f"array length {n} exceeds the limit {_MAX_ARR}")
    if n * min_elem > end - pos:
        raise DecodeError(f"array length {n} cannot fit in the {end - pos} bytes left")
    return n, pos


# ----------------------------------------------------------------------------- strings / bytes


def _str_at(buf, pos: int, end: int, n: int):
    if n > end - pos:
        raise DecodeError(f"string length {n} exceeds the {end - pos} bytes left")
    if n > _MAX_STR:
        raise DecodeError(f"string length {n} exceeds the limit {_MAX_STR}")
    return str(buf[pos : pos + n], "utf-8"), pos + n


def _i16_len(buf, pos: int, nullable: bool):
    (n,) = _i16_unpack(buf, pos)
    if n < 0 and not (n == -1 and nullable):
        raise DecodeError(f"invalid string length {n}")
    return n, pos + 2


def _uv_len(buf, pos: int, nullable: bool):
    n = buf[pos]
    if n < 0x80:
        pos += 1
    else:
        n, pos = read_uvarint(buf, pos)
    n -= 1
    if n < 0 and not nullable:
        raise DecodeError("null in a non-nullable field")
    return n, pos


def read_str(buf, pos: int, end: int):
    """STRING: INT16 length then UTF-8; a negative length is an error."""
    n, pos = _i16_len(buf, pos, False)
    return _str_at(buf, pos, end, n)


def read_nstr(buf, pos: int, end: int):
    """NULLABLE_STRING: INT16 length (-1 = null) then UTF-8."""
    n, pos = _i16_len(buf, pos, True)
    if n < 0:
        return None, pos
    return _str_at(buf, pos, end, n)


def read_cstr(buf, pos: int, end: int):
    """COMPACT_STRING: uvarint N+1 then UTF-8; null (0) is an error."""
    n, pos = _uv_len(buf, pos, False)
    return _str_at(buf, pos, end, n)


def read_ncstr(buf, pos: int, end: int):
    """COMPACT_NULLABLE_STRING: uvarint N+1 (0 = null) then UTF-8."""
    n, pos = _uv_len(buf, pos, True)
    if n < 0:
        return None, pos
    return _str_at(buf, pos, end, n)


def _bytes_at(buf, pos: int, end: int, n: int):
    _check_len(n, pos, end, "bytes", _MAX_STR)
    return bytes(buf[pos : pos + n]), pos + n


def _i32_len(buf, pos: int, nullable: bool, what: str):
    (n,) = _i32_unpack(buf, pos)
    if n < 0 and not (n == -1 and nullable):
        raise DecodeError(f"invalid {what} length {n}")
    return n, pos + 4


def read_bytes(buf, pos: int, end: int):
    """BYTES: INT32 length then raw bytes (returned as ``bytes``)."""
    n, pos = _i32_len(buf, pos, False, "bytes")
    return _bytes_at(buf, pos, end, n)


def read_nbytes(buf, pos: int, end: int):
    """NULLABLE_BYTES: INT32 length (-1 = null) then raw bytes."""
    n, pos = _i32_len(buf, pos, True, "bytes")
    if n < 0:
        return None, pos
    return _bytes_at(buf, pos, end, n)


def read_cbytes(buf, pos: int, end: int):
    """COMPACT_BYTES: uvarint N+1 then raw bytes; null is an error."""
    n, pos = _uv_len(buf, pos, False)
    return _bytes_at(buf, pos, end, n)


def read_ncbytes(buf, pos: int, end: int):
    """COMPACT_NULLABLE_BYTES: uvarint N+1 (0 = null) then raw bytes."""
    n, pos = _uv_len(buf, pos, True)
    if n < 0:
        return None, pos
    return _bytes_at(buf, pos, end, n)


def _records_copy(buf, pos: int, n: int) -> bytearray:
    with memoryview(buf) as m:
        return bytearray(m[pos : pos + n])


def _records_at(buf, pos: int, end: int, n: int):
    if n < 0:
        return None, pos
    if n > end - pos:
        raise DecodeError(f"records length {n} exceeds the {end - pos} bytes left")
    return _records_copy(buf, pos, n), pos + n


def read_records(buf, pos: int, end: int, nullable: bool):
    """RECORDS: INT32 length (-1 = null) then a record set, returned as an owned ``bytearray``.

    Records are bounded only by the bytes left (the frame size bounds them), not by
    ``MAX_STRING_BYTES``.
    """
    n, pos = _i32_len(buf, pos, nullable, "records")
    return _records_at(buf, pos, end, n)


def read_crecords(buf, pos: int, end: int, nullable: bool):
    """COMPACT_RECORDS: uvarint N+1 (0 = null) then a record set (owned ``bytearray``)."""
    n, pos = _uv_len(buf, pos, nullable)
    return _records_at(buf, pos, end, n)


def read_uuid(raw: bytes):
    """16 raw bytes -> ``uuid.UUID`` (the zero UUID is shared)."""
    if raw == _ZERO16:
        return ZERO_UUID
    return _UUID(bytes=raw)


def skip_tagged(buf, pos: int, end: int) -> int:
    """Skip a whole tagged-field section (uvarint count, then tag/size/data triples)."""
    n, pos = read_uvarint(buf, pos)
    if n > _MAX_TAGS:
        raise DecodeError(f"{n} tagged fields exceed the limit {_MAX_TAGS}")
    for _ in range(n):
        _tag, pos = read_uvarint(buf, pos)
        size, pos = read_uvarint(buf, pos)
        if size > end - pos:
            raise DecodeError(f"tagged field size {size} exceeds the {end - pos} bytes left")
        pos += size
    return pos


# ----------------------------------------------------------------------------- writers


def uuid_bytes(v) -> bytes:
    """``uuid.UUID`` (or 16 raw bytes, or None = zero UUID) -> 16 bytes."""
    if v.__class__ is _UUID:
        return v.bytes
    if v is None:
        return _ZERO16
    if isinstance(v, (bytes, bytearray, memoryview)) and len(v) == 16:
        return bytes(v)
    if isinstance(v, _UUID):
        return v.bytes
    if isinstance(v, str):
        return _UUID(v).bytes
    raise ValueError(f"not a UUID: {v!r}")


def write_str(b: bytearray, v) -> None:
    """STRING (non-nullable)."""
    if v is None:
        raise ValueError("null in a non-nullable string field")
    e = v.encode("utf-8")
    if len(e) > 0x7FFF:
        raise ValueError(f"string of {len(e)} bytes is too long for an INT16 length")
    b += _i16_pack(len(e))
    b += e


def write_nstr(b: bytearray, v) -> None:
    """NULLABLE_STRING."""
    if v is None:
        b += b"\xff\xff"
        return
    write_str(b, v)


def write_cstr(b: bytearray, v) -> None:
    """COMPACT_STRING (non-nullable)."""
    if v is None:
        raise ValueError("null in a non-nullable string field")
    e = v.encode("utf-8")
    n = len(e) + 1
    if n < 0x80:
        b.append(n)
    else:
        write_uvarint(b, n)
    b += e


def write_ncstr(b: bytearray, v) -> None:
    """COMPACT_NULLABLE_STRING."""
    if v is None:
        b.append(0)
        return
    write_cstr(b, v)


def write_bytes(b: bytearray, v) -> None:
    """BYTES (non-nullable)."""
    if v is None:
        raise ValueError("null in a non-nullable bytes field")
    b += _i32_pack(len(v))
    b += v


def write_nbytes(b: bytearray, v) -> None:
    """NULLABLE_BYTES."""
    if v is None:
        b += b"\xff\xff\xff\xff"
        return
    b += _i32_pack(len(v))
    b += v


def write_cbytes(b: bytearray, v) -> None:
    """COMPACT_BYTES (non-nullable)."""
    if v is None:
        raise ValueError("null in a non-nullable bytes field")
    write_uvarint(b, len(v) + 1)
    b += v


def write_ncbytes(b: bytearray, v) -> None:
    """COMPACT_NULLABLE_BYTES."""
    if v is None:
        b.append(0)
        return
    write_uvarint(b, len(v) + 1)
    b += v


def write_records(b: bytearray, v, out, nullable: bool, compact: bool) -> None:
    """RECORDS / COMPACT_RECORDS from None, a bytes-like object or a :class:`RecordsParts`.

    When ``out`` is a list (``encode_parts``), each :class:`FileRegion` of a ``RecordsParts``
    ends the current bytes chunk: ``bytes(b)`` and then the region are appended to ``out`` and
    ``b`` is cleared. When ``out`` is None the regions are read into ``b``.
    """
    if v is None:
        if not nullable:  # non-nullable records: None means empty
            v = b""
        elif compact:
            b.append(0)
            return
        else:
            b += b"\xff\xff\xff\xff"
            return
    if isinstance(v, RecordsParts):
        size = v.size
        if compact:
            write_uvarint(b, size + 1)
        else:
            b += _i32_pack(size)
        for p in v.parts:
            if isinstance(p, FileRegion):
                if out is None:
                    b += p.read()
                else:
                    if b:
                        out.append(bytes(b))
                        b.clear()
                    out.append(p)
            else:
                b += p
        return
    if isinstance(v, FileRegion):
        write_records(b, RecordsParts([v]), out, nullable, compact)
        return
    n = len(v) if not isinstance(v, memoryview) else v.nbytes
    if compact:
        write_uvarint(b, n + 1)
    else:
        b += _i32_pack(n)
    b += v


def write_tagged(b: bytearray, tagged: list) -> None:
    """Append a tagged-field section from ``[(tag, bytes-like), ...]`` sorted by tag."""
    write_uvarint(b, len(tagged))
    for tag, data in tagged:
        write_uvarint(b, tag)
        write_uvarint(b, len(data))
        b += data
