"""Kafka magic-2 record batches (KIP-98 format): header-level fast path, decoding, building.

Source: Apache Kafka ``org.apache.kafka.common.record.DefaultRecordBatch`` / ``DefaultRecord``,
KIP-98, and the protocol guide's "Record Batch" section. Layout (big-endian)::

    offset  size  field
         0     8  baseOffset
         8     4  batchLength            (bytes after this field: size = batchLength + 12)
        12     4  partitionLeaderEpoch   (outside the CRC)
        16     1  magic                  (2)
        17     4  crc                    (CRC-32C of attributes .. end of batch)
        21     2  attributes             (bits 0-2 compression, 3 timestamp type,
                                          4 transactional, 5 control)
        23     4  lastOffsetDelta
        27     8  baseTimestamp
        35     8  maxTimestamp
        43     8  producerId
        51     2  producerEpoch
        53     4  baseSequence
        57     4  recordsCount
        61     -  records (compressed as one stream when attributes & 7 != 0)

Header-level functions (:func:`read_batch_header`, :func:`iter_batches`, :func:`verify_crc`,
:func:`validate_batches`, the ``set_*`` rewriters) never decode records: they are the Produce /
Fetch hot path (see DESIGN.md "Data path rules"). Records are decoded by :func:`decode_batch`.

Errors: :class:`CorruptRecordError` for framing, magic, CRC and malformed record bytes;
:class:`InvalidRecordError` for well-framed batches that break a rule or a bound;
:class:`UnsupportedCompressionError` for codec ids outside 0..4;
:class:`RecordTooLargeError` for batches above the caller's ``max_batch_bytes``.
"""

from __future__ import annotations

import struct
import time
import zlib
from collections.abc import Iterable, Iterator
from typing import NamedTuple

import cramjam
from crc32c import crc32c as _crc32c

from litemq.limits import (
    MAX_DECOMPRESSED_BATCH_BYTES,
    MAX_RECORDS_PER_BATCH,
    RECORD_BATCH_HEADER_BYTES,
)
from litemq.protocol.errors import (
    CorruptRecordError,
    InvalidRecordError,
    RecordTooLargeError,
    UnsupportedCompressionError,
)

__all__ = [
    "BATCH_HEADER_BYTES",
    "BatchHeader",
    "read_batch_header",
    "iter_batches",
    "verify_crc",
    "validate_batches",
    "set_base_offset",
    "set_partition_leader_epoch",
    "set_log_append_time",
    "Record",
    "decode_batch",
    "decode_records",
    "build_batch",
    "build_control_batch",
    "parse_control_key",
    "parse_end_txn_marker",
]

BATCH_HEADER_BYTES = 61
"""Size of the magic-2 batch header, baseOffset .. recordsCount (bytes)."""
assert BATCH_HEADER_BYTES == RECORD_BATCH_HEADER_BYTES

LOG_OVERHEAD_BYTES = 12
"""baseOffset(8) + batchLength(4): bytes of a batch not counted in batchLength."""

MIN_BATCH_LENGTH = BATCH_HEADER_BYTES - LOG_OVERHEAD_BYTES  # 49
MAGIC_V2 = 2

# Field offsets inside a batch.
_BASE_OFFSET_AT = 0
_BATCH_LENGTH_AT = 8
_LEADER_EPOCH_AT = 12
_MAGIC_AT = 16
_CRC_AT = 17
_ATTRIBUTES_AT = 21
_MAX_TIMESTAMP_AT = 35

# Attribute bits (Kafka DefaultRecordBatch).
COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_FLAG = 0x10
CONTROL_FLAG = 0x20
DELETE_HORIZON_FLAG = 0x40
"""Attribute bit 6 (KIP-534): ``base_timestamp`` holds the batch's delete horizon, the time
after which the log cleaner may remove it (a transaction marker whose data is gone); record
timestamps keep their values (their deltas may be negative)."""

COMPRESSION_NONE = 0
COMPRESSION_GZIP = 1
COMPRESSION_SNAPPY = 2
COMPRESSION_LZ4 = 3
COMPRESSION_ZSTD = 4

TIMESTAMP_CREATE_TIME = 0
TIMESTAMP_LOG_APPEND_TIME = 1

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1
NO_TIMESTAMP = -1

_HEADER = struct.Struct(">qiibIhiqqqhii")
_I64 = struct.Struct(">q")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_I16 = struct.Struct(">h")


class BatchHeader(NamedTuple):
    """The 61-byte header of one magic-2 record batch, as stored on the wire.

    Integers as Kafka defines them: offsets int64, ``crc`` uint32, ``attributes`` int16,
    timestamps int64 milliseconds since the epoch (-1 = none), ``producer_id`` int64 (-1 = none),
    ``producer_epoch`` int16, ``base_sequence`` int32 (-1 = none).
    """

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def last_offset(self) -> int:
        """Offset of the last record the batch covers (``base_offset + last_offset_delta``)."""
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        """Offset right after the batch (``last_offset + 1``)."""
        return self.base_offset + self.last_offset_delta + 1

    @property
    def size(self) -> int:
        """Whole batch size in bytes, including baseOffset and batchLength (``batch_length + 12``)."""
        return self.batch_length + LOG_OVERHEAD_BYTES

    @property
    def compression(self) -> int:
        """Codec id: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd (``attributes & 7``)."""
        return self.attributes & COMPRESSION_MASK

    @property
    def timestamp_type(self) -> int:
        """0 CreateTime, 1 LogAppendTime (attribute bit 3)."""
        return 1 if self.attributes & TIMESTAMP_TYPE_MASK else 0

    @property
    def is_transactional(self) -> bool:
        """Attribute bit 4 (KIP-98)."""
        return bool(self.attributes & TRANSACTIONAL_FLAG)

    @property
    def is_control(self) -> bool:
        """Attribute bit 5: the batch holds one control record (transaction marker, Raft)."""
        return bool(self.attributes & CONTROL_FLAG)

    @property
    def delete_horizon_ms(self) -> int | None:
        """The delete horizon (epoch ms) when attribute bit 6 is set (KIP-534), else None."""
        return self.base_timestamp if self.attributes & DELETE_HORIZON_FLAG else None

    @property
    def last_sequence(self) -> int:
        """``base_sequence + last_offset_delta`` wrapping at 2**31 like Kafka; -1 if no sequence."""
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        seq = self.base_sequence + self.last_offset_delta
        return seq - 0x80000000 if seq > 0x7FFFFFFF else seq


