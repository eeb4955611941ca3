"""The Raft state machine, in the style of etcd's raft (the "Ready" model).

:class:`RaftNode` is pure: no I/O, no clock (time advances only through :meth:`RaftNode.tick`),
no threads, and no randomness except the seeded ``random.Random`` it is given. Inputs are
:meth:`~RaftNode.tick`, :meth:`~RaftNode.step` (a received message), :meth:`~RaftNode.propose`,
:meth:`~RaftNode.propose_add_voter` / :meth:`~RaftNode.propose_remove_voter` and
:meth:`~RaftNode.transfer_leadership`. Outputs are collected in a :class:`Ready`, which the
caller handles **in this order** and then acknowledges with :meth:`~RaftNode.advance`:

1. ``snapshot``: if set, discard the whole log and start afresh after it (restore the state
   machine from ``snapshot.data`` when there is some);
2. ``truncate_to``: if set, truncate the log so that its log end offset is ``truncate_to``;
3. ``entries``: append them (their offsets and terms are final: the broker stamps them into
   the batch's baseOffset and partitionLeaderEpoch);
4. ``hard_state``: if set, persist it; then make 1-4 durable (fsync);
5. ``messages``: send them (only now: a vote or an append acknowledgement promises durability);
6. ``committed_entries``: apply them in order (``high_watermark`` is now safe to expose);
7. :meth:`RaftNode.advance` with the same Ready.

The log is the caller's (a :class:`~litemq.raft.log.LogView`); entries the core has produced
but the caller has not persisted yet are kept in an *unstable* tail (etcd ``unstable``).

Protocol features and where they come from (Ongaro & Ousterhout 2014 = "paper", Ongaro's
2014 thesis = "thesis"):

- leader election with randomized election timeouts in ``[T, 2T)`` ticks (paper §5.2);
- PreVote (thesis §9.6): a would-be candidate first asks whether it could win, without
  changing any term, so a partitioned node that rejoins cannot disrupt a healthy leader;
- CheckQuorum (thesis §6.2, etcd ``CheckQuorum``): a leader that has not heard from a quorum
  within an election timeout steps down; followers that heard from a leader within the
  election timeout ignore vote requests (leader lease, thesis §4.2.3);
- log replication with consistency check and truncation of a conflicting suffix (paper §5.3),
  fast backup by term (paper §5.3, etcd ``findConflictByTerm``), pipelined appends with a
  bounded number in flight (etcd ``Progress``/``Inflights``: probe, replicate, snapshot);
- commit only of current-term entries by counting replicas (paper §5.4.2); every new leader
  first appends a ``CONTROL`` no-op entry (paper §8, thesis §6.4) so earlier entries commit;
- snapshots (thesis §5): a follower whose next offset is below the leader's log start offset
  receives :class:`~litemq.raft.messages.InstallSnapshot` (for a partition: "start afresh");
- leadership transfer with TimeoutNow (thesis §3.10);
- single-server membership changes (thesis §4.1): a ``CONFIG`` entry takes effect as soon as
  it is appended (and is undone if truncated); a new change is refused until the previous one
  is committed and the leader has committed an entry of its own term (thesis §4.1, the fix
  published on raft-dev in 2015); a leader that removed itself steps down once the change is
  committed (thesis §4.2.2).
"""

from __future__ import annotations

import random
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

from litemq import limits
from litemq.raft.log import EntrySeq, LogView
from litemq.raft.messages import (
    Append,
    AppendResponse,
    Heartbeat,
    HeartbeatResponse,
    InstallSnapshot,
    Message,
    TimeoutNow,
    VoteRequest,
    VoteResponse,
)
from litemq.raft.types import (
    Entry,
    EntryKind,
    HardState,
    Role,
    Snapshot,
    SoftState,
    decode_voters,
    encode_voters,
)

__all__ = [
    "ConfigChangeInProgress",
    "NotLeader",
    "ProposalDropped",
    "RaftConfig",
    "RaftError",
    "RaftNode",
    "Ready",
]

_UNLIMITED = 1 << 62


class RaftError(Exception):
    """Base of the errors a proposal can raise."""


class NotLeader(RaftError):
    """Raised by proposals on a node that is not the leader. ``leader_id`` is the current
    leader if known (Kafka: NOT_LEADER_OR_FOLLOWER, the client refreshes its metadata)."""

    def __init__(self, leader_id: int | None) -> None:
        super().__init__(f"not the leader (leader is {leader_id})")
        self.leader_id = leader_id


class ProposalDropped(RaftError):
    """Raised while a leadership transfer is in progress (thesis §3.10: the old leader stops
    accepting client requests)."""


class ConfigChangeInProgress(RaftError):
    """Raised when a membership change is proposed before the previous one has committed
    (thesis §4.1: one change at a time)."""


