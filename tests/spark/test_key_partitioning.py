"""Every LiteMQ producer puts a key on the partition Kafka's Java client picks (issue 17).

The Java rule is ``Utils.toPositive(Utils.murmur2(keyBytes)) % numPartitions``
(``BuiltInPartitioner.partitionForKey``). A reference murmur2 written here with Java's int
arithmetic is checked against Kafka's own test vectors (``UtilsTest.testMurmur2``); then each
producer LiteMQ ships writes 1,000 keys to a 7-partition topic of a real broker process and a
consumer reads back where every record landed: ``litemq produce -K`` (the real CLI), ``litemq
ingest`` (the real CLI, keys from the log lines' host field), the Spark sink (real Spark
local[2], exactly-once and at-least-once writers), the log pipeline's topic outputs
(:class:`litemq.pipeline.sinks.Sinks`), the REST API (POST to the v3 records endpoint) and
kafka-python's default partitioner. Each must agree with the Java rule on every key, so they all
agree with each other (before the fix the librdkafka-based ones used CRC32, e.g. ``k1`` went to
partition 1 of 3 by the CLI and 2 by REST).
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import uuid

import confluent_kafka as ck
import pandas as pd
import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaProducer
from kafka.partitioner.default import murmur2 as kafka_python_murmur2
from spark_helpers import consume_to_end

from litemq.protocol.partitioner import murmur2, partition_for_key, producer_config
from litemq.testing.process import BrokerProcess
from tests.observability.helpers import get_json, http

N_PARTITIONS = 7
N_KEYS = 1000

# org.apache.kafka.common.utils.UtilsTest.testMurmur2 (the same vectors are quoted by other
# clients' test suites, e.g. KafkaEx's MurmurTest, citing UtilsTest.java).
JAVA_MURMUR2_VECTORS = {
    "21": -973932308,
    "foobar": -790332482,
    "a-little-bit-long-string": -985981536,
    "a-little-bit-longer-string": -1486304829,
    "lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    "abc": 479470107,
}


# ------------------------------------------------------------------ the Java rule, by hand
def _int(x: int) -> int:
    """Java ``int`` (two's complement 32 bit) of ``x``."""
    x &= 0xFFFFFFFF
    return x - (1 << 32) if x & 0x80000000 else x


def _ushr(x: int, n: int) -> int:
    """Java ``x >>> n`` of an int."""
    return (x & 0xFFFFFFFF) >> n


def java_murmur2(data: bytes) -> int:
    """``Utils.murmur2`` transliterated line by line, with Java int overflow."""
    length = len(data)
    seed = _int(0x9747B28C)
    m = 0x5BD1E995
    r = 24
    h = _int(seed ^ length)
    for i in range(length // 4):
        i4 = i * 4
        k = (data[i4 + 0] & 0xFF) + ((data[i4 + 1] & 0xFF) << 8) + ((data[i4 + 2] & 0xFF) << 16) \
            + ((data[i4 + 3] & 0xFF) << 24)
        k = _int(k)
        k = _int(k * m)
        k ^= _ushr(k, r)
        k = _int(k * m)
        h = _int(h * m)
        h ^= k
    tail = length % 4
    if tail >= 3:
        h ^= (data[(length & ~3) + 2] & 0xFF) << 16
    if tail >= 2:
        h ^= (data[(length & ~3) + 1] & 0xFF) << 8
    if tail >= 1:
        h ^= data[length & ~3] & 0xFF
        h = _int(h * m)
    h ^= _ushr(h, 13)
    h = _int(h * m)
    h ^= _ushr(h, 15)
    return _int(h)


def java_partition(key: bytes, num_partitions: int = N_PARTITIONS) -> int:
    """``Utils.toPositive(Utils.murmur2(key)) % numPartitions``."""
    return (java_murmur2(key) & 0x7FFFFFFF) % num_partitions


def _keys() -> list[bytes]:
    """1,000 distinct keys: the Java vectors, ``k1``, ASCII and UTF-8 keys of 1-60 bytes (every
    tail length), none containing ``:`` or whitespace (the CLI's delimiter, a log line's field
    separator)."""
    rnd = random.Random(17)
    alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./é日本ключ"
    keys = ["k1", *JAVA_MURMUR2_VECTORS]
    seen = set(keys)
    while len(keys) < N_KEYS:
        k = "".join(rnd.choice(alphabet) for _ in range(rnd.randint(1, 40)))
        if k not in seen:
            seen.add(k)
            keys.append(k)
    return [k.encode() for k in keys]


KEYS = _keys()
EXPECTED = {k: java_partition(k) for k in KEYS}


def test_reference_murmur2_matches_kafkas_java_vectors_and_every_implementation():
    for text, want in JAVA_MURMUR2_VECTORS.items():
        assert java_murmur2(text.encode()) == want, text
        assert murmur2(text.encode()) == want, text  # LiteMQ's one implementation
    spread = {p: 0 for p in range(N_PARTITIONS)}
    for k in KEYS:
        assert murmur2(k) == java_murmur2(k), k
        assert kafka_python_murmur2(k) == java_murmur2(k) & 0xFFFFFFFF, k  # kafka-python's is unsigned
        assert partition_for_key(k, N_PARTITIONS) == EXPECTED[k], k
        assert (kafka_python_murmur2(k) & 0x7FFFFFFF) % N_PARTITIONS == EXPECTED[k], k  # its DefaultPartitioner
        spread[EXPECTED[k]] += 1
    assert min(spread.values()) > 100, spread  # the keys exercise every partition
    # the base librdkafka config names the Java-compatible partitioner; explicit settings win
    assert producer_config()["partitioner"] == "murmur2_random"
    assert producer_config({"partitioner": "random", "acks": "all"}) == {"partitioner": "random", "acks": "all"}


# ------------------------------------------------------------------ real producers
@pytest.fixture(scope="module")
def kbroker(tmp_path_factory):
    """One ``litemq serve`` process with its HTTP port (REST API) for this module."""
    with BrokerProcess(tmp_path_factory.mktemp("keyparts") / "data", http_port=0) as proc:
        yield proc


def _topic(broker, name: str | None = None) -> str:
    name = name or f"keys-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers, "log_level": 3})
    admin.create_topics([NewTopic(name, N_PARTITIONS, 1)])[name].result(30)
    return name


def _landed(broker, topic: str, want: int = N_KEYS) -> dict[bytes, int]:
    """key -> partition of every record of ``topic``, read back by a consumer (read_committed);
    each key once."""
    recs = consume_to_end(broker.bootstrap_servers, topic, N_PARTITIONS)
    assert len(recs) == want, f"{len(recs)} records read back, {want} written"
    out: dict[bytes, int] = {}
    for p, _off, key, _value, _hdrs in recs:
        assert key is not None and key not in out, key
        out[key] = p
    return out


def _assert_java_rule(landed: dict[bytes, int], who: str) -> None:
    wrong = {k: (p, java_partition(k)) for k, p in landed.items() if p != java_partition(k)}
    assert not wrong, (f"{who}: {len(wrong)} of {len(landed)} keys not on the Java client's partition, "
                       f"e.g. (key: (landed, java)) {dict(list(wrong.items())[:5])}")


def _litemq(*args: str, input: bytes | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "litemq.cli", *args], input=input, capture_output=True,
                          timeout=180)


def test_cli_produce_with_key_delimiter(kbroker):
    topic = _topic(kbroker)
    lines = b"".join(k + b":value-" + str(i).encode() + b"\n" for i, k in enumerate(KEYS))
    r = _litemq("produce", topic, "-K", ":", "-b", kbroker.bootstrap_servers, input=lines)
    assert r.returncode == 0, r.stderr
    landed = _landed(kbroker, topic)
    assert set(landed) == set(KEYS)
    _assert_java_rule(landed, "litemq produce -K")


def test_cli_ingest_keys_log_lines_by_host(kbroker, tmp_path):
    topic = _topic(kbroker)
    log = tmp_path / "messages.log"
    log.write_bytes(b"".join(b"Nov 25 10:%02d:%02d " % (i // 60 % 60, i % 60) + k + b" app[42]: event %d\n" % i
                             for i, k in enumerate(KEYS)))
    r = _litemq("ingest", str(log), "--single-topic", topic, "-q", "-b", kbroker.bootstrap_servers)
    assert r.returncode == 0, r.stderr
    landed = _landed(kbroker, topic)
    assert set(landed) == set(KEYS), "ingest keyed the lines by something else than their host"
    _assert_java_rule(landed, "litemq ingest")


@pytest.mark.parametrize("exactly_once", ["true", "false"])
def test_spark_writer(spark, kbroker, exactly_once):
    topic = _topic(kbroker)
    df = spark.createDataFrame([(k, b"v") for k in KEYS], "key binary, value binary").repartition(2)
    (df.write.format("litemq").mode("append").option("kafka.bootstrap.servers", kbroker.bootstrap_servers)
     .option("topic", topic).option("exactlyOnce", exactly_once).save())
    landed = _landed(kbroker, topic)
    assert set(landed) == set(KEYS)
    _assert_java_rule(landed, f"Spark sink (exactlyOnce={exactly_once})")


def test_pipeline_outputs(kbroker, tmp_path):
    from litemq.pipeline.analysis import OUTPUT_COLUMNS
    from litemq.pipeline.sinks import Sinks

    alerts, metrics = _topic(kbroker), _topic(kbroker)
    ws = pd.Timestamp("2026-01-01T00:00:00Z")
    rows = pd.DataFrame({c: [None] * N_KEYS for c in OUTPUT_COLUMNS})
    rows = rows.assign(kind="alert", source=[k.decode() for k in KEYS], fmt="linux", window_start=ws,
                       window_end=ws + pd.Timedelta(seconds=60), alert_type="error_spike", template_id=7,
                       template="disk <*> failed", level="ERROR", count=3, lines=10, errors=3, alert_value=0.3,
                       alert_baseline=0.01, message="error rate 30%")
    sinks = Sinks(tmp_path / "out", kbroker.bootstrap_servers, metrics_topic=metrics, alerts_topic=alerts,
                  writer_id=uuid.uuid4().hex)
    try:
        assert sinks.write_batch(rows, 0)["alerts"] == N_KEYS
    finally:
        sinks.close()
    landed = _landed(kbroker, alerts)
    assert {k.split(b"|", 1)[0] for k in landed} == set(KEYS)  # keyed source|window|...
    _assert_java_rule(landed, "pipeline outputs (Sinks)")


def test_rest_produce(kbroker):
    topic = _topic(kbroker)
    base = kbroker.http_url
    cid = get_json(f"{base}/v3/clusters")["data"][0]["cluster_id"]
    body = "".join(json.dumps({"key": {"type": "STRING", "data": k.decode()}, "value": {"type": "STRING", "data": "v"}})
                   for k in KEYS)
    status, _, raw = http("POST", f"{base}/v3/clusters/{cid}/topics/{topic}/records", body, timeout_s=120)
    assert status == 200, raw[:500]
    reports = [json.loads(line) for line in raw.decode().splitlines() if line.strip()]
    assert len(reports) == N_KEYS and all(r["error_code"] == 200 for r in reports)
    answered = {k: r["partition_id"] for k, r in zip(KEYS, reports, strict=True)}
    landed = _landed(kbroker, topic)
    assert landed == answered  # the answer names the partition the record is on
    _assert_java_rule(landed, "REST API")


def test_kafka_python_default_partitioner(kbroker):
    topic = _topic(kbroker)
    # acks="all": kafka-python's default acks=1 is answered before the fsync that moves the high
    # watermark (the durable default), and the read-back below stops at the high watermark
    p = KafkaProducer(bootstrap_servers=kbroker.bootstrap_servers, acks="all")
    try:
        for k in KEYS:
            p.send(topic, key=k, value=b"v")
        p.flush(60)
    finally:
        p.close()
    _assert_java_rule(_landed(kbroker, topic), "kafka-python")


def test_librdkafka_default_partitioner_differs_which_is_why_litemq_sets_it(kbroker):
    """librdkafka's own default (consistent_random, CRC32) disagrees with Java on most keys: a
    LiteMQ producer that forgot :func:`producer_config` would be caught by the tests above."""
    topic = _topic(kbroker)
    p = ck.Producer({"bootstrap.servers": kbroker.bootstrap_servers, "log_level": 3})
    for k in KEYS[:100]:
        p.produce(topic, b"v", key=k)
    assert p.flush(60) == 0
    landed = _landed(kbroker, topic, want=100)
    assert sum(p != java_partition(k) for k, p in landed.items()) > 50