def peek_batch(buf, pos: int = 0) -> tuple[int | None, int | None, int | None]:
    """``(magic, compression codec, size in bytes)`` of the batch at ``buf[pos:]``, read from
    those header bytes alone and not checked (no struct unpack: a per-request check of a
    produced blob's first batch). Each is None when ``buf`` is too short to hold it: the magic
    needs 17 bytes (a message set of formats v0/v1 has its magic there too), the codec and the
    size a whole 61-byte header."""
    n = len(buf) - pos
    if n <= _MAGIC_AT:
        return None, None, None
    magic = buf[pos + _MAGIC_AT]
    if n < BATCH_HEADER_BYTES:
        return magic, None, None
    codec = buf[pos + _ATTRIBUTES_AT + 1] & COMPRESSION_MASK  # the low byte of the int16 attributes
    batch_length = int.from_bytes(buf[pos + _BATCH_LENGTH_AT:pos + _LEADER_EPOCH_AT], "big", signed=True)
    return magic, codec, LOG_OVERHEAD_BYTES + batch_length


def read_batch_header(buf, pos: int = 0) -> BatchHeader:
    """Parse the 61-byte batch header at ``buf[pos:]`` (bytes, bytearray or memoryview).

    Checks only what is needed to trust the header itself: at least 61 bytes present,
    ``batch_length >= 49`` and ``magic == 2``. It does not check that the whole batch is present
    (see :func:`iter_batches`) nor the CRC (see :func:`verify_crc`).

    Raises :class:`CorruptRecordError`.
    """
    if pos < 0 or len(buf) - pos < BATCH_HEADER_BYTES:
        raise CorruptRecordError(
            f"record batch header needs {BATCH_HEADER_BYTES} bytes, {max(len(buf) - pos, 0)} left"
        )
    h = BatchHeader._make(_HEADER.unpack_from(buf, pos))
    if h.batch_length < MIN_BATCH_LENGTH:
        raise CorruptRecordError(f"record batch length {h.batch_length} < {MIN_BATCH_LENGTH}")
    if h.magic != MAGIC_V2:
        raise CorruptRecordError(f"unsupported record batch magic {h.magic} (only 2)")
    return h


def iter_batches(
    buf, pos: int = 0, end: int | None = None, *, allow_trailing_partial: bool = False
) -> Iterator[tuple[int, BatchHeader]]:
    """Yield ``(position, header)`` for each batch in ``buf[pos:end]``, framing only.

    Every batch must lie entirely inside ``[pos, end)``; the CRC is not checked and records are
    not decoded. With ``allow_trailing_partial=True`` a truncated last batch (as in a Fetch
    response cut at ``max_bytes``, or a torn write at the end of a segment) ends the iteration
    silently instead of raising; a malformed header (bad length or magic) still raises.

    Raises :class:`CorruptRecordError` (partial or oversized batch, bad length, bad magic).
    """
    n = len(buf)
    end = n if end is None else min(end, n)
    unpack = _HEADER.unpack_from
    make = BatchHeader._make
    while pos < end:
        left = end - pos
        if left < BATCH_HEADER_BYTES:
            if allow_trailing_partial:
                return
            raise CorruptRecordError(f"partial record batch header: {left} bytes left")
        h = make(unpack(buf, pos))
        if h.batch_length < MIN_BATCH_LENGTH:
            raise CorruptRecordError(f"record batch length {h.batch_length} < {MIN_BATCH_LENGTH}")
        if h.magic != MAGIC_V2:
            raise CorruptRecordError(f"unsupported record batch magic {h.magic} (only 2)")
        size = h.batch_length + LOG_OVERHEAD_BYTES
        if size > left:
            if allow_trailing_partial:
                return
            raise CorruptRecordError(f"record batch of {size} bytes but only {left} bytes left")
        yield pos, h
        pos += size


def _crc_of(buf, pos: int, size: int) -> int:
    mv = buf if type(buf) is memoryview else memoryview(buf)
    return _crc32c(mv[pos + _ATTRIBUTES_AT : pos + size])


def verify_crc(buf, pos: int, header: BatchHeader) -> bool:
    """True if ``header.crc`` equals CRC-32C (Castagnoli) of attributes .. end of the batch.

    ``buf[pos:pos+header.size]`` must be present (as :func:`iter_batches` guarantees).
    No copy is made (memoryview slice into the C crc32c).
    """
    if len(buf) - pos < header.size:
        return False
    return _crc_of(buf, pos, header.size) == header.crc


