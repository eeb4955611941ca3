"""Cross-check against kafka-python's independent magic-2 implementation (kafka.record, 3.0.12).

kafka-python ships only gzip here; for snappy / lz4 / zstd its codec hooks are pointed at
cramjam, so its own record framing and xerial snappy framing are still exercised.
"""

from __future__ import annotations

import types

import cramjam
import pytest
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

import kafka.codec as kcodec
import kafka.record.default_records as kdr
from litemq.protocol.records import (
    Record,
    build_batch,
    build_control_batch,
    decode_batch,
    decode_records,
    parse_control_key,
    parse_end_txn_marker,
    read_batch_header,
    validate_batches,
)

CODECS = [0, 1, 2, 3, 4]


@pytest.fixture(autouse=True)
def kafka_python_codecs(monkeypatch):
    """Give kafka-python snappy/lz4/zstd via cramjam (its own xerial framing stays in use)."""
    snappy = types.SimpleNamespace(
        compress=lambda b: bytes(cramjam.snappy.compress_raw(bytes(b))),
        decompress=lambda b: bytes(cramjam.snappy.decompress_raw(bytes(b))),
    )
    monkeypatch.setattr(kcodec, "snappy", snappy)
    monkeypatch.setattr(kcodec, "lz4", object())
    monkeypatch.setattr(kcodec, "zstd", object())
    monkeypatch.setattr(kdr, "lz4_encode", lambda b: bytes(cramjam.lz4.compress(bytes(b))))
    monkeypatch.setattr(kdr, "lz4_decode", lambda b: bytes(cramjam.lz4.decompress(bytes(b))))
    monkeypatch.setattr(kdr, "zstd_encode", lambda b: bytes(cramjam.zstd.compress(bytes(b))))
    monkeypatch.setattr(kdr, "zstd_decode", lambda b: bytes(cramjam.zstd.decompress(bytes(b))))


SAMPLE = [
    (0, 1_700_000_000_000, b"key-0", b"value-0", []),
    (1, 1_700_000_000_005, None, b"v" * 300, [("a", b"1"), ("b", None)]),
    (2, 1_699_999_999_990, b"", None, []),
    (3, 1_700_000_000_100, b"\x00\xff" * 70, b"", [("\u00e9t\u00e9", b"x" * 200)]),
]


def kp_build(compression, *, transactional=False, pid=-1, epoch=-1, seq=-1):
    b = DefaultRecordBatchBuilder(
        magic=2, compression_type=compression, is_transactional=transactional,
        producer_id=pid, producer_epoch=epoch, base_sequence=seq, batch_size=1 << 30,
    )
    for off, ts, k, v, hs in SAMPLE:
        b.append(off, timestamp=ts, key=k, value=v, headers=hs)
    return bytes(b.build())


def kp_records(raw):
    batch = DefaultRecordBatch(raw)
    assert batch.validate_crc()
    return batch, [(r.offset, r.timestamp, r.key, r.value, [tuple(h) for h in r.headers]) for r in batch]


def expected():
    return [(o, t, k, v, [tuple(h) for h in hs]) for o, t, k, v, hs in SAMPLE]


@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_builds_we_decode(codec):
    raw = kp_build(codec, transactional=True, pid=42, epoch=3, seq=10)
    [h] = validate_batches(raw, dense=True)
    assert h.compression == codec and h.is_transactional
    assert (h.producer_id, h.producer_epoch, h.base_sequence, h.last_sequence) == (42, 3, 10, 13)
    h2, recs = decode_batch(raw)
    assert h2 == h
    assert [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in recs] == expected()


@pytest.mark.parametrize("codec", CODECS)
def test_we_build_kafka_python_decodes(codec):
    raw = build_batch(
        [Record(o, t, k, v, tuple(hs)) for o, t, k, v, hs in SAMPLE], compression=codec,
        producer_id=42, producer_epoch=3, base_sequence=10, is_transactional=True,
    )
    batch, recs = kp_records(raw)
    assert batch.compression_type == codec
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (42, 3, 10)
    assert batch.is_transactional and not batch.is_control_batch
    assert batch.max_timestamp == max(t for _, t, *_ in SAMPLE)
    assert recs == expected()


