"""Replicated cluster behaviour beyond failover: real `litemq serve` processes on loopback.

- a broker far behind catches up through a metadata snapshot (InstallSnapshot);
- idle partitions go quiet: Raft traffic no longer grows with the number of partitions;
- requests to a follower get NOT_LEADER_OR_FOLLOWER; min.insync.replicas guards acks=all;
- garbage on the broker-to-broker port closes that connection only.
"""

from __future__ import annotations

import socket
import time

import pytest
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from litemq.protocol.errors import ErrorCode
from litemq.protocol.records import build_batch
from litemq.testing.cluster import LocalCluster, wait_for
from litemq.testing.wire import WireClient

pytestmark = pytest.mark.timeout(300)


def _create(cluster: LocalCluster, name: str, partitions: int, rf: int, configs=None) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    for _, fut in admin.create_topics([NewTopic(name, partitions, rf, config=configs or {})],
                                      operation_timeout=15).items():
        fut.result(30)
    cluster.wait_leaders(name, partitions)


def _partitions(status: dict, topic: str) -> dict[int, dict]:
    return {p["partition"]: p for p in status["partitions"] if p["topic"] == topic}


def test_far_behind_broker_catches_up_through_a_metadata_snapshot(tmp_path):
    with LocalCluster(tmp_path, 3, overrides={"metadata.snapshot.interval.entries": "5"}) as cluster:
        _create(cluster, "before", 1, 3)
        cluster.kill(3)

        def fenced():
            st = cluster.status(cluster.metadata_leader())
            return not any(b["live"] for b in st["brokers"] if b["node_id"] == 3)
        wait_for(fenced, 15, "broker 3 was not fenced after its session timeout")
        for i in range(12):  # enough metadata records for two snapshots while broker 3 is down
            _create(cluster, f"t{i}", 1, 2)  # on the two live brokers
        with pytest.raises(KafkaException) as exc:
            _create(cluster, "too-wide", 1, 3)
        assert "INVALID_REPLICATION_FACTOR" in str(exc.value)
        cluster.restart(3)

        def caught_up():
            st = cluster.status(3)
            lead = cluster.status(cluster.metadata_leader())
            return st["metadata"]["applied_offset"] >= lead["metadata"]["applied_offset"] - 1 and st
        st = wait_for(caught_up, 30, "broker 3 did not catch up with the metadata log")
        log_start = (tmp_path / "node-3" / "__cluster_metadata" / "log" / "log-start-offset-checkpoint")
        assert int(log_start.read_text().split()[-1]) > 0  # its metadata log now starts at a snapshot
        assert st["cluster_id"] == cluster.status(1)["cluster_id"]
        assert ("before", 0) in {(p["topic"], p["partition"]) for p in st["partitions"]}

        def live_again():
            st = cluster.status(cluster.metadata_leader())
            return all(b["live"] for b in st["brokers"])
        wait_for(live_again, 15, "broker 3 did not come back as live")
        _create(cluster, "wide-again", 1, 3)  # it counts again for replica placement
        admin = AdminClient({"bootstrap.servers": cluster.node(3).bootstrap_servers})
        topics = admin.list_topics(timeout=10).topics
        assert {f"t{i}" for i in range(12)} <= set(topics)


def test_idle_partitions_go_quiet(tmp_path):
    with LocalCluster(tmp_path, 3) as cluster:
        _create(cluster, "idle", 24, 3)
        p = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
        for i in range(24):
            p.produce("idle", b"x", partition=i)
        assert p.flush(30) == 0

        def all_quiet():
            return all(q.get("quiet") for s in cluster.statuses().values() for q in s["partitions"]
                       if q["topic"] == "idle")
        wait_for(all_quiet, 20, "idle partitions did not go quiet")
        before = {n: s["raft_messages_received"] for n, s in cluster.statuses().items()}
        time.sleep(2.0)
        after = {n: s["raft_messages_received"] for n, s in cluster.statuses().items()}
        per_second = {n: (after[n] - before[n]) / 2.0 for n in before}
        # Without quiescence 24 partitions x 2 followers x 10 heartbeats/s (+ responses) would
        # be ~480 messages/s per broker; only the metadata group's heartbeats remain.
        assert all(rate < 60 for rate in per_second.values()), per_second
        # and a quiet partition wakes up on the next produce
        p.produce("idle", b"again", partition=5)
        assert p.flush(30) == 0


def test_follower_answers_not_leader_and_min_insync_replicas_guards_acks_all(tmp_path):
    with LocalCluster(tmp_path, 3) as cluster:
        _create(cluster, "strict", 1, 3, {"min.insync.replicas": "3"})
        leader = cluster.leader_of("strict", 0)
        follower = next(n for n in cluster.node_ids if n != leader)
        batch = bytearray(build_batch([(b"k", b"v")]))
        body = {"transactional_id": None, "acks": -1, "timeout_ms": 5000,
                "topic_data": [{"name": "strict", "partition_data": [{"index": 0, "records": batch}]}]}
        with WireClient("127.0.0.1", cluster.node(follower).port) as c:
            resp = c.request(0, 9, body)
        assert resp.responses[0].partition_responses[0].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        with WireClient("127.0.0.1", cluster.node(leader).port) as c:
            resp = c.request(0, 9, body)
        assert resp.responses[0].partition_responses[0].error_code == ErrorCode.NONE

        cluster.kill(follower)
        time.sleep(3.5)  # past the leader's CheckQuorum window: only 2 replicas in sync
        with WireClient("127.0.0.1", cluster.node(leader).port) as c:
            resp = c.request(0, 9, body)
            assert resp.responses[0].partition_responses[0].error_code == ErrorCode.NOT_ENOUGH_REPLICAS
            body["acks"] = 1
            resp = c.request(0, 9, body)
            assert resp.responses[0].partition_responses[0].error_code == ErrorCode.NONE


def test_garbage_on_the_rpc_port_closes_only_that_connection(tmp_path):
    with LocalCluster(tmp_path, 3) as cluster:
        port = cluster.rpc_ports[1]
        for junk in (b"\xff\xff\xff\xff garbage", b"\x00\x00\x00\x05\x02abcd", b"\x00\x00\x00\x00"):
            with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
                s.sendall(junk)
                s.settimeout(5)
                try:
                    assert s.recv(100) == b""  # closed by the broker
                except ConnectionResetError:
                    pass
        _create(cluster, "still-works", 3, 3)
        p = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
        p.produce("still-works", b"v")
        assert p.flush(30) == 0
        assert cluster.status(1)["metadata"]["leader_id"] is not None