def record_too_large(size: int, max_batch_bytes: int) -> RecordTooLargeError:
    """The MESSAGE_TOO_LARGE error of a batch of ``size`` bytes over ``max_batch_bytes``."""
    return RecordTooLargeError(f"record batch of {size} bytes exceeds the maximum of {max_batch_bytes} bytes")


def validate_batches(buf, *, max_batch_bytes: int | None = None, dense: bool = False) -> list[BatchHeader]:
    """Validate a records blob (e.g. a Produce partition's ``records``) from headers only.

    Checks, per batch, in order: framing (every batch whole, nothing trailing), magic 2,
    ``size <= max_batch_bytes`` (if given; Kafka compares the whole batch size with
    ``max.message.bytes``), codec id 0..4, ``records_count >= 0``, ``last_offset_delta >= 0``,
    with ``dense=True`` also Kafka's Produce rule ``records_count == last_offset_delta + 1 >= 1``
    (LogValidator), and last the CRC-32C. Records are never decoded. An empty blob gives ``[]``.

    Returns the headers in order. Raises :class:`CorruptRecordError` (framing, magic, CRC),
    :class:`RecordTooLargeError`, :class:`UnsupportedCompressionError`,
    :class:`InvalidRecordError` (counts / offsets).
    """
    mv = buf if type(buf) is memoryview else memoryview(buf)
    out: list[BatchHeader] = []
    append = out.append
    for pos, h in iter_batches(mv):
        size = h.batch_length + LOG_OVERHEAD_BYTES
        if max_batch_bytes is not None and size > max_batch_bytes:
            raise record_too_large(size, max_batch_bytes)
        if h.attributes & COMPRESSION_MASK > COMPRESSION_ZSTD:
            raise UnsupportedCompressionError(f"unknown compression codec {h.attributes & 7}")
        if h.records_count < 0:
            raise InvalidRecordError(f"negative records count {h.records_count}")
        if h.last_offset_delta < 0:
            raise InvalidRecordError(f"negative last offset delta {h.last_offset_delta}")
        if dense and h.records_count != h.last_offset_delta + 1:
            raise InvalidRecordError(
                f"records count {h.records_count} does not match last offset delta "
                f"{h.last_offset_delta}"
            )
        if _crc32c(mv[pos + _ATTRIBUTES_AT : pos + size]) != h.crc:
            raise CorruptRecordError(f"record batch at byte {pos}: CRC-32C mismatch")
        append(h)
    return out


def set_base_offset(buf: bytearray, pos: int, base_offset: int) -> None:
    """Overwrite baseOffset (int64) of the batch at ``pos`` in place; the CRC stays valid."""
    _I64.pack_into(buf, pos + _BASE_OFFSET_AT, base_offset)


def set_partition_leader_epoch(buf: bytearray, pos: int, epoch: int) -> None:
    """Overwrite partitionLeaderEpoch (int32) of the batch at ``pos`` in place; CRC stays valid."""
    _I32.pack_into(buf, pos + _LEADER_EPOCH_AT, epoch)


def set_log_append_time(buf: bytearray, pos: int, timestamp_ms: int) -> None:
    """Stamp the batch at ``pos`` with LogAppendTime, in place (Kafka ``setMaxTimestamp``).

    Sets attribute bit 3 and ``max_timestamp = timestamp_ms`` and recomputes the CRC-32C.
    Record timestamps are then read as ``max_timestamp`` by consumers. The whole batch must be
    present in ``buf``. Raises :class:`CorruptRecordError` if the header is bad or truncated.
    """
    h = read_batch_header(buf, pos)
    if len(buf) - pos < h.size:
        raise CorruptRecordError("record batch truncated")
    if h.attributes & TIMESTAMP_TYPE_MASK and h.max_timestamp == timestamp_ms:
        return
    _I16.pack_into(buf, pos + _ATTRIBUTES_AT, h.attributes | TIMESTAMP_TYPE_MASK)
    _I64.pack_into(buf, pos + _MAX_TIMESTAMP_AT, timestamp_ms)
    _U32.pack_into(buf, pos + _CRC_AT, _crc_of(buf, pos, h.size))


# ============================================================================ records


class Record(NamedTuple):
    """One decoded record (Kafka ``DefaultRecord``).

    ``offset`` absolute int64; ``timestamp`` int64 ms (for a LogAppendTime batch, the batch's
    ``max_timestamp``); ``key`` / ``value`` bytes or None; ``headers`` a tuple of
    ``(key: str, value: bytes | None)``. Header keys are decoded as UTF-8 with
    ``surrogateescape``, so invalid UTF-8 round-trips byte for byte through :func:`build_batch`.
    """

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()


_MIN_RECORD_BYTES = 7
"""length, attributes, timestampDelta, offsetDelta, keyLength, valueLength, headerCount."""


def _read_varint(data, pos: int, end: int, max_bytes: int = 5) -> tuple[int, int]:
    """Zig-zag varint (``max_bytes`` 5: int32, 10: int64) from ``data[pos:end]``."""
    u = 0
    shift = 0
    limit = 7 * max_bytes
    while True:
        if pos >= end:
            raise CorruptRecordError("record truncated inside a varint")
        b = data[pos]
        pos += 1
        u |= (b & 0x7F) << shift
        if b < 0x80:
            break
        shift += 7
        if shift >= limit:
            raise CorruptRecordError(f"varint longer than {max_bytes} bytes")
    if u >> (32 if max_bytes == 5 else 64):
        raise CorruptRecordError("varint out of range")
    return (u >> 1) ^ -(u & 1), pos


