"""CreateTopics/CreatePartitions manual replica assignments on one broker (node id 1), with
confluent-kafka's admin client and raw requests (Kafka 3.9 ``ReplicationControlManager`` rules)."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from litemq.protocol.errors import ErrorCode
from litemq.testing.wire import WireClient
from tests.integration.admin_helpers import error_code, unique_name


# ====================================================================== manual replica assignment
def test_create_topic_and_partitions_with_replica_assignment(shared_broker):
    admin = AdminClient({"bootstrap.servers": shared_broker.bootstrap_servers})
    topic = unique_name("assigned")
    # librdkafka sends num_partitions = replication_factor = -1 with the assignment, as Kafka requires
    admin.create_topics([NewTopic(topic, 3, replica_assignment=[[1], [1], [1]])])[topic].result(timeout=30)
    md = admin.list_topics(topic, timeout=10).topics[topic]
    assert sorted(md.partitions) == [0, 1, 2]
    assert all(p.replicas == [1] and p.leader == 1 for p in md.partitions.values())

    admin.create_partitions([NewPartitions(topic, 5, replica_assignment=[[1], [1]])])[topic].result(timeout=30)
    md = admin.list_topics(topic, timeout=10).topics[topic]
    assert sorted(md.partitions) == [0, 1, 2, 3, 4] and md.partitions[4].replicas == [1]

    fut = admin.create_partitions([NewPartitions(topic, 6, replica_assignment=[[2]])])[topic]
    assert error_code(fut) == KafkaError.INVALID_REPLICA_ASSIGNMENT      # no broker 2
    fut = admin.create_partitions([NewPartitions(topic, 7, replica_assignment=[[1]])])[topic]
    assert error_code(fut) == KafkaError.INVALID_REPLICA_ASSIGNMENT      # 2 new partitions, 1 list
    fut = admin.create_partitions([NewPartitions(topic, 6, replica_assignment=[[1, 1]])])[topic]
    assert error_code(fut) == KafkaError.INVALID_REPLICA_ASSIGNMENT      # broker twice
    assert len(admin.list_topics(topic, timeout=10).topics[topic].partitions) == 5


@pytest.mark.parametrize("assignment", [[[2]], [[1, 1]], [[1], [3]]])
def test_create_topic_with_bad_replica_assignment(shared_broker, assignment):
    admin = AdminClient({"bootstrap.servers": shared_broker.bootstrap_servers})
    topic = unique_name("bad-assigned")
    assert error_code(admin.create_topics([NewTopic(topic, len(assignment), replica_assignment=assignment)])[topic]) == \
        KafkaError.INVALID_REPLICA_ASSIGNMENT
    assert topic not in admin.list_topics(timeout=10).topics


def _create_raw(c: WireClient, topic: str, num_partitions: int, rf: int, assignments, validate_only=False):
    resp = c.request(19, 5, {"topics": [{"name": topic, "num_partitions": num_partitions, "replication_factor": rf,
                                         "assignments": [{"partition_index": i, "broker_ids": ids}
                                                         for i, ids in assignments],
                                         "configs": []}],
                             "timeout_ms": 10000, "validate_only": validate_only})
    t = resp.topics[0]
    return t.error_code, t.error_message, t.num_partitions, t.replication_factor


def test_create_topic_assignment_rules_raw(shared_broker):
    with WireClient("127.0.0.1", shared_broker.port) as c:
        topic = unique_name("raw-assigned")
        code, msg, _, _ = _create_raw(c, topic, 2, -1, [(0, [1]), (1, [1])])
        assert code == ErrorCode.INVALID_REQUEST and "numPartitions" in msg
        code, msg, _, _ = _create_raw(c, topic, -1, 1, [(0, [1]), (1, [1])])
        assert code == ErrorCode.INVALID_REQUEST and "replication factor" in msg
        assert _create_raw(c, topic, -1, -1, [(0, [1]), (2, [1])])[0] == ErrorCode.INVALID_REPLICA_ASSIGNMENT
        assert _create_raw(c, topic, -1, -1, [(0, [1]), (0, [1])])[0] == ErrorCode.INVALID_REPLICA_ASSIGNMENT
        assert _create_raw(c, topic, -1, -1, [(1, [1])])[0] == ErrorCode.INVALID_REPLICA_ASSIGNMENT
        assert _create_raw(c, topic, -1, -1, [(0, [1]), (1, [])])[0] == ErrorCode.INVALID_REPLICA_ASSIGNMENT
        assert _create_raw(c, topic, -1, -1, [(0, [1]), (1, [1])], validate_only=True)[::2] == (0, 2)
        assert _create_raw(c, topic, -1, -1, [(1, [1]), (0, [1])]) == (0, None, 2, 1)  # any order
        assert _create_raw(c, topic, -1, -1, [(0, [1])])[0] == ErrorCode.TOPIC_ALREADY_EXISTS
