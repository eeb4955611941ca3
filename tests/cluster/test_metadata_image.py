"""The metadata state machine (litemq.cluster.image): deterministic apply, assignments."""

from __future__ import annotations

import uuid
from collections import Counter

import pytest

from litemq.cluster.image import MetadataImage, assign_replicas, decode_record, encode_record
from litemq.protocol.errors import ErrorCode, KafkaError


def _create(name, assignments, **kw):
    return {"type": "create_topic", "name": name, "topic_id": str(uuid.uuid4()), "configs": kw.get("configs", {}),
            "internal": False, "assignments": assignments}


def test_assignments_spread_replicas_and_preferred_leaders_evenly():
    a = assign_replicas([3, 1, 2], 6, 3, start=0)
    assert all(sorted(r) == [1, 2, 3] for r in a)
    assert Counter(r[0] for r in a) == {1: 2, 2: 2, 3: 2}  # preferred leaders balanced
    # across topics too: the start offset rotates the first replica
    b = assign_replicas([1, 2, 3], 1, 2, start=1)
    assert b == [[2, 3]]
    with pytest.raises(KafkaError) as e:
        assign_replicas([1, 2], 1, 3, start=0)
    assert e.value.code == ErrorCode.INVALID_REPLICATION_FACTOR


def test_apply_is_deterministic_and_replays_to_the_same_image():
    records = [
        {"type": "init", "cluster_id": "abc"},
        {"type": "register_broker", "node_id": 1, "host": "h1", "port": 9092},
        _create("t", [[1, 2], [2, 1]], configs={"retention.ms": "1000"}),
        {"type": "create_partitions", "name": "t", "first": 2, "assignments": [[1, 2]]},
        {"type": "set_configs", "name": "t", "configs": {"retention.ms": "5"}},
        {"type": "producer_ids", "node_id": 1, "start": 0, "count": 1000},
        _create("u", [[1]]),
        {"type": "delete_topic", "name": "u"},
    ]
    a, b = MetadataImage(), MetadataImage()
    for rec in records:
        wire = encode_record(rec)
        assert a.apply(decode_record(wire)).error == 0
        assert b.apply(decode_record(wire)).error == 0
    assert a.to_json() == b.to_json()
    t = a.topics["t"]
    assert t.num_partitions == 3 and t.assignments[2] == [1, 2] and t.configs == {"retention.ms": "5"}
    assert a.next_producer_id == 1000 and "u" not in a.topics
    # a snapshot restores the same image
    assert MetadataImage.from_json(a.to_json()).to_json() == a.to_json()


def test_conflicting_records_fail_without_changing_the_image():
    img = MetadataImage()
    assert img.apply(_create("t", [[1]])).error == 0
    before = img.to_json()
    assert img.apply(_create("t", [[1]])).error == ErrorCode.TOPIC_ALREADY_EXISTS
    assert img.apply({"type": "producer_ids", "node_id": 1, "start": 5, "count": 10}).error != 0
    assert img.apply({"type": "create_partitions", "name": "t", "first": 7, "assignments": [[1]]}).error != 0
    assert img.apply({"type": "delete_topic", "name": "nope"}).error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert img.apply({"type": "bogus"}).error == ErrorCode.INVALID_REQUEST
    assert img.apply({"type": "create_topic", "name": "x"}).error == ErrorCode.INVALID_REQUEST  # malformed
    assert img.to_json() == before


def test_decode_record_rejects_non_objects():
    for bad in (b"[]", b"1", b"{}", b"not json", b'{"type": 3}'):
        with pytest.raises(ValueError):
            decode_record(bad)


def test_unregistered_incarnation_survives_a_snapshot_and_a_new_registration_clears_it():
    img = MetadataImage()
    img.apply({"type": "register_broker", "node_id": 4, "host": "h", "port": 1, "rpc": ["h", 2],
               "roles": "broker", "incarnation": "p1"})
    b = img.brokers[4]
    assert (b.rpc, b.roles, b.incarnation) == (("h", 2), "broker", "p1")
    img.apply({"type": "unregister_broker", "node_id": 4})
    again = MetadataImage.from_json(img.to_json())
    assert 4 not in again.brokers and again.unregistered == {4: "p1"}
    again.apply({"type": "register_broker", "node_id": 4, "host": "h", "port": 1, "incarnation": "p2"})
    assert again.unregistered == {} and again.brokers[4].incarnation == "p2"
    assert again.brokers[4].rpc is None and again.brokers[4].roles == "broker,controller"


def test_replication_factor_does_not_count_a_moves_adding_replicas():
    from litemq.cluster.image import Reassignment

    img = MetadataImage()
    img.apply({"type": "create_topic", "name": "t", "topic_id": str(uuid.uuid4()), "configs": {},
               "assignments": [[1, 2, 3], [2, 3, 1]]})
    assert img.replication_factor("t") == 3 and img.replication_factor("nope") == 1
    img.topics["t"].assignments[0] = [4, 2, 3, 1]  # a move {1,2,3} -> {4,2,3} in progress (Kafka: RF 3)
    img.reassignments[("t", 0)] = Reassignment((4, 2, 3), (1, 2, 3))
    assert img.replication_factor("t") == 3
