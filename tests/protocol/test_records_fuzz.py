"""Hostile input: only the documented exceptions, no hang, no unbounded allocation."""

from __future__ import annotations

import struct
import zlib

import cramjam
import pytest
from crc32c import crc32c
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from litemq.protocol.errors import (
    CorruptRecordError,
    InvalidRecordError,
    KafkaError,
    UnsupportedCompressionError,
)
from litemq.protocol.records import (
    Record,
    build_batch,
    decode_batch,
    decode_records,
    iter_batches,
    validate_batches,
)

SETTINGS = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
LIMIT = 1 << 20  # max_decompressed_bytes used by the fuzz runs

VALID = {
    codec: build_batch(
        [Record(i, 1000 + i, b"key%d" % i, b"value-%d" % i * (i + 1), (("h", b"v"), ("n", None)))
         for i in range(6)],
        compression=codec, producer_id=1, producer_epoch=0, base_sequence=0,
    )
    for codec in range(5)
}


def fix(buf: bytearray) -> bytearray:
    """Rewrite batchLength and CRC so a mutation reaches the record decoder."""
    if len(buf) >= 61:
        struct.pack_into(">i", buf, 8, len(buf) - 12)
        struct.pack_into(">I", buf, 17, crc32c(bytes(buf[21:])))
    return buf


def with_payload(codec: int, payload: bytes, count: int = 1) -> bytes:
    out = bytearray(VALID[0][:61] + payload)
    struct.pack_into(">h", out, 21, codec)
    struct.pack_into(">i", out, 57, count)
    return bytes(fix(out))


def only_documented(fn, *args, **kw):
    try:
        return fn(*args, **kw)
    except KafkaError:
        return None


def exercise(buf):
    only_documented(validate_batches, buf)
    only_documented(decode_batch, buf, max_decompressed_bytes=LIMIT)
    only_documented(lambda: list(decode_records(buf, max_decompressed_bytes=LIMIT)))
    only_documented(lambda: list(iter_batches(buf, allow_trailing_partial=True)))


@SETTINGS
@given(st.binary(max_size=400))
def test_random_bytes(data):
    exercise(data)
    exercise(fix(bytearray(VALID[0][:61]) + bytearray(data)))


@SETTINGS
@given(
    st.sampled_from(range(5)),
    st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), min_size=1, max_size=6),
    st.integers(0, 2000),
    st.booleans(),
)
def test_mutated_valid_batches(codec, flips, cut, refix):
    buf = bytearray(VALID[codec])
    for at, value in flips:
        buf[at % len(buf)] = value
    if cut:
        del buf[cut % len(buf) :]
    if refix:
        fix(buf)
    exercise(bytes(buf))


@SETTINGS
@given(st.sampled_from(range(1, 5)), st.binary(max_size=300), st.integers(0, 2**31 - 1))
def test_random_compressed_payloads(codec, payload, count):
    exercise(with_payload(codec, payload, count))


@SETTINGS
@given(st.binary(min_size=1, max_size=200), st.integers(0, 100))
def test_record_section_mutations(junk, count):
    """Garbage records section behind a valid, CRC-correct header."""
    exercise(with_payload(0, junk, count))


def test_huge_records_count():
    for count in (2**31 - 1, 1_000_001):
        with pytest.raises(InvalidRecordError):
            decode_batch(with_payload(0, VALID[0][61:], count))
    with pytest.raises(CorruptRecordError):  # within the bound but cannot fit in the bytes
        decode_batch(with_payload(0, VALID[0][61:], 999_999))
    with pytest.raises(InvalidRecordError):
        decode_batch(with_payload(0, VALID[0][61:], -1))


def test_huge_varint_lengths():
    # record length = 2**31-1 (zig-zag 0xfffffffe), 5-byte varint
    with pytest.raises(CorruptRecordError):
        decode_batch(with_payload(0, b"\xfe\xff\xff\xff\x0f" + b"\x00" * 20))
    # 6-byte varint
    with pytest.raises(CorruptRecordError):
        decode_batch(with_payload(0, b"\xff\xff\xff\xff\xff\x01" + b"\x00" * 20))
    # key length past the end of the record
    rec = bytes([0, 0, 0]) + b"\xfe\xff\xff\xff\x0f" + b"\x00\x00"
    with pytest.raises(CorruptRecordError):
        decode_batch(with_payload(0, bytes([len(rec) * 2]) + rec))
    # header count huge
    rec = bytes([0, 0, 0, 1, 1]) + b"\xfe\xff\xff\xff\x0f"
    with pytest.raises(CorruptRecordError):
        decode_batch(with_payload(0, bytes([len(rec) * 2]) + rec))
    # trailing bytes after the last record
    with pytest.raises(CorruptRecordError):
        decode_batch(fix(bytearray(VALID[0] + b"\x00")))


