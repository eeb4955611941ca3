"""KIP-848 regex subscriptions under ACLs (Kafka 4.1 ``filterTopicDescribeAuthorizedTopics``): a
member is assigned only the matching topics its principal may DESCRIBE, and a topic it is
granted later joins its assignment at a following heartbeat - with librdkafka's KIP-848
consumer over SASL/PLAIN against a broker with the StandardAuthorizer."""

from __future__ import annotations

import time

from confluent_kafka import Consumer
from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType, AdminClient, NewTopic,
                                   ResourcePatternType, ResourceType)

from litemq.testing.process import BrokerProcess
from tests.security.security_helpers import ADMIN_PASSWORD, ADMIN_USER, plain_jaas

USERS = {ADMIN_USER: ADMIN_PASSWORD, "alice": "alice-pw"}


def _client(broker, user: str, password: str) -> dict:
    return {"bootstrap.servers": broker.bootstrap_servers, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN", "sasl.username": user, "sasl.password": password}


def _grant(admin: AdminClient, principal: str, resource_type, name: str, *operations) -> None:
    bindings = [AclBinding(resource_type, name, ResourcePatternType.LITERAL, principal, "*", op,
                           AclPermissionType.ALLOW) for op in operations]
    for fut in admin.create_acls(bindings).values():
        fut.result(30)


def _assigned_topics(consumer: Consumer, want: set[str], timeout_s: float) -> set[str]:
    deadline = time.monotonic() + timeout_s
    topics: set[str] = set()
    while time.monotonic() < deadline:
        consumer.poll(0.2)
        topics = {tp.topic for tp in consumer.assignment()}
        if topics == want:
            break
    return topics


def _broker_side(broker) -> tuple[set[str], set[str]]:
    """(assigned, target) topics of the group's one member, as the coordinator has them
    (ConsumerGroupDescribe as the super user): the client alone cannot show it, as librdkafka
    drops assigned topics it cannot describe."""
    from litemq.testing.wire import WireClient

    with WireClient("127.0.0.1", broker.port) as w:
        w.sasl_plain(ADMIN_USER, ADMIN_PASSWORD)
        g = w.request(69, 0, {"group_ids": ["regex-group"], "include_authorized_operations": False}).groups[0]
    assert g.error_code == 0 and len(g.members) == 1, g
    m = g.members[0]
    return ({t.topic_name for t in m.assignment.topic_partitions},
            {t.topic_name for t in m.target_assignment.topic_partitions})


def test_regex_subscription_is_assigned_only_describable_topics(tmp_path):
    overrides = {"listener.security.protocol.map": "SASL_PLAINTEXT:SASL_PLAINTEXT",
                 "inter.broker.listener.name": "SASL_PLAINTEXT", "sasl.enabled.mechanisms": "PLAIN",
                 "listener.name.sasl_plaintext.plain.sasl.jaas.config": plain_jaas(USERS),
                 "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                 "super.users": "User:admin", "allow.everyone.if.no.acl.found": "false",
                 "group.consumer.heartbeat.interval.ms": "500"}
    with BrokerProcess(tmp_path / "data", overrides=overrides, listeners={"SASL_PLAINTEXT": 0}) as broker:
        admin = AdminClient(_client(broker, ADMIN_USER, ADMIN_PASSWORD))
        for name in ("orders-eu", "orders-us", "payments"):
            admin.create_topics([NewTopic(name, 2, 1)])[name].result(30)
        _grant(admin, "User:alice", ResourceType.GROUP, "regex-group", AclOperation.READ)
        _grant(admin, "User:alice", ResourceType.TOPIC, "orders-eu", AclOperation.DESCRIBE, AclOperation.READ)
        consumer = Consumer({**_client(broker, "alice", "alice-pw"), "group.id": "regex-group",
                             "group.protocol": "consumer", "auto.offset.reset": "earliest"})
        try:
            consumer.subscribe(["^orders-.*"])
            # orders-us matches too, but alice may not describe it: it is not hers to consume
            assert _assigned_topics(consumer, {"orders-eu"}, 30) == {"orders-eu"}
            time.sleep(2)  # a few more heartbeats: still only the describable topic
            assert _assigned_topics(consumer, {"orders-eu"}, 1) == {"orders-eu"}
            assert _broker_side(broker) == ({"orders-eu"}, {"orders-eu"})
            _grant(admin, "User:alice", ResourceType.TOPIC, "orders-us", AclOperation.DESCRIBE, AclOperation.READ)
            assert _assigned_topics(consumer, {"orders-eu", "orders-us"}, 30) == {"orders-eu", "orders-us"}
            assert _broker_side(broker) == ({"orders-eu", "orders-us"}, {"orders-eu", "orders-us"})
        finally:
            consumer.close()
