"""Admin requests answered as Kafka 4 answers them, where a hunt with the Python clients found
LiteMQ different (each case names Kafka's code):

- a topic named twice in one CreateTopics, CreatePartitions or DeleteTopics (or a topic id twice
  in DeleteTopics v6) gets one INVALID_REQUEST "Duplicate topic name." / "Duplicate topic id."
  result and is not acted on (``ControllerApis``); librdkafka refused the whole response before
  ("Broker returned topic t1 multiple times") while the other topics had changed;
- IncrementalAlterConfigs APPEND/SUBTRACT on a config that is not a LIST is INVALID_CONFIG
  "Can't APPEND to key retention.ms because its type is not LIST." (``ConfigurationControlManager``);
- DeleteRecords on a topic whose cleanup.policy has no ``delete`` is POLICY_VIOLATION
  (``Partition.deleteRecordsOnLeader``);
- CreateTopics v5+ answers the created topic's configs in effect, with their sources, also with
  validate_only, and validate_only the replication factor asked for;
- a ListOffsets timestamp lookup that finds no record answers leader epoch -1 with offset -1.
"""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
    ResourceType,
)

from litemq.broker.config_types import ConfigSource
from litemq.protocol.errors import ErrorCode as E
from litemq.testing.wire import WireClient
from tests.integration.admin_helpers import error_code, unique_name

CREATE_TOPICS, DELETE_TOPICS, CREATE_PARTITIONS, LIST_OFFSETS = 19, 20, 37, 2


def _wire(broker) -> WireClient:
    return WireClient("127.0.0.1", broker.port)


