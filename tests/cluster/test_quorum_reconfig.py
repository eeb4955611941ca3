"""A dynamic metadata quorum (KIP-853, issue 20) on real broker processes, through the CLI and
the Kafka wire: AddRaftVoter (API 80) and RemoveRaftVoter (API 81).

Brokers 1-3 start with ``--peers`` (the metadata voters); broker 4 joins the running cluster with
``--join`` as an observer. ``litemq cluster add-controller --controller-id 4`` makes it a voter
(DescribeQuorum lists it among the voters, with its ``meta.properties`` directory id, and no
longer among the observers); a second time is DUPLICATE_VOTER. ``remove-controller
--controller-id 1`` removes voter 1 (it stays an observer while it runs); a second time is
VOTER_NOT_FOUND, as is a RemoveRaftVoter naming voter 2 with another directory id. Metadata is
still written (a topic is created), and after the metadata leader is SIGKILLed the voters left of
{2,3,4} elect a leader among themselves - broker 1, alive but no voter, never leads - and
metadata is written again.
"""

from __future__ import annotations

import base64
import subprocess
import sys
import uuid

import pytest

from litemq.protocol.errors import ErrorCode
from litemq.storage.meta_properties import read_meta_properties
from litemq.testing.cluster import LocalCluster, wait_for
from litemq.testing.wire import WireClient

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]

QUORUM = {"topics": [{"topic_name": "__cluster_metadata", "partitions": [{"partition_index": 0}]}]}


def _litemq(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "litemq.cli", *args], capture_output=True, text=True, timeout=90)


def _wire(cluster: LocalCluster, node_id: int) -> WireClient:
    host, port = cluster.node(node_id).bootstrap_servers.rsplit(":", 1)
    return WireClient(host, int(port))


def _quorum(cluster: LocalCluster, via: int):
    """The ``__cluster_metadata``-0 partition of DescribeQuorum asked of broker ``via`` (which
    forwards it to the metadata leader), or None when it has no leader to ask."""
    with _wire(cluster, via) as w:
        part = w.request(55, 2, QUORUM).topics[0].partitions[0]
    return part if part.error_code == 0 else None


def _members(cluster: LocalCluster, via: int) -> tuple[list[int], list[int]] | None:
    part = _quorum(cluster, via)
    if part is None:
        return None
    return [v.replica_id for v in part.current_voters], [o.replica_id for o in part.observers]


def _directory(cluster: LocalCluster, node_id: int) -> uuid.UUID:
    text = read_meta_properties(cluster.node(node_id).data_dir).directory_id
    return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=="))


def _create_topic(cluster: LocalCluster, via: int, name: str) -> None:
    out = _litemq("topic", "create", name, "-p", "1", "-r", "3", "-b", cluster.node(via).bootstrap_servers)
    assert out.returncode == 0, out.stderr


