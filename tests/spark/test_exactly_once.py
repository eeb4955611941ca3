"""Exactly-once from a 3-partition topic to parquet across a graceful stop/restart and a
SIGKILL of the whole query process (driver JVM and Python workers) in the middle of a batch.

Records arrive continuously from a producer thread during the whole test. The parquet sink's
own log (``_spark_metadata``) plus the source's offsets in the checkpoint must give: every
record exactly once, no gaps, no duplicates.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from job_plans import stream_plan
from spark_helpers import consume_all, run_available_now

JOB = os.path.join(os.path.dirname(__file__), "stream_job.py")


def _in_flight(ckpt: str) -> bool:
    """A micro-batch is planned (offsets/N written) but not committed (no commits/N)."""
    try:
        offs = {int(f) for f in os.listdir(os.path.join(ckpt, "offsets")) if f.isdigit()}
        done = {int(f) for f in os.listdir(os.path.join(ckpt, "commits")) if f.isdigit()}
    except FileNotFoundError:
        return False
    return bool(offs) and max(offs) not in done


def _job(broker, topic, out, ckpt, mode, control, log):
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    return subprocess.Popen([sys.executable, JOB, broker.bootstrap_servers, topic, out, ckpt, mode, control],
                            stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)


@pytest.mark.slow
def test_exactly_once_across_stop_restart_and_kill(spark, broker, tmp_path):
    topic = broker.create_topic(partitions=3)
    out, ckpt, control = str(tmp_path / "out"), str(tmp_path / "ckpt"), str(tmp_path / "ctl")
    os.makedirs(control)
    stop_producing = threading.Event()
    produced = [0]

    def produce():
        p = broker.producer()
        i = 0
        while not stop_producing.is_set():
            for _ in range(20):
                p.produce(topic, key=f"k{i}".encode(), value=f"v{i}".encode())
                i += 1
            p.poll(0)
            time.sleep(0.1)  # ~200 records/s
        assert p.flush(60) == 0
        produced[0] = i

    t = threading.Thread(target=produce, daemon=True)
    t.start()
    log = open(tmp_path / "job.log", "wb")
    t0 = time.monotonic()
    job = _job(broker, topic, out, ckpt, "run", control, log)
    try:
        deadline = time.monotonic() + 180
        while not os.path.exists(os.path.join(control, "restarted")):
            assert job.poll() is None, (tmp_path / "job.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "job did not stop and restart its query in time"
            time.sleep(0.2)
        # wait for a batch of the restarted query to be in flight, then kill everything
        n_commits = len(os.listdir(os.path.join(ckpt, "commits")))
        while True:
            assert job.poll() is None, (tmp_path / "job.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "no in-flight batch seen"
            if len(os.listdir(os.path.join(ckpt, "commits"))) > n_commits and _in_flight(ckpt):
                break
            time.sleep(0.01)
        os.killpg(job.pid, signal.SIGKILL)
        job.wait()
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
            job.wait()
    assert _in_flight(ckpt), "the kill did not land inside a micro-batch"
    time.sleep(1)
    stop_producing.set()
    t.join(60)
    log.close()
    # restart from the checkpoint in this process's session (stream_job.py's plan), to the end
    run_available_now(stream_plan(spark, broker.bootstrap_servers, topic, out, ckpt))
    print(f"produced {produced[0]} records in {time.monotonic() - t0:.0f} s")
    rows = [(r.partition, r.offset, bytes(r.key), bytes(r.value))
            for r in spark.read.parquet(out).select("partition", "offset", "key", "value").collect()]
    assert len(rows) == len(set(rows)), "duplicates in the sink"
    want = consume_all(broker.bootstrap_servers, topic, 3)
    assert len(want) == produced[0]
    assert sorted(rows) == want
