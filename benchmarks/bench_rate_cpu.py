"""Broker CPU per record and produce latency at a fixed rate on a 3-broker cluster (issue 19).

Starts a 3-broker ``LocalCluster``, creates a topic (6 partitions, ``--rf``), warms an
idempotent acks=all confluent-kafka producer (``--plain``: without idempotence, librdkafka's
default) up (one acknowledged record per partition), then
produces ``--rate`` records/s of 100 B round-robin over the partitions for ``--seconds`` and
prints, per run: p50/p99/max of librdkafka's per-message latency; the three brokers' CPU per
acknowledged record from ``/proc/<pid>/stat`` (user and system), split into the event-loop
thread (``main``: the thread whose id is the process id) and every other thread (``other``: the
fsync thread); the benchmark process's own CPU per record; the whole machine's CPU per record
(``/proc/stat``, kernel threads included: where work moved into the kernel shows); Raft messages received per record
(the brokers' status RPC); voluntary and involuntary context switches and minor page faults per
record; and, from the brokers' ``/metrics`` (``litemq_sync_*``), the fsync thread's jobs per
record and their mean wait for the thread, run time (the fsync) and hand-back to the event loop. ``--topic-config
K=V`` sets topic configs (``flush.messages=9223372036854775807``: Kafka's default, no fsync -
what the replication path costs without durability).

At a rate the machine can sustain without queueing (1000 msg/s on 2 cores) nearly every record
is its own request, Raft entry and Ready, so CPU per record is the unbatched cost; near
saturation records share Readies and CPU per record falls as latency rises. Run it holding the
test lock (``flock /tmp/lmq/tests.lock python benchmarks/bench_rate_cpu.py``) so no test suite
runs at the same time. Figures: docs/benchmarks-cluster.md ("Fourth round").
"""

from __future__ import annotations

import argparse
import collections
import os
import pathlib
import shutil
import subprocess
import tempfile
import time
import urllib.request

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from prometheus_client.parser import text_string_to_metric_families

from litemq.testing.cluster import LocalCluster
from litemq.testing.process import BrokerProcess

import loop_counts as _loop_counts  # benchmarks/ is the script's directory, first on sys.path
from bench_cluster import machine_ticks

PARTITIONS = 6
RECORD = b"x" * 100
_TICKS = os.sysconf("SC_CLK_TCK")


def _process_stat(pid: int) -> tuple[tuple[float, float], int]:
    """((user, system) CPU seconds, minor page faults) of process ``pid``, from one read of its
    ``/proc/<pid>/stat``."""
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) / _TICKS, int(f[12]) / _TICKS), int(f[7])


def _threads_cpu_s(pid: int) -> collections.Counter:
    """CPU seconds of process ``pid``'s threads: ``main`` (tid == pid) and ``other``."""
    out: collections.Counter = collections.Counter()
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            f = open(f"/proc/{pid}/task/{tid}/stat").read().rsplit(")", 1)[1].split()
        except OSError:
            continue  # the thread exited
        out["main" if tid == str(pid) else "other"] += (int(f[11]) + int(f[12])) / _TICKS
    return out


def _ctx_switches(pid: int) -> tuple[int, int]:
    """(voluntary, involuntary) context switches of process ``pid``."""
    vol = inv = 0
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("voluntary_ctxt_switches"):
            vol = int(line.split()[1])
        elif line.startswith("nonvoluntary_ctxt_switches"):
            inv = int(line.split()[1])
    return vol, inv


def _snapshot(pids: list[int]) -> dict:
    stats = [_process_stat(p) for p in pids]
    return {"cpu": [cpu for cpu, _ in stats], "threads": [_threads_cpu_s(p) for p in pids],
            "ctx": [_ctx_switches(p) for p in pids], "me": os.times(), "minflt": [flt for _, flt in stats],
            "machine": machine_ticks()[0] / _TICKS}


class _Single:
    """One broker without ``--peers`` (no Raft) in the shape of a LocalCluster for :func:`run`."""

    def __init__(self, data_dir: pathlib.Path) -> None:
        self.broker = BrokerProcess(data_dir, http_port=0)
        self.node_ids = [1]

    def __enter__(self) -> "_Single":
        self.broker.__enter__()
        self.bootstrap_servers = self.broker.bootstrap_servers
        return self

    def __exit__(self, *exc) -> None:
        self.broker.__exit__(*exc)

    def wait_leaders(self, topic: str, partitions: int) -> None:
        pass

    def node(self, node_id: int) -> BrokerProcess:
        return self.broker

    def status(self, node_id: int) -> dict:
        return {}

    def http_url(self, node_id: int) -> str:
        return self.broker.http_url


