"""The topic id of a partition directory: Kafka's ``partition.metadata`` file (KIP-516,
``org.apache.kafka.storage.internals.checkpoint.PartitionMetadataFile``)::

    version: 0
    topic_id: <the topic id, base64url without padding, as Kafka's Uuid.toString>

A replicated broker writes it when it opens a replica, so a directory left from an earlier
topic of the same name (deleted and created again) is told apart from the current one.
"""

from __future__ import annotations

import base64
import logging
import os
import uuid
from pathlib import Path

log = logging.getLogger(__name__)

PARTITION_METADATA_FILE = "partition.metadata"
_VERSION = 0


def _encode(topic_id: uuid.UUID) -> str:
    return base64.urlsafe_b64encode(topic_id.bytes).rstrip(b"=").decode()


def read_topic_id(directory: Path) -> uuid.UUID | None:
    """The topic id recorded in ``directory``; None when there is no file or it is malformed
    (logged once; a malformed file is treated as absent, never raised)."""
    path = Path(directory) / PARTITION_METADATA_FILE
    try:
        text = path.read_bytes().decode("utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        log.warning("%s unreadable (%s): ignored", path, exc)
        return None
    fields = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
    try:
        if int(fields["version"].strip()) != _VERSION:
            raise ValueError(f"version {fields['version'].strip()}")
        raw = fields["topic_id"].strip()
        return uuid.UUID(bytes=base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4)))
    except (KeyError, ValueError) as exc:
        log.warning("%s malformed (%s): ignored", path, exc)
        return None


def write_topic_id(directory: Path, topic_id: uuid.UUID) -> None:
    """Record ``topic_id`` in ``directory`` (written to a temporary file, fsynced, renamed).

    Raises:
        OSError: the file could not be written.
    """
    path = Path(directory) / PARTITION_METADATA_FILE
    tmp = path.with_suffix(".tmp")
    with open(tmp, "wb") as f:
        f.write(f"version: {_VERSION}\ntopic_id: {_encode(topic_id)}\n".encode())
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
