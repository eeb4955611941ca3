"""DescribeTopicPartitions (75, v0, KIP-966) on a 3-broker cluster: every broker describes an RF 3
topic the same way - replicas and ISR of all three brokers, the leader the brokers claim, a
leader epoch >= 0, no offline replica, no ELR - also through kafka-python's
``describe_topic_partitions``; once a broker is killed and fenced, it is an offline replica, out
of the ISR, and no partition names it leader, and DescribeCluster v2 lists it as fenced when
asked to include fenced brokers (KIP-1073)."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.admin import KafkaAdminClient

from litemq.protocol.errors import ErrorCode as E
from litemq.testing.cluster import LocalCluster, wait_for
from litemq.testing.wire import WireClient
from tests.integration.admin_helpers import describe_topic_partition_pages

pytestmark = pytest.mark.timeout(120)

OVERRIDES = {"broker.heartbeat.interval.ms": "250", "broker.session.timeout.ms": "2500"}
TOPIC = "dtp-rf3"
PARTITIONS = 3


def _describe(cluster: LocalCluster, node: int):
    """The DescribeTopicPartitions answer of broker ``node`` for :data:`TOPIC`."""
    with WireClient("127.0.0.1", cluster.node(node).port) as w:
        r = w.request(75, 0, {"topics": [{"name": TOPIC}], "response_partition_limit": 100, "cursor": None})
    assert r.next_cursor is None
    [t] = r.topics
    assert (t.error_code, t.name) == (E.NONE, TOPIC)
    return t


def test_rf3_topic_on_every_broker(tmp_path):
    with LocalCluster(tmp_path, 3, overrides=OVERRIDES) as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3)], operation_timeout=15)[TOPIC].result(30)
        leaders = cluster.wait_leaders(TOPIC, PARTITIONS)

        def settled(node: int):
            def check():
                t = _describe(cluster, node)
                parts = {p.partition_index: p for p in t.partitions}
                ok = sorted(parts) == list(range(PARTITIONS)) and all(
                    sorted(p.replica_nodes) == [1, 2, 3] and sorted(p.isr_nodes) == [1, 2, 3]
                    and p.leader_id == leaders[i] and p.leader_epoch >= 0 for i, p in parts.items())
                return t if ok else None
            return check

        ids = set()
        for node in cluster.node_ids:
            t = wait_for(settled(node), 15, f"broker {node} does not describe {TOPIC} with 3 replicas in sync")
            ids.add(t.topic_id)
            for p in t.partitions:
                assert p.error_code == E.NONE
                assert p.offline_replicas == [] and p.eligible_leader_replicas == [] and p.last_known_elr == []
        assert len(ids) == 1 and uuid.UUID(int=0) not in ids

        kadmin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
        try:
            # a partition a page, through whichever broker kafka-python picks
            pages = describe_topic_partition_pages(kadmin, [TOPIC], 1)
            assert [p["partition_index"] for r in pages for t in r["topics"] for p in t["partitions"]] == [0, 1, 2]
            assert all(sorted(p["replica_nodes"]) == [1, 2, 3] for r in pages for t in r["topics"]
                       for p in t["partitions"])
        finally:
            kadmin.close()

        cluster.kill(3)

        def fenced():
            t = _describe(cluster, 1)
            return all(p.offline_replicas == [3] and 3 not in p.isr_nodes and p.leader_id in (1, 2)
                       and sorted(p.replica_nodes) == [1, 2, 3] for p in t.partitions)
        wait_for(fenced, 20, "broker 1 does not describe broker 3 as offline")

        # DescribeCluster v2 (KIP-1073): the fenced broker only when asked for, marked fenced
        def cluster_brokers(version: int, include_fenced: bool) -> list[tuple[int, bool]]:
            body = {"include_cluster_authorized_operations": False, "endpoint_type": 1,
                    "include_fenced_brokers": include_fenced}
            with WireClient("127.0.0.1", cluster.node(1).port) as w:
                r = w.request(60, version, body)
            assert r.error_code == E.NONE
            return [(b.broker_id, getattr(b, "is_fenced", False)) for b in r.brokers]
        assert cluster_brokers(2, True) == [(1, False), (2, False), (3, True)]
        assert cluster_brokers(2, False) == [(1, False), (2, False)]
        assert cluster_brokers(1, False) == [(1, False), (2, False)]
