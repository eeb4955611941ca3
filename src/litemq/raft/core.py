"""The state of one member of one Raft group and what every role shares (etcd's ``raft``
struct in ``raft.go``): term and vote, the log, the voter set, the commit index, and the role
transitions ``become_*``. The roles' behaviour lives in step functions over this state:
:mod:`~litemq.raft.follower`, :mod:`~litemq.raft.candidate` and :mod:`~litemq.raft.leader`,
dispatched by the shared :mod:`~litemq.raft.step`; elections are in :mod:`~litemq.raft.election`.

The attributes here are the core's internals, shared by those modules. The caller's API is
:class:`~litemq.raft.node.RaftNode`, a :class:`Raft` with inputs, queries and the Ready cycle.
"""

from __future__ import annotations

import random
from typing import Iterable, Sequence

from litemq import limits
from litemq.raft.config import RaftConfig
from litemq.raft.log import LogView
from litemq.raft.membership import Membership
from litemq.raft.messages import Message, TimeoutNow
from litemq.raft.raft_log import RaftLog
from litemq.raft.tracker import Progress, committed_offset
from litemq.raft.types import ConfState, Entry, EntryKind, HardState, Role

__all__ = ["Raft"]


class Raft:
    """One member of one group: state and shared transitions (see the module docstring).

    ``voters`` and ``learners`` are the configuration in effect at offset ``applied`` (what
    the caller's state machine has applied; by default the log's snapshot offset, whose
    ``voters`` and ``learners`` then win if recorded). Config entries after ``applied`` are
    read back from the log. ``hard_state`` is the last persisted :class:`HardState` (``None``
    on first start). Raises ``ValueError`` for too many voters, a server both voter and
    learner, a persisted commit index beyond the log end (the caller lost acknowledged
    entries) or ``applied`` outside ``[snapshot offset, commit index]``.
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
        self.id = node_id
        self.config = config or RaftConfig()
        self.rng = rng if rng is not None else random.Random(node_id)
        self.raft_log = raft_log = RaftLog(log)
        hs = hard_state or HardState()
        snap = log.snapshot()
        voters, learners = frozenset(voters), frozenset(learners)
        if applied is None:
            applied = snap.offset
            if snap.voters is not None:
                voters, learners = snap.voters, snap.learners
        if len(voters) > limits.RAFT_MAX_VOTERS or len(learners) > limits.RAFT_MAX_VOTERS:
            raise ValueError("too many voters or learners")
        if voters & learners:
            raise ValueError(f"{sorted(voters & learners)} both voter and learner")
        commit = max(hs.commit_index, snap.offset)
        if commit > raft_log.last_offset:
            raise ValueError(f"persisted commit index {commit} is beyond the log end {raft_log.end_offset}")
        if not snap.offset <= applied <= commit:
            raise ValueError(f"applied {applied} not in [{snap.offset}, {commit}]")
        self.term = hs.term
        self.voted_for = hs.voted_for
        self.commit_index = commit
        self.applied = applied
        self.membership = Membership(applied, ConfState(voters, learners))
        if applied + 1 < raft_log.end_offset:
            configs = log.config_entries(applied + 1, raft_log.end_offset)
            if configs:
                self.membership.append(configs)
        conf = self.membership.conf
        self.voters: frozenset[int] = conf.voters
        self.learners: frozenset[int] = conf.learners

        self.role = Role.FOLLOWER
        self.leader_id: int | None = None
        self.leader_log_start_offset = -1
        """Follower: the highest log start offset the current leader sent (-1: none yet)."""
        self.election_elapsed = 0
        self.heartbeat_elapsed = 0
        self.randomized_election_timeout = self.config.election_timeout_ticks
        self.votes: dict[int, bool] = {}
        """(Pre-)candidate: the answers received, by voter (True: granted)."""
        self.progress: dict[int, Progress] = {}
        """Leader: every voter's and learner's progress, its own included (etcd
        ``trk.Progress``); only voters count in quorums."""
        self.lead_transferee: int | None = None
        self.pending_config_offset = -1
        """Leader: offset of its no-op or last config change; no new change before it commits."""
        self.msgs: list[Message] = []
        self.bcast_entries = False
        """Leader: new entries to send to every follower at the next Ready."""
        self.bcast_commit = False
        """Leader: a new commit index to send to every follower at the next Ready."""
        self.recovering = recovering
        """Started on a replaced (empty) disk: grants no vote nor pre-vote, never campaigns and
        answers rejections with ``log_lost``, until caught up (:func:`~litemq.raft.follower.
        maybe_end_recovery`)."""
        self.recovery_term = 0
        """While recovering: the highest term of a message seen (pre-vote messages aside)."""
        self.recovery_match = -1
        """While recovering: the last offset an Append of the current leader showed our log
        shares with it (the bound of a heartbeat's commit index; -1 after a term change)."""
        self.become_follower(self.term, None)

    # ------------------------------------------------------------------ transitions
    def promotable(self) -> bool:
        """May campaign: a voter (never a learner), not recovering, with no snapshot pending."""
        return self.id in self.voters and not self.recovering and self.raft_log.unstable.snapshot is None

    def reset(self, term: int) -> None:
        """Enter ``term`` (forgetting the vote if it is new) and clear the per-role state; a
        new randomized election timeout in ``[T, 2T)`` ticks (paper §5.2)."""
        if term != self.term:
            self.term = term
            self.voted_for = None
        self.leader_id = None
        self.leader_log_start_offset = -1
        self.recovery_match = -1
        self.election_elapsed = 0
        self.heartbeat_elapsed = 0
        t = self.config.election_timeout_ticks
        self.randomized_election_timeout = t + self.rng.randrange(t)
        self.votes = {}
        self.progress = {}
        self.lead_transferee = None
        self.bcast_entries = self.bcast_commit = False

    def become_follower(self, term: int, leader: int | None) -> None:
        self.reset(term)
        self.role = Role.FOLLOWER
        self.leader_id = leader

    def become_pre_candidate(self) -> None:
        # etcd becomePreCandidate: no term or vote change.
        self.role = Role.PRE_CANDIDATE
        self.leader_id = None
        self.votes = {}

    def become_candidate(self) -> None:
        self.reset(self.term + 1)
        self.role = Role.CANDIDATE
        self.voted_for = self.id

    def become_leader(self) -> None:
        self.reset(self.term)
        self.role = Role.LEADER
        self.leader_id = self.id
        end = self.raft_log.end_offset
        for v in self.voters | self.learners | {self.id}:
            self.progress[v] = Progress(end)
        self.progress[self.id].match = self.raft_log.persisted_last()
        for pr in self.progress.values():
            pr.recent_active = True
        # Paper §5.4.2 and §8, thesis §6.4: a no-op entry of the new term (a Kafka control
        # batch); no config change before it commits (thesis §4.1 and the 2015 erratum).
        # With noop_only_when_needed and nothing of earlier terms left to commit, no no-op:
        # an empty Append announces the leader, and pending_config_offset = end still holds
        # config changes back until an entry of this term commits.
        self.pending_config_offset = end
        if self.config.noop_only_when_needed and self.commit_index >= self.raft_log.last_offset:
            self.bcast_commit = True  # empty Appends: followers learn the leader at once
        else:
            self.append_noop()  # broadcast with the next Ready

    def append_noop(self) -> Entry:
        """Leader: append a no-op entry of the current term (a Kafka LEADER_CHANGE batch)."""
        noop = Entry(self.raft_log.end_offset, self.term, b"", 1, EntryKind.CONTROL)
        self.append([noop])
        self.bcast_entries = True
        return noop

    # ------------------------------------------------------------------ log, config, commit
    def append(self, entries: Sequence[Entry]) -> None:
        """Append to the log (replacing any suffix from ``entries[0].offset``) and apply the
        config entries among them at once (thesis §4.1)."""
        self.raft_log.append(entries)
        if self.membership.append(entries):
            self.set_conf(self.membership.conf)

    def set_conf(self, conf: ConfState) -> None:
        """A new configuration is in effect; a leader tracks the new voters and learners (and
        forgets removed ones; a promoted learner keeps its progress), aborts a transfer to a
        server that is no longer a voter and re-counts its quorum."""
        voters = self.voters = conf.voters
        self.learners = conf.learners
        if self.role is not Role.LEADER:
            return
        end = self.raft_log.end_offset
        members = conf.members
        for v in members:
            if v not in self.progress:
                pr = self.progress[v] = Progress(end)
                pr.recent_active = True
        for v in list(self.progress):
            if v not in members and v != self.id:
                del self.progress[v]
        if self.lead_transferee is not None and self.lead_transferee not in voters:
            self.lead_transferee = None
        self.maybe_commit()

    def commit_to(self, offset: int) -> None:
        if offset > self.commit_index:
            self.commit_index = offset
            self.membership.commit_to(offset)

    def maybe_commit(self) -> None:
        """Leader: commit the largest offset replicated on a quorum of voters, if it was
        written in the current term (paper §5.3/§5.4.2)."""
        voters = self.voters
        if not voters:
            return
        m = committed_offset(self.progress, voters)
        if m > self.commit_index and self.raft_log.term_at(m) == self.term:
            self.commit_to(m)
            if self.config.eager_commit_broadcast:
                self.bcast_commit = True
            if self.id not in self.voters and self.commit_index >= self.membership.offset:
                self.step_down_after_removal()

    def step_down_after_removal(self) -> None:
        """Thesis §4.2.2: a leader that removed itself steps down once the change commits. It
        also hands over at once with TimeoutNow to the most up-to-date voter (§3.10) rather than
        leaving the group leaderless for an election timeout."""
        best = max(sorted(self.voters), key=lambda v: self.progress[v].match)
        if self.progress[best].match == self.raft_log.last_offset:
            self.send(TimeoutNow(self.id, best, self.term))
        self.become_follower(self.term, None)

    def send(self, m: Message) -> None:
        """Queue ``m`` for the next Ready."""
        self.msgs.append(m)
