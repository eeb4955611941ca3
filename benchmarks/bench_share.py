"""Share-group (KIP-932) consume throughput next to a classic consumer group's.

One ``litemq serve`` process (default durable fsync policy), a 1-partition topic filled with
``--records`` records of ``--size`` bytes, then for each consumer count (``--consumers``, default
1,4,16) a fresh share group of that many confluent-kafka ShareConsumers (one per thread,
implicit acknowledgement: each poll accepts the previous one) reads until every record has been
delivered; records/s = records / (consumers created -> last new record, so joining the group
counts), and redeliveries = deliveries with a delivery count above 1 before that moment (records
released by consumers closing afterwards are not counted). The classic row is one
confluent-kafka Consumer (a 1-partition topic has one owner in a classic group) timed the same
way.

usage: python benchmarks/bench_share.py [--records N] [--size B] [--consumers 1,4,16] [--out FILE]
"""

from __future__ import annotations

import argparse
import platform
import tempfile
import threading
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, NewTopic

from litemq.testing.process import BrokerProcess


def fill(bs: str, topic: str, n: int, size: int) -> None:
    a = AdminClient({"bootstrap.servers": bs})
    a.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    p = Producer({"bootstrap.servers": bs, "linger.ms": 20, "batch.num.messages": 1000})
    payload = b"x" * size
    for _ in range(n):
        while True:
            try:
                p.produce(topic, payload)
                break
            except BufferError:
                p.poll(0.05)
    p.flush(60)


def run_share(bs: str, topic: str, group: str, consumers: int, n: int) -> tuple[float, int]:
    seen: set[int] = set()
    redeliveries = [0]
    lock = threading.Lock()
    stop = threading.Event()
    done_at = [None]

    def worker() -> None:
        c = ShareConsumer({"bootstrap.servers": bs, "group.id": group, "log_level": 3})
        c.subscribe([topic])
        while not stop.is_set():
            msgs = c.poll(0.2)
            now = time.perf_counter()
            with lock:
                for m in msgs:
                    if m.error() is None and done_at[0] is None:
                        if m.delivery_count() > 1:
                            redeliveries[0] += 1
                        seen.add(m.offset())
                if len(seen) >= n and done_at[0] is None:
                    done_at[0] = now
                    stop.set()
        c.close()

    threads = [threading.Thread(target=worker) for _ in range(consumers)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join(600)
    return n / (done_at[0] - started), redeliveries[0]


def run_classic(bs: str, topic: str, n: int) -> float:
    started = time.perf_counter()
    c = Consumer({"bootstrap.servers": bs, "group.id": "classic-bench", "auto.offset.reset": "earliest",
                  "log_level": 3})
    c.subscribe([topic])
    got = 0
    while got < n:
        got += sum(1 for m in c.consume(500, 0.2) if m.error() is None)
    elapsed = time.perf_counter() - started
    c.close()
    return n / elapsed


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=50_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--consumers", default="1,4,16")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    lines = [f"machine: {platform.machine()} {platform.processor() or ''}, Python {platform.python_version()}, "
             f"{args.records} records of {args.size} bytes, 1 partition", "",
             "| group | consumers | records/s | redeliveries |", "|---|---:|---:|---:|"]
    with tempfile.TemporaryDirectory() as d:
        b = BrokerProcess(Path(d) / "data", overrides={"share.auto.offset.reset": "earliest"}).start()
        try:
            bs = b.bootstrap_servers
            fill(bs, "bench", args.records, args.size)
            lines.append(f"| classic | 1 | {run_classic(bs, 'bench', args.records):,.0f} | - |")
            for k in [int(x) for x in args.consumers.split(",")]:
                rate, redelivered = run_share(bs, "bench", f"share-{k}", k, args.records)
                lines.append(f"| share | {k} | {rate:,.0f} | {redelivered} |")
                print(lines[-1], flush=True)
        finally:
            b.stop()
    text = "\n".join(lines)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")


if __name__ == "__main__":
    main()
