"""Property tests: build -> decode round-trips, CRC upkeep of the in-place rewrites."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch

from litemq.protocol.records import (
    Record,
    build_batch,
    decode_batch,
    decode_records,
    iter_batches,
    set_base_offset,
    set_log_append_time,
    set_partition_leader_epoch,
    validate_batches,
    verify_crc,
)

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

nbytes = st.one_of(st.none(), st.just(b""), st.binary(max_size=300))
headers = st.lists(st.tuples(st.text(max_size=12), nbytes), max_size=4).map(tuple)
timestamps = st.integers(-1, 2**45)


@st.composite
def batches(draw):
    n = draw(st.integers(0, 30))
    base_offset = draw(st.integers(0, 2**62))
    gaps = draw(st.lists(st.integers(1, 3), min_size=n, max_size=n))
    deltas, d = [], -1
    for g in gaps:
        d += g
        deltas.append(d)
    recs = [
        Record(base_offset + delta, draw(timestamps), draw(nbytes), draw(nbytes), draw(headers))
        for delta in deltas
    ]
    kwargs = dict(
        base_offset=base_offset,
        partition_leader_epoch=draw(st.integers(-1, 2**31 - 1)),
        compression=draw(st.integers(0, 4)),
        timestamp_type=draw(st.integers(0, 1)),
        producer_id=draw(st.integers(-1, 2**63 - 1)),
        producer_epoch=draw(st.integers(-1, 2**15 - 1)),
        base_sequence=draw(st.integers(-1, 2**31 - 1)),
        is_transactional=draw(st.booleans()),
    )
    return recs, kwargs


@SETTINGS
@given(batches())
def test_build_decode_round_trip(b):
    recs, kw = b
    raw = build_batch(recs, **kw)
    [h] = validate_batches(raw)
    assert verify_crc(raw, 0, h)
    assert h.records_count == len(recs)
    assert h.compression == kw["compression"] and h.timestamp_type == kw["timestamp_type"]
    assert h.is_transactional == kw["is_transactional"] and not h.is_control
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (
        kw["producer_id"], kw["producer_epoch"], kw["base_sequence"])
    assert h.partition_leader_epoch == kw["partition_leader_epoch"]
    h2, got = decode_batch(raw)
    assert h2 == h
    if kw["timestamp_type"] == 1:
        recs = [r._replace(timestamp=h.max_timestamp) for r in recs]
    else:
        assert h.max_timestamp == (max(r.timestamp for r in recs) if recs else -1)
    assert got == recs
    if recs:
        assert h.last_offset == recs[-1].offset
        if kw["compression"] in (0, 1):  # codecs kafka-python has natively
            kp = DefaultRecordBatch(raw)
            assert kp.validate_crc()
            assert [(r.offset, r.key, r.value) for r in kp] == [(r.offset, r.key, r.value) for r in recs]


@SETTINGS
@given(batches(), st.integers(0, 2**63 - 1), st.integers(-1, 2**31 - 1), timestamps)
def test_rewrites_keep_crc(b, new_base, epoch, lat):
    recs, kw = b
    blob = bytearray(build_batch(recs, **kw) + build_batch([(b"k", b"v", (), 1)], base_offset=9))
    pos = [p for p, _ in iter_batches(blob)]
    set_base_offset(blob, pos[1], new_base)
    set_partition_leader_epoch(blob, pos[1], epoch)
    set_base_offset(blob, pos[0], 0)
    hs = validate_batches(blob)
    assert hs[1].base_offset == new_base and hs[1].partition_leader_epoch == epoch
    assert [r.offset for r in decode_batch(blob, pos[0])[1]] == [
        r.offset - kw["base_offset"] for r in recs]
    set_log_append_time(blob, pos[0], lat)
    hs = validate_batches(blob)
    assert hs[0].timestamp_type == 1 and hs[0].max_timestamp == lat
    assert all(r.timestamp == lat for r in decode_batch(blob, pos[0])[1])
    assert [r.offset for r in decode_records(blob)][-1] == new_base


def test_tuple_forms_and_defaults():
    raw = build_batch([(b"a", b"1"), (b"b", b"2", [("h", b"x")]), (None, b"3", (), 77)],
                      base_offset=10)
    h, recs = decode_batch(raw)
    assert [r.offset for r in recs] == [10, 11, 12]
    assert recs[1].headers == (("h", b"x"),) and recs[2].timestamp == 77
    assert recs[0].timestamp == h.base_timestamp > 1_600_000_000_000


def test_invalid_utf8_header_key_round_trips():
    raw = build_batch([(b"k", b"v", [(b"\xff\xfe", b"x")], 1)])
    [r] = decode_batch(raw)[1]
    again = build_batch([r])
    assert again == raw


def test_empty_and_compacted_batches():
    raw = build_batch([], base_offset=5, last_offset_delta=9, producer_id=3, producer_epoch=0,
                      base_sequence=0)
    [h] = validate_batches(raw)
    assert h.records_count == 0 and h.last_offset == 14 and h.max_timestamp == -1
    assert decode_batch(raw)[1] == []
    raw = build_batch([Record(100, 1, b"a", b"1"), Record(105, 2, b"b", None)], base_offset=100,
                      last_offset_delta=7, compression=4)
    h, recs = decode_batch(raw)
    assert h.last_offset == 107 and [r.offset for r in recs] == [100, 105]
