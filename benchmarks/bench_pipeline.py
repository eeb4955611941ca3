"""Benchmark of the log pipeline end to end (not a test; never asserts on timings).

1. Throughput: a generated Apache access log (the bundled 10,000-line log repeated ``--copies``
   times, each copy shifted 4 days later) is sent by ``litemq ingest`` (library call) to a
   ``litemq serve`` broker process, then the Spark job (format("litemq"), local[2]) runs with
   Trigger.AvailableNow until caught up. Reported: ingest lines/s, job lines/s overall (from
   query start, so including Python worker start-up) and in steady state (micro-batches after
   the first one, ``maxOffsetsPerTrigger`` lines each).
2. Lag: ``Ingester.follow`` tails a file, the job runs continuously (``--trigger-interval``);
   after warm-up, one line is appended at a time (a new minute, a message never seen before)
   and we measure the time from the append to (a) the line's window row on topic
   ``log-metrics`` and (b) its ``new_template`` alert on topic ``alerts``.

Usage: ``python benchmarks/bench_pipeline.py [--copies 10] [--probes 8] [--engine spark|local]``.
Prints Markdown (paste into docs/benchmarks-pipeline.md).
"""

from __future__ import annotations

import argparse
import json
import random
import re
import statistics
import string
import tempfile
import threading
import time
import uuid
from pathlib import Path

from litemq.testing.machine import describe_machine
from litemq.pipeline.demo_data import access_log_path
from litemq.pipeline.ingest import Ingester, ingest
from litemq.pipeline.job import run_pipeline
from litemq.testing.process import BrokerProcess

_DATE = re.compile(rb"\[(\d\d)/May/2015:")


def make_access_log(path: Path, copies: int) -> int:
    base = access_log_path().read_bytes().splitlines()
    n = 0
    with open(path, "wb") as fh:
        for c in range(copies):
            shift = 4 * c
            for line in base:
                fh.write(_DATE.sub(lambda m: b"[%02d/May/2015:" % (int(m.group(1)) + shift) if int(m.group(1)) + shift <= 31
                                   else b"[%02d/Jun/2015:" % (int(m.group(1)) + shift - 31), line, count=1) + b"\n")
                n += 1
    return n


def machine() -> str:
    return describe_machine()


def bench_throughput(bs: str, work: Path, copies: int, per_trigger: int, engine: str) -> dict:
    log = work / "access.log"
    n = make_access_log(log, copies)
    prefix = f"bench{uuid.uuid4().hex[:6]}."
    t0 = time.perf_counter()
    st = ingest([str(log)], bs, topic_prefix=prefix)
    t_ingest = time.perf_counter() - t0
    batch_times: list[float] = []
    out = work / "out-throughput"
    t1 = time.perf_counter()
    res = run_pipeline(bs, [re.escape(prefix) + ".*"], out, once=True, engine=engine,
                       max_offsets_per_trigger=per_trigger,
                       on_batch=lambda b, c: batch_times.append(time.perf_counter()))
    t_job = time.perf_counter() - t1
    steady = None
    if len(batch_times) >= 3:
        lines_after_first = n - per_trigger
        steady = lines_after_first / (batch_times[-1] - batch_times[0])
    return {"lines": n, "mb": log.stat().st_size / 1e6, "ingest_s": t_ingest, "ingest_lps": st.lines / t_ingest,
            "job_s": t_job, "job_lps": n / t_job, "batches": res.batches, "steady_lps": steady,
            "first_batch_s": (batch_times[0] - t1) if batch_times else None}


def _hdfs_line(t_s: float, msg: str) -> bytes:
    tm = time.gmtime(t_s)
    return (f"{tm.tm_year % 100:02d}{tm.tm_mon:02d}{tm.tm_mday:02d} {tm.tm_hour:02d}{tm.tm_min:02d}{tm.tm_sec:02d} "
            f"143 INFO dfs.DataNode: {msg}").encode()


