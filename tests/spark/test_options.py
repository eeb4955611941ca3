"""Option compatibility with Spark's Kafka source and sink.

DOCUMENTED_* below are copied from the Spark "Structured Streaming + Kafka Integration Guide"
(source options table, sink options table, "Kafka Specific Configurations"). The same job
text written for ``format("kafka")`` runs against LiteMQ with only the format name changed.
"""

from __future__ import annotations

import pytest

from litemq.spark.offsets import rate_limit
from litemq.spark.options import (
    EXTRA_OPTIONS,
    SINK_OPTIONS,
    SOURCE_OPTIONS,
    OptionError,
    parse_duration_ms,
    parse_source_options,
)
from litemq.spark.reader import split_ranges

DOCUMENTED_SOURCE_OPTIONS = {
    # required (one of the first three) + bootstrap servers
    "assign": '{"topicA":[0,1],"topicB":[2,4]}',
    "subscribe": "topicA,topicB",
    "subscribePattern": "topic.*",
    "kafka.bootstrap.servers": "host1:9092,host2:9092",
    # optional
    "startingTimestamp": "1000",
    "startingOffsetsByTimestamp": '{"topicA":{"0": 1000, "1": 1000}, "topicB": {"0": 2000, "1": 2000}}',
    "startingOffsets": '{"topicA":{"0":23,"1":-1},"topicB":{"0":-2}}',
    "endingTimestamp": "2000",
    "endingOffsetsByTimestamp": '{"topicA":{"0": 1000, "1": 1000}, "topicB": {"0": 2000, "1": 2000}}',
    "endingOffsets": '{"topicA":{"0":23,"1":-1},"topicB":{"0":-1}}',
    "failOnDataLoss": "false",
    "kafkaConsumer.pollTimeoutMs": "120000",
    "fetchOffset.numRetries": "3",
    "fetchOffset.retryIntervalMs": "10",
    "maxOffsetsPerTrigger": "1000",
    "minOffsetsPerTrigger": "10",
    "maxTriggerDelay": "15m",
    "minPartitions": "4",
    "groupIdPrefix": "spark-kafka-source",
    "kafka.group.id": "my-group",
    "includeHeaders": "true",
    "startingOffsetsByTimestampStrategy": "latest",
}
BATCH_ONLY = {"endingTimestamp", "endingOffsetsByTimestamp", "endingOffsets"}
STREAM_ONLY = {"maxOffsetsPerTrigger", "minOffsetsPerTrigger", "maxTriggerDelay"}
DOCUMENTED_SINK_OPTIONS = {"kafka.bootstrap.servers", "topic", "includeHeaders"}
REFUSED_KAFKA_PARAMS = {"auto.offset.reset", "key.deserializer", "value.deserializer",
                        "enable.auto.commit", "interceptor.classes"}


def _lower(d):
    return {k.lower(): v for k, v in d.items()}


def test_option_lists_match_the_documentation():
    assert set(SOURCE_OPTIONS) - {"maxRecordsPerPartition"} == set(DOCUMENTED_SOURCE_OPTIONS)
    assert set(SINK_OPTIONS) == DOCUMENTED_SINK_OPTIONS
    assert EXTRA_OPTIONS == ("bootstrap.servers", "exactlyOnce", "value.format", "schema.registry.url",
                             "schema.registry.basic.auth.user.info", "schema.registry.bearer.auth.token",
                             "schema.registry.ssl.ca.location", "value.subject", "value.schema.version",
                             "value.decode.mode")


def test_avro_value_options():
    from litemq.spark.options import OptionError, avro_value_options

    base = {"subscribe": "orders", "value.format": "avro", "schema.registry.url": "http://127.0.0.1:8082"}
    assert avro_value_options({"subscribe": "orders"}) is None
    got = avro_value_options(base)
    assert (got.subject, got.version, got.permissive, got.user_info) == ("orders-value", "latest", False, None)
    got = avro_value_options({**base, "value.subject": "s", "value.schema.version": "3",
                              "value.decode.mode": "permissive", "schema.registry.basic.auth.user.info": "u:p"})
    assert (got.subject, got.version, got.permissive, got.user_info) == ("s", "3", True, "u:p")
    for bad, why in (({"value.format": "protobuf"}, "binary or avro"), ({"schema.registry.url": ""}, "needed"),
                     ({"subscribe": "a,b"}, "value.subject"), ({"value.schema.version": "newest"}, "version"),
                     ({"value.decode.mode": "LOUD"}, "FAILFAST")):
        with pytest.raises(OptionError, match=why):
            avro_value_options({**base, **bad})


