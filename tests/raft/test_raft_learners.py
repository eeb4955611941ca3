"""Learners (thesis §4.2.1, etcd) and single-server configuration changes of the Raft core."""

from __future__ import annotations

import pytest

from litemq.raft import (
    ConfigChangeInProgress,
    ConfState,
    Entry,
    EntryKind,
    MemoryLog,
    RaftConfig,
    RaftNode,
    Role,
    Snapshot,
    VoteRequest,
    decode_config,
    decode_voters,
    encode_config,
    encode_voters,
)
from litemq.raft.membership import check_single_change

from tests.raft.raft_harness import Cluster


def _settle(c: Cluster, ticks: int = 3) -> None:
    c.pump()
    c.tick(ticks)


def _with_learner(seed: int = 5, learner: int = 4, config: RaftConfig | None = None):
    c = Cluster(ids=(1, 2, 3), seed=seed, config=config)
    leader = c.wait_leader()
    c.add_node(learner)
    leader.propose_add_learner(learner)
    _settle(c)
    return c, leader


# ------------------------------------------------------------------ the config payload
def test_config_payload_round_trip_and_the_voters_only_form():
    assert encode_config({3, 1, 2}) == encode_voters({1, 2, 3})  # no learners: the old payload
    assert decode_config(encode_voters({1, 2})) == ConfState(frozenset({1, 2}))
    both = encode_config({1, 2, 3}, {7, 4})
    assert decode_config(both) == ConfState(frozenset({1, 2, 3}), frozenset({4, 7}))
    assert decode_voters(both) == {1, 2, 3}


@pytest.mark.parametrize("payload", [
    b"", b"\x00\x00\x00", b"\x00\x00\x00\x02\x00\x00\x00\x01",            # truncated
    encode_voters({1}) + b"\x00",                                          # trailing bytes
    encode_voters({1}) + b"\x00\x00\x00\x00",                              # empty learner list
    encode_voters({1}) + encode_voters({1}),                               # voter and learner
    b"\x00\x00\x00\x02\x00\x00\x00\x01\x00\x00\x00\x01",                   # a voter twice
    b"\xff\xff\xff\xff",                                                   # absurd count
])
def test_malformed_config_payloads_are_refused(payload):
    with pytest.raises(ValueError):
        decode_config(payload)


@pytest.mark.parametrize("old, new, ok", [
    (({1, 2, 3}, ()), ({1, 2, 3}, {4}), True),          # add a learner
    (({1, 2, 3}, {4}), ({1, 2, 3, 4}, ()), True),       # promote it
    (({1, 2, 3}, {4}), ({1, 2, 3}, ()), True),          # remove it
    (({1, 2, 3}, ()), ({1, 2}, ()), True),              # remove a voter
    (({1, 2, 3}, ()), ({1, 2}, {3}), True),             # demote a voter
    (({1, 2, 3}, ()), ({1, 2, 3, 4}, ()), True),        # add a voter directly
    (({1, 2, 3}, ()), ({1, 2, 3}, {4, 5}), False),      # two learners at once
    (({1, 2, 3}, {4}), ({2, 3, 4}, ()), False),         # promote and remove at once
    (({1, 2, 3}, ()), ({3, 4, 5}, ()), False),          # a whole new set
    (({1, 2, 3}, ()), ({1, 2, 3}, ()), False),          # no change
    (({1}, ()), ((), {1}), False),                      # no voter left
    (({1, 2}, ()), ({1, 2}, {2}), False),               # voter and learner
])
def test_single_server_change_rule(old, new, ok):
    o = ConfState(frozenset(old[0]), frozenset(old[1]))
    n = ConfState(frozenset(new[0]), frozenset(new[1]))
    if ok:
        check_single_change(o, n)
    else:
        with pytest.raises(ValueError):
            check_single_change(o, n)