def _decode_records(data, pos: int, end: int, h: BatchHeader) -> list[Record]:
    """Decode ``h.records_count`` records from ``data[pos:end]``, which they must fill exactly."""
    count = h.records_count
    if count > (end - pos) // _MIN_RECORD_BYTES:
        raise CorruptRecordError(f"records count {count} cannot fit in {end - pos} bytes")
    base_offset = h.base_offset
    base_ts = h.base_timestamp
    log_append_ts = h.max_timestamp if h.attributes & TIMESTAMP_TYPE_MASK else None
    rv = _read_varint
    out: list[Record] = []
    append = out.append
    for _ in range(count):
        if pos >= end:
            raise CorruptRecordError(f"batch ends before record {len(out)} of {count}")
        b = data[pos]  # length: fast path for one-byte varints
        if b < 0x80:
            length = (b >> 1) ^ -(b & 1)
            pos += 1
        else:
            length, pos = rv(data, pos, end)
        if length < 0 or length > end - pos:
            raise CorruptRecordError(f"record length {length} with {end - pos} bytes left")
        rend = pos + length
        if length < _MIN_RECORD_BYTES - 1:
            raise CorruptRecordError(f"record length {length} too small")
        pos += 1  # attributes (unused)
        ts_delta, pos = rv(data, pos, rend, 10)
        b = data[pos] if pos < rend else 0x80  # offset delta, fast path
        if b < 0x80:
            off_delta = (b >> 1) ^ -(b & 1)
            pos += 1
        else:
            off_delta, pos = rv(data, pos, rend)
        # key
        klen, pos = rv(data, pos, rend)
        if klen < 0:
            key = None
        else:
            if klen > rend - pos:
                raise CorruptRecordError(f"record key of {klen} bytes with {rend - pos} left")
            key = bytes(data[pos : pos + klen])
            pos += klen
        # value
        vlen, pos = rv(data, pos, rend)
        if vlen < 0:
            value = None
        else:
            if vlen > rend - pos:
                raise CorruptRecordError(f"record value of {vlen} bytes with {rend - pos} left")
            value = bytes(data[pos : pos + vlen])
            pos += vlen
        # headers
        hcount, pos = rv(data, pos, rend)
        if hcount == 0:
            headers = ()
        else:
            if hcount < 0:
                raise InvalidRecordError(f"negative record header count {hcount}")
            if hcount > (rend - pos) // 2:
                raise CorruptRecordError(f"{hcount} record headers cannot fit in {rend - pos} bytes")
            hl = []
            for _ in range(hcount):
                hklen, pos = rv(data, pos, rend)
                if hklen < 0:
                    raise InvalidRecordError(f"negative record header key length {hklen}")
                if hklen > rend - pos:
                    raise CorruptRecordError("record header key past the end of the record")
                hkey = str(data[pos : pos + hklen], "utf-8", "surrogateescape")
                pos += hklen
                hvlen, pos = rv(data, pos, rend)
                if hvlen < 0:
                    hval = None
                else:
                    if hvlen > rend - pos:
                        raise CorruptRecordError("record header value past the end of the record")
                    hval = bytes(data[pos : pos + hvlen])
                    pos += hvlen
                hl.append((hkey, hval))
            headers = tuple(hl)
        if pos != rend:
            raise CorruptRecordError(f"record declared {length} bytes but used {length - (rend - pos)}")
        append(
            Record(
                base_offset + off_delta,
                log_append_ts if log_append_ts is not None else base_ts + ts_delta,
                key,
                value,
                headers,
            )
        )
    if pos != end:
        raise CorruptRecordError(f"{end - pos} bytes left after the last record of the batch")
    return out


# ------------------------------------------------------------------------ compression

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)  # version 1, min compatible 1
_XERIAL_BLOCK_BYTES = 32 * 1024  # xerial SnappyOutputStream default block size
_LZ4_MAGIC = b"\x04\x22\x4d\x18"
_LZ4_BLOCK_MAX = {4: 1 << 16, 5: 1 << 18, 6: 1 << 20, 7: 1 << 22}
_ZSTD_MAGIC = 0xFD2FB528
_ZSTD_BLOCK_MAX = 128 * 1024
_LE32 = struct.Struct("<I")
_LE64 = struct.Struct("<Q")
_CODEC_NAMES = {1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}


def _too_big(n: int, limit: int) -> InvalidRecordError:
    return InvalidRecordError(f"decompressed batch would exceed {limit} bytes (at least {n})")


def _gunzip(data: memoryview, limit: int) -> bytes:
    """Gzip stream(s) (concatenated members allowed, as java.util.zip.GZIPInputStream does)."""
    parts = []
    total = 0
    rest = data
    while True:
        d = zlib.decompressobj(31)
        try:
            chunk = d.decompress(rest, limit - total + 1)
        except zlib.error as e:
            raise CorruptRecordError(f"gzip: {e}") from None
        total += len(chunk)
        if total > limit:
            raise _too_big(total, limit)
        if not d.eof:
            raise CorruptRecordError("gzip: truncated stream")
        parts.append(chunk)
        rest = d.unused_data
        if not rest:
            break
    return parts[0] if len(parts) == 1 else b"".join(parts)


def _snappy_raw(block, total: int, limit: int) -> bytes:
    n = cramjam.snappy.decompress_raw_len(block)
    if total + n > limit:
        raise _too_big(total + n, limit)
    return cramjam.snappy.decompress_raw(block)


