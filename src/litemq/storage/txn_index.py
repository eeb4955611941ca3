"""The aborted-transaction index of one segment: ``<20-digit base offset>.txnindex``.

Source: Kafka ``TransactionIndex`` / ``AbortedTxn`` (storage module, KIP-98). One entry per
transaction aborted by a marker stored in the segment, in marker (``last_offset``) order.
Entry layout, 34 bytes big-endian (Kafka's)::

    version int16 (0), producer_id int64, first_offset int64, last_offset int64,
    last_stable_offset int64

``first_offset`` is the offset of the transaction's first batch, ``last_offset`` the offset of
its ABORT marker, ``last_stable_offset`` the partition's LSO right after the marker was applied
(Kafka ``ProducerStateManager.lastStableOffset(CompletedTxn)``), which lets a search stop early.

The file is created on the first append only (most segments never see an abort, Kafka creates
it lazily too); entries are read into memory on first use. Appends are rare (one per aborted
transaction), so each append/sync opens the file briefly instead of keeping a descriptor.
Not thread-safe by itself: :class:`~litemq.storage.log.PartitionLog` serialises calls.
"""

from __future__ import annotations

import logging
import os
import struct
from pathlib import Path
from typing import NamedTuple

from litemq.protocol.errors import KafkaStorageError
from litemq.protocol.records import BatchHeader

log = logging.getLogger(__name__)

TXN_INDEX_SUFFIX = ".txnindex"
TXN_INDEX_VERSION = 0
_ENTRY = struct.Struct(">hqqqq")
TXN_INDEX_ENTRY_BYTES = _ENTRY.size  # 34


