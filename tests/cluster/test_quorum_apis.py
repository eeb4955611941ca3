"""DescribeQuorum (KIP-595/KIP-853, API 55) and UnregisterBroker (KIP-631, API 64), part of
issue 20, on 3 real brokers through the Kafka wire and the CLI.

The metadata leader describes ``__cluster_metadata``-0: itself as leader, its term as the
epoch, commit index + 1 as high watermark, the three brokers as voters with their
``meta.properties`` directory ids (v2) and listeners; the other brokers answer
another partition is UNKNOWN_TOPIC_OR_PARTITION. The other brokers forward the request to the
leader (kafka-python's ``describe_metadata_quorum`` through one of them), and answer
NOT_LEADER_OR_FOLLOWER once no leader is left; ``litemq cluster describe-quorum`` prints the
quorum as ``kafka-metadata-quorum.sh describe --status`` / ``--replication``. UnregisterBroker removes a
stopped broker from every broker's DescribeCluster and ``status``; a second time it is
BROKER_ID_NOT_REGISTERED, as is an id never registered; the broker started again registers again. A
running broker unregistered stays out until it restarts (Kafka: its heartbeats fail).
"""

from __future__ import annotations

import base64
import subprocess
import sys
import time
import uuid

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.admin import KafkaAdminClient

from litemq.cluster.image import MetadataImage
from litemq.protocol.errors import ErrorCode
from litemq.testing.cluster import LocalCluster, wait_for
from litemq.testing.wire import WireClient

pytestmark = pytest.mark.timeout(300)

QUORUM = {"topics": [{"topic_name": "__cluster_metadata", "partitions": [{"partition_index": 0}]}]}


def _litemq(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "litemq.cli", *args], capture_output=True, timeout=60)


def _wire(cluster: LocalCluster, node_id: int) -> WireClient:
    host, port = cluster.node(node_id).bootstrap_servers.split(",")[0].rsplit(":", 1)
    return WireClient(host, int(port))


def _described_brokers(cluster: LocalCluster, node_id: int) -> list[int]:
    with _wire(cluster, node_id) as w:
        return sorted(b.broker_id for b in w.request(60, 0, {"include_cluster_authorized_operations": False}).brokers)


