"""Bad input never crashes the broker or makes it allocate beyond limits (issue 2).

Each case gets the Kafka error code a Kafka broker would return, or a closed connection; a
real client keeps producing and consuming on another connection throughout.
"""

from __future__ import annotations

import os
import random
import struct
import zlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from litemq.protocol.errors import ErrorCode
from litemq.protocol.records import build_batch
from litemq.testing.wire import WireClient


def _client(broker) -> WireClient:
    return WireClient("127.0.0.1", broker.port)


def _alive(broker) -> None:
    """The broker still answers ApiVersions on a fresh connection."""
    with _client(broker) as c:
        resp = c.request(18, 3, {"client_software_name": "t", "client_software_version": "1"})
        assert resp.error_code == 0 and resp.api_keys


def _rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def _produce_body(topic: str, records: bytes, acks: int = 1) -> dict:
    return {"transactional_id": None, "acks": acks, "timeout_ms": 5000,
            "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": records}]}]}


@pytest.fixture
def topic(shared_broker):
    from confluent_kafka.admin import AdminClient, NewTopic

    name = f"bad-{random.randrange(1 << 30)}"
    admin = AdminClient({"bootstrap.servers": shared_broker.bootstrap_servers})
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(timeout=30)
    return name


@pytest.mark.parametrize("size", [-1, -(2**31), 2**31 - 1, 200 * 1024 * 1024])
def test_frame_size_outside_limits_closes_connection(shared_broker, size):
    rss_before = _rss_mb(shared_broker.proc.pid)
    with _client(shared_broker) as c:
        c.send_raw(struct.pack(">i", size) + b"\x00" * 64)
        assert c.is_closed_by_peer()
    assert _rss_mb(shared_broker.proc.pid) < rss_before + 50
    _alive(shared_broker)


def test_frame_truncated_then_disconnect(shared_broker):
    with _client(shared_broker) as c:
        c.send_raw(struct.pack(">i", 1000) + b"\x00\x12\x00\x00")
    _alive(shared_broker)


def test_unknown_api_key_and_version_close(shared_broker):
    with _client(shared_broker) as c:
        c.send_raw(struct.pack(">ihhi", 10, 9999, 0, 1) + b"\xff\xff")
        assert c.is_closed_by_peer()
    with _client(shared_broker) as c:  # Produce v99
        c.send_raw(struct.pack(">ihhi", 10, 0, 99, 1) + b"\xff\xff")
        assert c.is_closed_by_peer()
    _alive(shared_broker)


def test_api_versions_unknown_version_answered_v0(shared_broker):
    with _client(shared_broker) as c:
        c.send_raw(struct.pack(">ihhi", 10, 18, 99, 7) + b"\xff\xff")
        frame = c.read_frame()
        corr, err = struct.unpack_from(">ih", frame)
        assert corr == 7 and err == ErrorCode.UNSUPPORTED_VERSION
        (count,) = struct.unpack_from(">i", frame, 6)
        keys = {struct.unpack_from(">hhh", frame, 10 + 6 * i)[0] for i in range(count)}
        assert {0, 1, 3, 18} <= keys
    _alive(shared_broker)


def test_huge_array_count_closes_connection(shared_broker):
    rss_before = _rss_mb(shared_broker.proc.pid)
    with _client(shared_broker) as c:
        # Produce v3 header + transactional_id=null, acks=1, timeout, topic count 2^31-1
        body = struct.pack(">hhi", 0, 3, 5) + struct.pack(">h", 1) + b"x" + struct.pack(">hhii", -1, 1, 1000, 2**31 - 1)
        c.send_raw(struct.pack(">i", len(body)) + body)
        assert c.is_closed_by_peer()
    with _client(shared_broker) as c:
        # Metadata v9 (flexible): compact array count as a varint far beyond the frame
        body = struct.pack(">hhi", 3, 9, 5) + struct.pack(">h", 1) + b"x" + b"\x00" + b"\xff\xff\xff\xff\x07"
        c.send_raw(struct.pack(">i", len(body)) + body)
        assert c.is_closed_by_peer()
    assert _rss_mb(shared_broker.proc.pid) < rss_before + 50
    _alive(shared_broker)


def test_corrupt_crc_gets_corrupt_message(shared_broker, topic):
    batch = bytearray(build_batch([(b"k", b"v")]))
    batch[-1] ^= 0xFF
    with _client(shared_broker) as c:
        resp = c.request(0, 7, _produce_body(topic, bytes(batch)))
        part = resp.responses[0].partition_responses[0]
        assert part.error_code == ErrorCode.CORRUPT_MESSAGE
        # the same connection keeps working
        resp = c.request(0, 7, _produce_body(topic, build_batch([(b"k", b"v")])))
        assert resp.responses[0].partition_responses[0].error_code == 0


def test_oversized_batch_gets_message_too_large(shared_broker, topic):
    big = build_batch([(b"k", os.urandom(2 * 1024 * 1024))])
    with _client(shared_broker) as c:
        resp = c.request(0, 7, _produce_body(topic, big))
        assert resp.responses[0].partition_responses[0].error_code == ErrorCode.MESSAGE_TOO_LARGE


def test_truncated_batch_and_bad_magic(shared_broker, topic):
    good = build_batch([(b"k", b"v")])
    bad_magic = bytearray(good)
    bad_magic[16] = 1
    with _client(shared_broker) as c:
        for records in (good[:30], good[:-3], bytes(bad_magic)):
            resp = c.request(0, 7, _produce_body(topic, records))
            assert resp.responses[0].partition_responses[0].error_code in (
                ErrorCode.CORRUPT_MESSAGE, ErrorCode.INVALID_RECORD, ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT)


