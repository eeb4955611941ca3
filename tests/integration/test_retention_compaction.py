"""Retention and compaction observed through a real client (issue 3).

A broker process with a 200 ms maintenance interval; topics with tiny segments. Retention by
time and by size deletes whole old segments and moves the earliest offset (ListOffsets); a
compacted topic keeps the latest value of every key, with offsets unchanged.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from litemq.testing.process import BrokerProcess


@pytest.fixture(scope="module")
def fast_maintenance_broker(tmp_path_factory):
    overrides = {"log.retention.check.interval.ms": "200", "log.cleaner.backoff.ms": "200"}
    with BrokerProcess(tmp_path_factory.mktemp("ret") / "data", overrides=overrides) as proc:
        yield proc


def _create(bs: str, name: str, configs: dict[str, str]) -> None:
    admin = AdminClient({"bootstrap.servers": bs})
    admin.create_topics([NewTopic(name, 1, 1, config=configs)])[name].result(timeout=30)


def _produce(bs: str, topic: str, records: list[tuple[bytes | None, bytes | None]]) -> None:
    p = Producer({"bootstrap.servers": bs, "acks": "all", "linger.ms": 0, "batch.num.messages": 10})
    for k, v in records:
        p.produce(topic, key=k, value=v)
        p.poll(0)
    assert p.flush(30) == 0


def _watermarks(bs: str, topic: str) -> tuple[int, int]:
    c = Consumer({"bootstrap.servers": bs, "group.id": "wm", "enable.auto.commit": False})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10, cached=False)
    finally:
        c.close()


def _read_all(bs: str, topic: str, expect_at_least: int) -> list:
    c = Consumer({"bootstrap.servers": bs, "group.id": "rd-" + topic, "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    out = []
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        msgs = c.consume(1000, 0.5)
        out += [(m.offset(), m.key(), m.value()) for m in msgs if m.error() is None]
        if not msgs and len(out) >= expect_at_least:
            break
    c.close()
    return out


def _wait_until(pred, timeout_s: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.2)
    return False


def test_retention_by_time_deletes_old_segments(fast_maintenance_broker):
    bs = fast_maintenance_broker.bootstrap_servers
    _create(bs, "ret-time", {"internal.segment.bytes": "2048", "retention.ms": "1500"})
    _produce(bs, "ret-time", [(b"k", b"x" * 100) for _ in range(200)])
    low, high = _watermarks(bs, "ret-time")
    assert (low, high) == (0, 200)
    # every closed segment's newest record becomes older than retention.ms -> deleted
    assert _wait_until(lambda: _watermarks(bs, "ret-time")[0] > 150), _watermarks(bs, "ret-time")
    low, high = _watermarks(bs, "ret-time")
    assert high == 200
    seg_files = sorted((fast_maintenance_broker.data_dir / "ret-time-0").glob("*.log"))
    assert int(seg_files[0].stem) == low, (seg_files[0].name, low)
    # reading still works from the new log start offset
    got = _read_all(bs, "ret-time", 200 - low)
    assert [o for o, _, _ in got] == list(range(low, 200))


def test_retention_by_bytes(fast_maintenance_broker):
    bs = fast_maintenance_broker.bootstrap_servers
    _create(bs, "ret-bytes", {"internal.segment.bytes": "2048", "retention.bytes": "4096"})
    _produce(bs, "ret-bytes", [(b"k", b"y" * 100) for _ in range(300)])
    assert _wait_until(lambda: _watermarks(bs, "ret-bytes")[0] > 0)

    def size() -> int:
        return sum(f.stat().st_size for f in (fast_maintenance_broker.data_dir / "ret-bytes-0").glob("*.log"))

    # At most retention.bytes plus the active segment, once a maintenance round ran after the
    # last records were committed (retention never deletes above the high watermark).
    assert _wait_until(lambda: size() <= 4096 + 2048), size()


def test_compacted_topic_keeps_latest_value_per_key(fast_maintenance_broker):
    bs = fast_maintenance_broker.bootstrap_servers
    _create(bs, "compacted", {"cleanup.policy": "compact", "internal.segment.bytes": "2048",
                              "min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "0"})
    records = [(b"key-%d" % (i % 10), b"value-%d" % i) for i in range(300)]
    records.append((b"key-3", None))  # tombstone
    records += [(b"tail-%d" % i, b"t") for i in range(40)]  # pushes the rest out of the active segment
    _produce(bs, "compacted", records)
    latest = {}
    for off, (k, v) in enumerate(records):
        latest[k] = (off, v)

    def compacted() -> bool:
        got = _read_all(bs, "compacted", 1)
        return len(got) < 120

    assert _wait_until(compacted, 30), "compaction did not run"
    got = _read_all(bs, "compacted", 1)
    by_key = {}
    for off, k, v in got:
        by_key[k] = (off, v)
    for k, (off, v) in latest.items():
        if v is None:
            assert k not in by_key or by_key[k][1] is None
            continue
        assert by_key[k] == (off, v), (k, by_key.get(k), (off, v))  # latest value, original offset
    offsets = [o for o, _, _ in got]
    assert offsets == sorted(offsets)
    assert _watermarks(bs, "compacted")[1] == len(records)


def test_compacted_topic_rejects_keyless_records(fast_maintenance_broker):
    from confluent_kafka import KafkaError

    bs = fast_maintenance_broker.bootstrap_servers
    _create(bs, "compacted-nokey", {"cleanup.policy": "compact"})
    errors = []
    p = Producer({"bootstrap.servers": bs, "acks": "all", "retries": 0})
    p.produce("compacted-nokey", value=b"no key", on_delivery=lambda err, msg: errors.append(err))
    p.flush(10)
    assert errors and errors[0] is not None and errors[0].code() == KafkaError.INVALID_RECORD


def _produce_1970(bs: str, topic: str, n: int) -> None:
    """``n`` records of 100 B stamped in 1970 (CreateTime 1000 + i ms): older than any retention.ms."""
    p = Producer({"bootstrap.servers": bs, "acks": "all", "linger.ms": 0})
    for i in range(n):
        p.produce(topic, value=b"x" * 100, timestamp=1000 + i)
        p.poll(0)
    assert p.flush(30) == 0


def test_retention_runs_at_its_check_interval_not_the_cleaners(tmp_path, fast_maintenance_broker):
    """Retention runs every ``log.retention.check.interval.ms`` (Kafka: 5 min), compaction every
    ``log.cleaner.backoff.ms`` (15 s): records older than retention.ms survive until the next
    retention check however often the cleaner runs. (Retention used to run at the cleaner's pace,
    so librdkafka's own 0059_bsearch, whose records are stamped in 1970, lost its partition's
    records mid-test on LiteMQ: every 15 s instead of every 5 min.)"""
    topic_configs = {"internal.segment.bytes": "2048", "retention.ms": "1000"}
    # the control: with a 200 ms retention check the same records go at once
    fast = fast_maintenance_broker.bootstrap_servers
    _create(fast, "old-records", topic_configs)
    _produce_1970(fast, "old-records", 100)
    assert _wait_until(lambda: _watermarks(fast, "old-records") == (100, 100)), _watermarks(fast, "old-records")

    overrides = {"log.retention.check.interval.ms": "3600000", "log.cleaner.backoff.ms": "200"}
    with BrokerProcess(tmp_path / "data", overrides=overrides) as proc:
        bs = proc.bootstrap_servers
        _create(bs, "old-records", topic_configs)
        _produce_1970(bs, "old-records", 100)
        # the same broker's cleaner does run meanwhile: a compacted topic gets compacted
        _create(bs, "cleaned", {"cleanup.policy": "compact", "internal.segment.bytes": "2048",
                                "min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "0"})
        _produce(bs, "cleaned", [(b"key-%d" % (i % 5), b"v" * 50) for i in range(200)]
                 + [(b"tail-%d" % i, b"t") for i in range(40)])
        assert _wait_until(lambda: len(_read_all(bs, "cleaned", 1)) < 120, 30), "compaction did not run"
        assert _watermarks(bs, "old-records") == (0, 100)


def _markers_on_disk(data_dir, topic: str) -> int:
    """Transaction markers (control batches with a producer id) in the partition's segments."""
    from litemq.protocol.records import iter_batches

    n = 0
    for f in (data_dir / f"{topic}-0").glob("*.log"):
        n += sum(1 for _, h in iter_batches(f.read_bytes()) if h.is_control and h.producer_id >= 0)
    return n


