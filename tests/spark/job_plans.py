"""The query plans of the Spark exactly-once jobs, shared by the job scripts (run as their own
process, so the tests can SIGKILL them) and by the tests that drain the jobs' checkpoints in their
own SparkSession afterwards: a restart must run the same plan, so it is written once.

Functions return a ``DataStreamWriter`` without a trigger; the caller picks it. The sink job's
UDF is defined inside :func:`sink_plan`, so cloudpickle ships it by value and Spark's Python
workers need not import this module.
"""

from __future__ import annotations

import time


def _source(spark, bootstrap: str, topic: str, max_offsets_per_trigger: int | None):
    """``format("litemq")`` TOPIC from the earliest offsets, at most ``max_offsets_per_trigger``
    offsets per micro-batch (None: no bound) -> DataFrame."""
    r = (spark.readStream.format("litemq").option("kafka.bootstrap.servers", bootstrap)
         .option("subscribe", topic).option("startingOffsets", "earliest"))
    if max_offsets_per_trigger is not None:
        r = r.option("maxOffsetsPerTrigger", str(max_offsets_per_trigger))
    return r.load()


def stream_plan(spark, bootstrap: str, topic: str, out: str, ckpt: str, max_offsets_per_trigger: int | None = None):
    """stream_job.py: ``format("litemq")`` TOPIC -> parquet OUT, checkpoint CKPT."""
    return (_source(spark, bootstrap, topic, max_offsets_per_trigger)
            .writeStream.format("parquet").option("path", out).option("checkpointLocation", ckpt))


def sink_plan(spark, bootstrap: str, src: str, dst: str, ckpt: str, delay_s: float = 0.0,
              max_offsets_per_trigger: int | None = None):
    """sink_job.py: ``format("litemq")`` SRC -> a Python UDF (Arrow) that sleeps ``delay_s`` per
    row and returns its input -> ``format("litemq")`` DST, checkpoint CKPT. The rows of a
    micro-batch do not depend on the sleep, which is what exactly-once on replay relies on."""
    from pyspark.sql import functions as F

    @F.udf("binary", useArrow=True)
    def slow(v):
        if delay_s:
            time.sleep(delay_s)
        return v

    return (_source(spark, bootstrap, src, max_offsets_per_trigger).select("key", slow("value").alias("value"))
            .writeStream.format("litemq").option("kafka.bootstrap.servers", bootstrap).option("topic", dst)
            .option("checkpointLocation", ckpt))