def test_describe_quorum_from_the_leader_and_elsewhere(tmp_path):
    with LocalCluster(tmp_path, 3) as cluster:
        cluster.wait_ready()
        leader = cluster.metadata_leader()
        statuses = cluster.statuses()
        dirs = {n: uuid.UUID(bytes=base64.urlsafe_b64decode(st["directory_id"] + "==")) for n, st in statuses.items()}
        with _wire(cluster, leader) as w:
            # A leader knows a follower's log end offset once the follower answered one of its
            # appends (-1 until then, as Kafka's): right after an election that may not be yet.
            def every_voter_heard_from():
                part = w.request(55, 2, QUORUM).topics[0].partitions[0]
                return all(v.log_end_offset > 0 for v in part.current_voters)
            wait_for(every_voter_heard_from, 15, "the leader never learned every voter's log end offset")
            resp = w.request(55, 2, QUORUM)
            meta = cluster.status(leader)["metadata"]
            assert resp.error_code == 0
            part = resp.topics[0].partitions[0]
            assert (part.error_code, part.leader_id, part.leader_epoch) == (0, leader, meta["term"])
            assert 0 < part.high_watermark <= meta["commit_index"] + 1
            assert [v.replica_id for v in part.current_voters] == [1, 2, 3]
            assert {v.replica_id: v.replica_directory_id for v in part.current_voters} == dirs
            assert all(v.log_end_offset > 0 for v in part.current_voters)
            me = next(v for v in part.current_voters if v.replica_id == leader)
            assert me.last_fetch_timestamp == -1 and me.last_caught_up_timestamp > 0
            assert all(v.last_fetch_timestamp > 0 for v in part.current_voters if v.replica_id != leader)
            assert part.observers == []
            assert sorted(n.node_id for n in resp.nodes) == [1, 2, 3]
            ports = {n.node_id: {ep.port for ep in n.listeners} for n in resp.nodes}
            for n in (1, 2, 3):
                assert int(cluster.node(n).bootstrap_servers.split(",")[0].rsplit(":", 1)[1]) in ports[n]
            for version in (0, 1):  # older versions decode, without directory ids / timestamps
                assert [v.replica_id for v in w.request(55, version, QUORUM).topics[0].partitions[0].current_voters] \
                    == [1, 2, 3]
            other = w.request(55, 2, {"topics": [{"topic_name": "__cluster_metadata",
                                                  "partitions": [{"partition_index": 1}]}]})
            assert other.topics[0].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        # any other broker forwards it to the leader (Kafka's brokers forward it to the controller)
        follower = next(n for n in cluster.node_ids if n != leader)
        with _wire(cluster, follower) as w:
            part = w.request(55, 2, QUORUM).topics[0].partitions[0]
        assert (part.error_code, part.leader_id) == (0, leader)
        assert [v.replica_id for v in part.current_voters] == [1, 2, 3]
        admin = KafkaAdminClient(bootstrap_servers=cluster.node(follower).bootstrap_servers)
        try:
            described = admin.describe_metadata_quorum()
        finally:
            admin.close()
        kp = described["topics"][0]["partitions"][0]
        assert (kp["error"], kp["leader_id"]) == (None, leader), described
        assert sorted(v["replica_id"] for v in kp["current_voters"]) == [1, 2, 3]

        # the CLI, given a follower only, finds the leader
        b = cluster.node(follower).bootstrap_servers
        out = _litemq("cluster", "describe-quorum", "-b", b)
        assert out.returncode == 0, out.stderr.decode()
        text = out.stdout.decode()
        assert f"LeaderId:               {leader}" in text and '"id": 3' in text, text
        assert all(f'"directoryId": "{st["directory_id"]}"' in text for st in statuses.values()), text
        out = _litemq("cluster", "describe-quorum", "-b", b, "--replication")
        assert out.returncode == 0, out.stderr.decode()
        assert "Leader" in out.stdout.decode() and out.stdout.decode().count("Follower") == 2, out.stdout.decode()

        # The first bootstrap broker hangs (paused: it still accepts TCP connections): the admin
        # commands that speak the wire themselves go on to the next one, as Kafka's AdminClient
        # (they timed out on it alone, describe-quorum and unregister with a traceback).
        paused = next(n for n in cluster.node_ids if n not in (leader, follower))
        both = f"{cluster.node(paused).bootstrap_servers.split(',')[0]},{b.split(',')[0]}"
        cluster.pause(paused)
        try:
            for args, rc, expected in ((["cluster", "describe-quorum"], 0, f"LeaderId:               {leader}"),
                                       (["cluster", "unregister", "99"], 1, "BROKER_ID_NOT_REGISTERED"),
                                       (["config", "describe", "--broker-defaults"], 0, "no dynamic broker defaults"),
                                       (["quota", "describe"], 0, "no client quotas"),
                                       (["client-metrics", "list"], 0, "no client metrics subscriptions")):
                out = _litemq(*args, "-b", both)
                text = out.stdout.decode() + out.stderr.decode()
                assert out.returncode == rc and expected in text and "Traceback" not in text, (args, text)
        finally:
            cluster.resume(paused)

        # without a quorum no broker leads: the answer is NOT_LEADER_OR_FOLLOWER
        survivor = follower
        for n in cluster.node_ids:
            if n != survivor:
                cluster.kill(n)

        def not_leader() -> bool:
            with _wire(cluster, survivor) as w:
                return w.request(55, 2, QUORUM).topics[0].partitions[0].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        wait_for(not_leader, 30, "NOT_LEADER_OR_FOLLOWER from a broker without a quorum")


