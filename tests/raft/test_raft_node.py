"""Scenario tests of the Raft core (paper = Ongaro & Ousterhout 2014, thesis = Ongaro 2014)."""

from __future__ import annotations

import random

import pytest
from raft_harness import Cluster

from litemq.raft import (
    Append,
    AppendResponse,
    ConfigChangeInProgress,
    Entry,
    EntryKind,
    HardState,
    Heartbeat,
    InstallSnapshot,
    MemoryLog,
    NotLeader,
    ProposalDropped,
    RaftConfig,
    RaftNode,
    Role,
    Snapshot,
    TimeoutNow,
    VoteRequest,
    decode_voters,
    encode_voters,
)


def _log(terms, voters=frozenset({1, 2, 3})):
    """A MemoryLog with one single-offset entry per term in ``terms``."""
    return MemoryLog(Snapshot(-1, 0, voters), [Entry(i, t, b"e%d" % i) for i, t in enumerate(terms)])


def test_single_voter_commits_after_persisting():
    c = Cluster(ids=(1,))
    c.tick(25)
    n = c.nodes[1]
    assert n.role is Role.LEADER and n.term == 1
    e = n.propose(b"hello", count=5)
    assert (e.offset, e.count, e.term) == (1, 5, 1)
    assert n.commit_index == 0  # not before the Ready was persisted
    c.pump()
    assert n.commit_index == 5 and n.high_watermark == 6
    assert [x.payload for x in c.applied[1]] == [b"", b"hello"]
    assert c.applied[1][0].kind is EntryKind.CONTROL


def test_election_one_leader_and_noop_commits():
    c = Cluster(ids=(1, 2, 3), seed=3)
    leader = c.wait_leader()
    assert len(c.leaders()) == 1
    c.tick(3)
    for n in c.nodes.values():
        assert n.term == leader.term and n.leader_id == leader.id
        assert n.commit_index == 0  # the leader's no-op (§5.4.2)
        assert n.term_at(0) == leader.term


def test_ready_must_be_advanced_before_the_next():
    c = Cluster(ids=(1,))
    n = c.nodes[1]
    n.campaign()
    rd = n.ready()
    with pytest.raises(RuntimeError):
        n.ready()
    n.advance(rd)


def test_proposals_on_a_follower_raise_not_leader_with_hint():
    c = Cluster(seed=1)
    leader = c.wait_leader()
    follower = next(n for n in c.nodes.values() if n is not leader)
    with pytest.raises(NotLeader) as ei:
        follower.propose(b"x")
    assert ei.value.leader_id == leader.id


def test_prevote_keeps_a_rejoining_partitioned_node_from_disrupting():
    """Thesis §9.6: the isolated node pre-votes forever without raising its term."""
    c = Cluster(seed=5)
    leader = c.wait_leader()
    term = leader.term
    loner = next(i for i in c.nodes if i != leader.id)
    c.isolate(loner)
    c.tick(100)
    assert c.nodes[loner].term == term
    assert c.nodes[loner].role is Role.PRE_CANDIDATE
    c.heal()
    c.tick(20)
    assert c.leaders() == [leader.id] and leader.term == term
    assert c.nodes[loner].role is Role.FOLLOWER and c.nodes[loner].leader_id == leader.id


def test_without_prevote_the_rejoining_node_disrupts():
    """The contrast: with PreVote and CheckQuorum off the rejoining node forces a new term."""
    c = Cluster(seed=5, config=RaftConfig(pre_vote=False, check_quorum=False))
    leader = c.wait_leader()
    term = leader.term
    loner = next(i for i in c.nodes if i != leader.id)
    c.isolate(loner)
    c.tick(100)
    assert c.nodes[loner].term > term + 3
    c.heal()
    c.tick(30)
    assert max(n.term for n in c.nodes.values()) > term


