"""Real Kafka clients against a real ``litemq serve`` process (issue 2, "Must show").

Each of confluent-kafka (librdkafka 2.x), kafka-python 3.x (default settings: idempotent),
aiokafka 0.14 and kcat creates a 3-partition topic, produces 20,000 keyed records with
acks=all under every compression codec, and reads them all back.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import time
import uuid

import pytest

from tests.integration.clientcheck import (BASE_TS_MS, N_RECORDS, Got, check, headers_of, key_of,
                                           value_of)

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
READ_TIMEOUT_S = 60


def _topic(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _create_topic(bootstrap: str, name: str, partitions: int = 3) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    # The records carry 2023 timestamps (BASE_TS_MS): without retention.ms=-1 the shared
    # broker's retention pass (every 5 min) may delete them in the middle of a slow read.
    admin.create_topics([NewTopic(name, partitions, 1, config={"retention.ms": "-1"})])[name].result(timeout=30)


# ------------------------------------------------------------------ confluent-kafka
def _ck_consume(bootstrap: str, topic: str, n: int) -> list[Got]:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "check-" + topic, "enable.auto.commit": False,
                  "isolation.level": "read_committed"})
    c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(3)])
    got: list[Got] = []
    deadline = time.monotonic() + READ_TIMEOUT_S
    while len(got) < n and time.monotonic() < deadline:
        for m in c.consume(min(1000, n - len(got)), 0.5):  # returns once the last one came
            assert m.error() is None, m.error()
            got.append(Got(m.partition(), m.offset(), m.key(), m.value(), list(m.headers() or []), m.timestamp()[1]))
    c.close()
    return got


@pytest.mark.parametrize("codec", CODECS)
def test_confluent_kafka(shared_broker, codec):
    from confluent_kafka import Producer

    bs = shared_broker.bootstrap_servers
    topic = _topic("ck-" + codec)
    _create_topic(bs, topic)
    errors = []
    p = Producer({"bootstrap.servers": bs, "acks": "all", "enable.idempotence": True,
                  "compression.type": codec, "linger.ms": 5})
    for i in range(N_RECORDS):
        while True:
            try:
                p.produce(topic, key=key_of(i), value=value_of(i), headers=headers_of(i, "ck"),
                          timestamp=BASE_TS_MS + i,
                          on_delivery=lambda err, msg: err and errors.append(err))
                break
            except BufferError:
                p.poll(0.05)
    assert p.flush(60) == 0
    assert not errors, errors[:3]
    check(_ck_consume(bs, topic, N_RECORDS), N_RECORDS, "ck")


# ------------------------------------------------------------------ kafka-python
@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python(shared_broker, codec):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    bs = shared_broker.bootstrap_servers
    topic = _topic("kp-" + codec)
    _create_topic(bs, topic)
    producer = KafkaProducer(bootstrap_servers=bs, acks="all",
                             compression_type=None if codec == "none" else codec, linger_ms=5)
    futures = [producer.send(topic, key=key_of(i), value=value_of(i), headers=headers_of(i, "kp"),
                             timestamp_ms=BASE_TS_MS + i) for i in range(N_RECORDS)]
    producer.flush(60)
    for f in futures:
        f.get(timeout=30)
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=bs, enable_auto_commit=False, auto_offset_reset="earliest")
    consumer.assign([TopicPartition(topic, p) for p in range(3)])
    consumer.seek_to_beginning()
    got: list[Got] = []
    deadline = time.monotonic() + READ_TIMEOUT_S
    while len(got) < N_RECORDS and time.monotonic() < deadline:
        for _tp, msgs in consumer.poll(timeout_ms=500, max_records=5000).items():
            got += [Got(m.partition, m.offset, m.key, m.value, list(m.headers), m.timestamp) for m in msgs]
    consumer.close()
    check(got, N_RECORDS, "kp")


# ------------------------------------------------------------------ aiokafka
@pytest.mark.parametrize("codec", CODECS)
def test_aiokafka(shared_broker, codec):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    bs = shared_broker.bootstrap_servers
    topic = _topic("ak-" + codec)
    _create_topic(bs, topic)

    async def run() -> list[Got]:
        producer = AIOKafkaProducer(bootstrap_servers=bs, acks="all", enable_idempotence=True,
                                    compression_type=None if codec == "none" else codec, linger_ms=5)
        await producer.start()
        try:
            futs = [await producer.send(topic, key=key_of(i), value=value_of(i), headers=headers_of(i, "ak"),
                                        timestamp_ms=BASE_TS_MS + i) for i in range(N_RECORDS)]
            await asyncio.gather(*futs)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(bootstrap_servers=bs, enable_auto_commit=False, auto_offset_reset="earliest")
        await consumer.start()
        got: list[Got] = []
        try:
            consumer.assign([TopicPartition(topic, p) for p in range(3)])
            await consumer.seek_to_beginning()
            deadline = time.monotonic() + READ_TIMEOUT_S
            while len(got) < N_RECORDS and time.monotonic() < deadline:
                batches = await consumer.getmany(timeout_ms=500, max_records=5000)
                for _tp, msgs in batches.items():
                    got += [Got(m.partition, m.offset, m.key, m.value, list(m.headers), m.timestamp) for m in msgs]
        finally:
            await consumer.stop()
        return got

    check(asyncio.run(run()), N_RECORDS, "ak")


# ------------------------------------------------------------------ kcat (Debian's, librdkafka 2.0)
KCAT = shutil.which("kcat")


@pytest.mark.skipif(KCAT is None, reason="kcat is not installed (CI installs it with apt-get)")
@pytest.mark.parametrize("codec", CODECS)
def test_kcat(shared_broker, codec, tmp_path):
    bs = shared_broker.bootstrap_servers
    topic = _topic("kc-" + codec)
    _create_topic(bs, topic)
    # kcat reads "key<TAB>value" lines; headers with -H apply to every record, so the index
    # is carried in the value here and null keys/values are covered by the other clients.
    n = 5000
    lines = b"".join(b"k%d\tval-%d\n" % (i % 97, i) for i in range(n))
    subprocess.run([KCAT, "-P", "-b", bs, "-t", topic, "-K", "\t", "-z", codec, "-X", "acks=all",
                    "-H", "src=kcat"], input=lines, check=True, timeout=120)
    out = subprocess.run([KCAT, "-C", "-b", bs, "-t", topic, "-o", "beginning", "-e", "-q",
                          "-f", "%p\t%o\t%k\t%s\t%h\n"], capture_output=True, check=True, timeout=120).stdout
    rows = [line.split(b"\t") for line in out.splitlines()]
    assert len(rows) == n
    seen = set()
    key_partition = {}
    last_offset = {}
    for part, off, key, val, hdrs in rows:
        i = int(val.split(b"-")[1])
        assert i not in seen
        seen.add(i)
        assert key == b"k%d" % (i % 97)
        assert hdrs == b"src=kcat"
        assert key_partition.setdefault(key, part) == part
        assert int(off) > last_offset.get(part, -1)
        last_offset[part] = int(off)
    assert seen == set(range(n))


# ------------------------------------------------------------------ admin describe/delete
def test_admin_describe_alter_delete(shared_broker):
    from confluent_kafka.admin import AdminClient, ConfigResource, NewPartitions

    bs = shared_broker.bootstrap_servers
    topic = _topic("admin")
    _create_topic(bs, topic)
    admin = AdminClient({"bootstrap.servers": bs})
    md = admin.list_topics(timeout=10)
    assert len(md.topics[topic].partitions) == 3
    res = ConfigResource("topic", topic, set_config={"retention.ms": "3600000"})
    admin.alter_configs([res])[res].result(timeout=10)
    configs = admin.describe_configs([ConfigResource("topic", topic)])
    described = list(configs.values())[0].result(timeout=10)
    assert described["retention.ms"].value == "3600000"
    assert described["cleanup.policy"].value == "delete"
    admin.create_partitions([NewPartitions(topic, 5)])[topic].result(timeout=10)
    assert len(admin.list_topics(timeout=10).topics[topic].partitions) == 5
    cluster = admin.describe_cluster().result(timeout=10) if hasattr(admin, "describe_cluster") else None
    if cluster is not None:
        assert len(cluster.nodes) == 1
    # DeleteRecords moves the log start offset; reads below it are out of range
    from confluent_kafka import Consumer, Producer, TopicPartition

    p = Producer({"bootstrap.servers": bs})
    for i in range(10):
        p.produce(topic, b"r%d" % i, partition=0)
    assert p.flush(10) == 0
    fut = admin.delete_records([TopicPartition(topic, 0, 4)])
    deleted = list(fut.values())[0].result(timeout=10)
    assert deleted.low_watermark == 4
    c = Consumer({"bootstrap.servers": bs, "group.id": "dr", "enable.auto.commit": False})
    assert c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10, cached=False) == (4, 10)
    c.close()
    admin.delete_topics([topic])[topic].result(timeout=10)
    assert topic not in admin.list_topics(timeout=10).topics


def test_embedded_broker_roundtrip(tmp_path):
    """The same produce/consume check through ``litemq.Broker()`` embedded in this process."""
    import litemq
    from confluent_kafka import Producer

    with litemq.Broker(data_dir=tmp_path / "emb") as broker:
        bs = broker.bootstrap_servers
        _create_topic(bs, "emb")
        p = Producer({"bootstrap.servers": bs, "acks": "all", "enable.idempotence": True, "linger.ms": 5})
        for i in range(N_RECORDS):
            while True:
                try:
                    p.produce("emb", key=key_of(i), value=value_of(i), headers=headers_of(i, "emb"),
                              timestamp=BASE_TS_MS + i)
                    break
                except BufferError:
                    p.poll(0.05)
        assert p.flush(60) == 0
        check(_ck_consume(bs, "emb", N_RECORDS), N_RECORDS, "emb")
