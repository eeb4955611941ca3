"""Broker restart (clean and SIGKILL) in the middle of group consumption.

Two confluent-kafka consumer processes consume and commit while a producer runs; the broker
process is restarted. Committed offsets and the group (its generation and members) come back
from ``__consumer_offsets``; the consumers carry on without losing or repeating a committed
record; a consumer started afterwards resumes at the committed offsets.
"""

from __future__ import annotations

import time

import pytest

from groups_helpers import (BackgroundProducer, Worker, admin, assert_delivery, assert_no_double_ownership,
                            committed_offsets, create_topic, end_offsets, owned_counts, stop_all, wait_until)

PARTITIONS = 4


def describe(bs: str, group: str):
    a = admin(bs)
    return a.describe_consumer_groups([group])[group].result(timeout=30)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("how", ["clean", "sigkill"])
def test_broker_restart_mid_way(broker_proc, tmp_path, how):
    bs = broker_proc.bootstrap_servers
    topic = group = f"rst-{how}"
    create_topic(bs, topic, PARTITIONS)
    producer = BackgroundProducer(bs, topic, PARTITIONS, rate_per_s=100)
    workers = [Worker(tmp_path, f"w{i}", "confluent", bs, topic, group) for i in range(2)]
    try:
        wait_until(lambda: owned_counts(workers)[0] == [2, 2], 45, "2 members owning 2 partitions each")
        wait_until(lambda: len(set().union(*(w.acked_commits() for w in workers))) == PARTITIONS
                   and sum(len(w.records()) for w in workers) > 100, 30, "commits on every partition")
        before = describe(bs, group)
        acked: dict[int, int] = {}
        for w in workers:
            for p, o in w.acked_commits().items():
                acked[p] = max(acked.get(p, 0), o)
        if how == "clean":
            broker_proc.stop()
        else:
            broker_proc.kill()
        broker_proc.start()
        # The group and every acknowledged commit came back.
        after_offsets = committed_offsets(bs, group)
        assert all(after_offsets[p] >= o for p, o in acked.items()), (acked, after_offsets)
        after = describe(bs, group)
        assert after.state.name == "STABLE"
        assert sorted(m.member_id for m in after.members) == sorted(m.member_id for m in before.members)
        # Consumption goes on after the restart.
        n = sum(len(w.records()) for w in workers)
        wait_until(lambda: sum(len(w.records()) for w in workers) > n + 50, 30, "consumption after the restart")
    finally:
        produced = producer.stop()
    ends = end_offsets(bs, topic, PARTITIONS)
    wait_until(lambda: committed_offsets(bs, group) == ends, 30, "all records committed")
    stop_all(workers)
    assert_no_double_ownership(workers)
    assert_delivery(workers, produced)
    # A new member resumes from the committed offsets: nothing left to consume.
    late = Worker(tmp_path, "late", "confluent", bs, topic, group)
    try:
        wait_until(lambda: len(late.owned()) == PARTITIONS, 30, "the new member's assignment")
        time.sleep(2)
        assert late.records() == []
    finally:
        stop_all([late])