class AbortedTxn(NamedTuple):
    """One aborted transaction (Kafka ``AbortedTxn``); offsets inclusive."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


class TransactionIndex:
    """Kafka ``TransactionIndex`` of the segment with base offset ``base_offset`` (see module doc)."""

    def __init__(self, path: Path, base_offset: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self._entries: list[AbortedTxn] | None = None  # None = not read yet
        self._dirty = False  # appended/truncated since the last sync

    # ------------------------------------------------------------------ loading
    @staticmethod
    def sanity_check_file(path: Path) -> str | None:
        """Cheap check of a ``.txnindex`` on disk (no read): a problem description or None.
        A missing file is fine (no abort in the segment)."""
        try:
            size = os.stat(path).st_size
        except FileNotFoundError:
            return None
        if size % TXN_INDEX_ENTRY_BYTES:
            return f"size {size} is not a multiple of {TXN_INDEX_ENTRY_BYTES}"
        return None

    def _load(self) -> list[AbortedTxn]:
        entries = self._entries
        if entries is not None:
            return entries
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            data = b""
        except OSError as exc:
            raise KafkaStorageError(f"cannot read {self.path}: {exc}") from exc
        entries = []
        problem = None
        whole = len(data) - len(data) % TXN_INDEX_ENTRY_BYTES
        if whole != len(data):
            problem = f"size {len(data)} is not a multiple of {TXN_INDEX_ENTRY_BYTES}"
        last = -1
        for version, pid, first, last_offset, lso in _ENTRY.iter_unpack(memoryview(data)[:whole]):
            if version != TXN_INDEX_VERSION or last_offset <= last or first > last_offset:
                problem = f"bad entry #{len(entries)} (version {version}, offsets {first}..{last_offset})"
                break
            entries.append(AbortedTxn(pid, first, last_offset, lso))
            last = last_offset
        self._entries = entries
        if problem is not None:
            log.warning("transaction index %s: %s: keeping the %d valid entries before it",
                        self.path, problem, len(entries))
            self._truncate_file(len(entries))
        return entries

    @property
    def entries(self) -> list[AbortedTxn]:
        """All entries, in ``last_offset`` order (a copy)."""
        return list(self._load())

    @property
    def is_empty(self) -> bool:
        return not self._load()

    @property
    def exists(self) -> bool:
        """Whether the file exists on disk."""
        return self.path.exists()

    # ------------------------------------------------------------------ writes
    def append(self, entry: AbortedTxn) -> None:
        """Append one entry (written to the file at once; durable after :meth:`flush` with sync).

        Raises ValueError if ``entry.last_offset`` is not greater than the last entry's
        (Kafka: "last offset of appended log entry must increase sequentially"),
        :class:`KafkaStorageError` if the write fails (the entry is not recorded)."""
        entries = self._load()
        if entries and entry.last_offset <= entries[-1].last_offset:
            raise ValueError(f"{self.path}: last offset {entry.last_offset} of the appended entry is not "
                             f"above {entries[-1].last_offset}")
        data = _ENTRY.pack(TXN_INDEX_VERSION, *entry)
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o644)
            try:
                os.pwrite(fd, data, len(entries) * TXN_INDEX_ENTRY_BYTES)
            finally:
                os.close(fd)
        except OSError as exc:
            raise KafkaStorageError(f"cannot append to {self.path}: {exc}") from exc
        entries.append(entry)
        self._dirty = True

    def create_empty(self) -> None:
        """Create the file with no entry if it is missing (a compacted copy of a segment whose
        entries all went: its empty file replaces the old one in the swap, which a missing file
        would leave behind). Durable after :meth:`flush` with sync.

        Raises :class:`KafkaStorageError` if the file cannot be created."""
        try:
            os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o644))
        except OSError as exc:
            raise KafkaStorageError(f"cannot create {self.path}: {exc}") from exc
        self._load()
        self._dirty = True

    def _truncate_file(self, n: int) -> None:
        try:
            os.truncate(self.path, n * TXN_INDEX_ENTRY_BYTES)
        except FileNotFoundError:
            return
        except OSError as exc:
            raise KafkaStorageError(f"cannot truncate {self.path}: {exc}") from exc
        self._dirty = True

    def truncate_to(self, offset: int) -> None:
        """Drop every entry with ``last_offset >= offset`` (Kafka ``TransactionIndex.truncateTo``)."""
        entries = self._load()
        n = len(entries)
        while n and entries[n - 1].last_offset >= offset:
            n -= 1
        if n != len(entries):
            del entries[n:]
            self._truncate_file(n)

    def reset(self) -> None:
        """Drop every entry (segment recovery rebuilds them; Kafka ``reset``). The file, if any,
        is truncated to zero bytes, not deleted."""
        self._entries = []
        self._truncate_file(0)

    def flush(self, *, sync: bool) -> None:
        """Entries are written on append; with ``sync`` fsync the file if it changed."""
        if not sync or not self._dirty:
            return
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            self._dirty = False
            return
        try:
            os.fsync(fd)
        except OSError as exc:
            raise KafkaStorageError(f"cannot fsync {self.path}: {exc}") from exc
        finally:
            os.close(fd)
        self._dirty = False

    def close(self) -> None:
        """Nothing stays open between calls; drops the in-memory entries."""
        self._entries = None

    def delete(self) -> None:
        """Unlink the file (if any)."""
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
        self._entries = []

    def rename(self, new_path: Path) -> None:
        """Rename the file (if it exists) and follow it."""
        try:
            os.replace(self.path, new_path)
        except FileNotFoundError:
            pass
        self.path = new_path

    # ------------------------------------------------------------------ search
    def collect(self, fetch_offset: int, upper_bound_offset: int) -> tuple[list[AbortedTxn], bool]:
        """Entries with ``last_offset >= fetch_offset`` and ``first_offset < upper_bound_offset``
        (Kafka ``collectAbortedTxns``). ``is_complete`` is True when an entry's
        ``last_stable_offset >= upper_bound_offset`` was met: no later segment can hold a
        matching entry."""
        out = []
        for e in self._load():
            if e.last_offset >= fetch_offset and e.first_offset < upper_bound_offset:
                out.append(e)
            if e.last_stable_offset >= upper_bound_offset:
                return out, True
        return out, False


class AbortedTxnTracker:
    """Which data batches belong to aborted transactions, fed every batch in offset order
    (Kafka ``CleanedTransactionMetadata``; the consumer's ``consumeAbortedTransactionsUpTo``):
    each aborted transaction starts once, at its first offset, and its producer's next control
    batch (the ABORT marker) ends it, so a later transaction of that producer is not aborted.
    ``aborted``: ``(producer_id, first_offset)`` sorted by first offset
    (:meth:`PartitionLog.collect_aborted_transactions`), in the offsets of the batches fed.
    Used by the log cleaner and by read_committed share groups."""

    def __init__(self, aborted: list[tuple[int, int]]) -> None:
        self.aborted = aborted
        self.next = 0
        self.aborting: set[int] = set()  # producer ids inside an aborted transaction

    def is_aborted_data(self, h: BatchHeader) -> bool:
        aborted = self.aborted
        while self.next < len(aborted) and aborted[self.next][1] <= h.base_offset:
            self.aborting.add(aborted[self.next][0])
            self.next += 1
        pid = h.producer_id
        if pid < 0 or pid not in self.aborting:
            return False
        if h.is_control:  # the producer's next control batch is its ABORT marker
            self.aborting.discard(pid)
            return False
        return h.is_transactional
