"""KIP-932 share-group membership survives a coordinator restart, as in Kafka 4.1: the group
epoch, the assignment epoch, every member with its epoch, subscriptions and assignment, and
empty groups are written to ``__consumer_offsets`` (ShareGroupMetadata, ShareGroupMemberMetadata,
target assignment and current assignment records) and replayed when the coordinator loads its
partition; a member then carries on with its own epoch (no UNKNOWN_MEMBER_ID, no rejoin).

Real ``litemq serve`` process SIGKILLed and restarted; the wire client speaks
ShareGroupHeartbeat/ShareGroupDescribe v1 and ListGroups v5, and a confluent-kafka
ShareConsumer stays open across the restart. DeleteGroups of a share group is durable too.
"""

from __future__ import annotations

import time

from groups_helpers import create_topic, wait_until
from litemq.protocol.errors import ErrorCode as E
from litemq.testing.process import BrokerProcess
from litemq.testing.wire import WireClient
from test_share_groups import OVERRIDES, consumer, poll_records, produce


def heartbeat(w: WireClient, group: str, member: str, epoch: int, topics: list[str] | None = None):
    return w.request(76, 1, {"group_id": group, "member_id": member, "member_epoch": epoch, "rack_id": None,
                             "subscribed_topic_names": topics})


def describe(w: WireClient, group: str) -> dict:
    g = w.request(77, 1, {"group_ids": [group], "include_authorized_operations": False}).groups[0]
    return {"error": g.error_code, "state": g.group_state, "epoch": g.group_epoch,
            "assignment_epoch": g.assignment_epoch,
            "members": {m.member_id: (m.member_epoch, tuple(m.subscribed_topic_names),
                                      sorted((t.topic_id, tuple(t.partitions)) for t in m.assignment.topic_partitions))
                        for m in g.members}}


def share_groups(w: WireClient) -> dict[str, str]:
    res = w.request(16, 5, {"states_filter": [], "types_filter": ["share"]})
    return {g.group_id: g.group_state for g in res.groups}


def test_share_group_members_epochs_and_assignments_survive_a_coordinator_restart(tmp_path):
    b = BrokerProcess(tmp_path / "data", overrides=OVERRIDES).start()
    try:
        bs = b.bootstrap_servers
        create_topic(bs, "queue-durable", 2)
        with WireClient("127.0.0.1", b.port) as w:
            r1 = heartbeat(w, "g-durable", "member-1", 0, ["queue-durable"])
            assert r1.error_code == E.NONE
            r2 = heartbeat(w, "g-durable", "member-2", 0, ["queue-durable"])
            assert r2.error_code == E.NONE
            r1 = heartbeat(w, "g-durable", "member-1", r1.member_epoch)  # moves to the latest epoch
            r3 = heartbeat(w, "g-durable", "member-3", 0, ["queue-durable"])
            assert heartbeat(w, "g-durable", "member-3", -1).error_code == E.NONE  # leaves
            r2 = heartbeat(w, "g-durable", "member-2", r2.member_epoch)
            assert heartbeat(w, "g-empty", "lonely", 0, ["queue-durable"]).error_code == E.NONE
            assert heartbeat(w, "g-empty", "lonely", -1).error_code == E.NONE
            before = describe(w, "g-durable")
            assert before["error"] == E.NONE and set(before["members"]) == {"member-1", "member-2"}
            assert r3.error_code == E.NONE and before["epoch"] >= 4
            assert share_groups(w) == {"g-durable": "Stable", "g-empty": "Empty"}
        b.kill()
        b.start()
        with WireClient("127.0.0.1", b.port) as w:
            after = wait_until(lambda: (d := describe(w, "g-durable"))["error"] == E.NONE and d, 30,
                               "the share group after the restart")
            assert after == before  # epochs, members, subscriptions and assignments as they were
            assert share_groups(w) == {"g-durable": "Stable", "g-empty": "Empty"}
            # members carry on from their own epochs (member-1 catches up with the group epoch
            # it had not heard of yet), and the group epoch continues
            for mid in ("member-1", "member-2"):
                again = heartbeat(w, "g-durable", mid, before["members"][mid][0])
                assert again.error_code == E.NONE and again.member_epoch == before["epoch"]
            r4 = heartbeat(w, "g-durable", "member-4", 0, ["queue-durable"])
            assert r4.error_code == E.NONE and r4.member_epoch == before["epoch"] + 1
            assert heartbeat(w, "g-durable", "member-9", 5).error_code == E.UNKNOWN_MEMBER_ID
            # DeleteGroups of the empty share group writes its tombstones: it stays deleted
            deleted = w.request(42, 2, {"groups_names": ["g-empty", "g-durable"]}).results
            assert [(d.group_id, d.error_code) for d in deleted] == [("g-empty", E.NONE),
                                                                     ("g-durable", E.NON_EMPTY_GROUP)]
        b.kill()
        b.start()
        with WireClient("127.0.0.1", b.port) as w:
            assert wait_until(lambda: share_groups(w), 30, "the share groups") == {"g-durable": "Stable"}
    finally:
        b.stop()


