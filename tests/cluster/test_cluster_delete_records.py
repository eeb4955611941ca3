"""DeleteRecords on a 3-broker cluster survives the leader's failure (KIP-107, Kafka's
``DelayedDeleteRecords``): the answer waits until every follower on a live broker moved its log
start offset up to the deleted offset (the leader's low watermark, ``Partition.lowWatermarkIfLeader``).

Found by a hunt: the leader answered with its own new log start at once and its followers
learned it only from a later Append/Heartbeat, so a leader SIGKILLed right after the answer left
a new leader whose ListOffsets EARLIEST was 0 and which served the "deleted" records again; the
old leader, restarted, kept log start 60 and the replicas disagreed for good.

- DeleteRecords(60) is answered with low watermark 60; the leader is SIGKILLed at once; the new
  leader's EARLIEST is 60, a Fetch at 0 is OFFSET_OUT_OF_RANGE and a real consumer reading from
  the beginning starts at 60; after the old leader restarts every replica has log start 60.
- With a follower's broker paused (SIGSTOP), DeleteRecords is answered once that broker counts
  as gone (Kafka counts the replicas of live brokers only), and the follower, resumed, follows.
- A deletion the followers missed (both paused, DeleteRecords with ``timeout_ms`` 0 answered
  REQUEST_TIMED_OUT, the leader SIGKILLed): the new leader starts at 0 (nothing was
  acknowledged), and once the old leader is back every replica agrees on its log start 60 (the
  leader takes a member's higher log start).
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from litemq.protocol.errors import ErrorCode
from litemq.testing.cluster import LocalCluster, wait_for
from litemq.testing.wire import WireClient

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]

OVERRIDES = {"broker.heartbeat.interval.ms": "250", "broker.session.timeout.ms": "2500",
             "leader.imbalance.check.interval.ms": "1000000"}
RECORDS, DELETE_BEFORE = 100, 60


def _create(cluster: LocalCluster, admin: AdminClient, topic: str) -> None:
    admin.create_topics([NewTopic(topic, 1, replica_assignment=[[1, 2, 3]])], operation_timeout=30)[topic].result(60)
    cluster.wait_leaders(topic, 1)


def _produce(cluster: LocalCluster, topic: str) -> None:
    p = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all", "enable.idempotence": True,
                  "linger.ms": 0, "log_level": 0})
    for i in range(RECORDS):
        p.produce(topic, b"m%d" % i, partition=0)
        p.poll(0)
    assert p.flush(60) == 0


def _delete_records(admin: AdminClient, topic: str, offset: int) -> int:
    fut = admin.delete_records([TopicPartition(topic, 0, offset)], operation_timeout=30)
    return list(fut.values())[0].result(60).low_watermark


def _earliest(cluster: LocalCluster, node: int, topic: str) -> tuple[int, int]:
    """ListOffsets v7 EARLIEST of ``topic``-0 on broker ``node``: (error code, offset)."""
    with WireClient("127.0.0.1", cluster.node(node).port, timeout_s=30) as w:
        resp = w.request(2, 7, {"replica_id": -1, "isolation_level": 0, "topics": [
            {"name": topic, "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": -2}]}]})
    p = resp.topics[0].partitions[0]
    return p.error_code, p.offset


def _fetch_at_zero(cluster: LocalCluster, node: int, topic: str):
    """Fetch v11 of ``topic``-0 at offset 0 on broker ``node``: the partition's answer."""
    body = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [], "rack_id": "",
            "topics": [{"topic": topic, "partitions": [{"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0,
                                                        "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}]}
    with WireClient("127.0.0.1", cluster.node(node).port, timeout_s=30) as w:
        return w.request(1, 11, body).responses[0].partitions[0]


def _delete_records_wire(cluster: LocalCluster, node: int, topic: str, offset: int, timeout_ms: int):
    """DeleteRecords v2 of ``topic``-0 sent to broker ``node``: the partition's answer."""
    with WireClient("127.0.0.1", cluster.node(node).port, timeout_s=30) as w:
        resp = w.request(21, 2, {"topics": [{"name": topic, "partitions": [{"partition_index": 0, "offset": offset}]}],
                                 "timeout_ms": timeout_ms})
    return resp.topics[0].partitions[0]


def _first_consumed_offset(cluster: LocalCluster, topic: str) -> int:
    c = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": f"g-{topic}",
                  "enable.auto.commit": False, "log_level": 0})
    try:
        c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            m = c.poll(1.0)
            if m is not None and not m.error():
                return m.offset()
        raise AssertionError(f"nothing consumed from {topic}-0 in 30 s")
    finally:
        c.close()


def _log_starts(cluster: LocalCluster, topic: str) -> dict[int, int]:
    out = {}
    for n in cluster.live_ids():
        try:
            st = cluster.status(n, timeout_s=3)
        except Exception:
            continue
        for p in st.get("partitions") or []:
            if p["topic"] == topic and p["partition"] == 0:
                out[n] = p["log_start_offset"]
    return out


def _all_replicas_at(cluster: LocalCluster, topic: str, offset: int) -> None:
    wait_for(lambda: _log_starts(cluster, topic) == {1: offset, 2: offset, 3: offset}, 30,
             lambda: f"every replica of {topic}-0 has log start {offset}: {_log_starts(cluster, topic)}")


def test_acknowledged_delete_records_survives_leader_kill(tmp_path):
    with LocalCluster(tmp_path, 3, OVERRIDES) as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        for round_ in range(2):
            topic = f"delrec{round_}"
            _create(cluster, admin, topic)
            _produce(cluster, topic)
            time.sleep(1.0)  # the followers know the high watermark: nothing else holds them back
            leader = cluster.leader_of(topic, 0)
            low = _delete_records(admin, topic, DELETE_BEFORE)
            cluster.kill(leader)  # right after the acknowledgement
            assert low == DELETE_BEFORE
            cluster.wait_leaders(topic, 1, exclude={leader})
            new = cluster.leader_of(topic, 0)
            assert new != leader
            err, earliest = _earliest(cluster, new, topic)
            assert (err, earliest) == (ErrorCode.NONE, DELETE_BEFORE), \
                f"round {round_}: new leader {new} answers EARLIEST {earliest} (error {err}) after DeleteRecords({low})"
            part = _fetch_at_zero(cluster, new, topic)
            assert part.error_code == ErrorCode.OFFSET_OUT_OF_RANGE and part.log_start_offset == DELETE_BEFORE, \
                f"round {round_}: a Fetch at 0 on {new}: error {part.error_code}, log start {part.log_start_offset}"
            assert _first_consumed_offset(cluster, topic) == DELETE_BEFORE
            cluster.restart(leader)
            _all_replicas_at(cluster, topic, DELETE_BEFORE)


def test_delete_records_does_not_wait_for_a_paused_broker(tmp_path):
    with LocalCluster(tmp_path, 3, OVERRIDES) as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        topic = "delrec-paused"
        _create(cluster, admin, topic)
        _produce(cluster, topic)
        leader = cluster.leader_of(topic, 0)
        paused = next(n for n in cluster.node_ids if n != leader)
        cluster.pause(paused)
        try:
            assert _delete_records(admin, topic, DELETE_BEFORE) == DELETE_BEFORE
        finally:
            cluster.resume(paused)
        _all_replicas_at(cluster, topic, DELETE_BEFORE)


def test_replicas_agree_after_a_deletion_the_followers_missed(tmp_path):
    with LocalCluster(tmp_path, 3, OVERRIDES) as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        topic = "delrec-missed"
        _create(cluster, admin, topic)
        _produce(cluster, topic)
        leader = cluster.leader_of(topic, 0)
        followers = [n for n in cluster.node_ids if n != leader]
        for n in followers:
            cluster.pause(n)
        try:
            part = _delete_records_wire(cluster, leader, topic, DELETE_BEFORE, timeout_ms=0)
            assert part.error_code == ErrorCode.REQUEST_TIMED_OUT
            cluster.kill(leader)
        finally:
            for n in followers:
                cluster.resume(n)
        cluster.wait_leaders(topic, 1, exclude={leader})
        new = cluster.leader_of(topic, 0)
        assert _earliest(cluster, new, topic) == (ErrorCode.NONE, 0)  # the deletion was never acknowledged
        cluster.restart(leader)
        _all_replicas_at(cluster, topic, DELETE_BEFORE)


def test_follower_restarted_on_an_emptied_log_catches_up(tmp_path):
    """DeleteRecords up to the high watermark leaves every replica's log empty at 100. A follower
    SIGKILLed and restarted then dropped, loading its log, the leader-epoch entry at its log
    start: it took the term before its log start for 0 where its leader said 1, refused every
    Append, acknowledged every snapshot without taking it, and never caught up (found by a hunt:
    its leader reported it lagging for good and its Raft group never went quiet)."""
    with LocalCluster(tmp_path, 3, OVERRIDES) as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        topic = "delrec-empty"
        _create(cluster, admin, topic)
        _produce(cluster, topic)
        assert _delete_records(admin, topic, -1) == RECORDS
        _all_replicas_at(cluster, topic, RECORDS)
        follower = next(n for n in cluster.node_ids if n != cluster.leader_of(topic, 0))
        cluster.kill(follower)
        cluster.restart(follower)
        _produce(cluster, topic)

        def follower_log_end() -> int | None:
            for p in cluster.status(follower)["partitions"]:
                if p["topic"] == topic and p["partition"] == 0:
                    return p["log_end_offset"]
            return None

        wait_for(lambda: follower_log_end() == 2 * RECORDS, 30,
                 lambda: f"broker {follower}'s replica reaches log end {2 * RECORDS}: {follower_log_end()}")
