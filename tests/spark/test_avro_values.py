"""``value.format=avro``: the source decodes values written by confluent-kafka's AvroSerializer
into a struct column typed from the registered schema (a LiteMQ broker's schema registry), reads
older versions' records with the reader schema (defaults filled in), and fails or nulls values it
cannot read, batch and streaming."""

from __future__ import annotations

import datetime
import decimal
import json
import time

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from litemq.testing.process import BrokerProcess

V1 = {"type": "record", "name": "Order", "namespace": "shop", "fields": [
    {"name": "id", "type": "long"}, {"name": "item", "type": "string"},
    {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}},
    {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "tags", "type": {"type": "array", "items": "string"}},
    {"name": "attrs", "type": {"type": "map", "values": "int"}},
    {"name": "status", "type": {"type": "enum", "name": "Status", "symbols": ["NEW", "PAID"]}},
    {"name": "note", "type": ["null", "string"], "default": None}]}
V2 = {**V1, "fields": [*V1["fields"], {"name": "channel", "type": "string", "default": "web"}]}
AT = datetime.datetime(2026, 11, 1, 12, 0, tzinfo=datetime.timezone.utc)


@pytest.fixture(scope="module")
def registry_broker(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("avro") / "data", http_port=0) as b:
        yield b


def _produce(broker, topic: str, schema: dict, rows: list[dict], raw: list[bytes] = ()) -> None:
    registry = SchemaRegistryClient({"url": broker.http_url})
    serialize = AvroSerializer(registry, json.dumps(schema))
    p = Producer({"bootstrap.servers": broker.bootstrap_servers})
    for row in rows:
        p.produce(topic, serialize(row, SerializationContext(topic, MessageField.VALUE)), partition=0)
    for value in raw:
        p.produce(topic, value, partition=0)
    assert p.flush(30) == 0


def _order(i: int, **extra) -> dict:
    return {"id": i, "item": f"item-{i}", "price": decimal.Decimal(f"{i}.50"), "at": AT, "tags": ["a", str(i)],
            "attrs": {"n": i}, "status": "PAID" if i % 2 else "NEW", "note": None if i % 2 else f"n{i}", **extra}


def _topic(broker, name: str) -> str:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})  # referenced until the result is in
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(30)
    return name


def _reader(spark, broker, topic: str, **options):
    r = (spark.read.format("litemq").option("kafka.bootstrap.servers", broker.bootstrap_servers)
         .option("subscribe", topic).option("value.format", "avro").option("schema.registry.url", broker.http_url))
    for k, v in options.items():
        r = r.option(k.replace("_", "."), v)
    return r.load()


def test_batch_read_decodes_values_with_the_latest_schema(spark, registry_broker):
    b = registry_broker
    topic = _topic(b, "orders-avro")
    _produce(b, topic, V1, [_order(i) for i in range(3)])
    _produce(b, topic, V2, [_order(3, channel="app")])  # a compatible new version (BACKWARD)
    df = _reader(spark, b, topic)
    assert df.schema["value"].dataType.simpleString() == (
        "struct<id:bigint,item:string,price:decimal(9,2),at:timestamp,tags:array<string>,attrs:map<string,int>,"
        "status:string,note:string,channel:string>")
    rows = df.select("offset", "value.*").orderBy("offset").collect()
    assert [(r.id, r.item, r.price, r.status, r.note, r.channel, r.tags, r.attrs) for r in rows] == [
        (0, "item-0", decimal.Decimal("0.50"), "NEW", "n0", "web", ["a", "0"], {"n": 0}),  # v1 data: default
        (1, "item-1", decimal.Decimal("1.50"), "PAID", None, "web", ["a", "1"], {"n": 1}),
        (2, "item-2", decimal.Decimal("2.50"), "NEW", "n2", "web", ["a", "2"], {"n": 2}),
        (3, "item-3", decimal.Decimal("3.50"), "PAID", None, "app", ["a", "3"], {"n": 3})]
    assert rows[0].at.replace(tzinfo=None) == AT.astimezone().replace(tzinfo=None)  # Spark shows local time
    pinned = _reader(spark, b, topic, value_schema_version="1")  # the v1 reader: channel is not a column
    assert "channel" not in pinned.schema["value"].dataType.fieldNames()
    assert pinned.select("value.item").count() == 4


