"""Batch reads: ``spark.read.format("litemq")`` equals a plain consumer's read of the range."""

from __future__ import annotations

import json
import time

from spark_helpers import consume_all


def _rows(df):
    return sorted((r.partition, r.offset, bytes(r.key) if r.key is not None else None,
                   bytes(r.value) if r.value is not None else None) for r in df.collect())


def test_batch_read_equals_plain_consumer(spark, broker):
    topic = broker.create_topic(partitions=3)
    broker.produce(topic, 3000)
    df = (spark.read.format("litemq").option("kafka.bootstrap.servers", broker.bootstrap_servers)
          .option("subscribe", topic).load())
    assert df.schema.simpleString() == ("struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,"
                                        "timestamp:timestamp,timestampType:int>")
    got = _rows(df)
    assert got == consume_all(broker.bootstrap_servers, topic, 3)
    assert len(got) == 3000


def test_batch_read_offset_range(spark, broker):
    topic = broker.create_topic(partitions=3)
    broker.produce(topic, 900)
    starting = {topic: {"0": 10, "1": -2, "2": 5}}
    ending = {topic: {"0": 50, "1": 120, "2": -1}}
    df = (spark.read.format("litemq").option("kafka.bootstrap.servers", broker.bootstrap_servers)
          .option("subscribe", topic).option("startingOffsets", json.dumps(starting))
          .option("endingOffsets", json.dumps(ending)).option("minPartitions", "5").load())
    got = _rows(df)
    lo = {0: 10, 1: 0, 2: 5}
    hi = {0: 50, 1: 120, 2: 10**18}
    want = [r for r in consume_all(broker.bootstrap_servers, topic, 3) if lo[r[0]] <= r[1] < hi[r[0]]]
    assert got == want
    assert df.rdd.getNumPartitions() >= 5


def test_batch_read_headers_timestamps_and_starting_timestamp(spark, broker):
    topic = broker.create_topic(partitions=1)
    p = broker.producer()
    base = (int(time.time()) - 3600) * 1000  # recent: old timestamps would fall to time retention
    for i in range(100):
        p.produce(topic, key=None if i % 10 == 0 else f"k{i}".encode(), value=f"v{i}".encode(),
                  timestamp=base + i * 1000, headers=[("n", str(i).encode()), ("empty", None)])
    assert p.flush(30) == 0
    df = (spark.read.format("litemq").option("kafka.bootstrap.servers", broker.bootstrap_servers)
          .option("subscribe", topic).option("includeHeaders", "true")
          .option("startingTimestamp", str(base + 40_000)).option("endingTimestamp", str(base + 60_000)).load())
    assert df.schema["headers"].dataType.simpleString() == "array<struct<key:string,value:binary>>"
    rows = df.orderBy("offset").collect()
    assert [r.offset for r in rows] == list(range(40, 60))
    r = rows[10]  # offset 50
    assert r.key is None and bytes(r.value) == b"v50"
    assert int(r.timestamp.timestamp() * 1000) == base + 50_000 and r.timestampType == 0
    assert [(h.key, None if h.value is None else bytes(h.value)) for h in r.headers] == [("n", b"50"), ("empty", None)]


def test_assign_and_failing_ending_timestamp_strategy(spark, broker):
    topic = broker.create_topic(partitions=3)
    broker.produce(topic, 300)
    df = (spark.read.format("litemq").option("bootstrap.servers", broker.bootstrap_servers)
          .option("assign", json.dumps({topic: [0, 2]})).load())
    assert {r.partition for r in df.select("partition").distinct().collect()} == {0, 2}
    want = [r for r in consume_all(broker.bootstrap_servers, topic, 3) if r[0] != 1]
    assert _rows(df) == want
