"""``log.page.cache.retain.bytes`` (PartitionLog.page_cache_retain_bytes): a flush drops what it
made durable from the OS page cache except the log's last N bytes; the data stays readable and
the default (-1) leaves the page cache to the OS. Real files on the test's disk; residency is
read with mincore(2)."""

from __future__ import annotations

from litemq.storage.config import LogConfig
from litemq.storage.manager import LogManager
from litemq.testing.page_cache import resident_bytes
from storage_helpers import batch, offsets

MIB = 1024 * 1024
BATCH_RECORDS = 64
VALUE_BYTES = 1024  # ~66 KiB batches
SLACK_BYTES = 2 * MIB
"""Beyond the kept window: the cache folio holding its first byte (at most 2 MiB) may stay."""


def _fill(plog, mib: int) -> int:
    """Append about ``mib`` MiB of batches; returns the records appended."""
    n = 0
    while plog.size_bytes < mib * MIB:
        plog.append(batch(BATCH_RECORDS, value_size=VALUE_BYTES), leader_epoch=0)
        n += BATCH_RECORDS
    return n


def _resident(plog) -> int:
    return sum(resident_bytes(seg.log_path) for seg in plog.segments)


def test_flush_keeps_only_the_retained_tail_cached_and_everything_readable(tmp_path):
    mgr = LogManager(tmp_path, LogConfig(), page_cache_retain_bytes=MIB)
    plog = mgr.create("t", 0)
    assert plog.page_cache_retain_bytes == MIB
    n = _fill(plog, 8)
    assert _resident(plog) > 6 * MIB  # written, not yet flushed: the kernel keeps dirty pages
    plog.flush()
    assert MIB <= _resident(plog) <= MIB + SLACK_BYTES
    # more appends, another flush: the window moves with the log end
    n += _fill(plog, 16)
    plog.flush()
    assert MIB <= _resident(plog) <= MIB + SLACK_BYTES
    assert offsets(plog.read_bytes(0, 10**9)) == list(range(n))
    mgr.close_all()


def test_window_spans_segments_and_follows_truncation(tmp_path):
    cfg = LogConfig(segment_bytes=2 * MIB)
    mgr = LogManager(tmp_path, cfg, page_cache_retain_bytes=3 * MIB)
    plog = mgr.create("t", 0)
    _fill(plog, 9)
    plog.flush()
    assert len(plog.segments) >= 4
    resident = [resident_bytes(s.log_path) for s in plog.segments]
    assert sum(resident) <= 3 * MIB + SLACK_BYTES
    assert resident[0] == 0 and resident[-1] > 0  # the oldest dropped, the tail kept
    # truncate into the dropped part of the active segment, append again: the new bytes are
    # dropped by the next flush too (the segment's drop mark moved back with the truncation)
    active = plog.segments[-1]
    cut = active.base_offset + 2 * BATCH_RECORDS
    plog.truncate_to(cut)
    assert active.cache_dropped_bytes <= active.size
    _fill(plog, 20)
    plog.flush()
    assert _resident(plog) <= 3 * MIB + SLACK_BYTES
    assert offsets(plog.read_bytes(0, 10**9)) == list(range(plog.log_end_offset))
    mgr.close_all()


def test_default_leaves_the_page_cache_to_the_os(tmp_path):
    mgr = LogManager(tmp_path, LogConfig())
    plog = mgr.create("t", 0)
    assert plog.page_cache_retain_bytes == -1
    _fill(plog, 8)
    plog.flush()
    assert _resident(plog) >= 7 * MIB  # freshly written, nothing asked the kernel to drop it
    mgr.close_all()


def test_reopened_logs_get_the_setting(tmp_path):
    mgr = LogManager(tmp_path, LogConfig())
    _fill(mgr.create("t", 0), 1)
    mgr.close_all()
    mgr = LogManager(tmp_path, LogConfig(), page_cache_retain_bytes=0)
    (plog,) = mgr.load_all().values()
    assert plog.page_cache_retain_bytes == 0
    _fill(plog, 4)
    plog.flush()
    assert _resident(plog) <= SLACK_BYTES
    mgr.close_all()


def test_many_small_flushes_do_not_leave_pages_behind(tmp_path):
    """One batch per flush, as a produce at a low rate makes: every drop starts at the cache
    folio boundary below the last one's end, so no folio straddling it stays cached."""
    mgr = LogManager(tmp_path, LogConfig(), page_cache_retain_bytes=MIB)
    plog = mgr.create("t", 0)
    for _ in range(600):  # ~40 MiB
        plog.append(batch(BATCH_RECORDS, value_size=VALUE_BYTES), leader_epoch=0)
        plog.flush()
    assert plog.size_bytes > 30 * MIB
    assert _resident(plog) <= MIB + SLACK_BYTES
    mgr.close_all()