def test_bad_values_fail_the_query_or_are_null_and_streaming_decodes(spark, registry_broker, tmp_path):
    b = registry_broker
    topic = _topic(b, "orders-mixed")
    _produce(b, topic, V1, [_order(0)], raw=[b"not avro", b"\0\0\0\0\x63xx"])  # no magic byte; unknown id 99
    with pytest.raises(Exception, match="cannot be decoded"):
        _reader(spark, b, topic).collect()
    lenient = _reader(spark, b, topic, value_decode_mode="PERMISSIVE").select("offset", "value.item")
    assert [(r.offset, r.item) for r in lenient.orderBy("offset").collect()] == [(0, "item-0"), (1, None), (2, None)]
    with pytest.raises(Exception, match="value.subject"):
        (spark.read.format("litemq").option("kafka.bootstrap.servers", b.bootstrap_servers)
         .option("subscribePattern", "orders-.*").option("value.format", "avro")
         .option("schema.registry.url", b.http_url).load())

    stream_topic = _topic(b, "orders-stream")
    _produce(b, stream_topic, V1, [_order(i) for i in range(5)])
    q = (spark.readStream.format("litemq").option("kafka.bootstrap.servers", b.bootstrap_servers)
         .option("subscribe", stream_topic).option("startingOffsets", "earliest").option("value.format", "avro")
         .option("schema.registry.url", b.http_url).load()
         .select("value.id", "value.item").writeStream.format("memory").queryName("avro_orders")
         .option("checkpointLocation", str(tmp_path / "ckpt")).start())
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and spark.sql("select count(*) c from avro_orders").first().c < 5:
            time.sleep(1)
        assert sorted(tuple(r) for r in spark.sql("select id, item from avro_orders").collect()) == \
            [(i, f"item-{i}") for i in range(5)]
    finally:
        q.stop()