def test_leader_lease_ignores_vote_requests():
    """Thesis §4.2.3: a follower that recently heard from a leader ignores higher-term votes."""
    c = Cluster(seed=2)
    leader = c.wait_leader()
    f = next(n for n in c.nodes.values() if n is not leader)
    term = f.term
    f.step(VoteRequest(99, f.id, term + 5, 10**6, term + 4))
    assert f.term == term
    rd = f.ready()
    assert not any(m.dst == 99 for m in rd.messages)  # not even answered
    f.advance(rd)
    # ... unless it is a leadership transfer (TimeoutNow), which bypasses the lease
    f.step(VoteRequest(99, f.id, term + 5, 10**6, term + 4, transfer=True))
    assert f.term == term + 5 and f.voted_for == 99


def test_check_quorum_leader_steps_down_when_cut_off():
    c = Cluster(seed=7)
    leader = c.wait_leader()
    c.isolate(leader.id)
    # activity is sampled once per election timeout, so stepping down takes at most two
    c.tick(2 * c.config.election_timeout_ticks)
    assert leader.role is Role.FOLLOWER and leader.leader_id is None
    # the majority side elects a new leader in a later term
    c.tick(40)
    others = [i for i in c.leaders() if i != leader.id]
    assert len(others) == 1 and c.nodes[others[0]].term > leader.term


def test_stale_leader_steps_down_on_higher_term_response():
    c = Cluster(seed=4, config=RaftConfig(check_quorum=False))
    old = c.wait_leader()
    c.isolate(old.id)
    c.tick(60)
    new = [i for i in c.leaders() if i != old.id]
    assert new and old.role is Role.LEADER  # no CheckQuorum: stale leader lingers
    c.heal()
    c.tick(3)
    assert old.role is Role.FOLLOWER and c.leaders() == new


def test_conflicting_suffix_is_truncated_with_fast_backup():
    """Paper §5.3: the follower's uncommitted suffix from term 2 is replaced by term 3's."""
    logs = {1: _log([1, 1, 2, 2, 2, 2, 2, 2]), 2: _log([1, 1, 3, 3]), 3: _log([1, 1, 3, 3])}
    hs = {i: HardState(3, None, 1) for i in (1, 2, 3)}
    c = Cluster(logs=logs, hard_states=hs, seed=1)
    leader = c.elect(2)
    assert leader.term == 4
    c.tick(2)
    f = c.nodes[1]
    assert [f.term_at(o) for o in range(5)] == [1, 1, 3, 3, 4]
    assert f.last_offset == 4 and f.commit_index == 4
    truncations = [rd.truncate_to for rd in c.readies[1] if rd.truncate_to is not None]
    assert truncations == [2]
    rejects = [m for m in c.sent if isinstance(m, AppendResponse) and m.src == 1 and not m.success]
    assert len(rejects) == 1  # one round trip: the hint points straight at offset 1 (term 1)
    assert [e.term for e in logs[1].all_entries()] == [1, 1, 3, 3, 4]


def test_leader_commits_old_term_entries_only_through_its_own():
    """Paper §5.4.2 (Figure 8): replicas of a term-2 entry on a majority are not enough."""
    logs = {1: _log([1, 2]), 2: _log([1]), 3: _log([1])}
    hs = {i: HardState(2, None, 0) for i in (1, 2, 3)}
    c = Cluster(logs=logs, hard_states=hs, seed=1)
    n1 = c.nodes[1]
    n1.campaign()
    c.deliver(drop=lambda m: isinstance(m, Append))  # votes only; keep the appends back
    assert n1.role is Role.LEADER and n1.term == 3
    c.pump()
    # follower 3 reports it holds offset 1 (term 2) but not yet the no-op at offset 2
    n1.step(AppendResponse(3, 1, 3, True, match_offset=1))
    assert n1.commit_index == 0
    n1.step(AppendResponse(3, 1, 3, True, match_offset=2))
    assert n1.commit_index == 2


def test_far_behind_follower_catches_up():
    c = Cluster(seed=8, config=RaftConfig(max_append_bytes=64, max_inflight_appends=4))
    leader = c.wait_leader()
    lag = next(i for i in c.nodes if i != leader.id)
    c.isolate(lag)
    for k in range(300):
        leader.propose(b"r%05d" % k, count=3)
        c.deliver()
    c.heal()
    c.tick(5)
    assert c.nodes[lag].commit_index == leader.commit_index == leader.last_offset
    assert c.logs[lag].all_entries() == c.logs[leader.id].all_entries()