def test_isolation_level_option():
    base = {"kafka.bootstrap.servers": "h:1", "subscribe": "t"}
    so = parse_source_options(_lower(base), streaming=True)
    # explicit, since librdkafka's own default would be read_committed
    assert not so.read_committed and so.client["isolation.level"] == "read_uncommitted"
    so = parse_source_options(_lower({**base, "kafka.isolation.level": "READ_COMMITTED"}), streaming=False)
    assert so.read_committed and so.client["isolation.level"] == "read_committed"
    with pytest.raises(OptionError, match="kafka.isolation.level"):
        parse_source_options(_lower({**base, "kafka.isolation.level": "committed"}), streaming=True)


@pytest.mark.parametrize("sub", ["assign", "subscribe", "subscribePattern"])
@pytest.mark.parametrize("streaming", [False, True])
def test_every_documented_option_is_accepted(sub, streaming):
    opts = {k: v for k, v in DOCUMENTED_SOURCE_OPTIONS.items()
            if k not in {"assign", "subscribe", "subscribePattern"} - {sub}}
    opts = {k: v for k, v in opts.items() if k not in (BATCH_ONLY if streaming else STREAM_ONLY)}
    if not streaming:
        opts["startingOffsets"] = '{"topicA":{"0":23,"1":-2},"topicB":{"0":-2}}'
    so = parse_source_options(_lower(opts), streaming=streaming)
    assert so.client["bootstrap.servers"] == "host1:9092,host2:9092"
    assert so.client["group.id"] == "my-group"
    assert so.fail_on_data_loss is False and so.include_headers is True
    assert so.starting_ts == 1000 and so.starting_ts_strategy == "latest"
    assert so.min_partitions == 4 and so.poll_timeout_ms == 120000
    if streaming:
        assert so.max_offsets_per_trigger == 1000 and so.min_offsets_per_trigger == 10
        assert so.max_trigger_delay_ms == 15 * 60_000
    else:
        assert so.ending_ts == 2000


def test_defaults_and_precedence():
    base = {"kafka.bootstrap.servers": "h:1", "subscribe": "t"}
    assert parse_source_options(_lower(base), streaming=True).starting == "latest"
    assert parse_source_options(_lower(base), streaming=False).starting == "earliest"
    assert parse_source_options(_lower(base), streaming=False).ending == "latest"
    plain = parse_source_options({"bootstrap.servers": "h:2", "subscribe": "t"}, streaming=True)
    assert plain.client == {"bootstrap.servers": "h:2", "isolation.level": "read_uncommitted"}
    so = parse_source_options(_lower({**base, "startingOffsetsByTimestamp": '{"t":{"0":5}}'}), streaming=True)
    assert so.starting_ts == {"t": {0: 5}}


