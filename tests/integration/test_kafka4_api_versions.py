"""Versions of Kafka 4.0 that a client may pick and what they change (kafka-python's own suite
infers the broker's version from these): DescribeGroups v6 answers an unknown group
GROUP_ID_NOT_FOUND with a message (KIP-1043; v5 and before: Dead, no error), Metadata v13 has a
top-level error code (KIP-1102), DescribeCluster v2 marks each broker's fencing (KIP-1073)."""

from __future__ import annotations

from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaAdminClient

from litemq.protocol.errors import ErrorCode as E
from litemq.testing.wire import WireClient


def test_describe_groups_v6_unknown_group_is_group_id_not_found(shared_broker):
    with WireClient("127.0.0.1", shared_broker.port) as w:
        v5 = w.request(15, 5, {"groups": ["no-such-group"], "include_authorized_operations": False}).groups[0]
        v6 = w.request(15, 6, {"groups": ["no-such-group"], "include_authorized_operations": False}).groups[0]
    assert (v5.error_code, v5.group_state) == (E.NONE, "Dead")
    assert (v6.error_code, v6.group_state, v6.error_message) == (
        E.GROUP_ID_NOT_FOUND, "Dead", "Group no-such-group not found.")
    admin = KafkaAdminClient(bootstrap_servers=shared_broker.bootstrap_servers)
    try:  # kafka-python picks v6 and reports the group as it does against Kafka 4.0
        described = admin.describe_groups(["no-such-group"])["no-such-group"]
    finally:
        admin.close()
    assert described["group_state"] == "Dead"
    assert described["error"] == "[Error 69] GroupIdNotFoundError: Group no-such-group not found."


def test_metadata_v13_and_describe_cluster_v2_on_one_broker(shared_broker):
    admin = AdminClient({"bootstrap.servers": shared_broker.bootstrap_servers})
    admin.create_topics([NewTopic("api-v13", 2, 1)])["api-v13"].result(timeout=30)
    with WireClient("127.0.0.1", shared_broker.port) as w:
        md = w.request(3, 13, {"topics": [{"name": "api-v13", "topic_id": None}],
                               "allow_auto_topic_creation": False, "include_topic_authorized_operations": False})
        dc = w.request(60, 2, {"include_cluster_authorized_operations": False, "endpoint_type": 1,
                               "include_fenced_brokers": True})
    assert md.error_code == E.NONE and [(t.name, len(t.partitions)) for t in md.topics] == [("api-v13", 2)]
    assert [(b.broker_id, b.is_fenced) for b in dc.brokers] == [(1, False)]


def test_find_coordinator_v6_share_keys_and_v5(shared_broker):
    """FindCoordinator v5 (KIP-890: may answer TRANSACTION_ABORTABLE) changes nothing else; v6
    takes key type SHARE (KIP-932), ``group:topicId:partition``, which older versions refuse."""
    share_key = "g:AAAAAAAAAAAAAAAAAAAAAQ:3"
    with WireClient("127.0.0.1", shared_broker.port) as w:
        v5 = w.request(10, 5, {"key_type": 0, "coordinator_keys": ["a-group"]}).coordinators
        old = w.request(10, 5, {"key_type": 2, "coordinator_keys": [share_key]}).coordinators
        v6 = w.request(10, 6, {"key_type": 2, "coordinator_keys": [
            share_key, "g:AAAAAAAAAAAAAAAAAAAAAQ", ":AAAAAAAAAAAAAAAAAAAAAQ:0", "g:!!!!!!!!!!!!!!!!!!!!!!:0",
            "g:AAAAAAAAAAAAAAAAAAAAAQ:-1", "g:AAAAAAAAAAAAAAAAAAAAAQ:x"]}).coordinators
    assert [(c.error_code, c.node_id) for c in v5] == [(E.NONE, 1)]
    assert [c.error_code for c in old] == [E.INVALID_REQUEST]
    assert [(c.key, c.error_code, c.node_id) for c in v6][0] == (share_key, E.NONE, 1)
    assert [c.error_code for c in v6[1:]] == [E.INVALID_REQUEST] * 5