def test_catch_up_from_before_the_log_start_offset_starts_afresh():
    """Kafka: a follower whose fetch offset is below the leader's log start offset truncates
    fully and starts at the log start offset (here: InstallSnapshot without data)."""
    c = Cluster(seed=9)
    leader = c.wait_leader()
    lag = next(i for i in c.nodes if i != leader.id)
    c.crash(lag)
    for k in range(50):
        leader.propose(b"r%d" % k)
    c.tick(2)
    # retention on the other two replicas: everything up to offset 40 is gone
    for i in c.nodes:
        if i != lag:
            log = c.logs[i]
            log.compact(Snapshot(40, log.term_at(40), frozenset({1, 2, 3}), None))
    c.logs[lag] = MemoryLog(Snapshot(-1, 0, frozenset({1, 2, 3})))  # lost its disk, too
    c.hs[lag] = HardState()
    c.start(lag)
    c.tick(5)
    snaps = [rd.snapshot for rd in c.readies[lag] if rd.snapshot is not None]
    assert [s.offset for s in snaps] == [40] and snaps[0].data is None
    assert c.logs[lag].log_start_offset == 41
    assert c.nodes[lag].commit_index == leader.commit_index
    assert c.logs[lag].all_entries() == c.logs[leader.id].all_entries()
    assert any(isinstance(m, InstallSnapshot) for m in c.sent)


def test_metadata_snapshot_is_installed_with_its_data():
    c = Cluster(seed=10)
    leader = c.wait_leader()
    lag = next(i for i in c.nodes if i != leader.id)
    c.isolate(lag)
    for k in range(20):
        leader.propose(b"m%d" % k)
    c.tick(2)
    log = c.logs[leader.id]
    applied = c.applied[leader.id][-1].last_offset
    log.compact(Snapshot(applied, log.term_at(applied), frozenset({1, 2, 3}), b"IMAGE"))
    leader.propose(b"after")
    c.heal()
    c.tick(3)
    snaps = [rd.snapshot for rd in c.readies[lag] if rd.snapshot is not None]
    assert snaps and snaps[-1].data == b"IMAGE"
    assert c.applied[lag][-1].payload == b"after"
    assert c.nodes[lag].applied == leader.applied


def test_leadership_transfer_with_timeout_now():
    c = Cluster(seed=11)
    leader = c.wait_leader()
    term = leader.term
    target = max(i for i in c.nodes if i != leader.id)
    leader.transfer_leadership(target)
    with pytest.raises(ProposalDropped):
        leader.propose(b"x")
    c.deliver()
    assert c.leaders() == [target] and c.nodes[target].term == term + 1
    assert any(isinstance(m, TimeoutNow) and m.dst == target for m in c.sent)
    assert any(isinstance(m, VoteRequest) and m.transfer for m in c.sent)


def test_leadership_transfer_waits_for_the_target_to_catch_up():
    c = Cluster(seed=12)
    leader = c.wait_leader()
    target = max(i for i in c.nodes if i != leader.id)
    c.blocked |= {(leader.id, target)}
    leader.propose(b"a")
    c.deliver()
    leader.transfer_leadership(target)
    c.deliver()
    assert leader.role is Role.LEADER  # target is behind: no TimeoutNow yet
    c.heal()
    c.tick(2)
    assert c.leaders() == [target]
    assert c.nodes[target].term_at(1) is not None


def test_leadership_transfer_is_aborted_after_an_election_timeout():
    c = Cluster(seed=13)
    leader = c.wait_leader()
    target = max(i for i in c.nodes if i != leader.id)
    c.crash(target)
    leader.propose(b"a")
    c.deliver()
    leader.transfer_leadership(target)
    c.tick(c.config.election_timeout_ticks)
    assert leader.transferee is None
    leader.propose(b"b")


