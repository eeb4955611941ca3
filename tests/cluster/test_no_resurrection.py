"""Records that only a deposed leader holds never come back through a leadership transfer, as in
Kafka, where a deposed leader truncates to the new leader's log before it may lead again.

A partition's new leader elected on a fully committed log skips its Raft no-op, so nothing of
its term conflicted with the deposed leader's uncommitted records while that replica followed,
and the preferred-leader balancer then handed leadership back to it: its longer log won, and
records the new leader had answered as missing (OUT_OF_ORDER_SEQUENCE_NUMBER for the producer's
next batch) came back. librdkafka, told so, bumps its epoch and sends them again: an idempotent
producer's records were written twice (the chaos test's "9 records read twice", seed
727226458). Now a leader that skipped its no-op appends it before it transfers leadership.
"""

from __future__ import annotations

import time

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from litemq.protocol.errors import ErrorCode
from litemq.protocol.records import build_batch
from litemq.testing.cluster import LocalCluster
from litemq.testing.wire import WireClient

OVERRIDES = {"broker.heartbeat.interval.ms": "250", "broker.session.timeout.ms": "2500"}
TOPIC = "resurrect"
INIT_PRODUCER_ID, PRODUCE = 22, 0


def _produce(cluster: LocalCluster, node_id: int, pid: int, epoch: int, seq: int, values: range,
             timeout_ms: int = 10_000) -> int:
    """One idempotent acks=all batch of ``values`` to partition 0 through broker ``node_id``;
    returns its error code."""
    batch = build_batch([(None, str(v).encode()) for v in values], producer_id=pid, producer_epoch=epoch,
                        base_sequence=seq)
    body = {"transactional_id": None, "acks": -1, "timeout_ms": timeout_ms,
            "topic_data": [{"name": TOPIC, "partition_data": [{"index": 0, "records": batch}]}]}
    with WireClient("127.0.0.1", cluster.node(node_id).port, timeout_s=timeout_ms / 1000 + 10) as w:
        resp = w.request(PRODUCE, 9, body)
    return resp.responses[0].partition_responses[0].error_code


def test_deposed_leaders_uncommitted_records_never_come_back(tmp_path):
    with LocalCluster(tmp_path, 3, OVERRIDES) as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        admin.create_topics([NewTopic(TOPIC, 1, replica_assignment=[[3, 1, 2]])])[TOPIC].result(30)
        deadline = time.monotonic() + 30
        while cluster.leader_of(TOPIC, 0) != 3:  # the preferred replica leads
            assert time.monotonic() < deadline, "broker 3 never led"
            time.sleep(0.2)
        with WireClient("127.0.0.1", cluster.node(3).port) as w:
            init = w.request(INIT_PRODUCER_ID, 1, {"transactional_id": None, "transaction_timeout_ms": 60000})
        pid, epoch = init.producer_id, init.producer_epoch
        assert _produce(cluster, 3, pid, epoch, 0, range(0, 10)) == ErrorCode.NONE
        time.sleep(1.0)  # the followers learn that these are committed (a quiet leader's heartbeat)

        cluster.kill(1)
        cluster.kill(2)
        # only broker 3 has these: never committed, answered REQUEST_TIMED_OUT
        assert _produce(cluster, 3, pid, epoch, 10, range(10, 20), timeout_ms=500) == ErrorCode.REQUEST_TIMED_OUT
        cluster.pause(3)
        cluster.node(1).restart()  # both at once: neither is live before the other is back
        cluster.node(2).restart()
        cluster.wait_live(1)
        cluster.wait_live(2)
        leader = cluster.wait_leaders(TOPIC, 1, exclude=[3], timeout_s=30)[0]
        # the new leader has not got records 10..19: the producer's next batch leaves a gap
        assert _produce(cluster, leader, pid, epoch, 20, range(20, 30)) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER

        cluster.resume(3)
        deadline = time.monotonic() + 30
        while cluster.leader_of(TOPIC, 0) != 3:  # the balancer hands leadership back to broker 3
            assert time.monotonic() < deadline, "broker 3 never led again"
            time.sleep(0.2)
        consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "read",
                             "enable.auto.commit": False, "log_level": 0})
        consumer.assign([TopicPartition(TOPIC, 0, 0)])
        got: list[tuple[int, int]] = []
        try:
            quiet_until = time.monotonic() + 5
            while time.monotonic() < quiet_until:
                for m in consumer.consume(100, 0.5):
                    if m.error() is None:
                        got.append((m.offset(), int(m.value())))
        finally:
            consumer.close()
        assert got == [(o, o) for o in range(10)], f"read back {got}"
