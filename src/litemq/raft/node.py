"""The Raft state machine, in the style of etcd's raft (the "Ready" model).

:class:`RaftNode` is pure: no I/O, no clock (time advances only through :meth:`RaftNode.tick`),
no threads, and no randomness except the seeded ``random.Random`` it is given. Inputs are
:meth:`~RaftNode.tick`, :meth:`~RaftNode.step` (a received message), :meth:`~RaftNode.propose`,
:meth:`~RaftNode.propose_config` (and its shorthands ``propose_add_learner``,
``propose_promote_learner``, ``propose_add_voter``, ``propose_remove_voter``,
``propose_remove_learner``) and :meth:`~RaftNode.transfer_leadership`. Outputs are collected in a :class:`Ready`, which the
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

:class:`RaftNode` is etcd's ``RawNode`` over etcd's ``raft``: it adds the inputs, the queries
and the Ready cycle to :class:`~litemq.raft.core.Raft` (state and role transitions). The
protocol is in step functions over that state: :mod:`~litemq.raft.step` (the shared ``Step``:
terms, leader lease, PreVote), :mod:`~litemq.raft.election`, :mod:`~litemq.raft.follower`,
:mod:`~litemq.raft.candidate`, :mod:`~litemq.raft.leader`; followers' progress and quorums are
in :mod:`~litemq.raft.tracker`, the voter sets by offset in :mod:`~litemq.raft.membership`, the
log in :mod:`~litemq.raft.raft_log` and :mod:`~litemq.raft.unstable`.

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
- commit only of current-term entries by counting replicas (paper §5.4.2); a new leader
  first appends a ``CONTROL`` no-op entry (paper §8, thesis §6.4) so earlier entries commit
  (with ``RaftConfig.noop_only_when_needed`` only when its log holds entries beyond its
  commit index);
- snapshots (thesis §5): a follower whose next offset is below the leader's log start offset
  receives :class:`~litemq.raft.messages.InstallSnapshot` (for a partition: "start afresh");
- leadership transfer with TimeoutNow (thesis §3.10);
- single-server membership changes (thesis §4.1): a ``CONFIG`` entry takes effect as soon as
  it is appended (and is undone if truncated); a new change is refused until the previous one
  is committed and the leader has committed an entry of its own term (thesis §4.1, the fix
  published on raft-dev in 2015); a leader that removed itself steps down once the change is
  committed (thesis §4.2.2);
- a replaced disk (``recovering``): a member that lost its log and vote votes again only once
  caught up with a leader, and never in a term it may have voted in (KIP-853's directory id);
- learners (thesis §4.2.1, etcd): members that receive the log (appends, snapshots, a
  progress on the leader) but never count in commit or election quorums and never campaign;
  a new server joins as a learner, catches up, and is promoted by a ``CONFIG`` change.
"""

from __future__ import annotations

import random
from typing import Any, Iterable

from litemq import limits
from litemq.raft import leader
from litemq.raft import step as shared_step
from litemq.raft.config import RaftConfig
from litemq.raft.core import Raft
from litemq.raft.election import hup
from litemq.raft.errors import ConfigChangeInProgress, NotLeader, ProposalDropped, RaftError
from litemq.raft.log import LogView
from litemq.raft.raft_log import UNLIMITED
from litemq.raft.ready import Ready
from litemq.raft.types import ConfState, Entry, EntryKind, HardState, Role, SoftState

__all__ = [
    "ConfigChangeInProgress",
    "NotLeader",
    "ProposalDropped",
    "RaftConfig",
    "RaftError",
    "RaftNode",
    "Ready",
]