@dataclass(frozen=True)
class RaftConfig:
    """Tunables of one group. Ticks are the caller's unit of time (the broker: e.g. 100 ms)."""

    election_timeout_ticks: int = 10
    """Base election timeout T; each node waits a random ``[T, 2T)`` ticks (paper §5.2)."""
    heartbeat_interval_ticks: int = 1
    """A leader sends heartbeats this often (must be below the election timeout)."""
    pre_vote: bool = True
    check_quorum: bool = True
    max_append_bytes: int = limits.RAFT_MAX_APPEND_BYTES
    max_inflight_appends: int = limits.RAFT_MAX_INFLIGHT_APPENDS
    max_apply_bytes: int = limits.RAFT_MAX_APPLY_BYTES
    apply_entries: bool = True
    """Hand committed entries back in ``Ready.committed_entries``. A partition group sets it
    to False: only its high watermark matters and nothing is read back from the log."""

    def __post_init__(self) -> None:
        if not 1 <= self.election_timeout_ticks <= limits.RAFT_MAX_ELECTION_TIMEOUT_TICKS:
            raise ValueError("election_timeout_ticks out of range")
        if not 1 <= self.heartbeat_interval_ticks < self.election_timeout_ticks:
            raise ValueError("heartbeat_interval_ticks must be in [1, election_timeout_ticks)")
        if not 1 <= self.max_append_bytes <= limits.RAFT_MAX_APPEND_BYTES:
            raise ValueError("max_append_bytes out of range")
        if not 1 <= self.max_inflight_appends <= limits.RAFT_MAX_INFLIGHT_APPENDS:
            raise ValueError("max_inflight_appends out of range")
        if not 1 <= self.max_apply_bytes <= limits.RAFT_MAX_APPLY_BYTES:
            raise ValueError("max_apply_bytes out of range")


@dataclass(slots=True, eq=False)
class Ready:
    """Work for the caller; see the module docstring for the order of handling."""

    hard_state: HardState | None
    """Persist before sending ``messages`` (``None``: unchanged since the last Ready)."""
    soft_state: SoftState | None
    """Role / leader / voters, when changed since the last Ready (publish, never persist)."""
    snapshot: Snapshot | None
    """Install first: discard the whole log; the log restarts at ``snapshot.offset + 1``."""
    truncate_to: int | None
    """Truncate the log to this log end offset (a conflicting suffix, paper §5.3) before
    appending ``entries``."""
    entries: tuple[Entry, ...]
    messages: tuple[Message, ...]
    committed_entries: tuple[Entry, ...]
    """Apply in order, after persisting."""
    commit_index: int
    """Commit index after this Ready is handled (``high_watermark - 1``)."""
    must_sync: bool
    """True when something must be durable (fsynced) before ``messages`` are sent: log changes,
    or a new term or vote. A hard state that differs only in its commit index may be written
    lazily (like Kafka's high-watermark checkpoint): the commit index then restarts from the
    last durable value, which is safe."""

    @property
    def high_watermark(self) -> int:
        """Kafka high watermark (exclusive): first offset not known to be committed."""
        return self.commit_index + 1


# --- progress of one follower, as tracked by the leader (etcd tracker.Progress) ---
_PROBE, _REPLICATE, _SNAPSHOT = 0, 1, 2


class _Progress:
    __slots__ = ("match", "next", "state", "probe_sent", "inflight", "recent_active",
                 "snapshot_offset", "snapshot_ticks")

    def __init__(self, next_offset: int) -> None:
        self.match = -1
        self.next = next_offset
        self.state = _PROBE
        self.probe_sent = False
        self.inflight: deque[int] = deque()
        self.recent_active = False
        self.snapshot_offset = -1
        self.snapshot_ticks = 0

    def become_probe(self, next_offset: int) -> None:
        self.state = _PROBE
        self.next = max(next_offset, self.match + 1)
        self.probe_sent = False
        self.inflight.clear()

    def become_replicate(self) -> None:
        self.state = _REPLICATE
        self.next = self.match + 1
        self.inflight.clear()

    def become_snapshot(self, offset: int) -> None:
        self.state = _SNAPSHOT
        self.snapshot_offset = offset
        self.snapshot_ticks = 0
        self.inflight.clear()

    def ack(self, offset: int) -> bool:
        """Record that the follower matches up to ``offset``; True if that is news."""
        inflight = self.inflight
        while inflight and inflight[0] <= offset:
            inflight.popleft()
        if offset > self.match:
            self.match = offset
            self.next = max(self.next, offset + 1)
            return True
        return False


