"""Broker settings from a properties file and flags (Kafka names); the user-facing fixture."""

from __future__ import annotations

import subprocess
import sys

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from litemq.testing.process import BrokerProcess, free_port, wait_for_port


def test_properties_file_and_override(tmp_path):
    props = tmp_path / "server.properties"
    props.write_text("# Kafka-style settings\nnum.partitions=4\nauto.create.topics.enable=true\n"
                     "log.retention.hours=1\n")
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "litemq.cli", "serve", "--data-dir", str(tmp_path / "d"),
                             "--listen", f"127.0.0.1:{port}", "--config", str(props), "-o", "message.max.bytes=2000000"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        wait_for_port("127.0.0.1", port)
        bs = f"127.0.0.1:{port}"
        p = Producer({"bootstrap.servers": bs})
        p.produce("auto-created", b"x")
        assert p.flush(20) == 0
        md = AdminClient({"bootstrap.servers": bs}).list_topics(timeout=10)
        assert len(md.topics["auto-created"].partitions) == 4
        from confluent_kafka.admin import ConfigResource

        admin = AdminClient({"bootstrap.servers": bs})
        res = ConfigResource("topic", "auto-created")
        configs = admin.describe_configs([res])[res].result(timeout=10)
        assert configs["retention.ms"].value == str(3600 * 1000)
        assert configs["max.message.bytes"].value == "2000000"
    finally:
        proc.terminate()
        assert proc.wait(30) == 0  # SIGTERM is a clean shutdown


def test_clean_shutdown_leaves_marker(tmp_path):
    with BrokerProcess(tmp_path / "d") as b:
        p = Producer({"bootstrap.servers": b.bootstrap_servers})
        p.produce("marker", b"x")
        assert p.flush(20) == 0
    assert list((tmp_path / "d").glob("marker-0/*clean*")), "no clean-shutdown marker after SIGTERM"


def test_litemq_broker_fixture(litemq_broker):
    p = Producer({"bootstrap.servers": litemq_broker.bootstrap_servers})
    p.produce("fixture-topic", b"hello")
    assert p.flush(20) == 0
    md = AdminClient({"bootstrap.servers": litemq_broker.bootstrap_servers}).list_topics(timeout=10)
    assert "fixture-topic" in md.topics
