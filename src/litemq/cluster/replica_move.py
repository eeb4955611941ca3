"""Moving one partition's replica set, on one Raft group: the group-level driver under
partition reassignment (issue 20 "Moving data", KIP-455's mechanism).

A partition is a Raft group (:class:`~litemq.cluster.group.RaftGroup`); its replica set is the
group's configuration. :func:`reassign_step` takes one single-server change toward a target
replica set on the group's leader, as :func:`litemq.raft.reconfigure.next_conf_step` plans it:
each new replica joins as a learner (it receives the log but never counts in a quorum), is
promoted to voter once its log reached the commit index (Kafka's condition to join the ISR:
:func:`caught_up_match`) and its match offset is within ``limits.RAFT_PROMOTE_MAX_LAG_OFFSETS``
of the leader's last offset, then the replicas outside the target are removed, the leader
last: it first hands leadership to the most caught-up voter of the target (thesis §3.10), which
then removes it (a leader removing itself would step down without a successor when no voter is
fully caught up, and followers quiescent behind a live leader's broker would not campaign).
Every change is a ``CONFIG`` entry in the partition log, a Raft-internal batch that takes no
Kafka offset.

Stateless: the step is computed from the configuration in effect in the leader's log and the
target, so a driver calls :func:`reassign_step` again (on whichever broker leads now) until it
answers ``DONE``; a new leader resumes where the old one stopped. Cancelling is moving back to
the original replica set the same way. :func:`reassign` runs the steps on this broker until
done, until it stops leading, or until a timeout.

A new replica's group must start with an empty configuration (``RaftGroup(..., voters=())``),
never with the target set (it would count itself a voter before holding the log): it learns its
configuration from the leader's log (the ``CONFIG`` entry that adds it names every member) or
snapshot. The metadata side (recording the target, creating and deleting replicas, the Kafka
APIs) is :mod:`litemq.cluster.reassignment`. Event-loop thread only.
"""

from __future__ import annotations

import asyncio
import enum
import logging
from dataclasses import dataclass
from typing import Iterable, Protocol

from litemq import limits
from litemq.raft import ConfState, NotLeader, RaftError, RaftNode
from litemq.raft.reconfigure import ConfStep, ConfStepKind, next_conf_step

__all__ = ["MOVE_POLL_S", "MovableGroup", "ReassignState", "ReassignStatus", "caught_up_match", "reassign",
           "reassign_step"]

log = logging.getLogger(__name__)

MOVE_POLL_S = 0.05
"""How often :func:`reassign` looks again while a change commits or a learner catches up."""


class MovableGroup(Protocol):
    """What the driver needs of a :class:`~litemq.cluster.group.RaftGroup`: ``node`` (its
    RaftNode), ``failed``, ``wake()`` (tick again) and ``host.mark_dirty(group)``."""

    node: RaftNode
    failed: bool
    host: object

    def wake(self) -> None:
        """End quiescence: the group ticks (and replicates) again."""


class ReassignState(enum.Enum):
    DONE = "done"
    """The configuration is the target and committed: nothing left to do."""
    PROPOSED = "proposed"
    """A change was proposed now (``step`` says which)."""
    WAITING = "waiting"
    """A learner of the target is catching up (``step.node``); call again later."""
    PENDING = "pending"
    """The previous change (or the new leader's first entry) is not committed yet, or a
    leadership transfer is in progress (also the one this leader starts before its own
    removal); call again later."""
    NOT_LEADER = "not-leader"
    """This replica does not lead the group (``leader_id`` if known): drive it there."""


@dataclass(frozen=True, slots=True)
class ReassignStatus:
    """Outcome of one :func:`reassign_step`: ``state``, the configuration in effect on this
    replica, the leader it knows, and the planned ``step`` (``None`` when not the leader)."""

    state: ReassignState
    conf: ConfState
    leader_id: int | None
    step: ConfStep | None = None


