"""KIP-932: when a share consumer goes away, its acquired records go back to the group at once,
not at their lock deadline (Kafka 4.1: a share session ends with ShareFetch/ShareAcknowledge
epoch -1, with a heartbeat of epoch -1, and when the connection that opened it closes -
``ShareSessionCache``'s disconnect listener). Only a consumer whose connection stays open but
that stops working (here: SIGSTOP) keeps its records until the lock expires.

The broker runs with a 15 s record lock, so "at once" and "at the lock deadline" are far apart.
Real ``litemq serve`` process, confluent-kafka 2.16 ShareConsumers (one in its own process).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import pytest
from confluent_kafka import AcknowledgeType

from groups_helpers import create_topic
from litemq.testing.process import BrokerProcess
from test_share_groups import WORKER, consumer, poll_records, produce

LOCK_S = 15
OVERRIDES = {"group.share.record.lock.duration.ms": str(LOCK_S * 1000), "group.share.heartbeat.interval.ms": "500",
             "share.auto.offset.reset": "earliest", "share.coordinator.state.topic.num.partitions": "1"}
RECORDS = 10


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("share-release") / "data", overrides=OVERRIDES).start()
    yield b
    b.stop()


def holder(bs: str, group: str, topic: str, *args: str) -> tuple[subprocess.Popen, list[int]]:
    """A share consumer process that acquired all RECORDS of ``topic`` and holds them."""
    create_topic(bs, topic, 1)
    produce(bs, topic, RECORDS, 1)
    proc = subprocess.Popen([sys.executable, WORKER, bs, group, topic, "--hold", *args],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    lines = []
    while len(lines) < RECORDS:
        line = proc.stdout.readline()
        assert line, "the worker exited"
        lines.append(json.loads(line))
    held = sorted(r["o"] for r in lines)
    assert held == list(range(RECORDS))
    return proc, held


def take_back(c, held: list[int], timeout_s: float) -> float:
    """Poll until ``held`` all came back to ``c`` (delivery count 2) and accept them; seconds taken."""
    started = time.monotonic()
    back = poll_records(c, timeout_s, want=len(held))
    waited = time.monotonic() - started
    assert sorted(o for _, o, _, _ in back) == held
    assert {d for _, _, d, _ in back} == {2}  # the delivery count is kept
    for *_, m in back:
        c.acknowledge(m, AcknowledgeType.ACCEPT)
    c.commit_sync()
    return waited


def other_member(bs: str, group: str, topic: str):
    c = consumer(bs, group, topic, **{"share.acknowledgement.mode": "explicit"})
    assert poll_records(c, 1.5) == []  # everything is locked to the holder
    return c


@pytest.mark.parametrize("how", ["close", "sigkill"])
def test_a_consumer_that_closes_or_is_killed_hands_its_unacknowledged_records_back_at_once(broker, how):
    """``close``: the consumer closes cleanly (its share session ends with epoch -1, it leaves
    the group); ``sigkill``: the OS closes its sockets and the broker sees the connection end."""
    bs = broker.bootstrap_servers
    group, topic = f"g-{how}", f"queue-{how}"
    proc, held = holder(bs, group, topic, "--close-on-stdin")
    c = other_member(bs, group, topic)
    try:
        if how == "close":
            proc.stdin.write("close\n")
            proc.stdin.flush()
        else:
            proc.kill()
        waited = take_back(c, held, LOCK_S)
        assert waited < LOCK_S / 3, f"released after {waited:.1f}s (lock {LOCK_S}s)"
        if how == "close":
            assert json.loads(proc.stdout.readline()) == {"closed": True}
            assert proc.wait(10) == 0
    finally:
        c.close()
        proc.kill()
        proc.wait()


def test_a_frozen_consumer_keeps_its_records_until_the_lock_expires(broker):
    bs = broker.bootstrap_servers
    proc, held = holder(bs, "g-stop", "queue-stop")
    c = other_member(bs, "g-stop", "queue-stop")
    try:
        proc.send_signal(signal.SIGSTOP)  # connection open, no heartbeat, no acknowledgement
        stopped = time.monotonic()
        assert poll_records(c, LOCK_S / 3) == []  # still locked to the frozen member
        take_back(c, held, LOCK_S + 10)
        assert time.monotonic() - stopped >= LOCK_S / 3
    finally:
        c.close()
        proc.send_signal(signal.SIGCONT)
        proc.kill()
        proc.wait()
