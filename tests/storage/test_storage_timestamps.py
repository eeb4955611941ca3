"""A segment's largest timestamp survives restarts, rolls, recovery and truncation (Kafka
``LogSegment.close``/``onBecomeInactiveSegment``/``recover`` append it to the ``.timeindex``;
``readLargestTimestamp`` finds it past the last index entry).

ListOffsets by timestamp (:meth:`PartitionLog.offset_for_timestamp`), MAX_TIMESTAMP
(:meth:`PartitionLog.max_timestamp_offset`) and ``retention.ms`` read it; real files in
``tmp_path``.
"""

from __future__ import annotations

import struct

from litemq.protocol.records import build_batch
from litemq.storage.config import LogConfig
from litemq.storage.log import PartitionLog
from storage_helpers import batch

BASE_TS = 1_000_000  # far in the past: a file mtime (now) is never mistaken for it


def _time_index_entries(seg) -> list[tuple[int, int]]:
    """``(timestamp, offset)`` entries of a segment's ``.timeindex`` file as on disk."""
    data = seg.time_index.path.read_bytes()
    return [(ts, seg.base_offset + rel) for ts, rel in struct.iter_unpack(">qi", data)]


def _five_records(log: PartitionLog) -> None:
    for i in range(5):  # five small batches: no index entry (index.interval.bytes 4096)
        log.append(batch(1, ts=BASE_TS + 10 * i), leader_epoch=0)


def test_timestamp_lookups_after_a_clean_restart(tmp_path):
    d = tmp_path / "t-0"
    log = PartitionLog.open(d, LogConfig())
    _five_records(log)
    assert log.offset_for_timestamp(BASE_TS + 20) == (2, BASE_TS + 20)
    assert log.max_timestamp_offset() == (4, BASE_TS + 40)
    log.close()
    assert _time_index_entries(log.active_segment) == [(BASE_TS + 40, 4)]  # written at close

    log = PartitionLog.open(d, LogConfig())
    assert log.offset_for_timestamp(BASE_TS + 20) == (2, BASE_TS + 20)
    assert log.offset_for_timestamp(BASE_TS + 41) is None
    assert log.max_timestamp_offset() == (4, BASE_TS + 40)
    log.close()


def test_segment_rolled_after_a_clean_restart_keeps_its_largest_timestamp(tmp_path):
    d = tmp_path / "t-0"
    cfg = LogConfig(segment_bytes=1000, retention_ms=60_000)
    log = PartitionLog.open(d, cfg)
    recs = [(None, b"x" * 60, (), BASE_TS + 10 * i) for i in range(10)]
    log.append(bytearray(build_batch(recs)), leader_epoch=0)  # one batch, < 1000 bytes
    log.close()

    log = PartitionLog.open(d, cfg)
    log.append(batch(1, ts=BASE_TS + 5_000, value_size=300), leader_epoch=0)  # rolls
    assert len(log.segments) == 2
    old = log.segments[0]
    log.close()
    assert _time_index_entries(old) == [(BASE_TS + 90, 9)]

    log = PartitionLog.open(d, cfg)
    assert log.offset_for_timestamp(BASE_TS + 20) == (2, BASE_TS + 20)
    assert log.max_timestamp_offset() == (10, BASE_TS + 5_000)
    # retention.ms by the records' timestamps, not the file's mtime (now)
    assert log.enforce_retention(now_ms=BASE_TS + 90 + 60_001) == 1
    assert log.log_start_offset == 10
    log.close()


def test_time_index_without_its_last_entry_is_completed_from_the_log(tmp_path):
    """A ``.timeindex`` that lacks the final entry (written by an older version) still gives the
    right largest timestamp, whatever the time index's state on disk."""
    d = tmp_path / "t-0"
    cfg = LogConfig(segment_bytes=1000, index_interval_bytes=128)
    log = PartitionLog.open(d, cfg)
    for i in range(12):  # index entries every ~128 bytes, two segments
        log.append(batch(1, ts=BASE_TS + 10 * i, value_size=40), leader_epoch=0)
    assert len(log.segments) == 2
    log.close()
    for seg in log.segments:
        entries = _time_index_entries(seg)
        assert entries, seg
        with open(seg.time_index.path, "r+b") as f:
            f.truncate(12 * (len(entries) - 1))  # drop the final entry

    log = PartitionLog.open(d, cfg)
    for seg in log.segments:
        seg.ensure_indexes()
    assert [s.max_timestamp for s in log.segments] == [BASE_TS + 10 * (log.segments[1].base_offset - 1),
                                                        BASE_TS + 110]
    for i in range(12):
        assert log.offset_for_timestamp(BASE_TS + 10 * i - 5) == (i, BASE_TS + 10 * i)
    assert log.max_timestamp_offset() == (11, BASE_TS + 110)
    log.close()


def test_recovery_after_a_crash_writes_the_largest_timestamp(tmp_path):
    d = tmp_path / "t-0"
    log = PartitionLog.open(d, LogConfig())
    _five_records(log)
    log.flush()
    del log  # crash: no close, the recovery point not checkpointed

    log = PartitionLog.open(d, LogConfig())
    assert log.offset_for_timestamp(BASE_TS + 20) == (2, BASE_TS + 20)
    log.flush()
    # the rebuilt index holds the largest timestamp, as a cleanly closed segment's does
    assert _time_index_entries(log.active_segment) == [(BASE_TS + 40, 4)]
    log.close()
    log = PartitionLog.open(d, LogConfig())
    assert log.max_timestamp_offset() == (4, BASE_TS + 40)
    log.close()


def test_truncation_keeps_the_largest_timestamp_of_what_remains(tmp_path):
    log = PartitionLog.open(tmp_path / "t-0", LogConfig())
    _five_records(log)
    log.truncate_to(3)
    assert log.max_timestamp_offset() == (2, BASE_TS + 20)
    assert log.offset_for_timestamp(BASE_TS + 15) == (2, BASE_TS + 20)
    assert log.offset_for_timestamp(BASE_TS + 21) is None
    log.close()
