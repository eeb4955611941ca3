"""Client quotas: what they cost a broker, and how closely they hold a client to its rate.

One ``litemq serve`` process (durable default), a 6-partition topic, confluent-kafka clients:

- **Cost**: produce throughput (``--records`` x 100 B, ``linger.ms=5``, acks=1) with no quota
  stored (nothing is measured), then with quotas stored that do not apply to the producer (every
  request looks its quota up and finds none), then with a ``producer_byte_rate`` far above what
  the client reaches (every request is recorded against a rate). Each row is the median of
  ``--repeat`` runs, alternated.
- **Enforcement**: a producer with ``producer_byte_rate`` = ``--rate`` bytes/s, and a consumer
  with ``consumer_byte_rate`` = ``--rate``, each pushing as fast as it can for ``--seconds``; the
  bytes acknowledged (delivery reports) or received, averaged over the whole run and over the
  run after its first 11 s. Kafka's rate (11 samples of 1 s, at least 10 s of window) lets a new
  client send 10 s worth of its quota at once, and when a sample holding a burst expires, the
  next burst follows: a throttled client alternates bursts and throttles, and what it gets is
  the quota on average, not each second (the per-second figures are printed too). Also the
  throttle reports librdkafka gave (``throttle_cb``). librdkafka does not hold its produce
  requests back for a throttle time; the broker's muting of the connection is what holds it.

usage: python benchmarks/bench_quotas.py [--records N] [--repeat R] [--rate B] [--seconds S] [--out FILE]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from litemq.testing.process import BrokerProcess
from litemq.testing.wire import WireClient

PARTITIONS = 6


def alter(port: int, entries: list) -> None:
    with WireClient("127.0.0.1", port) as w:
        resp = w.request(49, 1, {"validate_only": False, "entries": [
            {"entity": [{"entity_type": t, "entity_name": n} for t, n in entity],
             "ops": [{"key": k, "value": float(v or 0), "remove": v is None} for k, v in ops]}
            for entity, ops in entries]})
    assert all(e.error_code == 0 for e in resp.entries), resp


def produce_rate(bs: str, topic: str, n: int, client_id: str) -> float:
    p = Producer({"bootstrap.servers": bs, "client.id": client_id, "linger.ms": 5, "acks": 1,
                  "batch.num.messages": 10000, "queue.buffering.max.messages": 2_000_000})
    p.produce(topic, b"w")
    p.flush(30)
    payload = b"x" * 100
    started = time.perf_counter()
    for i in range(n):
        while True:
            try:
                p.produce(topic, payload, partition=i % PARTITIONS)
                break
            except BufferError:
                p.poll(0.01)
    p.flush(120)
    return n / (time.perf_counter() - started)


def enforce_produce(bs: str, topic: str, seconds: float, client_id: str) -> tuple[list[int], list[float]]:
    """Bytes acknowledged per second of the run, and the throttle times reported (s)."""
    throttles: list[float] = []
    p = Producer({"bootstrap.servers": bs, "client.id": client_id, "linger.ms": 5, "acks": 1,
                  "queue.buffering.max.kbytes": 4096, "throttle_cb": lambda e: throttles.append(e.throttle_time)})
    per_second = [0] * int(seconds)
    started = time.monotonic()

    def acked(err, msg) -> None:
        i = int(time.monotonic() - started)
        if err is None and i < len(per_second):
            per_second[i] += len(msg.value())

    payload = b"p" * 1000
    while time.monotonic() - started < seconds:
        try:
            p.produce(topic, payload, on_delivery=acked)
        except BufferError:
            p.poll(0.01)
        p.poll(0)
    p.purge()
    p.flush(10)
    return per_second, throttles


def enforce_fetch(bs: str, topic: str, seconds: float, client_id: str) -> tuple[list[int], list[float]]:
    throttles: list[float] = []
    c = Consumer({"bootstrap.servers": bs, "group.id": f"bench-{client_id}", "client.id": client_id,
                  "enable.auto.commit": False, "throttle_cb": lambda e: throttles.append(e.throttle_time)})
    c.assign([TopicPartition(topic, i, OFFSET_BEGINNING) for i in range(PARTITIONS)])
    per_second = [0] * int(seconds)
    started = time.monotonic()
    while (elapsed := time.monotonic() - started) < seconds:
        for m in c.consume(1000, 0.2):
            if m.error() is None and int(elapsed) < len(per_second):
                per_second[int(elapsed)] += len(m.value() or b"")
    c.close()
    return per_second, throttles


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=300_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--rate", type=int, default=5_000_000, help="bytes/s of the enforcement rows")
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    lines = [f"## Run of {time.strftime('%Y-%m-%d %H:%M', time.gmtime())} UTC", "",
             f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
             f"Python {platform.python_version()}; one `litemq serve`, {PARTITIONS} partitions.", ""]
    with tempfile.TemporaryDirectory() as tmp, BrokerProcess(Path(tmp) / "data") as broker:
        bs = broker.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bs})
        for t in ("q-cost", "q-enf"):
            admin.create_topics([NewTopic(t, PARTITIONS, 1)])[t].result(30)
        rows: dict[str, list[float]] = {"none stored": [], "stored, none applies": [], "applies, not reached": []}
        for _ in range(a.repeat):
            alter(broker.port, [([("client-id", "someone-else")], [("producer_byte_rate", None)]),
                                ([("client-id", "bench")], [("producer_byte_rate", None)])])
            rows["none stored"].append(produce_rate(bs, "q-cost", a.records, "bench"))
            alter(broker.port, [([("client-id", "someone-else")], [("producer_byte_rate", 1000)])])
            rows["stored, none applies"].append(produce_rate(bs, "q-cost", a.records, "bench"))
            alter(broker.port, [([("client-id", "bench")], [("producer_byte_rate", 10**12)])])
            rows["applies, not reached"].append(produce_rate(bs, "q-cost", a.records, "bench"))
        lines += ["### Cost (produce, 100 B records, acks=1, linger.ms=5)", "",
                  "| quotas | msg/s (median) | runs |", "|---|---:|---|"]
        for name, rates in rows.items():
            lines.append(f"| {name} | {statistics.median(rates):,.0f} | "
                         f"{', '.join(f'{r:,.0f}' for r in rates)} |")
        alter(broker.port, [([("client-id", "bench")], [("producer_byte_rate", None)]),
                            ([("client-id", "capped-p")], [("producer_byte_rate", a.rate)]),
                            ([("client-id", "capped-c")], [("consumer_byte_rate", a.rate)])])
        lines += ["", f"### Enforcement at {a.rate:,} B/s for {a.seconds:.0f} s (1000 B records)", "",
                  "| client | whole run (B/s) | vs quota | after 11 s (B/s) | vs quota | throttle reports, median |",
                  "|---|---:|---:|---:|---:|---:|"]
        series = []
        produced = enforce_produce(bs, "q-enf", a.seconds, "capped-p")
        produce_rate(bs, "q-enf", int(a.rate * (a.seconds + 20) / 100), "filler")  # enough for the consumer
        for name, (per_second, throttles) in (
                ("producer", produced),
                ("consumer", enforce_fetch(bs, "q-enf", a.seconds, "capped-c"))):
            whole = sum(per_second) / len(per_second)
            later = per_second[11:]
            late = sum(later) / max(len(later), 1)
            lines.append(f"| {name} | {whole:,.0f} | {whole / a.rate:.2f} | {late:,.0f} | {late / a.rate:.2f} | "
                         f"{len(throttles)}, {statistics.median(throttles) if throttles else 0:.2f} s |")
            series.append(f"- {name}, MB per second: {', '.join(f'{b / 1e6:.1f}' for b in per_second)}")
        lines += [""] + series
    text = "\n".join(lines) + "\n"
    print(text)
    if a.out:
        with open(a.out, "a") as f:
            f.write("\n" + text)


if __name__ == "__main__":
    main()
