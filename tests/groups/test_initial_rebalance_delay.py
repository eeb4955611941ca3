"""``group.initial.rebalance.delay.ms``: Kafka's default 3000 ms, so members joining a new group
within the delay form its first generation together (Kafka ``InitialDelayedJoin``)."""

from __future__ import annotations

import time

from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient, NewTopic

import litemq
from litemq.config import BrokerConfig
from litemq.testing.process import HARNESS_OVERRIDES

PARTITIONS = 4
ASSIGN_TIMEOUT_S = 60.0


def test_default_is_kafkas_and_harness_sets_zero():
    assert BrokerConfig().group_initial_rebalance_delay_ms == 3000  # litemq serve, litemq.Broker()
    assert BrokerConfig.from_sources().group_initial_rebalance_delay_ms == 3000
    assert HARNESS_OVERRIDES["group.initial.rebalance.delay.ms"] == "0"


def test_two_members_within_the_delay_form_one_generation(tmp_path):
    with litemq.Broker(data_dir=tmp_path / "d") as broker:  # Kafka's default delay
        assert broker.config.group_initial_rebalance_delay_ms == 3000
        bs = broker.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bs})
        admin.create_topics([NewTopic("delay-t", PARTITIONS, 1)])["delay-t"].result(timeout=30)

        assigned: dict[int, list[list[int]]] = {0: [], 1: []}
        revoked: dict[int, int] = {0: 0, 1: 0}
        consumers = []
        for i in range(2):
            def on_assign(c, parts, i=i):
                assigned[i].append(sorted(p.partition for p in parts))

            def on_revoke(c, parts, i=i):
                revoked[i] += 1

            c = Consumer({"bootstrap.servers": bs, "group.id": "delay-g", "enable.auto.commit": False,
                          "partition.assignment.strategy": "range", "session.timeout.ms": 10000})
            c.subscribe(["delay-t"], on_assign=on_assign, on_revoke=on_revoke)
            consumers.append(c)
        try:
            deadline = time.monotonic() + ASSIGN_TIMEOUT_S
            while not (assigned[0] and assigned[1]) and time.monotonic() < deadline:
                for c in consumers:
                    c.poll(0.1)
            assert assigned[0] and assigned[1], f"no assignment within {ASSIGN_TIMEOUT_S}s: {assigned}"
            # each member's first (and only) assignment already splits the partitions between both
            assert len(assigned[0]) == 1 and len(assigned[1]) == 1, assigned
            assert revoked == {0: 0, 1: 0}
            a0, a1 = assigned[0][0], assigned[1][0]
            assert a0 and a1 and sorted(a0 + a1) == list(range(PARTITIONS))
            group = broker.call(lambda: broker.runtime.coordinator.groups["delay-g"])
            assert broker.call(lambda: (group.generation, len(group.members))) == (1, 2)
        finally:
            for c in consumers:
                c.close()