def test_add_voter_then_it_counts_in_quorums():
    c = Cluster(ids=(1, 2, 3), seed=14)
    leader = c.wait_leader()
    c.add_node(4)
    e = leader.propose_add_voter(4)
    assert e.kind is EntryKind.CONFIG and decode_voters(e.payload) == {1, 2, 3, 4}
    assert leader.voters == {1, 2, 3, 4}  # thesis §4.1: in effect once appended
    with pytest.raises(ConfigChangeInProgress):
        leader.propose_remove_voter(2)
    c.tick(3)
    assert c.nodes[4].voters == {1, 2, 3, 4} and c.nodes[4].commit_index == leader.commit_index
    # with 4 voters a quorum is 3: two followers down stops commits
    downs = [i for i in (1, 2, 3) if i != leader.id]
    for i in downs:
        c.crash(i)
    x = leader.propose(b"x")
    c.tick(1)
    assert leader.commit_index < x.offset
    c.start(downs[0])
    c.tick(3)
    assert leader.commit_index >= x.offset


def test_remove_voter_including_the_leader_itself():
    c = Cluster(ids=(1, 2, 3), seed=15)
    leader = c.wait_leader()
    other = next(i for i in c.nodes if i != leader.id)
    leader.propose_remove_voter(other)
    c.tick(2)
    assert all(n.voters == {1, 2, 3} - {other} for i, n in c.nodes.items() if i != other)
    # now remove the leader itself: it steps down once the change commits (thesis §4.2.2)
    leader.propose_remove_voter(leader.id)
    c.tick(1)
    assert leader.role is Role.FOLLOWER
    rest = ({1, 2, 3} - {other, leader.id}).pop()
    assert any(isinstance(m, TimeoutNow) and m.dst == rest for m in c.sent)  # handed over
    c.crash(other)
    new = c.wait_leader()
    assert new.id == rest and new.voters == {rest}
    new.propose(b"alone")
    c.pump()
    assert new.commit_index == new.last_offset


def test_truncated_config_entry_is_undone():
    """Thesis §4.1: a server uses the latest config in its log, committed or not, and falls
    back to the previous one if that entry is truncated."""
    voters = frozenset({1, 2, 3})
    log1 = _log([1, 2], voters)
    cfg_entry = Entry(2, 2, encode_voters({1, 2, 3, 4}), 1, EntryKind.CONFIG)
    log1.append([cfg_entry])
    logs = {1: log1, 2: _log([1, 3, 3]), 3: _log([1, 3, 3])}
    hs = {i: HardState(3, None, 0) for i in (1, 2, 3)}
    c = Cluster(logs=logs, hard_states=hs, seed=2)
    assert c.nodes[1].voters == {1, 2, 3, 4}
    c.elect(2)
    c.tick(2)
    assert c.nodes[1].voters == {1, 2, 3}
    assert c.nodes[1].term_at(2) == 3


def test_restart_keeps_vote_and_commit():
    c = Cluster(seed=16)
    leader = c.wait_leader()
    for k in range(5):
        leader.propose(b"%d" % k)
    c.tick(2)
    f = next(i for i in c.nodes if i != leader.id)
    before = c.nodes[f]
    c.crash(f)
    n = c.start(f)
    assert n.term == before.term and n.voted_for == before.voted_for
    assert n.commit_index == c.hs[f].commit_index >= 5
    # in the same term it will not vote for anyone else
    assert n.voted_for == leader.id
    other = next(i for i in c.nodes if i not in (f, leader.id))
    n.step(VoteRequest(other, f, n.term, 10**6, n.term, transfer=True))
    rd = n.ready()
    assert not any(getattr(m, "granted", False) for m in rd.messages)
    n.advance(rd)


def test_restart_rejects_commit_beyond_the_log():
    with pytest.raises(ValueError):
        RaftNode(1, {1}, MemoryLog(), hard_state=HardState(1, 1, 5))


def test_heartbeats_are_distinguishable_and_carry_safe_commit():
    c = Cluster(seed=17)
    leader = c.wait_leader()
    c.sent.clear()
    c.tick(1)
    hbs = [m for m in c.sent if isinstance(m, Heartbeat)]
    assert {m.dst for m in hbs} == set(c.nodes) - {leader.id}
    assert all(m.commit_index <= leader.commit_index for m in hbs)


def test_malformed_and_misaddressed_messages_are_ignored():
    c = Cluster(seed=18)
    leader = c.wait_leader()
    f = next(n for n in c.nodes.values() if n is not leader)
    f.step(Append(leader.id, 99, leader.term, 0, leader.term, (Entry(5, leader.term),), 0))
    f.step(Append(leader.id, f.id, leader.term, 0, leader.term, (Entry(5, leader.term),), 0))
    c.deliver()
    assert f.last_offset == leader.last_offset


