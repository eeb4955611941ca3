"""Benchmark of the ``litemq`` Spark source: rows/s of reading N records of S bytes into Spark's
``noop`` sink, in local[2].

    python benchmarks/bench_spark.py [--records 1000000] [--size 100] [--partitions 3] [--runs 3]

A ``litemq serve`` broker runs as a separate process; the topic is filled with an idempotent
confluent-kafka producer (not timed). Then, each ``--runs`` times:

- batch:     ``spark.read.format("litemq") ... .write.format("noop").mode("overwrite").save()``
- streaming: ``spark.readStream.format("litemq")`` from earliest, ``Trigger.AvailableNow``,
             ``writeStream.format("noop")``, timed until the query stops

The first run of each includes Python worker start-up; the report gives every run and the best.
For streaming it also gives rows / (sum of the micro-batches' ``addBatch`` time), i.e. the read
rate once the query runs, without query start-up and checkpoint writes.
Also: the Arrow decoder alone (one core, records already in memory). Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import socket
import subprocess
import sys
import tempfile
import time


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _machine() -> dict:
    cpu = ""
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    mem = ""
    try:
        with open("/proc/meminfo") as f:
            mem = f"{int(f.readline().split()[1]) // 1024 // 1024} GiB"
    except OSError:
        pass
    import pyarrow
    import pyspark
    return {"cpu": cpu, "cores": os.cpu_count(), "memory": mem, "python": platform.python_version(),
            "pyspark": pyspark.__version__, "pyarrow": pyarrow.__version__, "os": platform.platform()}


def fill(bootstrap: str, topic: str, n: int, size: int, partitions: int) -> float:
    import confluent_kafka as ck
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
    p = ck.Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 50,
                     "batch.size": 1_000_000, "queue.buffering.max.messages": 1_000_000, "log_level": 2})
    value = b"x" * size
    t = time.perf_counter()
    for i in range(n):
        while True:
            try:
                p.produce(topic, value=value, partition=i % partitions)
                break
            except BufferError:
                p.poll(0.01)
    assert p.flush(300) == 0
    return n / (time.perf_counter() - t)


def decode_only(n: int, size: int) -> float:
    from litemq.protocol import records as R
    from litemq.spark.arrow_decode import ColumnBuilder

    per = 1000
    blob = b"".join(R.build_batch([(None, b"x" * size)] * per, base_offset=j * per) for j in range(n // per))
    t = time.perf_counter()
    cb = ColumnBuilder("topic", 0, 0, n)
    step = 8 << 20
    rows = 0
    pos = 0
    mv = memoryview(blob)
    while pos < len(blob):  # feed in fetch-sized pieces, whole batches only
        end = min(pos + step, len(blob))
        nxt = cb.add_records(mv[pos:end])
        consumed = sum(h.size for _, h in R.iter_batches(mv[pos:end], allow_trailing_partial=True))
        pos += consumed
        rb = cb.flush()
        rows += rb.num_rows if rb is not None else 0
        assert nxt > 0
    return rows / (time.perf_counter() - t)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=3)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()

    from pyspark.sql import SparkSession

    tmp = tempfile.mkdtemp(prefix="bench-spark-")
    port = _free_port()
    bootstrap = f"127.0.0.1:{port}"
    broker = subprocess.Popen([sys.executable, "-m", "litemq.cli", "serve", "--data-dir", os.path.join(tmp, "data"),
                               "--listen", bootstrap, "--log-level", "warning"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    result = {"records": args.records, "value_bytes": args.size, "partitions": args.partitions,
              "machine": _machine(), "load_average_at_start": os.getloadavg()}
    try:
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        topic = "bench"
        result["produce_rows_per_s"] = round(fill(bootstrap, topic, args.records, args.size, args.partitions))
        result["decode_only_rows_per_s_one_core"] = round(decode_only(min(args.records, 500_000), args.size))
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        spark = (SparkSession.builder.master("local[2]").appName("bench-litemq")
                 .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
                 .config("spark.driver.memory", "2g").getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")
        import litemq.spark

        litemq.spark.register(spark)

        def reader(r):
            return r.format("litemq").option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)

        batch = []
        for _ in range(args.runs):
            t = time.perf_counter()
            reader(spark.read).load().write.format("noop").mode("overwrite").save()
            batch.append(round(args.records / (time.perf_counter() - t)))
        streaming = []
        in_batch = []
        for i in range(args.runs):
            t = time.perf_counter()
            q = (reader(spark.readStream).option("startingOffsets", "earliest").load()
                 .writeStream.format("noop").option("checkpointLocation", os.path.join(tmp, f"ckpt{i}"))
                 .trigger(availableNow=True).start())
            q.awaitTermination()
            dt = time.perf_counter() - t
            rows = sum(p["numInputRows"] for p in q.recentProgress)
            assert rows == args.records, rows
            streaming.append(round(rows / dt))
            add_ms = sum(p["durationMs"].get("addBatch", 0) for p in q.recentProgress)
            in_batch.append(round(rows / (add_ms / 1000)) if add_ms else None)
        result.update(batch_rows_per_s=batch, batch_best=max(batch),
                      streaming_rows_per_s=streaming, streaming_best=max(streaming),
                      streaming_rows_per_s_inside_micro_batches=in_batch)
        spark.stop()
    finally:
        broker.terminate()
        broker.wait(60)
        shutil.rmtree(tmp, ignore_errors=True)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
