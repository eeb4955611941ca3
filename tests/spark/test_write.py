"""Writes: ``df.write`` / ``df.writeStream`` ``format("litemq")`` and reading back."""

from __future__ import annotations

import time

from spark_helpers import consume_to_end


def consume_all(bootstrap, topic, partitions):
    """(partition, offset, key, value) as a read_committed consumer sees them (the sink writes
    transactions: markers take offsets)."""
    return [r[:4] for r in consume_to_end(bootstrap, topic, partitions)]


def _read_back(spark, broker, topic):
    return (spark.read.format("litemq").option("kafka.bootstrap.servers", broker.bootstrap_servers)
            .option("subscribe", topic).option("includeHeaders", "true").load())


def test_streaming_write_from_rate_source_read_back_completely(spark, broker, tmp_path):
    topic = broker.create_topic(partitions=3)
    src = (spark.readStream.format("rate").option("rowsPerSecond", "400").load()
           .selectExpr("CAST(value AS STRING) AS key", "CAST(value AS STRING) AS value"))
    q = (src.writeStream.format("litemq").option("kafka.bootstrap.servers", broker.bootstrap_servers)
         .option("topic", topic).option("checkpointLocation", str(tmp_path / "ckpt"))
         .trigger(processingTime="500 milliseconds").start())
    deadline = time.monotonic() + 120
    while (sum(p["numInputRows"] for p in q.recentProgress) < 1000
           or sum(1 for p in q.recentProgress if p["numInputRows"]) < 3):
        assert q.exception() is None, q.exception()
        assert time.monotonic() < deadline
        time.sleep(0.5)
    q.stop()
    committed = sum(p["numInputRows"] for p in q.recentProgress)
    rows = _read_back(spark, broker, topic).collect()
    values = [int(bytes(r.value)) for r in rows]
    assert len(values) == len(set(values)), "duplicates"
    # every row of every completed micro-batch is there, with contiguous rate values
    assert set(range(committed)) <= set(values)
    assert all(bytes(r.key) == bytes(r.value) for r in rows)
    # provenance headers: stable query id, the micro-batch id
    hdrs = [{h.key: bytes(h.value).decode() for h in r.headers} for r in rows]
    assert {h["litemq.spark.query.id"] for h in hdrs} == {q.id}
    batch_ids = {int(h["litemq.spark.batch.id"]) for h in hdrs}
    assert min(batch_ids) <= 1 and len(batch_ids) >= 2


def test_batch_write_with_topic_column_partition_and_headers(spark, broker):
    t1 = broker.create_topic(partitions=2)
    t2 = broker.create_topic(partitions=2)
    df = spark.createDataFrame(
        [(t1 if i % 2 else t2, f"k{i}", f"v{i}".encode(), i % 2, [("h", f"{i}".encode())]) for i in range(200)],
        "topic string, key string, value binary, partition int, headers array<struct<key:string,value:binary>>")
    df.write.format("litemq").mode("append").option("kafka.bootstrap.servers", broker.bootstrap_servers).save()
    got1 = consume_all(broker.bootstrap_servers, t1, 2)
    got2 = consume_all(broker.bootstrap_servers, t2, 2)
    assert len(got1) == 100 and len(got2) == 100
    assert {p for p, *_ in got1} == {1} and {p for p, *_ in got2} == {0}
    rows = _read_back(spark, broker, t1).collect()
    hk = sorted(h.key for h in rows[0].headers)
    assert hk == ["h", "litemq.spark.batch.id", "litemq.spark.query.id"]


def test_topic_option_overrides_topic_column(spark, broker):
    t1 = broker.create_topic(partitions=1)
    df = spark.createDataFrame([("elsewhere", "x")], "topic string, value string")
    df.write.format("litemq").mode("append").option("kafka.bootstrap.servers", broker.bootstrap_servers).option("topic", t1).save()
    assert [v for *_, v in consume_all(broker.bootstrap_servers, t1, 1)] == [b"x"]
