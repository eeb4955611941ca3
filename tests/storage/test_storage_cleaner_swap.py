"""The compaction swap against changes made while a clean was running (issue 17).

The cleaner rewrites segments without the log lock (``LogCleaner.plan`` -> ``rewrite`` ->
``swap``); these tests run the three phases one by one on real files and change the log between
``rewrite`` and ``swap`` the way another thread would: truncation, truncation followed by new
appends, a full truncation, retention. The swap must then abandon the clean (or drop the copies
of deleted segments) instead of bringing truncated records back or losing the latest value of a
key, leave no ``.cleaned``/``.swap`` file behind, and the log must reopen the same.
"""

from __future__ import annotations

import os

import pytest

from litemq.storage.cleaner import CleanStats, LogCleaner
from litemq.storage.config import LogConfig
from litemq.storage.log import PartitionLog
from storage_helpers import compact_committed, keyed, records

CFG = LogConfig(internal_segment_bytes=300, cleanup_policy="compact,delete", retention_ms=-1,
                min_cleanable_dirty_ratio=0.0, delete_retention_ms=10**12)
"""Segments of 162 bytes: two do not fit one cleaned segment, each is cleaned into its own."""
NOW_MS = 10**12


def _log(tmp_path) -> PartitionLog:
    """Segments [0..3] [4..7] and the active one from 8; key ``a`` in both old segments."""
    log = PartitionLog.open(tmp_path / "t-0", CFG)
    for batch in ([(b"a", b"a0"), (b"b", b"b1")], [(b"c", b"c2"), (b"b", b"b3")],   # 0-1, 2-3
                  [(b"a", b"a4"), (b"c", b"c5")], [(b"d", b"d6"), (b"b", b"b7")]):  # 4-5, 6-7
        log.append(keyed(batch), leader_epoch=0)
        if batch[0][1] in (b"c2", b"d6"):
            log.roll()
    assert [s.base_offset for s in log.segments] == [0, 4, 8]
    return log


def _kv(log: PartitionLog) -> list[tuple[int, bytes, bytes]]:
    return [(r.offset, r.key, r.value) for r in records(log.read_bytes(log.log_start_offset, 10**9))]


def _leftovers(log: PartitionLog) -> list[str]:
    return sorted(n for n in os.listdir(log.dir) if n.endswith((".cleaned", ".swap")))


def _rewritten(log: PartitionLog):
    """Phases 1 and 2 of a clean of everything (the high watermark at the log end)."""
    cleaner, stats = LogCleaner(log), CleanStats()
    plan = cleaner.plan(NOW_MS, log.log_end_offset, stats)
    assert plan is not None and [s.base_offset for s in plan.segments] == [0, 4]
    cleaned = cleaner.rewrite(plan, NOW_MS, stats)
    assert len(cleaned) == 2 and stats.records_removed == 4  # a0, b1, c2, b3
    return cleaner, plan, cleaned, stats


def _reopened(log: PartitionLog, *, crash: bool) -> PartitionLog:
    if not crash:
        log.close()
    return PartitionLog.open(log.dir, CFG)


@pytest.mark.parametrize("crash", [False, True])
def test_truncation_into_a_segment_being_cleaned_abandons_the_swap(tmp_path, crash):
    """Truncated at 4 while cleaning: the cleaned copy of [0..3] dropped a0 and b1 because a4
    and b7 superseded them; a4 and b7 are gone now, so that copy must not be swapped in."""
    log = _log(tmp_path)
    cleaner, plan, cleaned, stats = _rewritten(log)
    log.truncate_to(4)
    expected = [(0, b"a", b"a0"), (1, b"b", b"b1"), (2, b"c", b"c2"), (3, b"b", b"b3")]
    assert _kv(log) == expected
    swapped = cleaner.swap(plan, cleaned, stats)
    assert _kv(log) == expected and log.log_end_offset == 4
    assert _leftovers(log) == []
    assert swapped is False
    assert stats.segments_cleaned == 0 and stats.skipped == "log truncated while cleaning: abandoned"
    log = _reopened(log, crash=crash)
    assert _kv(log) == expected and log.log_end_offset == 4
    # the next round cleans what is there now
    log.roll()
    assert compact_committed(log, NOW_MS).segments_cleaned == 1
    assert _kv(log) == [(0, b"a", b"a0"), (2, b"c", b"c2"), (3, b"b", b"b3")]
    log.close()


