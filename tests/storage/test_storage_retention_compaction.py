"""Retention (time, bytes, DeleteRecords) and compaction (latest per key, tombstones)."""

from __future__ import annotations

import threading

import pytest

from litemq.protocol.errors import OffsetOutOfRangeError
from litemq.protocol.records import iter_batches
from litemq.storage.config import LogConfig
from litemq.storage.log import PartitionLog
from storage_helpers import batch, compact_committed, keyed, offsets, records


def test_retention_by_time(tmp_path):
    cfg = LogConfig(segment_bytes=1024, retention_ms=10_000)
    log = PartitionLog.open(tmp_path / "t-0", cfg)
    for i in range(60):
        log.append(batch(1, ts=1_000 + i * 1_000, value_size=100), leader_epoch=0)
    n_segments = len(log.segments)
    # now = 40 s: segments whose newest record is older than 30 s go
    deleted = log.enforce_retention(40_000)
    assert deleted > 0 and len(log.segments) == n_segments - deleted
    assert log.log_start_offset == log.segments[0].base_offset > 0
    for seg in log.segments[:-1]:
        assert seg.max_timestamp >= 30_000
    with pytest.raises(OffsetOutOfRangeError):
        log.read(0, 100)
    assert offsets(log.read_bytes(log.log_start_offset, 10**9)) == list(range(log.log_start_offset, 60))
    # everything expired: the active segment is rolled, then every old segment goes
    log.enforce_retention(10**9)
    assert log.log_start_offset == log.log_end_offset == 60 and log.size_bytes == 0
    assert log.append(batch(1), leader_epoch=0).first_offset == 60
    log.close()
    log = PartitionLog.open(tmp_path / "t-0", cfg)
    assert (log.log_start_offset, log.log_end_offset) == (60, 61)


def test_retention_never_passes_the_high_watermark(tmp_path):
    """Kafka deletes only segments wholly below the high watermark: records not yet committed
    (a leader whose followers lag) are never removed by retention, however old."""
    cfg = LogConfig(segment_bytes=1024, retention_ms=10_000)
    log = PartitionLog.open(tmp_path / "t-0", cfg)
    for i in range(60):
        log.append(batch(1, ts=1_000 + i * 1_000, value_size=100), leader_epoch=0)
    hw = 25
    log.enforce_retention(10**9, high_watermark=hw)  # every record expired, only [0, 25) committed
    assert 0 < log.log_start_offset <= hw
    assert offsets(log.read_bytes(log.log_start_offset, 10**9)) == list(range(log.log_start_offset, 60))
    log.enforce_retention(10**9, high_watermark=0)  # nothing committed beyond the log start: no-op
    start = log.log_start_offset
    assert log.enforce_retention(10**9, high_watermark=start) == 0 and log.log_start_offset == start
    log.enforce_retention(10**9, high_watermark=60)
    assert log.log_start_offset == log.log_end_offset == 60
    log.close()


def test_retention_by_bytes(tmp_path):
    cfg = LogConfig(segment_bytes=1024, retention_bytes=3000, retention_ms=-1)
    log = PartitionLog.open(tmp_path / "t-0", cfg)
    for _ in range(80):
        log.append(batch(1, value_size=100), leader_epoch=0)
    assert log.size_bytes > 3000
    log.enforce_retention(0)
    assert log.size_bytes <= 3000 + 1024
    assert log.size_bytes - log.segments[0].size < 3000
    assert log.log_start_offset == log.segments[0].base_offset


def test_delete_records_before(tmp_path):
    cfg = LogConfig(segment_bytes=1024)
    log = PartitionLog.open(tmp_path / "t-0", cfg)
    for _ in range(50):
        log.append(batch(2, value_size=50), leader_epoch=3)
    assert log.delete_records_before(37) == 37
    assert log.segments[0].base_offset <= 37
    assert offsets(log.read_bytes(37, 10**9))[0] <= 37
    with pytest.raises(OffsetOutOfRangeError):
        log.read(36, 10)
    with pytest.raises(OffsetOutOfRangeError):
        log.delete_records_before(101)
    assert log.delete_records_before(10) == 37
    del log  # crash: the start offset was checkpointed
    log = PartitionLog.open(tmp_path / "t-0", cfg)
    assert log.log_start_offset == 37 and log.log_end_offset == 100


def _compact_cfg(**kw):
    base = dict(segment_bytes=600, cleanup_policy="compact", min_cleanable_dirty_ratio=0.0,
                delete_retention_ms=5_000)
    base.update(kw)
    return LogConfig(**base)


