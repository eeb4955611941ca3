"""Issue 4 "must show": group consumers in separate processes against a ``litemq serve`` process.

3 consumers on a 6-partition topic own 2 partitions each; a 4th joins (6 over 4); one is
SIGKILLed and its partitions move to the others within the session timeout; a producer runs
throughout. Checked from the processes' own event logs: no partition owned by two processes at
any moment, every acknowledged record consumed at least once, nothing committed consumed again,
and the group's committed offsets end at the log end offsets.
"""

from __future__ import annotations

import time

import pytest

from groups_helpers import (BackgroundProducer, Worker, assert_delivery, assert_no_double_ownership,
                            committed_offsets, create_topic, end_offsets, owned_counts, stop_all, wait_until)
from litemq.testing.process import BrokerProcess

SESSION_MS = 3000
"""The members' session timeout; the broker's ``group.min.session.timeout.ms`` (Kafka: 6000) is
lowered to it, so a SIGKILLed member's partitions move 3 s after its last heartbeat (every 500 ms)."""
PARTITIONS = 6
SCENARIOS = [
    ("confluent", "range"),
    ("confluent", "cooperative-sticky"),
    ("kafka-python", "range"),
    ("aiokafka", "range"),
]


@pytest.fixture(scope="module")
def scn_broker(tmp_path_factory):
    """One ``litemq serve`` process for the scenarios (topics and groups per test)."""
    with BrokerProcess(tmp_path_factory.mktemp("scenarios") / "data",
                       overrides={"group.min.session.timeout.ms": str(SESSION_MS)}) as proc:
        yield proc


@pytest.mark.timeout(120)
@pytest.mark.parametrize("client,assignor", SCENARIOS, ids=[f"{c}-{a}" for c, a in SCENARIOS])
def test_join_spread_kill_move(scn_broker, tmp_path, request, client, assignor):
    bs = scn_broker.bootstrap_servers
    topic = group = f"scn-{client}-{assignor}"
    create_topic(bs, topic, PARTITIONS)
    producer = BackgroundProducer(bs, topic, PARTITIONS)
    workers: list[Worker] = []
    # A failed check must not leave consumer processes behind: kafka-python's spins on a CPU
    # once the shared broker is gone, slowing every later test.
    request.addfinalizer(lambda: [w.proc.kill() for w in workers if w.proc.poll() is None])
    try:
        workers = [Worker(tmp_path, f"w{i}", client, bs, topic, group, assignor, session_ms=SESSION_MS)
                   for i in range(3)]

        def balanced(expected):
            counts, union, twice = owned_counts(workers)
            assert not twice, f"a partition is owned twice: {[sorted(w.owned()) for w in workers]}"
            return counts == expected and union == set(range(PARTITIONS))

        wait_until(lambda: balanced([2, 2, 2]), 45, "3 members owning 2 partitions each")
        before = {w.name: w.owned() for w in workers}
        revoked_before = sum(len(e["parts"]) for w in workers for e in w.events() if e["ev"] == "revoke")

        workers.append(Worker(tmp_path, "w3", client, bs, topic, group, assignor, session_ms=SESSION_MS))
        wait_until(lambda: balanced([1, 1, 2, 2]), 45, "6 partitions spread over 4 members")
        if assignor == "cooperative-sticky":
            # Incremental rebalancing: only the partitions that moved were revoked, and every
            # original member kept the partitions it still owns without losing them in between.
            revoked = sum(len(e["parts"]) for w in workers for e in w.events() if e["ev"] == "revoke")
            moved = len(workers[3].owned())
            assert revoked - revoked_before == moved, f"{revoked - revoked_before} partitions revoked for {moved} moves"
            for w in workers[:3]:
                assert w.owned() <= before[w.name]

        victim = workers[0]
        victim.kill()
        t_move = wait_until(lambda: balanced([2, 2, 2]) and time.time(), SESSION_MS / 1000 + 15,
                            "the killed member's partitions to move")
        moved_after_s = t_move - victim.killed_at
        assert moved_after_s < SESSION_MS / 1000 + 6, f"partitions moved {moved_after_s:.1f}s after the kill"
        print(f"{client}/{assignor}: partitions moved {moved_after_s:.2f}s after SIGKILL (session {SESSION_MS} ms)")
    except AssertionError as exc:
        # the members' own view (their client's log and thread stacks) decides whether the broker or a client stalled
        raise AssertionError(f"{exc}\n" + "\n".join(w.diagnostics() for w in workers)) from None
    finally:
        produced = producer.stop()
    assert not producer.errors, producer.errors[:3]
    ends = end_offsets(bs, topic, PARTITIONS)
    wait_until(lambda: committed_offsets(bs, group) == ends, 30, "all records committed")
    stop_all(workers)
    assert len(produced) > 500
    assert_no_double_ownership(workers)
    assert_delivery(workers, produced)
    assert committed_offsets(bs, group) == ends
