"""KIP-848 server-side assignors and member reconciliation (pure: no broker).

The rules pinned here: the uniform assignor is balanced and moves only what must move; range
gives contiguous ranges in member id order; a member gives up partitions before it moves to a
newer epoch, and a partition is handed to its new owner only once the old one released it.
"""

from __future__ import annotations

import random

import pytest

from litemq.coordinator.assignors import (ASSIGNORS, MemberSubscription, RangeAssignor, UniformAssignor,
                                          configured_assignors)
from litemq.coordinator.consumer_group import ConsumerGroup, ConsumerGroupMember, MemberState, reconcile


def subs(*members, topics=("t",)):
    return {m: MemberSubscription(frozenset(topics)) for m in members}


def flat(assignment):
    return {(t, p) for t, ps in assignment.items() for p in ps}


def test_uniform_balances_and_moves_only_what_must_move():
    u = UniformAssignor()
    one = u.assign(subs("a"), {"t": 6}, {})
    assert flat(one["a"]) == {("t", p) for p in range(6)}
    two = u.assign(subs("a", "b"), {"t": 6}, one)
    assert len(flat(two["a"])) == len(flat(two["b"])) == 3
    assert flat(two["a"]) <= flat(one["a"])  # a only lost partitions
    three = u.assign(subs("a", "b", "c"), {"t": 6}, two)
    assert sorted(len(flat(three[m])) for m in "abc") == [2, 2, 2]
    # a and b each give exactly one partition to c; nothing else moves
    assert len(flat(two["a"]) - flat(three["a"])) == 1 and flat(three["a"]) <= flat(two["a"])
    assert len(flat(two["b"]) - flat(three["b"])) == 1 and flat(three["b"]) <= flat(two["b"])
    # c leaves: its two partitions go to a and b, a and b keep theirs
    after = u.assign(subs("a", "b"), {"t": 6}, {m: three[m] for m in "ab"})
    assert flat(three["a"]) <= flat(after["a"]) and flat(three["b"]) <= flat(after["b"])
    assert len(flat(after["a"])) == len(flat(after["b"])) == 3


def test_uniform_heterogeneous_subscriptions_respected():
    u = UniformAssignor()
    members = {"a": MemberSubscription(frozenset({"x"})), "b": MemberSubscription(frozenset({"x", "y"})),
               "c": MemberSubscription(frozenset({"y"}))}
    out = u.assign(members, {"x": 4, "y": 2, "z": 3}, {})
    allp = set().union(*(flat(out[m]) for m in out))
    assert allp == {("x", p) for p in range(4)} | {("y", 0), ("y", 1)}
    for m, s in members.items():
        assert {t for t, _ in flat(out[m])} <= s.topics
    assert max(len(flat(v)) for v in out.values()) - min(len(flat(v)) for v in out.values()) <= 1


@pytest.mark.parametrize("seed", range(20))
def test_uniform_random_is_a_partition_of_the_topics(seed):
    rnd = random.Random(seed)
    u = UniformAssignor()
    topics = {f"t{i}": rnd.randint(1, 7) for i in range(3)}
    current = {}
    for _ in range(6):
        names = [f"m{i}" for i in rnd.sample(range(8), rnd.randint(1, 6))]
        members = subs(*names, topics=tuple(topics))
        out = u.assign(members, topics, current)
        seen = [tp for m in out for tp in flat(out[m])]
        assert len(seen) == len(set(seen)) == sum(topics.values())
        counts = [len(flat(out[m])) for m in out]
        assert max(counts) - min(counts) <= 1
        kept = {m: flat(current.get(m, {})) for m in names}
        quota = sum(topics.values()) // len(names)
        for m in names:  # a member keeps what it had, up to its fair share
            assert len(kept[m] & flat(out[m])) >= min(len(kept[m]), quota)
        current = out


def test_range_contiguous_in_member_order():
    out = RangeAssignor().assign(subs("b", "a", "c", topics=("t", "u")), {"t": 7, "u": 3}, {})
    assert out["a"] == {"t": frozenset({0, 1, 2}), "u": frozenset({0})}
    assert out["b"] == {"t": frozenset({3, 4}), "u": frozenset({1})}
    assert out["c"] == {"t": frozenset({5, 6}), "u": frozenset({2})}


def test_configured_assignors():
    assert configured_assignors("uniform,range") == ["uniform", "range"]
    assert configured_assignors("org.apache.kafka.coordinator.group.assignor.RangeAssignor") == ["range"]
    with pytest.raises(ValueError):
        configured_assignors("sticky")
    assert set(ASSIGNORS) == {"uniform", "range"}


def test_revocation_before_assignment():
    """A partition moves in two steps: revoked by its owner (acknowledged in a heartbeat), only
    then assigned to the new owner (KIP-848)."""
    g = ConsumerGroup("g", group_epoch=2, assignment_epoch=2)
    a = ConsumerGroupMember("a", member_epoch=1, assigned={"t": frozenset({0, 1, 2, 3})})
    b = ConsumerGroupMember("b", member_epoch=0)
    for m in (a, b):
        g.add_member(m)
        g.hold(m)
    g.target = {"a": {"t": frozenset({0, 1})}, "b": {"t": frozenset({2, 3})}}

    def step(m, owned):
        g.release(m)
        reconcile(m, g.assignment_epoch, g.target[m.member_id], owned, g.owner_of)
        g.hold(m)

    step(b, {})  # b: its partitions are still held by a
    assert b.state is MemberState.UNRELEASED_PARTITIONS and b.assigned == {} and b.member_epoch == 2
    step(a, None)  # a did not say what it owns: it must revoke 2, 3 first and stays at epoch 1
    assert a.state is MemberState.UNREVOKED_PARTITIONS and a.member_epoch == 1
    assert a.assigned == {"t": frozenset({0, 1})} and a.pending_revocation == {"t": frozenset({2, 3})}
    step(a, {"t": frozenset({0, 1, 2, 3})})  # still owns them
    assert a.state is MemberState.UNREVOKED_PARTITIONS
    step(b, {})
    assert b.assigned == {}  # still not released
    step(a, {"t": frozenset({0, 1})})  # revoked: a moves to epoch 2
    assert a.state is MemberState.STABLE and a.member_epoch == 2 and a.previous_member_epoch == 1
    step(b, {})
    assert b.state is MemberState.STABLE and b.assigned == {"t": frozenset({2, 3})}
    assert g.owners == {("t", 0): "a", ("t", 1): "a", ("t", 2): "b", ("t", 3): "b"}