def test_compaction_keeps_latest_per_key(tmp_path):
    log = PartitionLog.open(tmp_path / "c-0", _compact_cfg())
    expected = {}
    for i in range(200):
        k = b"key%d" % (i % 7)
        v = b"value-%d" % i
        info = log.append(keyed([(k, v)], ts=1_000 + i), leader_epoch=1)
        expected[k] = (info.first_offset, v)
    before = log.size_bytes
    stats = compact_committed(log, 2_000)
    assert stats.segments_cleaned > 0 and stats.records_removed > 0
    assert log.size_bytes < before
    recs = records(log.read_bytes(0, 10**9))
    active_base = log.active_segment.base_offset
    latest = {}
    for r in recs:
        latest[r.key] = (r.offset, r.value)
        if r.offset < active_base:
            # in cleaned segments only latest versions remain
            assert expected[r.key][0] == r.offset or r.offset >= active_base or any(
                o.key == r.key and o.offset > r.offset and o.offset >= active_base for o in recs)
    assert latest == expected
    # offsets unchanged and increasing; reads from a removed offset give the next batch
    offs = [r.offset for r in recs]
    assert offs == sorted(offs) and offs[-1] == 199
    assert log.read(1, 10**6).first_offset >= 1
    # reopen (clean and crash) keeps it
    log.close()
    log = PartitionLog.open(tmp_path / "c-0", _compact_cfg())
    assert records(log.read_bytes(0, 10**9)) == recs


def test_tombstones_removed_after_delete_retention(tmp_path):
    """KIP-534: a tombstone lives delete.retention.ms (5 s here) from the first clean that kept
    it - not from its own timestamp - so one produced with an old timestamp is not dropped
    before consumers can see it; its record keeps its timestamp meanwhile."""
    log = PartitionLog.open(tmp_path / "c-0", _compact_cfg(segment_bytes=300))
    log.append(keyed([(b"a", b"1"), (b"b", b"1")], ts=1_000), leader_epoch=1)
    log.append(keyed([(b"a", None)], ts=2_000), leader_epoch=1)
    for i in range(20):
        log.append(keyed([(b"z%d" % i, b"x" * 40)], ts=3_000), leader_epoch=1)
    first = compact_committed(log, 100_000)  # the tombstone is 98 s old, but first kept now
    recs = {r.key: r for r in records(log.read_bytes(0, 10**9))}
    assert recs[b"a"].value is None and recs[b"a"].timestamp == 2_000 and recs[b"b"].value == b"1"
    assert first.tombstones_removed == 0
    assert [h.delete_horizon_ms for _, h in iter_batches(log.read_bytes(0, 10**9)) if h.base_offset == 2] == [105_000]
    assert compact_committed(log, 104_999).tombstones_removed == 0  # before its horizon: kept
    stats = compact_committed(log, 105_000)
    assert stats.tombstones_removed == 1
    keys = [r.key for r in records(log.read_bytes(0, 10**9))]
    assert b"a" not in keys and b"b" in keys


def test_compaction_respects_dirty_ratio_and_lag(tmp_path):
    log = PartitionLog.open(tmp_path / "c-0", _compact_cfg(min_compaction_lag_ms=10_000))
    for i in range(50):
        log.append(keyed([(b"k", b"v%d" % i)], ts=1_000 + i), leader_epoch=1)
    assert compact_committed(log, 5_000).skipped  # everything younger than the lag
    assert compact_committed(log, 20_000).segments_cleaned > 0
    log.update_config(_compact_cfg(min_cleanable_dirty_ratio=0.9))
    assert compact_committed(log, 20_000).skipped  # nothing dirty any more
    assert not PartitionLog.open(tmp_path / "d-0", LogConfig()).compact(0, high_watermark=0).segments_cleaned


def test_compaction_concurrent_with_appends_and_reads(tmp_path):
    log = PartitionLog.open(tmp_path / "c-0", _compact_cfg(segment_bytes=2000))
    for i in range(300):
        log.append(keyed([(b"k%d" % (i % 13), b"v%d" % i)], ts=1_000), leader_epoch=1)
    errors = []

    def clean():
        try:
            for _ in range(3):
                compact_committed(log, 2_000)
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    t = threading.Thread(target=clean)
    t.start()
    for i in range(300, 600):
        log.append(keyed([(b"k%d" % (i % 13), b"v%d" % i)], ts=1_000), leader_epoch=1)
        recs = records(log.read_bytes(0, 10**9))
        assert recs[-1].offset == i
    t.join()
    assert not errors
    final = {r.key: r.value for r in records(log.read_bytes(0, 10**9))}
    assert final == {b"k%d" % (i % 13): b"v%d" % i for i in range(600 - 13, 600)}


