"""Disk full: producers get KAFKA_STORAGE_ERROR, the broker keeps running, and once space
returns appends succeed and every acknowledged record is intact (issue 3)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from litemq.protocol.errors import ErrorCode
from litemq.testing.process import BrokerProcess
from tests.small_disk import small_tmpfs
from litemq.testing.wire import WireClient


@pytest.fixture
def small_disk(tmp_path):
    with small_tmpfs(tmp_path / "disk", "4m") as mnt:
        yield mnt


def test_disk_full_gives_storage_error_then_recovers(small_disk, tmp_path):
    with BrokerProcess(small_disk / "data", log_path=tmp_path / "broker.log") as broker:
        bs = broker.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bs})
        admin.create_topics([NewTopic("full", 1, 1, config={"segment.index.bytes": "4096"})])["full"].result(timeout=30)
        # fill most of the disk with a file we can delete later
        filler = small_disk / "filler"
        filler.write_bytes(b"\0" * (3 * 1024 * 1024))
        acked, errors = [], []

        def cb(err, msg):
            (errors if err else acked).append(err or int(msg.value()[:8]))

        p = Producer({"bootstrap.servers": bs, "acks": "all", "retries": 0, "linger.ms": 0,
                      "enable.idempotence": False})
        payload = b"x" * 4000
        i = 0
        while not errors and i < 2000:
            p.produce("full", value=b"%08d" % i + payload, on_delivery=cb)
            p.flush(10)
            i += 1
        assert errors, "the disk never filled"
        assert errors[0].code() == KafkaError.KAFKA_STORAGE_ERROR, errors[0]
        assert broker.alive()
        # space returns: appends succeed again
        filler.unlink()
        errors.clear()
        n_before = len(acked)
        for j in range(20):
            p.produce("full", value=b"%08d" % (100000 + j) + payload, on_delivery=cb)
        assert p.flush(30) == 0
        assert not errors, errors[:3]
        assert len(acked) == n_before + 20
        c = Consumer({"bootstrap.servers": bs, "group.id": "full", "enable.auto.commit": False})
        c.assign([TopicPartition("full", 0, OFFSET_BEGINNING)])
        got = []
        deadline = time.monotonic() + 30
        while len(got) < len(acked) and time.monotonic() < deadline:
            got += [int(m.value()[:8]) for m in c.consume(1000, 0.5) if m.error() is None]
        c.close()
        assert got == acked
    # the log also survives a restart after the episode
    with BrokerProcess(small_disk / "data", log_path=tmp_path / "broker2.log") as broker:
        c = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "full2", "enable.auto.commit": False})
        lo, hi = c.get_watermark_offsets(TopicPartition("full", 0), timeout=10)
        c.close()
        assert (lo, hi) == (0, len(acked))


def _fill(disk) -> Path:
    """Fill ``disk`` to the last block with one file (returned, to unlink later)."""
    filler = disk / "filler"
    with open(filler, "wb") as f:
        try:
            while True:
                f.write(b"\0" * 65536)
                f.flush()
        except OSError:
            pass
        try:
            while True:
                os.write(f.fileno(), b"\0" * 512)
        except OSError:
            pass
    return filler


def test_init_producer_id_on_full_disk_is_retriable_and_never_reissued(small_disk, tmp_path):
    """A producer id block is used only once saved: on a full disk InitProducerId answers
    COORDINATOR_LOAD_IN_PROGRESS (the connection stays), and the id handed out once space
    returns is not handed out again after a restart (it was, and a new idempotent producer's
    first batch was then dropped as a duplicate of the old one's)."""
    init = {"transactional_id": None, "transaction_timeout_ms": 60000}
    with BrokerProcess(small_disk / "data", log_path=tmp_path / "broker.log") as broker:
        filler = _fill(small_disk)
        with WireClient("127.0.0.1", broker.port) as w:
            r = w.request(22, 1, init)
            assert r.error_code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, r
            assert r.producer_id == -1
            filler.unlink()
            r = w.request(22, 1, init)
            assert r.error_code == ErrorCode.NONE, r
            first = r.producer_id
        broker.restart()
        with WireClient("127.0.0.1", broker.port) as w:
            r = w.request(22, 1, init)
            assert r.error_code == ErrorCode.NONE, r
            assert r.producer_id != first


def test_create_topics_on_full_disk_answers_storage_error_and_leaves_no_topic(small_disk, tmp_path):
    """CreateTopics on a full disk answers KAFKA_STORAGE_ERROR for the topic (the connection
    was closed) and leaves no half-created topic: once space returns the same topic is created
    and takes records (it was TOPIC_ALREADY_EXISTS, with produce timing out)."""
    with BrokerProcess(small_disk / "data", log_path=tmp_path / "broker.log") as broker:
        filler = _fill(small_disk)
        with WireClient("127.0.0.1", broker.port) as w:
            r = w.request(19, 5, {"topics": [{"name": "ghost", "num_partitions": 4, "replication_factor": 1}],
                                  "timeout_ms": 10000})
            assert [(t.name, t.error_code) for t in r.topics] == [("ghost", ErrorCode.KAFKA_STORAGE_ERROR)], r
            md = w.request(3, 9, {"topics": None})
            assert "ghost" not in [t.name for t in md.topics]
        filler.unlink()
        assert not any(p.name.startswith("ghost-") for p in (small_disk / "data").iterdir())
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        admin.create_topics([NewTopic("ghost", 4, 1)])["ghost"].result(timeout=30)
        p = Producer({"bootstrap.servers": broker.bootstrap_servers, "acks": "all", "message.timeout.ms": 20000})
        errors = []
        for i in range(4):
            p.produce("ghost", b"v", partition=i, on_delivery=lambda err, msg: errors.append(err))
        assert p.flush(30) == 0
        assert errors == [None] * 4


def test_sigterm_on_a_full_disk_finishes_the_shutdown(small_disk, tmp_path):
    """SIGTERM while the disk is full: the broker stops with status 0, logging one line per
    step that failed, and starts again with every acknowledged record (it printed "cannot start
    broker: [Errno 28]" and exited 1 partway through the shutdown)."""
    log_path = tmp_path / "broker.log"
    broker = BrokerProcess(small_disk / "data", log_path=log_path).start()
    try:
        bs = broker.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bs})
        admin.create_topics([NewTopic("t", 3, 1)])["t"].result(timeout=30)
        p = Producer({"bootstrap.servers": bs, "acks": "all", "enable.idempotence": True})
        for i in range(30):
            p.produce("t", b"%d" % i, partition=i % 3)
        assert p.flush(30) == 0
        _fill(small_disk)
        assert broker.stop() == 0, log_path.read_text()[-2000:]
        assert "Traceback" not in log_path.read_text()
    finally:
        if broker.alive():
            broker.kill()
    (small_disk / "filler").unlink()
    with BrokerProcess(small_disk / "data", log_path=tmp_path / "broker2.log") as broker:
        c = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "g2"})
        assert [c.get_watermark_offsets(TopicPartition("t", i), timeout=10)[1] for i in range(3)] == [10, 10, 10]
        c.close()
