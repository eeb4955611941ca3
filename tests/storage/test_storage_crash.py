"""Crash recovery: torn/garbage tails, corrupt indexes, producer state, disk full (tmpfs)."""

from __future__ import annotations

import os
import random
import uuid

import pytest

from litemq.protocol.errors import (
    InvalidProducerEpochError,
    KafkaStorageError,
    OutOfOrderSequenceError,
)
from litemq.storage.config import LogConfig
from litemq.storage.log import PartitionLog
from tests.small_disk import small_tmpfs
from storage_helpers import batch, batch_bases, offsets

CFG = LogConfig(segment_bytes=4096, index_interval_bytes=100)


def _filled(path, n=40):
    log = PartitionLog.open(path, CFG)
    ends = [0]
    for i in range(n):
        log.append(batch(1 + i % 3, value_size=20 + i), leader_epoch=1)
        ends.append(log.active_segment.size)
    return log


@pytest.mark.parametrize("seed", range(12))
def test_torn_tail_recovers_to_last_whole_batch(tmp_path, seed):
    rnd = random.Random(seed)
    d = tmp_path / "t-0"
    log = _filled(d)
    seg = log.active_segment
    # batch boundaries of the active segment
    bounds = [p for p, _ in seg.iter_headers()] + [seg.size]
    leo_before = log.log_end_offset
    data_before = log.read_bytes(0, 10**9)
    path, size = seg.log_path, seg.size
    del log, seg  # crash without close
    cut = rnd.randrange(bounds[0] + 1, size)
    garbage = rnd.random() < 0.5
    with open(path, "r+b") as f:
        f.truncate(cut)
        if garbage:
            f.seek(0, 2)
            f.write(rnd.randbytes(rnd.randrange(1, 300)))
    log = PartitionLog.open(d, CFG)
    kept = max(b for b in bounds if b <= cut)
    assert log.active_segment.size == kept
    data = log.read_bytes(0, 10**9)
    assert data == data_before[: len(data)]
    assert offsets(data) == list(range(log.log_end_offset))
    assert log.log_end_offset <= leo_before
    # the log keeps working
    info = log.append(batch(2), leader_epoch=2)
    assert info.first_offset == log.log_end_offset - 2
    log.close()
    log = PartitionLog.open(d, CFG)
    assert offsets(log.read_bytes(0, 10**9)) == list(range(log.log_end_offset))