class RaftNode(Raft):
    """One member of one Raft group. See the module docstring for the contract.

    ``voters`` and ``learners`` are the configuration in effect at offset ``applied`` (what
    the caller's state machine has applied; by default the log's snapshot offset, whose
    ``voters`` and ``learners`` then win if recorded). Config entries after ``applied`` are
    read back from the log on start. ``hard_state`` is the last persisted :class:`HardState`
    (``None`` on first start). Raises ``ValueError`` as :class:`~litemq.raft.core.Raft` does.

    ``recovering=True`` starts a member whose disk was replaced (its log and hard state are
    gone: KIP-853 would call it a new voter directory). Raft's safety rests on every voter
    keeping what it acknowledged and the vote it cast in each term; this one lost both, so
    until it has caught up it is a voter in name only: it grants no vote nor pre-vote, never
    campaigns (nor on TimeoutNow), takes no commit index from heartbeats and flags its append
    rejections ``log_lost`` so the leader forgets the old disk's match point. Its appends are
    acknowledged as usual (they are durable now). It leaves that state (:attr:`recovering`
    False) once its commit index reaches a commit index its leader sent that names an entry
    of the leader's own term, with no later term seen; it then records a vote for that leader
    in that term, so it never votes again in a term the old disk may have voted in. The
    caller keeps the state across restarts (start with ``recovering=True`` again until it
    ends). Assumes the old disk's messages were delivered or lost before the new one starts.
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
        learners: Iterable[int] = (),
        recovering: bool = False,
    ) -> None:
        super().__init__(node_id, voters, log, config, rng, hard_state, applied, learners, recovering)
        self._persisted_hs = hard_state or HardState()
        self._outstanding: Ready | None = None
        self._prev_soft: SoftState | None = None

    # ------------------------------------------------------------------ queries
    @property
    def high_watermark(self) -> int:
        """Kafka high watermark (exclusive) = commit index + 1; never goes backwards."""
        return self.commit_index + 1

    @property
    def log_end_offset(self) -> int:
        """Log end offset including entries not persisted yet."""
        return self.raft_log.end_offset

    @property
    def last_offset(self) -> int:
        return self.raft_log.last_offset

    def term_at(self, offset: int) -> int | None:
        """Term of ``offset`` in this node's log (including its unpersisted tail)."""
        return self.raft_log.term_at(offset)

    def entries(self, start: int, end: int, max_bytes: int = UNLIMITED) -> list[Entry]:
        return self.raft_log.entries(start, end, max_bytes)

    @property
    def is_leader(self) -> bool:
        return self.role is Role.LEADER

    @property
    def soft_state(self) -> SoftState:
        return SoftState(self.role, self.leader_id, self.voters, self.learners)

    @property
    def hard_state(self) -> HardState:
        return HardState(self.term, self.voted_for, self.commit_index)

    @property
    def transferee(self) -> int | None:
        return self.lead_transferee

    def match_offsets(self) -> dict[int, int]:
        """Leader only: last offset known replicated on each voter, itself included (replica
        lag reporting, transfer targets); empty elsewhere. Learners are left out (they cannot
        take leadership): ask :meth:`match_offset`."""
        voters = self.voters
        return {v: pr.match for v, pr in self.progress.items() if v in voters or v == self.id}

    def match_offset(self, member: int) -> int | None:
        """Leader only: last offset known replicated on voter or learner ``member`` (-1: none
        yet); ``None`` when this node is not the leader or ``member`` is not a member."""
        pr = self.progress.get(member) if self.role is Role.LEADER else None
        return None if pr is None else pr.match

    def member_log_start_offsets(self) -> dict[int, int]:
        """Leader only: the log start offset each other voter and learner last reported in an
        answer of this term (:class:`~litemq.raft.messages.AppendResponse` /
        ``HeartbeatResponse``; -1: none yet), e.g. for a partition's low watermark (Kafka's
        ``Partition.lowWatermarkIfLeader``); empty elsewhere."""
        if self.role is not Role.LEADER:
            return {}
        me = self.id
        return {v: pr.log_start_offset for v, pr in self.progress.items() if v != me}

    @property
    def conf_state(self) -> ConfState:
        """The configuration in effect (the latest in the log, committed or not, thesis §4.1)."""
        return ConfState(self.voters, self.learners)

    def conf_state_at(self, offset: int) -> ConfState | None:
        """Configuration in effect at ``offset``, or ``None`` if that is older than what the
        node tracks (the latest config at or below its commit index)."""
        return self.membership.conf_at(offset)

    @property
    def committed_conf_state(self) -> tuple[int, ConfState]:
        """``(offset, configuration)`` of the latest configuration at or below the commit
        index (its ``CONFIG`` entry's offset, or the snapshot / restart point)."""
        return self.membership.base

    def config_change_pending(self) -> bool:
        """A ``CONFIG`` entry in this node's log is not committed yet: the configuration in
        effect (:attr:`conf_state`) may still be undone. (Whether a leader may propose the next
        change is :meth:`config_change_allowed`; a leader that skipped its no-op is not
        pending, it appends the no-op when asked for a change.)"""
        return self.membership.uncommitted(self.commit_index)

    def voters_at(self, offset: int) -> frozenset[int] | None:
        """Voter set in effect at ``offset`` (config entries up to it applied), or ``None`` if
        that is older than what the node tracks (the latest config at or below its commit
        index). Record it with the log start offset when retention or a snapshot moves it."""
        return self.membership.voters_at(offset)

    def active_voters(self) -> frozenset[int]:
        """Leader only: voters heard from in the current CheckQuorum window (itself included),
        e.g. to refuse acks=all produce below ``min.insync.replicas``."""
        voters = self.voters
        return frozenset(v for v, pr in self.progress.items() if v in voters and (pr.recent_active or v == self.id))

    def config_change_allowed(self) -> bool:
        return (
            self.role is Role.LEADER
            and self.lead_transferee is None
            and self.commit_index >= self.pending_config_offset
        )

    # ------------------------------------------------------------------ inputs
    tick = shared_step.tick
    """``tick()``: advance logical time by one tick (the leader's or the election timer, by
    role; :mod:`litemq.raft.step`). Cheap unless a timeout fires."""

    def propose(self, payload: Any, count: int = 1) -> Entry:
        """Append a data entry of ``count`` offsets (a record batch of ``count`` records).
        Returns the entry with its final offset and term (leader epoch); it is committed when
        :attr:`commit_index` reaches ``entry.last_offset`` *with this term still at that
        offset* (a new leader may have replaced it). Raises :class:`NotLeader` or
        :class:`ProposalDropped`."""
        if count < 1:
            raise ValueError("count must be >= 1")
        return leader.propose(self, payload, count, EntryKind.DATA)

    def propose_config(self, voters: Iterable[int], learners: Iterable[int] = ()) -> Entry:
        """Propose the whole new configuration (thesis §4.1, §4.2.1): exactly one server may
        change its role (none / learner / voter) per change, e.g. add a learner, promote a
        learner to voter, remove a voter or a learner. It takes effect on each server as soon
        as appended (a new voter counts in quorums at once, hence: add it as a learner first,
        let it catch up, then promote it). Returns the ``CONFIG`` entry; it is in effect for
        good once :attr:`commit_index` reaches its offset with its term still there.

        Raises ``ValueError`` (not a single-server change, no voter left, a server both voter
        and learner, too many), :class:`NotLeader`, :class:`ProposalDropped` (a leadership
        transfer is in progress) or :class:`ConfigChangeInProgress` (the previous change, or
        the leader's first entry of its term, is not committed yet: retry later; a leader that
        skipped its no-op appends it now)."""
        return leader.propose_config(self, ConfState(frozenset(voters), frozenset(learners)))

    def propose_add_learner(self, node: int) -> Entry:
        """Propose adding ``node`` (not a member) as a learner (:meth:`propose_config`)."""
        if node in self.voters or node in self.learners:
            raise ValueError(f"{node} is already a member")
        return self.propose_config(self.voters, self.learners | {node})

    def propose_promote_learner(self, node: int) -> Entry:
        """Propose making learner ``node`` a voter (:meth:`propose_config`). Promote it once
        caught up (:meth:`match_offset` near :attr:`last_offset`), or commits stall while it
        catches up."""
        if node not in self.learners:
            raise ValueError(f"{node} is not a learner")
        return self.propose_config(self.voters | {node}, self.learners - {node})

    def propose_remove_learner(self, node: int) -> Entry:
        """Propose removing learner ``node`` (:meth:`propose_config`)."""
        if node not in self.learners:
            raise ValueError(f"{node} is not a learner")
        return self.propose_config(self.voters, self.learners - {node})

    def propose_add_voter(self, voter: int) -> Entry:
        """Propose adding one voter directly (thesis §4.1). It counts in quorums as soon as
        appended: prefer :meth:`propose_add_learner` then :meth:`propose_promote_learner`."""
        if voter in self.voters:
            raise ValueError(f"{voter} is already a voter")
        if len(self.voters) >= limits.RAFT_MAX_VOTERS:
            raise ValueError("too many voters")
        return self.propose_config(self.voters | {voter}, self.learners - {voter})

    def propose_remove_voter(self, voter: int) -> Entry:
        """Propose removing one voter (possibly the leader itself, thesis §4.2.2: it keeps
        leading until the change commits, then steps down and hands over with TimeoutNow)."""
        if voter not in self.voters:
            raise ValueError(f"{voter} is not a voter")
        if len(self.voters) == 1:
            raise ValueError("cannot remove the last voter")
        return self.propose_config(self.voters - {voter}, self.learners)

    def transfer_leadership(self, to: int) -> None:
        """Hand leadership to voter ``to`` (thesis §3.10): stop accepting proposals, bring it
        up to date, then send it TimeoutNow. Aborted if not done within an election timeout."""
        leader.transfer_leadership(self, to)

    def campaign(self) -> None:
        """Start an election now (with PreVote if enabled), as if the timeout had fired."""
        if self.role is not Role.LEADER and self.promotable():
            hup(self, transfer=False)

    step = shared_step.step
    """``step(message)``: handle one received message (any order, duplicates and losses are
    fine); the shared Step of :mod:`litemq.raft.step`."""

    # ------------------------------------------------------------------ Ready
    def has_ready(self) -> bool:
        if self.bcast_entries or self.bcast_commit:
            leader.flush_broadcast(self)
        log = self.raft_log
        unstable = log.unstable
        if self.msgs or unstable.entries:
            return True
        if unstable.snapshot is not None or log.truncate_needed() is not None:
            return True
        hs = self._persisted_hs
        if hs.term != self.term or hs.voted_for != self.voted_for or hs.commit_index != self.commit_index:
            return True
        if self._soft_changed():
            return True
        return self.applied < self.commit_index and self.config.apply_entries

    def _soft_changed(self) -> bool:
        """Role, leader or configuration differ from the last Ready's soft state."""
        soft = self._prev_soft
        return (soft is None or soft.role is not self.role or soft.leader_id != self.leader_id
                or soft.voters is not self.voters and soft.voters != self.voters
                or soft.learners is not self.learners and soft.learners != self.learners)

    def ready(self) -> Ready:
        """Collect what the caller must persist, send and apply. Call :meth:`advance` with it
        before the next :meth:`ready`."""
        if self._outstanding is not None:
            raise RuntimeError("advance() the previous Ready first")
        if self.bcast_entries or self.bcast_commit:
            leader.flush_broadcast(self)
        log = self.raft_log
        commit = self.commit_index
        snapshot = log.unstable.snapshot
        committed: tuple[Entry, ...] = ()
        if snapshot is None and self.applied < commit and self.config.apply_entries:
            committed = tuple(log.entries(self.applied + 1, commit + 1, self.config.max_apply_bytes))
        old = self._persisted_hs
        vote_changed = old.term != self.term or old.voted_for != self.voted_for
        # The states are built only when they changed (most Readies carry neither).
        hs = self.hard_state if vote_changed or old.commit_index != commit else None
        soft = self.soft_state if self._soft_changed() else None
        truncate_to = log.truncate_needed()
        entries = tuple(log.unstable.entries)
        rd = Ready(hs, soft, snapshot, truncate_to, entries, tuple(self.msgs), committed, commit,
                   bool(snapshot is not None or entries or truncate_to is not None or vote_changed))
        self.msgs = []
        self._outstanding = rd
        return rd

    def advance(self, rd: Ready) -> None:
        """Acknowledge that ``rd`` was fully handled (persisted, sent, applied)."""
        if rd is not self._outstanding:
            raise RuntimeError("advance() with a Ready that is not the outstanding one")
        self._outstanding = None
        if rd.snapshot is not None:
            self.applied = max(self.applied, rd.snapshot.offset)
        self.raft_log.unstable.stable_to(rd.snapshot, rd.entries)
        if rd.hard_state is not None:
            self._persisted_hs = rd.hard_state
        if rd.soft_state is not None:
            self._prev_soft = rd.soft_state
        if rd.committed_entries:
            self.applied = max(self.applied, rd.committed_entries[-1].last_offset)
        elif not self.config.apply_entries and rd.snapshot is None:
            self.applied = max(self.applied, rd.commit_index)
        if self.role is Role.LEADER:
            pr = self.progress.get(self.id)
            if pr is not None and pr.ack(self.raft_log.persisted_last()):
                self.maybe_commit()
