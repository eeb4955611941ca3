"""Replication throttles during a reassignment (issue 20; Kafka "Limiting Bandwidth Usage during
Data Migration") on 4 real broker processes.

A topic of ~16 MB on {1,2,3} moves to {1,2,4} with ``litemq partition reassign --execute
--throttle 2000000``: the tool sets both rates on brokers 1-4 and the throttled-replicas topic
configs (leader side: the current replicas, follower side: the new one); the move takes at least
half of size/rate while an acks=all producer keeps being answered in time; ``--verify`` once the
move completed removes every throttle config. A malformed throttled-replicas value is refused
with Kafka's INVALID_CONFIG message.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

from litemq.testing.cluster import LocalCluster, wait_for

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]

OVERRIDES = {"broker.heartbeat.interval.ms": "250", "broker.session.timeout.ms": "2500"}
RATE = 2_000_000
VALUE = b"x" * 100_000
COUNT = 160  # 16 MB


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "litemq.cli", "partition", "reassign", *args], capture_output=True,
                          text=True, timeout=120)


def _value(admin: AdminClient, rtype: str, name: str, key: str) -> str:
    res = ConfigResource(rtype, name)
    return admin.describe_configs([res])[res].result(30)[key].value


def _metric(cluster: LocalCluster, node: int, name: str) -> float:
    import urllib.request

    with urllib.request.urlopen(cluster.http_url(node) + "/metrics", timeout=10) as r:
        for line in r.read().decode().splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
    raise AssertionError(f"{name} not on broker {node}'s /metrics")


def _voters(cluster: LocalCluster, topic: str) -> list[int] | None:
    for st in cluster.statuses().values():
        for pt in st["partitions"]:
            if pt["topic"] == topic and pt["role"] == "leader":
                return pt["raft_voters"] if not pt["raft_learners"] else None
    return None


def test_throttled_move(tmp_path):
    topic = "throttled"
    with LocalCluster(tmp_path / "c", 4, OVERRIDES, http=True) as cluster:
        bs = cluster.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bs})
        admin.create_topics([NewTopic(topic, 1, replica_assignment=[[1, 2, 3]])],
                            operation_timeout=30)[topic].result(timeout=60)
        cluster.wait_leaders(topic, 1)

        bad = ConfigResource("topic", topic, incremental_configs=[ConfigEntry(
            "leader.replication.throttled.replicas", "0-1", incremental_operation=AlterConfigOpType.SET)])
        with pytest.raises(KafkaException) as err:
            admin.incremental_alter_configs([bad])[bad].result(30)
        assert err.value.args[0].name() == "INVALID_CONFIG"
        assert ("leader.replication.throttled.replicas must be the literal '*' or a list of replicas in the "
                "following format: [partitionId]:[brokerId],[partitionId]:[brokerId],...") in str(err.value)

        p = Producer({"bootstrap.servers": bs, "acks": "all", "linger.ms": 5, "message.max.bytes": 1_000_000})
        for _ in range(COUNT):
            p.produce(topic, VALUE, partition=0)
            p.poll(0)
        assert p.flush(60) == 0
        size = COUNT * len(VALUE)

        plan = tmp_path / "plan.json"
        plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": topic, "partition": 0,
                                                                  "replicas": [1, 2, 4]}]}))
        started = time.monotonic()
        r = _cli("-b", bs, "--execute", "--reassignment-json-file", str(plan), "--throttle", str(RATE))
        assert r.returncode == 0, r.stdout + r.stderr
        assert f"The inter-broker throttle limit was set to {RATE} B/s" in r.stdout, r.stdout
        assert _value(admin, "topic", topic, "leader.replication.throttled.replicas") == "0:1,0:2,0:3"
        assert _value(admin, "topic", topic, "follower.replication.throttled.replicas") == "0:4"
        for n in (1, 2, 3, 4):
            assert _value(admin, "broker", str(n), "leader.replication.throttled.rate") == str(RATE)
            assert _value(admin, "broker", str(n), "follower.replication.throttled.rate") == str(RATE)

        # produce keeps working while the new replica is held to the throttle
        latencies: list[float] = []
        while _voters(cluster, topic) != [1, 2, 4]:
            t = time.monotonic()
            p.produce(topic, b"during-the-move", partition=0)
            assert p.flush(10) == 0
            latencies.append(time.monotonic() - t)
            assert time.monotonic() - started < 120, "the throttled move did not complete"
            time.sleep(0.2)
        took = time.monotonic() - started
        assert took >= 0.5 * size / RATE, f"moved {size} bytes in {took:.1f}s, faster than the {RATE} B/s throttle"
        assert latencies and max(latencies) < 5, latencies

        # /metrics: the throttled bytes, sent by leader 1, processed by the new replica 4
        assert _metric(cluster, 1, "kafka_server_leaderreplication_bytes_total") >= 0.9 * size
        assert _metric(cluster, 4, "kafka_server_followerreplication_bytes_total") >= 0.9 * size

        wait_for(lambda: _cli("-b", bs, "--verify", "--reassignment-json-file", str(plan)).returncode == 0, 60,
                 "verify reports the move completed", interval_s=1)
        for n in (1, 2, 3, 4):
            assert _value(admin, "broker", str(n), "leader.replication.throttled.rate") == str(2**63 - 1)
            assert _value(admin, "broker", str(n), "follower.replication.throttled.rate") == str(2**63 - 1)
        assert _value(admin, "topic", topic, "leader.replication.throttled.replicas") == ""
        assert _value(admin, "topic", topic, "follower.replication.throttled.replicas") == ""


def test_throttled_replicas_format_and_tool_plan():
    """Kafka's value format (``*``, ``p:b,...``, "" none; anything else ValueError with
    Kafka's message) and what ``--throttle`` sets for a move (leader side: the current replicas,
    follower side: the new ones, rates on every broker of both sets; unmoved partitions left out)."""
    from litemq.cli.partition_commands import throttle_changes
    from litemq.cluster.throttle import ALL, format_throttled_replicas, parse_throttled_replicas

    assert parse_throttled_replicas("x", " * ") is ALL
    assert parse_throttled_replicas("x", "") == {}
    assert parse_throttled_replicas("x", "0:1, 0:2,3:4") == {0: {1, 2}, 3: {4}}
    for bad in ("0", "a:1", "0:1,", "*,0:1", "0:-1"):
        with pytest.raises(ValueError, match="must be the literal"):
            parse_throttled_replicas("x", bad)
    assert format_throttled_replicas({3: {4}, 0: {2, 1}}) == "0:1,0:2,3:4"
    changes = throttle_changes({("t", 0): [1, 2, 4], ("t", 1): [2, 3, 1]},
                               {("t", 0): [1, 2, 3], ("t", 1): [1, 2, 3]}, 500)
    rates = {"leader.replication.throttled.rate": "500", "follower.replication.throttled.rate": "500"}
    assert changes == [("broker", str(b), rates) for b in (1, 2, 3, 4)] + [
        ("topic", "t", {"leader.replication.throttled.replicas": "0:1,0:2,0:3",
                        "follower.replication.throttled.replicas": "0:4"})]