# ------------------------------------------------------------------ learners in the core
def test_learner_receives_the_log_and_has_progress_but_no_vote_in_commits():
    c, leader = _with_learner()
    assert leader.conf_state == ConfState(frozenset({1, 2, 3}), frozenset({4}))
    learner = c.nodes[4]
    assert learner.conf_state == leader.conf_state and learner.role is Role.FOLLOWER
    e = leader.propose(b"x", count=3)
    _settle(c)
    assert learner.commit_index >= e.last_offset and c.logs[4].entry_at(e.offset) == e
    assert leader.match_offset(4) == leader.last_offset and 4 not in leader.match_offsets()
    assert leader.match_offset(9) is None and learner.match_offset(4) is None
    assert leader.active_voters() == {1, 2, 3}
    c.add_node(5)
    leader.propose_add_learner(5)
    _settle(c)
    # cut the leader off from both other voters: leader + 2 learners (3 of 5 members) are
    # not a quorum of the voters
    others = [v for v in (1, 2, 3) if v != leader.id]
    for v in others:
        c.blocked |= {(leader.id, v), (v, leader.id)}
    e2 = leader.propose(b"y")
    c.pump()
    c.deliver()
    assert leader.match_offset(4) >= e2.offset and leader.match_offset(5) >= e2.offset  # the learners have it
    assert leader.commit_index < e2.offset  # ... and they do not count


def test_learner_never_campaigns_nor_is_asked_for_a_vote():
    c, leader = _with_learner(seed=6)
    c.crash(leader.id)
    c.sent.clear()
    c.tick(80)
    new = c.wait_leader()
    assert new.id != 4 and c.nodes[4].role is Role.FOLLOWER and c.nodes[4].leader_id == new.id
    votes = [m for m in c.sent if isinstance(m, VoteRequest)]
    assert votes and all(m.src != 4 and m.dst != 4 for m in votes)
    # alone, the learner never campaigns either
    c.isolate(4)
    c.sent.clear()
    c.tick(100)
    assert not any(isinstance(m, VoteRequest) for m in c.sent) and c.nodes[4].role is Role.FOLLOWER
    c.nodes[4].campaign()
    assert c.nodes[4].role is Role.FOLLOWER


def test_add_learner_catch_up_promote_then_remove_the_leader():
    """The reassignment path: {1,2,3} -> {2,3,4} when the leader is one of those removed."""
    c = Cluster(ids=(1, 2, 3), seed=7)
    leader = c.wait_leader()
    for k in range(20):
        leader.propose(b"%d" % k, count=2)
    _settle(c)
    c.add_node(4)  # an empty log: it catches up as a learner first
    leader.propose_add_learner(4)
    assert leader.config_change_pending()
    _settle(c)
    assert not leader.config_change_pending()
    assert leader.match_offset(4) == leader.last_offset
    leader.propose_promote_learner(4)
    _settle(c)
    assert leader.conf_state == ConfState(frozenset({1, 2, 3, 4}))
    assert c.nodes[4].conf_state == leader.conf_state
    old_id = leader.id
    e = leader.propose_remove_voter(old_id)
    _settle(c, 10)
    assert leader.role is not Role.LEADER  # stepped down once the change committed
    new = c.wait_leader()
    assert new.id != old_id and new.voters == {1, 2, 3, 4} - {old_id}
    assert new.commit_index >= e.offset and new.propose(b"after").term == new.term


def test_one_change_at_a_time_and_promotion_only_of_learners():
    c = Cluster(ids=(1, 2, 3), seed=8)
    leader = c.wait_leader()
    c.add_node(4)
    c.add_node(5)
    with pytest.raises(ValueError):
        leader.propose_promote_learner(4)  # not a learner
    with pytest.raises(ValueError):
        leader.propose_config({1, 2, 3}, {4, 5})  # two servers at once
    leader.propose_add_learner(4)
    with pytest.raises(ConfigChangeInProgress):
        leader.propose_add_learner(5)  # the first is not committed yet
    _settle(c)
    leader.propose_add_learner(5)
    _settle(c)
    assert leader.conf_state == ConfState(frozenset({1, 2, 3}), frozenset({4, 5}))
    leader.propose_remove_learner(5)
    _settle(c)
    assert leader.learners == {4}


def test_promoted_learner_keeps_its_progress():
    c, leader = _with_learner(seed=9)
    match = leader.match_offset(4)
    leader.propose_promote_learner(4)
    assert leader.match_offset(4) == match  # not reset to -1 by the promotion
    _settle(c)
    assert leader.voters == {1, 2, 3, 4}