def _unsnappy(data: memoryview, limit: int):
    """Xerial-framed snappy (Java clients) or raw snappy (librdkafka); sizes checked first."""
    n = len(data)
    if n >= 16 and data[:8] == _XERIAL_MAGIC:
        pos = 16
        parts = []
        total = 0
        while pos < n:
            if n - pos < 4:
                raise CorruptRecordError("snappy: truncated xerial block length")
            (blen,) = _I32.unpack_from(data, pos)
            pos += 4
            if blen < 0 or blen > n - pos:
                raise CorruptRecordError(f"snappy: xerial block of {blen} bytes, {n - pos} left")
            out = _snappy_raw(data[pos : pos + blen], total, limit)
            total += len(out)
            parts.append(out)
            pos += blen
        return b"".join(parts)
    return _snappy_raw(data, 0, limit)


def _unlz4(data: memoryview, limit: int):
    """LZ4 frame (KAFKA-3160 format); block headers walked first to bound the output size."""
    n = len(data)
    if n < 7 or data[:4] != _LZ4_MAGIC:
        raise CorruptRecordError("lz4: not an LZ4 frame")
    flg = data[4]
    if flg >> 6 != 1:
        raise CorruptRecordError(f"lz4: unsupported frame version {flg >> 6}")
    block_max = _LZ4_BLOCK_MAX.get((data[5] >> 4) & 7)
    if block_max is None:
        raise CorruptRecordError("lz4: bad block maximum size")
    pos = 6
    if flg & 0x08:  # content size
        if n - pos < 8:
            raise CorruptRecordError("lz4: truncated frame descriptor")
        (content_size,) = _LE64.unpack_from(data, pos)
        if content_size > limit:
            raise _too_big(content_size, limit)
        pos += 8
    if flg & 0x01:  # dictionary id
        pos += 4
    pos += 1  # header checksum
    block_checksum = 4 if flg & 0x10 else 0
    bound = 0
    while True:
        if n - pos < 4:
            raise CorruptRecordError("lz4: truncated block header")
        (bs,) = _LE32.unpack_from(data, pos)
        pos += 4
        if bs == 0:
            break
        blen = bs & 0x7FFFFFFF
        if blen > block_max or blen > n - pos - block_checksum:
            raise CorruptRecordError(f"lz4: block of {blen} bytes, {n - pos} left")
        bound += blen if bs & 0x80000000 else block_max
        if bound > limit:
            raise _too_big(bound, limit)
        pos += blen + block_checksum
    if flg & 0x04:
        pos += 4
    if pos != n:
        raise CorruptRecordError("lz4: frame length does not match the batch")
    return cramjam.lz4.decompress(data)


def _unzstd(data: memoryview, limit: int):
    """Zstandard frame(s) (RFC 8878); block headers walked first to bound the output size."""
    n = len(data)
    pos = 0
    bound = 0
    while pos < n:
        if n - pos < 5:
            raise CorruptRecordError("zstd: truncated frame header")
        (magic,) = _LE32.unpack_from(data, pos)
        if magic & 0xFFFFFFF0 == 0x184D2A50:  # skippable frame
            if n - pos < 8:
                raise CorruptRecordError("zstd: truncated skippable frame")
            pos += 8 + _LE32.unpack_from(data, pos + 4)[0]
            continue
        if magic != _ZSTD_MAGIC:
            raise CorruptRecordError("zstd: bad frame magic")
        fhd = data[pos + 4]
        pos += 5
        if fhd & 0x08:
            raise CorruptRecordError("zstd: reserved frame header bit set")
        fcs_flag = fhd >> 6
        single_segment = fhd & 0x20
        if not single_segment:
            pos += 1  # window descriptor
        pos += (0, 1, 2, 4)[fhd & 3]  # dictionary id
        fcs_bytes = (1 if single_segment else 0, 2, 4, 8)[fcs_flag]
        if n - pos < fcs_bytes:
            raise CorruptRecordError("zstd: truncated frame header")
        if fcs_bytes:
            fcs = int.from_bytes(data[pos : pos + fcs_bytes], "little") + (256 if fcs_bytes == 2 else 0)
            if fcs > limit:
                raise _too_big(fcs, limit)
        pos += fcs_bytes
        while True:
            if n - pos < 3:
                raise CorruptRecordError("zstd: truncated block header")
            bh = data[pos] | data[pos + 1] << 8 | data[pos + 2] << 16
            pos += 3
            btype = (bh >> 1) & 3
            bsize = bh >> 3
            if btype == 3 or bsize > _ZSTD_BLOCK_MAX:
                raise CorruptRecordError("zstd: bad block header")
            if btype == 1:  # RLE: one byte repeated bsize times
                bound += bsize
                pos += 1
            else:
                bound += bsize if btype == 0 else _ZSTD_BLOCK_MAX
                pos += bsize
            if pos > n:
                raise CorruptRecordError("zstd: block past the end of the batch")
            if bound > limit:
                raise _too_big(bound, limit)
            if bh & 1:
                break
        if fhd & 0x04:
            pos += 4  # content checksum
    if pos != n:
        raise CorruptRecordError("zstd: frame length does not match the batch")
    return cramjam.zstd.decompress(data)


_DECOMPRESSORS = {
    COMPRESSION_GZIP: _gunzip,
    COMPRESSION_SNAPPY: _unsnappy,
    COMPRESSION_LZ4: _unlz4,
    COMPRESSION_ZSTD: _unzstd,
}