class _RaftLog:
    """The log as the core reasons about it: persisted view + pending snapshot + unstable tail
    (etcd ``raftLog``). ``unstable.start`` is where the unstable tail begins; entries of the
    view at or after it are stale (a truncation the caller has not done yet)."""

    def __init__(self, view: LogView) -> None:
        self.view = view
        self.pending_snapshot: Snapshot | None = None
        self.unstable = EntrySeq(view.log_end_offset)

    @property
    def first_offset(self) -> int:
        snap = self.pending_snapshot
        return snap.offset + 1 if snap is not None else self.view.log_start_offset

    @property
    def end_offset(self) -> int:
        return self.unstable.end

    @property
    def last_offset(self) -> int:
        return self.unstable.end - 1

    def term_at(self, offset: int) -> int | None:
        unstable = self.unstable
        if offset >= unstable.start:
            return unstable.term_at(offset)
        snap = self.pending_snapshot
        if snap is not None:
            return snap.term if offset == snap.offset else None
        return self.view.term_at(offset)

    @property
    def last_term(self) -> int:
        t = self.term_at(self.last_offset)
        return 0 if t is None else t

    def snapshot(self) -> Snapshot:
        return self.pending_snapshot if self.pending_snapshot is not None else self.view.snapshot()

    def persisted_last(self) -> int:
        """Last offset that is durable and still part of the log."""
        if self.pending_snapshot is not None:
            return self.pending_snapshot.offset
        return min(self.unstable.start, self.view.log_end_offset) - 1

    def truncate_needed(self) -> int | None:
        if self.pending_snapshot is None and self.unstable.start < self.view.log_end_offset:
            return self.unstable.start
        return None

    def is_up_to_date(self, last_offset: int, last_term: int) -> bool:
        """Paper §5.4.1: the candidate's log is at least as up-to-date as ours."""
        my_term = self.last_term
        return last_term > my_term or (last_term == my_term and last_offset >= self.last_offset)

    def entries(self, start: int, end: int, max_bytes: int) -> list[Entry]:
        """Entries from the one containing ``start`` up to those starting before ``end``."""
        end = min(end, self.end_offset)
        unstable = self.unstable
        ustart = unstable.start
        if start >= ustart:
            return unstable.slice(start, end, max_bytes)
        if start >= end:
            return []
        out = list(self.view.entries(start, min(end, ustart), max_bytes))
        if end <= ustart or not out or out[-1].end_offset < ustart:
            return out
        used = sum(e.size for e in out)
        for e in unstable:
            if e.offset >= end:
                break
            used += e.size
            if used > max_bytes:
                break
            out.append(e)
        return out

    def append(self, entries: Sequence[Entry]) -> None:
        """Append (possibly replacing a suffix from ``entries[0].offset``)."""
        first = entries[0].offset
        unstable = self.unstable
        if first > unstable.end:
            raise AssertionError(f"gap: appending at {first} after log end {unstable.end}")
        if first >= unstable.start:
            unstable.truncate_from(first)
        else:
            unstable = self.unstable = EntrySeq(first)
        unstable.extend(entries)

    def find_conflict_by_term(self, offset: int, term: int) -> int:
        """Largest offset ``<= offset`` whose term is ``<= term`` (etcd ``findConflictByTerm``;
        with a leader-epoch cache: ``end_offset_for_epoch(term) - 1``). Answers at or below
        ``first_offset - 1`` mean "no better knowledge"."""
        o = min(offset, self.last_offset)
        unstable = self.unstable
        while o >= unstable.start:
            e = unstable.entry_at(o)
            if e is None or e.term <= term:
                return o
            o = e.offset - 1
        first = self.first_offset
        if o < first or self.pending_snapshot is not None:
            return o
        return max(first - 1, min(o, self.view.end_offset_for_epoch(term) - 1))

    def install_snapshot(self, snapshot: Snapshot) -> None:
        self.pending_snapshot = snapshot
        self.unstable = EntrySeq(snapshot.offset + 1)

    def stable_to(self, rd: Ready) -> None:
        if rd.snapshot is not None and rd.snapshot is self.pending_snapshot:
            self.pending_snapshot = None
        if not rd.entries:
            return
        unstable = self.unstable
        if unstable.start != rd.entries[0].offset:
            return  # replaced in the meantime: everything unstable still has to be written
        n = 0
        for e in rd.entries:
            if n < len(unstable) and unstable[n].offset == e.offset and unstable[n].term == e.term:
                n += 1
            else:
                break
        unstable.pop_front(n)


def _entries_span_ok(entries: Sequence[Entry], prev_offset: int) -> bool:
    expected = prev_offset + 1
    for e in entries:
        if e.offset != expected or e.count < 1:
            return False
        expected = e.end_offset
    return True


