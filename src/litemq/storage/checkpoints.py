"""Small durable files: Kafka-format checkpoint files and atomic replace.

Format (Kafka ``CheckpointFile``): text, line 1 the version (``0``), line 2 the entry count,
then one entry per line with space-separated fields. Written to ``<name>.tmp``, fsynced,
renamed over ``<name>``, then the directory is fsynced, so a crash leaves the old or the new
file, never a mix.

Files per partition directory (LiteMQ keeps Kafka's per-log-dir checkpoints per partition):

- ``leader-epoch-checkpoint``: entries ``<epoch> <start_offset>`` (exactly Kafka's file).
- ``log-start-offset-checkpoint``: one entry ``<offset>``.
- ``recovery-point-offset-checkpoint``: one entry ``<offset>``.
- ``.kafka_cleanshutdown``: empty marker, present only between a clean close and the next open.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

log = logging.getLogger(__name__)

CHECKPOINT_VERSION = 0


def fsync_dir(path: Path) -> None:
    """fsync a directory so renames/creates/unlinks in it are durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes, *, sync: bool = True) -> None:
    """Replace ``path`` with ``data`` atomically (tmp + fsync + rename + dir fsync)."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            n = os.write(fd, view)
            view = view[n:]
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    if sync:
        fsync_dir(path.parent)


def write_checkpoint(path: Path, entries: list[tuple[int, ...]]) -> None:
    """Write a Kafka-format checkpoint file of integer tuples."""
    lines = [str(CHECKPOINT_VERSION), str(len(entries))]
    lines += [" ".join(str(v) for v in e) for e in entries]
    atomic_write(path, ("\n".join(lines) + "\n").encode())


def read_checkpoint(path: Path, arity: int) -> list[tuple[int, ...]] | None:
    """Read a checkpoint file; ``None`` if missing or malformed (logged, never raised).

    Malformed includes bytes that are not UTF-8 (``UnicodeDecodeError``): Kafka's
    ``CheckpointFile`` read fails the same way for any unreadable content, and the log manager
    then recovers the log from offset 0 rather than refusing to start."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        log.warning("cannot read checkpoint %s: %s", path, exc)
        return None
    try:
        lines = raw.decode("utf-8").split("\n")
        if int(lines[0]) != CHECKPOINT_VERSION:
            raise ValueError(f"unknown version {lines[0]!r}")
        count = int(lines[1])
        entries = []
        for i in range(count):
            fields = tuple(int(x) for x in lines[2 + i].split())
            if len(fields) != arity:
                raise ValueError(f"entry {i} has {len(fields)} fields, expected {arity}")
            entries.append(fields)
        return entries
    except (ValueError, IndexError) as exc:  # UnicodeDecodeError is a ValueError
        log.warning("ignoring malformed checkpoint %s: %s", path, exc)
        return None


def read_offset_checkpoint(path: Path) -> int | None:
    """Read a single-offset checkpoint (``log-start-offset``/``recovery-point``)."""
    entries = read_checkpoint(path, 1)
    if not entries:
        return None
    return entries[0][0]


def write_offset_checkpoint(path: Path, offset: int) -> None:
    write_checkpoint(path, [(offset,)])
