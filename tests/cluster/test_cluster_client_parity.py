"""A 3-broker cluster answers a client as a single broker does (issue 19):

- a topic is usable the moment CreateTopics answers: the answering broker's Metadata names a
  leader of every partition, and a watermark query right after a produce works through every
  broker (Kafka's controller writes the leaders in the records that create a topic; a LiteMQ
  cluster's partitions elect theirs just after, so CreateTopics waits for them, bounded by its
  ``timeout_ms``);
- producing to an invalid topic name fails the messages at once with Kafka's
  INVALID_TOPIC_EXCEPTION (was: Metadata answered LEADER_NOT_AVAILABLE while a background
  auto-creation failed, and the messages waited for ``message.timeout.ms``).
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from litemq.testing.cluster import LocalCluster, wait_for

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with LocalCluster(tmp_path_factory.mktemp("parity"), 3) as c:
        yield c


def test_topic_usable_as_soon_as_created(cluster):
    nodes = cluster.node_ids
    admins = {n: AdminClient({"bootstrap.servers": cluster.node(n).bootstrap_servers}) for n in nodes}
    for round_no in range(6):
        node = nodes[round_no % len(nodes)]
        topic = f"fresh-{round_no}"
        # replication factor 2 of 3: some brokers host no replica of some partitions
        admins[node].create_topics([NewTopic(topic, 3, 2)], operation_timeout=15)[topic].result(30)
        md = admins[node].list_topics(topic, timeout=10).topics[topic]
        assert md.error is None
        assert sorted(md.partitions) == [0, 1, 2]
        assert all(p.leader >= 0 for p in md.partitions.values()), \
            f"broker {node} answered CreateTopics before knowing the leaders: {md.partitions}"

        p = Producer({"bootstrap.servers": cluster.node(node).bootstrap_servers, "acks": "all"})
        for i in range(3):
            p.produce(topic, value=b"v", partition=i)
        assert p.flush(30) == 0
        time.sleep(0.001)
        for other in nodes:
            c = Consumer({"bootstrap.servers": cluster.node(other).bootstrap_servers, "group.id": "parity"})
            try:
                for i in range(3):
                    try:
                        low, high = c.get_watermark_offsets(TopicPartition(topic, i), timeout=10)
                    except Exception:
                        md = admins[other].list_topics(topic, timeout=10).topics[topic]
                        raise AssertionError(f"round {round_no} created on {node}, asked {other} p{i}: "
                                             f"{md.error} {[(q.id, q.leader, q.error) for q in md.partitions.values()]}")
                    assert low == 0 and high >= 1
            finally:
                c.close()


def test_invalid_topic_name_fails_messages_at_once(cluster):
    errors = []
    p = Producer({"bootstrap.servers": cluster.bootstrap_servers, "message.timeout.ms": 20000})
    for _ in range(4):
        p.produce("not a valid name!", b"x", on_delivery=lambda err, msg: errors.append(err))
    started = time.monotonic()
    assert p.flush(30) == 0
    assert time.monotonic() - started < 10  # failed by the broker's answer, not by the client timeout
    assert [e.code() for e in errors] == [KafkaError.TOPIC_EXCEPTION] * 4


def _replica_log_starts(cluster, topic: str) -> dict[int, int]:
    out = {}
    for node, st in cluster.statuses().items():
        for p in st["partitions"]:
            if p["topic"] == topic and p["partition"] == 0:
                out[node] = p["log_start_offset"]
    return out


def test_followers_take_the_leaders_log_start_offset(cluster):
    """DeleteRecords runs on the leader; every replica's log start follows it, even while the
    partition is idle (its group quiet), so a new leader answers the same ``earliest``."""
    topic = "deleted-prefix"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics([NewTopic(topic, 1, 3)], operation_timeout=15)[topic].result(30)
    p = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
    for i in range(100):
        p.produce(topic, value=b"%d" % i, partition=0)
    assert p.flush(30) == 0
    _, high = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "x"}).get_watermark_offsets(
        TopicPartition(topic, 0), timeout=10)
    wait_for(lambda: all(st == 0 for st in _replica_log_starts(cluster, topic).values())
             and len(_replica_log_starts(cluster, topic)) == 3, 15, "three replicas")
    time.sleep(1.0)  # let the group go quiet: nothing but the log start change may wake it
    target = high - 40
    res = admin.delete_records([TopicPartition(topic, 0, target)])
    assert res[TopicPartition(topic, 0, target)].result(30).low_watermark == target
    wait_for(lambda: _replica_log_starts(cluster, topic) == {1: target, 2: target, 3: target}, 15,
             lambda: f"replica log starts {_replica_log_starts(cluster, topic)}, want {target} everywhere")

    leader = cluster.leader_of(topic, 0)
    cluster.kill(leader)
    try:
        cluster.wait_leaders(topic, 1, exclude=[leader])
        c = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "x"})
        try:
            low = wait_for(lambda: _low_watermark(c, topic), 30, "earliest from the new leader")
        finally:
            c.close()
        assert low == target
    finally:
        cluster.restart(leader)


def _low_watermark(c: Consumer, topic: str) -> int | None:
    try:
        low, _ = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=5, cached=False)
    except Exception:
        return None
    return low


def test_first_record_at_offset_zero_and_idle_leader_changes_take_no_offset(cluster):
    """A new partition's leader appends no LEADER_CHANGE batch (its log is empty, nothing to
    commit), so the first record is at offset 0 as in Kafka; a leader change of a partition
    whose records are all committed takes no offset either. (A new leader that inherits
    records not known committed still appends one, which takes an offset: issue 19.)"""
    topic = "dense"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics([NewTopic(topic, 1, 3)], operation_timeout=15)[topic].result(30)
    c = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "dense",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        try:
            wm = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10, cached=False)
        except Exception as exc:
            seen = {n: AdminClient({"bootstrap.servers": cluster.node(n).bootstrap_servers}).list_topics(
                topic, timeout=10).topics[topic] for n in cluster.node_ids}
            raise AssertionError(f"{exc}: {[(n, md.error, [(q.id, q.leader, q.error) for q in md.partitions.values()]) for n, md in seen.items()]}")
        assert wm == (0, 0)
        p = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
        offsets = []

        def produce(n):
            for i in range(n):
                p.produce(topic, value=b"v", partition=0,
                          on_delivery=lambda err, msg: offsets.append(msg.offset() if err is None else err))
            assert p.flush(30) == 0

        produce(10)
        leader = cluster.leader_of(topic, 0)
        wait_for(lambda: all(pt["high_watermark"] == 10 for st in cluster.statuses().values()
                             for pt in st["partitions"] if pt["topic"] == topic), 15,
                 "every replica knows the high watermark")
        cluster.kill(leader)
        try:
            cluster.wait_leaders(topic, 1, exclude=[leader])
            produce(10)
        finally:
            cluster.restart(leader)
        assert offsets == list(range(20))
        c.assign([TopicPartition(topic, 0, 0)])
        got = []
        deadline = time.monotonic() + 30
        while len(got) < 20 and time.monotonic() < deadline:
            m = c.poll(1.0)
            if m is not None and m.error() is None:
                got.append(m.offset())
        assert got == list(range(20))
        assert c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10, cached=False) == (0, 20)
    finally:
        c.close()
