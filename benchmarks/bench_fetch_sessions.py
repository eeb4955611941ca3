"""Incremental fetch sessions (KIP-227): what they save a broker and a consumer of many partitions.

One ``litemq serve`` process (durable default), a topic of ``--partitions`` partitions, a
confluent-kafka producer writing ``--rate`` records/s of 100 B to random partitions, and a
kafka-python consumer (its own process, ``fetch_max_wait_ms=100``) reading all of them for
``--seconds``: with incremental fetch sessions (kafka-python's default) and without
(``enable_incremental_fetch_sessions=False``: every Fetch names every partition and every
response answers each), and with no consumer (what producing costs the broker alone), alternated
``--repeat`` times. Per row: Fetch requests answered per second, the broker's CPU
(``/proc/PID/stat``, user + system) in all and, above the producer-only rows', per Fetch, the consumer
process's CPU, kafka-python's average request size (its ``request-size-avg`` metric: nearly all
Fetches), and
the records read (all of them must be).

usage: python benchmarks/bench_fetch_sessions.py [--partitions N] [--rate R] [--seconds S] [--repeat K] [--out FILE]
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import random
import statistics
import tempfile
import threading
import time
import urllib.request
import uuid
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from litemq.testing.machine import describe_machine
from litemq.testing.process import BrokerProcess


def broker_cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def fetches_answered(http_url: str) -> float:
    with urllib.request.urlopen(http_url + "/metrics", timeout=10) as r:
        return sum(float(line.rsplit(" ", 1)[1]) for line in r.read().decode().splitlines()
                   if line.startswith('kafka_network_requestmetrics_requests_total{request="FetchConsumer"'))


def consume(bootstrap: str, topic: str, sessions: bool, expected: int, seconds: float, out) -> None:
    """Child process: read ``expected`` records (or stop after ``seconds`` + 30 s); report."""
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=None, auto_offset_reset="earliest",
                             enable_auto_commit=False, fetch_max_wait_ms=100,
                             enable_incremental_fetch_sessions=sessions)
    while not consumer.assignment():
        consumer.poll(timeout_ms=100)
    out.put("ready")
    cpu0 = time.process_time()
    n = 0
    deadline = time.monotonic() + seconds + 30
    while n < expected and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=200).values():
            n += len(records)
    cpu = time.process_time() - cpu0
    size = consumer.metrics().get("consumer-metrics", {}).get("request-size-avg", float("nan"))
    consumer.close()
    out.put((n, cpu, size))


def run(broker: BrokerProcess, partitions: int, rate: int, seconds: float, sessions: bool | None) -> dict:
    """One row: the producer for ``seconds``, with a consumer using sessions (True), not (False),
    or no consumer at all (None: what producing alone costs the broker)."""
    topic = f"sessions-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})  # kept: its futures need it
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(timeout=60)
    total = int(rate * seconds)
    q: multiprocessing.Queue = multiprocessing.Queue()
    child = None
    if sessions is not None:
        child = multiprocessing.Process(target=consume, args=(broker.bootstrap_servers, topic, sessions, total,
                                                              seconds, q))
        child.start()
        assert q.get(timeout=120) == "ready"
    time.sleep(1.0)  # the consumer's first full fetches
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0})
    payload = b"x" * 100
    fetches0, cpu0, t0 = fetches_answered(broker.http_url), broker_cpu_s(broker.proc.pid), time.monotonic()
    for i in range(total):
        producer.produce(topic, payload, partition=random.randrange(partitions))
        producer.poll(0)
        delay = t0 + (i + 1) / rate - time.monotonic()
        if delay > 0:
            time.sleep(delay)
    producer.flush(30)
    elapsed = time.monotonic() - t0
    fetches, cpu = fetches_answered(broker.http_url) - fetches0, broker_cpu_s(broker.proc.pid) - cpu0
    n, consumer_cpu, request_size = total, float("nan"), float("nan")
    if child is not None:
        n, consumer_cpu, request_size = q.get(timeout=seconds + 60)
        child.join(30)
    return {"sessions": sessions, "elapsed_s": elapsed, "fetches": fetches, "fetches_per_s": fetches / elapsed,
            "broker_cpu_s": cpu, "broker_cpu_pct": cpu / elapsed * 100, "consumer_cpu_pct": consumer_cpu / elapsed * 100,
            "request_bytes": request_size, "records": n, "expected": total}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--partitions", type=int, default=500)
    ap.add_argument("--rate", type=int, default=200, help="records/s produced")
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--out", help="append the report to this Markdown file")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as d, BrokerProcess(Path(d) / "data", http_port=0) as broker:
        for _ in range(args.repeat):
            for sessions in (True, False, None):
                row = run(broker, args.partitions, args.rate, args.seconds, sessions)
                assert row["records"] == row["expected"], row
                rows.append(row)
                print(row, flush=True)
    # what the fetches cost: the broker's CPU above the producer-only rows' (median rate)
    alone_pct = statistics.median(r["broker_cpu_pct"] for r in rows if r["sessions"] is None)
    for r in rows:
        if r["fetches"]:
            r["us_per_fetch"] = (r["broker_cpu_s"] - alone_pct / 100 * r["elapsed_s"]) / r["fetches"] * 1e6
    lines = [f"## Fetch sessions (KIP-227), {time.strftime('%Y-%m-%d %H:%M')} UTC", "",
             f"`python benchmarks/bench_fetch_sessions.py --partitions {args.partitions} --rate {args.rate} "
             f"--seconds {args.seconds:g} --repeat {args.repeat}`; {describe_machine()}; load average "
             f"{os.getloadavg()[0]:.1f} at the end. One broker, one kafka-python consumer of all "
             f"{args.partitions} partitions, {args.rate} records/s of 100 B to random partitions. Broker CPU "
             f"per Fetch: the broker's CPU above the producer-only rows' median ({alone_pct:.1f} % of a core), "
             "per Fetch answered.", "",
             "| consumer | Fetches/s | broker CPU per Fetch | broker CPU | consumer CPU | request size | records read |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for sessions, label in ((True, "fetch sessions"), (False, "no sessions"), (None, "none (producer only)")):
        for r in (r for r in rows if r["sessions"] is sessions):
            per_fetch = f"{r['us_per_fetch']:,.0f} us" if "us_per_fetch" in r else "-"
            size = f"{r['request_bytes']:,.0f} B" if sessions is not None else "-"
            consumer = f"{r['consumer_cpu_pct']:.1f} %" if sessions is not None else "-"
            lines.append(f"| {label} | {r['fetches_per_s']:.1f} | {per_fetch} | {r['broker_cpu_pct']:.1f} % | "
                         f"{consumer} | {size} | {r['records']:,} |")
    on = [r["us_per_fetch"] for r in rows if r["sessions"] is True]
    off = [r["us_per_fetch"] for r in rows if r["sessions"] is False]
    lines += ["", f"Median broker CPU per Fetch: {statistics.median(on):,.0f} us with sessions, "
              f"{statistics.median(off):,.0f} us without.", ""]
    report = "\n".join(lines)
    print(report)
    if args.out:
        with open(args.out, "a") as f:
            f.write("\n" + report)


if __name__ == "__main__":
    main()
