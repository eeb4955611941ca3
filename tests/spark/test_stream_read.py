"""Streaming reads: offsets, admission control, AvailableNow, new partitions and topics."""

from __future__ import annotations

import json

from spark_helpers import consume_all


def _stream(spark, broker, **opts):
    r = spark.readStream.format("litemq").option("kafka.bootstrap.servers", broker.bootstrap_servers)
    for k, v in opts.items():
        r = r.option(k, v)
    return r.load()


def _parquet_rows(spark, path):
    return sorted((r.partition, r.offset, bytes(r.key), bytes(r.value))
                  for r in spark.read.parquet(path).select("partition", "offset", "key", "value").collect())


def test_available_now_max_offsets_per_trigger(spark, broker, tmp_path):
    topic = broker.create_topic(partitions=3)
    broker.produce(topic, 1000)
    df = _stream(spark, broker, subscribe=topic, startingOffsets="earliest", maxOffsetsPerTrigger="300")
    out, ckpt = str(tmp_path / "out"), str(tmp_path / "ckpt")
    q = (df.writeStream.format("parquet").option("path", out).option("checkpointLocation", ckpt)
         .trigger(availableNow=True).start())
    assert q.awaitTermination(240), "AvailableNow query did not stop"
    sizes = [p["numInputRows"] for p in q.recentProgress if p["numInputRows"]]
    assert sum(sizes) == 1000
    assert max(sizes) <= 300 and len(sizes) >= 4, sizes
    assert _parquet_rows(spark, out) == consume_all(broker.bootstrap_servers, topic, 3)
    # offsets in the checkpoint are Spark-Kafka shaped JSON
    last = json.loads(q.lastProgress["sources"][0]["endOffset"]) if isinstance(
        q.lastProgress["sources"][0]["endOffset"], str) else q.lastProgress["sources"][0]["endOffset"]
    assert set(last) == {topic} and sum(last[topic].values()) == 1000

    # more data, same checkpoint: only the new records, exactly once
    broker.produce(topic, 200, start=1000)
    q = (df.writeStream.format("parquet").option("path", out).option("checkpointLocation", ckpt)
         .trigger(availableNow=True).start())
    assert q.awaitTermination(240)
    assert _parquet_rows(spark, out) == consume_all(broker.bootstrap_servers, topic, 3)
