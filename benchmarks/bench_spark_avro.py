"""Benchmark of Avro values in the ``litemq`` Spark source (``value.format=avro``): rows/s of a
batch read into Spark's ``noop`` sink with the values decoded, against the same read with binary
values, in local[2]; and the decoder alone on one core.

    python benchmarks/bench_spark_avro.py [--records 200000] [--runs 3]

A ``litemq serve`` broker with its HTTP port (the schema registry) runs as a separate process;
the topic (3 partitions) is filled with confluent-kafka's ``AvroSerializer`` (not timed). Each
record is an ``Order`` of 8 fields (long, string, decimal, timestamp, array, map, enum, nullable
string), about 60 bytes of Avro. The report gives every run and the best; the first run of each
includes Python worker start-up. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import datetime
import decimal
import json
import os
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_spark import _free_port, _machine  # noqa: E402

ORDER = {"type": "record", "name": "Order", "fields": [
    {"name": "id", "type": "long"}, {"name": "item", "type": "string"},
    {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}},
    {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "tags", "type": {"type": "array", "items": "string"}},
    {"name": "attrs", "type": {"type": "map", "values": "int"}},
    {"name": "status", "type": {"type": "enum", "name": "Status", "symbols": ["NEW", "PAID"]}},
    {"name": "note", "type": ["null", "string"], "default": None}]}
AT = datetime.datetime(2026, 11, 1, tzinfo=datetime.timezone.utc)


def _order(i: int) -> dict:
    return {"id": i, "item": f"item-{i % 1000}", "price": decimal.Decimal(f"{i % 100}.50"), "at": AT,
            "tags": ["a", "b"], "attrs": {"n": i % 7}, "status": "PAID" if i % 2 else "NEW",
            "note": None if i % 3 else "gift"}


def fill(bootstrap: str, registry_url: str, topic: str, n: int) -> list[bytes]:
    import confluent_kafka as ck
    from confluent_kafka.admin import AdminClient, NewTopic
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 3, 1)])[topic].result(30)
    serialize = AvroSerializer(SchemaRegistryClient({"url": registry_url}), json.dumps(ORDER))
    ctx = SerializationContext(topic, MessageField.VALUE)
    values = [serialize(_order(i), ctx) for i in range(n)]
    p = ck.Producer({"bootstrap.servers": bootstrap, "linger.ms": 50, "batch.size": 1_000_000,
                     "queue.buffering.max.messages": 1_000_000, "log_level": 2})
    for i, v in enumerate(values):
        while True:
            try:
                p.produce(topic, value=v, partition=i % 3)
                break
            except BufferError:
                p.poll(0.01)
    assert p.flush(300) == 0
    return values


def decode_only(registry_url: str, values: list[bytes]) -> float:
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_type

    from litemq.spark.avro_values import RegistryClient, ValueDecoder, value_type

    registry = RegistryClient(registry_url)
    _, text, refs = registry.version("orders-value", "latest")
    decoder = ValueDecoder(registry, text, refs, to_arrow_type(value_type(text, refs), timezone="UTC"), False)
    batch = pa.RecordBatch.from_arrays([pa.array(values, pa.binary()), pa.array(range(len(values)), pa.int64())],
                                       names=["value", "offset"])
    decoder.decode(batch.slice(0, 10))  # fetch the writer schema first
    t = time.perf_counter()
    decoder.decode(batch)
    return len(values) / (time.perf_counter() - t)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()

    from pyspark.sql import SparkSession

    tmp = tempfile.mkdtemp(prefix="bench-spark-avro-")
    port, http_port = _free_port(), _free_port()
    bootstrap, registry_url = f"127.0.0.1:{port}", f"http://127.0.0.1:{http_port}"
    broker = subprocess.Popen([sys.executable, "-m", "litemq.cli", "serve", "--data-dir", os.path.join(tmp, "data"),
                               "--listen", bootstrap, "--http-listen", f"127.0.0.1:{http_port}",
                               "--log-level", "warning"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    result = {"records": args.records, "machine": _machine(), "load_average_at_start": os.getloadavg()}
    try:
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", http_port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        values = fill(bootstrap, registry_url, "orders", args.records)
        result["avro_value_bytes_mean"] = round(sum(map(len, values)) / len(values), 1)
        result["decode_only_rows_per_s_one_core"] = round(decode_only(registry_url, values))
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        spark = (SparkSession.builder.master("local[2]").appName("bench-litemq-avro")
                 .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
                 .config("spark.driver.memory", "2g").getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")
        import litemq.spark

        litemq.spark.register(spark)
        for name, avro in (("binary", False), ("avro", True)):
            runs = []
            for _ in range(args.runs):
                r = (spark.read.format("litemq").option("kafka.bootstrap.servers", bootstrap)
                     .option("subscribe", "orders"))
                if avro:
                    r = r.option("value.format", "avro").option("schema.registry.url", registry_url)
                t = time.perf_counter()
                r.load().write.format("noop").mode("overwrite").save()
                runs.append(round(args.records / (time.perf_counter() - t)))
            result[f"batch_{name}_rows_per_s"] = {"runs": runs, "best": max(runs)}
        spark.stop()
    finally:
        broker.terminate()
        broker.wait(30)
        subprocess.run(["rm", "-rf", tmp], check=False)
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
