"""A share group on a 3-broker cluster whose share-partition leader is SIGKILLed.

The share-partition state is in the replicated ``__share_group_state``; the broker that becomes
the topic partition's leader loads it (over the broker RPC when another broker leads the state
partition), so no accepted record is delivered again and every other one is delivered.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import AcknowledgeType, Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, NewTopic

from litemq.testing.cluster import LocalCluster

pytestmark = [pytest.mark.timeout(240), pytest.mark.slow]

OVERRIDES = {"broker.heartbeat.interval.ms": "250", "broker.session.timeout.ms": "2500",
             "group.share.heartbeat.interval.ms": "500", "group.share.record.lock.duration.ms": "3000",
             "share.auto.offset.reset": "earliest", "share.coordinator.state.topic.num.partitions": "3"}


def poll_acking(c: ShareConsumer, timeout_s: float, want: int, kind) -> list[tuple[int, int]]:
    out = []
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and len(out) < want:
        for m in c.poll(0.5):
            if m.error() is None:
                out.append((m.offset(), m.delivery_count()))
                c.acknowledge(m, kind(m.offset()))
    return out


def test_share_partition_state_survives_a_leader_sigkill(tmp_path):
    with LocalCluster(tmp_path, 3, OVERRIDES) as cluster:
        bs = cluster.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bs})
        admin.create_topics([NewTopic("q", 1, 3)], operation_timeout=30)["q"].result(timeout=60)
        cluster.wait_leaders("q", 1)
        p = Producer({"bootstrap.servers": bs, "acks": "all"})
        for i in range(100):
            p.produce("q", str(i).encode())
        assert p.flush(30) == 0
        c = ShareConsumer({"bootstrap.servers": bs, "group.id": "gq", "share.acknowledgement.mode": "explicit",
                           "log_level": 3})
        c.subscribe(["q"])
        def kind(o: int) -> AcknowledgeType:  # evens accepted, odds released
            return AcknowledgeType.ACCEPT if o % 2 == 0 else AcknowledgeType.RELEASE
        first = poll_acking(c, 60, 100, kind)
        assert sorted(o for o, _ in first) == list(range(100))
        result = c.commit_sync()
        assert result and all(v is None for v in result.values()), result
        c.close()
        old = cluster.leader_of("q", 0)
        cluster.kill(old)
        cluster.wait_leaders("q", 1, exclude=[old])
        c2 = ShareConsumer({"bootstrap.servers": bs, "group.id": "gq", "share.acknowledgement.mode": "explicit",
                            "log_level": 3})
        c2.subscribe(["q"])
        again = poll_acking(c2, 90, 50, lambda o: AcknowledgeType.ACCEPT)
        c2.commit_sync()
        again += poll_acking(c2, 3, 1, lambda o: AcknowledgeType.ACCEPT)
        c2.close()
        assert sorted(o for o, _ in again) == list(range(1, 100, 2))  # no accepted record comes back
        assert {d for _, d in again} == {2}