def test_compaction_removes_markers_of_compacted_transactions(fast_maintenance_broker):
    """A transactional producer rewriting the same keys on a compacted topic (a changelog, or
    __consumer_offsets with transactional offset commits) leaves one COMMIT marker per
    transaction; once a transaction's records are compacted away and delete.retention.ms has
    passed, its marker goes too (Kafka's cleaner, KIP-534), and read_committed reads the same."""
    bs = fast_maintenance_broker.bootstrap_servers
    _create(bs, "txn-compacted", {"cleanup.policy": "compact", "internal.segment.bytes": "2048",
                                  "min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "0"})
    p = Producer({"bootstrap.servers": bs, "transactional.id": "txn-compactor", "linger.ms": 0})
    p.init_transactions(30)
    for i in range(60):
        p.begin_transaction()
        p.produce("txn-compacted", key=b"key-%d" % (i % 3), value=b"value-%d" % i)
        p.commit_transaction(30)
    _produce(bs, "txn-compacted", [(b"tail-%d" % i, b"t" * 50) for i in range(40)])  # rolls the segments
    # 60 markers were written (the cleaner may already be at work)
    assert _wait_until(lambda: _markers_on_disk(fast_maintenance_broker.data_dir, "txn-compacted") <= 10, 30), \
        _markers_on_disk(fast_maintenance_broker.data_dir, "txn-compacted")
    c = Consumer({"bootstrap.servers": bs, "group.id": "rc-txn", "enable.auto.commit": False,
                  "isolation.level": "read_committed"})
    c.assign([TopicPartition("txn-compacted", 0, OFFSET_BEGINNING)])
    got = {}
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and len(got) < 43:
        for m in c.consume(500, 0.5):
            if m.error() is None:
                got[m.key()] = m.value()
    c.close()
    assert {k: v for k, v in got.items() if k.startswith(b"key-")} == {
        b"key-0": b"value-57", b"key-1": b"value-58", b"key-2": b"value-59"}
    assert len(got) == 43
