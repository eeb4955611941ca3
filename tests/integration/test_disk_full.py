"""Disk full: producers get KAFKA_STORAGE_ERROR, the broker keeps running, and once space
returns appends succeed and every acknowledged record is intact (issue 3)."""

from __future__ import annotations

import subprocess
import time

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from litemq.testing.process import BrokerProcess


@pytest.fixture
def small_disk(tmp_path):
    mnt = tmp_path / "disk"
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mnt)], capture_output=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.decode().strip()}")
    yield mnt
    subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


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
