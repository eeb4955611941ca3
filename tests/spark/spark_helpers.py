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
        for m in c.consume(1000, 0.1):  # consume() waits its whole timeout unless 1000 came
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


def consume_to_end(bootstrap: str, topic: str, partitions: int, isolation: str = "read_committed",
                   timeout: float = 60) -> list[tuple]:
    """Every record of ``topic`` up to the end of each partition as a consumer with
    ``isolation.level`` sees it (read_committed: up to the last stable offset, aborted records
    left out) -> sorted [(partition, offset, key, value, headers)]. Ends on partition EOF, since
    transaction markers take offsets no record has."""
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4()}", "enable.auto.commit": False,
                     "isolation.level": isolation, "enable.partition.eof": True, "log_level": 3})
    c.assign([ck.TopicPartition(topic, p, ck.OFFSET_BEGINNING) for p in range(partitions)])
    out = []
    left = set(range(partitions))
    deadline = time.monotonic() + timeout
    try:
        while left and time.monotonic() < deadline:
            for m in c.consume(1000, 0.1):  # waits its whole timeout unless 1000 came
                err = m.error()
                if err is not None:
                    if err.code() == ck.KafkaError._PARTITION_EOF:
                        left.discard(m.partition())
                        continue
                    raise ck.KafkaException(err)
                out.append((m.partition(), m.offset(), m.key(), m.value(), tuple(m.headers() or ())))
    finally:
        c.close()
    assert not left, f"consumer did not reach the end of partitions {left}"
    return sorted(out)


def run_available_now(writer, timeout_s: float = 240) -> None:
    """Start ``writer`` (a ``DataStreamWriter`` of this process's SparkSession) with
    ``Trigger.AvailableNow`` and wait until the query finished: it restarts from its checkpoint,
    runs a micro-batch it finds planned but not committed, then reads up to the end offsets.

    Raises:
        StreamingQueryException: the query failed. AssertionError: it did not finish within
            ``timeout_s`` seconds (it is stopped).
    """
    q = writer.trigger(availableNow=True).start()
    try:
        finished = q.awaitTermination(timeout_s)
    finally:
        if q.isActive:
            q.stop()
    assert finished, f"the AvailableNow query did not finish within {timeout_s} s"
