"""Reassignment records (KIP-455) in the metadata image: planning, applying, listing, snapshots
(litemq.cluster.reassignment over litemq.cluster.image)."""

from __future__ import annotations

import json
import uuid

import pytest

from litemq.cluster.image import MetadataImage
from litemq.cluster.reassignment import (PartitionReassignments, completion_record, listed_reassignments,
                                         plan_reassignment)
from litemq.protocol.errors import ErrorCode, KafkaError

LIVE = [1, 2, 3, 4, 5]


def _image() -> MetadataImage:
    img = MetadataImage()
    for n in LIVE:
        assert not img.apply({"type": "register_broker", "node_id": n, "host": "h", "port": 9000 + n}).error
    assert not img.apply({"type": "create_topic", "name": "t", "topic_id": str(uuid.uuid4()), "configs": {},
                          "internal": False, "assignments": [[1, 2, 3], [2, 3, 1]]}).error
    return img


def _apply(img: MetadataImage, rec: dict) -> None:
    res = img.apply(rec)
    assert not res.error, res.message
    assert res.changed_partitions == [(rec["name"], rec["partition"])]


def _code(fn, *args) -> int:
    with pytest.raises(KafkaError) as e:
        fn(*args)
    return e.value.code


def test_a_move_lists_adding_and_removing_then_completes():
    img = _image()
    _apply(img, plan_reassignment(img, "t", 0, [2, 3, 4], LIVE))
    assert img.replicas("t", 0) == [2, 3, 4, 1]  # target first, then the replicas leaving
    assert listed_reassignments(img, None) == [{"name": "t", "partitions": [
        {"partition_index": 0, "replicas": [2, 3, 4, 1], "adding_replicas": [4], "removing_replicas": [1]}]}]
    assert listed_reassignments(img, [("t", [1]), ("nope", [0])]) == []
    # a new target while the move runs keeps the original and every replica that may still be a member
    _apply(img, plan_reassignment(img, "t", 0, [2, 3, 5], LIVE))
    assert img.replicas("t", 0) == [2, 3, 5, 4, 1]
    move = img.reassignments[("t", 0)]
    assert (move.adding, move.removing) == ([5], [1])
    _apply(img, completion_record(img, "t", 0, [2, 3, 5]))
    assert img.replicas("t", 0) == [2, 3, 5] and not img.reassignments
    assert _code(completion_record, img, "t", 0, [2, 3, 5]) == ErrorCode.NO_REASSIGNMENT_IN_PROGRESS


def test_cancel_walks_back_and_is_not_listed():
    img = _image()
    assert _code(plan_reassignment, img, "t", 0, None, LIVE) == ErrorCode.NO_REASSIGNMENT_IN_PROGRESS
    _apply(img, plan_reassignment(img, "t", 0, [2, 3, 4], LIVE))
    _apply(img, plan_reassignment(img, "t", 0, None, LIVE))
    assert img.reassignments[("t", 0)].target == (1, 2, 3)
    assert img.replicas("t", 0) == [1, 2, 3, 4]  # 4 keeps its replica until the walk back ends
    assert listed_reassignments(img, None) == []
    assert _code(plan_reassignment, img, "t", 0, None, LIVE) == ErrorCode.NO_REASSIGNMENT_IN_PROGRESS
    _apply(img, completion_record(img, "t", 0, [1, 2, 3]))
    assert img.replicas("t", 0) == [1, 2, 3] and not img.reassignments


def test_kafka_errors_and_no_ops():
    img = _image()
    assert _code(plan_reassignment, img, "nope", 0, [1], LIVE) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert _code(plan_reassignment, img, "t", 2, [1], LIVE) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    for bad in ([], [1, 1], [1, 9]):
        assert _code(plan_reassignment, img, "t", 0, bad, LIVE) == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert _code(plan_reassignment, img, "t", 0, [4, 5], [1, 2, 3]) == ErrorCode.INVALID_REPLICA_ASSIGNMENT  # fenced
    assert plan_reassignment(img, "t", 0, [1, 2, 3], LIVE) is None
    reorder = plan_reassignment(img, "t", 0, [3, 1, 2], LIVE)  # the preferred leader changes, no move
    assert reorder["target"] is None
    _apply(img, reorder)
    assert img.replicas("t", 0) == [3, 1, 2] and not img.reassignments


def test_moves_survive_a_snapshot_and_die_with_their_topic():
    img = _image()
    _apply(img, plan_reassignment(img, "t", 1, [4, 5], LIVE))
    copy = MetadataImage.from_json(json.loads(json.dumps(img.to_json())))
    assert copy.reassignments == img.reassignments and copy.replicas("t", 1) == [4, 5, 2, 3, 1]
    assert not copy.apply({"type": "delete_topic", "name": "t"}).error
    assert copy.reassignments == {}
    # a record for a partition that is gone, or a target outside the replicas, is refused
    assert copy.apply({"type": "change_partition", "name": "t", "partition": 1, "replicas": [1],
                       "target": None, "original": None}).error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert img.apply({"type": "change_partition", "name": "t", "partition": 1, "replicas": [1],
                      "target": [2], "original": [1]}).error == ErrorCode.INVALID_REPLICA_ASSIGNMENT


class _Broker(PartitionReassignments):
    """The reassignment part of a broker over real Raft nodes (the raft test harness) and image."""

    def __init__(self, image: MetadataImage, groups: dict) -> None:
        self.image, self.groups = image, groups


def test_an_idle_new_leader_reports_a_finished_move():
    """A move whose last change committed, then a leader change on an idle partition: the new
    leader writes no entry of its term (noop_only_when_needed), yet it reports the committed
    configuration in its heartbeat so the metadata leader can end the move (it must not wait for
    an entry of its term that never comes)."""
    from tests.raft.raft_harness import Cluster

    from litemq.raft import RaftConfig, Role

    c = Cluster(ids=(1, 2, 3), seed=13, config=RaftConfig(noop_only_when_needed=True))
    leader = c.wait_leader()
    c.pump()
    c.tick(3)
    img = _image()
    # a move of t-0 from {1,2,3,4} to {1,2,3} whose Raft changes are all done
    _apply(img, {"type": "change_partition", "name": "t", "partition": 0, "replicas": [1, 2, 3, 4],
                 "target": [1, 2, 3], "original": [1, 2, 3, 4]})
    other = next(i for i in (1, 2, 3) if i != leader.id)
    leader.transfer_leadership(other)
    c.pump()
    c.tick(5)
    new = c.nodes[other]
    assert new.role is Role.LEADER
    reports = _Broker(img, {"t-0": type("G", (), {"node": new})()})._reassignment_reports()
    assert reports == [["t", 0, [1, 2, 3], []]]
    follower = _Broker(img, {"t-0": type("G", (), {"node": leader})()})
    assert follower._reassignment_reports() == []  # only a leader reports