_SYNC = ("litemq_sync_jobs_total", "litemq_sync_wait_seconds_total", "litemq_sync_run_seconds_total",
         "litemq_sync_hand_back_seconds_total")


def _sync_stats(c, node_ids) -> dict[str, float]:
    """The brokers' fsync-thread counters (``litemq_sync_*``), summed."""
    out = dict.fromkeys(_SYNC, 0.0)
    for n in node_ids:
        text = urllib.request.urlopen(c.http_url(n) + "/metrics", timeout=10).read().decode()
        for fam in text_string_to_metric_families(text):
            for sample in fam.samples:
                if sample.name in out:
                    out[sample.name] += sample.value
    return out


def run(rate: int, seconds: float, rf: int, py_spy: str | None = None, single: bool = False,
        topic_config: dict[str, str] | None = None, loop_counts: pathlib.Path | None = None,
        idempotent: bool = True) -> str:
    """One run on a fresh cluster (or, ``single``, one broker without ``--peers``) in a new
    directory, removed afterwards unless the run fails; returns the result line. With ``py_spy``
    (a directory), each broker is sampled by ``py-spy record`` during the run (collapsed stacks,
    ``<dir>/node-<id>.txt``; summarise with ``benchmarks/py_spy_top.py``). With ``loop_counts``
    (the directory of :func:`loop_counts.enable`, called before the brokers start), the line also
    gives the brokers' event-loop turns and callbacks per record over the measured window.
    ``idempotent=False`` produces with librdkafka's default ``enable.idempotence=false``."""
    base = pathlib.Path(tempfile.mkdtemp(prefix="bench-rate-cpu-"))
    try:
        line = _measure(base, rate, seconds, rf, py_spy, single, topic_config, loop_counts, idempotent)
    except BaseException:
        print(f"broker data and logs kept in {base}", flush=True)
        raise
    shutil.rmtree(base, ignore_errors=True)
    return line


