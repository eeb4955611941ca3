"""A streaming job from topic SRC to topic DST through ``format("litemq")`` (both ways), run as
its own process by test_sink_exactly_once.py so that the test can SIGKILL it mid-batch.

    python sink_job.py BOOTSTRAP SRC DST CKPT MODE

MODE ``run`` (the only one): micro-batches of at most 300 offsets back to back; a Python UDF
(Arrow, 10 rows per batch) sleeps 5 ms per row, so that a micro-batch lasts about a second and a
kill can land inside one; runs until killed. The test then drains the checkpoint in its own
SparkSession with the same plan (job_plans.py) without the sleep (``Trigger.AvailableNow``). The UDF returns its
input: the rows of a micro-batch do not depend on the sleep, which is what exactly-once on replay
relies on.
"""

import sys

from pyspark.sql import SparkSession

from job_plans import sink_plan

bootstrap, src, dst, ckpt, mode = sys.argv[1:6]
if mode != "run":
    raise SystemExit(f"unknown MODE {mode!r} (only run)")
spark = (SparkSession.builder.master("local[2]").appName("litemq-sink-job")
         .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
         .config("spark.sql.execution.arrow.maxRecordsPerBatch", "10")
         .config("spark.sql.execution.pythonUDF.arrow.enabled", "true")
         .getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
q = sink_plan(spark, bootstrap, src, dst, ckpt, delay_s=0.005,
              max_offsets_per_trigger=300).trigger(processingTime="0 seconds").start()
q.awaitTermination()
if q.exception() is not None:
    raise SystemExit(f"query failed: {q.exception()}")
spark.stop()