def _decompress(codec: int, data: memoryview, limit: int):
    fn = _DECOMPRESSORS.get(codec)
    if fn is None:
        raise UnsupportedCompressionError(f"unknown compression codec {codec}")
    try:
        out = fn(data, limit)
    except (CorruptRecordError, InvalidRecordError):
        raise
    except cramjam.DecompressionError as e:
        raise CorruptRecordError(f"{_CODEC_NAMES[codec]}: {e}") from None
    except (ValueError, OverflowError, TypeError, struct.error) as e:
        raise CorruptRecordError(f"{_CODEC_NAMES[codec]}: {e}") from None
    if len(out) > limit:
        raise _too_big(len(out), limit)
    return out


def decompress(codec: int, data: bytes | memoryview, max_decompressed_bytes: int) -> bytes:
    """Decompress ``data`` written with Kafka codec ``codec`` (0 none, 1 gzip, 2 snappy raw or
    xerial-framed, 3 lz4 frame, 4 zstd frame), as record batches are; the output is bounded by
    ``max_decompressed_bytes``. Used for payloads outside batches (KIP-714 PushTelemetry).

    Raises:
        UnsupportedCompressionError: ``codec`` outside 0..4.
        CorruptRecordError: bytes the codec cannot read.
        InvalidRecordError: more than ``max_decompressed_bytes`` bytes (the only reason the
            codecs raise it).
    """
    if codec == COMPRESSION_NONE:
        if len(data) > max_decompressed_bytes:
            raise _too_big(len(data), max_decompressed_bytes)
        return bytes(data)
    return bytes(_decompress(codec, memoryview(data), max_decompressed_bytes))


def _compress(codec: int, data: bytes, level: int | None) -> bytes:
    if codec == COMPRESSION_GZIP:
        c = zlib.compressobj(6 if level is None else level, zlib.DEFLATED, 31)
        return c.compress(data) + c.flush()
    if codec == COMPRESSION_SNAPPY:
        parts = [_XERIAL_HEADER]
        mv = memoryview(data)
        for i in range(0, len(data), _XERIAL_BLOCK_BYTES):
            block = bytes(cramjam.snappy.compress_raw(mv[i : i + _XERIAL_BLOCK_BYTES]))
            parts.append(_I32.pack(len(block)))
            parts.append(block)
        return b"".join(parts)
    if codec == COMPRESSION_LZ4:
        # Kafka's reader (KafkaLZ4BlockInputStream) rejects dependent blocks.
        c = cramjam.lz4.Compressor(level, content_checksum=False, block_linked=False)
        c.compress(data)
        return bytes(c.finish())
    if codec == COMPRESSION_ZSTD:
        return bytes(cramjam.zstd.compress(data, level))
    raise UnsupportedCompressionError(f"unknown compression codec {codec}")


# ----------------------------------------------------------------------------- decode


def decode_batch(
    buf,
    pos: int = 0,
    *,
    check_crc: bool = True,
    max_decompressed_bytes: int = MAX_DECOMPRESSED_BATCH_BYTES,
) -> tuple[BatchHeader, list[Record]]:
    """Decode the whole batch at ``buf[pos:]``: header and records (decompressed if needed).

    Codecs: 0 none, 1 gzip, 2 snappy (xerial-framed or raw), 3 lz4 (frame), 4 zstd (frame).
    Bounds: ``records_count <= MAX_RECORDS_PER_BATCH``, decompressed size
    ``<= max_decompressed_bytes`` (checked from the codec's framing before the output is
    allocated), every varint and length against the bytes left in its record. Records of a
    LogAppendTime batch get ``max_timestamp`` as their timestamp (as Kafka's consumers do).

    Raises :class:`CorruptRecordError` (framing, magic, CRC when ``check_crc``, malformed or
    truncated records or compressed data), :class:`InvalidRecordError` (negative/too many
    records, decompressed size over the bound), :class:`UnsupportedCompressionError`.
    Never IndexError, MemoryError or a hang on hostile input.
    """
    mv = buf if type(buf) is memoryview else memoryview(buf)
    h = read_batch_header(mv, pos)
    size = h.batch_length + LOG_OVERHEAD_BYTES
    end = pos + size
    if end > len(mv):
        raise CorruptRecordError(f"record batch of {size} bytes but only {len(mv) - pos} bytes left")
    if check_crc and _crc32c(mv[pos + _ATTRIBUTES_AT : end]) != h.crc:
        raise CorruptRecordError(f"record batch at byte {pos}: CRC-32C mismatch")
    count = h.records_count
    if count < 0 or count > MAX_RECORDS_PER_BATCH:
        raise InvalidRecordError(f"records count {count} outside 0..{MAX_RECORDS_PER_BATCH}")
    start = pos + BATCH_HEADER_BYTES
    codec = h.attributes & COMPRESSION_MASK
    if codec == COMPRESSION_NONE:
        return h, _decode_records(mv, start, end, h)
    if codec > COMPRESSION_ZSTD:
        raise UnsupportedCompressionError(f"unknown compression codec {codec}")
    if count == 0 and start == end:
        return h, []
    data = memoryview(_decompress(codec, mv[start:end], max_decompressed_bytes))
    return h, _decode_records(data, 0, len(data), h)


