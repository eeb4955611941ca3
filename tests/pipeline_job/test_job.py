"""The Spark job end to end: real broker, ingest, PySpark Structured Streaming over
format("litemq") (local[2]), parquet + topic sinks. Aggregates must equal a plain Python count of
the same files, and a job killed with SIGKILL mid-run then rerun must give the same aggregates."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from litemq.pipeline.demo_data import access_log_path
from litemq.pipeline.ingest import ingest
from litemq.pipeline.job import run_pipeline
from litemq.pipeline.sinks import load_aggregates, load_alerts

from .conftest import read_topic
from .reference import access_counts, hdfs_counts

pytestmark = pytest.mark.slow

HDFS_LINES = 600


def _hdfs_file(path: Path) -> Path:
    """A small HDFS-format log from 2008 (another era than the 2015 access log): 600 lines over
    ~10 minutes, some WARN/ERROR."""
    import random

    rnd = random.Random(7)
    lines = []
    t = 1_226_263_000
    for i in range(HDFS_LINES):
        t += rnd.choice((0, 1, 1, 2))
        tm = time.gmtime(t)
        lvl = rnd.choices(("INFO", "WARN", "ERROR"), (90, 6, 4))[0]
        msg = rnd.choice((f"Receiving block blk_{rnd.randrange(10**9)} src: /10.1.{i % 7}.{i % 13}:50010",
                          f"PacketResponder {i % 3} for block blk_{rnd.randrange(10**9)} terminating",
                          f"Served block blk_{rnd.randrange(10**9)} to /10.2.{i % 5}.1"))
        lines.append(f"{tm.tm_year % 100:02d}{tm.tm_mon:02d}{tm.tm_mday:02d} {tm.tm_hour:02d}{tm.tm_min:02d}"
                     f"{tm.tm_sec:02d} {100 + i % 50} {lvl} dfs.DataNode: {msg}")
    path.write_text("\r\n".join(lines))        # CRLF, no final newline
    return path


def _assert_equal_to_reference(out: Path, prefix_src: dict[str, dict], *, other_sources: bool = False) -> pd.DataFrame:
    """The aggregates of the sources in ``prefix_src`` equal their plain counts; no other source
    unless ``other_sources``."""
    win = load_aggregates(out, "windows")
    tpl = load_aggregates(out, "templates")
    assert set(prefix_src) <= set(win["source"]) if other_sources else set(win["source"]) == set(prefix_src)
    for source, ref in prefix_src.items():
        w = win[win.source == source]
        got = {ts.tz_convert(None).to_pydatetime(): r for ts, r in zip(w.window_start, w.to_dict("records"))}
        assert set(got) == set(ref["per_minute"]), source
        for minute, c in ref["per_minute"].items():
            for k in ("lines", "errors", "warns", "bytes", "status_2xx", "status_3xx", "status_4xx", "status_5xx"):
                if k in c or k == "lines":
                    assert got[minute][k] == c.get(k, 0), (source, minute, k)
        assert int(w["late_lines"].sum()) == 0
        t = tpl[tpl.source == source].groupby("window_start")["count"].sum()
        assert t.to_dict() == dict(zip(w.window_start, w.lines)), "template counts add up to the lines"
    return win


def test_end_to_end_aggregates_equal_plain_count(broker, spark, tmp_path, prefix):
    hdfs = _hdfs_file(tmp_path / "datanode.log")
    bs = broker.bootstrap_servers
    ingest([str(access_log_path()), str(hdfs)], bs, topic_prefix=prefix)
    out = tmp_path / "out"
    batches = []
    res = run_pipeline(bs, [re.escape(prefix) + ".*"], out, once=True, spark=spark, max_offsets_per_trigger=4000,
                       on_batch=lambda b, c: batches.append(b))
    assert res.batches >= 3 and batches == sorted(batches)
    ref = {"elastic_examples_apache_logs": access_counts(access_log_path()), "datanode": hdfs_counts(hdfs)}
    win = _assert_equal_to_reference(out, ref)
    # access-log top paths of the whole file = plain count
    acc = win[win.source == "elastic_examples_apache_logs"]
    assert int(acc["requests"].sum()) == 10_000
    paths = ref["elastic_examples_apache_logs"]["paths"]
    first = acc.sort_values("window_start").iloc[0]
    assert json.loads(first["top_paths"])[0][1] >= 1
    assert "/favicon.ico" == paths.most_common(1)[0][0]
    # windows are final once the source's watermark passed them; the last ones stay open
    assert acc["final"].sum() >= len(acc) - 6
    # topics: log-metrics has the last version of every window; alerts topic = alerts parquet
    metrics = read_topic(bs, "log-metrics")
    latest = {}
    for m in metrics:
        d = json.loads(m.value())
        if d["kind"] == "window" and d["source"] in ref:
            latest[m.key()] = d
    assert sum(d["lines"] for d in latest.values()) >= 10_000 + HDFS_LINES
    alerts = load_alerts(out)
    on_topic = [json.loads(m.value()) for m in read_topic(bs, "alerts")]
    mine = [a for a in on_topic if a["source"] in ref]
    assert len(mine) == len(alerts)
    assert {"new_template"} <= set(alerts["alert_type"])
    # a rerun on the same checkpoint with nothing new changes nothing
    before = load_aggregates(out, "windows")
    again = run_pipeline(bs, [re.escape(prefix) + ".*"], out, once=True, spark=spark)
    assert again.rows_in == 0, again
    pd.testing.assert_frame_equal(before, load_aggregates(out, "windows"))


def _commits(out: Path, log: str = "commits") -> int:
    """Batches in the checkpoint's ``log``: ``commits`` (done) or ``offsets`` (planned)."""
    d = out / "_checkpoint" / log
    return len([f for f in d.iterdir() if f.name.isdigit()]) if d.exists() else 0


