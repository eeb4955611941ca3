"""The exclusive lock on a data directory: one broker per data dir (Kafka ``FileLock`` on
``<log.dir>/.lock``, taken by ``LogManager.lockLogDirs`` before anything in the directory is read).

``DATA_DIR/.lock`` is locked with ``fcntl.flock(LOCK_EX | LOCK_NB)`` for as long as the broker
runs and holds the holder's pid (decimal, one line) so a refused broker can name it. The kernel
drops the lock when its file is closed - at :meth:`DataDirLock.release` or when the process
ends, even by SIGKILL - so a crash never leaves a stale lock behind; the file itself stays
(removing a lock file races with the next locker). ``flock`` locks belong to one open file:
a second :class:`DataDirLock` on the same directory is refused in the same process too (two
embedded brokers on one data dir).
"""

from __future__ import annotations

import errno
import fcntl
import os
from pathlib import Path

LOCK_FILE_NAME = ".lock"


class DataDirInUseError(OSError):
    """The data directory is locked by another broker (message: the directory and its pid)."""


class DataDirLock:
    """The held lock of one data directory; create with :meth:`acquire`."""

    def __init__(self, data_dir: Path, fd: int) -> None:
        self.data_dir = data_dir
        self.path = data_dir / LOCK_FILE_NAME
        self._fd: int | None = fd

    @classmethod
    def acquire(cls, data_dir: Path) -> DataDirLock:
        """Create ``data_dir`` if needed, lock ``data_dir/.lock`` and write this process's pid.

        Raises:
            DataDirInUseError: another broker (another process, or another broker of this
                process) holds it; the message names the directory and the holder's pid.
            OSError: the directory or the lock file cannot be created.
        """
        data_dir = Path(data_dir)
        data_dir.mkdir(parents=True, exist_ok=True)
        path = data_dir / LOCK_FILE_NAME
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            holder = _read_pid(fd)
            os.close(fd)
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise
            err = DataDirInUseError(f"data dir {data_dir} is in use by another broker "
                                    f"(pid {holder if holder is not None else 'unknown'} holds {path})")
            err.errno = exc.errno
            raise err from None
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        except OSError:
            os.close(fd)
            raise
        return cls(data_dir, fd)

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        """Empty the pid line and unlock (idempotent)."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            os.ftruncate(fd, 0)
        except OSError:
            pass
        finally:
            os.close(fd)  # closing the only descriptor of the open file drops the flock


def _read_pid(fd: int) -> int | None:
    """The pid written in a lock file, None if empty or unreadable (the holder may not have
    written it yet)."""
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None