def test_produce_v3_record_rules_answer_as_kafka_4(shared_broker, topic):
    """Kafka 4's ``ProduceRequest.validateRecords`` for v3+, per partition: no batch, a batch of
    message format v0/v1, or two batches in one partition's records is INVALID_RECORD with Kafka's
    message; ZStandard before v7 is UNSUPPORTED_COMPRESSION_TYPE; message format v1 in Produce v2 is
    UNSUPPORTED_FOR_MESSAGE_FORMAT. Nothing is appended, and the connection keeps working."""
    from litemq.protocol.records import COMPRESSION_ZSTD

    one = build_batch([(b"k", b"v")])
    magic1 = bytearray(one)
    magic1[16] = 1
    zstd = build_batch([(b"k", b"v" * 100)], compression=COMPRESSION_ZSTD)
    cases = [
        (3, b"", ErrorCode.INVALID_RECORD, "must have at least one record batch per partition"),
        (9, bytes(magic1), ErrorCode.INVALID_RECORD, "only allowed to contain record batches with magic version 2"),
        (8, one + one, ErrorCode.INVALID_RECORD, "only allowed to contain exactly one record batch per partition"),
        (6, zstd, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, "not allowed to use ZStandard compression"),
    ]
    with _client(shared_broker) as c:
        end = c.request(2, 7, {"replica_id": -1, "isolation_level": 0, "topics": [{"name": topic, "partitions": [
            {"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}]}).topics[0].partitions[0].offset
        for version, records, code, message in cases:
            part = c.request(0, version, _produce_body(topic, records)).responses[0].partition_responses[0]
            assert part.error_code == code, (version, part)
            if version >= 8:  # error_message is sent from v8 (KIP-467)
                assert message in part.error_message
        # Produce v2 with a message set of format v1 (offset, size, crc, magic 1, attributes,
        # timestamp, null key, value): formats v0/v1 are gone in Kafka 4 (KIP-724); a final error,
        # not CORRUPT_MESSAGE, which clients retry until their message timeout
        body = struct.pack(">bbqi", 1, 0, 1_700_000_000_000, -1) + struct.pack(">i", 1) + b"v"
        message = struct.pack(">I", zlib.crc32(body)) + body
        legacy = struct.pack(">qi", 0, len(message)) + message
        part = c.request(0, 2, _produce_body(topic, legacy)).responses[0].partition_responses[0]
        assert part.error_code == ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT
        for version, records in ((7, zstd), (3, one)):
            part = c.request(0, version, _produce_body(topic, records)).responses[0].partition_responses[0]
            assert (part.error_code, part.base_offset) == (0, end)
            end += 1


def test_produce_unknown_topic_and_bad_acks(shared_broker):
    with _client(shared_broker) as c:
        resp = c.request(0, 7, _produce_body("no-such-topic-xyz", build_batch([(b"k", b"v")])))
        assert resp.responses[0].partition_responses[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        resp = c.request(0, 7, _produce_body("no-such-topic-xyz", build_batch([(b"k", b"v")]), acks=5))
        assert resp.responses[0].partition_responses[0].error_code == ErrorCode.INVALID_REQUIRED_ACKS


def test_fetch_out_of_range(shared_broker, topic):
    with _client(shared_broker) as c:
        resp = c.request(1, 11, {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20,
                                 "isolation_level": 0, "session_id": 0, "session_epoch": -1,
                                 "topics": [{"topic": topic, "partitions": [
                                     {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 10**9,
                                      "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}],
                                 "forgotten_topics_data": [], "rack_id": ""})
        assert resp.responses[0].partitions[0].error_code == ErrorCode.OFFSET_OUT_OF_RANGE


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.binary(min_size=0, max_size=300), st.integers(min_value=0, max_value=70), st.integers(0, 20))
def test_fuzz_live_connection(shared_broker, payload, api_key, version):
    """Random bodies under a valid size prefix and random api keys/versions: the broker
    answers or closes, and another client keeps working."""
    header = struct.pack(">hhi", api_key, version, 1) + struct.pack(">h", 3) + b"fuz"
    frame = header + payload
    c = _client(shared_broker)
    try:
        c.send_raw(struct.pack(">i", len(frame)) + frame)
        c.sock.settimeout(2)
        try:
            c.sock.recv(65536)
        except (TimeoutError, OSError):
            pass
    finally:
        c.close()
    assert shared_broker.alive()


def test_clients_keep_working_during_garbage(shared_broker, topic):
    """A confluent-kafka producer/consumer pair works while garbage connections come and go."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

    bs = shared_broker.bootstrap_servers
    p = Producer({"bootstrap.servers": bs, "acks": "all", "linger.ms": 1})
    rng = random.Random(7)
    for i in range(200):
        p.produce(topic, key=b"k", value=b"v%d" % i)
        if i % 10 == 0:
            with _client(shared_broker) as c:
                c.send_raw(rng.randbytes(rng.randrange(1, 200)))
        p.poll(0)
    assert p.flush(30) == 0
    cons = Consumer({"bootstrap.servers": bs, "group.id": "g-" + topic, "enable.auto.commit": False})
    cons.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    values = []
    for _ in range(40):
        for m in cons.consume(500, 0.5):
            assert m.error() is None
            values.append(m.value())
        if len(values) >= 200:
            break
    cons.close()
    assert [v for v in values if v.startswith(b"v")][-200:] == [b"v%d" % i for i in range(200)]
    assert _rss_mb(shared_broker.proc.pid) < 300