def test_sigkill_mid_run_then_rerun_gives_same_aggregates(broker, spark, tmp_path, prefix):
    bs = broker.bootstrap_servers
    earlier = {(m.partition(), m.offset()) for m in read_topic(bs, "alerts")}  # other tests' alerts
    ingest([str(access_log_path())], bs, topic_prefix=prefix)
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "litemq.cli", "pipeline", "run", "-b", bs, "-o", str(out), "--once",
           "--max-offsets-per-trigger", "400", "--no-report", re.escape(prefix) + ".*"]
    log = open(tmp_path / "job.log", "wb")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 240
        while _commits(out) < 3 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.1)
        assert proc.poll() is None, (tmp_path / "job.log").read_text()[-3000:]
        os.killpg(proc.pid, signal.SIGKILL)          # the driver and its JVM, mid-run
        proc.wait(30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)
        log.close()
    killed_at = _commits(out)
    assert 3 <= killed_at < 25, killed_at              # 10,000 lines / 400 per batch = 25 batches
    time.sleep(1.0)
    # the rerun replays the batch in flight at the kill with its planned 400 offsets, then reads
    # the rest 4000 at a time
    res = run_pipeline(bs, [re.escape(prefix) + ".*"], out, once=True, spark=spark, max_offsets_per_trigger=4000)
    assert res.batches >= 1
    assert _commits(out) > killed_at
    assert _commits(out) == _commits(out, "offsets")   # every planned batch committed, the replayed one too
    _assert_equal_to_reference(out, {"elastic_examples_apache_logs": access_counts(access_log_path())})
    # alerts: no batch's alerts twice
    alerts = load_alerts(out)
    assert not alerts.duplicated(["source", "alert_type", "window_start", "template_id"]).any()
    # the alerts topic (transactions, read_committed): exactly the alerts of the parquet files,
    # although the killed run had produced some of them
    mine = [json.loads(m.value()) for m in read_topic(bs, "alerts") if (m.partition(), m.offset()) not in earlier]
    def utc(t):
        t = pd.Timestamp(t)
        return t.tz_convert("UTC") if t.tzinfo is not None else t.tz_localize("UTC")

    on_topic = sorted((a["alert_type"], utc(a["window_start"])) for a in mine)
    assert on_topic == sorted((a, utc(w)) for a, w in zip(alerts["alert_type"], alerts["window_start"]))


def test_topic_patterns_never_match_the_jobs_own_output_topics():
    """The Spark engine subscribes with ``topic_regex`` as ``subscribePattern``; the job writes
    ``alerts`` and ``log-metrics``, so a pattern that names or covers them must not read them back
    (it did: ``'alerts|mixed'`` read ``alerts`` as a source, a feedback loop in continuous mode)."""
    from litemq.pipeline.job import INTERNAL_TOPICS, topic_regex

    names = ["alerts", "log-metrics", "mixed", "logs.app", "alerts-eu", "log-metrics2"]
    for patterns, want in ((["alerts|mixed"], ["mixed"]), ([".*"], ["mixed", "logs.app", "alerts-eu", "log-metrics2"]),
                           ([r"logs\..*", "log-metrics"], ["logs.app"]), (["alerts-eu"], ["alerts-eu"])):
        rx = re.compile(topic_regex(patterns))
        assert [n for n in names if rx.fullmatch(n)] == want, (patterns, topic_regex(patterns))
    assert set(INTERNAL_TOPICS) == {"alerts", "log-metrics"}
