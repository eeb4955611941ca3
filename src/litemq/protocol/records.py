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
from collections.abc import Iterator
from typing import NamedTuple

from crc32c import crc32c as _crc32c

from litemq.limits import RECORD_BATCH_HEADER_BYTES
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
_LENGTH_AT = 8
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
_LENGTH_MAGIC = struct.Struct(">i4xb")  # batchLength, skip epoch, magic (read at offset 8)
_ATTRS_LAST_DELTA = struct.Struct(">hi")


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
    def last_sequence(self) -> int:
        """``base_sequence + last_offset_delta`` wrapping at 2**31 like Kafka; -1 if no sequence."""
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        seq = self.base_sequence + self.last_offset_delta
        return seq - 0x80000000 if seq > 0x7FFFFFFF else seq


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
            raise RecordTooLargeError(
                f"record batch of {size} bytes exceeds the maximum of {max_batch_bytes} bytes"
            )
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
