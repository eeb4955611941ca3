"""Produce/consume benchmark of one ``litemq serve`` process with confluent-kafka (issue 2).

    python benchmarks/bench_broker.py [--records N] [--out docs/benchmarks.md]

Runs, on one broker (1 topic, 3 partitions, durable default fsync policy):
- produce throughput (msg/s, MB/s) and produce latency p50/p99 (librdkafka's per-message
  ``latency()``: produce() call to delivery report) for 100 B and 1 KiB records, acks=1 and all;
- consume throughput (msg/s, MB/s) reading everything back from the beginning, once the
  high watermark covers it (so the read path is measured, not the fsync rate);
- end-to-end latency p50/p99 (CreateTime stamped by the producer to poll() in a consumer
  process already waiting at the log end) at a moderate rate;
- the broker's peak RSS (VmHWM).
The machine (CPU model, cores, memory, disk) is printed with the results.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from litemq.testing.machine import describe_machine
from litemq.testing.process import BrokerProcess

PARTITIONS = 3


def machine() -> str:
    disk = subprocess.run(["df", "-h", "/tmp"], capture_output=True, text=True).stdout.splitlines()[-1].split()[0]
    return f"{describe_machine()}, /tmp on {disk}"


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def produce(bs: str, topic: str, n: int, size: int, acks: str) -> dict:
    payload = os.urandom(size)
    lat: list[float] = []

    def cb(err, msg):
        if err is None:
            lat.append(msg.latency())

    p = Producer({"bootstrap.servers": bs, "acks": acks, "linger.ms": 5, "batch.size": 1_000_000,
                  "queue.buffering.max.messages": 1_000_000, "queue.buffering.max.kbytes": 1_048_576,
                  "enable.idempotence": acks == "all"})
    t0 = time.perf_counter()
    for i in range(n):
        while True:
            try:
                p.produce(topic, payload, on_delivery=cb)
                break
            except BufferError:
                p.poll(0.001)
        if i % 10000 == 0:
            p.poll(0)
    p.flush(120)
    dt = time.perf_counter() - t0
    assert len(lat) == n, f"{n - len(lat)} deliveries failed"
    return {"msg_s": n / dt, "mb_s": n * size / dt / 1e6, "p50_ms": pct(lat, 0.5) * 1000, "p99_ms": pct(lat, 0.99) * 1000}


def wait_committed(bs: str, topic: str, n: int) -> float:
    """Wait until the high watermarks cover all ``n`` records (acks=1 returns before the
    grouped fsync commits them); returns the seconds waited."""
    c = Consumer({"bootstrap.servers": bs, "group.id": "bench-wm"})
    t0 = time.perf_counter()
    while sum(c.get_watermark_offsets(TopicPartition(topic, p), timeout=10, cached=False)[1]
              for p in range(PARTITIONS)) < n:
        time.sleep(0.01)
    c.close()
    return time.perf_counter() - t0


def consume(bs: str, topic: str, n: int, size: int) -> dict:
    wait_committed(bs, topic, n)
    c = Consumer({"bootstrap.servers": bs, "group.id": "bench", "enable.auto.commit": False,
                  "fetch.max.bytes": 52428800, "max.partition.fetch.bytes": 10485760,
                  "queued.min.messages": 1000000, "fetch.queue.backoff.ms": 0})
    c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
    got = 0
    t0 = None
    while got < n:
        msgs = c.consume(10000, 1.0)
        if msgs and t0 is None:
            t0 = time.perf_counter()
        got += len(msgs)
    dt = time.perf_counter() - t0
    c.close()
    return {"msg_s": n / dt, "mb_s": n * size / dt / 1e6}


def _e2e_consumer(bs: str, topic: str, n: int, q) -> None:
    c = Consumer({"bootstrap.servers": bs, "group.id": "bench-e2e", "enable.auto.commit": False,
                  "fetch.wait.max.ms": 500, "fetch.min.bytes": 1})
    c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
    lat = []
    q.put("ready")
    while len(lat) < n:
        m = c.poll(1.0)
        if m is not None and m.error() is None:
            lat.append(time.time() * 1000 - m.timestamp()[1])
    c.close()
    q.put(lat)


def end_to_end(bs: str, topic: str, n: int, rate: int, acks: str) -> dict:
    q = mp.get_context("spawn").Queue()
    proc = mp.get_context("spawn").Process(target=_e2e_consumer, args=(bs, topic, n, q))
    proc.start()
    q.get(timeout=60)
    time.sleep(2)
    p = Producer({"bootstrap.servers": bs, "acks": acks, "linger.ms": 0})
    for i in range(n):
        p.produce(topic, b"x" * 100)
        p.poll(0)
        time.sleep(1 / rate)
    p.flush(30)
    lat = q.get(timeout=120)
    proc.join()
    return {"p50_ms": statistics.median(lat), "p99_ms": pct(lat, 0.99)}


def peak_rss_mb(pid: int) -> float:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return -1


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=1_000_000, help="records per 100 B run (1 KiB runs use 1/4)")
    ap.add_argument("--out", type=Path, default=None, help="append a Markdown report here")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp, BrokerProcess(Path(tmp) / "data") as broker:
        bs = broker.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bs})
        for size in (100, 1024):
            n = args.records if size == 100 else args.records // 4
            for acks in ("1", "all"):
                topic = f"bench-{size}-{acks}"
                admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(timeout=30)
                pr = produce(bs, topic, n, size, acks)
                cr = consume(bs, topic, n, size)
                rows.append((size, acks, n, pr, cr))
                print(f"{size:>5} B acks={acks:<3} produce {pr['msg_s']:>10,.0f} msg/s {pr['mb_s']:7.1f} MB/s "
                      f"p50 {pr['p50_ms']:7.1f} ms p99 {pr['p99_ms']:7.1f} ms | consume {cr['msg_s']:>10,.0f} msg/s "
                      f"{cr['mb_s']:7.1f} MB/s", flush=True)
        e2e = {}
        for acks in ("1", "all"):
            topic = f"bench-e2e-{acks}"
            admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(timeout=30)
            e2e[acks] = end_to_end(bs, topic, 2000, 500, acks)
            print(f"end-to-end acks={acks}: p50 {e2e[acks]['p50_ms']:.1f} ms p99 {e2e[acks]['p99_ms']:.1f} ms", flush=True)
        rss = peak_rss_mb(broker.proc.pid)
    print(f"broker peak RSS: {rss:.0f} MB")
    m = machine()
    print(m)
    if args.out:
        lines = [f"\n## Broker produce/consume ({time.strftime('%Y-%m-%d')})\n", f"Machine: {m}. One `litemq serve` "
                 f"process, topic with {PARTITIONS} partitions, durable fsync default, confluent-kafka "
                 f"(librdkafka) producer (linger.ms=5) and consumer on the same machine. "
                 f"Command: `python benchmarks/bench_broker.py --records {args.records}`.\n",
                 "| record | acks | records | produce msg/s | produce MB/s | produce p50 ms | produce p99 ms | consume msg/s | consume MB/s |",
                 "|---|---|---|---|---|---|---|---|---|"]
        for size, acks, n, pr, cr in rows:
            lines.append(f"| {size} B | {acks} | {n:,} | {pr['msg_s']:,.0f} | {pr['mb_s']:.1f} | {pr['p50_ms']:.1f} | "
                         f"{pr['p99_ms']:.1f} | {cr['msg_s']:,.0f} | {cr['mb_s']:.1f} |")
        lines.append("")
        for acks, r in e2e.items():
            lines.append(f"- End-to-end latency (produce -> consumer poll, 500 msg/s, acks={acks}): "
                         f"p50 {r['p50_ms']:.1f} ms, p99 {r['p99_ms']:.1f} ms")
        lines.append(f"- Broker peak RSS (VmHWM) over the whole run: {rss:.0f} MB\n")
        with open(args.out, "a") as f:
            f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    sys.exit(main())