def test_truncation_then_new_appends_do_not_bring_truncated_records_back(tmp_path):
    """Truncated at 6 and refilled with new records (and rolled, so the cut segment is an old
    one again): swapping the copy of [4..7] would put d6/b7 back over the new e6/f7."""
    log = _log(tmp_path)
    cleaner, plan, cleaned, stats = _rewritten(log)
    log.truncate_to(6)
    log.append(keyed([(b"e", b"e6"), (b"f", b"f7")]), leader_epoch=1)
    log.roll()
    expected = [(0, b"a", b"a0"), (1, b"b", b"b1"), (2, b"c", b"c2"), (3, b"b", b"b3"),
                (4, b"a", b"a4"), (5, b"c", b"c5"), (6, b"e", b"e6"), (7, b"f", b"f7")]
    assert _kv(log) == expected
    swapped = cleaner.swap(plan, cleaned, stats)
    assert _kv(log) == expected and _leftovers(log) == []
    assert swapped is False
    log = _reopened(log, crash=True)
    assert _kv(log) == expected
    log.close()


def test_full_truncation_while_cleaning_abandons_the_swap(tmp_path):
    log = _log(tmp_path)
    cleaner, plan, cleaned, stats = _rewritten(log)
    log.truncate_fully_and_start_at(20)
    log.append(keyed([(b"z", b"z20")]), leader_epoch=1)
    swapped = cleaner.swap(plan, cleaned, stats)
    assert _kv(log) == [(20, b"z", b"z20")] and _leftovers(log) == []
    assert swapped is False
    log = _reopened(log, crash=False)
    assert _kv(log) == [(20, b"z", b"z20")]
    log.close()


def test_segment_deleted_by_retention_while_cleaning_drops_only_its_copy(tmp_path):
    """DeleteRecords removed [0..3] meanwhile: its copy is deleted, [4..7]'s is swapped in."""
    log = _log(tmp_path)
    cleaner, plan, cleaned, stats = _rewritten(log)
    assert log.delete_records_before(4) == 4
    assert cleaner.swap(plan, cleaned, stats) is True
    assert stats.segments_cleaned == 1 and _leftovers(log) == []
    expected = [(4, b"a", b"a4"), (5, b"c", b"c5"), (6, b"d", b"d6"), (7, b"b", b"b7")]
    assert _kv(log) == expected
    log = _reopened(log, crash=True)
    assert _kv(log) == expected and log.log_start_offset == 4
    log.close()


def test_clean_without_interference_swaps_every_copy(tmp_path):
    log = _log(tmp_path)
    cleaner, plan, cleaned, stats = _rewritten(log)
    assert cleaner.swap(plan, cleaned, stats) is True
    expected = [(4, b"a", b"a4"), (5, b"c", b"c5"), (6, b"d", b"d6"), (7, b"b", b"b7")]
    assert stats.segments_cleaned == 2 and _kv(log) == expected and _leftovers(log) == []
    log = _reopened(log, crash=True)
    assert _kv(log) == expected
    log.close()


def test_one_clean_at_a_time(tmp_path):
    log = _log(tmp_path)
    with log._cleaner._running:  # a clean of this log is in progress on another thread
        stats = compact_committed(log, NOW_MS)
    assert stats.skipped == "a clean of this log is already running" and stats.segments_cleaned == 0
    assert compact_committed(log, NOW_MS).segments_cleaned == 2
    log.close()
