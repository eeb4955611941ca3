"""Batch reads: ``spark.read.format("litemq")`` equals a plain consumer's read of the range."""

from __future__ import annotations

import json

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
