"""The pure plans of ``broker decommission`` and ``cluster rebalance`` (cluster/rebalance.py)."""

from __future__ import annotations

import pytest

from litemq.cluster.rebalance import PlanError, decommission_plan, rebalance_plan, replica_counts

BROKERS = [1, 2, 3, 4]


def _applied(assignment, plan):
    return {**assignment, **plan}


def _assignment(lists):
    return {("t", i): list(r) for i, r in enumerate(lists)}


def test_decommission_keeps_rf_spreads_and_takes_the_position():
    a = _assignment([[1, 2, 3], [2, 3, 1], [3, 1, 2], [1, 3, 2], [2, 3, 4]])
    plan = decommission_plan(a, 1, BROKERS)
    assert sorted(plan) == [("t", 0), ("t", 1), ("t", 2), ("t", 3)]  # t-4 has no replica on 1
    after = _applied(a, plan)
    assert all(1 not in r and len(r) == 3 and len(set(r)) == 3 for r in after.values()), after
    assert plan[("t", 0)][0] == 4  # broker 4 takes 1's place as the preferred leader
    assert replica_counts(after, [2, 3, 4]) == {2: 5, 3: 5, 4: 5}


def test_decommission_prefers_an_unused_rack_then_the_least_loaded():
    racks = {1: "a", 2: "a", 3: "b", 4: "b", 5: "c"}
    a = _assignment([[1, 3], [1, 4]])
    assert decommission_plan(a, 1, [1, 2, 3, 4, 5], racks) == {("t", 0): [2, 3], ("t", 1): [5, 4]}  # 2: loaded now
    a = _assignment([[1, 3], [1, 3]])
    assert decommission_plan(a, 1, [1, 2, 3, 4, 5], {1: "a", 2: "a", 3: "b", 4: "b", 5: "b"}) == \
        {("t", 0): [2, 3], ("t", 1): [2, 3]}  # rack a is the only one not used yet


def test_decommission_refused_without_enough_live_brokers():
    a = _assignment([[1, 2, 3], [2, 3, 4]])
    with pytest.raises(PlanError, match=r"fewer live brokers .*t-0 \(replication factor 3\)"):
        decommission_plan(a, 1, [1, 2, 3])  # broker 4 not live
    assert decommission_plan(_assignment([[2, 3]]), 1, [2, 3]) == {}  # nothing on broker 1


def test_rebalance_minimal_moves_and_leaders():
    before = [[1, 2], [2, 3], [3, 1], [1, 2], [2, 3], [3, 1]]
    a = _assignment(before)
    plan = rebalance_plan(a, BROKERS)
    after = _applied(a, plan)
    assert replica_counts(after, BROKERS) == {1: 3, 2: 3, 3: 3, 4: 3}
    assert sum(1 for k in plan if sorted(plan[k]) != sorted(a[k])) == 3  # 3 moves, the minimum
    leads = [r[0] for r in after.values()]
    assert max(leads.count(b) for b in BROKERS) - min(leads.count(b) for b in BROKERS) <= 1, after
    assert rebalance_plan(after, BROKERS) == {}  # balanced: nothing to do


def test_rebalance_never_loses_a_rack_and_skips_dead_brokers():
    racks = {1: "a", 2: "a", 3: "b", 4: "b"}
    a = _assignment([[1, 3], [2, 3], [1, 4], [2, 4], [1, 3], [2, 3]])
    plan = rebalance_plan(a, BROKERS, racks)
    after = _applied(a, plan)
    assert all({racks[r] for r in rs} == {"a", "b"} for rs in after.values()), after
    assert replica_counts(after, BROKERS) == {1: 3, 2: 3, 3: 3, 4: 3}
    # broker 9 is not live: its replicas stay, it is no destination
    a = _assignment([[9, 1], [9, 1], [9, 1], [2, 3]])
    after = _applied(a, rebalance_plan(a, [1, 2, 3]))
    counts = replica_counts(after, [1, 2, 3])
    assert [r.count(9) for r in after.values()] == [1, 1, 1, 0] and max(counts.values()) - min(counts.values()) <= 1, \
        after
