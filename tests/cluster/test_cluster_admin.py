"""Admin APIs on a 3-broker cluster: manual replica assignments in CreateTopics and
CreatePartitions go through the metadata log as given and show up in Metadata."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from litemq.testing.cluster import LocalCluster, wait_for

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
