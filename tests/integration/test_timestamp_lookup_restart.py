"""ListOffsets by timestamp and MAX_TIMESTAMP answer the same before and after a clean restart,
through a real client (confluent-kafka ``offsets_for_times`` and ``AdminClient.list_offsets``).

Kafka writes a segment's largest timestamp into its ``.timeindex`` at close and at roll
(``LogSegment.close``/``onBecomeInactiveSegment``); a log reopened after a clean shutdown reads it
from there. An embedded :class:`litemq.Broker` on one data dir, stopped and started again.
"""

from __future__ import annotations

import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

import litemq

TOPIC = "tsr"


def _lookups(bootstrap: str, base_ts: int) -> tuple[int, int]:
    """(offset for timestamp ``base_ts + 20``, offset of MAX_TIMESTAMP) of partition 0."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "ts-lookup", "enable.auto.commit": False})
    try:
        [tp] = c.offsets_for_times([TopicPartition(TOPIC, 0, base_ts + 20)], timeout=30)
        assert tp.error is None, tp.error
    finally:
        c.close()
    admin = AdminClient({"bootstrap.servers": bootstrap})
    tp0 = TopicPartition(TOPIC, 0)
    info = admin.list_offsets({tp0: OffsetSpec.max_timestamp()})[tp0].result(timeout=30)
    return tp.offset, info.offset


def _produce(bootstrap: str, values_and_timestamps: list[tuple[bytes, int]], **conf) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0, **conf})
    for value, ts in values_and_timestamps:
        p.produce(TOPIC, value, partition=0, timestamp=ts)
    assert p.flush(30) == 0


def test_timestamp_lookups_survive_clean_restarts(tmp_path):
    data = tmp_path / "data"
    base = int(time.time() * 1000) - 100_000
    with litemq.Broker(data) as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap_servers})
        admin.create_topics([NewTopic(TOPIC, 1, 1, config={"internal.segment.bytes": "1200"})])[TOPIC].result(timeout=30)
        # one batch of 5 records (~500 bytes, below index.interval.bytes: no index entry)
        _produce(b.bootstrap_servers, [(b"x" * 80, base + 10 * i) for i in range(5)], **{"linger.ms": 200})
        assert _lookups(b.bootstrap_servers, base) == (2, 4)

    with litemq.Broker(data) as b:  # a clean restart
        assert _lookups(b.bootstrap_servers, base) == (2, 4)
        # this one rolls the segment that was active at the restart
        _produce(b.bootstrap_servers, [(b"y" * 800, base + 5_000)])
        assert _lookups(b.bootstrap_servers, base) == (2, 5)

    with litemq.Broker(data) as b:
        assert _lookups(b.bootstrap_servers, base) == (2, 5)
