"""The identity of a data directory: Kafka's ``meta.properties`` (KRaft, version 1).

``DATA_DIR/meta.properties`` is a Java properties file naming the cluster the directory belongs
to, the broker (node) that owns it and the directory itself (Kafka ``MetaProperties``,
KIP-631/KIP-858)::

    #
    #Wed Nov 25 18:52:26 UTC 2026
    cluster.id=...
    directory.id=...
    node.id=1
    version=1

``directory.id`` is a random Kafka ``Uuid`` in its string form (16 bytes, URL-safe base64
without padding, 22 characters; never one of Kafka's reserved ids, never starting with ``-``).
``cluster.id`` is absent until the broker knows its cluster's id (a new broker of a replicated
cluster learns it from the metadata log), as Kafka allows.

A broker verifies the file before it reads anything else of the directory (Kafka
``MetaPropertiesEnsemble.verify``): another ``node.id`` than the configured one, or, once the
broker knows its cluster id, another ``cluster.id``, refuses the start with
:class:`InconsistentDataDirError`. Writes are atomic (temp file, fsync, rename, fsync of the
directory). No asyncio here.
"""

from __future__ import annotations

import base64
import logging
import os
import time
from dataclasses import dataclass, replace
from pathlib import Path

log = logging.getLogger(__name__)

META_PROPERTIES_FILE = "meta.properties"
META_PROPERTIES_VERSION = 1
_RESERVED_UUID_MAX = 100
"""Kafka reserves the Uuids whose 16 bytes are 0..99 as a big-endian number (``Uuid.RESERVED``:
ZERO, ONE, METADATA_TOPIC_ID and the ``DirectoryId`` sentinels UNASSIGNED, LOST, MIGRATING)."""

__all__ = ["META_PROPERTIES_FILE", "DataDirIdentity", "InconsistentDataDirError", "MetaProperties",
           "new_directory_id", "read_meta_properties", "write_meta_properties"]


class InconsistentDataDirError(ValueError):
    """The data directory belongs to another cluster or another node (one-line message in
    Kafka's words, naming the file)."""


def new_directory_id() -> str:
    """A random Kafka ``Uuid`` string (``Uuid.randomUuid().toString()``): 22 URL-safe base64
    characters, not reserved, not starting with ``-``."""
    while True:
        raw = os.urandom(16)
        text = base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")
        if int.from_bytes(raw, "big") >= _RESERVED_UUID_MAX and not text.startswith("-"):
            return text


@dataclass(frozen=True)
class MetaProperties:
    """The fields of ``meta.properties`` (``cluster_id`` None until known)."""

    node_id: int
    directory_id: str
    cluster_id: str | None = None
    version: int = META_PROPERTIES_VERSION

    def to_properties(self) -> dict[str, str]:
        out = {"directory.id": self.directory_id, "node.id": str(self.node_id), "version": str(self.version)}
        if self.cluster_id:
            out["cluster.id"] = self.cluster_id
        return dict(sorted(out.items()))


def read_meta_properties(data_dir: Path) -> MetaProperties | None:
    """``data_dir/meta.properties`` parsed, or None when there is none.

    Raises:
        InconsistentDataDirError: the file is unreadable, has another version than 1 or lacks
            ``node.id`` / has a non-integer one.
    """
    path = Path(data_dir) / META_PROPERTIES_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise InconsistentDataDirError(f"cannot read {path}: {exc}") from None
    props: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line[0] in "#!":
            continue
        key, sep, value = line.partition("=")
        if sep:
            props[key.strip()] = value.strip()
    version = props.get("version", "")
    if version != str(META_PROPERTIES_VERSION):
        raise InconsistentDataDirError(f"unsupported version {version or '(none)'} in {path}: LiteMQ reads version "
                                       f"{META_PROPERTIES_VERSION} (KRaft) meta.properties")
    node = props.get("node.id", "")
    if not node.lstrip("-").isdigit():
        raise InconsistentDataDirError(f"no valid node.id in {path}")
    return MetaProperties(int(node), props.get("directory.id") or new_directory_id(),
                          props.get("cluster.id") or None)


def write_meta_properties(data_dir: Path, meta: MetaProperties) -> None:
    """Write ``data_dir/meta.properties`` atomically (Kafka ``PropertiesUtils.writePropertiesFile``
    with fsync). Raises OSError."""
    path = Path(data_dir) / META_PROPERTIES_FILE
    tmp = path.with_name(META_PROPERTIES_FILE + ".tmp")
    body = "#\n#" + time.strftime("%a %b %d %H:%M:%S %Z %Y") + "\n"
    body += "".join(f"{k}={v}\n" for k, v in meta.to_properties().items())
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(body)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class DataDirIdentity:
    """The verified identity of one (locked) data directory; create with :meth:`open`.

    Attributes:
        path: the ``meta.properties`` file.
        meta: its current :class:`MetaProperties`.
        created: the file was written at this start into a directory without data (a new or
            replaced disk: a new ``directory.id``).
    """

    def __init__(self, data_dir: Path, meta: MetaProperties, created: bool = False) -> None:
        self.path = Path(data_dir) / META_PROPERTIES_FILE
        self.meta = meta
        self.created = created

    @property
    def directory_id(self) -> str:
        return self.meta.directory_id

    @property
    def cluster_id(self) -> str | None:
        return self.meta.cluster_id

    @classmethod
    def open(cls, data_dir: Path, node_id: int, had_data: bool) -> DataDirIdentity:
        """Read and verify ``meta.properties``, writing it when missing.

        Args:
            node_id: the configured ``node.id``.
            had_data: the directory held data before this start (a missing file is then a
                migration of a directory written by a LiteMQ without meta.properties, logged once).

        Raises:
            InconsistentDataDirError: the file names another node id (Kafka's wording), or is bad.
            OSError: it cannot be written.
        """
        data_dir = Path(data_dir)
        meta = read_meta_properties(data_dir)
        if meta is None:
            meta = MetaProperties(node_id, new_directory_id())
            write_meta_properties(data_dir, meta)
            if had_data:
                log.info("data dir %s had no %s (written by an older LiteMQ): wrote one with node.id %d and "
                         "directory.id %s", data_dir, META_PROPERTIES_FILE, node_id, meta.directory_id)
            return cls(data_dir, meta, created=not had_data)
        path = data_dir / META_PROPERTIES_FILE
        if meta.node_id != node_id:
            raise InconsistentDataDirError(
                f"Configured node.id = {node_id} doesn't match stored node.id {meta.node_id} in {path}. If you moved "
                "your data, make sure your configured node id matches. If you intend to create a new node, you "
                "should remove all data in your data directories.")
        return cls(data_dir, meta)

    def bind_cluster_id(self, cluster_id: str) -> None:
        """The broker's cluster id is now known: check it against the stored one, or store it.

        Raises:
            InconsistentDataDirError: ``Invalid cluster.id in: PATH. Expected X, but read Y``
                (Kafka's message) when the file names another cluster.
            OSError: the file cannot be written.
        """
        if not cluster_id:
            return
        stored = self.meta.cluster_id
        if stored == cluster_id:
            return
        if stored:
            raise InconsistentDataDirError(
                f"Invalid cluster.id in: {self.path}. Expected {cluster_id}, but read {stored}")
        meta = replace(self.meta, cluster_id=cluster_id)
        write_meta_properties(self.path.parent, meta)
        self.meta = meta