def test_unknown_codec():
    for codec in (5, 6, 7):
        with pytest.raises(UnsupportedCompressionError):
            decode_batch(with_payload(codec, b"xx"))
        with pytest.raises(UnsupportedCompressionError):
            validate_batches(with_payload(codec, b"xx"))


ZEROS = bytes(4 << 20)


def _gzip(b):
    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    return c.compress(b) + c.flush()


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_decompression_bombs_bounded(codec):
    raw = build_batch([(None, ZEROS)], compression=codec)
    assert len(raw) < len(ZEROS) // 10
    with pytest.raises(InvalidRecordError):
        decode_batch(raw, max_decompressed_bytes=LIMIT)
    assert decode_batch(raw, max_decompressed_bytes=8 << 20)[1][0].value == ZEROS


def test_gzip_multi_member_bomb_bounded():
    member = _gzip(bytes(LIMIT // 2))
    with pytest.raises(InvalidRecordError):
        decode_batch(with_payload(1, member * 3), max_decompressed_bytes=LIMIT)


def test_declared_sizes_rejected_before_allocation():
    """Headers claiming huge outputs are refused from the framing, with the default bound."""
    # snappy raw: preamble varint says 2**32-1 bytes
    with pytest.raises(InvalidRecordError):
        decode_batch(with_payload(2, b"\xff\xff\xff\xff\x0f" + b"\x00" * 10))
    # xerial: one block claiming 2**32-1 bytes
    xerial = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    block = b"\xff\xff\xff\xff\x0f" + b"\x00" * 10
    with pytest.raises(InvalidRecordError):
        decode_batch(with_payload(2, xerial + struct.pack(">i", len(block)) + block))
    # lz4 frame with content size 2**40
    lz4 = b"\x04\x22\x4d\x18" + bytes([0x68, 0x40]) + struct.pack("<Q", 1 << 40) + b"\x00"
    with pytest.raises(InvalidRecordError):
        decode_batch(with_payload(3, lz4 + b"\x00\x00\x00\x00"))
    # lz4: many tiny 4 MiB-max compressed blocks (bound 4 MiB each)
    lz4 = b"\x04\x22\x4d\x18" + bytes([0x60, 0x70, 0x00])
    lz4 += (struct.pack("<I", 1) + b"\x00") * 80 + b"\x00" * 4
    with pytest.raises(InvalidRecordError):
        decode_batch(with_payload(3, lz4))
    # zstd frame content size 2**60
    zstd = struct.pack("<I", 0xFD2FB528) + bytes([0xC0, 0x58]) + struct.pack("<Q", 1 << 60)
    with pytest.raises(InvalidRecordError):
        decode_batch(with_payload(4, zstd + b"\x01\x00\x00"))
    # zstd without content size: 2100 RLE blocks of 128 KiB (~270 MiB) in ~8 KiB
    rle = struct.pack("<I", (128 * 1024) << 3 | 1 << 1)[:3] + b"\x00"
    last = struct.pack("<I", (128 * 1024) << 3 | 1 << 1 | 1)[:3] + b"\x00"
    zstd = struct.pack("<I", 0xFD2FB528) + bytes([0x00, 0x58]) + rle * 2099 + last
    with pytest.raises(InvalidRecordError):
        decode_batch(with_payload(4, zstd))
    # ...and the same frame under the bound passes the walker and really decompresses: the
    # error then comes from the records (zero bytes are not records), not from the bound
    small = struct.pack("<I", 0xFD2FB528) + bytes([0x00, 0x58]) + rle * 2 + last
    assert bytes(cramjam.zstd.decompress(small)) == bytes(3 * 128 * 1024)
    with pytest.raises(CorruptRecordError, match="record length"):
        decode_batch(with_payload(4, small))


def test_truncated_compressed_streams():
    for codec in (1, 2, 3, 4):
        raw = VALID[codec]
        for cut in (1, 5, 20):
            with pytest.raises(CorruptRecordError):
                decode_batch(fix(bytearray(raw[:-cut])))
