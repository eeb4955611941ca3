"""Moving a group's configuration to a target voter set, one server at a time (the plan of a
partition reassignment, KIP-455, over Raft's single-server changes, thesis §4.1 and §4.2.1).

:func:`next_conf_step` is pure and stateless: given the configuration in effect on the leader,
the target voter set and how far each member has replicated, it names the next change. So a
driver can run the move step by step, and a new leader (after a crash or a transfer) resumes it
from the configuration in its log; cancelling is moving to the original voter set the same way.

Order of the steps (Kafka adds the new replicas, waits for them to join the ISR, then removes
the old ones; here the new ones join as learners so the quorum never waits for them):

1. remove a learner that is not in the target (e.g. left by a cancelled move);
2. add every target server that is not a member as a learner (one change each);
3. promote each learner of the target whose match offset is within ``max_lag_offsets`` of the
   leader's last offset (it must not hold commits back once it counts);
4. once every target server is a voter, remove the voters outside the target, the leader
   last (it keeps leading until the removal commits, then steps down and hands over:
   thesis §4.2.2).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Callable

from litemq.raft.types import ConfState

__all__ = ["ConfStep", "ConfStepKind", "next_conf_step"]


class ConfStepKind(enum.Enum):
    DONE = "done"
    """The configuration is the target (voters = target, no learners outside it)."""
    ADD_LEARNER = "add-learner"
    PROMOTE = "promote"
    REMOVE_LEARNER = "remove-learner"
    REMOVE_VOTER = "remove-voter"
    WAIT_CATCH_UP = "wait-catch-up"
    """A learner of the target is not caught up yet: nothing to propose now."""


@dataclass(frozen=True, slots=True)
class ConfStep:
    """The next step: its ``kind``, the server it concerns (``None`` for DONE) and, for a
    change, the whole configuration to propose (``RaftNode.propose_config(conf.voters,
    conf.learners)``)."""

    kind: ConfStepKind
    node: int | None = None
    conf: ConfState | None = None


def next_conf_step(conf: ConfState, target, leader_id: int, match: Callable[[int], int | None],
                   last_offset: int, max_lag_offsets: int = 0) -> ConfStep:
    """The next single-server change from ``conf`` toward voter set ``target`` (non-empty).

    ``match(node)`` is the leader's match offset of a member (``RaftNode.match_offset``),
    ``last_offset`` the leader's last offset, ``max_lag_offsets`` (>= 0) how far behind a
    learner may be and still be promoted. Raises ``ValueError`` for an empty target."""
    target = frozenset(target)
    if not target:
        raise ValueError("the target voter set is empty")
    voters, learners = conf.voters, conf.learners
    stale = sorted(learners - target)
    if stale:
        n = stale[0]
        return ConfStep(ConfStepKind.REMOVE_LEARNER, n, ConfState(voters, learners - {n}))
    new = sorted(target - voters - learners)
    if new:
        n = new[0]
        return ConfStep(ConfStepKind.ADD_LEARNER, n, ConfState(voters, learners | {n}))
    waiting = None
    for n in sorted(learners & target):
        m = match(n)
        if m is not None and m >= last_offset - max_lag_offsets:
            return ConfStep(ConfStepKind.PROMOTE, n, ConfState(voters | {n}, learners - {n}))
        waiting = n if waiting is None else waiting
    if waiting is not None:
        return ConfStep(ConfStepKind.WAIT_CATCH_UP, waiting)
    extra = sorted(voters - target, key=lambda v: (v == leader_id, v))  # the leader last
    if extra:
        n = extra[0]
        return ConfStep(ConfStepKind.REMOVE_VOTER, n, ConfState(voters - {n}, learners))
    return ConfStep(ConfStepKind.DONE)