@pytest.mark.parametrize("seed", range(5))
def test_random_message_storms_do_not_break_invariants(seed):
    """Duplicated and reordered delivery of everything ever sent changes nothing committed."""
    rng = random.Random(seed)
    c = Cluster(ids=(1, 2, 3, 4, 5), seed=seed)
    leader = c.wait_leader()
    for k in range(30):
        leader.propose(b"%d" % k, count=rng.randint(1, 4))
    c.tick(2)
    committed = c.logs[leader.id].all_entries()
    replay = list(c.sent)
    rng.shuffle(replay)
    for m in replay:
        node = c.nodes[m.dst]
        node.step(m)
    c.tick(3)
    for i, log in c.logs.items():
        assert log.all_entries()[: len(committed)] == committed


def test_partition_group_does_not_read_back_committed_entries():
    """``apply_entries=False``: only the high watermark moves; nothing is read from the log."""
    c = Cluster(seed=19, config=RaftConfig(apply_entries=False))
    leader = c.wait_leader()
    e = leader.propose(b"batch", count=10)
    c.tick(2)
    for i, n in c.nodes.items():
        assert c.applied[i] == []
        assert n.high_watermark == e.end_offset and n.applied == n.commit_index
        assert not n.has_ready()


def test_must_sync_only_for_log_term_or_vote_changes():
    c = Cluster(seed=20)
    leader = c.wait_leader()
    f = next(n for n in c.nodes.values() if n is not leader)
    c.readies[f.id].clear()
    leader.propose(b"x")
    c.tick(2)
    kinds = [(rd.must_sync, bool(rd.entries), rd.hard_state is not None) for rd in c.readies[f.id]]
    assert (True, True, True) in kinds or (True, True, False) in kinds
    # a Ready whose only durable change is the commit index need not be fsynced
    assert any(hs and not sync and not ents for sync, ents, hs in kinds)


def test_voters_at_tracks_uncommitted_config_history():
    c = Cluster(seed=21)
    leader = c.wait_leader()
    c.add_node(4)
    e = leader.propose_add_voter(4)
    assert leader.voters_at(e.offset - 1) == {1, 2, 3}
    assert leader.voters_at(e.offset) == {1, 2, 3, 4}
    c.tick(2)
    assert leader.voters_at(e.offset) == {1, 2, 3, 4} and leader.voters_at(e.offset - 1) is None
    assert leader.active_voters() == {1, 2, 3, 4}



LAZY = RaftConfig(noop_only_when_needed=True)


def test_new_leader_on_a_committed_log_appends_no_noop():
    """``noop_only_when_needed`` (partition groups): a leader elected on a fully committed log
    appends nothing, so the first entry is at offset 0, and it announces itself anyway."""
    c = Cluster(ids=(1, 2, 3), seed=3, config=LAZY)
    leader = c.wait_leader()
    c.tick(3)
    assert all(n.leader_id == leader.id for n in c.nodes.values())
    assert leader.log_end_offset == 0
    assert leader.propose(b"first", count=3).offset == 0
    c.pump()
    c.tick(3)
    assert all(n.commit_index == 2 for n in c.nodes.values())


def test_leader_change_of_a_caught_up_group_takes_no_offset():
    c = Cluster(ids=(1, 2, 3), seed=3, config=LAZY)
    leader = c.wait_leader()
    leader.propose(b"a", count=2)
    c.pump()
    c.tick(3)  # the followers learn the commit index
    nxt = next(i for i in c.nodes if i != leader.id)
    old_term = leader.term
    leader.transfer_leadership(nxt)
    c.pump()
    c.tick(5)
    new = c.nodes[nxt]
    assert new.role is Role.LEADER and new.term > old_term
    assert new.log_end_offset == 2
    assert new.propose(b"b").offset == 2