def test_a_share_consumer_keeps_its_membership_across_a_broker_restart(tmp_path):
    b = BrokerProcess(tmp_path / "data", overrides=OVERRIDES).start()
    c = None
    try:
        bs = b.bootstrap_servers
        create_topic(bs, "queue-restart", 1)
        produce(bs, "queue-restart", 5, 1)
        c = consumer(bs, "g-restart", "queue-restart")
        assert len(poll_records(c, 15, want=5)) == 5
        c.commit_sync()  # implicit mode: acknowledges them now, not with the next fetch
        with WireClient("127.0.0.1", b.port) as w:
            before = describe(w, "g-restart")
        (member_id, (member_epoch, _, _)), = before["members"].items()
        b.kill()
        time.sleep(0.5)
        b.start()
        produce(bs, "queue-restart", 5, 1, start=5)
        assert sorted(o for _, o, _, _ in poll_records(c, 30, want=5)) == [5, 6, 7, 8, 9]
        with WireClient("127.0.0.1", b.port) as w:
            after = describe(w, "g-restart")
        # the same member, not a rejoin under a new epoch: the group epoch did not move
        assert set(after["members"]) == {member_id}
        assert after["members"][member_id][0] == member_epoch and after["epoch"] == before["epoch"]
    finally:
        if c is not None:
            c.close()
        b.stop()



def describe_offsets(w: WireClient, group: str, topic: str | None = None, partitions=()) -> tuple[int, dict]:
    """DescribeShareGroupOffsets v0 of one group (``topic`` None: Topics null, every topic the
    group has state for): (group error, {(topic, partition): (start offset, error)})."""
    topics = None if topic is None else [{"topic_name": topic, "partitions": list(partitions)}]
    g = w.request(90, 0, {"groups": [{"group_id": group, "topics": topics}]}).groups[0]
    return g.error_code, {(t.topic_name, p.partition_index): (p.start_offset, p.error_code)
                          for t in g.topics for p in t.partitions}


def share_fetch(w: WireClient, group: str, member: str, epoch: int, topic: str, partitions, acks=None):
    """ShareFetch v1 of ``partitions`` of ``topic`` (``acks``: partition -> acknowledgement
    batches): {partition: first offset acquired} and the response."""
    tid = w.request(3, 12, {"topics": [{"name": topic, "topic_id": None}], "allow_auto_topic_creation": False,
                            "include_topic_authorized_operations": False}).topics[0].topic_id
    r = w.request(78, 1, {"group_id": group, "member_id": member, "share_session_epoch": epoch, "max_wait_ms": 2000,
                          "min_bytes": 1, "max_bytes": 1 << 20, "max_records": 100, "batch_size": 100,
                          "topics": [{"topic_id": tid, "partitions": [
                              {"partition_index": i, "acknowledgement_batches": (acks or {}).get(i, [])}
                              for i in partitions]}], "forgotten_topics_data": []})
    firsts = {p.partition_index: min(a.first_offset for a in p.acquired_records)
              for t in r.responses for p in t.partitions if p.acquired_records}
    return firsts, r


def test_share_partition_state_is_described_and_deleted_after_a_restart(tmp_path):
    """After a restart nothing of ``__share_group_state`` is loaded until a share-partition is
    read. DescribeShareGroupOffsets of all topics (what ``litemq share-group describe`` and
    kafka-share-groups.sh ask) still lists the empty group's share-partitions, and DeleteGroups
    deletes their state (Kafka: DeleteShareGroupState of every share-partition the group
    initialised), so the group created again with the same id starts afresh (``earliest``: at
    0), not at the old start offset (found by a hunt: both only saw state already in memory)."""
    b = BrokerProcess(tmp_path / "data", overrides=OVERRIDES).start()
    try:
        bs = b.bootstrap_servers
        create_topic(bs, "queue-forget", 2)
        produce(bs, "queue-forget", 20, 2)
        with WireClient("127.0.0.1", b.port) as w:
            assert heartbeat(w, "g-forget", "member-old", 0, ["queue-forget"]).error_code == E.NONE
            firsts, _ = share_fetch(w, "g-forget", "member-old", 0, "queue-forget", (0, 1))
            assert firsts == {0: 0, 1: 0}
            accept = {"first_offset": 0, "last_offset": 3, "acknowledge_types": [1]}
            _, r = share_fetch(w, "g-forget", "member-old", -1, "queue-forget", (0, 1), {0: [accept], 1: [accept]})
            assert {p.acknowledge_error_code for t in r.responses for p in t.partitions} == {E.NONE}
            assert heartbeat(w, "g-forget", "member-old", -1).error_code == E.NONE
            before = describe_offsets(w, "g-forget")
            assert before == (E.NONE, {("queue-forget", 0): (4, E.NONE), ("queue-forget", 1): (4, E.NONE)})
        b.kill()
        b.start()
        with WireClient("127.0.0.1", b.port) as w:
            after = wait_until(lambda: (d := describe_offsets(w, "g-forget"))[0] not in (
                E.COORDINATOR_LOAD_IN_PROGRESS, E.COORDINATOR_NOT_AVAILABLE) and d, 30, "DescribeShareGroupOffsets")
            assert after == before  # not an empty answer until the topic was named once
        b.kill()
        b.start()
        with WireClient("127.0.0.1", b.port) as w:
            deleted = wait_until(lambda: (d := w.request(42, 2, {"groups_names": ["g-forget"]}).results[0]).error_code
                                 not in (E.COORDINATOR_LOAD_IN_PROGRESS, E.COORDINATOR_NOT_AVAILABLE) and d, 30,
                                 "DeleteGroups")
            assert deleted.error_code == E.NONE
            assert describe_offsets(w, "g-forget", "queue-forget", [0, 1]) == (
                E.NONE, {("queue-forget", 0): (-1, E.NONE), ("queue-forget", 1): (-1, E.NONE)})
            assert heartbeat(w, "g-forget", "member-new", 0, ["queue-forget"]).error_code == E.NONE
            firsts, _ = share_fetch(w, "g-forget", "member-new", 0, "queue-forget", (0, 1))
            assert firsts == {0: 0, 1: 0}  # share.auto.offset.reset=earliest, not the old start 4
    finally:
        b.stop()
