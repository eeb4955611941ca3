"""One log segment: a ``.log`` file of record batches plus its ``.index``, ``.timeindex`` and
(only once a transaction aborted in it) ``.txnindex``.

Source: Kafka ``LogSegment`` (storage module). Files are named by the segment's base offset in
20 digits: ``00000000000000000042.log``. Batches are stored exactly as appended (headers
included, offsets already assigned). Positions are byte offsets into the ``.log`` file.

Not thread-safe by itself: :class:`litemq.storage.log.PartitionLog` holds its lock around every
call except :meth:`sync` (fsync may run concurrently with appends).

The ``.log`` file object (``file``, unbuffered, ``r+b``) is the one handed out in
:class:`~litemq.protocol.regions.FileRegion`\\ s. It is never closed explicitly: a deleted
segment is unlinked and forgotten, and the file closes when the last region referencing it is
dropped (garbage collection), so an in-flight sendfile never sees a closed descriptor.
"""

from __future__ import annotations

import errno
import logging
import os
import random
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from litemq.limits import MAX_REQUEST_FRAME_BYTES, PAGE_CACHE_FOLIO_MAX_BYTES
from litemq.protocol.errors import CorruptRecordError, KafkaStorageError
from litemq.protocol.records import (
    BATCH_HEADER_BYTES,
    BatchHeader,
    iter_batches,
    read_batch_header,
    verify_crc,
)
from litemq.storage.config import LogConfig
from litemq.storage.index import CorruptIndexError, OffsetIndex, TimeIndex
from litemq.storage.txn_index import TXN_INDEX_SUFFIX, TransactionIndex

log = logging.getLogger(__name__)

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
INT32_MAX = 2**31 - 1

_SCAN_CHUNK_BYTES = 8192
"""Bytes read per pread when walking batch headers (large batches cost one read each)."""
_RECOVERY_CHUNK_BYTES = 4 * 1024 * 1024
"""Bytes read per pread when validating batches during recovery."""


def segment_name(base_offset: int) -> str:
    """``00000000000000000042`` for base offset 42 (Kafka ``LogFileUtils.filenamePrefixFromOffset``)."""
    return f"{base_offset:020d}"


def parse_segment_name(name: str) -> int | None:
    """Base offset from a ``<20 digits>.log`` name, else ``None``."""
    stem, dot, _ = name.partition(".")
    if not dot or len(stem) != 20 or not stem.isdigit():
        return None
    return int(stem)


def _storage_error(what: str, path: Path, exc: OSError) -> KafkaStorageError:
    detail = "disk full" if exc.errno == errno.ENOSPC else (os.strerror(exc.errno) if exc.errno else str(exc))
    return KafkaStorageError(f"{what} {path}: {detail}")


