"""The Arrow decoder against LiteMQ's reference record codec (no Spark, no broker):
every codec, null keys/values, headers, offset gaps, control batches, aborted transactions,
a cut-off last batch, and the exact Arrow schema Spark expects."""

from __future__ import annotations

import random
from types import SimpleNamespace

import pyarrow as pa

from litemq.protocol import records as R
from litemq.spark.arrow_decode import ARROW_SCHEMA, ARROW_SCHEMA_HEADERS, ColumnBuilder


def _blob():
    rnd = random.Random(7)
    parts, expect, off = [], [], 0
    for b in range(25):
        recs = []
        for i in range(40):
            k = None if rnd.random() < 0.1 else f"k{off + i}".encode()
            v = None if rnd.random() < 0.05 else rnd.randbytes(rnd.randint(0, 300))
            hs = [("h", b"x"), ("n", None)] if rnd.random() < 0.3 else []
            recs.append((k, v, hs, 1_700_000_000_000 + off + i))
        parts.append(R.build_batch(recs, base_offset=off, compression=b % 5))
        expect += [(off + i, k, v, hs, ts) for i, (k, v, hs, ts) in enumerate(recs)]
        off += len(recs)
        if b % 7 == 3:  # a control batch (commit marker) takes one offset
            parts.append(R.build_control_batch(base_offset=off, partition_leader_epoch=0, control_type=1,
                                               timestamp_ms=0, producer_id=5, producer_epoch=0))
            off += 1
    return b"".join(parts), expect


def test_decoder_matches_reference_and_skips_control_batches():
    blob, expect = _blob()
    for headers in (False, True):
        cb = ColumnBuilder("topic", 2, 15, 900, include_headers=headers)
        nxt = cb.add_records(blob[:-7])  # last batch cut short, as a Fetch at max_bytes may be
        rb = cb.flush()
        assert rb.schema == (ARROW_SCHEMA_HEADERS if headers else ARROW_SCHEMA)
        want = [e for e in expect if 15 <= e[0] < 900 and e[0] < nxt]
        d = rb.to_pydict()
        assert d["offset"] == [e[0] for e in want]
        assert d["key"] == [e[1] for e in want]
        assert d["value"] == [e[2] for e in want]
        assert [int(t.timestamp() * 1000) for t in d["timestamp"]] == [e[4] for e in want]
        assert set(d["partition"]) == {2} and set(d["topic"]) == {"topic"} and set(d["timestampType"]) == {0}
        if headers:
            assert d["headers"] == [[{"key": a, "value": b} for a, b in e[3]] for e in want]


def test_spark_arrow_types():
    assert ARROW_SCHEMA.field("partition").type == pa.int32()
    assert ARROW_SCHEMA.field("timestamp").type == pa.timestamp("us", tz="UTC")
    assert ARROW_SCHEMA.field("key").type == pa.binary()


def test_read_committed_drops_aborted_transactions():
    pid = 9
    txn1 = R.build_batch([(None, b"a0"), (None, b"a1")], base_offset=0, producer_id=pid, producer_epoch=0,
                         base_sequence=0, is_transactional=True)
    abort = R.build_control_batch(base_offset=2, partition_leader_epoch=0, control_type=0, timestamp_ms=0,
                                  producer_id=pid, producer_epoch=0)
    txn2 = R.build_batch([(None, b"c0")], base_offset=3, producer_id=pid, producer_epoch=0,
                         base_sequence=2, is_transactional=True)
    commit = R.build_control_batch(base_offset=4, partition_leader_epoch=0, control_type=1, timestamp_ms=0,
                                   producer_id=pid, producer_epoch=0)
    plain = R.build_batch([(None, b"p")], base_offset=5)
    blob = txn1 + abort + txn2 + commit + plain
    cb = ColumnBuilder("t", 0, 0, 10, read_committed=True)
    cb.add_aborted([SimpleNamespace(producer_id=pid, first_offset=0)])
    assert cb.add_records(blob) == 6
    assert cb.flush().column("value").to_pylist() == [b"c0", b"p"]
    cb = ColumnBuilder("t", 0, 0, 10)  # read_uncommitted sees everything but the markers
    cb.add_records(blob)
    assert cb.flush().column("value").to_pylist() == [b"a0", b"a1", b"c0", b"p"]
