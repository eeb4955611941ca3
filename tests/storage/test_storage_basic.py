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
from litemq.protocol.records import iter_batches
from storage_helpers import batch, batch_bases, compact_committed, keyed, offsets, records

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


def test_follower_append_across_compaction_gaps(tmp_path):
    """A follower copying its leader's compacted log (the Raft entries of cluster/group.py: an
    entry starts at the follower's log end, its batch above it after a compaction gap): the same
    batches at the same offsets, through a roll and a reopen; a first batch below the log end,
    or an entry not at the log end, is refused (Kafka refuses only the former)."""
    compact = LogConfig(segment_bytes=10**6, cleanup_policy="compact", retention_ms=-1,
                        min_cleanable_dirty_ratio=0.0, delete_retention_ms=10**12)
    leader = PartitionLog.open(tmp_path / "l-0", compact)
    for i, epoch in enumerate((1, 1, 1, 2, 2, 3, 3, 3)):  # batch i at offsets 2i, 2i+1
        first = b"u%d" % i if i in (2, 4, 6) else b"c"  # the other batches: superseded whole
        leader.append(keyed([(first, b"x%d" % i), (b"c", b"y%d" % i)]), leader_epoch=epoch)
        if i in (2, 5):
            leader.roll()
    leader.roll()
    assert compact_committed(leader, 10**12).segments_cleaned == 3
    data = leader.read_bytes(0, 10**9)
    bases = batch_bases(data)
    assert bases == [4, 8, 12, 14]  # gaps 0-3, 6-7, 10-11

    follower = PartitionLog.open(tmp_path / "f-0", SMALL)
    with pytest.raises(InvalidRecordError):  # the entry must start at the log end
        follower.append_as_follower(bytearray(data), first_offset=1)
    with pytest.raises(InvalidRecordError):  # no gap without the entry's offset
        follower.append_as_follower(bytearray(data))
    end = 0
    for pos, h in iter_batches(data):  # one entry per batch, from the follower's log end
        one = bytearray(data[pos:pos + h.batch_length + 12])
        info = follower.append_as_follower(one, first_offset=end)
        assert (info.first_offset, info.last_offset) == (h.base_offset, h.base_offset + h.last_offset_delta)
        end = h.base_offset + h.last_offset_delta + 1
        assert follower.log_end_offset == end
        if h.base_offset == bases[1]:
            follower.roll()
    assert end == leader.log_end_offset == 16
    with pytest.raises(InvalidRecordError):  # a first batch below the log end
        follower.append_as_follower(bytearray(data[:]), first_offset=end)
    assert follower.read_bytes(0, 10**9) == data
    # the epochs as a Kafka follower records them: at the base offset of the first batch of each
    assert follower.leader_epoch_cache.entries() == [(1, 4), (2, 8), (3, 12)]
    # a read from inside a gap starts at the next batch
    for offset in range(16):
        got = follower.read(offset, 1)
        assert got.first_offset == min(b for b, (_, h) in zip(bases, iter_batches(data))
                                       if b + h.last_offset_delta >= offset)
    assert follower.translator.end_raft_offset == 16 and follower.translator.is_identity_below(16)
    follower.close()
    follower = PartitionLog.open(tmp_path / "f-0", SMALL)
    assert follower.log_end_offset == 16 and follower.read_bytes(0, 10**9) == data
    follower.close()
    leader.close()


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