def reassign_step(group: MovableGroup, target: Iterable[int],
                  max_lag_offsets: int = limits.RAFT_PROMOTE_MAX_LAG_OFFSETS) -> ReassignStatus:
    """One step of moving ``group``'s replica set to ``target`` (node ids, non-empty), on the
    group's leader: propose the next single-server change (``PROPOSED``), or say why not now
    (``WAITING``, ``PENDING``, ``NOT_LEADER``) or that the move is complete (``DONE``: voters =
    target, no learner, the change committed). Safe to call at any time, any number of times;
    never blocks. Raises ``ValueError`` for an empty target."""
    target = frozenset(target)
    if not target:
        raise ValueError("the target replica set is empty")
    node = group.node
    conf = node.conf_state
    if not node.is_leader or group.failed:
        return ReassignStatus(ReassignState.NOT_LEADER, conf, None if group.failed else node.leader_id)
    if node.transferee is not None:
        return _poke(group, ReassignStatus(ReassignState.PENDING, conf, node.id))
    step = next_conf_step(conf, target, node.id, lambda n: caught_up_match(node, n), node.last_offset,
                          max_lag_offsets)
    if step.kind is ConfStepKind.DONE:
        state = ReassignState.PENDING if node.config_change_pending() else ReassignState.DONE
        return _poke(group, ReassignStatus(state, conf, node.id, step))
    if step.conf is None:  # a learner is catching up
        return _poke(group, ReassignStatus(ReassignState.WAITING, conf, node.id, step))
    if step.kind is ConfStepKind.REMOVE_VOTER and step.node == node.id:
        _hand_over(node, target)
        return _poke(group, ReassignStatus(ReassignState.PENDING, conf, node.id, step))
    try:
        node.propose_config(step.conf.voters, step.conf.learners)
    except NotLeader as exc:
        return ReassignStatus(ReassignState.NOT_LEADER, conf, exc.leader_id)
    except (RaftError, ValueError) as exc:  # the previous change (or this term's first entry) pending
        log.debug("step %s %s deferred: %s", step.kind.value, step.node, exc)
        return _poke(group, ReassignStatus(ReassignState.PENDING, conf, node.id, step))
    return _poke(group, ReassignStatus(ReassignState.PROPOSED, node.conf_state, node.id, step))


def caught_up_match(node: RaftNode, member: int) -> int | None:
    """``member``'s match offset on leader ``node`` once its log reached the commit index
    (Kafka's condition to join the ISR), else None: not promotable yet (a bound in offsets
    alone would promote a learner that holds nothing while the log is short)."""
    m = node.match_offset(member)
    return m if m is not None and m >= node.commit_index else None


def _hand_over(node: RaftNode, target: frozenset[int]) -> None:
    """The leader is the last voter to leave: transfer leadership to the most caught-up voter
    of the target (thesis §3.10); the new leader then removes this one."""
    candidates = [v for v in node.voters if v in target and v != node.id]
    if not candidates:
        return
    to = max(sorted(candidates), key=lambda v: node.match_offset(v) or -1)
    try:
        node.transfer_leadership(to)
        log.info("leaving the replica set: hands leadership to %d first", to)
    except (RaftError, ValueError) as exc:
        log.debug("leadership transfer to %d deferred: %s", to, exc)


def _poke(group: MovableGroup, status: ReassignStatus) -> ReassignStatus:
    """Keep the group ticking and its Ready handled (a quiet group would not append a new
    leader's no-op nor retry a learner's lost append)."""
    if status.state is not ReassignState.DONE:
        group.wake()
        group.host.mark_dirty(group)
    return status


async def reassign(group: MovableGroup, target: Iterable[int], timeout_s: float,
                   max_lag_offsets: int = limits.RAFT_PROMOTE_MAX_LAG_OFFSETS,
                   poll_s: float = MOVE_POLL_S) -> ReassignStatus:
    """Run :func:`reassign_step` on this broker's replica until ``DONE``, ``NOT_LEADER`` (this
    broker lost or handed over leadership, e.g. after removing itself: continue on the new
    leader) or ``timeout_s`` seconds passed (the last status, ``WAITING`` or ``PENDING``)."""
    target = frozenset(target)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while True:
        status = reassign_step(group, target, max_lag_offsets)
        if status.state in (ReassignState.DONE, ReassignState.NOT_LEADER) or loop.time() >= deadline:
            return status
        await asyncio.sleep(poll_s)
