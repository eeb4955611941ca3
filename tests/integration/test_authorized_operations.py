"""Authorized operations (KIP-430) in Metadata v8+, DescribeCluster and DescribeGroups v3+, with no
authorizer: every operation Kafka supports on the resource type, INT32_MIN when not asked for."""

from __future__ import annotations

from confluent_kafka import Consumer, TopicCollection, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from litemq.security.acl_operations import AclOperation
from litemq.testing.wire import WireClient
from tests.integration.admin_helpers import unique_name


TOPIC_OPS = {"READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE", "DESCRIBE_CONFIGS", "ALTER_CONFIGS"}
CLUSTER_OPS = {"CREATE", "ALTER", "DESCRIBE", "CLUSTER_ACTION", "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "IDEMPOTENT_WRITE"}
GROUP_OPS = {"READ", "DESCRIBE", "DELETE", "DESCRIBE_CONFIGS", "ALTER_CONFIGS"}
INT32_MIN = -(2**31)


def _bits(names) -> int:
    return sum(1 << AclOperation[n] for n in names)


def test_authorized_operations_confluent(shared_broker):
    admin = AdminClient({"bootstrap.servers": shared_broker.bootstrap_servers})
    topic = unique_name("auth-ops")
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(timeout=30)

    desc = admin.describe_topics(TopicCollection([topic]), include_authorized_operations=True)[topic].result(30)
    assert {op.name for op in desc.authorized_operations} == TOPIC_OPS
    desc = admin.describe_topics(TopicCollection([topic]))[topic].result(30)
    assert not desc.authorized_operations  # not asked for: INT32_MIN, which clients show as none

    cluster = admin.describe_cluster(include_authorized_operations=True).result(30)
    assert {op.name for op in cluster.authorized_operations} == CLUSTER_OPS
    assert not admin.describe_cluster().result(30).authorized_operations

    group = unique_name("auth-ops-g")
    c = Consumer({"bootstrap.servers": shared_broker.bootstrap_servers, "group.id": group,
                  "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition(topic, 0, 0)], asynchronous=False)  # the group exists (offsets only)
    c.close()
    g = admin.describe_consumer_groups([group], include_authorized_operations=True)[group].result(30)
    assert {op.name for op in g.authorized_operations} == GROUP_OPS


def test_authorized_operations_raw(shared_broker):
    with WireClient("127.0.0.1", shared_broker.port) as c:
        topic = unique_name("auth-raw")
        admin = AdminClient({"bootstrap.servers": shared_broker.bootstrap_servers})
        admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(timeout=30)
        for v in (8, 10, 12):
            for asked in (False, True):
                body = {"topics": [{"name": topic, "topic_id": None}, {"name": "no-such-auth-topic", "topic_id": None}],
                        "allow_auto_topic_creation": False, "include_topic_authorized_operations": asked,
                        "include_cluster_authorized_operations": asked}
                r = c.request(3, v, body)
                want = _bits(TOPIC_OPS) if asked else INT32_MIN
                assert [t.topic_authorized_operations for t in r.topics] == [want, want]
                if v <= 10:
                    assert r.cluster_authorized_operations == (_bits(CLUSTER_OPS) if asked else INT32_MIN)
        for asked in (False, True):
            r = c.request(60, 0, {"include_cluster_authorized_operations": asked})
            assert r.cluster_authorized_operations == (_bits(CLUSTER_OPS) if asked else INT32_MIN)
        r = c.request(15, 5, {"groups": ["whatever-group"], "include_authorized_operations": True})
        assert r.groups[0].authorized_operations == _bits(GROUP_OPS)
        r = c.request(15, 5, {"groups": ["whatever-group"], "include_authorized_operations": False})
        assert r.groups[0].authorized_operations == INT32_MIN


def test_authorized_operations_kafka_python(shared_broker):
    from kafka.admin import KafkaAdminClient

    topic = unique_name("auth-kp")
    ck = AdminClient({"bootstrap.servers": shared_broker.bootstrap_servers})
    ck.create_topics([NewTopic(topic, 1, 1)])[topic].result(timeout=30)
    admin = KafkaAdminClient(bootstrap_servers=shared_broker.bootstrap_servers)
    try:
        (desc,) = admin.describe_topics([topic])  # Metadata asking for topic and cluster operations
        assert set(desc["authorized_operations"]) == TOPIC_OPS
        assert set(admin.describe_cluster()["authorized_operations"]) == CLUSTER_OPS
        g = admin.describe_groups(["kp-no-such-group"], include_authorized_operations=True)["kp-no-such-group"]
        assert set(g["authorized_operations"]) == GROUP_OPS
    finally:
        admin.close()
