"""DescribeTopicPartitions (75, v0, KIP-966) on one broker, through kafka-python 3's
``KafkaAdminClient.describe_topic_partitions`` and raw requests: the fields of every partition,
paging with ``response_partition_limit`` and ``next_cursor`` (each partition once, in order, across
topics), unknown and illegal topic names, the cursor naming a topic that was not asked for
(INVALID_REQUEST), the listing of every topic, and the broker's cap on a page
(``limits.DESCRIBE_TOPIC_PARTITIONS_MAX_PARTITIONS``, Kafka's ``max.request.partition.size.limit``).
Kafka's semantics: ``DescribeTopicPartitionsRequestHandler`` and ``KRaftMetadataCache.describeTopicResponse``
(Kafka 4)."""

from __future__ import annotations

import uuid

import pytest
from kafka.admin import KafkaAdminClient, NewTopic

from litemq import limits
from litemq.protocol.errors import ErrorCode as E
from litemq.security.acl_operations import AclOperation
from litemq.testing.wire import WireClient
from tests.integration.admin_helpers import describe_topic_partition_pages, unique_name

TOPIC_OPS = ("READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE", "DESCRIBE_CONFIGS", "ALTER_CONFIGS")
"""What a caller may do on a topic with no authorizer (KIP-430: every operation of the type)."""
NODE_ID = 1
"""The node id of ``litemq serve`` without a setting."""


@pytest.fixture(scope="module")
def admin(shared_broker):
    a = KafkaAdminClient(bootstrap_servers=shared_broker.bootstrap_servers)
    yield a
    a.close()


def _create(admin: KafkaAdminClient, *topics: tuple[str, int]) -> None:
    admin.create_topics([NewTopic(name, n, 1) for name, n in topics])


def _raw(broker, body: dict):
    with WireClient("127.0.0.1", broker.port) as w:
        return w.request(75, 0, {"topics": [], "response_partition_limit": 2000, "cursor": None, **body})


def test_one_topic_every_field(shared_broker, admin):
    topic = unique_name("dtp-one")
    _create(admin, (topic, 4))
    r = admin.describe_topic_partitions([topic])
    assert r["next_cursor"] is None
    [t] = r["topics"]
    assert (t["error_code"], t["name"], t["is_internal"]) == (E.NONE, topic, False)
    assert t["topic_authorized_operations"] == sum(1 << AclOperation[op] for op in TOPIC_OPS)
    with WireClient("127.0.0.1", shared_broker.port) as w:  # the id Metadata v12 gives the topic
        meta = w.request(3, 12, {"topics": [{"name": topic, "topic_id": None}], "allow_auto_topic_creation": False,
                                 "include_topic_authorized_operations": False})
    assert t["topic_id"] == meta.topics[0].topic_id != uuid.UUID(int=0)
    assert [p["partition_index"] for p in t["partitions"]] == [0, 1, 2, 3]
    for p in t["partitions"]:
        assert p["error_code"] == E.NONE
        assert p["leader_id"] == NODE_ID and p["leader_epoch"] >= 0
        assert p["replica_nodes"] == [NODE_ID] and p["isr_nodes"] == [NODE_ID]
        assert p["offline_replicas"] == []
    # on the wire: no eligible leader replicas and no last known ELR (empty lists; kafka-python shows None)
    raw = _raw(shared_broker, {"topics": [{"name": topic}]})
    assert all(p.eligible_leader_replicas == [] and p.last_known_elr == [] for p in raw.topics[0].partitions)


def test_pages_of_one_partition_across_two_topics(admin):
    base = unique_name("dtp-page")
    a, b = f"{base}-a", f"{base}-b"
    _create(admin, (a, 3), (b, 2))
    pages = describe_topic_partition_pages(admin, [b, a], 1)  # asked out of order: answered by name
    seen = [(t["name"], p["partition_index"]) for page in pages for t in page["topics"] for p in t["partitions"]]
    assert seen == [(a, 0), (a, 1), (a, 2), (b, 0), (b, 1)]
    assert all(sum(len(t["partitions"]) for t in page["topics"]) == 1 for page in pages)
    # the last partition of a ends a page and b is left out whole: the cursor points at b's partition 0
    assert [page["next_cursor"] for page in pages] == [
        {"topic_name": a, "partition_index": 1}, {"topic_name": a, "partition_index": 2},
        {"topic_name": b, "partition_index": 0}, {"topic_name": b, "partition_index": 1}, None]

    # three at a time: a whole, then b whole
    pages = describe_topic_partition_pages(admin, [a, b], 3)
    assert [[(t["name"], len(t["partitions"])) for t in page["topics"]] for page in pages] == [[(a, 3)], [(b, 2)]]
    assert pages[0]["next_cursor"] == {"topic_name": b, "partition_index": 0}

    # a cursor past the first topic skips it; one past the last partition gives the topic with none
    r = admin.describe_topic_partitions([a, b], cursor={"topic_name": b, "partition_index": 1})
    assert [(t["name"], [p["partition_index"] for p in t["partitions"]]) for t in r["topics"]] == [(b, [1])]
    r = admin.describe_topic_partitions([a, b], cursor={"topic_name": a, "partition_index": 7})
    assert [(t["name"], len(t["partitions"])) for t in r["topics"]] == [(a, 0), (b, 2)]


