"""Header-level record batch API: framing, CRC, validation, in-place rewrites.

Golden batches come from kafka-python's independent ``DefaultRecordBatchBuilder``.
"""

from __future__ import annotations

import struct

import pytest
from crc32c import crc32c
from kafka.record.default_records import DefaultRecordBatchBuilder

from litemq.protocol.errors import (
    CorruptRecordError,
    InvalidRecordError,
    RecordTooLargeError,
    UnsupportedCompressionError,
)
from litemq.protocol.records import (
    BATCH_HEADER_BYTES,
    BatchHeader,
    iter_batches,
    read_batch_header,
    set_base_offset,
    set_log_append_time,
    set_partition_leader_epoch,
    validate_batches,
    verify_crc,
)


def kp_batch(n=3, *, base_offset=0, compression=0, producer_id=-1, producer_epoch=-1,
             base_sequence=-1, transactional=False, ts=1_700_000_000_000, value_size=10) -> bytes:
    """A batch built by kafka-python (independent implementation)."""
    b = DefaultRecordBatchBuilder(
        magic=2, compression_type=compression, is_transactional=transactional,
        producer_id=producer_id, producer_epoch=producer_epoch, base_sequence=base_sequence,
        batch_size=1 << 30,
    )
    for i in range(n):
        b.append(i, timestamp=ts + i, key=b"k%d" % i, value=bytes([i % 256]) * value_size,
                 headers=[("h", b"v")])
    out = bytearray(b.build())
    struct.pack_into(">q", out, 0, base_offset)
    return bytes(out)


def test_header_fields_match_kafka_python():
    raw = kp_batch(3, base_offset=100, producer_id=7, producer_epoch=2, base_sequence=5)
    h = read_batch_header(raw)
    assert isinstance(h, BatchHeader)
    assert h.base_offset == 100 and h.size == len(raw) and h.magic == 2
    assert h.last_offset_delta == 2 and h.last_offset == 102 and h.next_offset == 103
    assert h.records_count == 3
    assert h.base_timestamp == 1_700_000_000_000 and h.max_timestamp == 1_700_000_000_002
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (7, 2, 5)
    assert h.last_sequence == 7
    assert h.compression == 0 and h.timestamp_type == 0
    assert not h.is_transactional and not h.is_control
    assert h.crc == crc32c(raw[21:])
    assert verify_crc(raw, 0, h)


def test_attribute_properties():
    h = read_batch_header(kp_batch(1, transactional=True, producer_id=1, producer_epoch=0,
                                   base_sequence=0))
    assert h.is_transactional and not h.is_control
    h = h._replace(attributes=0x2B)
    assert h.compression == 3 and h.timestamp_type == 1 and h.is_control


def test_last_sequence_wraps():
    h = read_batch_header(kp_batch(3, producer_id=1, producer_epoch=0, base_sequence=2**31 - 2))
    assert h.last_sequence == 0
    assert h._replace(base_sequence=-1).last_sequence == -1


def test_read_header_errors():
    raw = bytearray(kp_batch(1))
    with pytest.raises(CorruptRecordError):
        read_batch_header(raw[:60])
    bad = bytearray(raw)
    bad[16] = 1
    with pytest.raises(CorruptRecordError):
        read_batch_header(bad)
    bad = bytearray(raw)
    struct.pack_into(">i", bad, 8, 48)
    with pytest.raises(CorruptRecordError):
        read_batch_header(bad)
    with pytest.raises(CorruptRecordError):
        read_batch_header(raw, pos=len(raw))


def test_iter_batches_and_positions():
    a, b, c = kp_batch(1, base_offset=0), kp_batch(2, base_offset=1), kp_batch(3, base_offset=3)
    blob = a + b + c
    got = list(iter_batches(blob))
    assert [p for p, _ in got] == [0, len(a), len(a) + len(b)]
    assert [h.base_offset for _, h in got] == [0, 1, 3]
    assert list(iter_batches(blob, len(a), len(a) + len(b)))[0][1].base_offset == 1
    assert list(iter_batches(b"")) == []
    with pytest.raises(CorruptRecordError):
        list(iter_batches(blob[:-1]))
    with pytest.raises(CorruptRecordError):
        list(iter_batches(blob + b"\x00" * 20))
    assert len(list(iter_batches(blob[:-1], allow_trailing_partial=True))) == 2
    assert len(list(iter_batches(blob + b"\x00" * 20, allow_trailing_partial=True))) == 3


def test_validate_batches_ok_and_memoryview():
    blob = kp_batch(2) + kp_batch(5, compression=1)
    hs = validate_batches(blob)
    assert [h.records_count for h in hs] == [2, 5]
    assert validate_batches(memoryview(bytearray(blob))) == hs
    assert validate_batches(b"") == []
    assert validate_batches(blob, dense=True) == hs


def test_validate_batches_errors():
    raw = kp_batch(3)
    bad = bytearray(raw)
    bad[-1] ^= 1
    with pytest.raises(CorruptRecordError):
        validate_batches(bad)
    with pytest.raises(RecordTooLargeError):
        validate_batches(raw, max_batch_bytes=len(raw) - 1)
    assert validate_batches(raw, max_batch_bytes=len(raw))

    def patched(fmt, at, value):
        b = bytearray(raw)
        struct.pack_into(fmt, b, at, value)
        struct.pack_into(">I", b, 17, crc32c(bytes(b[21:])))
        return b

    with pytest.raises(UnsupportedCompressionError):
        validate_batches(patched(">h", 21, 5))
    with pytest.raises(InvalidRecordError):
        validate_batches(patched(">i", 57, -1))
    with pytest.raises(InvalidRecordError):
        validate_batches(patched(">i", 23, -1))
    with pytest.raises(InvalidRecordError):
        validate_batches(patched(">i", 57, 2), dense=True)
    validate_batches(patched(">i", 57, 2))  # compacted-style batch is fine when not dense


def test_in_place_rewrites_keep_crc():
    blob = bytearray(kp_batch(2) + kp_batch(3))
    second = len(kp_batch(2))
    set_base_offset(blob, second, 12345)
    set_partition_leader_epoch(blob, second, 9)
    hs = validate_batches(blob)
    assert hs[1].base_offset == 12345 and hs[1].partition_leader_epoch == 9
    set_log_append_time(blob, second, 1_800_000_000_000)
    hs = validate_batches(blob)
    assert hs[1].timestamp_type == 1 and hs[1].max_timestamp == 1_800_000_000_000
    assert hs[0].timestamp_type == 0
    assert hs[1].base_timestamp == 1_700_000_000_000
    set_log_append_time(blob, second, 1_800_000_000_000)  # idempotent
    assert validate_batches(blob) == hs


def test_header_size_constant():
    assert BATCH_HEADER_BYTES == 61
