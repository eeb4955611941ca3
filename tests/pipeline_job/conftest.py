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
    """All records of ``topic`` (partition order, then offset) as a read_committed consumer sees
    them (the job writes its topics in transactions), read to the end of each partition."""
    import time

    from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"t-{uuid.uuid4().hex}",
                  "enable.auto.commit": False, "enable.partition.eof": True,
                  "isolation.level": "read_committed", "log_level": 3})
    try:
        md = c.list_topics(topic, timeout=10).topics[topic]
        out = []
        for p in sorted(md.partitions):
            c.assign([TopicPartition(topic, p, -2)])  # OFFSET_BEGINNING
            deadline = time.monotonic() + timeout_s
            done = False
            while not done:
                assert time.monotonic() < deadline, f"{topic}-{p}: no end of partition after {timeout_s} s"
                for m in c.consume(1000, 0.1):  # waits its whole timeout unless 1000 came
                    err = m.error()
                    if err is None:
                        out.append(m)
                    elif err.code() == KafkaError._PARTITION_EOF:
                        done = True
                    else:
                        raise KafkaException(err)
            c.unassign()
        return out
    finally:
        c.close()
