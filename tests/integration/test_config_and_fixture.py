"""Broker settings from a properties file and flags (Kafka names); the user-facing fixture."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from confluent_kafka import KafkaError, Producer
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


def _doc_properties_block(doc: Path, containing: str) -> str:
    """The ```properties block of ``doc`` that contains ``containing``."""
    blocks = re.findall(r"```properties\n(.*?)```", doc.read_text(), flags=re.S)
    return next(b for b in blocks if containing in b)


def test_properties_file_continuation_lines_as_in_the_security_doc(tmp_path):
    """docs/security.md's SASL listener example, whose JAAS line goes on after a trailing
    backslash (java.util.Properties' continuation line), read as Kafka reads it: its users log in."""
    block = _doc_properties_block(Path(__file__).parents[2] / "docs" / "security.md",
                                  "listener.name.sasl_plaintext.plain.sasl.jaas.config")
    assert "\\\n" in block
    plain_port, sasl_port = free_port(), free_port()
    lines = [line for line in block.splitlines() if not line.startswith("listeners=")]
    props = tmp_path / "server.properties"
    props.write_text(f"listeners=PLAINTEXT://127.0.0.1:{plain_port},SASL_PLAINTEXT://127.0.0.1:{sasl_port}\n"
                     + "\n".join(lines) + "\n")
    proc = subprocess.Popen([sys.executable, "-m", "litemq.cli", "serve", "--data-dir", str(tmp_path / "d"),
                             "--config", str(props)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        wait_for_port("127.0.0.1", sasl_port)
        login = {"bootstrap.servers": f"127.0.0.1:{sasl_port}", "security.protocol": "SASL_PLAINTEXT",
                 "sasl.mechanism": "PLAIN", "sasl.username": "alice"}
        p = Producer({**login, "sasl.password": "alice-secret"})
        p.produce("from-alice", b"x")
        assert p.flush(20) == 0
        errors = []
        bad = Producer({**login, "sasl.password": "wrong", "error_cb": errors.append})
        bad.produce("from-alice", b"y")
        bad.flush(3)
        assert any(e.code() == KafkaError._AUTHENTICATION for e in errors), errors
    finally:
        proc.terminate()
        out = proc.communicate(timeout=30)[0].decode(errors="replace")
        assert proc.returncode == 0, out[-2000:]
