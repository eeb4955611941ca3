"""Fixtures of the log pipeline job tests: one ``litemq serve`` process and one SparkSession
(local[2], created lazily by the first Spark test) for the whole session; topics are per test."""

from __future__ import annotations

import uuid

import pytest

from litemq.testing.process import BrokerProcess


@pytest.fixture(scope="session")
def broker(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("pj-broker") / "data") as proc:
        yield proc


@pytest.fixture(scope="session")
def spark():
    pytest.importorskip("pyspark")
    from litemq.pipeline.job import connector_available, get_spark

    if not connector_available():
        pytest.skip("format('litemq') connector not installed")
    s = get_spark("litemq-pipeline-tests")
    yield s
    s.stop()


@pytest.fixture
def prefix():
    """A unique topic prefix per test, e.g. ``t3f9a1c.``."""
    return f"t{uuid.uuid4().hex[:8]}."


def read_topic(bootstrap: str, topic: str, n_expected: int | None = None, timeout_s: float = 20.0):
    """All records of ``topic`` (partition order, then offset) via confluent-kafka."""
    import time

    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"t-{uuid.uuid4().hex}",
                  "enable.auto.commit": False, "log_level": 3})
    try:
        md = c.list_topics(topic, timeout=10).topics[topic]
        out = []
        for p in sorted(md.partitions):
            lo, hi = c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            if hi <= lo:
                continue
            c.assign([TopicPartition(topic, p, lo)])
            got = 0
            deadline = time.monotonic() + timeout_s
            while got < hi - lo and time.monotonic() < deadline:
                for m in c.consume(1000, 1.0):
                    if m.error() is None:
                        out.append(m)
                        got += 1
            c.unassign()
        return out
    finally:
        c.close()
