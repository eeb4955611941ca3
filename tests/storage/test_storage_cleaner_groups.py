"""Compaction merges small segments and keeps their modification time (Kafka
``Cleaner.groupSegmentsBySize`` and ``cleaned.setLastModified``).

A segment the cleaner empties has no record timestamp left, so ``retention.ms`` of a
``compact,delete`` log dates it by its file's mtime: the cleaned copy keeps the source's, or
retention would never get past it while cleans keep coming. Emptied and shrunken segments are
merged into their neighbours, so their number stays bounded; offsets (and a replicated log's
Raft-internal offsets) are unchanged, and a crash in the middle of a merging swap reloads a
consistent log. Real files in ``tmp_path``.
"""

from __future__ import annotations

import os
import time

from litemq.protocol.records import CONTROL_LEADER_CHANGE, RAFT_INTERNAL_KEY_VERSION, build_batch, build_control_batch
from litemq.storage.cleaner import CleanStats, LogCleaner
from litemq.storage.config import LogConfig
from litemq.storage.log import PartitionLog
from litemq.storage.segment import CLEANED_SUFFIX, SWAP_SUFFIX
from storage_helpers import compact_committed, keyed, records

HOUR_MS = 3_600_000


def _cfg(**kw) -> LogConfig:
    base = dict(cleanup_policy="compact,delete", internal_segment_bytes=10_000, retention_ms=-1,
                min_cleanable_dirty_ratio=0.0, delete_retention_ms=10**12)
    base.update(kw)
    return LogConfig(**base)


def _kv(log: PartitionLog) -> list[tuple[int, bytes, bytes]]:
    return [(r.offset, r.key, r.value) for r in records(log.read_bytes(log.log_start_offset, 10**9))]


def _age_files(log: PartitionLog, ms: int) -> int:
    """Set every segment's ``.log`` mtime ``ms`` in the past (written that long ago); returns it in ns."""
    ns = time.time_ns() - ms * 1_000_000
    for seg in log.segments:
        os.utime(seg.log_path, ns=(ns, ns))
    return ns


def _hot_segments(log: PartitionLog, n: int, ts: int, first: int = 0) -> None:
    """``n`` segments, each one update of key ``hot``."""
    for i in range(first, first + n):
        log.append(keyed([(b"hot", b"v%d" % i)], ts=ts), leader_epoch=0)
        log.roll()


def test_emptied_segment_keeps_its_mtime_and_retention_deletes_it(tmp_path):
    now = int(time.time() * 1000)
    cfg = _cfg(internal_segment_bytes=100, retention_ms=10_000)  # one batch per cleaned segment
    log = PartitionLog.open(tmp_path / "t-0", cfg)
    _hot_segments(log, 2, ts=now)  # [0] hot=v0 (superseded), [1] hot=v1
    old_ns = _age_files(log, HOUR_MS)  # written an hour ago
    assert log.enforce_retention(now_ms=now) == 0  # the records are recent
    assert compact_committed(log, now).segments_cleaned == 2
    head = log.segments[0]
    assert head.base_offset == 0 and head.size == 0  # emptied by the clean
    assert os.stat(head.log_path).st_mtime_ns == old_ns
    # no record timestamp left: retention dates it by its mtime, an hour old
    assert log.enforce_retention(now_ms=now) == 1
    assert log.log_start_offset == 1 and _kv(log) == [(1, b"hot", b"v1")]
    log.close()