@pytest.mark.parametrize("opts, streaming, message", [
    ({"subscribe": "t", "assign": '{"t":[0]}'}, True, "exactly one of"),
    ({}, True, "exactly one of"),
    ({"subscribe": "t", "startingOffsets": "latest"}, False, "latest is not allowed"),
    ({"subscribe": "t", "startingOffsets": '{"t":{"0":-1}}'}, False, "-1 (latest) is not allowed"),
    ({"subscribe": "t", "endingOffsets": "earliest"}, False, "earliest is not allowed"),
    ({"subscribe": "t", "endingOffsets": '{"t":{"0":-2}}'}, False, "-2 (earliest) is not allowed"),
    ({"subscribe": "t", "endingOffsets": "latest"}, True, "not allowed for streaming"),
    ({"subscribe": "t", "maxOffsetsPerTrigger": "0"}, True, "maxOffsetsPerTrigger must be >= 1"),
    ({"subscribe": "t", "failOnDataLoss": "maybe"}, True, "true or false"),
    ({"subscribe": "t", "maxTriggerDelay": "soon"}, True, "duration"),
    ({"subscribePattern": "("}, True, "regular expression"),
    ({"subscribe": "t", "kafka.bootstrap.servers": None}, True, "kafka.bootstrap.servers is required"),
])
def test_invalid_options_are_refused(opts, streaming, message):
    full = {"kafka.bootstrap.servers": "h:1", **opts}
    full = {k: v for k, v in full.items() if v is not None}
    with pytest.raises(OptionError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_source_options(_lower(full), streaming=streaming)


@pytest.mark.parametrize("param", sorted(REFUSED_KAFKA_PARAMS))
def test_kafka_params_spark_refuses_are_refused(param):
    with pytest.raises(OptionError, match=f"kafka.{param}"):
        parse_source_options({"kafka.bootstrap.servers": "h:1", "subscribe": "t", f"kafka.{param}": "x"},
                             streaming=True)


def test_durations():
    assert parse_duration_ms("15m") == 900_000
    assert parse_duration_ms("30s") == 30_000
    assert parse_duration_ms("250") == 250
    assert parse_duration_ms("1h") == 3_600_000


def test_rate_limit_never_exceeds_and_splits_proportionally():
    start = {("t", 0): 0, ("t", 1): 0, ("t", 2): 100}
    latest = {("t", 0): 1000, ("t", 1): 10, ("t", 2): 100}
    end = rate_limit(start, latest, 101)
    assert sum(end[tp] - start[tp] for tp in end) == 101
    assert end[("t", 2)] == 100 and end[("t", 1)] <= 10 and end[("t", 0)] > 90
    assert rate_limit(start, latest, 10**6) == latest
    # tiny budget: never more than the budget (Spark may round small shares up)
    end = rate_limit({("t", p): 0 for p in range(3)}, {("t", p): 5 for p in range(3)}, 2)
    assert sum(end.values()) == 2


def test_split_ranges():
    r = split_ranges([("t", 0, 0, 100), ("t", 1, 0, 10)], min_partitions=None, max_records=30)
    assert r == [("t", 0, 0, 25), ("t", 0, 25, 50), ("t", 0, 50, 75), ("t", 0, 75, 100), ("t", 1, 0, 10)]
    r = split_ranges([("t", 0, 0, 100), ("t", 1, 0, 10)], min_partitions=5, max_records=None)
    assert len(r) >= 5 and sum(e - s for _, _, s, e in r) == 110


def kafka_job(spark, fmt: str, bootstrap: str, topic: str):
    """A batch job written for Spark's Kafka source; only ``fmt`` changes between Kafka and LiteMQ."""
    return (spark.read.format(fmt)
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", topic)
            .option("startingOffsets", "earliest")
            .option("endingOffsets", "latest")
            .option("failOnDataLoss", "true")
            .option("includeHeaders", "true")
            .option("groupIdPrefix", "etl")
            .option("kafka.max.poll.records", "500")         # Java consumer setting: ignored
            .option("kafka.fetch.max.bytes", "52428800")
            .option("kafkaConsumer.pollTimeoutMs", "60000")
            .option("fetchOffset.numRetries", "5")
            .load()
            .selectExpr("CAST(key AS STRING) AS k", "CAST(value AS STRING) AS v", "topic", "partition",
                        "offset", "timestamp", "timestampType", "headers"))


def test_kafka_job_text_runs_unchanged(spark, broker):
    topic = broker.create_topic(partitions=2)
    broker.produce(topic, 100, headers=[("source", b"test")])
    rows = kafka_job(spark, "litemq", broker.bootstrap_servers, topic).collect()
    assert len(rows) == 100
    assert {r.v for r in rows} == {f"v{i}" for i in range(100)}
    assert all(r.headers[0].key == "source" and bytes(r.headers[0].value) == b"test" for r in rows)
    assert all(r.timestampType == 0 and r.topic == topic for r in rows)


def test_sink_column_types_are_checked_when_the_write_is_planned():
    """Spark's Kafka sink refuses a value or key that is not string/binary and a topic that is
    not a string before any task runs (an int value failed inside a task with 'a bytes-like
    object is required'); with value.format=avro the value may be any type Avro encodes."""
    from pyspark.sql.types import BinaryType, IntegerType, StringType, StructField, StructType

    from litemq.spark.writer import _check_column_types

    def schema(**cols):
        return StructType([StructField(n, t) for n, t in cols.items()])

    _check_column_types(schema(key=StringType(), value=BinaryType(), topic=StringType()), avro_value=False)
    _check_column_types(schema(value=StructType([StructField("a", IntegerType())])), avro_value=True)
    for cols, message in (({"value": IntegerType()}, "value attribute type must be a string or binary, not int"),
                          ({"value": StringType(), "key": IntegerType()},
                           "key attribute type must be a string or binary, not int"),
                          ({"value": StringType(), "topic": BinaryType()},
                           "topic attribute type must be a string, not binary")):
        with pytest.raises(OptionError, match=message):
            _check_column_types(schema(**cols), avro_value=False)
