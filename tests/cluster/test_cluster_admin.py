"""Admin APIs on a 3-broker cluster: manual replica assignments in CreateTopics and
CreatePartitions go through the metadata log as given and show up in Metadata."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from litemq.limits import MAX_PARTITIONS_PER_TOPIC
from litemq.testing.cluster import LocalCluster, wait_for
from litemq.testing.wire import WireClient

pytestmark = pytest.mark.timeout(300)


def _replicas(admin: AdminClient, topic: str) -> dict[int, list[int]]:
    md = admin.list_topics(topic, timeout=10).topics[topic]
    return {i: list(p.replicas) for i, p in md.partitions.items()}


def test_manual_replica_assignments(tmp_path):
    with LocalCluster(tmp_path, 3) as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        wanted = [[3, 1], [2, 3], [1, 2]]
        admin.create_topics([NewTopic("manual", 3, replica_assignment=wanted)],
                            operation_timeout=15)["manual"].result(30)
        cluster.wait_leaders("manual", 3)
        assert _replicas(admin, "manual") == dict(enumerate(wanted))
        for node in cluster.node_ids:  # every broker serves the same assignment
            other = AdminClient({"bootstrap.servers": cluster.node(node).bootstrap_servers})
            wait_for(lambda: _replicas(other, "manual") == dict(enumerate(wanted)), 15,
                     f"broker {node} does not report the manual assignment")

        admin.create_partitions([NewPartitions("manual", 4, replica_assignment=[[2, 1]])],
                                operation_timeout=15)["manual"].result(30)
        cluster.wait_leaders("manual", 4)
        assert _replicas(admin, "manual")[3] == [2, 1]

        p = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
        for i in range(4):
            p.produce("manual", value=b"x", partition=i)
        assert p.flush(30) == 0  # the replica sets work as Raft groups

        def code(fut) -> int:
            with pytest.raises(KafkaException) as exc:
                fut.result(30)
            return exc.value.args[0].code()

        assert code(admin.create_topics([NewTopic("unknown-broker", 1, replica_assignment=[[1, 7]])])[
            "unknown-broker"]) == KafkaError.INVALID_REPLICA_ASSIGNMENT
        assert code(admin.create_topics([NewTopic("uneven", 2, replica_assignment=[[1, 2], [3]])])[
            "uneven"]) == KafkaError.INVALID_REPLICA_ASSIGNMENT
        assert code(admin.create_partitions([NewPartitions("manual", 5, replica_assignment=[[1]])])[
            "manual"]) == KafkaError.INVALID_REPLICA_ASSIGNMENT  # the topic's replication factor is 2
        assert code(admin.create_partitions([NewPartitions("manual", 5, replica_assignment=[[1, 9]])])[
            "manual"]) == KafkaError.INVALID_REPLICA_ASSIGNMENT
        assert len(_replicas(admin, "manual")) == 4

        # A count beyond limits.MAX_PARTITIONS_PER_TOPIC is INVALID_PARTITIONS on every broker,
        # validate_only or not (found by fuzzing test_every_request_answered against a cluster:
        # 2**31 - 1 made the metadata leader place two billion partitions and stop answering).
        for node in cluster.node_ids:
            for validate_only in (True, False):
                with WireClient("127.0.0.1", cluster.node(node).port) as w:
                    r = w.request(37, 1, {"topics": [{"name": "manual", "count": 2**31 - 1, "assignments": None}],
                                          "timeout_ms": 5000, "validate_only": validate_only})
                assert [(x.error_code, x.error_message) for x in r.results] == [
                    (KafkaError.INVALID_PARTITIONS, f"number of partitions must be in 1..{MAX_PARTITIONS_PER_TOPIC}")]
        admin.create_partitions([NewPartitions("manual", 5)], operation_timeout=15)["manual"].result(30)
        wait_for(lambda: len(_replicas(admin, "manual")) == 5, 15, "the metadata leader stopped answering")


def test_group_configs_are_described_before_any_group_exists(tmp_path):
    """A GROUP DescribeConfigs before ``__consumer_offsets`` exists answers the defaults at once,
    as Kafka does (it keeps group configs in its metadata log), on every broker; it is not a
    retriable COORDINATOR_NOT_AVAILABLE, and it does not create the offsets topic."""
    from confluent_kafka.admin import ConfigResource, ConfigSource, ResourceType

    with LocalCluster(tmp_path, 3) as cluster:
        for node in cluster.node_ids:
            admin = AdminClient({"bootstrap.servers": cluster.node(node).bootstrap_servers})
            res = ConfigResource(ResourceType.GROUP, f"nobody-{node}")
            got = admin.describe_configs([res], request_timeout=10)[res].result(timeout=15)
            assert (got["consumer.session.timeout.ms"].value, got["consumer.session.timeout.ms"].source) == (
                "45000", ConfigSource.DEFAULT_CONFIG.value)
            assert len(got) == 7
        assert "__consumer_offsets" not in admin.list_topics(timeout=10).topics
