"""The `litemq` command against a real broker process (issue 2, "CLI basics")."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from litemq.testing.process import free_port


def litemq(*args: str, input: bytes | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "litemq.cli", *args], input=input, capture_output=True,
                          timeout=timeout)


def test_topic_lifecycle(shared_broker):
    b = ["-b", shared_broker.bootstrap_servers]
    r = litemq("topic", "create", "cli-t", "-p", "3", "-r", "1", "-c", "retention.ms=60000", *b)
    assert r.returncode == 0, r.stderr
    r = litemq("topic", "list", *b)
    assert r.returncode == 0 and b"cli-t" in r.stdout
    r = litemq("topic", "describe", "cli-t", *b)
    assert r.returncode == 0, r.stderr
    assert b"retention.ms" in r.stdout and b"60000" in r.stdout and b"partitions: 3" in r.stdout
    r = litemq("topic", "alter-config", "cli-t", "-c", "retention.ms=120000", *b)
    assert r.returncode == 0, r.stderr
    assert b"120000" in litemq("topic", "describe", "cli-t", *b).stdout
    r = litemq("topic", "create", "cli-t", "-p", "1", *b)
    assert r.returncode == 1 and b"error:" in r.stderr and b"Traceback" not in r.stderr
    r = litemq("topic", "delete", "cli-t", *b)
    assert r.returncode == 0, r.stderr
    assert b"cli-t" not in litemq("topic", "list", *b).stdout


def test_produce_then_consume_from_beginning(shared_broker):
    b = ["-b", shared_broker.bootstrap_servers]
    assert litemq("topic", "create", "cli-pc", "-p", "2", *b).returncode == 0
    lines = b"".join(b"line %d\r\n" % i for i in range(50)) + b"last line without newline"
    r = litemq("produce", "cli-pc", "-k", "same-key", *b, input=lines)
    assert r.returncode == 0, r.stderr
    r = litemq("consume", "cli-pc", "--from-beginning", "-n", "51", "-f", "%k|%s\\n", *b)
    assert r.returncode == 0, r.stderr
    out = r.stdout.splitlines()
    assert out == [b"same-key|line %d" % i for i in range(50)] + [b"same-key|last line without newline"]


def test_consume_without_from_beginning_sees_only_new_records(shared_broker):
    b = ["-b", shared_broker.bootstrap_servers]
    assert litemq("topic", "create", "cli-new", "-p", "1", *b).returncode == 0
    assert litemq("produce", "cli-new", *b, input=b"old\n").returncode == 0
    proc = subprocess.Popen([sys.executable, "-m", "litemq.cli", "consume", "cli-new", "-n", "1", *b],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        time.sleep(4)  # let the consumer start and position itself at the log end
        assert litemq("produce", "cli-new", *b, input=b"new\n").returncode == 0
        out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert out == b"new\n", err


@pytest.mark.parametrize("args, needle", [
    (["topic", "list", "-b", "127.0.0.1:1"], b"cannot reach a broker"),
    (["consume", "no-such-topic", "-n", "1"], b"unknown topic"),
    (["topic", "create"], b"Missing argument"),
])
def test_readable_errors(shared_broker, args, needle):
    if "-b" not in args and args[0] != "topic" or args == ["consume", "no-such-topic", "-n", "1"]:
        args = args + ["-b", shared_broker.bootstrap_servers]
    r = litemq(*args, timeout=60)
    assert r.returncode != 0
    assert needle in r.stderr, r.stderr
    assert b"Traceback" not in r.stderr


def test_serve_rejects_unknown_setting(tmp_path):
    r = litemq("serve", "--data-dir", str(tmp_path), "--listen", f"127.0.0.1:{free_port()}", "-o", "no.such=1")
    assert r.returncode == 1 and b"unknown broker setting" in r.stderr


def test_topic_add_partitions_and_delete_records(shared_broker):
    from confluent_kafka import Consumer, Producer, TopicPartition

    bs = shared_broker.bootstrap_servers
    b = ["-b", bs]
    assert litemq("topic", "create", "cli-grow", "-p", "2", *b).returncode == 0
    r = litemq("topic", "add-partitions", "cli-grow", "-p", "4", *b)
    assert r.returncode == 0 and b"now has 4 partitions" in r.stdout, r.stderr
    assert b"partitions: 4" in litemq("topic", "describe", "cli-grow", *b).stdout
    r = litemq("topic", "add-partitions", "cli-grow", "-p", "3", *b)  # Kafka: INVALID_PARTITIONS
    assert r.returncode == 1 and b"error: cannot add partitions to topic cli-grow" in r.stderr, r.stderr

    p = Producer({"bootstrap.servers": bs})
    for i in range(30):
        p.produce("cli-grow", str(i).encode(), partition=i % 3)  # 10 each in 0-2, none in 3
    assert p.flush(30) == 0
    r = litemq("topic", "delete-records", "cli-grow", "--partition", "0", "--partition", "1", "--before", "4", *b)
    assert r.returncode == 0, r.stderr
    rows = [line.split("│")[1:3] for line in r.stdout.decode().splitlines() if line.startswith("│")]
    assert [(a.strip(), c.strip()) for a, c in rows] == [("0", "4"), ("1", "4")]
    # every partition, -1 = the high watermark: 2 empties; 3 was empty anyway
    r = litemq("topic", "delete-records", "cli-grow", "--before", "-1", *b)
    assert r.returncode == 0, r.stderr
    c = Consumer({"bootstrap.servers": bs, "group.id": "cli-grow-check"})
    try:
        marks = [c.get_watermark_offsets(TopicPartition("cli-grow", i), timeout=10) for i in range(4)]
    finally:
        c.close()
    assert marks == [(10, 10), (10, 10), (10, 10), (0, 0)]
    # above the high watermark: Kafka's per-partition OFFSET_OUT_OF_RANGE, the others still done
    r = litemq("topic", "delete-records", "cli-grow", "--before", "5", *b)
    assert r.returncode == 1 and b"partition 3 not deleted" in r.stderr, r.stderr
    assert b"Offset out of range" in r.stdout
    r = litemq("topic", "delete-records", "cli-grow", "--partition", "7", "--before", "1", *b)
    assert r.returncode == 1 and b"has no partition 7 (it has 4)" in r.stderr, r.stderr