def decode_records(
    buf,
    *,
    skip_control: bool = False,
    check_crc: bool = True,
    max_decompressed_bytes: int = MAX_DECOMPRESSED_BATCH_BYTES,
) -> Iterator[Record]:
    """Yield every record of every batch of a records blob, in order (see :func:`decode_batch`).

    ``skip_control=True`` leaves out control batches (transaction markers, Raft leader change),
    as Kafka consumers do. Raises what :func:`iter_batches` and :func:`decode_batch` raise.
    """
    mv = buf if type(buf) is memoryview else memoryview(buf)
    for pos, h in iter_batches(mv):
        if skip_control and h.attributes & CONTROL_FLAG:
            continue
        yield from decode_batch(
            mv, pos, check_crc=check_crc, max_decompressed_bytes=max_decompressed_bytes
        )[1]


# ------------------------------------------------------------------------------ build


def _write_varint(out: bytearray, v: int) -> None:
    u = (v << 1) ^ (v >> 63)
    while u >= 0x80:
        out.append((u & 0x7F) | 0x80)
        u >>= 7
    out.append(u)


def _write_nbytes(out: bytearray, b) -> None:
    if b is None:
        out.append(1)  # zig-zag(-1)
    else:
        _write_varint(out, len(b))
        out += b


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def build_batch(
    records: Iterable,
    *,
    base_offset: int = 0,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    compression: int = COMPRESSION_NONE,
    timestamp_type: int = TIMESTAMP_CREATE_TIME,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    is_transactional: bool = False,
    is_control: bool = False,
    base_timestamp: int | None = None,
    last_offset_delta: int | None = None,
    compression_level: int | None = None,
    delete_horizon_ms: int | None = None,
) -> bytes:
    """Encode one magic-2 batch with a correct CRC-32C; returns its bytes.

    ``records`` items: a :class:`Record` (offset delta = ``offset - base_offset``; offsets must
    increase, gaps allowed as after compaction), ``(key, value)``, ``(key, value, headers)`` or
    ``(key, value, headers, timestamp)`` (offset = previous + 1; timestamp None = now, in ms).
    Keys/values are bytes-like or None; headers ``(str | bytes, bytes | None)`` pairs.
    ``base_timestamp`` defaults to the first record's timestamp (-1 for an empty batch);
    ``last_offset_delta`` defaults to the last record's delta (0 for an empty batch) and may be
    larger (compacted batch). ``delete_horizon_ms`` (KIP-534, the log cleaner's) is stored as the
    base timestamp with :data:`DELETE_HORIZON_FLAG` set; the records keep their timestamps.
    Snappy is written xerial-framed like Java clients, lz4 as an LZ4
    frame with independent blocks, gzip as one gzip member, zstd as one frame.

    Raises ValueError / TypeError for arguments no Kafka batch can hold (caller bugs).
    """
    if compression not in (0, 1, 2, 3, 4):
        raise UnsupportedCompressionError(f"unknown compression codec {compression}")
    now = None
    rows = []
    prev = -1
    for r in records:
        if isinstance(r, Record):
            delta, ts, key, value, headers = r.offset - base_offset, r.timestamp, r.key, r.value, r.headers
        else:
            n = len(r)
            if n == 2:
                (key, value), headers, ts = r, (), None
            elif n == 3:
                (key, value, headers), ts = r, None
            elif n == 4:
                key, value, headers, ts = r
            else:
                raise TypeError(f"record must be Record or a 2/3/4-tuple, got {n} items")
            delta = prev + 1
        if ts is None:
            if now is None:
                now = _now_ms()
            ts = now
        if delta <= prev or delta > 0x7FFFFFFF:
            raise ValueError(f"offset delta {delta} not increasing or out of int32 range")
        prev = delta
        rows.append((delta, ts, key, value, headers or ()))
    count = len(rows)
    if delete_horizon_ms is not None:
        base_timestamp = delete_horizon_ms
    elif base_timestamp is None:
        base_timestamp = rows[0][1] if rows else NO_TIMESTAMP
    max_ts = max(r[1] for r in rows) if rows else base_timestamp
    if last_offset_delta is None:
        last_offset_delta = prev if rows else 0
    elif last_offset_delta < max(prev, 0):
        raise ValueError(f"last_offset_delta {last_offset_delta} below the last record's {prev}")

    body = bytearray()
    rec = bytearray()
    for delta, ts, key, value, headers in rows:
        rec.clear()
        rec.append(0)  # record attributes (unused)
        _write_varint(rec, ts - base_timestamp)
        _write_varint(rec, delta)
        _write_nbytes(rec, key)
        _write_nbytes(rec, value)
        _write_varint(rec, len(headers))
        for hk, hv in headers:
            _write_nbytes(rec, hk.encode("utf-8", "surrogateescape") if isinstance(hk, str) else hk)
            _write_nbytes(rec, hv)
        _write_varint(body, len(rec))
        body += rec
    payload = body if compression == COMPRESSION_NONE else _compress(compression, bytes(body), compression_level)

    attributes = (
        compression
        | (TIMESTAMP_TYPE_MASK if timestamp_type else 0)
        | (TRANSACTIONAL_FLAG if is_transactional else 0)
        | (CONTROL_FLAG if is_control else 0)
        | (DELETE_HORIZON_FLAG if delete_horizon_ms is not None else 0)
    )
    out = bytearray(BATCH_HEADER_BYTES + len(payload))
    _HEADER.pack_into(
        out, 0, base_offset, len(out) - LOG_OVERHEAD_BYTES, partition_leader_epoch, MAGIC_V2, 0,
        attributes, last_offset_delta, base_timestamp, max_ts, producer_id, producer_epoch,
        base_sequence, count,
    )
    out[BATCH_HEADER_BYTES:] = payload
    _U32.pack_into(out, _CRC_AT, _crc32c(memoryview(out)[_ATTRIBUTES_AT:]))
    return bytes(out)


