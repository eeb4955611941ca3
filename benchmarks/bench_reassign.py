"""Partition reassignment benchmark: MB/s moved unthrottled and throttled, and the produce latency
while a move runs (issue 20).

On a 4-broker ``LocalCluster`` (loopback), a 1-partition topic of replication factor 3 on
{1,2,3} is filled with ``--mb`` MB (100 KB records), then moved to {1,2,4} without a throttle and
back to {1,2,3} with ``litemq partition reassign --execute --throttle`` (``--throttle-mb`` MB/s;
``--verify`` removes it afterwards). A move is timed from the CLI's return (the move started)
until the partition leader reports the target as its voters with no learner. Meanwhile a
confluent-kafka producer (acks=all, idempotent, ``linger.ms=5``) writes ``--rate`` msg/s of 1 KiB
to another RF 3 topic led by broker 1 (the moving partition's leader too); its p50/p99
(librdkafka's per-message latency) are compared with a run of the same length without a move.

    python benchmarks/bench_reassign.py [--mb 64] [--throttle-mb 10] [--rate 500] [--out docs/benchmarks-cluster.md]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from litemq.testing.cluster import LocalCluster

sys.path.insert(0, str(Path(__file__).parent))
from bench_broker import machine, pct  # noqa: E402

OVERRIDES = {"broker.heartbeat.interval.ms": "250", "broker.session.timeout.ms": "2500"}
MOVING, PRODUCED = "bench-move", "bench-produce"


class RateProducer(threading.Thread):
    """Produces ``rate`` msg/s of 1 KiB (acks=all, idempotent) until stopped; latencies in ms."""

    def __init__(self, bs: str, rate: int) -> None:
        super().__init__(daemon=True)
        self.p = Producer({"bootstrap.servers": bs, "acks": "all", "enable.idempotence": True, "linger.ms": 5})
        self.p.produce(PRODUCED, b"warm-up", partition=0)  # producer id, metadata, connections: not timed
        self.p.flush(30)
        self.rate = rate
        self.stop_flag = threading.Event()
        self.lat: list[float] = []
        self.errors = 0

    def _cb(self, err, msg) -> None:
        if err is None:
            self.lat.append(msg.latency() * 1000)
        else:
            self.errors += 1

    def run(self) -> None:
        payload = os.urandom(1024)
        start, n = time.monotonic(), 0
        while not self.stop_flag.is_set():
            due = start + n / self.rate
            now = time.monotonic()
            if due > now:
                self.p.poll(min(due - now, 0.01))
                continue
            self.p.produce(PRODUCED, payload, partition=0, on_delivery=self._cb)
            self.p.poll(0)
            n += 1
        self.p.flush(30)

    def stop(self) -> list[float]:
        self.stop_flag.set()
        self.join()
        return self.lat


def _cli(bs: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "litemq.cli", "partition", "reassign", "-b", bs, *args],
                          capture_output=True, text=True, timeout=300)


def _voters(cluster: LocalCluster) -> list[int] | None:
    for st in cluster.statuses().values():
        for pt in st["partitions"]:
            if pt["topic"] == MOVING and pt["role"] == "leader":
                return pt["raft_voters"] if not pt["raft_learners"] else None
    return None


def move(cluster: LocalCluster, tmp: Path, target: list[int], throttle: int | None, rate: int) -> dict:
    bs = cluster.bootstrap_servers
    plan = tmp / f"plan-{'-'.join(map(str, target))}.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": MOVING, "partition": 0, "replicas": target}]}))
    prod = RateProducer(bs, rate)
    prod.start()
    extra = ["--throttle", str(throttle)] if throttle else []
    r = _cli(bs, "--execute", "--reassignment-json-file", str(plan), *extra)
    if r.returncode != 0:
        raise SystemExit(f"--execute failed: {r.stdout}{r.stderr}")
    started = time.monotonic()
    while _voters(cluster) != sorted(target):
        if time.monotonic() - started > 600:
            raise SystemExit("the move did not complete in 600 s")
        time.sleep(0.1)
    took = time.monotonic() - started
    lat = prod.stop()
    deadline = time.monotonic() + 60
    while _cli(bs, "--verify", "--reassignment-json-file", str(plan)).returncode != 0:  # clears the throttles
        if time.monotonic() > deadline:
            raise SystemExit("--verify never reported completion")
        time.sleep(1)
    return {"took_s": took, "lat": lat, "errors": prod.errors}


def baseline(bs: str, seconds: float, rate: int) -> dict:
    prod = RateProducer(bs, rate)
    prod.start()
    time.sleep(seconds)
    return {"lat": prod.stop(), "errors": prod.errors}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=int, default=64, help="MB in the moving partition")
    ap.add_argument("--throttle-mb", type=float, default=10.0, help="the throttled move's --throttle, MB/s")
    ap.add_argument("--rate", type=int, default=500, help="msg/s of 1 KiB produced during the moves")
    ap.add_argument("--out", type=Path, default=None, help="append a Markdown report here")
    args = ap.parse_args()
    load0 = os.getloadavg()[0]
    size = args.mb * 1_000_000
    with tempfile.TemporaryDirectory(prefix="bench-reassign-") as d, LocalCluster(Path(d) / "c", 4, OVERRIDES) as cluster:
        bs = cluster.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bs})
        for t in (MOVING, PRODUCED):
            admin.create_topics([NewTopic(t, 1, replica_assignment=[[1, 2, 3]])], operation_timeout=30)[t].result(60)
            cluster.wait_leaders(t, 1)
        p = Producer({"bootstrap.servers": bs, "acks": "all", "linger.ms": 5})
        value = os.urandom(100_000)
        for _ in range(size // len(value)):
            p.produce(MOVING, value, partition=0)
            p.poll(0)
        p.flush(300)
        free = move(cluster, Path(d), [1, 2, 4], None, args.rate)
        throttle = int(args.throttle_mb * 1_000_000)
        held = move(cluster, Path(d), [1, 2, 3], throttle, args.rate)
        base = baseline(bs, max(free["took_s"], 10.0), args.rate)
    m = machine()
    load = (load0, os.getloadavg()[0])

    def row(name: str, r: dict) -> str:
        lat = r["lat"]
        mbs = f"{size / r['took_s'] / 1e6:.1f} MB/s in {r['took_s']:.1f} s" if "took_s" in r else "-"
        return (f"| {name} | {mbs} | {pct(lat, 0.5):.1f} | {pct(lat, 0.99):.1f} | {len(lat)} | {r['errors']} |"
                if lat else f"| {name} | {mbs} | - | - | 0 | {r['errors']} |")

    lines = ["| run | moved | produce p50 ms | p99 ms | acks | errors |", "|---|---|---|---|---|---|",
             row("no move", base), row("unthrottled move", free),
             row(f"move with --throttle {throttle}", held)]
    print("\n".join(lines))
    print(f"{m}; load average {load[0]:.1f} at the start, {load[1]:.1f} at the end")
    if args.out:
        with open(args.out, "a") as f:
            f.write(f"\n## Partition reassignment (`benchmarks/bench_reassign.py`, {time.strftime('%Y-%m-%d')})\n\n"
                    f"Command: `python benchmarks/bench_reassign.py --mb {args.mb} --throttle-mb {args.throttle_mb} "
                    f"--rate {args.rate} --out docs/benchmarks-cluster.md`. A 4-broker cluster; a {args.mb} MB "
                    f"partition (RF 3) moves {{1,2,3}} -> {{1,2,4}} unthrottled, then back with `--throttle`; an "
                    f"acks=all idempotent producer writes {args.rate} msg/s of 1 KiB to another RF 3 partition "
                    "led by the same broker during each move and during a run without a move.\n\n"
                    + "\n".join(lines) + f"\n\nMachine: {m}; load average {load[0]:.1f} at the start, "
                    f"{load[1]:.1f} at the end (**shared machine**: other engineers' tests ran).\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