def test_compaction_stops_below_the_high_watermark(tmp_path):
    """Records at or after the high watermark may still be truncated (a Raft replica's
    uncommitted suffix), so compaction cleans only segments wholly below it (Kafka cleans below
    the LSO, itself <= the high watermark); otherwise a record removed as superseded by an
    uncommitted one is lost with it (the state machine's falsifying example, issue 17)."""
    log = PartitionLog.open(tmp_path / "c-0", _compact_cfg(delete_retention_ms=10**12))
    log.append(keyed([(b"a", b"0"), (b"a", b"1")]), leader_epoch=0)  # offsets 0, 1
    log.append(keyed([(b"a", b"2")]), leader_epoch=0)  # offset 2: not committed
    log.roll()
    stats = log.compact(now_ms=10**12, high_watermark=2)
    assert stats.segments_cleaned == 0 and stats.skipped == "no cleanable segment"
    log.truncate_to(2)
    assert log.log_end_offset == 2
    assert [(r.offset, r.value) for r in records(log.read_bytes(0, 10**9))] == [(0, b"0"), (1, b"1")]
    log.append(keyed([(b"a", b"3")]), leader_epoch=1)  # offset 2 again, then committed
    log.roll()
    assert log.compact(now_ms=10**12, high_watermark=3).segments_cleaned == 1
    assert [(r.offset, r.value) for r in records(log.read_bytes(0, 10**9))] == [(2, b"3")]
    log.close()


def test_max_compaction_lag_compacts_below_the_dirty_ratio(tmp_path):
    """KIP-354: a log whose oldest dirty segment's first batch is older than
    ``max.compaction.lag.ms`` is compacted although its dirty ratio is below
    ``min.cleanable.dirty.ratio``; younger, it is not."""
    log = PartitionLog.open(tmp_path / "c-0", _compact_cfg())
    for i in range(60):
        log.append(keyed([(b"k%d" % (i % 30), b"v%d" % i)], ts=1_000 + i), leader_epoch=1)
    assert compact_committed(log, 2_000).segments_cleaned > 0
    for i in range(12):  # a little dirt: one key rewritten, into segments of their own
        log.append(keyed([(b"k0", b"w%d" % i)], ts=50_000 + i), leader_epoch=1)
    log.update_config(_compact_cfg(min_cleanable_dirty_ratio=0.9))
    assert "dirty ratio" in compact_committed(log, 60_000).skipped
    log.update_config(_compact_cfg(min_cleanable_dirty_ratio=0.9, max_compaction_lag_ms=100_000))
    assert "dirty ratio" in compact_committed(log, 60_000).skipped  # the oldest dirt: 59 s < 100 s
    stats = compact_committed(log, 110_000)  # 109 s > 100 s
    assert stats.segments_cleaned > 0 and stats.records_removed > 0
    values = {r.key: r.value for r in records(log.read_bytes(0, 10**9))}
    assert values[b"k0"] == b"w11" and len(values) == 30


def test_compacted_segment_rolls_at_max_compaction_lag(tmp_path):
    """Kafka ``LogConfig.maxSegmentMs``: on a compacted topic the active segment rolls once its
    first batch is ``max.compaction.lag.ms`` old (by the records' timestamps), not only at
    ``segment.ms``; a topic with ``cleanup.policy=delete`` ignores the lag."""
    for policy, rolled in (("compact", True), ("delete", False)):
        log = PartitionLog.open(tmp_path / f"{policy}-0", _compact_cfg(
            segment_bytes=10**6, cleanup_policy=policy, max_compaction_lag_ms=100))
        log.append(keyed([(b"a", b"1")], ts=1_000), leader_epoch=1)
        log.append(keyed([(b"a", b"2")], ts=1_100), leader_epoch=1)  # 100 ms: not more than the lag
        assert len(log.segments) == 1
        log.append(keyed([(b"a", b"3")], ts=1_101), leader_epoch=1)
        assert len(log.segments) == (2 if rolled else 1), policy
        log.close()


def test_segment_jitter_rolls_each_segment_a_little_earlier(tmp_path):
    """``segment.jitter.ms``: a new segment rolls ``roll_jitter_ms`` before ``segment.ms``, a
    draw in ``[0, min(segment.jitter.ms, segment.ms))`` made when it is created (Kafka
    ``LogConfig.randomSegmentJitter``); without jitter the draw is 0."""
    cfg = LogConfig(segment_ms=1_000, segment_jitter_ms=5_000)
    assert cfg.random_segment_jitter_ms(lambda n: n - 1) == 999  # bounded by segment.ms
    assert LogConfig(segment_ms=1_000).random_segment_jitter_ms(lambda n: 1 / 0) == 0
    log = PartitionLog.open(tmp_path / "j-0", cfg)
    for attempt in range(20):  # until a draw above 0 (each is uniform in [0, 1000))
        jitter = log.active_segment.roll_jitter_ms
        assert 0 <= jitter < 1_000
        if jitter > 0:
            break
        log.close()
        log = PartitionLog.open(tmp_path / f"j{attempt}-0", cfg)
    assert jitter > 0
    start = 10_000
    log.append(keyed([(b"a", b"1")], ts=start), leader_epoch=1)
    log.append(keyed([(b"a", b"2")], ts=start + 1_000 - jitter), leader_epoch=1)
    assert len(log.segments) == 1
    log.append(keyed([(b"a", b"3")], ts=start + 1_000 - jitter + 1), leader_epoch=1)
    assert len(log.segments) == 2
