"""Fetch semantics at the wire level (issue 2): long poll woken by an append, min_bytes,
first batch always whole, max_wait expiry, ListOffsets by time."""

from __future__ import annotations

import random
import threading
import time

import pytest

from litemq.protocol.records import build_batch, decode_records
from litemq.testing.wire import WireClient


def fetch_body(topic: str, offset: int, max_wait_ms: int, min_bytes: int = 1, max_bytes: int = 1 << 20,
               partition_max_bytes: int = 1 << 20) -> dict:
    return {"replica_id": -1, "max_wait_ms": max_wait_ms, "min_bytes": min_bytes, "max_bytes": max_bytes,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": topic, "partitions": [
                {"partition": 0, "current_leader_epoch": -1, "fetch_offset": offset, "log_start_offset": -1,
                 "partition_max_bytes": partition_max_bytes}]}],
            "forgotten_topics_data": [], "rack_id": ""}


def produce(c: WireClient, topic: str, records, acks: int = -1) -> int:
    resp = c.request(0, 7, {"transactional_id": None, "acks": acks, "timeout_ms": 10000,
                            "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": build_batch(records)}]}]})
    part = resp.responses[0].partition_responses[0]
    assert part.error_code == 0
    return part.base_offset


@pytest.fixture
def topic(shared_broker):
    from confluent_kafka.admin import AdminClient, NewTopic

    name = f"fetch-{random.randrange(1 << 30)}"
    admin = AdminClient({"bootstrap.servers": shared_broker.bootstrap_servers})
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(timeout=30)
    return name


def test_long_poll_is_woken_by_append(shared_broker, topic):
    fc = WireClient("127.0.0.1", shared_broker.port, timeout_s=60)
    pc = WireClient("127.0.0.1", shared_broker.port)
    result = {}

    def waiting_fetch():
        result["resp"] = fc.request(1, 11, fetch_body(topic, 0, max_wait_ms=30000))
        result["at"] = time.monotonic()

    t = threading.Thread(target=waiting_fetch)
    t.start()
    time.sleep(0.3)
    produced_at = time.monotonic()
    produce(pc, topic, [(b"k", b"hello")])
    t.join(40)
    part = result["resp"].responses[0].partitions[0]
    assert [r.value for r in decode_records(part.records)] == [b"hello"]
    # woken by the append, not by the 30 s max_wait expiring
    assert result["at"] - produced_at < 25


def test_max_wait_expires_with_empty_response(shared_broker, topic):
    with WireClient("127.0.0.1", shared_broker.port) as c:
        resp = c.request(1, 11, fetch_body(topic, 0, max_wait_ms=200))
        part = resp.responses[0].partitions[0]
        assert part.error_code == 0 and not part.records and part.high_watermark == 0


def test_min_bytes_waits_for_enough_data(shared_broker, topic):
    with WireClient("127.0.0.1", shared_broker.port) as pc, WireClient("127.0.0.1", shared_broker.port, 60) as fc:
        produce(pc, topic, [(b"k", b"x" * 100)])
        result = {}
        t = threading.Thread(target=lambda: result.setdefault(
            "resp", fc.request(1, 11, fetch_body(topic, 0, max_wait_ms=20000, min_bytes=2000))))
        t.start()
        time.sleep(0.3)
        assert "resp" not in result  # 1 small batch < min_bytes: still waiting
        produce(pc, topic, [(b"k", b"y" * 3000)])
        t.join(30)
        recs = list(decode_records(result["resp"].responses[0].partitions[0].records))
        assert [len(r.value) for r in recs] == [100, 3000]


def test_first_batch_returned_whole_even_if_larger_than_max_bytes(shared_broker, topic):
    with WireClient("127.0.0.1", shared_broker.port) as c:
        produce(c, topic, [(b"k", b"z" * 50_000)])
        produce(c, topic, [(b"k", b"w" * 10)])
        resp = c.request(1, 11, fetch_body(topic, 0, max_wait_ms=0, max_bytes=100, partition_max_bytes=100))
        recs = list(decode_records(resp.responses[0].partitions[0].records))
        assert len(recs) == 1 and len(recs[0].value) == 50_000  # whole first batch, nothing more


def test_list_offsets_by_timestamp(shared_broker, topic):
    with WireClient("127.0.0.1", shared_broker.port) as c:
        base = 1_700_000_000_000
        for i in range(5):
            produce(c, topic, [(b"k", b"v", (), base + i * 1000)])

        def lookup(ts):
            resp = c.request(2, 5, {"replica_id": -1, "isolation_level": 0, "topics": [
                {"name": topic, "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": ts}]}]})
            p = resp.topics[0].partitions[0]
            return p.offset, p.timestamp

        assert lookup(-2)[0] == 0
        assert lookup(-1)[0] == 5
        assert lookup(base + 2500) == (3, base + 3000)
        assert lookup(base) == (0, base)
        assert lookup(base + 10_000) == (-1, -1)


