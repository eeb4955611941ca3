"""Value types of the Raft core: log entries, hard state, snapshots, soft state.

Vocabulary (Ongaro & Ousterhout 2014 §5; Kafka names in brackets):

- *offset* [Kafka offset] is the Raft log index. Offsets start at 0 and are dense. An
  :class:`Entry` may span several offsets (a Kafka record batch of ``count`` records occupies
  ``offset .. offset + count - 1``); all offsets of one entry share its term.
- *term* [leader epoch, the batch's ``partitionLeaderEpoch``].
- *commit index* is the last committed offset (inclusive, ``-1`` when nothing is committed);
  the Kafka *high watermark* is exclusive: ``high_watermark == commit_index + 1``.
- *log end offset* [LEO] is the offset the next entry will get (last offset + 1).
- *log start offset* is the first offset still held; everything below it is summarised by a
  :class:`Snapshot` (for a partition group: "start afresh at log start offset").
- *voter*: a member of the group's configuration (§4.1: single-server changes).
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass
from typing import Any

from litemq import limits

__all__ = [
    "Entry",
    "EntryKind",
    "HardState",
    "Role",
    "Snapshot",
    "SoftState",
    "decode_voters",
    "encode_voters",
]


class EntryKind(enum.IntEnum):
    """What an entry means to the core. Only ``CONFIG`` payloads are read by the core."""

    DATA = 0
    """Opaque payload (a record batch in the broker, a metadata record in the metadata group)."""
    CONTROL = 1
    """No-op appended by every new leader (paper §5.4.2 and §8, thesis §6.4): lets it commit
    earlier terms. The broker stores it as a Kafka control batch, which consumers skip."""
    CONFIG = 2
    """Voter set change (thesis §4.1). Payload: :func:`encode_voters` of the *whole* new set.
    Takes effect on every server as soon as it is in its log (appended), not when committed."""


@dataclass(frozen=True, slots=True)
class Entry:
    """One log entry occupying offsets ``offset .. offset + count - 1``, written in ``term``."""

    offset: int
    term: int
    payload: Any = b""
    count: int = 1
    kind: EntryKind = EntryKind.DATA

    @property
    def last_offset(self) -> int:
        return self.offset + self.count - 1

    @property
    def end_offset(self) -> int:
        """Offset right after this entry (the log end offset once it is the last entry)."""
        return self.offset + self.count

    @property
    def size(self) -> int:
        """Bytes counted against message and apply budgets (``len(payload)`` when it has one)."""
        try:
            return len(self.payload)
        except TypeError:
            return 0


@dataclass(frozen=True, slots=True)
class HardState:
    """What must be durable before any message of the same Ready is sent (§5, Figure 2:
    currentTerm, votedFor; plus the commit index, like etcd, so it never restarts from zero)."""

    term: int = 0
    voted_for: int | None = None
    commit_index: int = -1


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Everything up to and including ``offset`` (written in ``term``), with the voter set in
    effect at ``offset``. ``data`` is opaque: the metadata image for the metadata group, and
    for a partition group the count of Raft-internal offsets below the log start (the
    broker's), where installing it means "discard the whole log and start afresh at offset + 1" (Kafka: follower fetch offset below the leader's log start offset)."""

    offset: int = -1
    term: int = 0
    voters: frozenset[int] | None = None
    data: Any = None


class Role(enum.Enum):
    FOLLOWER = "follower"
    PRE_CANDIDATE = "pre-candidate"
    CANDIDATE = "candidate"
    LEADER = "leader"


@dataclass(frozen=True, slots=True)
class SoftState:
    """Volatile state the caller may want to publish (leader of a partition, current voters).
    Never needs persisting."""

    role: Role
    leader_id: int | None
    voters: frozenset[int]


_COUNT = struct.Struct(">I")


def encode_voters(voters) -> bytes:
    """Payload of a ``CONFIG`` entry: big-endian count, then each voter id as int32."""
    ids = sorted(set(voters))
    return _COUNT.pack(len(ids)) + struct.pack(f">{len(ids)}i", *ids)


def decode_voters(payload: bytes) -> frozenset[int]:
    payload = bytes(payload)
    if len(payload) < 4:
        raise ValueError("config entry payload too short")
    (n,) = _COUNT.unpack_from(payload)
    if n > limits.RAFT_MAX_VOTERS or len(payload) != 4 + 4 * n:
        raise ValueError("bad config entry payload")
    return frozenset(struct.unpack_from(f">{n}i", payload, 4))
