"""Moving a group to a target voter set (raft/reconfigure.py): the pure planner, and the
simulator running whole moves (learner, catch-up, promotion, removals, the leader's too,
cancellations) under message loss, partitions and crashes with every invariant checked."""

from __future__ import annotations

from collections import Counter

import pytest

from litemq.raft import ConfState
from litemq.raft.reconfigure import ConfStepKind, next_conf_step
from litemq.raft.sim import Violation, reassign_config_for, run_seed

K = ConfStepKind


def _cs(voters, learners=()):
    return ConfState(frozenset(voters), frozenset(learners))


def _walk(start: ConfState, target, leader: int, lagging=frozenset()):
    """Apply the planner's steps until DONE (members not in ``lagging`` are caught up)."""
    conf, steps = start, []
    for _ in range(20):
        step = next_conf_step(conf, target, leader, lambda n: 5 if n in lagging else 10, 10, 2)
        steps.append((step.kind, step.node))
        if step.conf is None:
            return conf, steps
        conf = step.conf
    raise AssertionError(steps)


def test_plan_of_a_move_adds_learners_promotes_then_removes_the_leader_last():
    conf, steps = _walk(_cs({1, 2, 3}), {3, 4, 5}, leader=1)
    assert conf == _cs({3, 4, 5})
    assert steps == [(K.ADD_LEARNER, 4), (K.ADD_LEARNER, 5), (K.PROMOTE, 4), (K.PROMOTE, 5),
                     (K.REMOVE_VOTER, 2), (K.REMOVE_VOTER, 1), (K.DONE, None)]


def test_plan_waits_for_a_lagging_learner_and_removes_stale_learners_first():
    conf, steps = _walk(_cs({1, 2, 3}, {9}), {1, 2, 4}, leader=2, lagging={4})
    assert steps == [(K.REMOVE_LEARNER, 9), (K.ADD_LEARNER, 4), (K.WAIT_CATCH_UP, 4)]
    assert conf == _cs({1, 2, 3}, {4})
    # within the lag bound (2 offsets) it is promoted
    step = next_conf_step(conf, {1, 2, 4}, 2, lambda n: 8, 10, 2)
    assert (step.kind, step.conf) == (K.PROMOTE, _cs({1, 2, 3, 4}))
    assert next_conf_step(conf, {1, 2, 4}, 2, lambda n: None, 10, 2).kind is K.WAIT_CATCH_UP


def test_cancel_is_the_same_walk_back_to_the_original_set():
    mid = _cs({1, 2, 3, 4}, {5})  # halfway through {1,2,3} -> {3,4,5}
    conf, steps = _walk(mid, {1, 2, 3}, leader=4)
    assert conf == _cs({1, 2, 3})
    assert steps == [(K.REMOVE_LEARNER, 5), (K.REMOVE_VOTER, 4), (K.DONE, None)]
    assert next_conf_step(_cs({1, 2, 3}), {3, 2, 1}, 1, lambda n: 0, 0).kind is K.DONE
    with pytest.raises(ValueError):
        next_conf_step(mid, set(), 1, lambda n: 0, 0)


SEEDS = 300
STEPS = 1000


def test_reassignments_under_faults_keep_every_invariant_and_complete():
    """Every seed: the voters move from nodes 1..n to the last n nodes while messages are lost,
    the network partitions and nodes crash, the move is cancelled and redone at random; the
    simulator checks its invariants (one leader per term, committed entries never lost,
    logs match, leader completeness, one configuration change at a time) after every step,
    then heals and the move must complete."""
    kinds: Counter[str] = Counter()
    reversed_ = 0
    for seed in range(SEEDS):
        try:
            sim = run_seed(seed, reassign_config_for(seed, STEPS))
        except Violation as v:
            pytest.fail(f"{v}\nreproduce: python -m litemq.raft.sim --reassign --seed {seed} --trace\n"
                        + "\n".join(v.trace[-60:]))
        leader = sim.leader().raft
        assert leader.conf_state == ConfState(sim.target), seed
        kinds.update(s.split()[0] for s in sim.reassign_steps)
        reversed_ += sim.target == frozenset(range(1, sim.cfg.voters + 1))
    assert kinds["add-learner"] and kinds["promote"] and kinds["remove-voter"] and kinds["remove-learner"]
    assert 0 < reversed_ < SEEDS  # some moves ended cancelled, most not