def test_leader_with_an_uncommitted_tail_still_appends_its_noop():
    """Paper §5.4.2: entries of an earlier term commit only through one of the new term."""
    c = Cluster(ids=(1, 2, 3), seed=3, config=LAZY)
    leader = c.wait_leader()
    leader.propose(b"a")
    c.deliver(drop=lambda m: isinstance(m, AppendResponse))  # the entry is never acknowledged
    # so it is not committed anywhere: the followers' logs end with an uncommitted entry
    follower = c.nodes[next(i for i in c.nodes if i != leader.id)]
    assert follower.last_offset == 0 and follower.commit_index < 0
    c.crash(leader.id)
    c.tick(60)
    new = c.nodes[c.leaders()[0]]
    assert new.log_end_offset == 2 and new.term_at(1) == new.term  # offset 1 is its no-op
    c.pump()
    c.tick(3)
    assert new.commit_index == 1


def test_transfer_from_a_leader_that_skipped_its_noop_drops_a_deposed_leaders_tail():
    """A deposed leader's uncommitted tail must not come back through a leadership transfer
    from a leader that skipped its no-op: that leader appends its no-op first, which
    conflicts with the tail, so the transferee drops it before it can win (without it, its
    longer log won the TimeoutNow election and committed the tail; tests/cluster/test_no_resurrection.py)."""
    c = Cluster(ids=(1, 2, 3), seed=3, config=LAZY)
    old = c.elect(1)
    old.propose(b"a")
    c.pump()
    c.tick(3)  # committed, and every follower knows it
    c.isolate(1)
    old.propose(b"tail")  # only node 1 has it
    c.deliver()
    assert c.logs[1].log_end_offset == 2 and c.logs[2].log_end_offset == 1
    c.tick(60)  # node 2 or 3 is elected on a fully committed log: no no-op
    new = c.nodes[next(i for i in c.leaders() if i != 1)]
    assert c.logs[new.id].log_end_offset == 1
    c.heal()
    c.tick(3)  # node 1 follows and, with nothing of the new term to conflict, keeps its tail
    assert c.nodes[1].leader_id == new.id and c.logs[1].log_end_offset == 2
    term = new.term
    new.transfer_leadership(1)
    c.deliver()
    c.tick(10)
    assert c.leaders() == [1]
    for i in (1, 2, 3):
        log = c.logs[i]
        assert b"tail" not in [e.payload for e in log.entries(0, log.log_end_offset, 1 << 20)], i
    assert c.logs[1].term_at(1) == term  # the no-op took the tail's place


def test_config_change_after_a_skipped_noop_commits_an_entry_of_the_term_first():
    """The 2015 raft-dev erratum: a new leader changes the voters only after an entry of its
    term committed; one that skipped its no-op appends it when asked for a change."""
    c = Cluster(ids=(1, 2, 3), seed=3, config=LAZY)
    leader = c.wait_leader()
    c.tick(3)
    assert leader.log_end_offset == 0
    with pytest.raises(ConfigChangeInProgress):
        leader.propose_add_voter(4)
    assert leader.log_end_offset == 1 and leader.term_at(0) == leader.term
    c.add_node(4)
    c.pump()
    c.tick(3)
    e = leader.propose_add_voter(4)
    c.pump()
    c.tick(5)
    assert leader.commit_index >= e.offset and 4 in leader.voters


def test_leader_learns_each_followers_log_start_offset():
    """Every AppendResponse and HeartbeatResponse carries the follower's log start offset (Kafka's
    FetchRequest ``LogStartOffset``): the leader keeps the last one of each member, from which a
    partition leader computes its low watermark (DeleteRecords)."""
    c = Cluster(seed=9)
    leader = c.wait_leader()
    for k in range(50):
        leader.propose(b"r%d" % k)
    c.tick(3)
    assert leader.member_log_start_offsets() == {i: 0 for i in c.nodes if i != leader.id}
    moved = next(i for i in c.nodes if i != leader.id)
    log = c.logs[moved]
    log.compact(Snapshot(40, log.term_at(40), frozenset({1, 2, 3}), None))  # its log start follows the leader's
    c.tick(3)  # heartbeats and their answers
    want = {i: 41 if i == moved else 0 for i in c.nodes if i != leader.id}
    assert leader.member_log_start_offsets() == want
    assert all(n.member_log_start_offsets() == {} for n in c.nodes.values() if n is not leader)