def test_list_offsets_v10_takes_a_timeout_and_answers_as_v9(shared_broker, topic):
    """ListOffsets v10 (Kafka 4.0, KIP-1075) adds the request's ``timeout_ms`` for lookups in
    remote storage; with no remote storage it is answered at once, as v9. kafka-python infers a
    broker's version from it (a broker without v10 is "3.9")."""
    from kafka import KafkaConsumer

    with WireClient("127.0.0.1", shared_broker.port) as c:
        produce(c, topic, [(b"k", b"v", (), 1_700_000_000_000)])
        for version, extra in ((9, {}), (10, {"timeout_ms": 30_000})):
            resp = c.request(2, version, {"replica_id": -1, "isolation_level": 0, **extra, "topics": [
                {"name": topic, "partitions": [{"partition_index": 0, "current_leader_epoch": -1,
                                                "timestamp": ts} for ts in (-2, -1, -3)]}]})
            assert [(p.error_code, p.offset) for p in resp.topics[0].partitions] == [(0, 0), (0, 1), (0, 0)], version
    consumer = KafkaConsumer(bootstrap_servers=shared_broker.bootstrap_servers, api_version=None)
    try:
        assert consumer.config["api_version"] == (4, 0)
    finally:
        consumer.close()


def test_offset_for_leader_epoch(shared_broker, topic):
    with WireClient("127.0.0.1", shared_broker.port) as c:
        produce(c, topic, [(b"k", b"v")] * 3)

        def ask(epoch):
            resp = c.request(23, 3, {"replica_id": -1, "topics": [
                {"topic": topic, "partitions": [{"partition": 0, "current_leader_epoch": -1, "leader_epoch": epoch}]}]})
            p = resp.topics[0].partitions[0]
            return p.error_code, p.leader_epoch, p.end_offset

        assert ask(0) == (0, 0, 3)      # the current epoch ends at the log end offset
        assert ask(7) == (0, -1, -1)    # an epoch newer than any known: undefined


def test_list_offsets_max_timestamp(shared_broker, topic):
    """ListOffsets v7+ with timestamp -3 (KIP-734): the record with the largest timestamp."""
    with WireClient("127.0.0.1", shared_broker.port) as c:
        base = 1_700_000_000_000
        for ts in (base + 5000, base + 9000, base + 1000):
            produce(c, topic, [(b"k", b"v", (), ts)])
        resp = c.request(2, 7, {"replica_id": -1, "isolation_level": 0, "topics": [
            {"name": topic, "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": -3}]}]})
        p = resp.topics[0].partitions[0]
        assert (p.error_code, p.offset, p.timestamp) == (0, 1, base + 9000)


def list_max_timestamp(c: WireClient, topic: str, version: int = 7) -> tuple[int, int, int]:
    resp = c.request(2, version, {"replica_id": -1, "isolation_level": 0, "topics": [
        {"name": topic, "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": -3}]}]})
    p = resp.topics[0].partitions[0]
    return p.error_code, p.offset, p.timestamp


def test_list_offsets_max_timestamp_is_the_record_not_the_batch(shared_broker, topic):
    """KIP-734 asks for the record with the largest timestamp: inside a multi-record batch that
    is not the batch's last offset; with ties, the first such record (Kafka
    ``RecordBatch.offsetOfMaxTimestamp``). Checked raw and through confluent-kafka's admin."""
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient, OffsetSpec

    base = 1_700_000_000_000
    admin = AdminClient({"bootstrap.servers": shared_broker.bootstrap_servers})

    def admin_max() -> tuple[int, int]:
        tp = TopicPartition(topic, 0)
        r = admin.list_offsets({tp: OffsetSpec.max_timestamp()})[tp].result(timeout=30)
        return r.offset, r.timestamp

    with WireClient("127.0.0.1", shared_broker.port) as c:
        assert list_max_timestamp(c, topic) == (0, -1, -1)  # empty log
        # one batch of 6 records (offsets 0..5): the max (base+9000) at offsets 2 and 4
        ts = [base + 1000, base + 3000, base + 9000, base + 2000, base + 9000, base + 4000]
        assert produce(c, topic, [(b"k%d" % i, b"v", (), t) for i, t in enumerate(ts)]) == 0
        assert list_max_timestamp(c, topic) == (0, 2, base + 9000)
        assert list_max_timestamp(c, topic, version=8) == (0, 2, base + 9000)
        assert admin_max() == (2, base + 9000)
        # a later batch (offsets 6..8) with a smaller max leaves the answer where it was
        assert produce(c, topic, [(b"a", b"v", (), base + 8000), (b"b", b"v", (), base + 500),
                                  (b"c", b"v", (), base + 7000)]) == 6
        assert list_max_timestamp(c, topic) == (0, 2, base + 9000)
        # a later batch (offsets 9..11) with a larger max in its middle moves it there
        assert produce(c, topic, [(b"a", b"v", (), base + 100), (b"b", b"v", (), base + 20000),
                                  (b"c", b"v", (), base + 5)]) == 9
        assert list_max_timestamp(c, topic) == (0, 10, base + 20000)
        assert admin_max() == (10, base + 20000)