def test_restart_rebuilds_the_configuration_from_the_log():
    c, leader = _with_learner(seed=10)
    leader.propose(b"x")
    _settle(c)
    for i in (1, 2, 3, 4):
        c.crash(i)
        node = c.start(i)  # snapshot voters {1,2,3}, the CONFIG entry read back from the log
        assert node.conf_state == ConfState(frozenset({1, 2, 3}), frozenset({4}))
    c.wait_leader()


def test_snapshot_carries_the_learners():
    """A server brought up by InstallSnapshot learns the learners in effect there."""
    c, leader = _with_learner(seed=11)
    leader.propose(b"x")
    _settle(c)
    upto = leader.commit_index
    conf = leader.conf_state_at(upto)
    for i in (1, 2, 3, 4):
        log = c.logs[i]
        log.compact(Snapshot(upto, log.term_at(upto), conf.voters, None, conf.learners))
    c.add_node(5)
    leader.propose_add_learner(5)
    _settle(c, 5)
    snap = c.logs[5].snapshot()
    assert (snap.offset, snap.voters, snap.learners) == (upto, {1, 2, 3}, {4})
    assert c.nodes[5].conf_state == ConfState(frozenset({1, 2, 3}), frozenset({4, 5}))
    c.crash(5)
    assert c.start(5).conf_state == ConfState(frozenset({1, 2, 3}), frozenset({4, 5}))


def test_a_truncated_config_entry_is_undone():
    c, leader = _with_learner(seed=12)
    # the leader appends a promotion no follower gets, then loses leadership
    c.isolate(leader.id)
    leader.propose_promote_learner(4)
    assert leader.voters == {1, 2, 3, 4}
    c.tick(60)
    new = c.nodes[next(i for i in c.leaders() if i != leader.id)]
    assert new.conf_state == ConfState(frozenset({1, 2, 3}), frozenset({4}))
    new.propose(b"newer")
    c.heal()
    _settle(c, 10)
    assert leader.role is Role.FOLLOWER and leader.conf_state == ConfState(frozenset({1, 2, 3}), frozenset({4}))


def test_old_voters_only_config_entries_still_apply():
    """A log written by an earlier version (voters-only CONFIG payload) restarts fine."""
    entries = [Entry(0, 1, b"a"), Entry(1, 1, encode_voters({1, 2}), 1, EntryKind.CONFIG)]
    node = RaftNode(1, {1, 2, 3}, MemoryLog(Snapshot(-1, 0, frozenset({1, 2, 3})), entries))
    assert node.conf_state == ConfState(frozenset({1, 2}))
    assert node.soft_state.learners == frozenset()


def test_an_idle_new_leader_has_no_change_pending_and_appends_its_noop_when_asked():
    """A partition's new leader on a fully committed log skips its no-op: no configuration
    change is pending (a finished move is reported done), and the first change it is asked for
    appends the no-op and is refused until that commits."""
    c = Cluster(ids=(1, 2, 3), seed=13, config=RaftConfig(noop_only_when_needed=True))
    leader = c.wait_leader()
    c.add_node(4)
    _settle(c)
    with pytest.raises(ConfigChangeInProgress):
        leader.propose_add_learner(4)  # its no-op first
    _settle(c)
    leader.propose_add_learner(4)
    _settle(c)
    assert leader.learners == {4} and not leader.config_change_pending()
    other = next(i for i in (1, 2, 3) if i != leader.id)
    leader.transfer_leadership(other)
    _settle(c, 5)
    new = c.nodes[other]
    assert new.role is Role.LEADER and new.log_end_offset == leader.log_end_offset  # no no-op
    assert not new.config_change_pending() and not new.config_change_allowed()
    end = new.log_end_offset
    with pytest.raises(ConfigChangeInProgress):
        new.propose_promote_learner(4)
    assert new.log_end_offset == end + 1 and not new.config_change_pending()  # its no-op
    _settle(c)
    new.propose_promote_learner(4)
    assert new.config_change_pending()
    _settle(c)
    assert new.voters == {1, 2, 3, 4} and not new.config_change_pending()
