"""Helpers of the group tests: consumer worker processes, a background producer, invariant checks."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path

WORKER = str(Path(__file__).with_name("consumer_worker.py"))
SESSION_MS = 6000


def wait_until(pred, timeout_s: float, what: str, interval_s: float = 0.1):
    deadline = time.monotonic() + timeout_s
    while True:
        value = pred()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")
        time.sleep(interval_s)


def admin(bootstrap: str):
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap})


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    from confluent_kafka.admin import NewTopic

    a = admin(bootstrap)  # keep the client alive until the result arrives
    a.create_topics([NewTopic(name, partitions, 1)])[name].result(timeout=30)


def committed_offsets(bootstrap: str, group: str) -> dict[int, int]:
    from confluent_kafka import ConsumerGroupTopicPartitions

    a = admin(bootstrap)
    res = a.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(timeout=30)
    return {tp.partition: tp.offset for tp in res.topic_partitions if tp.offset >= 0}


def end_offsets(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import OffsetSpec

    a = admin(bootstrap)
    futs = a.list_offsets({TopicPartition(topic, p): OffsetSpec.latest() for p in range(partitions)})
    return {tp.partition: f.result(timeout=30).offset for tp, f in futs.items()}


class Worker:
    """One consumer_worker.py process and its event log."""

    def __init__(self, tmp: Path, name: str, client: str, bootstrap: str, topic: str, group: str,
                 assignor: str = "range", instance_id: str | None = None, session_ms: int = SESSION_MS) -> None:
        self.name = name
        self.path = tmp / f"{name}.jsonl"
        args = [sys.executable, WORKER, client, bootstrap, topic, group, str(self.path), "--assignor", assignor,
                "--session-ms", str(session_ms)]
        if instance_id:
            args += ["--instance-id", instance_id]
        args += ["--client-id", name]
        self.log = open(tmp / f"{name}.log", "wb")
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT)
        self.killed_at: float | None = None

    def events(self) -> list[dict]:
        if not self.path.exists():
            return []
        out = []
        for line in self.path.read_text().splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:  # a torn last line of a killed process
                pass
        return out

    def owned(self) -> set[int]:
        owned: set[int] = set()
        for e in self.events():
            if e["ev"] == "assign":
                owned |= set(e["parts"])
            elif e["ev"] == "revoke":
                owned -= set(e["parts"])
        return owned

    def diagnostics(self, lines: int = 40) -> str:
        """The last ``lines`` of the worker's output, after asking a live worker for its threads'
        stacks (SIGUSR1: faulthandler), and its last events: what a failed wait reports."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGUSR1)
            time.sleep(0.5)
        self.log.flush()
        out = (self.path.parent / f"{self.name}.log").read_text(errors="replace").splitlines()[-lines:]
        evs = [e for e in self.events() if e["ev"] != "rec"][-8:]
        state = "running" if self.proc.poll() is None else f"exited {self.proc.returncode}"
        return f"--- {self.name} ({state}) last events: {evs}\n" + "\n".join(out)

    def kill(self) -> None:
        self.killed_at = time.time()
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def terminate(self, timeout_s: float = 30) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise AssertionError(f"{self.name} did not stop on SIGTERM")
        self.log.close()

    def records(self) -> list[tuple[int, int]]:
        return [(e["p"], e["o"]) for e in self.events() if e["ev"] == "rec"]

    def acked_commits(self) -> dict[int, int]:
        out: dict[int, int] = {}
        for e in self.events():
            if e["ev"] == "commit":
                for p, o in e["offsets"].items():
                    out[int(p)] = max(out.get(int(p), 0), o)
        return out

    def ownership_intervals(self) -> dict[int, list[tuple[float, float]]]:
        """partition -> [(from, to)] while this process owned it (to = kill/exit time if still owned)."""
        open_: dict[int, float] = {}
        out: dict[int, list[tuple[float, float]]] = defaultdict(list)
        end = self.killed_at or time.time()
        for e in self.events():
            if e["ev"] == "assign":
                for p in e["parts"]:
                    open_[p] = e["t"]
            elif e["ev"] == "revoke":
                for p in e["parts"]:
                    if p in open_:
                        out[p].append((open_.pop(p), e["t"]))
        for p, t in open_.items():
            out[p].append((t, end))
        return out


