"""Helpers shared by the Spark connector tests (plain-consumer oracle)."""

from __future__ import annotations

import time
import uuid

import confluent_kafka as ck


def consume_all(bootstrap: str, topic: str, partitions: int, ends: dict | None = None, starts: dict | None = None,
                timeout: float = 60) -> list[tuple]:
    """A plain confluent-kafka consumer read of [start, end) per partition ->
    sorted [(partition, offset, key, value)]."""
    admin_c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "probe", "log_level": 3})
    if ends is None:
        ends = {p: admin_c.get_watermark_offsets(ck.TopicPartition(topic, p), timeout=30, cached=False)[1]
                for p in range(partitions)}
    starts = starts or {p: 0 for p in range(partitions)}
    admin_c.close()
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4()}", "enable.auto.commit": False,
                     "log_level": 3})
    c.assign([ck.TopicPartition(topic, p, starts[p]) for p in range(partitions) if ends[p] > starts[p]])
    out = []
    left = {p for p in range(partitions) if ends[p] > starts[p]}
    deadline = time.monotonic() + timeout
    while left and time.monotonic() < deadline:
        for m in c.consume(1000, 0.5):
            if m.error():
                continue
            p, o = m.partition(), m.offset()
            if p in left and o < ends[p]:
                out.append((p, o, m.key(), m.value()))
            if o >= ends[p] - 1:
                left.discard(p)
    c.close()
    assert not left, f"consumer did not reach the end of partitions {left}"
    return sorted(out)