def test_add_and_remove_metadata_voters(tmp_path):
    with LocalCluster(tmp_path, 3) as cluster:
        cluster.wait_ready()
        cluster.add_broker(4)
        wait_for(lambda: _members(cluster, 2) == ([1, 2, 3], [4]), 30,
                 lambda: f"broker 4 an observer: {_members(cluster, 2)}")
        b = cluster.node(2).bootstrap_servers  # any broker: the request is forwarded to the leader

        out = _litemq("cluster", "add-controller", "-b", b, "--controller-id", "4", "--timeout-ms", "30000")
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == f"Added controller 4 with directory id " \
            f"{read_meta_properties(cluster.node(4).data_dir).directory_id}", out.stdout
        part = _quorum(cluster, 4)
        assert [v.replica_id for v in part.current_voters] == [1, 2, 3, 4], part
        assert 4 not in [o.replica_id for o in part.observers], part
        assert {v.replica_id: v.replica_directory_id for v in part.current_voters}[4] == _directory(cluster, 4)
        with _wire(cluster, 3) as w:  # v2 lists its listeners
            assert 4 in [n.node_id for n in w.request(55, 2, QUORUM).nodes]

        out = _litemq("cluster", "add-controller", "-b", b, "--controller-id", "4")
        assert out.returncode == 1 and "adding controller 4 failed: DUPLICATE_VOTER" in out.stderr, out

        # a directory id that is not voter 2's: VOTER_NOT_FOUND, nothing changes
        with _wire(cluster, 3) as w:
            r = w.request(81, 0, {"cluster_id": None, "voter_id": 2, "voter_directory_id": uuid.UUID(int=77)})
        assert r.error_code == ErrorCode.VOTER_NOT_FOUND, r

        out = _litemq("cluster", "remove-controller", "-b", b, "--controller-id", "1")
        assert out.returncode == 0, out.stderr
        assert out.stdout.startswith("Removed controller 1 with directory id "), out.stdout
        wait_for(lambda: _members(cluster, 3) == ([2, 3, 4], [1]), 30,
                 lambda: f"voters 2,3,4 and observer 1: {_members(cluster, 3)}")
        out = _litemq("cluster", "remove-controller", "-b", b, "--controller-id", "1")
        assert out.returncode == 1 and "removing controller 1 failed: VOTER_NOT_FOUND" in out.stderr, out

        _create_topic(cluster, 4, "after-reconfig")  # the new quorum commits metadata

        leader = cluster.metadata_leader()
        assert leader in (2, 3, 4), leader
        cluster.kill(leader)
        survivors = [n for n in (2, 3, 4) if n != leader]

        def new_leader() -> int | None:
            part = _quorum(cluster, survivors[0])
            return None if part is None or part.leader_id == leader else part.leader_id
        elected = wait_for(new_leader, 30, f"a metadata leader after {leader}'s SIGKILL")
        assert elected in survivors, elected
        assert [v.replica_id for v in _quorum(cluster, survivors[0]).current_voters] == [2, 3, 4]
        _create_topic(cluster, survivors[1], "after-leader-kill")


def test_a_removed_and_decommissioned_voter_registers_again_when_restarted(tmp_path):
    """Broker 1 leaves the metadata quorum (remove-controller) and is decommissioned, so the
    metadata leader drops it as an observer and no longer sends it the log. Restarted with its
    ``--peers`` as before, it knows no leader and nobody sends to it: it must find the leader
    itself (a voter it asks names it) and register again, as docs/cluster.md says and as a Kafka
    broker does through ``controller.quorum.bootstrap.servers`` (it becomes an observer again,
    knows the leader, and serves Metadata with every broker)."""
    with LocalCluster(tmp_path, 3) as cluster:
        cluster.wait_ready()
        cluster.add_broker(4)
        wait_for(lambda: _members(cluster, 2) == ([1, 2, 3], [4]), 30,
                 lambda: f"broker 4 an observer: {_members(cluster, 2)}")
        b = cluster.node(2).bootstrap_servers
        for args in (("add-controller", "--controller-id", "4", "--timeout-ms", "30000"),
                     ("remove-controller", "--controller-id", "1")):
            out = _litemq("cluster", *args, "-b", b)
            assert out.returncode == 0, out.stderr
        out = _litemq("broker", "decommission", "1", "-b", b, "--timeout", "60")
        assert out.returncode == 0, out.stderr
        wait_for(lambda: _members(cluster, 3) == ([2, 3, 4], []), 30,
                 lambda: f"voters 2,3,4 and no observer: {_members(cluster, 3)}")

        cluster.kill(1)
        cluster.restart(1, timeout_s=60)  # the metadata leader reports it live again
        wait_for(lambda: _members(cluster, 3) == ([2, 3, 4], [1]), 30,
                 lambda: f"broker 1 an observer again: {_members(cluster, 3)}")
        leader = cluster.metadata_leader()
        wait_for(lambda: (cluster.status(1).get("metadata") or {}).get("leader_id") == leader, 30,
                 lambda: f"broker 1 knows the metadata leader {leader}: {cluster.status(1).get('metadata')}")
        with _wire(cluster, 1) as w:
            assert sorted(br.node_id for br in w.request(3, 12, {"topics": None}).brokers) == [1, 2, 3, 4]
        _create_topic(cluster, 1, "after-restart")
