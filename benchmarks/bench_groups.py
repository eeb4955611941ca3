"""Consumer group benchmark of one ``litemq serve`` process with confluent-kafka (issue 4).

    python benchmarks/bench_groups.py [--members 1,10,50] [--out docs/benchmarks-groups.md]

Measures, on one broker (durable default fsync policy):

- **rebalance time**: N consumers (one librdkafka instance per thread, in this process) are
  created at once on a topic with 50 partitions holding records; the time from the first
  ``subscribe()`` to the moment every member has its assignment and has consumed a record from
  each of its partitions ("join to all consuming"). Then one more member joins the stable
  group and the time until all N+1 consume again is measured (a full eager rebalance).
  Both with ``group.initial.rebalance.delay.ms`` 0 (the test harness setting) and with 3000 (the
  default of Kafka and LiteMQ),
  for the initial join only.
- **OffsetCommit rate**: synchronous commits (each answered only once fsynced) from 1 and from
  8 consumers in parallel, for a few seconds each; commits/s and p50/p99 latency.

The broker runs in its own process; clients share the machine with it (numbers are for the
whole machine, not the broker alone).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from litemq.testing.process import BrokerProcess

sys.path.insert(0, str(Path(__file__).parent))
from bench_broker import machine, pct  # noqa: E402

PARTITIONS = 50


def make_topic(bs: str, name: str, partitions: int, records_per_partition: int) -> None:
    a = AdminClient({"bootstrap.servers": bs})
    a.create_topics([NewTopic(name, partitions, 1)])[name].result(30)
    p = Producer({"bootstrap.servers": bs, "linger.ms": 5})
    for part in range(partitions):
        for i in range(records_per_partition):
            p.produce(name, b"x" * 100, partition=part)
    p.flush(60)


class Member(threading.Thread):
    """One group consumer polling in its own thread; records when all its partitions delivered."""

    def __init__(self, bs: str, topic: str, group: str) -> None:
        super().__init__(daemon=True)
        self.consumer = Consumer({"bootstrap.servers": bs, "group.id": group, "auto.offset.reset": "earliest",
                                  "enable.auto.commit": False, "session.timeout.ms": 30000,
                                  "heartbeat.interval.ms": 500, "max.poll.interval.ms": 60000,
                                  "fetch.wait.max.ms": 50})
        self.topic = topic
        self.assigned: set[int] = set()
        self.has_assignment = False
        self.seen: set[int] = set()
        self.consuming_at: float | None = None
        self.generation_started: float | None = None
        self.stop = threading.Event()

    def on_assign(self, consumer, parts) -> None:
        self.assigned = {tp.partition for tp in parts}
        self.has_assignment = True
        self.seen = set()
        self.consuming_at = None
        # Start every owned partition at its beginning so there is a record to deliver.
        for tp in parts:
            tp.offset = 0
        consumer.assign(parts)

    def on_revoke(self, consumer, parts) -> None:
        self.assigned = set()
        self.has_assignment = False
        self.consuming_at = None
        consumer.unassign()

    def run(self) -> None:
        self.consumer.subscribe([self.topic], on_assign=self.on_assign, on_revoke=self.on_revoke)
        while not self.stop.is_set():
            m = self.consumer.poll(0.05)
            if m is not None and not m.error() and m.partition() in self.assigned:
                self.seen.add(m.partition())
                if self.consuming_at is None and self.seen >= self.assigned:
                    self.consuming_at = time.monotonic()
        self.consumer.close()

    def consuming(self) -> bool:
        """Has its assignment and consumed from each of its partitions (an empty one counts)."""
        return self.has_assignment and (not self.assigned or self.consuming_at is not None)


def wait_all_consuming(members: list[Member], timeout_s: float) -> float:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        owned = [m.assigned for m in members]
        if all(m.consuming() for m in members) and sum(map(len, owned)) == PARTITIONS:
            return time.monotonic()
        time.sleep(0.01)
    raise TimeoutError(f"{sum(m.consuming() for m in members)}/{len(members)} members consuming")


def bench_rebalance(bs: str, topic: str, n: int, tag: str) -> tuple[float, float]:
    group = f"bench-{tag}-{n}"
    members = [Member(bs, topic, group) for _ in range(n)]
    t0 = time.monotonic()
    for m in members:
        m.start()
    join_s = wait_all_consuming(members, 180) - t0
    extra = Member(bs, topic, group)
    t1 = time.monotonic()
    extra.start()
    members.append(extra)
    time.sleep(0.05)
    rejoin_s = wait_all_consuming(members, 180) - t1
    for m in members:
        m.stop.set()
    for m in members:
        m.join(30)
    return join_s, rejoin_s


def bench_commits(bs: str, topic: str, clients: int, seconds: float) -> tuple[float, float, float]:
    latencies: list[float] = []
    lock = threading.Lock()
    stop = time.monotonic() + seconds

    def run(i: int) -> None:
        c = Consumer({"bootstrap.servers": bs, "group.id": f"commit-bench-{clients}", "enable.auto.commit": False})
        offset = 0
        mine = []
        c.commit(offsets=[TopicPartition(topic, i % PARTITIONS, 0)], asynchronous=False)  # connect
        while time.monotonic() < stop:
            offset += 1
            t = time.perf_counter()
            c.commit(offsets=[TopicPartition(topic, i % PARTITIONS, offset)], asynchronous=False)
            mine.append(time.perf_counter() - t)
        c.close()
        with lock:
            latencies.extend(mine)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return len(latencies) / seconds, statistics.median(latencies) * 1000, pct(latencies, 0.99) * 1000


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--members", default="1,10,50")
    ap.add_argument("--commit-seconds", type=float, default=5)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    sizes = [int(x) for x in a.members.split(",")]
    lines = [f"Machine: {machine()}", ""]
    with tempfile.TemporaryDirectory() as tmp:
        results = {}
        for delay in (0, 3000):
            with BrokerProcess(Path(tmp) / f"d{delay}", overrides={
                    "group.initial.rebalance.delay.ms": str(delay), "num.partitions": "1"}) as broker:
                bs = broker.bootstrap_servers
                make_topic(bs, "rb", PARTITIONS, 10)
                for n in sizes:
                    results[(delay, n)] = bench_rebalance(bs, "rb", n, f"d{delay}")
                    print(f"delay {delay} ms, {n} members: join {results[(delay, n)][0]:.2f}s, "
                          f"+1 member {results[(delay, n)][1]:.2f}s", flush=True)
                if delay == 0:
                    commits = {c: bench_commits(bs, "rb", c, a.commit_seconds) for c in (1, 8)}
                    for c, (rate, p50, p99) in commits.items():
                        print(f"commits, {c} client(s): {rate:.0f}/s p50 {p50:.2f} ms p99 {p99:.2f} ms", flush=True)
    lines += ["| members | initial join, delay 0 ms (s) | initial join, delay 3000 ms (s) | one more member joins (s) |",
              "|---:|---:|---:|---:|"]
    for n in sizes:
        lines.append(f"| {n} | {results[(0, n)][0]:.2f} | {results[(3000, n)][0]:.2f} | {results[(0, n)][1]:.2f} |")
    lines += ["", "| committing clients | commits/s | p50 latency (ms) | p99 latency (ms) |", "|---:|---:|---:|---:|"]
    for c, (rate, p50, p99) in commits.items():
        lines.append(f"| {c} | {rate:.0f} | {p50:.2f} | {p99:.2f} |")
    text = "\n".join(lines)
    print(text)
    if a.out:
        Path(a.out).write_text(text + "\n")


if __name__ == "__main__":
    main()
