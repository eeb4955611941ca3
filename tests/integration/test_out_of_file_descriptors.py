"""A broker at its file descriptor limit (``ulimit -n``) logs that it cannot accept new
connections a few times, not thousands of times a second (CPython's accept loop reports it once
per attempt, up to the backlog), and goes on serving the connections it has."""

from __future__ import annotations

import os
import resource
import socket
import time

from confluent_kafka.admin import AdminClient

from litemq.testing.process import BrokerProcess
from litemq.testing.wire import WireClient

METADATA = {"topics": [], "allow_auto_topic_creation": False, "include_topic_authorized_operations": False}


def test_accept_errors_are_logged_a_few_times_and_the_broker_serves_on(tmp_path):
    log_path = tmp_path / "broker.log"
    with BrokerProcess(tmp_path / "data", log_path=log_path) as broker, \
            WireClient("127.0.0.1", broker.port) as before:  # a connection opened before the limit
        assert before.request(3, 12, METADATA).brokers
        pid = broker.proc.pid
        in_use = len(os.listdir(f"/proc/{pid}/fd"))
        soft, hard = resource.prlimit(pid, resource.RLIMIT_NOFILE)
        resource.prlimit(pid, resource.RLIMIT_NOFILE, (in_use + 4, hard))  # the soft limit, as `ulimit -Sn`
        clients = []
        try:
            for _ in range(40):  # more connections than descriptors left
                s = socket.create_connection(("127.0.0.1", broker.port), timeout=5)
                clients.append(s)
            time.sleep(3)
            assert len(os.listdir(f"/proc/{pid}/fd")) <= in_use + 4
            text = log_path.read_text()
            assert "cannot accept connections" in text
            assert text.count("cannot accept connections") <= 2, text.count("cannot accept connections")
            assert "socket.accept() out of system resource" not in text
            assert before.request(3, 12, METADATA).brokers  # the old connection is served
        finally:
            for s in clients:
                s.close()
        resource.prlimit(pid, resource.RLIMIT_NOFILE, (soft, hard))
        time.sleep(1.5)  # asyncio retries accepting after 1 s
        assert AdminClient({"bootstrap.servers": broker.bootstrap_servers}).list_topics(timeout=10).brokers