class LogSegment:
    """A segment of a partition log (Kafka ``LogSegment``).

    Attributes: ``base_offset`` (offset of the first batch it may hold), ``size`` (bytes of whole
    batches in the file), ``next_offset`` (one past the last offset, tracked for the active
    segment and after recovery; ``None`` when not known yet), ``max_timestamp`` /
    ``offset_of_max_timestamp`` (largest batch max timestamp and the last offset of that batch;
    -1 when none).
    """

    def __init__(self, directory: Path, base_offset: int, config: LogConfig, *, suffix: str = "",
                 create: bool = False) -> None:
        self.dir = directory
        self.base_offset = base_offset
        self.config = config
        name = segment_name(base_offset)
        self.log_path = directory / (name + LOG_SUFFIX + suffix)
        flags = os.O_RDWR | (os.O_CREAT | os.O_EXCL if create else 0)
        try:
            fd = os.open(self.log_path, flags, 0o644)
        except OSError as exc:
            raise _storage_error("cannot open segment", self.log_path, exc) from exc
        self.file = open(fd, "r+b", buffering=0)  # noqa: SIM115 - lifetime managed by GC (see module doc)
        self.fd = fd
        self.size = os.fstat(fd).st_size
        self.offset_index = OffsetIndex(directory / (name + INDEX_SUFFIX + suffix), base_offset,
                                        config.segment_index_bytes)
        self.time_index = TimeIndex(directory / (name + TIME_INDEX_SUFFIX + suffix), base_offset,
                                    config.segment_index_bytes)
        self.txn_index = TransactionIndex(directory / (name + TXN_INDEX_SUFFIX + suffix), base_offset)
        if create:
            self.txn_index.delete()  # a stale one left by a crash mid-deletion of an older segment
        self._indexes_loaded = create
        self.next_offset: int | None = base_offset if create else None
        self.max_timestamp = -1
        self.offset_of_max_timestamp = -1
        self.rolling_timestamp: int | None = None  # first batch's max timestamp (segment.ms)
        self.created_ms = int(time.time() * 1000)
        self.roll_jitter_ms = config.random_segment_jitter_ms(random.randrange)
        """This segment rolls this much before ``max_segment_ms`` (``segment.jitter.ms``)."""
        self.bytes_since_last_index_entry = 0
        self.index_synced = create  # indexes durable up to date on disk
        self.cache_dropped_bytes = 0
        """Bytes at the start of the ``.log`` file already dropped from the OS page cache
        (:meth:`drop_cache_before`)."""

    # ------------------------------------------------------------------ create/delete
    @classmethod
    def create(cls, directory: Path, base_offset: int, config: LogConfig) -> LogSegment:
        """Create an empty segment (fails if the ``.log`` file exists)."""
        seg = cls(directory, base_offset, config, create=True)
        return seg

    def delete_files(self) -> None:
        """Unlink the segment's files. The file object is left to the GC (regions may hold it)."""
        try:
            os.unlink(self.log_path)
        except FileNotFoundError:
            pass
        self.offset_index.delete_file()
        self.time_index.delete_file()
        self.txn_index.delete()

    def rename_suffix(self, old: str, new: str) -> None:
        """Rename all files (``.txnindex`` if present) from ``<name><ext><old>`` to
        ``<name><ext><new>``: the indexes first, the ``.log`` last, so the ``.log``'s name says
        whether the whole segment was renamed (what the compaction swap relies on)."""
        def renamed(p: Path) -> Path:
            name = p.name[: len(p.name) - len(old)] if old else p.name
            return p.with_name(name + new)
        self.offset_index.rename(renamed(self.offset_index.path))
        self.time_index.rename(renamed(self.time_index.path))
        self.txn_index.rename(renamed(self.txn_index.path))
        target = renamed(self.log_path)
        os.replace(self.log_path, target)
        self.log_path = target

    # ------------------------------------------------------------------ indexes
    def ensure_indexes(self) -> None:
        """Load and sanity-check indexes (lazily, Kafka loads them lazily too); rebuild if bad."""
        if self._indexes_loaded:
            return
        try:
            have_offset, have_time = self.offset_index.path.exists(), self.time_index.path.exists()
            if self.size and not (have_offset and have_time):
                raise CorruptIndexError(f"index files of {self.log_path} missing")
            if have_offset:
                self.offset_index.load(self.size)
            if have_time:
                self.time_index.load(INT32_MAX)
        except (CorruptIndexError, OSError) as exc:
            log.warning("rebuilding index of segment %s: %s", self.log_path, exc)
            self._indexes_loaded = True
            self.recover()
            return
        self._indexes_loaded = True
        self.max_timestamp, self.offset_of_max_timestamp = self._read_largest_timestamp()

    def _read_largest_timestamp(self) -> tuple[int, int]:
        """``(max_timestamp, offset_of_max_timestamp)`` of the segment from its indexes and the
        batches past the last offset-index entry (Kafka ``LogSegment.readLargestTimestamp``);
        ``(-1, -1)`` when no batch has a timestamp.

        The time index's last entry alone is enough after a clean close (:meth:`append_max_timestamp_entry`),
        but not for an index written without it (a segment closed by an older version, rolled
        after such a restart, or truncated): whenever an offset-index entry is added, the time
        index covers the largest timestamp up to that batch, so only the batches from the last
        offset-index entry's position on are read (about ``index.interval.bytes`` of headers)."""
        ts, off = self.time_index.last_entry
        if ts < 0:
            off = -1
        pos = self.offset_index.positions[-1] if len(self.offset_index) else 0
        for _, h in self.iter_headers(pos):
            if h.max_timestamp > ts:
                ts, off = h.max_timestamp, h.base_offset + h.last_offset_delta
        return ts, off

    @property
    def index_full(self) -> bool:
        self.ensure_indexes()
        return self.offset_index.is_full or self.time_index.is_full

    def flush_indexes(self, *, sync: bool) -> None:
        """Write pending index entries to the index files (fsync them if ``sync``)."""
        self.txn_index.flush(sync=sync)
        if not self._indexes_loaded:
            return
        self.offset_index.flush(sync=sync)
        self.time_index.flush(sync=sync)
        if sync:
            self.index_synced = True

    def on_become_inactive(self) -> None:
        """Segment rolled: record the segment's largest timestamp as the last time-index entry
        (Kafka ``onBecomeInactiveSegment``) so it is known without a scan after a restart."""
        self.append_max_timestamp_entry()

    def append_max_timestamp_entry(self) -> None:
        """Append ``(max_timestamp, offset_of_max_timestamp)`` to the time index if it is newer
        than the last entry, whether or not the index is full (Kafka
        ``timeIndex.maybeAppend(maxTimestampSoFar, shallowOffsetOfMaxTimestampSoFar, true)``, done
        by ``LogSegment.onBecomeInactiveSegment``, ``close`` and ``recover``): the index's last
        entry then holds the segment's largest timestamp, which a reopened log reads back
        (ListOffsets by timestamp and MAX_TIMESTAMP, ``retention.ms``,
        ``min.compaction.lag.ms``). In memory until :meth:`flush_indexes`."""
        self.ensure_indexes()
        if self.max_timestamp >= 0:
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)

    # ------------------------------------------------------------------ append
    def append(self, data, last_offset: int, max_timestamp: int, offset_of_max_timestamp: int) -> int:
        """Write ``data`` (whole batches, offsets assigned) at the end: one ``pwrite`` loop.

        Returns the file position written at. On any ``OSError`` (ENOSPC, EIO) the file is
        truncated back to its old size and :class:`KafkaStorageError` is raised; the segment is
        unchanged.
        """
        self.ensure_indexes()
        pos = self.size
        view = memoryview(data)
        total = len(view)
        try:
            written = 0
            while written < total:
                written += os.pwrite(self.fd, view[written:], pos + written)
        except OSError as exc:
            try:
                os.ftruncate(self.fd, pos)
            except OSError:
                log.exception("cannot truncate %s back to %d after a failed write", self.log_path, pos)
            raise _storage_error("cannot append to", self.log_path, exc) from exc
        if self.rolling_timestamp is None and pos == 0:
            self.rolling_timestamp = max_timestamp
        if max_timestamp > self.max_timestamp:
            self.max_timestamp = max_timestamp
            self.offset_of_max_timestamp = offset_of_max_timestamp
        if self.bytes_since_last_index_entry > self.config.index_interval_bytes:
            self.offset_index.append(last_offset, pos)
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
            self.bytes_since_last_index_entry = 0
        self.bytes_since_last_index_entry += total
        self.size = pos + total
        self.next_offset = last_offset + 1
        self.index_synced = False
        return pos

    def sync(self, *, metadata: bool = False) -> None:
        """fdatasync the ``.log`` file (safe to call concurrently with appends); ``metadata``:
        fsync, so the modification time set by :meth:`set_last_modified` is durable too."""
        try:
            if metadata:
                os.fsync(self.fd)
            else:
                os.fdatasync(self.fd)
        except OSError as exc:
            raise _storage_error("cannot fsync", self.log_path, exc) from exc

    def set_last_modified(self, mtime_ns: int) -> None:
        """Set the ``.log`` file's modification time (ns since the epoch; Kafka
        ``LogSegment.setLastModified``); durable after :meth:`sync` with ``metadata``. Raises
        :class:`KafkaStorageError`."""
        try:
            os.utime(self.fd, ns=(mtime_ns, mtime_ns))
        except OSError as exc:
            raise _storage_error("cannot set the modification time of", self.log_path, exc) from exc

    def drop_cache_before(self, position: int) -> None:
        """Drop ``[cache_dropped_bytes, position)`` of the ``.log`` file from the OS page cache
        (``posix_fadvise(POSIX_FADV_DONTNEED)``). Only for bytes already fsynced: the kernel keeps
        dirty pages. A hint: failure (a closed or deleted file) is logged at debug level and
        ignored. Called by the flushing thread; ``position`` in bytes."""
        start = self.cache_dropped_bytes
        if position <= start:
            return
        # The kernel drops only cache folios (up to 2 MiB) that lie wholly in the range: start at
        # the folio boundary below the last call's end, or the folio it ended in stays cached.
        start -= start % PAGE_CACHE_FOLIO_MAX_BYTES
        try:
            os.posix_fadvise(self.fd, start, position - start, os.POSIX_FADV_DONTNEED)
        except (OSError, ValueError) as exc:  # ValueError: the fd was closed meanwhile
            log.debug("cannot drop %s from the page cache: %s", self.log_path, exc)
            return
        self.cache_dropped_bytes = position

    def should_roll(self, add_bytes: int, max_timestamp: int, last_offset: int, now_ms: int) -> bool:
        """Kafka ``LogSegment.shouldRoll``: size, age (``segment.ms``, or ``max.compaction.lag.ms``
        on a compacted topic, less this segment's ``segment.jitter.ms`` draw), full index, offset
        overflow."""
        if self.size == 0:
            return last_offset - self.base_offset > INT32_MAX
        if self.size > self.config.segment_size_bytes - add_bytes:
            return True
        if self.rolling_timestamp is not None and self.rolling_timestamp >= 0:
            waited = max_timestamp - self.rolling_timestamp
        else:
            waited = now_ms - self.created_ms
        if waited > self.config.max_segment_ms - self.roll_jitter_ms:
            return True
        if last_offset - self.base_offset > INT32_MAX:
            return True
        # Index capacity: only the append that adds an entry can fill it.
        return self.bytes_since_last_index_entry > self.config.index_interval_bytes and self.index_full

    # ------------------------------------------------------------------ reading
    def iter_headers(self, start: int = 0, end: int | None = None) -> Iterator[tuple[int, BatchHeader]]:
        """Yield ``(position, header)`` of batches in ``[start, end)`` (trusted data: no CRC).

        Reads ``_SCAN_CHUNK_BYTES`` per pread, one pread per batch larger than that.
        Raises :class:`CorruptRecordError` if a header is bad.
        """
        end = self.size if end is None else min(end, self.size)
        pos = start
        fd = self.fd
        while pos < end:
            chunk = os.pread(fd, min(_SCAN_CHUNK_BYTES, end - pos), pos)
            n = len(chunk)
            if n < BATCH_HEADER_BYTES:
                raise CorruptRecordError(f"{self.log_path}: partial batch header at {pos}")
            off = 0
            while off + BATCH_HEADER_BYTES <= n:
                h = read_batch_header(chunk, off)
                yield pos + off, h
                off += h.batch_length + 12
            pos += off

    def find(self, offset: int, start_position: int = 0) -> tuple[int, BatchHeader] | None:
        """The first batch whose last offset >= ``offset`` as ``(position, header)`` or ``None``
        (Kafka ``translateOffset``): the batch containing ``offset`` unless compaction removed it."""
        self.ensure_indexes()
        _, pos = self.offset_index.lookup(offset)
        for p, h in self.iter_headers(max(pos, start_position)):
            if h.base_offset + h.last_offset_delta >= offset:
                return p, h
        return None

    def batch_boundary_at_or_before(self, limit: int, start: int) -> int:
        """Largest batch boundary ``b`` with ``start <= b <= limit`` (``start`` is a boundary)."""
        if limit >= self.size:
            return self.size
        self.ensure_indexes()
        pos = max(start, self.offset_index.floor_position(limit))
        for p, h in self.iter_headers(pos):
            if p + h.batch_length + 12 > limit:
                return p
        return self.size  # pragma: no cover - limit < size guarantees a return above

    def read_next_offset(self) -> int:
        """Offset after the last batch (scan from the last index entry); cached in ``next_offset``."""
        if self.next_offset is None:
            self.ensure_indexes()
            if self.next_offset is None:
                nxt = self.base_offset
                pos = self.offset_index.positions[-1] if len(self.offset_index) else 0
                last_pos = -1
                for p, h in self.iter_headers(pos):
                    nxt = h.base_offset + h.last_offset_delta + 1
                    last_pos = p
                self.next_offset = nxt
                if last_pos >= 0:
                    self.bytes_since_last_index_entry = self.size - (
                        self.offset_index.positions[-1] if len(self.offset_index) else 0)
        return self.next_offset

    def find_offset_by_timestamp(self, timestamp: int, start_offset: int) -> tuple[int, BatchHeader] | None:
        """The first batch at/after ``start_offset`` with ``max_timestamp >= timestamp``."""
        self.ensure_indexes()
        _, ts_offset = self.time_index.lookup(timestamp - 1)
        _, pos = self.offset_index.lookup(max(ts_offset, start_offset))
        for p, h in self.iter_headers(pos):
            if h.max_timestamp >= timestamp and h.base_offset + h.last_offset_delta >= start_offset:
                return p, h
        return None

    # ------------------------------------------------------------------ truncation / recovery
    def truncate_to(self, offset: int) -> int:
        """Drop every batch whose last offset >= ``offset`` and the aborted-transaction entries
        whose marker is among them; returns bytes removed (Kafka ``LogSegment.truncateTo``)."""
        self.ensure_indexes()
        self.txn_index.truncate_to(offset)
        found = self.find(offset)
        if found is None:
            return 0
        pos = found[0]
        removed = self.size - pos
        try:
            os.ftruncate(self.fd, pos)
        except OSError as exc:
            raise _storage_error("cannot truncate", self.log_path, exc) from exc
        self.size = pos
        self.cache_dropped_bytes = min(self.cache_dropped_bytes, pos)
        self.offset_index.truncate_to_position(pos)
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        self.max_timestamp, self.offset_of_max_timestamp = self._read_largest_timestamp()
        self.next_offset = offset
        self.bytes_since_last_index_entry = pos - self.offset_index.floor_position(pos) if pos else 0
        if pos == 0:
            self.rolling_timestamp = None
        self.index_synced = False
        return removed

    def recover(self, on_batch: Callable[[BatchHeader, memoryview], None] | None = None) -> int:
        """Validate every batch (length, magic, CRC, increasing offsets), truncate the file at
        the first bad or partial batch, rebuild both indexes (Kafka ``LogSegment.recover``).

        ``on_batch(header, batch_bytes)`` is called with each valid batch in order
        (``batch_bytes``: a memoryview of the whole batch, valid during the call only). The
        ``.txnindex`` is left alone: the owning log resets and rebuilds it from producer state
        (:meth:`LogLoader._recover_from`). Returns the bytes truncated.
        """
        self.offset_index.reset()
        self.time_index.reset()
        self._indexes_loaded = True
        self.max_timestamp = self.offset_of_max_timestamp = -1
        self.rolling_timestamp = None
        self.bytes_since_last_index_entry = 0
        self.next_offset = self.base_offset
        file_size = os.fstat(self.fd).st_size
        max_batch = max(self.config.max_message_bytes, MAX_REQUEST_FRAME_BYTES)
        pos = 0
        bad = "partial batch"
        while pos < file_size:
            remaining = file_size - pos
            chunk = os.pread(self.fd, min(_RECOVERY_CHUNK_BYTES, remaining), pos)
            try:
                h = read_batch_header(chunk, 0)
            except CorruptRecordError as exc:
                bad = str(exc)
                break
            if h.size > remaining or h.size > max_batch:
                bad = f"batch of {h.size} bytes with {remaining} bytes left"
                break
            if h.size > len(chunk):  # one batch larger than the chunk: read exactly it
                chunk = os.pread(self.fd, h.size, pos)
            consumed = 0
            view = memoryview(chunk)
            try:
                for p, h in iter_batches(chunk, allow_trailing_partial=True):
                    problem = self._recover_batch(chunk, p, h, pos + p)
                    if problem:
                        bad = problem
                        break
                    if on_batch is not None:
                        on_batch(h, view[p:p + h.size])
                    consumed = p + h.size
                else:
                    problem = None
            except CorruptRecordError as exc:
                problem = bad = str(exc)
            pos += consumed
            if problem:
                break
        # as a cleanly closed segment's, the time index ends with the largest timestamp (Kafka
        # LogSegment.recover)
        if self.max_timestamp >= 0:
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
        truncated = file_size - pos
        if truncated:
            log.warning("segment %s: truncating %d bytes at position %d (next offset %d): %s",
                        self.log_path, truncated, pos, self.next_offset, bad)
            try:
                os.ftruncate(self.fd, pos)
            except OSError as exc:
                raise _storage_error("cannot truncate", self.log_path, exc) from exc
        self.size = pos
        self.index_synced = False
        return truncated

    def _recover_batch(self, buf, p: int, h: BatchHeader, position: int) -> str | None:
        """Check one batch during recovery and index it; returns a problem description or None."""
        if not verify_crc(buf, p, h):
            return f"CRC mismatch at position {position}"
        last = h.base_offset + h.last_offset_delta
        if h.base_offset < self.next_offset or last - self.base_offset > INT32_MAX:
            return f"offset {h.base_offset} out of order at position {position} (expected >= {self.next_offset})"
        if self.rolling_timestamp is None:
            self.rolling_timestamp = h.max_timestamp
        if h.max_timestamp > self.max_timestamp:
            self.max_timestamp, self.offset_of_max_timestamp = h.max_timestamp, last
        if self.bytes_since_last_index_entry > self.config.index_interval_bytes:
            self.offset_index.append(last, position)
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
            self.bytes_since_last_index_entry = 0
        self.bytes_since_last_index_entry += h.size
        self.next_offset = last + 1
        return None

    def __repr__(self) -> str:
        return f"LogSegment(base={self.base_offset}, size={self.size}, next={self.next_offset})"