def test_compact_delete_retention_is_not_stuck_behind_emptied_segments(tmp_path):
    """The head segments hold a hot key that later updates supersede; behind them records with
    hour-old timestamps; cleans keep coming. Retention gets past the emptied head: no segment
    it may delete is left (one whose largest timestamp, or mtime when it has none, is older than
    ``retention.ms``; a record with an old timestamp merged with newer ones stays, as in Kafka)."""
    now = int(time.time() * 1000)
    cfg = _cfg(internal_segment_bytes=300, retention_ms=10_000)
    log = PartitionLog.open(tmp_path / "t-0", cfg)
    _hot_segments(log, 5, ts=now)
    for i in range(4):
        log.append(keyed([(b"old-%d" % i, b"o")], ts=now - HOUR_MS), leader_epoch=0)
        log.roll()
    _age_files(log, 60_000)
    first_hot = log.log_end_offset
    for rnd in range(10):
        _hot_segments(log, 2, ts=now, first=first_hot + 2 * rnd)
        compact_committed(log, now)
        log.enforce_retention(now_ms=now)
    assert log.log_start_offset > 5
    assert len([k for _, k, _ in _kv(log) if k.startswith(b"old")]) < 4
    for seg in log.segments[:-1]:
        age = now - (seg.max_timestamp if seg.max_timestamp >= 0 else os.stat(seg.log_path).st_mtime_ns // 10**6)
        assert age <= 10_000, seg
    assert len(log.segments) <= 4, log.segments  # emptied segments merged, not piling up
    log.close()


def test_compact_only_log_merges_emptied_segments(tmp_path):
    cfg = _cfg(cleanup_policy="compact")
    log = PartitionLog.open(tmp_path / "t-0", cfg)
    for rnd in range(10):
        _hot_segments(log, 3, ts=1_000, first=3 * rnd)
        compact_committed(log, 10**12)
        assert len(log.segments) <= 3, (rnd, log.segments)
    assert _kv(log) == [(29, b"hot", b"v29")]
    names = [n for n in os.listdir(log.dir) if n.endswith(".log")]
    assert len(names) == len(log.segments)
    log.close()
    log = PartitionLog.open(tmp_path / "t-0", cfg)
    assert _kv(log) == [(29, b"hot", b"v29")] and log.log_end_offset == 30
    log.close()


def test_grouping_respects_segment_bytes(tmp_path):
    """Segments merge only while their bytes before the clean fit ``segment.bytes``."""
    cfg = _cfg(internal_segment_bytes=250)
    log = PartitionLog.open(tmp_path / "t-0", cfg)
    for i in range(6):  # six segments of one ~80-byte batch, distinct keys: nothing removed
        log.append(keyed([(b"k%d" % i, b"v")]), leader_epoch=0)
        log.roll()
    sizes = [s.size for s in log.segments[:-1]]
    assert len(set(sizes)) == 1 and 3 * sizes[0] <= 250 < 4 * sizes[0]
    assert compact_committed(log, 10**12).segments_cleaned == 6
    assert [s.base_offset for s in log.segments] == [0, 3, 6]
    assert [o for o, _, _ in _kv(log)] == list(range(6))
    log.close()


def test_raft_internal_offsets_survive_a_merge(tmp_path):
    """A replicated log: Raft-internal batches (no Kafka offset) in merged segments keep the
    offset translation, before and after reopening."""
    cfg = _cfg(cleanup_policy="compact")
    log = PartitionLog.open(tmp_path / "t-0", cfg)
    offset = 0
    for i in range(6):
        log.append_as_follower(build_control_batch(
            base_offset=offset, partition_leader_epoch=1, control_type=CONTROL_LEADER_CHANGE, timestamp_ms=-1,
            key_version=RAFT_INTERNAL_KEY_VERSION))
        log.append_as_follower(build_batch([(b"hot", b"v%d" % i, (), 1_000)], base_offset=offset + 1,
                                           partition_leader_epoch=1))
        offset += 2
        log.roll()
    expected = [(5, b"hot", b"v5")]  # Kafka offsets: raft 11 is kafka 5, the other values go

    def client_view(plog):
        return [(r.offset, r.key, r.value) for r in records(plog.read_for_clients(0, 10**9).to_bytes())]

    before = [log.translator.kafka_offset(o) for o in range(offset + 1)]
    assert client_view(log) == [(i, b"hot", b"v%d" % i) for i in range(6)]
    compact_committed(log, 10**12)
    compact_committed(log, 10**12)
    assert len(log.segments) == 2
    assert [log.translator.kafka_offset(o) for o in range(offset + 1)] == before
    assert client_view(log) == expected
    for crash in (False, True):
        if not crash:
            log.close()
        log = PartitionLog.open(tmp_path / "t-0", cfg)
        assert [log.translator.kafka_offset(o) for o in range(offset + 1)] == before
        assert client_view(log) == expected
    log.close()


def _merging_clean(log: PartitionLog):
    cleaner, stats = LogCleaner(log), CleanStats()
    plan = cleaner.plan(10**12, log.log_end_offset, stats)
    assert plan is not None and len(plan.groups) == 1 and len(plan.groups[0]) > 1
    return cleaner, plan, cleaner.rewrite(plan, 10**12, stats), stats


def test_crash_after_the_swap_files_were_made_completes_the_merge(tmp_path):
    """Crash after ``.cleaned`` -> ``.swap`` with the group's old segments still there: the
    loader deletes the old segments inside the swapped segment's offsets and completes it."""
    cfg = _cfg(cleanup_policy="compact")
    log = PartitionLog.open(tmp_path / "t-0", cfg)
    for batch in ([(b"a", b"a0"), (b"b", b"b1")], [(b"a", b"a2"), (b"c", b"c3")], [(b"c", b"c4"), (b"d", b"d5")]):
        log.append(keyed(batch), leader_epoch=0)
        log.roll()
    log.append(keyed([(b"e", b"e6")]), leader_epoch=0)
    _, _, cleaned, _ = _merging_clean(log)
    [(olds, new)] = cleaned
    assert [s.base_offset for s in olds] == [0, 2, 4]
    new.rename_suffix(CLEANED_SUFFIX, SWAP_SUFFIX)
    del log, olds, new, cleaned  # crash
    log = PartitionLog.open(tmp_path / "t-0", cfg)
    assert [s.base_offset for s in log.segments] == [0, 6]
    assert _kv(log) == [(1, b"b", b"b1"), (2, b"a", b"a2"), (4, b"c", b"c4"), (5, b"d", b"d5"), (6, b"e", b"e6")]
    assert not [n for n in os.listdir(log.dir) if n.endswith((".swap", ".cleaned"))]
    log.close()


def test_crash_before_the_swap_of_an_emptied_group_keeps_the_later_segments(tmp_path):
    """An emptied group's swap file holds no offset: the loader replaces only the first segment
    with it; the group's later segments stay whole (less compacted, every offset in one place)."""
    cfg = _cfg(cleanup_policy="compact", internal_segment_bytes=150)  # two segments per group
    log = PartitionLog.open(tmp_path / "t-0", cfg)
    _hot_segments(log, 4, ts=1_000)
    cleaner, stats = LogCleaner(log), CleanStats()
    plan = cleaner.plan(10**12, log.log_end_offset, stats)
    assert [[s.base_offset for s in g] for g in plan.groups] == [[0, 1], [2, 3]]
    cleaned = cleaner.rewrite(plan, 10**12, stats)
    emptied = cleaned[0][1]
    assert emptied.size == 0
    emptied.rename_suffix(CLEANED_SUFFIX, SWAP_SUFFIX)  # the other copy stays .cleaned
    del log, plan, cleaned, emptied  # crash
    log = PartitionLog.open(tmp_path / "t-0", cfg)
    assert [(s.base_offset, s.size > 0) for s in log.segments] == [(0, False), (1, True), (2, True), (3, True),
                                                                   (4, False)]
    assert _kv(log) == [(1, b"hot", b"v1"), (2, b"hot", b"v2"), (3, b"hot", b"v3")]
    assert not [n for n in os.listdir(log.dir) if n.endswith((".swap", ".cleaned"))]
    compact_committed(log, 10**12)
    assert _kv(log) == [(3, b"hot", b"v3")]
    log.close()


def test_retention_deleting_part_of_a_group_while_cleaning_drops_its_copy(tmp_path):
    cfg = _cfg(cleanup_policy="compact")
    log = PartitionLog.open(tmp_path / "t-0", cfg)
    _hot_segments(log, 3, ts=1_000)
    log.append(keyed([(b"hot", b"last")]), leader_epoch=0)
    cleaner, plan, cleaned, stats = _merging_clean(log)
    assert log.delete_records_before(1) == 1
    assert cleaner.swap(plan, cleaned, stats) is True and stats.segments_cleaned == 0
    assert [s.base_offset for s in log.segments] == [1, 2, 3]
    assert not [n for n in os.listdir(log.dir) if n.endswith((".swap", ".cleaned"))]
    assert _kv(log) == [(1, b"hot", b"v1"), (2, b"hot", b"v2"), (3, b"hot", b"last")]
    log.close()
