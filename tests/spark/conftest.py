"""Fixtures of the Spark connector tests: ONE SparkSession (local[2]) and ONE LiteMQ broker
process for the whole test session; each test uses its own topics.

The broker runs as a separate ``litemq serve`` process, so the Spark driver's Python process
only runs the test. Spark settings keep a 2-core machine responsive: 2 shuffle partitions,
no UI, Arrow on, Python workers reused.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import uuid

import pytest

pyspark = pytest.importorskip("pyspark")
ck = pytest.importorskip("confluent_kafka")
from confluent_kafka import admin as ck_admin  # noqa: E402


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_port(port: int, proc, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"litemq serve exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.1)
    raise TimeoutError("litemq serve did not start listening")


class BrokerProcess:
    """A ``litemq serve`` subprocess. ``bootstrap_servers``; ``create_topic``; ``produce``."""

    def __init__(self, data_dir) -> None:
        self.port = _free_port()
        self.bootstrap_servers = f"127.0.0.1:{self.port}"
        data_dir.mkdir(parents=True, exist_ok=True)
        self.log = open(data_dir.parent / "broker.log", "wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "litemq.cli", "serve", "--data-dir", str(data_dir),
             "--listen", self.bootstrap_servers, "--num-partitions", "3", "--log-level", "warning"],
            stdout=self.log, stderr=subprocess.STDOUT)
        _wait_port(self.port, self.proc)
        self.admin = ck_admin.AdminClient({"bootstrap.servers": self.bootstrap_servers})

    def create_topic(self, name: str | None = None, partitions: int = 3, config: dict | None = None) -> str:
        name = name or f"t-{uuid.uuid4().hex[:10]}"
        fs = self.admin.create_topics([ck_admin.NewTopic(name, partitions, 1, config=config or {})])
        fs[name].result(30)
        return name

    def add_partitions(self, name: str, total: int) -> None:
        self.admin.create_partitions([ck_admin.NewPartitions(name, total)])[name].result(30)

    def producer(self, **extra):
        cfg = {"bootstrap.servers": self.bootstrap_servers, "enable.idempotence": True, "linger.ms": 5,
               "log_level": 2}
        cfg.update(extra)
        return ck.Producer(cfg)

    def produce(self, topic: str, n: int, *, start: int = 0, partition: int | None = None,
                size: int = 0, headers=None) -> None:
        """Send records key=b"k<i>", value=b"v<i>" (padded to ``size``) for i in start..start+n."""
        p = self.producer()
        for i in range(start, start + n):
            v = f"v{i}".encode()
            if size:
                v = v.ljust(size, b".")
            kw = {"key": f"k{i}".encode(), "value": v}
            if partition is not None:
                kw["partition"] = partition
            if headers is not None:
                kw["headers"] = headers
            while True:
                try:
                    p.produce(topic, **kw)
                    break
                except BufferError:
                    p.poll(0.05)
        assert p.flush(60) == 0

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


@pytest.fixture(scope="session")
def broker(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("litemq") / "data")
    yield b
    b.close()


@pytest.fixture(scope="session")
def spark():
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    s = (SparkSession.builder.master("local[2]").appName("litemq-spark-tests")
         .config("spark.ui.enabled", "false")
         .config("spark.sql.shuffle.partitions", "2")
         .config("spark.sql.execution.arrow.pyspark.enabled", "true")
         .config("spark.python.worker.reuse", "true")
         .config("spark.driver.memory", "1g")
         .config("spark.sql.streaming.stopTimeout", "60s")
         .getOrCreate())
    s.sparkContext.setLogLevel("ERROR")
    import litemq.spark

    litemq.spark.register(s)
    yield s
    s.stop()