def test_unregister_broker(tmp_path):
    with LocalCluster(tmp_path, 3) as cluster:
        cluster.wait_ready()
        leader = cluster.metadata_leader()
        gone = next(n for n in reversed(cluster.node_ids) if n != leader)
        via = next(n for n in cluster.node_ids if n not in (leader, gone))  # forwarded to the leader
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        admin.create_topics([NewTopic("solo", 1, replica_assignment=[[gone]])])["solo"].result(30)
        cluster.wait_leaders("solo", 1)
        consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "solo-g"})
        try:
            consumer.commit(offsets=[TopicPartition("solo", 0, 0)], asynchronous=False)
        finally:
            consumer.close()
        dirs = {n: uuid.UUID(bytes=base64.urlsafe_b64decode(st["directory_id"] + "=="))
                for n, st in cluster.statuses().items()}
        cluster.kill(gone)
        out = _litemq("cluster", "unregister", str(gone), "-b", cluster.node(via).bootstrap_servers)
        assert out.returncode == 0, out.stderr.decode()
        # its partition has no leader now: ``topic describe`` shows it so, its offsets unknown
        wait_for(lambda: admin.list_topics("solo", timeout=10).topics["solo"].partitions[0].leader == -1, 20,
                 "solo-0 still has a leader")
        out = _litemq("topic", "describe", "solo", "-b", cluster.node(via).bootstrap_servers)
        assert out.returncode == 0 and b"Traceback" not in out.stderr, out
        row = next(line for line in out.stdout.decode().splitlines() if line.strip("│ ").startswith("0 "))
        assert [c.strip() for c in row.split("│")[2:7]] == ["none", str(gone), "", "unknown", "unknown"], row
        # a voter keeps its directory id in the voter set (KIP-853), registered or not
        with _wire(cluster, leader) as w:
            part = w.request(55, 2, QUORUM).topics[0].partitions[0]
        assert {v.replica_id: v.replica_directory_id for v in part.current_voters}[gone] == dirs[gone]
        cluster.wait_leaders("__consumer_offsets", 8, exclude={gone})  # the group's coordinator may have moved
        out = _litemq("group", "describe", "solo-g", "-b", cluster.node(via).bootstrap_servers)
        assert out.returncode == 0, out  # the log end offset and lag unknown
        row = next(line for line in out.stdout.decode().splitlines() if "solo" in line and "│" in line)
        assert [c.strip() for c in row.split("│")[1:6]] == ["solo", "0", "0", "-", "-"], row
        for n in (leader, via):
            wait_for(lambda: gone not in _described_brokers(cluster, n), 20, f"broker {gone} left {n}'s answer")
            assert gone not in [b["node_id"] for b in cluster.status(n)["brokers"]]
        with _wire(cluster, via) as w:
            again = w.request(64, 0, {"broker_id": gone})
            assert again.error_code == ErrorCode.BROKER_ID_NOT_REGISTERED, again
            assert w.request(64, 0, {"broker_id": 99}).error_code == ErrorCode.BROKER_ID_NOT_REGISTERED
        out = _litemq("cluster", "unregister", "99", "-b", cluster.node(via).bootstrap_servers)
        assert out.returncode == 1 and b"BROKER_ID_NOT_REGISTERED" in out.stderr, out
        cluster.restart(gone)  # its heartbeats register it again
        wait_for(lambda: gone in _described_brokers(cluster, via), 30, f"broker {gone} registered again")
        # a live broker is not refused (Kafka's controller neither): it is removed, and as in Kafka
        # (its heartbeats then fail with BROKER_ID_NOT_REGISTERED) the running process stays out
        # until it restarts
        with _wire(cluster, gone) as w:
            assert w.request(64, 0, {"broker_id": via}).error_code == ErrorCode.NONE
        time.sleep(2.0)  # several heartbeat intervals
        assert via not in _described_brokers(cluster, gone)
        cluster.restart(via)
        wait_for(lambda: via in _described_brokers(cluster, gone), 30, f"broker {via} registered again")


def test_unregister_record_in_the_image():
    img = MetadataImage()
    img.apply({"type": "register_broker", "node_id": 2, "host": "h", "port": 1})
    assert img.apply({"type": "unregister_broker", "node_id": 2}).error == ErrorCode.NONE
    assert 2 not in img.brokers and 2 not in MetadataImage.from_json(img.to_json()).brokers
    img.apply({"type": "register_broker", "node_id": 3, "host": "h", "port": 1, "directory_id": "AAECAwQFBgcICQoLDA0ODw"})
    assert img.apply({"type": "unregister_broker", "node_id": 3}).error == ErrorCode.NONE
    assert MetadataImage.from_json(img.to_json()).directory_id_of(3) == "AAECAwQFBgcICQoLDA0ODw"
    img.apply({"type": "register_broker", "node_id": 3, "host": "h", "port": 1, "directory_id": "BBECAwQFBgcICQoLDA0ODw"})
    assert img.directory_id_of(3) == "BBECAwQFBgcICQoLDA0ODw" and 3 not in img.unregistered_directories
    assert img.apply({"type": "unregister_broker", "node_id": 2}).error == ErrorCode.BROKER_ID_NOT_REGISTERED