def test_unknown_and_illegal_topics(shared_broker, admin):
    known = unique_name("dtp-known")
    _create(admin, (known, 1))
    missing = unique_name("dtp-gone")  # sorts before dtp-known
    r = admin.describe_topic_partitions([missing, known, "bad name!"])
    got = {t["name"]: (t["error_code"], len(t["partitions"])) for t in r["topics"]}
    assert got == {known: (E.NONE, 1), missing: (E.UNKNOWN_TOPIC_OR_PARTITION, 0),
                   "bad name!": (E.INVALID_TOPIC_EXCEPTION, 0)}
    assert [t["name"] for t in r["topics"]] == sorted(got)
    assert r["next_cursor"] is None
    # an unknown topic takes nothing of the limit...
    r = admin.describe_topic_partitions([missing, known], response_partition_limit=1)
    assert [(t["name"], t["error_code"], len(t["partitions"])) for t in r["topics"]] == [
        (missing, E.UNKNOWN_TOPIC_OR_PARTITION, 0), (known, E.NONE, 1)]
    assert r["next_cursor"] is None
    # ...but once the limit is taken the next page starts at it, as at any topic (Kafka's rule)
    later = unique_name("dtp-z-gone")
    r = admin.describe_topic_partitions([later, known], response_partition_limit=1)
    assert [t["name"] for t in r["topics"]] == [known]
    assert r["next_cursor"] == {"topic_name": later, "partition_index": 0}
    r = admin.describe_topic_partitions([later, known], response_partition_limit=1, cursor=r["next_cursor"])
    assert [(t["name"], t["error_code"]) for t in r["topics"]] == [(later, E.UNKNOWN_TOPIC_OR_PARTITION)]
    assert r["next_cursor"] is None
    # DescribeTopicPartitions never creates a topic (auto.create.topics.enable is on)
    assert missing not in admin.list_topics()


def test_cursor_topic_not_requested_is_invalid_request(admin):
    known = unique_name("dtp-cur")
    _create(admin, (known, 2))
    r = admin.describe_topic_partitions([known, "dtp-other"], cursor={"topic_name": "dtp-zzz", "partition_index": 0})
    assert [(t["name"], t["error_code"], t["partitions"]) for t in r["topics"]] == [
        (known, E.INVALID_REQUEST, []), ("dtp-other", E.INVALID_REQUEST, [])]
    assert r["next_cursor"] is None


def test_empty_list_describes_every_topic(admin):
    base = unique_name("dtp-all")
    _create(admin, (f"{base}-x", 2), (f"{base}-y", 1))
    r = admin.describe_topic_partitions([])
    names = [t["name"] for t in r["topics"]]
    assert names == sorted(admin.list_topics())
    assert {f"{base}-x", f"{base}-y"} <= set(names)
    assert all(t["error_code"] == E.NONE and t["partitions"] for t in r["topics"])
    assert r["next_cursor"] is None
    # the same listing a partition at a time, each partition of every topic once
    pages = describe_topic_partition_pages(admin, [], 1)
    seen = [(t["name"], p["partition_index"]) for page in pages for t in page["topics"] for p in t["partitions"]]
    assert seen == [(t["name"], p["partition_index"]) for t in r["topics"] for p in t["partitions"]]
    # a cursor on a listing needs no existing topic: it starts at the first name not before it
    r = admin.describe_topic_partitions([], cursor={"topic_name": f"{base}-xx", "partition_index": 5})
    assert r["topics"][0]["name"] == f"{base}-y"
    assert [p["partition_index"] for p in r["topics"][0]["partitions"]] == [0]


def test_limits_zero_negative_and_the_broker_cap(shared_broker, admin):
    base = unique_name("dtp-cap")
    _create(admin, (f"{base}-a", 1))
    # limit 0: nothing described, the first topic is the next page's; negative: nothing, no cursor
    r = _raw(shared_broker, {"topics": [{"name": f"{base}-a"}], "response_partition_limit": 0})
    assert r.topics == [] and (r.next_cursor.topic_name, r.next_cursor.partition_index) == (f"{base}-a", 0)
    r = _raw(shared_broker, {"topics": [{"name": f"{base}-a"}], "response_partition_limit": -1})
    assert r.topics == [] and r.next_cursor is None

    big = f"{base}-big"
    cap = limits.DESCRIBE_TOPIC_PARTITIONS_MAX_PARTITIONS
    _create(admin, (big, cap + 1))
    try:
        r = admin.describe_topic_partitions([big], response_partition_limit=cap * 10)
        assert len(r["topics"][0]["partitions"]) == cap
        assert r["next_cursor"] == {"topic_name": big, "partition_index": cap}
        r = admin.describe_topic_partitions([big], response_partition_limit=cap * 10, cursor=r["next_cursor"])
        assert [p["partition_index"] for p in r["topics"][0]["partitions"]] == [cap]
        assert r["next_cursor"] is None
    finally:
        admin.delete_topics([big])  # a broker closes 2001 partitions slowly