class RaftNode:
    """One member of one Raft group. See the module docstring for the contract.

    ``voters`` is the voter set in effect at offset ``applied`` (what the caller's state
    machine has applied; by default the log's snapshot offset, whose ``voters`` then win if
    recorded). Config entries after ``applied`` are read back from the log on start.
    ``hard_state`` is the last persisted :class:`HardState` (``None`` on first start).
    """

    def __init__(
        self,
        node_id: int,
        voters: Iterable[int],
        log: LogView,
        config: RaftConfig | None = None,
        rng: random.Random | None = None,
        hard_state: HardState | None = None,
        applied: int | None = None,
    ) -> None:
        self.id = node_id
        self.config = config or RaftConfig()
        self._rng = rng if rng is not None else random.Random(node_id)
        self._log = _RaftLog(log)
        hs = hard_state or HardState()
        snap = log.snapshot()
        voters = frozenset(voters)
        if applied is None:
            applied = snap.offset
            if snap.voters is not None:
                voters = snap.voters
        if len(voters) > limits.RAFT_MAX_VOTERS:
            raise ValueError("too many voters")
        commit = max(hs.commit_index, snap.offset)
        if commit > self._log.last_offset:
            raise ValueError(f"persisted commit index {commit} is beyond the log end {self._log.end_offset}")
        if not snap.offset <= applied <= commit:
            raise ValueError(f"applied {applied} not in [{snap.offset}, {commit}]")
        self.term = hs.term
        self.voted_for = hs.voted_for
        self.commit_index = commit
        self.applied = applied
        self._persisted_hs = hs
        # config history: base (offset, voters) + config entries after it, in log order
        self._config_base: tuple[int, frozenset[int]] = (applied, voters)
        self._configs: list[tuple[int, frozenset[int]]] = []
        if applied + 1 < self._log.end_offset:
            for e in self._log.entries(applied + 1, _UNLIMITED, _UNLIMITED):
                if e.kind == EntryKind.CONFIG:
                    self._configs.append((e.offset, decode_voters(e.payload)))
        self.voters: frozenset[int] = self._configs[-1][1] if self._configs else voters

        self.role = Role.FOLLOWER
        self.leader_id: int | None = None
        self._election_elapsed = 0
        self._heartbeat_elapsed = 0
        self._randomized_timeout = self.config.election_timeout_ticks
        self._votes: dict[int, bool] = {}
        self._prs: dict[int, _Progress] = {}
        self._transferee: int | None = None
        self._pending_config_offset = -1
        self._msgs: list[Message] = []
        self._bcast_entries = False
        self._bcast_commit = False
        self._outstanding: Ready | None = None
        self._prev_soft: SoftState | None = None
        self._become_follower(self.term, None)

    # ------------------------------------------------------------------ queries
    @property
    def high_watermark(self) -> int:
        """Kafka high watermark (exclusive) = commit index + 1; never goes backwards."""
        return self.commit_index + 1

    @property
    def log_end_offset(self) -> int:
        """Log end offset including entries not persisted yet."""
        return self._log.end_offset

    @property
    def last_offset(self) -> int:
        return self._log.last_offset

    def term_at(self, offset: int) -> int | None:
        """Term of ``offset`` in this node's log (including its unpersisted tail)."""
        return self._log.term_at(offset)

    def entries(self, start: int, end: int, max_bytes: int = _UNLIMITED) -> list[Entry]:
        return self._log.entries(start, end, max_bytes)

    @property
    def is_leader(self) -> bool:
        return self.role is Role.LEADER

    @property
    def soft_state(self) -> SoftState:
        return SoftState(self.role, self.leader_id, self.voters)

    @property
    def hard_state(self) -> HardState:
        return HardState(self.term, self.voted_for, self.commit_index)

    @property
    def transferee(self) -> int | None:
        return self._transferee

    def match_offsets(self) -> dict[int, int]:
        """Leader only: last offset known replicated on each voter (replica lag reporting)."""
        return {v: pr.match for v, pr in self._prs.items()}

    def voters_at(self, offset: int) -> frozenset[int] | None:
        """Voter set in effect at ``offset`` (config entries up to it applied), or ``None`` if
        that is older than what the node tracks (the latest config at or below its commit
        index). Record it with the log start offset when retention or a snapshot moves it."""
        base_offset, voters = self._config_base
        if offset < base_offset:
            return None
        for off, v in self._configs:
            if off > offset:
                break
            voters = v
        return voters

    def active_voters(self) -> frozenset[int]:
        """Leader only: voters heard from in the current CheckQuorum window (itself included),
        e.g. to refuse acks=all produce below ``min.insync.replicas``."""
        return frozenset(v for v, pr in self._prs.items() if v in self.voters and (pr.recent_active or v == self.id))

    def config_change_allowed(self) -> bool:
        return (
            self.role is Role.LEADER
            and self._transferee is None
            and self.commit_index >= self._pending_config_offset
        )

    # ------------------------------------------------------------------ inputs
    def tick(self) -> None:
        """Advance logical time by one tick. Cheap unless a timeout fires."""
        if self.role is Role.LEADER:
            self._tick_leader()
        else:
            self._election_elapsed += 1
            if self._election_elapsed >= self._randomized_timeout and self._promotable():
                self._election_elapsed = 0
                self._hup(transfer=False)

    def propose(self, payload: Any, count: int = 1) -> Entry:
        """Append a data entry of ``count`` offsets (a record batch of ``count`` records).
        Returns the entry with its final offset and term (leader epoch); it is committed when
        :attr:`commit_index` reaches ``entry.last_offset`` *with this term still at that
        offset* (a new leader may have replaced it). Raises :class:`NotLeader` or
        :class:`ProposalDropped`."""
        if count < 1:
            raise ValueError("count must be >= 1")
        return self._propose(payload, count, EntryKind.DATA)

    def propose_add_voter(self, voter: int) -> Entry:
        """Propose adding one voter (thesis §4.1). It counts in quorums as soon as appended."""
        if voter in self.voters:
            raise ValueError(f"{voter} is already a voter")
        if len(self.voters) >= limits.RAFT_MAX_VOTERS:
            raise ValueError("too many voters")
        return self._propose_config(self.voters | {voter})

    def propose_remove_voter(self, voter: int) -> Entry:
        """Propose removing one voter (possibly the leader itself, thesis §4.2.2)."""
        if voter not in self.voters:
            raise ValueError(f"{voter} is not a voter")
        if len(self.voters) == 1:
            raise ValueError("cannot remove the last voter")
        return self._propose_config(self.voters - {voter})

    def transfer_leadership(self, to: int) -> None:
        """Hand leadership to voter ``to`` (thesis §3.10): stop accepting proposals, bring it
        up to date, then send it TimeoutNow. Aborted if not done within an election timeout."""
        if self.role is not Role.LEADER:
            raise NotLeader(self.leader_id)
        if to == self.id:
            return
        if to not in self._prs or to not in self.voters:
            raise ValueError(f"{to} is not a voter")
        if self._transferee == to:
            return
        self._transferee = to
        self._election_elapsed = 0
        pr = self._prs[to]
        if pr.match == self._log.last_offset:
            self._send(TimeoutNow(self.id, to, self.term))
        else:
            self._maybe_send_append(to, pr, send_if_empty=True)

    def campaign(self) -> None:
        """Start an election now (with PreVote if enabled), as if the timeout had fired."""
        if self.role is not Role.LEADER and self._promotable():
            self._hup(transfer=False)

    def step(self, m: Message) -> None:
        """Handle one received message (any order, duplicates and losses are fine)."""
        if m.dst != self.id:
            return
        if m.term > self.term:
            if isinstance(m, VoteRequest):
                in_lease = (
                    self.config.check_quorum
                    and self.leader_id is not None
                    and self._election_elapsed < self.config.election_timeout_ticks
                )
                if in_lease and not m.transfer:
                    return  # leader lease (thesis §4.2.3): ignore, do not even answer
            if isinstance(m, VoteRequest) and m.pre_vote:
                pass  # PreVote never changes our term (thesis §9.6)
            elif isinstance(m, VoteResponse) and m.pre_vote and m.granted:
                pass  # granted pre-votes carry the term we would campaign in
            else:
                leader = m.src if isinstance(m, (Append, Heartbeat, InstallSnapshot)) else None
                self._become_follower(m.term, leader)
        elif m.term < self.term:
            if isinstance(m, (Append, Heartbeat)) and (self.config.check_quorum or self.config.pre_vote):
                # A stale leader (e.g. partitioned, then out-voted) learns our term and steps
                # down; without this PreVote could leave it stranded (etcd does the same).
                self._send(AppendResponse(self.id, m.src, self.term, success=False))
            elif isinstance(m, VoteRequest) and m.pre_vote:
                self._send(VoteResponse(self.id, m.src, self.term, granted=False, pre_vote=True))
            return

        if isinstance(m, VoteRequest):
            self._handle_vote_request(m)
        elif self.role is Role.LEADER:
            self._step_leader(m)
        elif self.role is Role.FOLLOWER:
            self._step_follower(m)
        else:
            self._step_candidate(m)

    # ------------------------------------------------------------------ Ready
    def has_ready(self) -> bool:
        if self._bcast_entries or self._bcast_commit:
            self._flush_broadcast()
        if self._msgs or self._log.unstable:
            return True
        log = self._log
        if log.pending_snapshot is not None or log.truncate_needed() is not None:
            return True
        hs = self._persisted_hs
        if hs.term != self.term or hs.voted_for != self.voted_for or hs.commit_index != self.commit_index:
            return True
        soft = self._prev_soft
        if soft is None or soft.role is not self.role or soft.leader_id != self.leader_id or soft.voters != self.voters:
            return True
        return self.applied < self.commit_index and self.config.apply_entries

    def ready(self) -> Ready:
        """Collect what the caller must persist, send and apply. Call :meth:`advance` with it
        before the next :meth:`ready`."""
        if self._outstanding is not None:
            raise RuntimeError("advance() the previous Ready first")
        self._flush_broadcast()
        log = self._log
        hs = self.hard_state
        soft = self.soft_state
        snapshot = log.pending_snapshot
        committed: tuple[Entry, ...] = ()
        if snapshot is None and self.applied < self.commit_index and self.config.apply_entries:
            committed = tuple(log.entries(self.applied + 1, self.commit_index + 1, self.config.max_apply_bytes))
        old = self._persisted_hs
        truncate_to = log.truncate_needed()
        entries = tuple(log.unstable)
        rd = Ready(
            hard_state=hs if hs != old else None,
            soft_state=soft if soft != self._prev_soft else None,
            snapshot=snapshot,
            truncate_to=truncate_to,
            entries=entries,
            messages=tuple(self._msgs),
            committed_entries=committed,
            commit_index=self.commit_index,
            must_sync=bool(
                snapshot is not None or entries or truncate_to is not None
                or hs.term != old.term or hs.voted_for != old.voted_for
            ),
        )
        self._msgs = []
        self._outstanding = rd
        return rd

    def advance(self, rd: Ready) -> None:
        """Acknowledge that ``rd`` was fully handled (persisted, sent, applied)."""
        if rd is not self._outstanding:
            raise RuntimeError("advance() with a Ready that is not the outstanding one")
        self._outstanding = None
        if rd.snapshot is not None:
            self.applied = max(self.applied, rd.snapshot.offset)
        self._log.stable_to(rd)
        if rd.hard_state is not None:
            self._persisted_hs = rd.hard_state
        if rd.soft_state is not None:
            self._prev_soft = rd.soft_state
        if rd.committed_entries:
            self.applied = max(self.applied, rd.committed_entries[-1].last_offset)
        elif not self.config.apply_entries and rd.snapshot is None:
            self.applied = max(self.applied, rd.commit_index)
        if self.role is Role.LEADER:
            pr = self._prs.get(self.id)
            if pr is not None and pr.ack(self._log.persisted_last()):
                self._maybe_commit()

    # ------------------------------------------------------------------ roles
    def _promotable(self) -> bool:
        return self.id in self.voters and self._log.pending_snapshot is None

    def _reset(self, term: int) -> None:
        if term != self.term:
            self.term = term
            self.voted_for = None
        self.leader_id = None
        self._election_elapsed = 0
        self._heartbeat_elapsed = 0
        t = self.config.election_timeout_ticks
        self._randomized_timeout = t + self._rng.randrange(t)
        self._votes = {}
        self._prs = {}
        self._transferee = None
        self._bcast_entries = self._bcast_commit = False

    def _become_follower(self, term: int, leader: int | None) -> None:
        self._reset(term)
        self.role = Role.FOLLOWER
        self.leader_id = leader

    def _become_pre_candidate(self) -> None:
        # etcd becomePreCandidate: no term or vote change.
        self.role = Role.PRE_CANDIDATE
        self.leader_id = None
        self._votes = {}

    def _become_candidate(self) -> None:
        self._reset(self.term + 1)
        self.role = Role.CANDIDATE
        self.voted_for = self.id

    def _become_leader(self) -> None:
        self._reset(self.term)
        self.role = Role.LEADER
        self.leader_id = self.id
        end = self._log.end_offset
        for v in self.voters | {self.id}:
            self._prs[v] = _Progress(end)
        self._prs[self.id].match = self._log.persisted_last()
        for pr in self._prs.values():
            pr.recent_active = True
        # Paper §5.4.2 and §8, thesis §6.4: a no-op entry of the new term (a Kafka control
        # batch); no config change before it commits (thesis §4.1 and the 2015 erratum).
        noop = Entry(end, self.term, b"", 1, EntryKind.CONTROL)
        self._append([noop])
        self._pending_config_offset = end
        self._bcast_entries = True

    def _hup(self, transfer: bool, pre_vote: bool | None = None) -> None:
        if pre_vote is None:
            pre_vote = self.config.pre_vote and not transfer
        if pre_vote:
            self._become_pre_candidate()
            term, pre = self.term + 1, True
        else:
            self._become_candidate()
            term, pre = self.term, False
        self._votes[self.id] = True
        if self._tally():
            return
        last_offset, last_term = self._log.last_offset, self._log.last_term
        for v in sorted(self.voters):
            if v != self.id:
                self._send(VoteRequest(self.id, v, term, last_offset, last_term, pre_vote=pre, transfer=transfer))

    def _tally(self) -> bool:
        """Count votes; win or lose the (pre-)election when decided. True if decided."""
        q = len(self.voters) // 2 + 1
        granted = sum(1 for v, g in self._votes.items() if g and v in self.voters)
        rejected = sum(1 for v, g in self._votes.items() if not g and v in self.voters)
        if granted >= q:
            if self.role is Role.PRE_CANDIDATE:
                self._hup(transfer=False, pre_vote=False)  # won the pre-vote: real election
            else:
                self._become_leader()
            return True
        if rejected >= q:
            self._become_follower(self.term, None)
            return True
        return False

    # ------------------------------------------------------------------ handlers
    def _handle_vote_request(self, m: VoteRequest) -> None:
        can_vote = (
            self.voted_for == m.src
            or (self.voted_for is None and self.leader_id is None)
            or (m.pre_vote and m.term > self.term)
        )
        if can_vote and self._log.is_up_to_date(m.last_offset, m.last_term):
            self._send(VoteResponse(self.id, m.src, m.term, granted=True, pre_vote=m.pre_vote))
            if not m.pre_vote:
                self._election_elapsed = 0
                self.voted_for = m.src
        else:
            self._send(VoteResponse(self.id, m.src, self.term, granted=False, pre_vote=m.pre_vote))

    def _step_candidate(self, m: Message) -> None:
        if isinstance(m, VoteResponse):
            if m.pre_vote == (self.role is Role.PRE_CANDIDATE) and m.src not in self._votes:
                self._votes[m.src] = m.granted
                self._tally()
        elif isinstance(m, (Append, Heartbeat, InstallSnapshot)):
            self._become_follower(m.term, m.src)
            self._step_follower(m)

    def _step_follower(self, m: Message) -> None:
        if isinstance(m, (Append, Heartbeat, InstallSnapshot)):
            self._election_elapsed = 0
            self.leader_id = m.src
            if isinstance(m, Append):
                self._handle_append(m)
            elif isinstance(m, Heartbeat):
                self._commit_to(min(m.commit_index, self._log.last_offset))
                self._send(HeartbeatResponse(self.id, m.src, self.term))
            else:
                self._handle_snapshot(m)
        elif isinstance(m, TimeoutNow):
            if self._promotable():
                self._hup(transfer=True)

    def _handle_append(self, m: Append) -> None:
        log = self._log
        if m.prev_offset < self.commit_index:
            # Everything up to our commit index is settled: tell the leader where we are.
            self._send(AppendResponse(self.id, m.src, self.term, True, match_offset=self.commit_index))
            return
        if not _entries_span_ok(m.entries, m.prev_offset):
            return  # malformed: drop
        if log.term_at(m.prev_offset) != m.prev_term:
            hint = log.find_conflict_by_term(m.prev_offset, m.prev_term)
            hint_term = log.term_at(hint)
            self._send(AppendResponse(
                self.id, m.src, self.term, False, reject_offset=m.prev_offset,
                hint_offset=hint, hint_term=hint_term if hint_term is not None else 0,
            ))
            return
        entries = m.entries
        end = log.end_offset
        for i, e in enumerate(entries):
            if e.offset >= end:
                self._append(entries[i:])
                break
            t = log.term_at(e.offset)
            if t is not None and t != e.term:
                if e.offset <= self.commit_index:
                    raise AssertionError(f"conflict at committed offset {e.offset}")
                self._append(entries[i:])  # truncates the conflicting suffix (paper §5.3)
                break
        last_new = entries[-1].last_offset if entries else m.prev_offset
        self._commit_to(min(m.commit_index, last_new))
        self._send(AppendResponse(self.id, m.src, self.term, True, match_offset=last_new))

    def _handle_snapshot(self, m: InstallSnapshot) -> None:
        snap = m.snapshot
        if snap.offset <= self.commit_index:
            self._send(AppendResponse(self.id, m.src, self.term, True, match_offset=self.commit_index))
            return
        if self._log.term_at(snap.offset) == snap.term:
            # Our log already has it (etcd fast-forward): no need to throw anything away.
            self._commit_to(snap.offset)
        else:
            self._log.install_snapshot(snap)
            self.commit_index = snap.offset
            voters = snap.voters if snap.voters is not None else self.voters
            self._config_base = (snap.offset, voters)
            self._configs = []
            self.voters = voters
        self._send(AppendResponse(self.id, m.src, self.term, True, match_offset=snap.offset))

    def _commit_to(self, offset: int) -> None:
        if offset > self.commit_index:
            self.commit_index = offset
            self._compact_configs()

    def _compact_configs(self) -> None:
        configs = self._configs
        i = 0
        while i < len(configs) and configs[i][0] <= self.commit_index:
            i += 1
        if i:
            self._config_base = configs[i - 1]
            del configs[:i]

    # ------------------------------------------------------------------ leader
    def _tick_leader(self) -> None:
        cfg = self.config
        self._heartbeat_elapsed += 1
        self._election_elapsed += 1
        if self._election_elapsed >= cfg.election_timeout_ticks:
            self._election_elapsed = 0
            if cfg.check_quorum:
                active = sum(1 for v in self.voters if v == self.id or self._prs[v].recent_active)
                if active < len(self.voters) // 2 + 1:
                    self._become_follower(self.term, None)  # CheckQuorum: step down
                    return
                for v, pr in self._prs.items():
                    pr.recent_active = v == self.id
            self._transferee = None  # a transfer that did not finish in time is aborted
        for v, pr in self._prs.items():
            if pr.state == _SNAPSHOT:
                pr.snapshot_ticks += 1
                if pr.snapshot_ticks >= cfg.election_timeout_ticks:
                    pr.become_probe(pr.match + 1)  # lost snapshot: retry
        if self._heartbeat_elapsed >= cfg.heartbeat_interval_ticks:
            self._heartbeat_elapsed = 0
            for v, pr in self._prs.items():
                if v != self.id:
                    self._send(Heartbeat(self.id, v, self.term, min(pr.match, self.commit_index)))

    def _step_leader(self, m: Message) -> None:
        pr = self._prs.get(m.src)
        if pr is None or m.src == self.id:
            return
        if isinstance(m, AppendResponse):
            pr.recent_active = True
            if not m.success:
                self._handle_reject(m.src, pr, m)
                return
            news = pr.ack(m.match_offset)
            if pr.state == _SNAPSHOT and pr.match >= pr.snapshot_offset:
                pr.become_replicate()
            if news:
                if pr.state == _PROBE:
                    pr.become_replicate()
                self._maybe_commit()
                if self.role is not Role.LEADER:
                    return
                if m.src == self._transferee and pr.match == self._log.last_offset:
                    self._send(TimeoutNow(self.id, m.src, self.term))
            elif pr.state == _PROBE:
                pr.probe_sent = False
            self._maybe_send_append(m.src, pr, send_if_empty=False)
        elif isinstance(m, HeartbeatResponse):
            pr.recent_active = True
            if pr.state == _PROBE:
                pr.probe_sent = False
            elif pr.state == _REPLICATE and len(pr.inflight) >= self.config.max_inflight_appends:
                pr.inflight.popleft()
            if pr.match < self._log.last_offset:
                self._maybe_send_append(m.src, pr, send_if_empty=True)

    def _handle_reject(self, to: int, pr: _Progress, m: AppendResponse) -> None:
        if m.reject_offset <= pr.match or pr.state == _SNAPSHOT:
            return  # stale
        if pr.state == _PROBE and m.reject_offset != pr.next - 1:
            return  # stale
        log = self._log
        if m.hint_offset >= log.first_offset - 1:
            o = log.find_conflict_by_term(m.hint_offset, m.hint_term)
        else:
            o = m.hint_offset
        pr.become_probe(min(o + 1, m.reject_offset))
        self._maybe_send_append(to, pr, send_if_empty=True)

    def _maybe_send_append(self, to: int, pr: _Progress, send_if_empty: bool) -> None:
        if pr.state == _SNAPSHOT or (pr.state == _PROBE and pr.probe_sent):
            return
        if pr.state == _REPLICATE and len(pr.inflight) >= self.config.max_inflight_appends:
            return
        log = self._log
        nxt = min(pr.next, log.end_offset)
        if nxt < log.first_offset:
            snap = log.snapshot()
            pr.become_snapshot(snap.offset)
            self._send(InstallSnapshot(self.id, to, self.term, snap))
            return
        entries = log.entries(nxt, _UNLIMITED, self.config.max_append_bytes) if nxt < log.end_offset else []
        if not entries and not send_if_empty:
            return
        prev = entries[0].offset - 1 if entries else nxt - 1
        prev_term = log.term_at(prev)
        if prev_term is None:
            snap = log.snapshot()
            pr.become_snapshot(snap.offset)
            self._send(InstallSnapshot(self.id, to, self.term, snap))
            return
        self._send(Append(self.id, to, self.term, prev, prev_term, tuple(entries), self.commit_index))
        if pr.state == _PROBE:
            pr.next = prev + 1
            pr.probe_sent = True
        elif entries:
            pr.next = entries[-1].end_offset
            pr.inflight.append(entries[-1].last_offset)

    def _flush_broadcast(self) -> None:
        if self.role is not Role.LEADER or not (self._bcast_entries or self._bcast_commit):
            self._bcast_entries = self._bcast_commit = False
            return
        send_if_empty = self._bcast_commit
        self._bcast_entries = self._bcast_commit = False
        for v, pr in self._prs.items():
            if v != self.id:
                self._maybe_send_append(v, pr, send_if_empty)

    def _maybe_commit(self) -> None:
        """Paper §5.3/§5.4.2: the largest offset replicated on a quorum of voters, if it was
        written in the current term."""
        voters = self.voters
        if not voters:
            return
        matches = sorted((self._prs[v].match for v in voters), reverse=True)
        m = matches[len(voters) // 2]
        if m > self.commit_index and self._log.term_at(m) == self.term:
            self._commit_to(m)
            self._bcast_commit = True
            if self.id not in self.voters and self.commit_index >= self._configs_offset_of_current():
                self._step_down_after_removal()

    def _step_down_after_removal(self) -> None:
        """Thesis §4.2.2: a leader that removed itself steps down once the change commits. It
        also hands over at once with TimeoutNow to the most up-to-date voter (§3.10) rather than
        leaving the group leaderless for an election timeout."""
        best = max(sorted(self.voters), key=lambda v: self._prs[v].match)
        if self._prs[best].match == self._log.last_offset:
            self._send(TimeoutNow(self.id, best, self.term))
        self._become_follower(self.term, None)

    def _configs_offset_of_current(self) -> int:
        return self._configs[-1][0] if self._configs else self._config_base[0]

    def _propose(self, payload: Any, count: int, kind: EntryKind) -> Entry:
        if self.role is not Role.LEADER:
            raise NotLeader(self.leader_id)
        if self._transferee is not None:
            raise ProposalDropped(f"leadership transfer to {self._transferee} in progress")
        e = Entry(self._log.end_offset, self.term, payload, count, kind)
        self._append([e])
        self._bcast_entries = True
        return e

    def _propose_config(self, voters: frozenset[int]) -> Entry:
        if self.role is not Role.LEADER:
            raise NotLeader(self.leader_id)
        if self.commit_index < self._pending_config_offset or (
            self._configs and self._configs[-1][0] > self.commit_index
        ):
            raise ConfigChangeInProgress("the previous configuration change is not committed yet")
        e = self._propose(encode_voters(voters), 1, EntryKind.CONFIG)
        self._pending_config_offset = e.offset
        return e

    # ------------------------------------------------------------------ log + config
    def _append(self, entries: Sequence[Entry]) -> None:
        """Append to the log (replacing any suffix from ``entries[0].offset``) and apply the
        config entries among them at once (thesis §4.1)."""
        first = entries[0].offset
        self._log.append(entries)
        configs = self._configs
        changed = False
        while configs and configs[-1][0] >= first:
            configs.pop()  # truncated: fall back to the previous configuration
            changed = True
        for e in entries:
            if e.kind == EntryKind.CONFIG:
                configs.append((e.offset, decode_voters(e.payload)))
                changed = True
        if changed:
            self._set_voters(configs[-1][1] if configs else self._config_base[1])

    def _set_voters(self, voters: frozenset[int]) -> None:
        self.voters = voters
        if self.role is not Role.LEADER:
            return
        end = self._log.end_offset
        for v in voters:
            if v not in self._prs:
                pr = self._prs[v] = _Progress(end)
                pr.recent_active = True
        for v in list(self._prs):
            if v not in voters and v != self.id:
                del self._prs[v]
        if self._transferee is not None and self._transferee not in voters:
            self._transferee = None
        self._maybe_commit()

    def _send(self, m: Message) -> None:
        self._msgs.append(m)
