"""Answers that complete after their client's connection was lost are not written to it: asyncio
logs "socket.send() raised exception." for every write to a lost transport after the fifth, and
a partition leader resuming from a pause logged about 1,000 such lines in 50 ms (one per parked
acks=all answer). Here: 200 long-poll fetches parked on one connection, the broker paused, the
client gone with a reset, the broker resumed when their max_wait_ms has passed."""

from __future__ import annotations

import os
import signal
import socket
import struct
import time

from confluent_kafka.admin import AdminClient, NewTopic

from litemq.protocol import frames
from litemq.testing.process import BrokerProcess

FETCH_V11 = 11


def _fetch_request(correlation_id: int, topic: str) -> bytes:
    body = {"replica_id": -1, "max_wait_ms": 1500, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1, "rack_id": "", "forgotten_topics_data": [],
            "topics": [{"topic": topic, "partitions": [{"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0,
                                                        "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}]}
    return frames.encode_request(1, FETCH_V11, correlation_id, "quiet-test", body)


def test_answers_to_a_lost_connection_are_dropped_quietly(tmp_path):
    log_path = tmp_path / "broker.log"
    with BrokerProcess(tmp_path / "data", log_path=log_path) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        admin.create_topics([NewTopic("quiet", 1, 1)])["quiet"].result(30)
        s = socket.create_connection(("127.0.0.1", broker.port), timeout=10)
        s.sendall(b"".join(_fetch_request(i, "quiet") for i in range(200)))
        time.sleep(1.0)  # every fetch parked (nothing to read at offset 0)
        os.kill(broker.proc.pid, signal.SIGSTOP)
        try:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            s.close()  # a reset: the broker finds the connection lost when it runs again
            time.sleep(2.0)  # past every fetch's max_wait_ms
        finally:
            os.kill(broker.proc.pid, signal.SIGCONT)
        time.sleep(1.0)
        assert admin.list_topics(timeout=10).topics  # the broker serves on
        assert log_path.read_text().count("socket.send() raised exception") == 0