# ---------------------------------------------------------------------- control records

CONTROL_ABORT = 0
CONTROL_COMMIT = 1
CONTROL_LEADER_CHANGE = 2
"""Control record types (Kafka ``ControlRecordType``): 0/1 transaction markers, 2 Raft."""
CONTROL_KRAFT_VOTERS = 6
"""Kafka ``ControlRecordType.KRAFT_VOTERS``. With key version :data:`RAFT_INTERNAL_KEY_VERSION`
it is LiteMQ's Raft configuration batch (a ``CONFIG`` entry of a partition's Raft group): its
value is the entry's payload, ``litemq.raft.encode_config(voters, learners)``, not Kafka's
``VotersRecord``."""
RAFT_INTERNAL_CONTROL_TYPES = frozenset({CONTROL_LEADER_CHANGE, CONTROL_KRAFT_VOTERS})

_CONTROL_KEY = struct.Struct(">hh")  # version 0, type
RAFT_INTERNAL_KEY_VERSION = 1
"""Control key version of LiteMQ's Raft-internal batches (a new partition leader's no-op, a
LEADER_CHANGE record): such a batch keeps its Raft index but takes no Kafka offset and is never
sent to clients (storage/offset_translator.py). Kafka writes version 0, so LEADER_CHANGE batches
of data dirs written before (version 0) keep the offset they took."""
_END_TXN_MARKER = struct.Struct(">hi")  # version 0, coordinatorEpoch


def build_control_batch(
    *,
    base_offset: int,
    partition_leader_epoch: int,
    control_type: int,
    timestamp_ms: int,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    is_transactional: bool | None = None,
    value: bytes | None = None,
    coordinator_epoch: int = 0,
    key_version: int = 0,
) -> bytes:
    """Encode a control batch holding one control record (Kafka ``ControlRecordType``).

    Key = version int16 (``key_version``, Kafka's is 0; LiteMQ's Raft-internal LEADER_CHANGE
    uses :data:`RAFT_INTERNAL_KEY_VERSION`) + type int16. For ABORT (0) / COMMIT (1) the value defaults to Kafka's
    ``EndTxnMarker`` (version int16 0 + ``coordinator_epoch`` int32) and the batch is
    transactional unless ``is_transactional=False``; other types (LEADER_CHANGE 2, ...) take
    ``value`` as given (default empty) and are not transactional by default.
    """
    is_marker = control_type in (CONTROL_ABORT, CONTROL_COMMIT)
    if value is None:
        value = _END_TXN_MARKER.pack(0, coordinator_epoch) if is_marker else b""
    if is_transactional is None:
        is_transactional = is_marker
    return build_batch(
        [Record(base_offset, timestamp_ms, _CONTROL_KEY.pack(key_version, control_type), value)],
        base_offset=base_offset,
        partition_leader_epoch=partition_leader_epoch,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        is_transactional=is_transactional,
        is_control=True,
    )


def parse_control_key(key: bytes | None) -> tuple[int, int]:
    """``(version, control_type)`` of a control record key. Raises :class:`InvalidRecordError`."""
    if key is None or len(key) < 4:
        raise InvalidRecordError("control record key shorter than 4 bytes")
    return _CONTROL_KEY.unpack_from(key)


def parse_end_txn_marker(value: bytes | None) -> tuple[int, int]:
    """``(version, coordinator_epoch)`` of an ABORT/COMMIT marker value. Raises InvalidRecordError."""
    if value is None or len(value) < 6:
        raise InvalidRecordError("end transaction marker shorter than 6 bytes")
    return _END_TXN_MARKER.unpack_from(value)


def raft_internal_record(buf, pos: int, h: BatchHeader) -> tuple[int, bytes] | None:
    """``(control type, value)`` of the batch at ``buf[pos:]`` (header ``h``) if it is
    Raft-internal: a non-transactional, uncompressed control batch without producer id whose
    one record's key is version :data:`RAFT_INTERNAL_KEY_VERSION` with a type in
    :data:`RAFT_INTERNAL_CONTROL_TYPES` (LEADER_CHANGE: a new leader's no-op; KRAFT_VOTERS: a
    configuration change). ``None`` otherwise. Data batches are decided from the header alone;
    only control batches are decoded. An undecodable control batch is not internal."""
    if not h.attributes & CONTROL_FLAG or h.attributes & TRANSACTIONAL_FLAG or h.producer_id != NO_PRODUCER_ID:
        return None
    if h.records_count != 1 or h.attributes & COMPRESSION_MASK:
        return None
    try:
        _, recs = decode_batch(buf, pos, check_crc=False)
        key = recs[0].key
        if key is None or len(key) < 4:
            return None
        version, control_type = _CONTROL_KEY.unpack_from(key)
        if version != RAFT_INTERNAL_KEY_VERSION or control_type not in RAFT_INTERNAL_CONTROL_TYPES:
            return None
        return control_type, bytes(recs[0].value or b"")
    except (CorruptRecordError, InvalidRecordError, IndexError):
        return None


def is_raft_internal_batch(buf, pos: int, h: BatchHeader) -> bool:
    """Whether the batch at ``buf[pos:]`` (header ``h``) is Raft-internal
    (:func:`raft_internal_record`): it keeps its Raft offset but takes no Kafka offset and is
    never sent to clients (storage/offset_translator.py)."""
    return raft_internal_record(buf, pos, h) is not None