def _creatable(name: str, partitions: int, configs: dict | None = None) -> dict:
    return {"name": name, "num_partitions": partitions, "replication_factor": 1, "assignments": [],
            "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()]}


def _create(w: WireClient, topics: list[dict], validate_only: bool = False):
    return w.request(CREATE_TOPICS, 7, {"topics": topics, "timeout_ms": 15000, "validate_only": validate_only}).topics


def test_duplicate_topic_names_get_one_invalid_request_each_and_are_not_acted_on(shared_broker):
    dup, ok = unique_name("dup"), unique_name("ok")
    with _wire(shared_broker) as w:
        results = _create(w, [_creatable(dup, 1), _creatable(ok, 2), _creatable(dup, 2)])
        assert [(r.name, r.error_code, r.error_message) for r in results] == [
            (dup, E.INVALID_REQUEST, "Duplicate topic name."), (ok, E.NONE, None)]
        metadata = w.request(3, 12, {"topics": [{"name": dup, "topic_id": None}],
                                     "allow_auto_topic_creation": False})
        assert metadata.topics[0].error_code == E.UNKNOWN_TOPIC_OR_PARTITION  # not created

    admin = AdminClient({"bootstrap.servers": shared_broker.bootstrap_servers})
    other = unique_name("grow")
    admin.create_topics([NewTopic(other, 1, 1)])[other].result(15)
    futures = admin.create_partitions([NewPartitions(ok, 3), NewPartitions(other, 2), NewPartitions(ok, 4)])
    assert error_code(futures[ok]) == E.INVALID_REQUEST
    futures[other].result(15)  # the response is no longer refused as a whole
    md = admin.list_topics(timeout=10)
    assert len(md.topics[ok].partitions) == 2 and len(md.topics[other].partitions) == 2

    with _wire(shared_broker) as w:
        topic_id = w.request(3, 12, {"topics": [{"name": ok, "topic_id": None}],
                                     "allow_auto_topic_creation": False}).topics[0].topic_id
        by_name = w.request(DELETE_TOPICS, 5, {"topic_names": [other, other], "timeout_ms": 15000}).responses
        assert [(r.name, r.error_code, r.error_message) for r in by_name] == [
            (other, E.INVALID_REQUEST, "Duplicate topic name.")]
        by_id = w.request(DELETE_TOPICS, 6, {"topics": [{"name": None, "topic_id": topic_id},
                                                        {"name": None, "topic_id": topic_id}],
                                             "timeout_ms": 15000}).responses
        assert [(r.topic_id, r.error_code, r.error_message) for r in by_id] == [
            (topic_id, E.INVALID_REQUEST, "Duplicate topic id.")]
    assert {ok, other} <= set(admin.list_topics(timeout=10).topics)  # neither deleted


def test_append_and_subtract_need_a_list_config(shared_broker):
    admin = AdminClient({"bootstrap.servers": shared_broker.bootstrap_servers})
    topic = unique_name("lists")
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(15)

    def alter(rtype: str, name: str, key: str, value: str, op):
        res = ConfigResource(rtype, name, incremental_configs=[ConfigEntry(key, value, incremental_operation=op)])
        return admin.incremental_alter_configs([res])[res]

    for op, word in ((AlterConfigOpType.APPEND, "APPEND"), (AlterConfigOpType.SUBTRACT, "SUBTRACT")):
        with pytest.raises(KafkaException) as exc:
            alter("topic", topic, "retention.ms", "5", op).result(15)
        err = exc.value.args[0]
        assert err.code() == E.INVALID_CONFIG, err
        assert f"Can't {word} to key retention.ms because its type is not LIST." in err.str(), err
    with pytest.raises(KafkaException) as exc:
        alter("broker", "1", "log.retention.ms", "1", AlterConfigOpType.APPEND).result(15)
    assert exc.value.args[0].code() == E.INVALID_CONFIG
    alter("topic", topic, "cleanup.policy", "compact", AlterConfigOpType.APPEND).result(15)  # a LIST
    res = ConfigResource("topic", topic)
    configs = admin.describe_configs([res])[res].result(15)
    assert configs["cleanup.policy"].value == "delete,compact" and configs["retention.ms"].value == "604800000"


def test_delete_records_needs_the_delete_cleanup_policy(shared_broker):
    admin = AdminClient({"bootstrap.servers": shared_broker.bootstrap_servers})
    compacted, both = unique_name("compacted"), unique_name("both")
    for name, policy in ((compacted, "compact"), (both, "compact,delete")):
        admin.create_topics([NewTopic(name, 1, 1, config={"cleanup.policy": policy})])[name].result(15)
    p = Producer({"bootstrap.servers": shared_broker.bootstrap_servers})
    for name in (compacted, both):
        for i in range(3):
            p.produce(name, key=f"k{i}".encode(), value=b"v")
    assert p.flush(15) == 0
    [fut] = admin.delete_records([TopicPartition(compacted, 0, 2)]).values()
    assert error_code(fut) == E.POLICY_VIOLATION
    [fut] = admin.delete_records([TopicPartition(both, 0, 2)]).values()
    assert fut.result(15).low_watermark == 2


def test_create_topics_answers_the_configs_in_effect(shared_broker):
    name = unique_name("configs")
    with _wire(shared_broker) as w:
        for validate_only in (True, False):
            [r] = _create(w, [dict(_creatable(name, 2, {"retention.ms": "3600000"}), replication_factor=-1)],
                          validate_only=validate_only)
            assert r.error_code == E.NONE and (r.num_partitions, r.replication_factor) == (2, 1), r
            configs = {c.name: (c.value, c.config_source) for c in r.configs}
            assert configs["retention.ms"] == ("3600000", ConfigSource.DYNAMIC_TOPIC_CONFIG), configs
            assert configs["cleanup.policy"] == ("delete", ConfigSource.DEFAULT_CONFIG), configs
            assert len(configs) > 20, configs


def test_list_offsets_by_timestamp_without_a_record_answers_no_epoch(shared_broker):
    admin = AdminClient({"bootstrap.servers": shared_broker.bootstrap_servers})
    topic = unique_name("times")
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(15)
    p = Producer({"bootstrap.servers": shared_broker.bootstrap_servers})
    p.produce(topic, b"v", timestamp=1_000)
    assert p.flush(15) == 0
    with _wire(shared_broker) as w:
        def lookup(ts: int):
            return w.request(LIST_OFFSETS, 7, {"replica_id": -1, "isolation_level": 0, "topics": [
                {"name": topic, "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": ts}]}]}
            ).topics[0].partitions[0]
        found, missing = lookup(500), lookup(2_000)
    assert (found.offset, found.timestamp) == (0, 1_000) and found.leader_epoch >= 0, found
    assert (missing.offset, missing.timestamp, missing.leader_epoch) == (-1, -1, -1), missing


def test_topic_configs_list_the_flush_policy(shared_broker):
    """Kafka lists ``flush.messages`` and ``flush.ms`` among a topic's configs (kafka-configs.sh
    --describe --all). LiteMQ's durable default shows as ``flush.messages=1`` with no time-based
    flush; Kafka's own policy set on a topic shows as the topic's value."""
    admin = AdminClient({"bootstrap.servers": shared_broker.bootstrap_servers})
    durable, kafkas = unique_name("flush-default"), unique_name("flush-kafka")
    for fut in admin.create_topics([NewTopic(durable, 1, 1), NewTopic(kafkas, 1, 1, config={
            "flush.messages": "9223372036854775807"})]).values():
        fut.result(15)
    got = {}
    for name in (durable, kafkas):
        res = ConfigResource(ResourceType.TOPIC, name)
        entries = admin.describe_configs([res])[res].result(15)
        got[name] = {k: (entries[k].value, entries[k].source) for k in ("flush.messages", "flush.ms")}
    default = ConfigSource.DEFAULT_CONFIG.value
    assert got[durable] == {"flush.messages": ("1", default), "flush.ms": ("9223372036854775807", default)}
    assert got[kafkas] == {"flush.messages": ("9223372036854775807", ConfigSource.DYNAMIC_TOPIC_CONFIG.value),
                           "flush.ms": ("9223372036854775807", default)}
