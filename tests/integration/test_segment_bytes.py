"""Kafka 4's segment size bounds (KIP-1030) with real clients: ``segment.bytes`` and the broker
default ``log.segment.bytes`` are at least 1 MiB; the internal topic config
``internal.segment.bytes`` (Kafka ``LogConfig.defineInternal``) sets smaller segments, rolls
them, and is listed by DescribeConfigs only for a topic that sets it; a smaller
``segment.bytes`` kept by an earlier LiteMQ still opens and rolls."""

from __future__ import annotations

import json
import random
import subprocess
import sys

import pytest
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from litemq.limits import MIN_SEGMENT_BYTES
from litemq.storage.config import LogConfig
from litemq.testing.process import BrokerProcess


def _name(prefix: str) -> str:
    return f"{prefix}-{random.randrange(1 << 30)}"


def _describe(admin: AdminClient, topic: str) -> dict:
    res = ConfigResource("topic", topic)
    return admin.describe_configs([res])[res].result(timeout=30)


def _segments(data_dir, topic: str) -> list[str]:
    return sorted(p.name for p in (data_dir / f"{topic}-0").glob("*.log"))


def _produce(bs: str, topic: str, n: int, size: int) -> None:
    p = Producer({"bootstrap.servers": bs, "linger.ms": 0, "batch.num.messages": 1})
    for _ in range(n):
        p.produce(topic, b"v" * size)
        p.poll(0)
    assert p.flush(30) == 0


def test_segment_bytes_below_one_mib_is_refused_and_internal_segment_bytes_sets_small_segments(shared_broker):
    bs = shared_broker.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bs})

    small = _name("seg-small")
    with pytest.raises(KafkaException) as exc:
        admin.create_topics([NewTopic(small, 1, 1, config={"segment.bytes": str(MIN_SEGMENT_BYTES - 1)})]
                            )[small].result(timeout=30)
    err = exc.value.args[0]
    assert err.name() == "INVALID_CONFIG" and "segment.bytes" in err.str() and str(MIN_SEGMENT_BYTES) in err.str()
    assert small not in admin.list_topics(timeout=10).topics

    ok = _name("seg-1mib")
    admin.create_topics([NewTopic(ok, 1, 1, config={"segment.bytes": str(MIN_SEGMENT_BYTES)})])[ok].result(timeout=30)
    entries = _describe(admin, ok)
    assert entries["segment.bytes"].value == str(MIN_SEGMENT_BYTES)
    assert "internal.segment.bytes" not in entries  # internal: listed only when set
    res = ConfigResource("topic", ok, set_config={"segment.bytes": "1000"})
    with pytest.raises(KafkaException) as exc:
        admin.alter_configs([res])[res].result(timeout=30)
    assert exc.value.args[0].name() == "INVALID_CONFIG"
    assert _describe(admin, ok)["segment.bytes"].value == str(MIN_SEGMENT_BYTES)

    tiny = _name("seg-internal")
    admin.create_topics([NewTopic(tiny, 1, 1, config={"internal.segment.bytes": "1000"})])[tiny].result(timeout=30)
    entries = _describe(admin, tiny)
    assert entries["internal.segment.bytes"].value == "1000"
    assert entries["internal.segment.bytes"].source == 1  # DYNAMIC_TOPIC_CONFIG
    assert entries["segment.bytes"].value == str(LogConfig().segment_bytes)  # the default, unchanged
    _produce(bs, tiny, 20, 300)
    # 20 batches of ~370 B in segments of at most 1000 B: at least 8 of them
    assert len(_segments(shared_broker.data_dir, tiny)) >= 8, _segments(shared_broker.data_dir, tiny)


def test_broker_default_below_one_mib_refused_at_start(tmp_path):
    r = subprocess.run([sys.executable, "-m", "litemq.cli", "serve", "--data-dir", str(tmp_path / "d"),
                        "--listen", "127.0.0.1:0", "-o", "log.segment.bytes=100000"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0
    assert "invalid value 100000 for configuration log.segment.bytes: value must be at least 1048576" in r.stderr


def test_a_small_segment_bytes_kept_by_an_earlier_version_still_opens_and_rolls(tmp_path):
    """A topic created before Kafka 4's floor with ``segment.bytes=1000`` (stored in the single
    broker's ``__cluster_metadata/metadata.json``) keeps its value and its small segments after a restart."""
    data = tmp_path / "data"
    topic = "legacy"
    with BrokerProcess(data) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        admin.create_topics([NewTopic(topic, 1, 1, config={"retention.ms": "-1"})])[topic].result(timeout=30)
    meta_path = data / "__cluster_metadata" / "metadata.json"
    meta = json.loads(meta_path.read_text())
    stored = json.dumps(meta)
    assert '"retention.ms": "-1"' in stored
    meta_path.write_text(stored.replace('"retention.ms": "-1"', '"retention.ms": "-1", "segment.bytes": "1000"'))
    with BrokerProcess(data) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        assert _describe(admin, topic)["segment.bytes"].value == "1000"
        _produce(broker.bootstrap_servers, topic, 12, 300)
        assert len(_segments(data, topic)) >= 5, _segments(data, topic)