def bench_lag(bs: str, work: Path, probes: int, interval_s: float, engine: str) -> dict:
    from confluent_kafka import Consumer, TopicPartition

    prefix = f"lag{uuid.uuid4().hex[:6]}."
    d = work / "follow"
    d.mkdir()
    f = d / "datanode.log"
    t_base = 1_226_000_000 - 1_226_000_000 % 60
    with open(f, "wb") as fh:          # warm-up: 600 lines (past the 500-line new-template warm-up)
        for i in range(600):
            fh.write(_hdfs_line(t_base + i * 0.1, f"Receiving block blk_{i} src: /10.0.0.{i % 250}:50010") + b"\n")
    stop = threading.Event()
    ing = Ingester(bs)
    th_ing = threading.Thread(target=ing.follow, args=([str(f)],),
                              kwargs={"topic_prefix": prefix, "stop": stop, "poll_interval_s": 0.05}, daemon=True)
    th_ing.start()
    batches = []
    out = work / "out-lag"
    th_job = threading.Thread(target=run_pipeline, args=(bs, [re.escape(prefix) + ".*"], out),
                              kwargs={"engine": engine, "trigger_interval_s": interval_s, "stop": stop,
                                      "on_batch": lambda b, c: batches.append(b)}, daemon=True)
    th_job.start()
    c = Consumer({"bootstrap.servers": bs, "group.id": f"lag-{uuid.uuid4().hex}", "log_level": 3,
                  "fetch.wait.max.ms": 10, "enable.auto.commit": False})
    deadline = time.monotonic() + 300
    while not batches and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(2 * interval_s)
    tps = []
    for topic in ("log-metrics", "alerts"):
        for p in c.list_topics(topic, timeout=10).topics[topic].partitions:
            _lo, hi = c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            tps.append(TopicPartition(topic, p, hi))
    c.assign(tps)
    metric_lags, alert_lags = [], []
    source = "datanode"
    for k in range(probes):
        minute = t_base + (10 + 2 * k) * 60          # a new minute per probe: its window row is new
        ws = time.strftime("%Y-%m-%dT%H:%M:00", time.gmtime(minute))
        rnd = random.Random(k)
        words = ["".join(rnd.choice(string.ascii_lowercase) for _ in range(7)) for _ in range(4 + k)]
        word = words[0]
        msg = " ".join(words)            # a token count of its own: always a new Drain cluster
        t_app = time.monotonic()
        with open(f, "ab") as fh:
            fh.write(_hdfs_line(minute, msg) + b"\n")
        got_m = got_a = None
        end = t_app + 60
        while (got_m is None or got_a is None) and time.monotonic() < end:
            for m in c.consume(100, 0.05):
                if m.error() is not None:
                    continue
                doc = json.loads(m.value())
                if doc.get("source") != source:
                    continue
                if m.topic() == "log-metrics" and doc.get("kind") == "window" and \
                        str(doc.get("window_start", "")).startswith(ws) and got_m is None:
                    got_m = time.monotonic() - t_app
                if m.topic() == "alerts" and doc.get("alert_type") == "new_template" and \
                        word in str(doc.get("template", "")) + str(doc.get("message", "")) and got_a is None:
                    got_a = time.monotonic() - t_app
        if got_m is not None:
            metric_lags.append(got_m)
        if got_a is not None:
            alert_lags.append(got_a)
        time.sleep(0.5)
    stop.set()
    th_job.join(120)
    th_ing.join(30)
    c.close()
    return {"metric_lags": metric_lags, "alert_lags": alert_lags, "probes": probes, "interval_s": interval_s}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--copies", type=int, default=10, help="copies of the 10,000-line access log")
    ap.add_argument("--per-trigger", type=int, default=20_000, help="maxOffsetsPerTrigger")
    ap.add_argument("--probes", type=int, default=8)
    ap.add_argument("--trigger-interval", type=float, default=1.0)
    ap.add_argument("--engine", choices=["spark", "local"], default="spark")
    ap.add_argument("--skip-throughput", action="store_true")
    ap.add_argument("--skip-lag", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-pipeline-") as tmp:
        work = Path(tmp)
        broker = BrokerProcess(work / "data", overrides={"num.partitions": "1"}).start()
        try:
            print(f"machine: {machine()}")
            print(f"engine: {args.engine}\n")
            if not args.skip_throughput:
                r = bench_throughput(broker.bootstrap_servers, work, args.copies, args.per_trigger, args.engine)
                print("| lines | MB | ingest lines/s | job total s | job lines/s (incl. start-up) | micro-batches "
                      "| first batch s | steady lines/s |")
                print("|---:|---:|---:|---:|---:|---:|---:|---:|")
                print(f"| {r['lines']:,} | {r['mb']:.1f} | {r['ingest_lps']:,.0f} | {r['job_s']:.1f} | "
                      f"{r['job_lps']:,.0f} | {r['batches']} | {r['first_batch_s'] or 0:.1f} | "
                      f"{r['steady_lps'] or 0:,.0f} |\n")
            if not args.skip_lag:
                r = bench_lag(broker.bootstrap_servers, work, args.probes, args.trigger_interval, args.engine)

                def fmt(xs):
                    if not xs:
                        return "– | – | –"
                    return f"{statistics.median(xs):.2f} | {min(xs):.2f} | {max(xs):.2f}"

                print(f"lag, trigger interval {r['interval_s']} s, {r['probes']} probes "
                      f"(seen: metrics {len(r['metric_lags'])}, alerts {len(r['alert_lags'])})")
                print("| from append to | median s | min s | max s |")
                print("|---|---:|---:|---:|")
                print(f"| window row on `log-metrics` | {fmt(r['metric_lags'])} |")
                print(f"| `new_template` alert on `alerts` | {fmt(r['alert_lags'])} |")
        finally:
            broker.stop()


if __name__ == "__main__":
    main()