def test_sink_writes_struct_values_with_the_registered_schema(spark, registry_broker):
    from confluent_kafka import Consumer
    from confluent_kafka.schema_registry.avro import AvroDeserializer
    from pyspark.sql import functions as F

    b = registry_broker
    topic = _topic(b, "orders-out")
    registry = SchemaRegistryClient({"url": b.http_url})
    registry.register_schema(f"{topic}-value", Schema(json.dumps(V1), "AVRO"))
    rows = spark.createDataFrame([(i, f"item-{i}", decimal.Decimal(f"{i}.25")) for i in range(4)],
                                 "id long, item string, price decimal(9,2)")
    value = F.struct(F.col("id"), F.col("item"), F.col("price"), F.lit(AT).alias("at"),
                     F.array(F.lit("x")).alias("tags"), F.create_map(F.lit("k"), F.col("id").cast("int")).alias("attrs"),
                     F.lit("NEW").alias("status"), F.lit(None).cast("string").alias("note"))
    (rows.select(F.col("id").cast("string").alias("key"), value.alias("value")).write.format("litemq")
     .option("kafka.bootstrap.servers", b.bootstrap_servers).option("topic", topic)
     .option("value.format", "avro").option("schema.registry.url", b.http_url).mode("append").save())

    consumer = Consumer({"bootstrap.servers": b.bootstrap_servers, "group.id": "avro-sink",
                         "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
    consumer.subscribe([topic])
    deserialize = AvroDeserializer(registry)
    got, deadline = [], time.monotonic() + 60
    while len(got) < 4 and time.monotonic() < deadline:
        m = consumer.poll(0.5)
        if m is not None and not m.error():
            got.append(deserialize(m.value(), SerializationContext(topic, MessageField.VALUE)))
    consumer.close()
    assert sorted((r["id"], r["item"], r["price"], r["attrs"], r["status"], r["at"]) for r in got) == \
        [(i, f"item-{i}", decimal.Decimal(f"{i}.25"), {"k": i}, "NEW", AT) for i in range(4)]
    read_back = _reader(spark, b, topic).select("value.id", "value.item").orderBy("id").collect()
    assert [(r.id, r.item) for r in read_back] == [(i, f"item-{i}") for i in range(4)]
    bad = spark.createDataFrame([(1, "x")], "id long, item string").select(F.struct("id", "item").alias("value"))
    with pytest.raises(Exception, match="does not fit schema"):
        (bad.write.format("litemq").option("kafka.bootstrap.servers", b.bootstrap_servers).option("topic", topic)
         .option("value.format", "avro").option("schema.registry.url", b.http_url).mode("append").save())


def test_avro_types_map_to_spark_types_and_values_decode_to_them(registry_broker):
    """The type mapping and the decoder on their own (no Spark job; the broker's registry): each
    Avro type becomes the Spark type Spark's SchemaConverters gives it, and the decoded Arrow
    column has exactly the Arrow type Spark expects of it."""
    import io
    import uuid

    import fastavro
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_type

    from litemq.spark.avro_values import RegistryClient, ValueDecoder, value_type

    schema = {"type": "record", "name": "All", "fields": [
        {"name": "u", "type": {"type": "string", "logicalType": "uuid"}},
        {"name": "t", "type": {"type": "int", "logicalType": "time-millis"}},
        {"name": "d", "type": {"type": "int", "logicalType": "date"}},
        {"name": "ts", "type": {"type": "long", "logicalType": "local-timestamp-micros"}},
        {"name": "f", "type": {"type": "fixed", "name": "F", "size": 2}},
        {"name": "again", "type": "F"}, {"name": "x", "type": ["double", "null"]}, {"name": "b", "type": "boolean"}]}
    text = json.dumps(schema)
    spark_value = value_type(text, [])
    assert spark_value.simpleString() == ("struct<u:string,t:int,d:date,ts:timestamp_ntz,f:binary,again:binary,"
                                          "x:double,b:boolean>")
    with pytest.raises(ValueError, match="only a type with null"):
        value_type(json.dumps({"type": "record", "name": "U", "fields": [{"name": "v", "type": ["int", "string"]}]}), [])
    row = {"u": uuid.UUID(int=7), "t": datetime.time(0, 0, 1), "d": datetime.date(2026, 1, 2),
           "ts": datetime.datetime(2026, 1, 2, 3, 4, 5), "f": b"ab", "again": b"cd", "x": None, "b": True}
    schema_id = SchemaRegistryClient({"url": registry_broker.http_url}).register_schema("all-types", Schema(text, "AVRO"))
    buf = io.BytesIO()
    buf.write(b"\0" + schema_id.to_bytes(4, "big"))  # magic byte, schema id
    fastavro.schemaless_writer(buf, fastavro.parse_schema(schema), row)
    decoder = ValueDecoder(RegistryClient(registry_broker.http_url), text, [],
                           to_arrow_type(spark_value, timezone="UTC"), permissive=False)
    batch = pa.RecordBatch.from_arrays([pa.array([buf.getvalue(), None], pa.binary()), pa.array([0, 1], pa.int64())],
                                       names=["value", "offset"])
    out = decoder.decode(batch)
    assert out.schema.field("value").type == to_arrow_type(spark_value, timezone="UTC")
    first = out.column("value").to_pylist()[0]
    assert (first["u"], first["t"], first["d"], first["f"], first["x"], first["b"]) == (
        str(uuid.UUID(int=7)), 1000, datetime.date(2026, 1, 2), b"ab", None, True)
    assert out.column("value").to_pylist()[1] is None
