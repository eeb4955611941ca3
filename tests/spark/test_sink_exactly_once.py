"""Exactly-once through the ``litemq`` sink: topic A -> ``format("litemq")`` -> topic B in a
query process that is SIGKILLed (driver JVM and Python workers) in the middle of a
micro-batch, after some of its tasks committed their transactions and before the others did,
then restarted from the checkpoint. A read_committed consumer of B must see every record of A
exactly once: the replays of the committed tasks are skipped (their batch marker), the others
are written (a transaction the kill left open is aborted when the restarted task's
``init_transactions`` fences it; that path is pinned down without Spark in
test_transactions.py).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter

import confluent_kafka as ck
import pytest

from litemq.spark.transactional import MARKER_TOPIC, marker_group
from job_plans import sink_plan
from spark_helpers import consume_to_end, run_available_now

JOB = os.path.join(os.path.dirname(__file__), "sink_job.py")
RECORDS = 3000


def _batches(ckpt: str, sub: str) -> set[int]:
    try:
        return {int(f) for f in os.listdir(os.path.join(ckpt, sub)) if f.isdigit()}
    except FileNotFoundError:
        return set()


def _in_flight(ckpt: str) -> int | None:
    """The micro-batch planned (offsets/N) but not committed (no commits/N), if any."""
    offs = _batches(ckpt, "offsets")
    if offs and max(offs) not in _batches(ckpt, "commits"):
        return max(offs)
    return None


def _query_id(ckpt: str) -> str | None:
    import json

    try:
        with open(os.path.join(ckpt, "metadata")) as f:
            return json.loads(f.readline())["id"]
    except (FileNotFoundError, ValueError):
        return None


class Markers:
    """The sink's per-partition batch markers (committed offsets of the marker groups)."""

    def __init__(self, bootstrap: str, query_id: str, partitions: int) -> None:
        self.consumers = [ck.Consumer({"bootstrap.servers": bootstrap, "group.id": marker_group(query_id, p),
                                       "isolation.level": "read_committed", "log_level": 3})
                          for p in range(partitions)]

    def get(self) -> list[int]:
        out = []
        for c in self.consumers:
            tp = c.committed([ck.TopicPartition(MARKER_TOPIC, 0)], timeout=30)[0]
            out.append(max(tp.offset, 0))
        return out

    def close(self) -> None:
        for c in self.consumers:
            c.close()


def _job(broker, src, dst, ckpt, mode, log):
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    return subprocess.Popen([sys.executable, JOB, broker.bootstrap_servers, src, dst, ckpt, mode],
                            stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)


def _kill(job) -> None:
    if job.poll() is None:
        os.killpg(job.pid, signal.SIGKILL)
        job.wait()


@pytest.mark.slow
def test_sink_exactly_once_across_sigkill_mid_batch_and_restart(spark, broker, tmp_path):
    src = broker.create_topic(partitions=3)
    dst = broker.create_topic(partitions=3)
    broker.produce(src, RECORDS)
    ckpt = str(tmp_path / "ckpt")
    bs = broker.bootstrap_servers
    log = open(tmp_path / "job.log", "wb")
    job = _job(broker, src, dst, ckpt, "run", log)
    markers = None
    try:
        deadline = time.monotonic() + 240
        while markers is None:
            assert job.poll() is None, (tmp_path / "job.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "the query did not start"
            qid = _query_id(ckpt)
            if qid is not None:
                markers = Markers(bs, qid, 3)
            time.sleep(0.2)
        # kill inside a micro-batch (after the first one): some tasks committed it, some not
        while True:
            assert job.poll() is None, (tmp_path / "job.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "no micro-batch seen half committed"
            b = _in_flight(ckpt)
            if b is not None and b >= 1:
                m = markers.get()
                if any(x == b + 1 for x in m) and any(x <= b for x in m) and _in_flight(ckpt) == b:
                    break
            time.sleep(0.01)
        os.killpg(job.pid, signal.SIGKILL)
        job.wait()
    finally:
        _kill(job)
    killed_in = _in_flight(ckpt)
    at_kill = markers.get()
    assert killed_in is not None and killed_in >= 1, "the kill did not land inside a micro-batch"
    assert any(x == killed_in + 1 for x in at_kill), at_kill  # a task had committed the batch
    assert any(x <= killed_in for x in at_kill), at_kill      # another one had not
    print(f"killed in batch {killed_in}; markers {at_kill}")
    log.close()
    # restart from the checkpoint in this process's session: sink_job.py's plan without the
    # UDF's sleep (the rows of a micro-batch stay the same), Trigger.AvailableNow
    run_available_now(sink_plan(spark, bs, src, dst, ckpt))
    assert all(x >= killed_in + 1 for x in markers.get())  # every partition has the replayed batch done
    markers.close()
    want = Counter(f"v{i}".encode() for i in range(RECORDS))
    committed = consume_to_end(bs, dst, 3)
    got = Counter(r[3] for r in committed)
    assert got == want, (f"duplicated: {sum((got - want).values())}, missing: {sum((want - got).values())}")
    assert all(r[2] == b"k" + r[3][1:] for r in committed)  # key of v<i> is k<i>
