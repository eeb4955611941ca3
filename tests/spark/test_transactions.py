"""Kafka transactions in the connector (KIP-98): the sink's exactly-once batch writer against a
real broker process (replay, zombie fencing), and ``kafka.isolation.level`` on reads (aborted
records dropped, nothing past an open transaction with read_committed; everything with
read_uncommitted), checked against real confluent-kafka consumers."""

from __future__ import annotations

import confluent_kafka as ck

from litemq.spark.transactional import (
    MARKER_TOPIC,
    TransactionalBatchWriter,
    marker_group,
    transactional_id,
)
from spark_helpers import consume_to_end


def _sender(topic, values):
    def produce(producer, on_delivery):
        for v in values:
            producer.produce(topic, value=v, partition=0, on_delivery=on_delivery)
        return len(values)
    return produce


def test_batch_writer_replay_is_skipped_and_zombie_is_fenced(broker):
    topic = broker.create_topic(partitions=1)
    client = {"bootstrap.servers": broker.bootstrap_servers}
    w = TransactionalBatchWriter(client, "q-test-1", 3)
    assert w.txn_id == transactional_id("q-test-1", 3) == "litemq-spark-q-test-1-3"
    assert w.group_id == marker_group("q-test-1", 3) == "litemq-spark-sink-q-test-1-3"
    assert w.write(0, _sender(topic, [b"a", b"b"])) == 2
    assert w.write(0, _sender(topic, [b"a", b"b"])) is None  # same instance, replayed batch
    w.close()
    # a restarted task (new writer, same ids) skips batch 0 and writes batch 1
    w2 = TransactionalBatchWriter(client, "q-test-1", 3)
    assert w2.write(0, _sender(topic, [b"a", b"b"])) is None
    assert w2.committed_batches() == 1
    w2.close()
    # a zombie: an earlier attempt of batch 1 that produced but never finished its transaction
    zombie = ck.Producer({"bootstrap.servers": broker.bootstrap_servers, "transactional.id": w2.txn_id,
                          "log_level": 0})
    zombie.init_transactions(30)
    zombie.begin_transaction()
    zombie.produce(topic, value=b"zombie", partition=0)
    assert zombie.flush(30) == 0
    # read_committed does not get past the open transaction
    assert [r[3] for r in consume_to_end(broker.bootstrap_servers, topic, 1)] == [b"a", b"b"]
    w3 = TransactionalBatchWriter(client, "q-test-1", 3)  # the restarted attempt
    assert w3.write(1, _sender(topic, [b"c"])) == 1  # fences the zombie, whose transaction is aborted
    w3.close()
    try:
        zombie.commit_transaction(30)
        raise AssertionError("the fenced zombie committed")
    except ck.KafkaException as exc:
        assert exc.args[0].fatal() or exc.args[0].code() == ck.KafkaError._FENCED, exc
    committed = consume_to_end(broker.bootstrap_servers, topic, 1)
    assert [r[3] for r in committed] == [b"a", b"b", b"c"]
    uncommitted = consume_to_end(broker.bootstrap_servers, topic, 1, isolation="read_uncommitted")
    assert [r[3] for r in uncommitted] == [b"a", b"b", b"zombie", b"c"]
    # the marker: group offset batch + 1 on the marker topic, read back by a plain consumer
    c = ck.Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": w2.group_id,
                     "isolation.level": "read_committed", "log_level": 3})
    assert c.committed([ck.TopicPartition(MARKER_TOPIC, 0)], timeout=30)[0].offset == 2
    c.close()


def _transactional_topic(broker):
    """One partition: plain 0..9, committed txn 10..14, aborted txn 15..19, plain 20..24, then
    an open transaction 25..29 and plain 30..34 after it (offsets differ: markers take some).
    Returns (topic, open producer)."""
    topic = broker.create_topic(partitions=1)
    bs = broker.bootstrap_servers
    broker.produce(topic, 10, partition=0)
    p = ck.Producer({"bootstrap.servers": bs, "transactional.id": f"tx-{topic}", "log_level": 3})
    p.init_transactions(30)
    for lo, commit in ((10, True), (15, False)):
        p.begin_transaction()
        for i in range(lo, lo + 5):
            p.produce(topic, key=f"k{i}".encode(), value=f"v{i}".encode(), partition=0)
        p.flush(30)
        (p.commit_transaction if commit else p.abort_transaction)(30)
    broker.produce(topic, 5, start=20, partition=0)
    p.begin_transaction()
    for i in range(25, 30):
        p.produce(topic, key=f"k{i}".encode(), value=f"v{i}".encode(), partition=0)
    assert p.flush(30) == 0
    broker.produce(topic, 5, start=30, partition=0)
    return topic, p


def _values(df):
    return [bytes(r.value).decode() for r in df.orderBy("offset").collect()]


def _read(spark, broker, topic, level=None):
    r = (spark.read.format("litemq").option("kafka.bootstrap.servers", broker.bootstrap_servers)
         .option("subscribe", topic))
    if level:
        r = r.option("kafka.isolation.level", level)
    return r.load()


def test_isolation_level_on_batch_and_streaming_reads(spark, broker, tmp_path):
    topic, open_txn = _transactional_topic(broker)
    want_committed = [f"v{i}" for i in list(range(15)) + list(range(20, 25))]
    want_all = [f"v{i}" for i in range(35)]
    # the oracle: confluent-kafka consumers
    assert [r[3].decode() for r in consume_to_end(broker.bootstrap_servers, topic, 1)] == want_committed
    assert [r[3].decode() for r in consume_to_end(broker.bootstrap_servers, topic, 1,
                                                  isolation="read_uncommitted")] == want_all
    # batch reads, fast path (LiteMQ's Fetch codec)
    assert _values(_read(spark, broker, topic, "read_committed")) == want_committed
    assert _values(_read(spark, broker, topic)) == want_all  # default: read_uncommitted, like Spark
    assert _values(_read(spark, broker, topic, "read_uncommitted")) == want_all
    # the confluent-kafka fallback path (a setting the fast path does not handle)
    fb = (spark.read.format("litemq").option("kafka.bootstrap.servers", broker.bootstrap_servers)
          .option("subscribe", topic).option("kafka.isolation.level", "read_committed")
          .option("kafka.socket.keepalive.enable", "true").load())
    assert _values(fb) == want_committed
    # streaming, AvailableNow: stops at the last stable offset, then continues after the commit
    out = tmp_path / "out"

    def run_stream():
        df = (spark.readStream.format("litemq").option("kafka.bootstrap.servers", broker.bootstrap_servers)
              .option("subscribe", topic).option("startingOffsets", "earliest")
              .option("kafka.isolation.level", "read_committed").load())
        q = (df.selectExpr("CAST(value AS STRING) AS v", "offset").writeStream.format("parquet")
             .option("path", str(out)).option("checkpointLocation", str(tmp_path / "ckpt"))
             .trigger(availableNow=True).start())
        q.awaitTermination(180)
        assert q.exception() is None, q.exception()
        return [r.v for r in spark.read.parquet(str(out)).orderBy("offset").collect()]

    assert run_stream() == want_committed
    open_txn.commit_transaction(30)
    assert run_stream() == want_committed + [f"v{i}" for i in range(25, 35)]