def test_uncompressed_bytes_identical_to_kafka_python():
    """Same inputs -> byte-identical batch (header, varints, CRC)."""
    ours = build_batch(
        [Record(o, t, k, v, tuple(hs)) for o, t, k, v, hs in SAMPLE],
        partition_leader_epoch=0,  # kafka-python writes 0 where Java writes -1
        producer_id=42, producer_epoch=3, base_sequence=10, is_transactional=True,
    )
    assert ours == kp_build(0, transactional=True, pid=42, epoch=3, seq=10)


def test_multi_batch_blob_decode_records():
    blob = kp_build(1) + build_batch([(b"k", b"v", (), 5)], base_offset=4, compression=3)
    recs = list(decode_records(blob))
    assert [r.offset for r in recs] == [0, 1, 2, 3, 4]
    assert recs[-1].timestamp == 5


def test_control_batch_readable_by_kafka_python():
    raw = build_control_batch(base_offset=9, partition_leader_epoch=2, control_type=1,
                              timestamp_ms=123, producer_id=5, producer_epoch=1,
                              coordinator_epoch=7)
    batch, recs = kp_records(raw)
    assert batch.is_control_batch and batch.is_transactional
    h, [r] = decode_batch(raw)
    assert h.is_control and h.is_transactional and h.records_count == 1
    assert parse_control_key(r.key) == (0, 1)
    assert parse_end_txn_marker(r.value) == (0, 7)
    assert r.offset == 9 and r.timestamp == 123 and h.partition_leader_epoch == 2
    assert list(decode_records(raw, skip_control=True)) == []
    leader = build_control_batch(base_offset=0, partition_leader_epoch=4, control_type=2,
                                 timestamp_ms=1, value=b"\x00\x00")
    h, [r] = decode_batch(leader)
    assert h.is_control and not h.is_transactional and r.value == b"\x00\x00"
    assert read_batch_header(leader).producer_id == -1


def test_snappy_raw_and_xerial_both_decode():
    """librdkafka writes raw snappy, Java xerial-framed: both must decode."""
    ours = build_batch([(b"k", b"v" * 100_000)], compression=2)
    hdr = read_batch_header(ours)
    xerial = ours[61:]
    assert xerial.startswith(b"\x82SNAPPY\x00")
    _, [r] = decode_batch(ours)
    uncompressed = build_batch([Record(0, hdr.base_timestamp, b"k", b"v" * 100_000)])[61:]
    raw_snappy = bytes(cramjam.snappy.compress_raw(uncompressed))
    raw_batch = _rebatch(ours, raw_snappy)
    _, [r2] = decode_batch(raw_batch)
    assert r2 == r


def test_lz4_frame_flags_java_compatible():
    """KafkaLZ4BlockInputStream rejects dependent blocks: FLG must have block independence."""
    raw = build_batch([(b"k", b"abc" * 50_000)], compression=3)
    frame = raw[61:]
    assert frame[:4] == b"\x04\x22\x4d\x18"
    flg = frame[4]
    assert flg >> 6 == 1 and flg & 0x20, hex(flg)
    # block-linked frames (e.g. lz4 CLI / cramjam default) decode too
    assert decode_batch(raw)[1][0].value == b"abc" * 50_000


def _rebatch(batch: bytes, payload: bytes) -> bytes:
    """Same header, new payload, fixed length and CRC."""
    import struct

    from crc32c import crc32c

    out = bytearray(batch[:61] + payload)
    struct.pack_into(">i", out, 8, len(out) - 12)
    struct.pack_into(">I", out, 17, crc32c(bytes(out[21:])))
    return bytes(out)