def _measure(base: pathlib.Path, rate: int, seconds: float, rf: int, py_spy: str | None, single: bool,
             topic_config: dict[str, str] | None, loop_counts: pathlib.Path | None, idempotent: bool) -> str:
    with (_Single(base) if single else LocalCluster(base, 3, http=True)) as c:
        admin = AdminClient({"bootstrap.servers": c.bootstrap_servers})
        admin.create_topics([NewTopic("t", PARTITIONS, rf, config=topic_config or {})],
                            operation_timeout=15)["t"].result(30)
        c.wait_leaders("t", PARTITIONS)
        p = Producer({"bootstrap.servers": c.bootstrap_servers, "acks": "all", "linger.ms": 0,
                      "enable.idempotence": idempotent})
        latencies: list[float] = []
        errors: list[str] = []

        def on_delivery(err, msg) -> None:
            if err is None:
                latencies.append(msg.latency())
            else:
                errors.append(str(err))

        for i in range(PARTITIONS):
            p.produce("t", RECORD, partition=i, on_delivery=on_delivery)
        p.flush(10)
        latencies.clear()
        pids = [c.node(n).proc.pid for n in c.node_ids]
        msgs0 = sum(c.status(n).get("raft_messages_received", 0) for n in c.node_ids)
        spies = []
        if py_spy:
            os.makedirs(py_spy, exist_ok=True)
            spies = [subprocess.Popen(["py-spy", "record", "--pid", str(pid), "--format", "raw", "--rate", "250", "--gil",
                                       "--duration", str(int(seconds)), "--output",
                                       os.path.join(py_spy, f"node-{n}.txt")],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                     for n, pid in zip(c.node_ids, pids)]
        sync0 = _sync_stats(c, c.node_ids)
        before = _snapshot(pids)
        wall0 = time.time()
        t0 = time.monotonic()
        n = 0
        while time.monotonic() - t0 < seconds:
            target = (time.monotonic() - t0) * rate
            while n < target:
                p.produce("t", RECORD, partition=n % PARTITIONS, on_delivery=on_delivery)
                n += 1
            p.poll(0.001)
        left = p.flush(30)
        wall1 = time.time()
        if loop_counts is not None:
            _loop_counts.await_last_sample()  # before the brokers stop
        after = _snapshot(pids)
        sync1 = _sync_stats(c, c.node_ids)
        for spy in spies:
            spy.wait(30)
        msgs1 = sum(c.status(n).get("raft_messages_received", 0) for n in c.node_ids)
    acked = len(latencies)
    if not acked:
        return f"rf{rf} rate {rate}: nothing acknowledged ({len(errors)} errors: {errors[:3]})"
    latencies.sort()
    per = 1e6 / acked
    user = sum(a[0] - b[0] for a, b in zip(after["cpu"], before["cpu"]))
    system = sum(a[1] - b[1] for a, b in zip(after["cpu"], before["cpu"]))
    threads: collections.Counter = collections.Counter()
    for b, a in zip(before["threads"], after["threads"]):
        for k in a:
            threads[k] += a[k] - b.get(k, 0.0)
    vol = sum(a[0] - b[0] for a, b in zip(after["ctx"], before["ctx"]))
    inv = sum(a[1] - b[1] for a, b in zip(after["ctx"], before["ctx"]))
    minflt = sum(a - b for a, b in zip(after["minflt"], before["minflt"]))
    jobs = sync1[_SYNC[0]] - sync0[_SYNC[0]]
    wait, run_s, back = ((sync1[k] - sync0[k]) * 1000 / max(jobs, 1) for k in _SYNC[1:])
    me0, me1 = before["me"], after["me"]
    client = (me1.user - me0.user) + (me1.system - me0.system)
    loop = ""
    if loop_counts is not None:
        turns, callbacks = _loop_counts.per_record(loop_counts, pids, wall0, wall1, acked)
        loop = f"; event-loop turns/record {turns:.1f}, callbacks/record {callbacks:.1f}"
    name = ("single broker" if single else f"rf{rf}") + ("" if idempotent else " plain")
    return (f"{name} rate {rate}: produced {n}, acked {acked} (unacked {left}, errors {len(errors)}) "
            f"p50 {latencies[acked // 2] * 1000:.1f} ms p99 {latencies[int(acked * .99)] * 1000:.1f} ms "
            f"max {latencies[-1] * 1000:.1f} ms; brokers {(user + system) * per:.0f} us/record "
            f"(user {user * per:.0f}, system {system * per:.0f}; main {threads['main'] * per:.0f}, "
            f"other {threads['other'] * per:.0f}); client {client * per:.0f} us/record; "
            f"machine {(after['machine'] - before['machine']) * per:.0f} us/record; "
            f"Raft messages/record {(msgs1 - msgs0) / acked:.2f}; context switches/record "
            f"{vol / acked:.1f} voluntary, {inv / acked:.1f} involuntary; minor page faults/record "
            f"{minflt / acked:.2f}; fsync-thread jobs/record "
            f"{jobs / acked:.2f}, mean wait {wait:.2f} ms, run {run_s:.2f} ms, hand-back {back:.2f} ms; "
            f"load {open('/proc/loadavg').read().split()[0]}{loop}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rate", type=int, action="append", help="records/s (repeatable; default 1000 and 2000)")
    ap.add_argument("--seconds", type=float, default=10.0, help="duration of each run")
    ap.add_argument("--rf", type=int, default=3, help="replication factor of the topic")
    ap.add_argument("--repeat", type=int, default=1, help="runs per rate")
    ap.add_argument("--single", action="store_true", help="one broker without --peers (RF 1, no Raft)")
    ap.add_argument("--py-spy", metavar="DIR", help="sample the brokers with py-spy into DIR (adds CPU)")
    ap.add_argument("--topic-config", metavar="K=V", action="append", default=[],
                    help="a config of the topic (repeatable), e.g. flush.messages=9223372036854775807")
    ap.add_argument("--loop-counts", action="store_true",
                    help="also count the brokers' event-loop turns and callbacks per record (loop_counts.py)")
    ap.add_argument("--plain", action="store_true",
                    help="a producer without idempotence (librdkafka's default) instead of an idempotent one")
    args = ap.parse_args()
    topic_config = dict(kv.split("=", 1) for kv in args.topic_config)
    counts_dir = _loop_counts.enable() if args.loop_counts else None
    for _ in range(args.repeat):
        for rate in args.rate or [1000, 2000]:
            print(run(rate, args.seconds, 1 if args.single else args.rf, args.py_spy, args.single, topic_config,
                      counts_dir, not args.plain), flush=True)


if __name__ == "__main__":
    main()