class BackgroundProducer:
    """Produces to every partition of a topic until stopped; remembers acknowledged (partition, offset)."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, rate_per_s: float = 150) -> None:
        from confluent_kafka import Producer

        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                                  "message.timeout.ms": 60000, "retry.backoff.ms": 100})
        self.topic, self.partitions, self.rate = topic, partitions, rate_per_s
        self.acked: set[tuple[int, int]] = set()
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _on_delivery(self, err, msg) -> None:
        if err is not None:
            self.errors.append(str(err))
        else:
            self.acked.add((msg.partition(), msg.offset()))

    def _run(self) -> None:
        i = 0
        while not self._stop.is_set():
            self.producer.produce(self.topic, str(i).encode(), partition=i % self.partitions,
                                  on_delivery=self._on_delivery)
            i += 1
            self.producer.poll(0)
            time.sleep(1 / self.rate)
        self.producer.flush(60)

    def stop(self) -> set[tuple[int, int]]:
        self._stop.set()
        self._thread.join(90)
        return self.acked


def assert_no_double_ownership(workers: list[Worker]) -> None:
    """No partition is owned by two processes at any moment (by their own timestamps)."""
    per_partition: dict[int, list[tuple[float, float, str]]] = defaultdict(list)
    for w in workers:
        for p, spans in w.ownership_intervals().items():
            per_partition[p] += [(a, b, w.name) for a, b in spans]
    for p, spans in per_partition.items():
        spans.sort()
        for (a1, b1, n1), (a2, b2, n2) in zip(spans, spans[1:]):
            assert n1 == n2 or a2 >= b1, f"partition {p} owned by {n1} until {b1:.3f} and by {n2} from {a2:.3f}"


def assert_delivery(workers: list[Worker], produced: set[tuple[int, int]]) -> None:
    """At least once for every produced record; a record some process consumed *and committed*
    is never consumed again by another process (only uncommitted work of a killed process repeats)."""
    consumed: dict[tuple[int, int], list[Worker]] = defaultdict(list)
    for w in workers:
        counts = Counter(w.records())
        dup = [r for r, n in counts.items() if n > 1]
        assert not dup, f"{w.name} consumed {dup[:5]} more than once"
        for r in counts:
            consumed[r].append(w)
    missing = produced - set(consumed)
    assert not missing, f"{len(missing)} produced records never consumed, e.g. {sorted(missing)[:5]}"
    # Redelivery is allowed only for work that was not committed: when a record is consumed
    # again, no earlier consumer may already have had a commit covering it acknowledged.
    # (Kafka semantics: a commit can fail during a rebalance, e.g. REBALANCE_IN_PROGRESS, or a
    # starved member can be evicted by its session timeout; both redeliver uncommitted work.)
    seen_at = {w.name: {(e["p"], e["o"]): e["t"] for e in w.events() if e["ev"] == "rec"} for w in workers}
    commits = {w.name: [(e["t"], int(p), o) for e in w.events() if e["ev"] == "commit"
                        for p, o in e["offsets"].items()] for w in workers}
    for (p, o), ws in consumed.items():
        if len(ws) < 2:
            continue
        ordered = sorted(ws, key=lambda w: seen_at[w.name][(p, o)])
        for earlier, later in zip(ordered, ordered[1:]):
            t_again = seen_at[later.name][(p, o)]
            covered = [t for t, cp, co in commits[earlier.name] if cp == p and co > o and t < t_again]
            assert not covered, (f"record {p}@{o} was committed by {earlier.name} and consumed again by "
                                 f"{later.name} (all alive: {all(w.killed_at is None for w in ws)})")


def owned_counts(workers: list[Worker]) -> tuple[list[int], set[int], bool]:
    """(sorted partition counts per live worker, union of partitions, whether any is owned twice)."""
    sets = [w.owned() for w in workers if w.killed_at is None]
    union = set().union(*sets) if sets else set()
    return sorted(len(s) for s in sets), union, sum(len(s) for s in sets) != len(union)


def stop_all(workers: list[Worker]) -> None:
    for w in workers:
        if w.killed_at is None and w.proc.poll() is None:
            w.proc.send_signal(signal.SIGTERM)
    for w in workers:
        if w.killed_at is None:
            w.terminate()


def consumer_group_describe(host: str, port: int, group: str):
    """The ConsumerGroupDescribe v1 (KIP-848) entry of ``group``, asked of the broker at host:port."""
    from litemq.testing.wire import WireClient

    with WireClient(host, port) as c:
        return c.request(69, 1, {"group_ids": [group], "include_authorized_operations": False}).groups[0]


def stable_assignment(addr_of, group: str, clients: set[str], timeout_s: float = 60.0) -> dict[str, set[int]]:
    """Wait until the KIP-848 ``group`` is Stable with exactly the members whose client ids are
    ``clients``; return client id -> partitions. ``addr_of()`` gives the coordinator's (host, port)."""
    last = {}

    def ok():
        try:
            d = consumer_group_describe(*addr_of(), group)
        except OSError:
            return None
        last["d"] = d
        if d.error_code != 0 or d.group_state != "Stable":
            return None
        got = {m.client_id: {p for tp in m.assignment.topic_partitions for p in tp.partitions} for m in d.members}
        return got if set(got) == clients and len(d.members) == len(clients) else None

    return wait_until(ok, timeout_s, f"group {group} stable with members {sorted(clients)}")


def child_env() -> dict[str, str]:
    env = dict(os.environ)
    env["COLUMNS"] = "200"
    return env
