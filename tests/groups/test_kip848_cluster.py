"""A KIP-848 group on a 3-broker cluster whose coordinator broker is SIGKILLed, with a classic
group of kafka-python consumers on the same coordinator the whole time.

The group's records (ConsumerGroupMetadata/Member/TargetAssignment/CurrentAssignment) are in
its replicated ``__consumer_offsets`` partition; the broker that becomes that partition's leader
replays them, the confluent-kafka members (``group.protocol=consumer``) heartbeat to it with
the epochs they had, keep their partitions, and a new member still joins with only the
partitions that must move moving. The classic group (its id hashes to the same
``__consumer_offsets`` partition, so the same broker coordinates both) rejoins the new
coordinator. Every produced record of both topics is consumed.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from groups_helpers import (BackgroundProducer, Worker, assert_delivery, consumer_group_describe, stable_assignment,
                            stop_all, wait_until)
from litemq.coordinator.records import partition_for
from litemq.testing.cluster import LocalCluster

pytestmark = [pytest.mark.timeout(180), pytest.mark.slow]

OVERRIDES = {"broker.heartbeat.interval.ms": "250", "broker.session.timeout.ms": "2500",
             "group.consumer.heartbeat.interval.ms": "500", "group.consumer.session.timeout.ms": "10000"}
PARTITIONS = 4
GROUP = "g848-cluster"
OFFSETS_PARTITIONS = 8
"""``offsets.topic.num.partitions`` of the brokers (LiteMQ's default)."""
CLASSIC_GROUP = next(g for g in (f"classic-{i}" for i in range(1000))
                     if partition_for(g, OFFSETS_PARTITIONS) == partition_for(GROUP, OFFSETS_PARTITIONS))
"""A classic group coordinated by the same ``__consumer_offsets`` partition as GROUP."""


def test_kip848_group_survives_coordinator_kill(tmp_path):
    t0 = time.monotonic()
    with LocalCluster(tmp_path, 3, OVERRIDES) as cluster:
        bs = cluster.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bs})
        for t in ("t", "c"):
            admin.create_topics([NewTopic(t, PARTITIONS, 3)], operation_timeout=30)[t].result(timeout=60)
            cluster.wait_leaders(t, PARTITIONS)
        feed = BackgroundProducer(bs, "t", PARTITIONS, rate_per_s=50)
        classic_feed = BackgroundProducer(bs, "c", PARTITIONS, rate_per_s=30)
        workers: dict[str, Worker] = {}
        classic = [Worker(tmp_path, f"classic{i}", "kafka-python", bs, "c", CLASSIC_GROUP) for i in range(2)]

        def coordinator() -> int:
            return admin.describe_consumer_groups([GROUP])[GROUP].result(timeout=30).coordinator.id

        def addr():
            return "127.0.0.1", cluster.node(coordinator()).port

        try:
            for name in ("w1", "w2"):
                workers[name] = Worker(tmp_path, name, "confluent-consumer", bs, "t", GROUP)
            before = stable_assignment(addr, GROUP, {"w1", "w2"})
            classic_coordinator = admin.describe_consumer_groups([CLASSIC_GROUP])[CLASSIC_GROUP].result(timeout=30)
            assert classic_coordinator.coordinator.id == coordinator(), "the two groups must share the killed broker"
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

            classic_produced = classic_feed.stop()
            assert not classic_feed.errors, classic_feed.errors[:3]
            wait_until(lambda: classic_produced <= {r for c in classic for r in c.records()}, 90,
                       "every record of the classic group's topic consumed")
            assert_delivery(classic, classic_produced)
            print(f"\ncoordinator {old} killed; {before} -> {after} -> {s3}; {len(produced)} records; "
                  f"classic group {CLASSIC_GROUP}: {len(classic_produced)} records; {time.monotonic() - t0:.1f}s")
        finally:
            feed.stop()
            classic_feed.stop()
            stop_all(list(workers.values()) + classic)
