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
- *voter*: a member of the group's configuration that counts in commit and election quorums
  (§4.1: single-server changes); *learner*: a member that receives the log but never counts in
  a quorum nor campaigns (thesis §4.2.1 "catching up new servers", etcd's learners). A
  *configuration* (:class:`ConfState`) is both sets.
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass
from typing import Any

from litemq import limits

__all__ = [
    "ConfState",
    "Entry",
    "EntryKind",
    "HardState",
    "Role",
    "Snapshot",
    "SoftState",
    "decode_config",
    "decode_voters",
    "encode_config",
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
    """Configuration change (thesis §4.1). Payload: :func:`encode_config` of the *whole* new
    configuration (voters and learners). Takes effect on every server as soon as it is in its
    log (appended), not when committed."""


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
class ConfState:
    """A configuration (etcd ``raftpb.ConfState``): ``voters`` count in commit and election
    quorums; ``learners`` (disjoint from them) receive the log, never count, never campaign.
    A learner becomes a voter only through a ``CONFIG`` entry (promotion)."""

    voters: frozenset[int] = frozenset()
    learners: frozenset[int] = frozenset()

    @property
    def members(self) -> frozenset[int]:
        """Voters and learners: every server the leader replicates to."""
        return self.voters | self.learners

    def role_of(self, node: int) -> str | None:
        """``"voter"``, ``"learner"`` or ``None`` (not a member)."""
        if node in self.voters:
            return "voter"
        return "learner" if node in self.learners else None


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Everything up to and including ``offset`` (written in ``term``), with the configuration
    in effect at ``offset`` (``voters``, ``learners``). ``data`` is opaque: the metadata image
    for the metadata group, and for a partition group the count of Raft-internal offsets below
    the log start (the broker's), where installing it means "discard the whole log and start
    afresh at offset + 1" (Kafka: follower fetch offset below the leader's log start offset)."""

    offset: int = -1
    term: int = 0
    voters: frozenset[int] | None = None
    """``None``: never recorded (then ``learners`` is ignored too)."""
    data: Any = None
    learners: frozenset[int] = frozenset()


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
    learners: frozenset[int] = frozenset()


_COUNT = struct.Struct(">I")


def _pack_ids(ids) -> bytes:
    ids = sorted(set(ids))
    return _COUNT.pack(len(ids)) + struct.pack(f">{len(ids)}i", *ids)


def encode_config(voters, learners=()) -> bytes:
    """Payload of a ``CONFIG`` entry: big-endian u32 count, then each voter id as int32; then,
    only if there are learners, u32 count and each learner id as int32. A configuration without
    learners encodes exactly as the voters-only payload of earlier versions."""
    out = _pack_ids(voters)
    learners = set(learners)
    return out + _pack_ids(learners) if learners else out


def encode_voters(voters) -> bytes:
    """:func:`encode_config` without learners (the voters-only payload)."""
    return _pack_ids(voters)


def _unpack_ids(payload: bytes, pos: int, what: str) -> tuple[frozenset[int], int]:
    if len(payload) < pos + 4:
        raise ValueError(f"config entry payload too short for its {what}")
    (n,) = _COUNT.unpack_from(payload, pos)
    if n > limits.RAFT_MAX_VOTERS or len(payload) < pos + 4 + 4 * n:
        raise ValueError(f"bad config entry payload ({n} {what})")
    ids = frozenset(struct.unpack_from(f">{n}i", payload, pos + 4))
    if len(ids) != n:
        raise ValueError(f"config entry payload lists one of its {what} twice")
    return ids, pos + 4 + 4 * n


def decode_config(payload) -> ConfState:
    """Inverse of :func:`encode_config` (also reads the voters-only payload). Raises
    ``ValueError`` for a malformed payload: truncated or trailing bytes, more than
    ``limits.RAFT_MAX_VOTERS`` voters or learners, an id listed twice or in both sets."""
    payload = bytes(payload)
    voters, pos = _unpack_ids(payload, 0, "voters")
    learners: frozenset[int] = frozenset()
    if pos < len(payload):
        learners, pos = _unpack_ids(payload, pos, "learners")
        if not learners:
            raise ValueError("config entry payload with an empty learner list")
    if pos != len(payload):
        raise ValueError("bad config entry payload (trailing bytes)")
    if voters & learners:
        raise ValueError(f"config entry names {sorted(voters & learners)} as voter and learner")
    return ConfState(voters, learners)


def decode_voters(payload: bytes) -> frozenset[int]:
    """The voters of a ``CONFIG`` payload (:func:`decode_config`)."""
    return decode_config(payload).voters
