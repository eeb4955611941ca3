"""A streaming job run as its own process by test_exactly_once.py (so the test can SIGKILL it).

    python stream_job.py BOOTSTRAP TOPIC OUT CKPT MODE CONTROL_DIR

MODE ``run``: stream TOPIC -> parquet OUT (checkpoint CKPT), micro-batches of at most 150
offsets back to back; after 2 committed batches stop the query gracefully and start it again
from the checkpoint (restart), then run until killed or until CONTROL_DIR/stop exists. (The test
drains the checkpoint with Trigger.AvailableNow in its own SparkSession, with the same plan:
job_plans.py.)

It never imports ``litemq.spark``: ``format("litemq")`` must be found by PySpark's automatic
lookup of the ``pyspark_litemq`` module.
"""

import os
import sys
import time

from pyspark.sql import SparkSession

from job_plans import stream_plan

bootstrap, topic, out, ckpt, mode, control = sys.argv[1:7]
if mode != "run":
    raise SystemExit(f"unknown MODE {mode!r} (only run)")
spark = (SparkSession.builder.master("local[2]").appName("litemq-stream-job")
         .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
         .getOrCreate())
spark.sparkContext.setLogLevel("ERROR")


def start(trigger):
    return stream_plan(spark, bootstrap, topic, out, ckpt, max_offsets_per_trigger=150).trigger(**trigger).start()


def mark(name):
    with open(os.path.join(control, name), "w") as f:
        f.write(str(time.time()))


q = start({"processingTime": "0 seconds"})
while sum(1 for p in q.recentProgress if p["numInputRows"]) < 2:
    if q.exception():
        raise q.exception()
    time.sleep(0.2)
q.stop()
mark("stopped")
q = start({"processingTime": "0 seconds"})
mark("restarted")
while not os.path.exists(os.path.join(control, "stop")):
    if q.exception():
        raise q.exception()
    time.sleep(0.2)
q.stop()
spark.stop()
