"""A KIP-848 group on a 3-broker cluster whose coordinator broker is SIGKILLed.

The group's records (ConsumerGroupMetadata/Member/TargetAssignment/CurrentAssignment) are in
its replicated ``__consumer_offsets`` partition; the broker that becomes that partition's leader
replays them, the confluent-kafka members (``group.protocol=consumer``) heartbeat to it with
the epochs they had, keep their partitions, and a new member still joins with only the
partitions that must move moving. Every produced record is consumed.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from groups_helpers import (BackgroundProducer, Worker, assert_delivery, consumer_group_describe, stable_assignment,
                            stop_all, wait_until)
from litemq.testing.cluster import LocalCluster

pytestmark = [pytest.mark.timeout(180), pytest.mark.slow]

OVERRIDES = {"broker.heartbeat.interval.ms": "250", "broker.session.timeout.ms": "2500",
             "group.consumer.heartbeat.interval.ms": "500", "group.consumer.session.timeout.ms": "10000"}
PARTITIONS = 4
GROUP = "g848-cluster"


def test_kip848_group_survives_coordinator_kill(tmp_path):
    t0 = time.monotonic()
    with LocalCluster(tmp_path, 3, OVERRIDES) as cluster:
        bs = cluster.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bs})
        admin.create_topics([NewTopic("t", PARTITIONS, 3)], operation_timeout=30)["t"].result(timeout=60)
        cluster.wait_leaders("t", PARTITIONS)
        feed = BackgroundProducer(bs, "t", PARTITIONS, rate_per_s=50)
        workers: dict[str, Worker] = {}

        def coordinator() -> int:
            return admin.describe_consumer_groups([GROUP])[GROUP].result(timeout=30).coordinator.id

        def addr():
            return "127.0.0.1", cluster.node(coordinator()).port

        try:
            for name in ("w1", "w2"):
                workers[name] = Worker(tmp_path, name, "confluent-consumer", bs, "t", GROUP)
            before = stable_assignment(addr, GROUP, {"w1", "w2"})
            d_before = consumer_group_describe(*addr(), GROUP)
            old = coordinator()
            cluster.kill(old)
            def moved() -> bool:
                try:
                    return coordinator() != old
                except KafkaException:  # asked the killed broker, or the group is still loading
                    return False
            wait_until(moved, 30, "a new coordinator")
            after = stable_assignment(addr, GROUP, {"w1", "w2"})
            d_after = consumer_group_describe(*addr(), GROUP)
            # the group was reloaded, not rebuilt: same members, same epochs, same partitions
            assert after == before
            assert {(m.member_id, m.member_epoch) for m in d_after.members} == \
                {(m.member_id, m.member_epoch) for m in d_before.members}
            assert d_after.group_epoch == d_before.group_epoch

            workers["w3"] = Worker(tmp_path, "w3", "confluent-consumer", bs, "t", GROUP)
            s3 = stable_assignment(addr, GROUP, {"w1", "w2", "w3"})
            assert sorted(len(v) for v in s3.values()) == [1, 1, 2]
            assert s3["w1"] <= after["w1"] and s3["w2"] <= after["w2"]

            produced = feed.stop()
            assert not feed.errors, feed.errors[:3]
            wait_until(lambda: produced <= {r for w in workers.values() for r in w.records()}, 60,
                       "every record consumed")
            assert_delivery(list(workers.values()), produced)
            print(f"\ncoordinator {old} killed; {before} -> {after} -> {s3}; {len(produced)} records; "
                  f"{time.monotonic() - t0:.1f}s")
        finally:
            feed.stop()
            stop_all(list(workers.values()))
