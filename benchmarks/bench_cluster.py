"""Replicated cluster benchmark: produce throughput/latency and leader failover (3 brokers).

    python benchmarks/bench_cluster.py [--quick] [--records N] [--records-1k N] [--repeat N]
                                       [--rate R] [--rate-seconds S] [--rate-linger-ms MS] [--kills K] [--load-rate R]
                                       [--steady-acks N] [--only throughput|failover] [--keep]
                                       [--broker-config K=V] [--out FILE]

A full run (defaults: 500k x 100 B, 100k x 1 KiB, 5 runs a row, 20 kills) takes about 4 min;
``--quick`` (20k / 5k, 1 run, 3 kills) under a minute.

1. **Produce** with confluent-kafka (``linger.ms=5``, ``batch.size=1000000``; for acks=all
   ``max.in.flight.requests.per.connection=5``), topic with 6 partitions, 100 B and 1 KiB values,
   a fixed count each:
   - 3 brokers (``LocalCluster``), topic with replication factor 3, acks=all with an idempotent
     producer and acks=all with a plain one;
   - the same cluster, topic with replication factor 1, the same two and acks=1;
   - one broker without ``--peers`` (``BrokerProcess``), acks=all (idempotent) and acks=1, for
     reference.
   Both kinds of acks=all producer are measured because librdkafka's idempotent producer
   busy-polls its broker connections (``poll()`` with a 0 ms timeout) while a partition holds its
   five in-flight requests and has more records ready: with replication's longer acknowledgement
   time, on a machine the client shares with the brokers, that spinning takes the CPU the brokers
   need (docs/benchmarks-cluster.md, tenth round).
   Each row is ``--repeat`` runs with one producer, warmed up first (one acknowledged record per
   partition, so the client's start-up is not timed); the run with the median msg/s is shown:
   msg/s, MB/s and the per-message latency p50/p99 (librdkafka's ``latency()``: produce() call
   to delivery report; at saturation mostly client queueing), and the CPU used meanwhile by the
   brokers, by this process and by the whole machine (in % of one core). Then, per setup, one run at a fixed modest
   rate (``--rate`` msg/s of 100 B for ``--rate-seconds`` s), where the latency is the figure;
   on the cluster also RF 3 with Kafka's default flush policy on the topic (``flush.messages`` =
   Long.MAX_VALUE: no fsync, durability by replication), what LiteMQ's durable default costs.
2. **Failover**, on a fresh 3-broker cluster: a producer thread writes a steady idempotent
   acks=all load (``--load-rate`` msg/s round-robin over 6 partitions, replication factor 3).
   ``--kills`` times: SIGKILL the leader of partition 0 and measure the time from the kill to
   the first successful delivery on partition 0 of a record produced after the kill (and, polled
   every 50 ms, when a survivor claimed the leadership and when the metadata named it); restart
   the killed broker, wait until it is live and its log end offsets reach the leaders' ones of
   the moment it came back and ``--steady-acks`` more acknowledgements on partition 0, then the
   next round. Median, p90, max and every value.
   At the end every acknowledged record is read back and checked (count per partition, every
   acknowledged offset present and holding the acknowledged record, no duplicates).
The broker data and logs of a run that went wrong are kept (their path is printed).
Brokers run with their default settings (Raft tick 100 ms, election timeout 1 s, broker
session timeout 3 s), except ``auto.leader.rebalance.enable=false`` in the failover cluster.
Every client, broker and this script share the machine; nothing is asserted on the figures.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from litemq.testing.cluster import LocalCluster, wait_for
from litemq.testing.readback import read_sequenced
from litemq.testing.process import BrokerProcess

sys.path.insert(0, str(Path(__file__).parent))
from bench_broker import machine, pct  # noqa: E402

PARTITIONS = 6
CLIENT = {"reconnect.backoff.ms": 50, "reconnect.backoff.max.ms": 500, "retry.backoff.ms": 50,
          "retry.backoff.max.ms": 200, "socket.connection.setup.timeout.ms": 3000}
"""Client settings of the failover load and read-back (quicker reconnects than librdkafka's defaults)."""
CLK_TCK = os.sysconf("SC_CLK_TCK")
FAILOVER_OVERRIDES = {"auto.leader.rebalance.enable": "false"}
"""Broker settings of the failover cluster: leadership moves only because of the kills (with
the preferred-leader hand-back on, a hand-back that starts as the leader is killed made one
kill look like a 0.06 s failover)."""


# ---------------------------------------------------------------------------- CPU accounting
def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far (all its threads)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def machine_ticks() -> tuple[int, int, int]:
    """(busy, iowait, total) clock ticks of all CPUs so far, from /proc/stat."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    idle, iowait, total = v[3], v[4], sum(v[:8])
    return total - idle - iowait, iowait, total


class CpuMeter:
    """CPU used by the broker processes ``pids``, by this process, and by the whole machine
    (everything, other people's work included) between start and stop, in % of one core."""

    def __init__(self, pids: list[int]) -> None:
        self.pids = pids
        self.t0 = time.perf_counter()
        self.brokers0 = [cpu_seconds(p) for p in pids]
        self.self0 = time.process_time()
        self.machine0 = machine_ticks()

    def stop(self) -> dict:
        wall = time.perf_counter() - self.t0
        brokers = [cpu_seconds(p) - c for p, c in zip(self.pids, self.brokers0)]
        busy, iowait, total = (b - a for a, b in zip(self.machine0, machine_ticks()))
        cores = os.cpu_count() or 1
        return {"brokers_pct": [100 * b / wall for b in brokers],
                "client_pct": 100 * (time.process_time() - self.self0) / wall,
                "machine_pct": 100 * cores * busy / max(1, total), "iowait_pct": 100 * cores * iowait / max(1, total)}


def cpu_text(cpu: dict) -> str:
    per = "+".join(f"{b:.0f}" for b in cpu["brokers_pct"])
    return f"{per} | {cpu['client_pct']:.0f} | machine {cpu['machine_pct']:.0f} (iowait {cpu['iowait_pct']:.0f})"


# ---------------------------------------------------------------------------- produce runs
def create_topic(bs: str, name: str, replicas: int, partitions: int = PARTITIONS,
                 config: dict[str, str] | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": bs})
    admin.create_topics([NewTopic(name, partitions, replicas, config=config or {})],
                        operation_timeout=30)[name].result(timeout=60)


def warm_producer(bs: str, topic: str, acks: str, *, idempotent: bool, partitions: int = PARTITIONS,
                  linger_ms: int = 5) -> Producer:
    """A producer with bench_broker's settings that has already had one record per partition
    acknowledged: the timed runs then exclude the client's start-up (metadata, connections to
    every leader, and for idempotence the producer id, about 0.5-1 s here)."""
    p = Producer({"bootstrap.servers": bs, "acks": acks, "linger.ms": linger_ms, "batch.size": 1_000_000,
                  "queue.buffering.max.messages": 1_000_000, "queue.buffering.max.kbytes": 1_048_576,
                  "enable.idempotence": idempotent,
                  **({"max.in.flight.requests.per.connection": 5} if acks == "all" else {})})
    for part in range(partitions):
        p.produce(topic, b"warm-up", partition=part)
    left = p.flush(60)
    if left:
        raise RuntimeError(f"{topic}: {left} warm-up records not acknowledged within 60 s")
    return p


def produce_burst(p: Producer, topic: str, n: int, size: int) -> dict:
    """``n`` records of ``size`` bytes as fast as the producer takes them, then flush."""
    payload = os.urandom(size)
    lat: list[float] = []
    failed: list[str] = []

    def cb(err, msg):
        if err is None:
            lat.append(msg.latency())
        else:
            failed.append(str(err))

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
    left = p.flush(300)
    dt = time.perf_counter() - t0
    if left or failed:
        raise RuntimeError(f"{topic}: {len(failed)} deliveries failed (first: {failed[:1]}), {left} unanswered")
    return {"msg_s": n / dt, "mb_s": n * size / dt / 1e6, "p50_ms": pct(lat, 0.5) * 1000, "p99_ms": pct(lat, 0.99) * 1000}


def produce_at_rate(p: Producer, topic: str, rate: int, seconds: float, size: int = 100) -> dict:
    """``rate`` records/s of ``size`` bytes for ``seconds`` s, paced in 1 ms steps."""
    n = int(rate * seconds)
    payload = os.urandom(size)
    lat: list[float] = []
    failed = 0

    def cb(err, msg):
        nonlocal failed
        if err is None:
            lat.append(msg.latency())
        else:
            failed += 1

    sent = 0
    t0 = time.perf_counter()
    while sent < n:
        due = min(n, int((time.perf_counter() - t0) * rate) + 1)
        while sent < due:
            p.produce(topic, payload, on_delivery=cb)
            sent += 1
        p.poll(0)
        time.sleep(max(0.0, min(0.001, t0 + sent / rate - time.perf_counter())))
    dt = time.perf_counter() - t0
    p.flush(60)
    return {"n": n, "msg_s": n / dt, "p50_ms": pct(lat, 0.5) * 1000, "p99_ms": pct(lat, 0.99) * 1000,
            "max_ms": max(lat) * 1000, "failed": failed}


def acks_label(acks: str, idempotent: bool) -> str:
    return f"{acks} idem" if idempotent else acks


def run_setup(label: str, bs: str, pids: list[int], variants: list[tuple[int, str, bool]], args,
              wait_leaders=None) -> tuple[list, list]:
    """Every (replication factor, acks, idempotent producer) of ``variants`` with both sizes, then
    the fixed-rate run of each variant whose producer is idempotent or whose acks are not "all"
    (the fixed rate never fills a partition's in-flight window, so the plain acks=all producer
    repeats the idempotent one's figure: measured with ``bench_rate_cpu.py --plain``,
    docs/benchmarks-cluster.md, thirteenth round)."""
    rows, rate_rows = [], []
    for rf, acks, idem in variants:
        name = acks_label(acks, idem)
        for size, n in ((100, args.records), (1024, args.records_1k)):
            topic = f"bench-rf{rf}-acks{acks}{'-idem' if idem else ''}-{size}"
            create_topic(bs, topic, rf)
            leaders = wait_leaders(topic) if wait_leaders else {}
            p = warm_producer(bs, topic, acks, idempotent=idem)
            runs = []
            for _ in range(args.repeat):
                meter = CpuMeter(pids)
                r = produce_burst(p, topic, n, size)
                r["cpu"] = meter.stop()
                runs.append(r)
            runs.sort(key=lambda r: r["msg_s"])
            r = dict(runs[len(runs) // 2], low=runs[0]["msg_s"], high=runs[-1]["msg_s"])
            rows.append((label, rf, name, size, n, r, leaders))
            print(f"{label:<22} RF{rf} acks={name:<8} {size:>5} B x {n:>7,}: {r['msg_s']:>9,.0f} msg/s "
                  f"{r['mb_s']:6.1f} MB/s (runs {r['low']:,.0f}..{r['high']:,.0f}) p50 {r['p50_ms']:7.1f} ms "
                  f"p99 {r['p99_ms']:7.1f} ms | CPU % brokers | client | machine: {cpu_text(r['cpu'])}"
                  + (f" | leaders {leaders}" if leaders else ""), flush=True)
    for rf, acks, idem in variants:
        if acks == "all" and not idem:
            continue
        rate_rows.append(run_at_rate(label, bs, pids, rf, acks, idem, args, wait_leaders))
    return rows, rate_rows


KAFKA_FLUSH_POLICY = {"flush.messages": str(2**63 - 1)}
"""Kafka's default flush policy (``log.flush.interval.messages`` = Long.MAX_VALUE): no fsync per
write, durability by replication. LiteMQ's default fsyncs before acks=all is answered."""


def run_at_rate(label: str, bs: str, pids: list[int], rf: int, acks: str, idem: bool, args, wait_leaders=None,
                topic_config: dict[str, str] | None = None) -> tuple:
    """One fixed-rate run (``args.rate`` msg/s of 100 B for ``args.rate_seconds`` s) on a new topic
    with ``topic_config``: the latency table's row ``(label, rf, acks label, result)``."""
    name = acks_label(acks, idem)
    topic = f"bench-rate-rf{rf}-acks{acks}{'-nofsync' if topic_config else ''}"
    create_topic(bs, topic, rf, config=topic_config)
    if wait_leaders:
        wait_leaders(topic)
    p = warm_producer(bs, topic, acks, linger_ms=args.rate_linger_ms, idempotent=idem)
    meter = CpuMeter(pids)
    r = produce_at_rate(p, topic, args.rate, args.rate_seconds)
    r["cpu"] = meter.stop()
    print(f"{label:<22} RF{rf} acks={name:<8} at {args.rate} msg/s x {r['n']:,} (100 B): achieved "
          f"{r['msg_s']:,.0f} msg/s, p50 {r['p50_ms']:.1f} ms p99 {r['p99_ms']:.1f} ms max {r['max_ms']:.1f} ms, "
          f"{r['failed']} failed | CPU % brokers | client | machine: {cpu_text(r['cpu'])}", flush=True)
    return label, rf, name, r


@contextlib.contextmanager
def work_dir(prefix: str, keep: bool = False):
    """A fresh directory for broker data and logs, removed afterwards unless ``keep``, an
    exception passes through or ``keep`` is set on the yielded holder (then its path is printed)."""
    holder = argparse.Namespace(path=Path(tempfile.mkdtemp(prefix=prefix)), keep=keep)
    try:
        yield holder
    except BaseException:
        holder.keep = True
        raise
    finally:
        if holder.keep:
            print(f"broker data and logs kept in {holder.path} (see */broker*.log)", flush=True)
        else:
            shutil.rmtree(holder.path, ignore_errors=True)


def throughput(args) -> tuple[list, list]:
    rows, rate_rows = [], []
    with work_dir("bench-cluster-produce-", args.keep) as wd:
        tmp = wd.path
        with LocalCluster(Path(tmp) / "cluster", 3, overrides=args.broker_config) as cluster:
            pids = [cluster.brokers[i].proc.pid for i in cluster.node_ids]
            variants = [(3, "all", True), (1, "all", True), (3, "all", False), (1, "all", False), (1, "1", False)]
            wait = lambda t: cluster.wait_leaders(t, PARTITIONS, timeout_s=30)  # noqa: E731
            r, rr = run_setup("3 brokers", cluster.bootstrap_servers, pids, variants, args, wait_leaders=wait)
            rows += r
            rate_rows += rr
            rate_rows.append(run_at_rate("3 brokers, topic without fsync (Kafka's flush policy)",
                                         cluster.bootstrap_servers, pids, 3, "all", True, args, wait,
                                         topic_config=KAFKA_FLUSH_POLICY))
        with BrokerProcess(Path(tmp) / "single", overrides=args.broker_config) as broker:
            r, rr = run_setup("1 broker (no --peers)", broker.bootstrap_servers, [broker.proc.pid],
                              [(1, "all", True), (1, "1", False)], args)
            rows += r
            rate_rows += rr
    return rows, rate_rows


# ---------------------------------------------------------------------------- failover
class Load:
    """A producer thread writing ``"<partition>:<seq>"`` records round-robin over the partitions
    at about ``rate`` records/s (idempotent, acks=all), recording every acknowledgement as
    (offset, seq) per partition, and the first acknowledgement on partition 0 of a record
    produced after a given moment (:meth:`watch`)."""

    def __init__(self, bs: str, topic: str, partitions: int, rate: float) -> None:
        self.topic, self.partitions, self.rate = topic, partitions, rate
        self.producer = Producer({"bootstrap.servers": bs, "acks": "all", "enable.idempotence": True,
                                  "linger.ms": 5, "message.timeout.ms": 300000, **CLIENT})
        self.acked: dict[int, list[tuple[int, int]]] = {p: [] for p in range(partitions)}
        self.sent_at: dict[int, list[float]] = {p: [] for p in range(partitions)}
        self.errors: list[str] = []
        self.sent = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._watch_from: float | None = None
        self.first_after: float | None = None
        self.old_after = 0
        """Acknowledgements on partition 0 after the watched moment of records produced before it."""
        self.new_ack = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _on_delivery(self, err, msg) -> None:
        now = time.monotonic()
        p, seq = map(int, msg.value().decode().split(":"))
        if err is not None:
            self.errors.append(f"p{p} seq {seq}: {err}")
            return
        with self._lock:
            self.acked[p].append((msg.offset(), seq))
            if p == 0 and self._watch_from is not None and self.first_after is None:
                if self.sent_at[0][seq] > self._watch_from:
                    self.first_after = now
                    self.new_ack.set()
                else:
                    self.old_after += 1

    def _run(self) -> None:
        seq = [0] * self.partitions
        t0 = time.monotonic()
        while not self._stop.is_set():
            if self.sent > (time.monotonic() - t0) * self.rate or len(self.producer) > 50000:
                self.producer.poll(0.002)
                continue
            p = self.sent % self.partitions
            value = f"{p}:{seq[p]}".encode()
            with self._lock:
                self.sent_at[p].append(time.monotonic())
            try:
                self.producer.produce(self.topic, value=value, partition=p, on_delivery=self._on_delivery)
            except BufferError:
                with self._lock:
                    self.sent_at[p].pop()
                self.producer.poll(0.05)
                continue
            seq[p] += 1
            self.sent += 1
            self.producer.poll(0)

    def start(self) -> "Load":
        self._thread.start()
        return self

    def watch(self, t: float) -> None:
        """From now on, look for the first partition-0 ack of a record produced after ``t``."""
        with self._lock:
            self._watch_from, self.first_after, self.old_after = t, None, 0
            self.new_ack.clear()

    def acks_on(self, p: int) -> int:
        with self._lock:
            return len(self.acked[p])

    def stop(self, flush_timeout_s: float = 120.0) -> int:
        """Stop producing and wait for the outstanding deliveries; returns how many are left."""
        self._stop.set()
        self._thread.join(30)
        return self.producer.flush(flush_timeout_s)


def verify(load: Load, read: dict) -> tuple[bool, list[str]]:
    """Per partition: acknowledged vs read, missing acknowledged offsets, offsets holding another
    record than acknowledged, duplicates, and whether the acknowledged sequence is 0..n-1."""
    ok, lines = True, []
    for p in range(load.partitions):
        acked, got = load.acked[p], read[p]
        at = dict(got)
        missing = [o for o, _ in acked if o not in at]
        wrong = [o for o, s in acked if o in at and at[o] != s]
        seqs = [s for _, s in got]
        dups = len(seqs) - len(set(seqs))
        contiguous = sorted(s for _, s in acked) == list(range(len(acked)))
        good = not missing and not wrong and not dups and contiguous
        ok &= good
        lines.append(f"partition {p}: {len(acked):,} acknowledged, {len(got):,} read, {len(missing)} acknowledged "
                     f"offsets missing, {len(wrong)} holding another record, {dups} duplicates, acknowledged "
                     f"sequence {'0..n-1 without gaps' if contiguous else 'WITH GAPS'}"
                     + ("" if good else f" (first missing {missing[:5]}, first wrong {wrong[:5]})"))
    return ok, lines


def wait_caught_up(cluster: LocalCluster, topic: str, node: int, timeout_s: float = 60.0) -> float:
    """Wait until ``node``'s log end offsets reach those its partitions' leaders had when this
    was called; returns the seconds waited."""
    t0 = time.monotonic()
    leaders = cluster.wait_leaders(topic, PARTITIONS, timeout_s=timeout_s)
    led = cluster.leaders()
    target = {p: led[(topic, p)]["log_end_offset"] for p in leaders if (topic, p) in led}

    def reached():
        try:
            st = cluster.status(node, timeout_s=2.0)
        except Exception:  # noqa: BLE001 - not answering yet
            return False
        leo = {e["partition"]: e["log_end_offset"] for e in st.get("partitions") or [] if e["topic"] == topic}
        return all(leo.get(p, -1) >= off for p, off in target.items())

    wait_for(reached, timeout_s, lambda: f"broker {node} not caught up with {target}", interval_s=0.2)
    return time.monotonic() - t0


def watch_failover(cluster: LocalCluster, probe: AdminClient, topic: str, victim: int, load: Load, t_kill: float,
                   timeout_s: float) -> dict:
    """After the kill of ``victim`` at ``t_kill``, poll every 50 ms until the load saw its first
    new acknowledgement on partition 0; returns the seconds from the kill until a surviving
    broker claimed partition 0's leadership (status RPC), until the metadata a client gets
    from the survivors named a surviving leader (``probe``'s Metadata request), and None for a
    stage not seen (e.g. within the last poll interval)."""
    elected = metadata = None
    deadline = t_kill + timeout_s
    while time.monotonic() < deadline and not (load.new_ack.is_set() and elected and metadata):
        if elected is None:
            e = cluster.leaders(exclude={victim}).get((topic, 0))
            if e is not None and e["leader_id"] != victim:
                elected = time.monotonic() - t_kill
        if metadata is None:
            try:
                leader = probe.list_topics(topic, timeout=1).topics[topic].partitions[0].leader
            except Exception:  # noqa: BLE001 - a survivor may be busy; ask again
                leader = -1
            if leader not in (-1, victim):
                metadata = time.monotonic() - t_kill
        load.new_ack.wait(0.05)
    return {"elected_s": elected, "metadata_s": metadata}


def ms(seconds: float | None) -> str:
    return "?" if seconds is None else f"{seconds * 1000:.0f} ms"


def sec(seconds: float | None) -> str:
    return "?" if seconds is None else f"{seconds:.2f}"


def failover(args) -> dict:
    topic = "failover"
    result: dict = {"rounds": [], "problems": []}
    with work_dir("bench-cluster-failover-", args.keep) as wd, LocalCluster(wd.path, 3, {**FAILOVER_OVERRIDES, **args.broker_config}) as cluster:
        bs = cluster.bootstrap_servers
        create_topic(bs, topic, 3)
        cluster.wait_leaders(topic, PARTITIONS, timeout_s=30)
        load = Load(bs, topic, PARTITIONS, args.load_rate).start()
        t_start = time.monotonic()
        try:
            wait_for(lambda: load.acks_on(0) >= 100, 60, "100 acks on partition 0 before the first kill")
            for k in range(args.kills):
                before = load.acks_on(0)
                wait_for(lambda: load.acks_on(0) >= before + args.steady_acks, 60,
                         f"{args.steady_acks} more acks on partition 0 (round {k})")
                victim = cluster.leader_of(topic, 0)
                meta = cluster.metadata_leader()
                led = sorted(p for p, lid in cluster.leaders().items() if lid["leader_id"] == victim and p[0] == topic)
                probe = AdminClient({"bootstrap.servers": ",".join(
                    cluster.brokers[i].bootstrap_servers for i in cluster.node_ids if i != victim)})
                probe.list_topics(topic, timeout=10)  # connected before the kill
                t_kill = time.monotonic()
                load.watch(t_kill)
                cluster.kill(victim)
                stages = watch_failover(cluster, probe, topic, victim, load, t_kill, args.failover_timeout)
                if load.first_after is None:
                    result["problems"].append(f"round {k}: no new acknowledgement on partition 0 within "
                                              f"{args.failover_timeout}s of killing broker {victim} (stages seen: {stages})")
                    print(result["problems"][-1], flush=True)
                    break
                took = load.first_after - t_kill
                new_leader = cluster.leader_of(topic, 0)
                t_restart = time.monotonic()
                cluster.restart(victim)
                live_s = time.monotonic() - t_restart
                catch_s = wait_caught_up(cluster, topic, victim)
                rnd = {"victim": victim, "metadata_leader": meta == victim, "led": [p for _, p in led],
                       "failover_s": took, "old_after": load.old_after, "new_leader": new_leader,
                       "restart_live_s": live_s, "catch_up_s": catch_s, **stages}
                result["rounds"].append(rnd)
                print(f"kill {k + 1:>2}: broker {victim}{' (metadata leader)' if rnd['metadata_leader'] else ''} "
                      f"leading partitions {rnd['led']}: new leader claimed after {ms(rnd['elected_s'])}, in the "
                      f"metadata after {ms(rnd['metadata_s'])}, first new ack on p0 after {took * 1000:.0f} ms "
                      f"(new leader {new_leader}; {load.old_after} older records acked first); restarted, live in "
                      f"{live_s:.1f} s, caught up {catch_s:.1f} s later", flush=True)
        finally:
            left = load.stop()
            result["load_seconds"] = time.monotonic() - t_start
        if left:
            result["problems"].append(f"{left} records neither acknowledged nor failed after the flush")
        cluster.wait_leaders(topic, PARTITIONS, timeout_s=30)
        read = read_sequenced(bs, topic, PARTITIONS, {p: {o for o, _ in a} for p, a in load.acked.items()},
                              group_id="bench-cluster-check", client_config=CLIENT, timeout_s=120.0)
        ok, lines = verify(load, read)
        if not ok:
            result["problems"].append("read-back check failed")
        result.update(verified=ok, verify_lines=lines, errors=load.errors, sent=load.sent,
                      acked=sum(len(a) for a in load.acked.values()), read=sum(len(r) for r in read.values()))
        print(f"load: {load.sent:,} records sent in {result['load_seconds']:.0f} s, {result['acked']:,} acknowledged, "
              f"{len(load.errors)} failed deliveries{(' e.g. ' + load.errors[0]) if load.errors else ''}; "
              f"read back {result['read']:,}")
        for line in lines:
            print("  " + line)
        print(f"read-back check: {'OK' if ok else 'FAILED'}", flush=True)
        wd.keep = wd.keep or bool(result["problems"])
    return result


# ---------------------------------------------------------------------------- report
def markdown(args, m: str, load: tuple, rows: list, rate_rows: list, fo: dict | None) -> str:
    cmd = " ".join(["python benchmarks/bench_cluster.py"] + sys.argv[1:])
    out = [f"\n## Run of {time.strftime('%Y-%m-%d %H:%M')}\n", f"Machine: {m}. Load average (1 min) "
           f"{load[0]:.1f} at the start, {load[1]:.1f} at the end. Command: `{cmd}`.\n"]
    if rows:
        out += ["### Produce throughput (6 partitions)\n",
                "acks: `all idem` is an idempotent producer, `all` a plain one (both with at most 5 requests in "
                "flight per connection, the idempotent one also per partition). CPU: % of one core used during the run by each broker process (node 1+2+3), by the "
                "benchmark process (librdkafka threads included) and by the whole machine (everything running "
                "on it, other people's work included; iowait apart); the machine has "
                f"{100 * (os.cpu_count() or 1)} %.\n",
                "| setup | RF | acks | record | records | msg/s | MB/s | p50 ms | p99 ms | msg/s of all runs | "
                "CPU % brokers | CPU % client | CPU % machine (iowait) |",
                "|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for label, rf, acks, size, n, r, _ in rows:
            per = "+".join(f"{b:.0f}" for b in r["cpu"]["brokers_pct"])
            out.append(f"| {label} | {rf} | {acks} | {size if size < 1024 else '1 KiB'}{' B' if size < 1024 else ''} | "
                       f"{n:,} | {r['msg_s']:,.0f} | {r['mb_s']:.1f} | {r['p50_ms']:.1f} | {r['p99_ms']:.1f} | "
                       f"{r['low']:,.0f}-{r['high']:,.0f} | {per} | {r['cpu']['client_pct']:.0f} | "
                       f"{r['cpu']['machine_pct']:.0f} ({r['cpu']['iowait_pct']:.0f}) |")
        out += ["", f"### Latency at a fixed rate ({args.rate} msg/s of 100 B for {args.rate_seconds:g} s, "
                f"linger.ms={args.rate_linger_ms})\n",
                "| setup | RF | acks | achieved msg/s | p50 ms | p99 ms | max ms | failed | CPU % brokers | CPU % client | "
                "CPU % machine (iowait) |",
                "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for label, rf, acks, r in rate_rows:
            per = "+".join(f"{b:.0f}" for b in r["cpu"]["brokers_pct"])
            out.append(f"| {label} | {rf} | {acks} | {r['msg_s']:,.0f} | {r['p50_ms']:.1f} | {r['p99_ms']:.1f} | "
                       f"{r['max_ms']:.1f} | {r['failed']} | {per} | {r['cpu']['client_pct']:.0f} | "
                       f"{r['cpu']['machine_pct']:.0f} ({r['cpu']['iowait_pct']:.0f}) |")
        out.append("")
    if fo is not None:
        vals = [r["failover_s"] for r in fo["rounds"]]
        out += [f"### Failover ({len(vals)} SIGKILLs of partition 0's leader, load {args.load_rate:g} msg/s acks=all "
                f"idempotent, RF 3)\n"]
        out.append(f"Broker overrides: {FAILOVER_OVERRIDES}; producer: acks=all, enable.idempotence, linger.ms=5, "
                   f"{CLIENT}. *Leader claimed* / *in metadata*: first 50 ms poll (status RPC of the survivors / a "
                   f"Metadata request to them) that showed a surviving leader of partition 0.\n")
        if vals:
            out.append(f"Kill to first new acknowledgement on partition 0: median {statistics.median(vals):.2f} s, "
                       f"p90 {pct(vals, 0.9):.2f} s, max {max(vals):.2f} s, min {min(vals):.2f} s. "
                       f"All, in order (s): {', '.join(f'{v:.2f}' for v in vals)}.\n")
        out += ["| kill | broker | also metadata leader | partitions it led | leader claimed s | in metadata s | "
                "failover s (first new ack) | new leader | restart to live s | then caught up s |",
                "|---:|---:|---|---|---:|---:|---:|---:|---:|---:|"]
        for i, r in enumerate(fo["rounds"], 1):
            out.append(f"| {i} | {r['victim']} | {'yes' if r['metadata_leader'] else 'no'} | {r['led']} | "
                       f"{sec(r['elected_s'])} | {sec(r['metadata_s'])} | {r['failover_s']:.2f} | {r['new_leader']} | "
                       f"{r['restart_live_s']:.1f} | {r['catch_up_s']:.1f} |")
        out.append("")
        if "verified" in fo:
            out.append(f"Read-back after the run: {fo['sent']:,} records sent, {fo['acked']:,} acknowledged, "
                       f"{len(fo['errors'])} failed deliveries, {fo['read']:,} read back; check "
                       f"**{'passed' if fo['verified'] else 'FAILED'}**:\n")
            out += [f"- {line}" for line in fo["verify_lines"]]
        for p in fo["problems"]:
            out.append(f"- PROBLEM: {p}")
        out.append("")
    return "\n".join(out) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=500_000, help="records of 100 B per produce run")
    ap.add_argument("--records-1k", type=int, default=100_000, help="records of 1 KiB per produce run")
    ap.add_argument("--repeat", type=int, default=5,
                    help="produce runs per row (same producer and topic); the run with the median msg/s is reported")
    ap.add_argument("--rate", type=int, default=2000, help="msg/s of the fixed-rate latency runs")
    ap.add_argument("--rate-seconds", type=float, default=10.0, help="duration of each fixed-rate run")
    ap.add_argument("--rate-linger-ms", type=int, default=5, help="the producer's linger.ms in the fixed-rate runs")
    ap.add_argument("--kills", type=int, default=20, help="SIGKILLs of partition 0's leader")
    ap.add_argument("--load-rate", type=float, default=1500.0, help="msg/s of the load during the kills")
    ap.add_argument("--steady-acks", type=int, default=400,
                    help="acknowledgements on partition 0 to wait for before each kill (steady load)")
    ap.add_argument("--failover-timeout", type=float, default=60.0,
                    help="give up a kill round after this many seconds without a new ack on partition 0")
    ap.add_argument("--quick", action="store_true", help="small counts, 3 kills (a smoke run, about 1-2 min)")
    ap.add_argument("--only", choices=("throughput", "failover"), help="run only this part")
    ap.add_argument("--keep", action="store_true", help="keep the brokers' data and logs (path printed)")
    ap.add_argument("--broker-config", action="append", default=[], metavar="K=V",
                    help="a setting of every broker (repeatable), e.g. log.page.cache.retain.bytes=16777216")
    ap.add_argument("--out", type=Path, default=None, help="append a Markdown report here")
    args = ap.parse_args()
    args.broker_config = dict(kv.split("=", 1) for kv in args.broker_config)
    if args.quick:
        args.records, args.records_1k, args.rate_seconds, args.kills, args.repeat = 20_000, 5_000, 3.0, 3, 1
    load0 = os.getloadavg()[0]
    rows, rate_rows, fo = [], [], None
    if args.only in (None, "throughput"):
        rows, rate_rows = throughput(args)
    if args.only in (None, "failover"):
        fo = failover(args)
        vals = [r["failover_s"] for r in fo["rounds"]]
        if vals:
            print(f"failover over {len(vals)} kills: median {statistics.median(vals):.2f} s, p90 {pct(vals, 0.9):.2f} s, "
                  f"max {max(vals):.2f} s; all: {', '.join(f'{v:.2f}' for v in vals)}")
        for p in fo["problems"]:
            print(f"PROBLEM: {p}")
    m = machine()
    load = (load0, os.getloadavg()[0])
    print(f"{m}; load average {load[0]:.1f} at the start, {load[1]:.1f} at the end")
    if args.out:
        with open(args.out, "a") as f:
            f.write(markdown(args, m, load, rows, rate_rows, fo))
    return 1 if fo is not None and fo["problems"] else 0


if __name__ == "__main__":
    sys.exit(main())
