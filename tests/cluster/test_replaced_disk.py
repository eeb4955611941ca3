"""A broker whose disk was replaced never votes as its old self (issue 20, "Storage identity"),
on 3 real broker processes under acks=all idempotent load (an RF 3 topic of one partition).

The partition is led by ``L``; ``G`` lags (SIGSTOP) while ``L`` and ``V`` acknowledge records;
``V`` is stopped and its data dir wiped; ``L`` is SIGKILLed; ``G`` is resumed and ``V`` started
on its empty dir. ``V``'s vote would elect ``G``, whose log lacks acknowledged records: with the
replaced disk recovering (no vote until caught up) nobody leads the partition nor the metadata
group until ``L`` is back. Then ``V`` catches up and counts again (with ``L`` killed once more,
``G`` and ``V`` elect a leader, then ``L`` and ``V`` with ``G`` killed), and every acknowledged
record is read back at its offset.
"""

from __future__ import annotations

import shutil
import time

import pytest

from litemq.testing.cluster import LocalCluster, wait_for
from litemq.testing.readback import read_sequenced
from tests.cluster.test_cluster_failover import CLIENT, Load, check_no_acked_loss, create_topic

pytestmark = [pytest.mark.timeout(400), pytest.mark.slow]

ELECTION_TIMEOUT_MS = 500
OVERRIDES = {"broker.heartbeat.interval.ms": "250", "broker.session.timeout.ms": "2500",
             "leader.imbalance.check.interval.ms": "500", "raft.election.timeout.ms": str(ELECTION_TIMEOUT_MS)}
TOPIC = "disk"
PARTITIONS = 1
NO_LEADER_WINDOW_S = 8 * ELECTION_TIMEOUT_MS / 1000
"""How long G and the recovering V are left alone: 8 election timeouts (at least 4 randomised
ones, up to 2x each), longer than the broker session timeout that fences L."""


def _wipe(data_dir) -> None:
    """A replaced disk: everything of the data dir gone (its broker.log, not data, kept)."""
    for entry in data_dir.iterdir():
        if entry.name == "broker.log":
            continue
        shutil.rmtree(entry) if entry.is_dir() else entry.unlink()


def _partition(status: dict, p: int) -> dict | None:
    return next((e for e in status.get("partitions") or () if e["topic"] == TOPIC and e["partition"] == p), None)


def test_replaced_disk_never_votes_as_its_old_self(tmp_path):
    with LocalCluster(tmp_path, n=3, overrides=OVERRIDES) as cluster:
        bootstrap = cluster.bootstrap_servers
        create_topic(bootstrap, TOPIC, PARTITIONS)
        cluster.wait_leaders(TOPIC, PARTITIONS)
        before = {n: st["directory_id"] for n, st in cluster.statuses().items()}
        assert all(not st["metadata"]["recovering"] for st in cluster.statuses().values())
        load = Load(bootstrap, TOPIC, PARTITIONS, rate=300).start()
        load.wait_progress(50, what="at start")

        p = 0
        lead = cluster.leader_of(TOPIC, p)
        lag, victim = [n for n in cluster.node_ids if n != lead]
        cluster.pause(lag)
        acked_before = len(load.acked[p])
        load.wait_progress(100, what=f"with broker {lag} paused")
        assert len(load.acked[p]) > acked_before
        # the metadata group's latest term before the kills: a leader elected after them has a later one
        answers = wait_for(lambda: cluster.statuses(exclude={lag}), 10, "L or V answers status")
        term_before = max(st["metadata"]["term"] for st in answers.values())

        cluster.kill(victim)
        _wipe(cluster.node(victim).data_dir)
        cluster.kill(lead)
        cluster.resume(lag)
        cluster.node(victim).start()  # its metadata group has no leader to report it live: no wait

        # G lacks acknowledged records and V is recovering: nobody may lead partition p (nor the
        # metadata group) until L is back.
        st = wait_for(lambda: cluster.statuses().get(victim), 30, f"broker {victim} answers status")
        assert st["replaced_disk"] and st["metadata"]["recovering"]
        assert st["directory_id"] != before[victim]
        # (V learns of the partition only from a metadata leader: it has no replica of it yet, or
        # a recovering one.)
        deadline = time.monotonic() + NO_LEADER_WINDOW_S
        while time.monotonic() < deadline:
            for node, s in cluster.statuses().items():
                e = _partition(s, p)
                assert node != victim or e is None or e["recovering"], e
                assert e is None or e["role"] != "leader", f"broker {node} leads {TOPIC}-{p} without L's records"
                # No metadata leader either. G, resumed, may still name the leader it knew before
                # its pause (possibly V's old self) until its election timeout: a follower's view
                # of an earlier term, not a new leader.
                m = s["metadata"]
                assert m["leader_id"] is None or (m["leader_id"] != node and m["term"] <= term_before), \
                    (f"broker {node} sees a metadata leader elected without L (term before the kills "
                     f"{term_before}): {m}")
            time.sleep(0.2)

        cluster.node(lead).start()
        cluster.wait_leaders(TOPIC, PARTITIONS, timeout_s=30)  # L, or the preferred replica once caught up
        load.wait_progress(100, timeout_s=60, what="after L is back")

        # V caught up and counts again: the marker is gone and no group of it is recovering.
        def counts_again() -> bool:
            s = cluster.status(victim)
            parts = [_partition(s, q) for q in range(PARTITIONS)]
            return (not s["replaced_disk"] and not s["metadata"]["recovering"]
                    and all(e is not None and not e["recovering"] for e in parts))

        wait_for(counts_again, 60, lambda: f"broker {victim} still recovering: {cluster.status(victim)}")
        assert not (cluster.node(victim).data_dir / "replaced-disk").exists()

        # ... and votes (or leads): with L killed again G and V elect a leader; then with G
        # killed, L and V do.
        leaders_seen = set()
        for gone in (lead, lag):
            cluster.kill(gone)
            leaders_seen.add(cluster.wait_leaders(TOPIC, PARTITIONS, exclude={gone}, timeout_s=30)[p])
            load.wait_progress(50, timeout_s=60, what=f"with broker {gone} killed")
            cluster.node(gone).start()
            cluster.wait_live(gone, 30)
        print(f"\nleaders after the replaced disk caught up: {sorted(leaders_seen)} (replaced: {victim})")

        load.stop()
        assert not load.failed, load.failed[:5]
        want = {q: {o for o, _ in acks} for q, acks in load.acked.items()}
        read = read_sequenced(bootstrap, TOPIC, PARTITIONS, want, client_config=CLIENT)
        check_no_acked_loss(load, read)
        assert sum(len(a) for a in load.acked.values()) > 500