def test_garbage_in_middle_segment_drops_later_segments(tmp_path):
    d = tmp_path / "t-0"
    log = _filled(d, 200)
    segs = log.segments
    assert len(segs) >= 3
    victim = segs[1]
    positions = [p for p, _ in victim.iter_headers()]
    victim_path, pos = victim.log_path, positions[len(positions) // 2]
    expected_end = [h for _, h in victim.iter_headers()][len(positions) // 2].base_offset
    del log, segs, victim
    with open(victim_path, "r+b") as f:
        f.seek(pos + 30)
        f.write(b"\xde\xad\xbe\xef")
    log = PartitionLog.open(d, CFG)  # no recovery-point checkpoint yet: everything is checked
    assert log.log_end_offset == expected_end
    assert offsets(log.read_bytes(0, 10**9)) == list(range(expected_end))


@pytest.mark.parametrize("damage", ["garbage", "truncate", "delete", "unsorted"])
def test_corrupt_index_is_rebuilt(tmp_path, damage):
    d = tmp_path / "t-0"
    log = _filled(d, 120)
    log.close()
    first = sorted(d.glob("*.index"))[0]
    if damage == "garbage":
        first.write_bytes(os.urandom(64))
    elif damage == "truncate":
        first.write_bytes(first.read_bytes()[:-3])
    elif damage == "delete":
        first.unlink()
    else:
        first.write_bytes(first.read_bytes()[8:16] + first.read_bytes()[:8])
    log = PartitionLog.open(d, CFG)
    assert offsets(log.read_bytes(0, 10**9)) == list(range(log.log_end_offset))
    for o in range(0, log.log_end_offset, 7):
        assert log.read(o, 1).first_offset <= o
    assert len(log.segments[0].offset_index) > 0


def test_producer_state_dedup_and_fencing(tmp_path):
    d = tmp_path / "t-0"
    log = PartitionLog.open(d, CFG)
    a = log.append(batch(3, pid=7, epoch=0, seq=0), leader_epoch=1)
    b = log.append(batch(2, pid=7, epoch=0, seq=3), leader_epoch=1)
    dup = log.append(batch(3, pid=7, epoch=0, seq=0), leader_epoch=1)
    assert dup.duplicate and (dup.first_offset, dup.last_offset) == (a.first_offset, a.last_offset)
    assert log.log_end_offset == 5
    with pytest.raises(OutOfOrderSequenceError):
        log.append(batch(1, pid=7, epoch=0, seq=9), leader_epoch=1)
    with pytest.raises(OutOfOrderSequenceError):
        log.append(batch(1, pid=7, epoch=1, seq=5), leader_epoch=1)
    log.append(batch(1, pid=7, epoch=1, seq=0), leader_epoch=1)
    with pytest.raises(InvalidProducerEpochError):
        log.append(batch(1, pid=7, epoch=0, seq=5), leader_epoch=1)
    # an unknown producer may start anywhere (Kafka >= 2.5, KIP-360)
    log.append(batch(1, pid=8, epoch=0, seq=42), leader_epoch=1)
    assert log.producer_state.last_sequence(7) == 0 and log.producer_state.epoch(7) == 1
    del log  # crash: state rebuilt from the headers
    log = PartitionLog.open(d, CFG)
    assert log.producer_state.last_sequence(7) == 0 and log.producer_state.epoch(7) == 1
    assert log.append(batch(1, pid=8, epoch=0, seq=42), leader_epoch=1).duplicate
    log.close()  # clean: from the snapshot
    log = PartitionLog.open(d, CFG)
    assert log.producer_state.last_sequence(8) == 42
    assert log.append(batch(1, pid=7, epoch=1, seq=0), leader_epoch=1).duplicate
    log.truncate_to(b.first_offset)
    assert log.producer_state.last_sequence(7) == 2 and log.producer_state.epoch(7) == 0
    assert log.append(batch(2, pid=7, epoch=0, seq=3), leader_epoch=2).first_offset == 3


def test_truncation_and_epochs(tmp_path):
    d = tmp_path / "t-0"
    log = PartitionLog.open(d, CFG)
    for e in range(1, 6):
        for _ in range(20):
            log.append(batch(2), leader_epoch=e)
    assert log.leader_epoch_cache.end_offset_for_epoch(2, log.log_end_offset) == (2, 80)
    assert log.leader_epoch_cache.end_offset_for_epoch(5, log.log_end_offset) == (5, 200)
    assert log.leader_epoch_cache.end_offset_for_epoch(9, log.log_end_offset) == (-1, -1)
    log.flush()
    log.truncate_to(90)
    assert log.log_end_offset == 90 and log.recovery_point <= 90
    assert log.leader_epoch_cache.entries() == [(1, 0), (2, 40), (3, 80)]
    assert offsets(log.read_bytes(0, 10**9)) == list(range(90))
    log.append(batch(1), leader_epoch=7)
    del log
    log = PartitionLog.open(d, CFG)
    assert log.log_end_offset == 91 and log.leader_epoch_cache.latest_epoch() == 7
    log.truncate_fully_and_start_at(500)
    assert (log.log_start_offset, log.log_end_offset) == (500, 500)
    assert batch_bases(log.read_bytes(500, 100)) == []
    assert log.append(batch(1), leader_epoch=8).first_offset == 500
    log.close()
    log = PartitionLog.open(d, CFG)
    assert (log.log_start_offset, log.log_end_offset) == (500, 501)


# ------------------------------------------------------------------ disk full
@pytest.fixture
def tiny_tmpfs(tmp_path):
    with small_tmpfs(tmp_path / f"tmpfs-{uuid.uuid4().hex[:6]}", "2m") as mnt:
        yield mnt


def test_disk_full_raises_storage_error_and_log_survives(tiny_tmpfs):
    d = tiny_tmpfs / "t-0"
    cfg = LogConfig(segment_bytes=256 * 1024)
    log = PartitionLog.open(d, cfg)
    filler = tiny_tmpfs / "filler"
    filler.write_bytes(b"\0" * (1024 * 1024))
    appended = 0
    with pytest.raises(KafkaStorageError):
        for _ in range(10_000):
            log.append(batch(4, value_size=2000), leader_epoch=1)
            appended += 4
    assert appended > 0
    leo = log.log_end_offset
    assert leo == appended
    assert offsets(log.read_bytes(0, 10**9)) == list(range(leo))
    # sizes on disk equal what the log thinks: the partial write was truncated back
    for seg in log.segments:
        assert os.path.getsize(seg.log_path) == seg.size
    filler.unlink()
    info = log.append(batch(4, value_size=2000), leader_epoch=1)
    assert info.first_offset == leo
    log.flush()
    log.close()
    log = PartitionLog.open(d, cfg)
    assert offsets(log.read_bytes(0, 10**9)) == list(range(leo + 4))


def test_new_log_is_created_not_recovered(tmp_path, caplog):
    """A brand-new partition has nothing to recover: it is logged as created, never as
    "recovered ... (unclean shutdown)"; a crash of a log with data still is a recovery."""
    caplog.set_level("INFO", logger="litemq.storage.log")
    log = PartitionLog.open(tmp_path / "p-0", CFG)
    assert [r.getMessage() for r in caplog.records] == [f"created log {tmp_path / 'p-0'} at offset 0"]
    log.append(batch(3), leader_epoch=1)
    log.flush()
    caplog.clear()
    reopened = PartitionLog.open(tmp_path / "p-0", CFG)  # no close(): as after a crash
    messages = " | ".join(r.getMessage() for r in caplog.records)
    assert "unclean shutdown" in messages and reopened.log_end_offset == 3, messages
    reopened.close()
    caplog.clear()
    PartitionLog.open(tmp_path / "p-0", CFG).close()
    assert "(clean shutdown)" in caplog.records[0].getMessage()


def test_no_checkpoint_at_a_new_logs_first_flush_and_a_crash_still_recovers(tmp_path):
    """A new log's first flush writes no recovery-point checkpoint (the first comes one interval
    after open, or when a segment is rolled): a broker creating or opening many partitions does
    not write two checkpoint files per partition at once. A crash before that checkpoint loses
    nothing flushed: recovery checks the whole log."""
    d = tmp_path / "t-0"
    log = PartitionLog.open(d, LogConfig(segment_bytes=1 << 20, index_interval_bytes=100))
    for i in range(5):
        log.append(batch(2, value_size=30), leader_epoch=1)
    log.flush()
    assert log.flushed_offset == 10
    assert not (d / "recovery-point-offset-checkpoint").exists()
    del log  # a crash: no close
    log = PartitionLog.open(d, CFG)
    assert offsets(log.read_bytes(0, 10**9)) == list(range(10))


@pytest.mark.parametrize("name", ["recovery-point-offset-checkpoint", "leader-epoch-checkpoint",
                                  "log-start-offset-checkpoint"])
def test_a_checkpoint_with_non_utf8_bytes_is_ignored_and_the_log_recovers(tmp_path, caplog, name):
    """A checkpoint file with bytes that are not UTF-8 is malformed like any other (logged,
    ignored, the log recovered), as read_checkpoint says and Kafka does; it stopped the broker
    from starting with "'utf-8' codec can't decode", naming no file."""
    d = tmp_path / "t-0"
    log = _filled(d)
    leo = log.log_end_offset
    data = log.read_bytes(0, 10**9)
    log.close()
    (d / name).write_bytes(b"0\n1\n\xff\xfe 12\n")
    log = PartitionLog.open(d, CFG)
    assert log.log_end_offset == leo
    assert log.read_bytes(0, 10**9) == data
    assert any(name in r.getMessage() and "malformed" in r.getMessage() for r in caplog.records)
    log.append(batch(1), leader_epoch=2)
    log.close()
