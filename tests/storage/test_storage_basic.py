"""PartitionLog basics: append/read/flush/close/reopen, rolls, follower append, checkpoints."""

from __future__ import annotations

import pytest

from litemq.protocol.errors import (
    CorruptRecordError,
    InvalidRecordError,
    OffsetOutOfRangeError,
    RecordTooLargeError,
)
from litemq.storage.config import LogConfig
from litemq.storage.log import CLEAN_SHUTDOWN_MARKER, PartitionLog
from storage_helpers import batch, batch_bases, offsets, records

SMALL = LogConfig(segment_bytes=2048, index_interval_bytes=128)


def test_append_assigns_dense_offsets_and_reads_back(tmp_path):
    log = PartitionLog.open(tmp_path / "t-0", SMALL)
    infos = [log.append(batch(3, value=b"v%d" % i), leader_epoch=5) for i in range(50)]
    assert [(i.first_offset, i.last_offset) for i in infos[:2]] == [(0, 2), (3, 5)]
    assert log.log_end_offset == 150
    assert len(log.segments) >= 3
    data = log.read_bytes(0, 10**9)
    assert offsets(data) == list(range(150))
    assert [r.value for r in records(data)][::3] == [b"v%d" % i for i in range(50)]
    # a read from the middle starts at the batch containing the offset
    res = log.read(100, 1)
    assert res.first_offset == 99 and batch_bases(res.to_bytes()) == [99]
    assert log.read(150, 100).size == 0
    with pytest.raises(OffsetOutOfRangeError):
        log.read(151, 100)
    log.close()


def test_read_limits_bytes_and_max_offset(tmp_path):
    log = PartitionLog.open(tmp_path / "t-0", SMALL)
    sizes = [len(b) for b in (batch(1),)]
    for _ in range(40):
        log.append(batch(1), leader_epoch=0)
    one = sizes[0]
    assert batch_bases(log.read_bytes(0, one * 3)) == [0, 1, 2]
    assert batch_bases(log.read_bytes(0, one * 3 + one - 1)) == [0, 1, 2]
    assert batch_bases(log.read_bytes(5, 1)) == [5]
    assert log.read(5, 1, min_one_batch=False).size == 0
    assert batch_bases(log.read_bytes(0, 10**6, max_offset=7)) == list(range(7))
    assert log.read(7, 10**6, max_offset=7).size == 0
    # spanning segments
    assert batch_bases(log.read_bytes(3, 10**6)) == list(range(3, 40))
    log.close()


def test_close_reopen_and_crash(tmp_path):
    d = tmp_path / "my.topic-with-dash-3"
    log = PartitionLog.open(d, SMALL)
    for i in range(30):
        log.append(batch(2), leader_epoch=1)
    log.close()
    assert (d / CLEAN_SHUTDOWN_MARKER).exists()
    log = PartitionLog.open(d, SMALL)
    assert not (d / CLEAN_SHUTDOWN_MARKER).exists()
    assert log.log_end_offset == 60 and log.recovery_point == 60
    log.append(batch(2), leader_epoch=2)
    del log  # crash: no close
    log = PartitionLog.open(d, SMALL)
    assert log.log_end_offset == 62
    assert offsets(log.read_bytes(0, 10**9)) == list(range(62))
    assert log.leader_epoch_cache.entries() == [(1, 0), (2, 60)]
    log.close()


def test_validation_errors(tmp_path):
    log = PartitionLog.open(tmp_path / "t-0", LogConfig(max_message_bytes=200))
    with pytest.raises(RecordTooLargeError):
        log.append(batch(1, value_size=300), leader_epoch=0)
    bad = batch(1)
    bad[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError):
        log.append(bad, leader_epoch=0)
    with pytest.raises(InvalidRecordError):
        log.append(bytearray(), leader_epoch=0)
    assert log.log_end_offset == 0


def test_follower_append(tmp_path):
    leader = PartitionLog.open(tmp_path / "l-0", SMALL)
    follower = PartitionLog.open(tmp_path / "f-0", SMALL)
    for e in (1, 1, 2, 3):
        leader.append(batch(2), leader_epoch=e)
    data = leader.read_bytes(0, 10**9)
    follower.append_as_follower(bytearray(data))
    assert follower.log_end_offset == 8
    assert follower.leader_epoch_cache.entries() == [(1, 0), (2, 4), (3, 6)]
    with pytest.raises(InvalidRecordError):
        follower.append_as_follower(bytearray(data))
    assert follower.read_bytes(0, 10**9) == data


def test_flush_advances_flushed_offset(tmp_path):
    log = PartitionLog.open(tmp_path / "t-0", SMALL)
    log.append(batch(4), leader_epoch=0)
    assert log.flushed_offset == 0 and log.flush_due()
    log.flush()
    assert log.flushed_offset == 4 and not log.flush_due()
    cfg = LogConfig(flush_messages=10)
    log.update_config(cfg)
    log.append(batch(4), leader_epoch=0)
    assert not log.flush_due()
    log.append(batch(6), leader_epoch=0)
    assert log.flush_due()


def test_offset_for_timestamp(tmp_path):
    log = PartitionLog.open(tmp_path / "t-0", SMALL)
    for i in range(20):
        log.append(batch(2, ts=1000 + 10 * i), leader_epoch=0)
    assert log.offset_for_timestamp(0) == (0, 1000)
    assert log.offset_for_timestamp(1055) == (12, 1060)
    assert log.offset_for_timestamp(1060) == (12, 1060)
    assert log.offset_for_timestamp(5000) is None
