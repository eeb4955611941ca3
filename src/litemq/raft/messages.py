"""Raft messages: small frozen dataclasses with an explicit ``type``, ``src``, ``dst`` and ``term``.

Every message is self-contained (no per-connection state is assumed), so the broker may
coalesce, batch and reorder messages of many groups on one connection per broker pair; the
core tolerates loss, duplication and reordering. Heartbeats are their own types
(:class:`Heartbeat`/:class:`HeartbeatResponse`, no entries) so the broker can recognise and
coalesce them per broker pair.

Message set (Ongaro & Ousterhout 2014 Figure 2; Ongaro thesis §3.10, §9.6):

==================== ==================================================================
VoteRequest          RequestVote, with ``pre_vote`` (thesis §9.6) and ``transfer`` (§3.10)
VoteResponse         ``granted`` or not; ``pre_vote`` echoes the request
Append               AppendEntries with entries (may be empty: commit propagation / probe)
AppendResponse       success + ``match_offset``, or rejection with a fast-backup hint
Heartbeat            AppendEntries without log consistency check (etcd MsgHeartbeat)
HeartbeatResponse    liveness for CheckQuorum, and un-pauses a probing follower
InstallSnapshot      thesis §5.3; for a partition: "start afresh at the leader's log start"
TimeoutNow           leadership transfer: start an election now (thesis §3.10)
==================== ==================================================================
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import ClassVar, Union

from litemq.raft.types import Entry, Snapshot

__all__ = [
    "Append",
    "AppendResponse",
    "Heartbeat",
    "HeartbeatResponse",
    "InstallSnapshot",
    "Message",
    "MessageType",
    "TimeoutNow",
    "VoteRequest",
    "VoteResponse",
]


class MessageType(enum.IntEnum):
    VOTE = 1
    VOTE_RESPONSE = 2
    APPEND = 3
    APPEND_RESPONSE = 4
    HEARTBEAT = 5
    HEARTBEAT_RESPONSE = 6
    INSTALL_SNAPSHOT = 7
    TIMEOUT_NOW = 8


@dataclass(frozen=True, slots=True)
class VoteRequest:
    """RequestVote (§5.2). With ``pre_vote`` the ``term`` is the term the sender *would* use
    (its current term + 1) and nobody changes term or vote because of it (thesis §9.6).
    ``transfer`` marks an election started by TimeoutNow: it bypasses the leader lease
    (thesis §4.2.3 / §3.10, etcd ``campaignTransfer``)."""

    type: ClassVar[MessageType] = MessageType.VOTE
    src: int
    dst: int
    term: int
    last_offset: int
    last_term: int
    pre_vote: bool = False
    transfer: bool = False


@dataclass(frozen=True, slots=True)
class VoteResponse:
    type: ClassVar[MessageType] = MessageType.VOTE_RESPONSE
    src: int
    dst: int
    term: int
    granted: bool
    pre_vote: bool = False


@dataclass(frozen=True, slots=True)
class Append:
    """AppendEntries (§5.3): ``entries`` follow offset ``prev_offset`` written in ``prev_term``.
    ``commit_index`` is the leader's commit index (the follower commits up to
    ``min(commit_index, last new offset)``). ``log_start_offset`` is the leader's log start
    offset (-1: not sent), as Kafka's FetchResponse ``LogStartOffset``: a partition's followers
    move theirs up to it (retention and DeleteRecords happen on the leader)."""

    type: ClassVar[MessageType] = MessageType.APPEND
    src: int
    dst: int
    term: int
    prev_offset: int
    prev_term: int
    entries: tuple[Entry, ...]
    commit_index: int
    log_start_offset: int = -1


@dataclass(frozen=True, slots=True)
class AppendResponse:
    """Answer to :class:`Append` and :class:`InstallSnapshot`.

    On success ``match_offset`` is the last offset the follower's log is known to share with
    the leader. On rejection ``reject_offset`` is the ``prev_offset`` that did not match and
    (``hint_offset``, ``hint_term``) is the fast-backup hint (§5.3 "optimization", etcd
    ``findConflictByTerm``): the largest offset ``<= min(prev_offset, follower's last offset)``
    whose term is ``<= prev_term``, and its term. With a leader-epoch cache this is Kafka's
    OffsetsForLeaderEpoch answer.

    ``log_lost`` is set by a *recovering* follower (one whose disk was replaced, see
    :class:`~litemq.raft.node.RaftNode`): what it acknowledged before may be gone, so the
    leader forgets its match point (the stale-rejection rule would otherwise ignore it).

    ``log_start_offset`` is the follower's log start offset when it answered (-1: not sent),
    as the ``LogStartOffset`` a Kafka follower sends in its FetchRequest (v5+, KIP-107): the
    leader keeps the last one of each member (:meth:`~litemq.raft.node.RaftNode.
    member_log_start_offsets`), from which a partition leader computes its low watermark."""

    type: ClassVar[MessageType] = MessageType.APPEND_RESPONSE
    src: int
    dst: int
    term: int
    success: bool
    match_offset: int = -1
    reject_offset: int = -1
    hint_offset: int = -1
    hint_term: int = 0
    log_lost: bool = False
    log_start_offset: int = -1


@dataclass(frozen=True, slots=True)
class Heartbeat:
    """Leader liveness. ``commit_index`` is ``min(leader commit, follower's match)`` so a
    follower never commits past what it is known to share with the leader (etcd).
    ``log_start_offset``: as in :class:`Append`."""

    type: ClassVar[MessageType] = MessageType.HEARTBEAT
    src: int
    dst: int
    term: int
    commit_index: int
    log_start_offset: int = -1


@dataclass(frozen=True, slots=True)
class HeartbeatResponse:
    """Answer to :class:`Heartbeat`. ``log_start_offset``: the follower's, as in
    :class:`AppendResponse`."""

    type: ClassVar[MessageType] = MessageType.HEARTBEAT_RESPONSE
    src: int
    dst: int
    term: int
    log_start_offset: int = -1


@dataclass(frozen=True, slots=True)
class InstallSnapshot:
    """InstallSnapshot (thesis §5.3), sent whole; chunking large metadata images is a transport
    concern. For a partition group ``snapshot.data`` is the leader's count of Raft-internal offsets
    below its log start (8 bytes, big-endian; the broker's offset translator): "truncate fully
    and start at ``snapshot.offset + 1``"."""

    type: ClassVar[MessageType] = MessageType.INSTALL_SNAPSHOT
    src: int
    dst: int
    term: int
    snapshot: Snapshot


@dataclass(frozen=True, slots=True)
class TimeoutNow:
    """Leadership transfer (thesis §3.10): the target starts an election immediately."""

    type: ClassVar[MessageType] = MessageType.TIMEOUT_NOW
    src: int
    dst: int
    term: int


Message = Union[
    VoteRequest,
    VoteResponse,
    Append,
    AppendResponse,
    Heartbeat,
    HeartbeatResponse,
    InstallSnapshot,
    TimeoutNow,
]
