"""All partition logs of one data directory (Kafka ``LogManager``, minus its schedulers).

Directory names are ``<topic>-<partition>``; topic names may contain ``-`` and ``.``, so the
name is split at the *last* ``-``. Directories that do not parse (or end in ``-delete`` /
``-stray`` as Kafka's do) are skipped with a warning. Thread-safe: one lock around the map.

The manager owns the data directory: it takes its exclusive lock (``DATA_DIR/.lock``,
:mod:`litemq.storage.dir_lock`) when created, before anything in it is read, and releases it in
:meth:`LogManager.close_all` (Kafka ``LogManager.lockLogDirs``).
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from litemq.storage.config import LogConfig
from litemq.storage.dir_lock import DataDirLock
from litemq.storage.log import PartitionLog

log = logging.getLogger(__name__)


def partition_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


def parse_partition_dir_name(name: str) -> tuple[str, int] | None:
    """``("my-topic", 3)`` from ``my-topic-3``; ``None`` if it is not a partition directory."""
    topic, dash, part = name.rpartition("-")
    if not dash or not topic or not part.isdigit() or name.startswith("."):
        return None
    return topic, int(part)


METADATA_DIR_NAME = "__cluster_metadata"
"""The broker's metadata directory inside the data dir: not a partition log."""


class LogManager:
    """Opens, creates and deletes the :class:`PartitionLog`\\ s under ``data_dir``.

    Creating one creates ``data_dir`` if needed and locks it for this manager's lifetime.
    ``page_cache_retain_bytes`` is given to every log it opens
    (:attr:`PartitionLog.page_cache_retain_bytes`; -1: the OS manages the page cache).

    Raises:
        DataDirInUseError: another broker (process, or manager of this process) holds
            ``data_dir/.lock``; the message names the directory and the holder's pid.
        OSError: ``data_dir`` cannot be created or locked.
    """

    def __init__(self, data_dir: Path, default_config: LogConfig | None = None, *,
                 page_cache_retain_bytes: int = -1) -> None:
        self.data_dir = Path(data_dir)
        self.default_config = default_config or LogConfig()
        self.page_cache_retain_bytes = page_cache_retain_bytes
        self._logs: dict[tuple[str, int], PartitionLog] = {}
        self._lock = threading.Lock()
        self.dir_lock = DataDirLock.acquire(self.data_dir)

    def load_all(self, configs: dict[str, LogConfig] | None = None) -> dict[tuple[str, int], PartitionLog]:
        """Open every partition directory (``configs`` maps topic -> its config, default
        otherwise). Fast after a clean shutdown; scans only past recovery points otherwise."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        configs = configs or {}
        for entry in sorted(self.data_dir.iterdir()):
            if not entry.is_dir() or entry.name == METADATA_DIR_NAME:
                continue
            key = parse_partition_dir_name(entry.name)
            if key is None:
                log.warning("skipping %s: not a <topic>-<partition> directory", entry)
                continue
            with self._lock:
                if key in self._logs:
                    continue
            plog = PartitionLog.open(entry, configs.get(key[0], self.default_config))
            plog.page_cache_retain_bytes = self.page_cache_retain_bytes
            with self._lock:
                self._logs[key] = plog
        with self._lock:
            return dict(self._logs)

    def get(self, topic: str, partition: int) -> PartitionLog | None:
        with self._lock:
            return self._logs.get((topic, partition))

    def create(self, topic: str, partition: int, config: LogConfig | None = None) -> PartitionLog:
        """Open (creating if needed) the log of ``topic``/``partition``; returns the existing
        one if already open."""
        key = (topic, partition)
        with self._lock:
            existing = self._logs.get(key)
            if existing is not None:
                return existing
            plog = PartitionLog.open(self.data_dir / partition_dir_name(topic, partition),
                                     config or self.default_config)
            plog.page_cache_retain_bytes = self.page_cache_retain_bytes
            self._logs[key] = plog
            return plog

    def delete(self, topic: str, partition: int) -> bool:
        """Delete the partition's directory; True if it was open."""
        with self._lock:
            plog = self._logs.pop((topic, partition), None)
        if plog is not None:
            plog.delete()
            return True
        return False

    def all_logs(self) -> dict[tuple[str, int], PartitionLog]:
        with self._lock:
            return dict(self._logs)

    def flush_all(self) -> None:
        for plog in self.all_logs().values():
            plog.flush()

    def close_all(self) -> None:
        """Close every log (flush, checkpoints, clean-shutdown markers), then release the data
        dir's lock (idempotent)."""
        with self._lock:
            logs, self._logs = list(self._logs.values()), {}
        try:
            for plog in logs:
                try:
                    plog.close()
                except Exception as exc:  # noqa: BLE001 - one line per log that cannot close cleanly
                    log.error("cannot close %s cleanly (it recovers at the next start): %r", plog, exc)
        finally:
            self.dir_lock.release()
