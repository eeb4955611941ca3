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


CONFIG_GROUP = "g848-session-override"
BROKER_SESSION_MS = 4000
"""The brokers' ``group.consumer.session.timeout.ms`` in the test below."""
GROUP_SESSION_MS = 45000
"""CONFIG_GROUP's ``consumer.session.timeout.ms`` group config (Kafka's lowest allowed override)."""


def test_group_session_timeout_override_holds_on_the_coordinator_that_takes_over(tmp_path):
    """A group's ``consumer.session.timeout.ms`` override is in force for the session timers the
    new coordinator starts when it loads the group after a SIGKILL of the old one (Kafka's group
    configs are in effect before any group is loaded): the member, silent since the kill, is
    still there well past the brokers' default session timeout, and carries on at its epoch."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    from litemq.testing.wire import WireClient

    overrides = {"broker.heartbeat.interval.ms": "250", "broker.session.timeout.ms": "2500",
                 "group.consumer.heartbeat.interval.ms": "1000",
                 "group.consumer.session.timeout.ms": str(BROKER_SESSION_MS)}
    member_id = "override-member-000001"
    with LocalCluster(tmp_path, 3, overrides) as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        admin.create_topics([NewTopic("t", 2, 3)], operation_timeout=30)["t"].result(timeout=60)
        cluster.wait_leaders("t", 2)
        with WireClient("127.0.0.1", cluster.node(1).port) as c:
            c.request(10, 3, {"key": CONFIG_GROUP, "key_type": 0})  # FindCoordinator creates __consumer_offsets
        cluster.wait_leaders("__consumer_offsets", OFFSETS_PARTITIONS)
        old = cluster.leader_of("__consumer_offsets", partition_for(CONFIG_GROUP, OFFSETS_PARTITIONS))

        def heartbeat(node: int, epoch: int, owned: list[dict] | None):
            with WireClient("127.0.0.1", cluster.node(node).port, timeout_s=5) as c:
                return c.request(68, 1, {
                    "group_id": CONFIG_GROUP, "member_id": member_id, "member_epoch": epoch, "instance_id": None,
                    "rack_id": None, "rebalance_timeout_ms": 30000 if epoch == 0 else -1,
                    "subscribed_topic_names": ["t"] if epoch == 0 else None, "subscribed_topic_regex": None,
                    "server_assignor": None, "topic_partitions": owned})

        r = heartbeat(old, 0, [])
        assert r.error_code == 0 and r.member_epoch > 0, r
        epoch = r.member_epoch
        owned = [{"topic_id": tp.topic_id, "partitions": list(tp.partitions)} for tp in r.assignment.topic_partitions]
        alter = ConfigResource(ResourceType.GROUP, CONFIG_GROUP, incremental_configs=[
            ConfigEntry("consumer.session.timeout.ms", str(GROUP_SESSION_MS),
                        incremental_operation=AlterConfigOpType.SET)])
        admin.incremental_alter_configs([alter])[alter].result(timeout=30)
        assert heartbeat(old, epoch, owned).error_code == 0
        cluster.kill(old)

        def loaded_on() -> int | None:
            """The live broker that coordinates the group with the member, once one does."""
            for n in cluster.node_ids:
                if n == old:
                    continue
                try:
                    d = consumer_group_describe("127.0.0.1", cluster.node(n).port, CONFIG_GROUP)
                except OSError:
                    continue
                if d.error_code == 0:
                    assert [m.member_id for m in d.members] == [member_id], d
                    return n
            return None

        new = wait_until(loaded_on, 30, "a new coordinator that loaded the group")
        loaded = time.monotonic()
        time.sleep(2 * BROKER_SESSION_MS / 1000)  # the brokers' default would have removed it after 4 s
        d = consumer_group_describe("127.0.0.1", cluster.node(new).port, CONFIG_GROUP)
        assert [(m.member_id, m.member_epoch) for m in d.members] == [(member_id, epoch)], \
            f"{time.monotonic() - loaded:.1f}s after the load: {d}"
        assert heartbeat(new, epoch, owned).error_code == 0
