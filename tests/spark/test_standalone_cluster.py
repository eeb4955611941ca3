"""The pipeline job unchanged on a Spark standalone cluster (a master and 2 workers, separate JVMs
started from the pip-installed PySpark) against a 3-broker LiteMQ cluster: ``litemq pipeline run
--master spark://...`` with every broker in ``-b``. The outputs must be those the local[2] run of
``tests/pipeline_job/test_job.py`` checks, and tasks must have run on executors of both workers
(from the application's event log and the workers' work directories)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections import Counter

import pytest
from confluent_kafka.admin import AdminClient

from litemq.pipeline.demo_data import access_log_path
from litemq.pipeline.ingest import ingest
from litemq.pipeline.sinks import load_alerts
from litemq.testing.cluster import LocalCluster
from litemq.testing.spark_standalone import SparkStandalone
from tests.pipeline_job.conftest import read_topic
from tests.pipeline_job.reference import access_counts, hdfs_counts
from tests.pipeline_job.test_job import HDFS_LINES, _assert_equal_to_reference, _hdfs_file

pytestmark = [pytest.mark.slow, pytest.mark.timeout(400)]

# One partition per source topic, as in the local[2] test: the job's per-source watermark assumes a
# source's lines arrive in order, which two partitions of one source do not keep (lines then
# count as late_lines). Every topic has a replica on each of the three brokers.
BROKER_OVERRIDES = {"default.replication.factor": "3", "num.partitions": "1"}


def _tasks_per_executor(event_dir) -> tuple[str, Counter]:
    """(application id, executor id -> successful tasks) from the one event log in ``event_dir``."""
    (log,) = [p for p in event_dir.iterdir() if p.is_file()]
    app_id, tasks = None, Counter()
    for line in log.read_text().splitlines():
        ev = json.loads(line)
        if ev["Event"] == "SparkListenerApplicationStart":
            app_id = ev["App ID"]
        elif ev["Event"] == "SparkListenerTaskEnd" and ev["Task End Reason"]["Reason"] == "Success":
            tasks[ev["Task Info"]["Executor ID"]] += 1
    return app_id, tasks


def test_pipeline_on_standalone_spark_against_three_brokers(tmp_path):
    hdfs = _hdfs_file(tmp_path / "datanode.log")
    out, events = tmp_path / "out", tmp_path / "events"
    events.mkdir()
    with LocalCluster(tmp_path / "litemq", n=3, overrides=BROKER_OVERRIDES) as cluster:
        bs = cluster.bootstrap_servers                      # all three brokers
        ingest([str(access_log_path()), str(hdfs)], bs, topic_prefix="logs.")
        with SparkStandalone(tmp_path / "spark", workers=2, cores=1, memory="1g") as spark:
            cmd = [sys.executable, "-m", "litemq.cli", "pipeline", "run", "--master", spark.master_url,
                   "-b", bs, "-o", str(out), "--once", "--max-offsets-per-trigger", "4000", "--no-report",
                   "--conf", "spark.eventLog.enabled=true", "--conf", f"spark.eventLog.dir={events}",
                   "--conf", "spark.eventLog.compress=false", "--conf", "spark.eventLog.rolling.enabled=false",
                   r"logs\..*"]
            job = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                   env={**os.environ, "SPARK_LOCAL_IP": spark.host}, start_new_session=True)
            try:
                _stdout, stderr = job.communicate(timeout=300)
            finally:
                if job.poll() is None:                      # hung: the driver and its JVM, no orphans
                    os.killpg(job.pid, signal.SIGKILL)
                    job.communicate()
            assert job.returncode == 0, stderr[-4000:]
            app_id, tasks = _tasks_per_executor(events)
            on_worker = spark.executors_by_worker(app_id)
        # tasks ran in executors of both workers
        assert all(on_worker[w] for w in (1, 2)), on_worker
        for w in (1, 2):
            assert sum(tasks[e] for e in on_worker[w]) > 0, (w, on_worker, tasks)
        batches = re.search(r"(\d+) micro-batches", stderr)
        assert batches and int(batches[1]) >= 3, stderr[-2000:]       # 10,600 lines, 4000 per batch
        # the same outputs as the local[2] run: aggregates = a plain count of each file
        ref = {"elastic_examples_apache_logs": access_counts(access_log_path()), "datanode": hdfs_counts(hdfs)}
        win = _assert_equal_to_reference(out, ref)
        acc = win[win.source == "elastic_examples_apache_logs"]
        assert int(acc["requests"].sum()) == 10_000
        assert json.loads(acc.sort_values("window_start").iloc[0]["top_paths"])[0][1] >= 1
        assert acc["final"].sum() >= len(acc) - 6       # the last windows stay open
        # every topic has a replica on each broker; log-metrics has every window, alerts = alerts parquet
        topics = AdminClient({"bootstrap.servers": bs}).list_topics(timeout=10).topics
        for t in ("logs.elastic_examples_apache_logs", "logs.datanode", "log-metrics", "alerts"):
            assert sorted(topics[t].partitions[0].replicas) == [1, 2, 3], t
        latest = {}
        for m in read_topic(bs, "log-metrics"):
            d = json.loads(m.value())
            if d["kind"] == "window":
                latest[m.key()] = d
        assert sum(d["lines"] for d in latest.values()) >= 10_000 + HDFS_LINES
        alerts = load_alerts(out)
        assert len(read_topic(bs, "alerts")) == len(alerts) > 0
        assert {"new_template"} <= set(alerts["alert_type"])
