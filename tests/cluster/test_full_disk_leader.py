"""A partition leader whose disk fills up (its data dir on a small tmpfs) gives its leadership
away: its append fails with KAFKA_STORAGE_ERROR, its replica goes offline and hands over with
TimeoutNow, and the two healthy replicas go on taking acks=all records (Kafka: a failed log dir
takes the broker's replicas offline and leaders are elected elsewhere, KIP-112). Once space is
back and the broker restarted, every acknowledged record is read back at its offset."""

from __future__ import annotations

import os

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from litemq.testing.cluster import LocalCluster, wait_for
from tests.small_disk import small_tmpfs

pytestmark = [pytest.mark.timeout(300)]

TOPIC = "fills"


@pytest.fixture
def node2_on_small_disk(tmp_path):
    with small_tmpfs(tmp_path / "node-2", "16m") as mnt:
        yield mnt


def _leader(admin: AdminClient) -> int:
    return admin.list_topics(TOPIC, timeout=10).topics[TOPIC].partitions[0].leader


def test_a_leader_with_a_full_disk_hands_its_partition_over(tmp_path, node2_on_small_disk):
    with LocalCluster(tmp_path, 3, {"broker.heartbeat.interval.ms": "250"}) as cluster:
        assert cluster.node(2).data_dir == node2_on_small_disk
        bs = cluster.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bs})
        admin.create_topics([NewTopic(TOPIC, 1, replica_assignment=[[2, 1, 3]])],
                            operation_timeout=30)[TOPIC].result(timeout=60)
        wait_for(lambda: _leader(admin) == 2, 30, "broker 2 leads")
        acked: list[tuple[int, bytes]] = []

        def delivered(err, msg):
            if err is None:
                acked.append((msg.offset(), msg.value()))

        p = Producer({"bootstrap.servers": bs, "acks": "all", "enable.idempotence": True, "linger.ms": 5,
                      "message.timeout.ms": 60000})
        for i in range(200):
            p.produce(TOPIC, value=b"before-%d" % i, partition=0, on_delivery=delivered)
        assert p.flush(30) == 0 and len(acked) == 200
        st = os.statvfs(node2_on_small_disk)
        (node2_on_small_disk / "filler").write_bytes(b"\0" * max(0, st.f_bavail * st.f_frsize - 64 * 1024))
        for i in range(2000):  # more than the space left: broker 2's appends fail
            p.produce(TOPIC, value=b"during-%d-" % i + b"x" * 200, partition=0, on_delivery=delivered)
            p.poll(0)
        assert p.flush(90) == 0
        assert len(acked) == 2200, f"{2200 - len(acked)} records failed: the partition found no working leader"
        assert _leader(admin) in (1, 3)
        assert cluster.node(2).proc.poll() is None, "broker 2 died: its replica did not just go offline"
        (node2_on_small_disk / "filler").unlink()
        cluster.restart(2)
        c = Consumer({"bootstrap.servers": bs, "group.id": "check", "enable.auto.commit": False})
        c.assign([TopicPartition(TOPIC, 0, 0)])
        got: list[tuple[int, bytes]] = []

        def more() -> bool:
            got.extend((m.offset(), m.value()) for m in c.consume(500, timeout=1) if m.error() is None)
            return len(got) >= len(acked)
        try:
            wait_for(more, 60, "every acknowledged record")
        finally:
            c.close()
        assert sorted(got) == sorted(acked)
        assert [o for o, _ in sorted(got)] == list(range(len(got)))
