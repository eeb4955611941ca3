"""Reading back what a fault test or benchmark produced, to check that no acked record was lost.

Records are ``"<partition>:<seq>"`` values (a per-partition sequence number), as written by the
load generators of ``tests/cluster`` and ``benchmarks/bench_cluster.py``.
"""

from __future__ import annotations

import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition


def read_sequenced(bootstrap: str, topic: str, partitions: int, want: dict[int, set[int]], *,
                   group_id: str = "readback", client_config: dict | None = None,
                   timeout_s: float = 90.0) -> dict[int, list[tuple[int, int]]]:
    """Every record of ``topic`` from the beginning, as partition -> [(offset, seq)] in read
    order. Reads until every offset in ``want`` (partition -> offsets) was seen and then every
    partition reported its end (librdkafka's partition EOF: the position reached the high
    watermark) with no record read since, or 2 s passed without a record; or until ``timeout_s``
    seconds.

    Raises:
        AssertionError: a consumed message carries an error, or a value names another partition.
    """
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group_id, "enable.auto.commit": False,
                         **(client_config or {}), "enable.partition.eof": True})
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    read: dict[int, list[tuple[int, int]]] = {p: [] for p in range(partitions)}
    seen: dict[int, set[int]] = {p: set() for p in range(partitions)}
    deadline = time.monotonic() + timeout_s
    idle_since = time.monotonic()
    at_end: set[int] = set()
    try:
        while time.monotonic() < deadline:
            msgs = consumer.consume(5000, 0.1)  # consume() waits its whole timeout unless 5000 came
            for m in msgs:
                if m.error() is not None and m.error().code() == KafkaError._PARTITION_EOF:
                    at_end.add(m.partition())
                    continue
                assert m.error() is None, m.error()
                p, seq = m.value().decode().split(":")
                assert int(p) == m.partition()
                read[m.partition()].append((m.offset(), int(seq)))
                seen[m.partition()].add(m.offset())
                at_end.discard(m.partition())
                idle_since = time.monotonic()
            complete = all(want[p] <= seen[p] for p in range(partitions))
            if complete and (len(at_end) == partitions or time.monotonic() - idle_since > 2.0):
                break
    finally:
        consumer.close()
    return read
