"""Helpers of the transaction tests: input producer, read_committed checker, a supervised
consume-transform-produce worker process (:mod:`tests.txn.ctp_worker`) the tests SIGKILL."""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
READ_TIMEOUT_S = 90


def name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def read_committed_values(bootstrap: str, group_id: str, tps: list[tuple[str, int]], expected: int,
                          client: dict | None = None) -> list[bytes]:
    """The values a read_committed consumer reads from the start of ``tps`` ((topic, partition)
    pairs): at least ``expected`` of them within 30 s, then whatever else arrives within 1 s
    (so a test sees records that should not be there)."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group_id, "enable.auto.commit": False,
                  "isolation.level": "read_committed", **(client or {})})
    c.assign([TopicPartition(t, p, OFFSET_BEGINNING) for t, p in tps])
    values: list[bytes] = []
    try:
        deadline = time.monotonic() + 30
        while len(values) < expected and time.monotonic() < deadline:
            for m in c.consume(100, 0.5):
                assert m.error() is None, m.error()
                values.append(m.value())
        for m in c.consume(100, 1.0):  # nothing more is readable
            assert m.error() is None, m.error()
            values.append(m.value())
    finally:
        c.close()
    return values


def create_topics(bootstrap: str, topics: list[str], partitions: int = 3, rf: int = 1) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
    futures = admin.create_topics([NewTopic(t, partitions, rf) for t in topics], request_timeout=30)
    for f in futures.values():
        f.result(timeout=60)


def produce_input(bootstrap: str, topic: str, n: int) -> list[bytes]:
    """``n`` records ``k<i>`` -> ``v<i>`` (idempotent, acks=all); returns the keys."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5, "log_level": 3})
    keys = []
    for i in range(n):
        k = f"k{i:06d}".encode()
        keys.append(k)
        while True:
            try:
                p.produce(topic, key=k, value=f"v{i:06d}".encode())
                break
            except BufferError:
                p.poll(0.05)
    assert p.flush(60) == 0
    return keys


def read_all(bootstrap: str, topic: str, partitions: int, isolation: str = "read_committed",
             expect: int | None = None, idle_s: float = 3.0) -> list:
    """Every record of ``topic`` from the beginning (confluent-kafka ``assign``), until
    ``expect`` records were read and then every partition reported its end (librdkafka's
    partition EOF: the position reached the high watermark, the last stable offset with
    read_committed) with nothing read since, or nothing more came for ``idle_s`` (or
    READ_TIMEOUT_S)."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": name("check"), "enable.auto.commit": False,
                  "isolation.level": isolation, "enable.partition.eof": True, "log_level": 3})
    c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    got = []
    at_end: set[int] = set()
    deadline = time.monotonic() + READ_TIMEOUT_S
    last = time.monotonic()
    while time.monotonic() < deadline:
        msgs = c.consume(1000, 0.1)  # consume() waits its whole timeout unless 1000 came
        for m in msgs:
            if m.error() is not None:
                if m.error().code() == KafkaError._PARTITION_EOF:
                    at_end.add(m.partition())
                continue  # partition EOF / transient
            at_end.discard(m.partition())
            got.append(m)
        if msgs:
            last = time.monotonic()
        if (expect is None or len(got) >= expect) and (len(at_end) == partitions
                                                       or time.monotonic() - last >= idle_s):
            break
    c.close()
    return got


def assert_exactly_once(input_keys: list[bytes], output) -> None:
    """Every input key appears exactly once in ``output`` (messages), transformed."""
    counts = collections.Counter(m.key() for m in output)
    dups = {k: n for k, n in counts.items() if n > 1}
    missing = [k for k in input_keys if k not in counts]
    extra = [k for k in counts if k not in set(input_keys)]
    assert not dups, f"{len(dups)} keys duplicated, e.g. {list(dups.items())[:5]}"
    assert not missing, f"{len(missing)} keys missing, e.g. {missing[:5]}"
    assert not extra, f"unexpected keys {extra[:5]}"
    for m in output:
        assert m.value() == b"v" + m.key()[1:] + b"|out", (m.key(), m.value())


def explain_missing(bootstrap: str, topic: str, partitions: int, output, input_keys: list[bytes],
                    log_dirs: list[Path]) -> str:
    """Evidence for a failed exactly-once check, for the assertion message: where the missing
    keys are when read uncommitted (written but aborted or hidden, or never written), the
    workers' lines other than progress, and the brokers' transaction lines and warnings."""
    seen = {m.key() for m in output}
    missing = {k for k in input_keys if k not in seen}
    lines = [f"{len(missing)} keys missing"]
    if missing:
        raw = read_all(bootstrap, topic, partitions, isolation="read_uncommitted", idle_s=2)
        found = [(m.key(), m.partition(), m.offset()) for m in raw if m.key() in missing]
        lines.append(f"read_uncommitted has {len(found)} records of them, e.g. {sorted(found)[:10]}")
        lines.append(f"(low, high) per partition, read_committed (LSO) / read_uncommitted (HW): "
                     f"{_watermarks(bootstrap, topic, partitions, 'read_committed')} / "
                     f"{_watermarks(bootstrap, topic, partitions, 'read_uncommitted')}")
    for d in log_dirs:
        for f in sorted(d.glob("worker-*.log")) + sorted(d.glob("**/broker.log")):
            text = f.read_text(errors="replace").splitlines()
            keep = [ln for ln in text if not ln.startswith(("committed", "aborted"))
                    and ("FAIL|" not in ln)
                    and (f.name != "broker.log" or any(w in ln for w in (
                        "transaction", "marker", "fenc", "WARNING", "ERROR", "leader")))]
            lines.append(f"--- {f.relative_to(d)} ({len(text)} lines, {len(keep)} kept)")
            lines.extend(keep[-40:])
    return "\n".join(lines)


def _watermarks(bootstrap: str, topic: str, partitions: int, isolation: str) -> list[tuple[int, int]]:
    """ListOffsets earliest/latest of every partition as a consumer of ``isolation`` sees them."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": name("wm"), "isolation.level": isolation,
                  "log_level": 3})
    try:
        return [c.get_watermark_offsets(TopicPartition(topic, i), timeout=10) for i in range(partitions)]
    finally:
        c.close()


class Worker:
    """One :mod:`tests.txn.ctp_worker` child process."""

    def __init__(self, log_dir: Path, lib: str, bootstrap: str, inp: str, out: str, group: str, txn_id: str,
                 expected: int, abort_every: int = 0) -> None:
        self.args = [sys.executable, "-m", "tests.txn.ctp_worker", lib, bootstrap, inp, out, group, txn_id,
                     str(expected), str(abort_every)]
        self.log_dir = log_dir
        self.proc: subprocess.Popen | None = None
        self.runs = 0

    def start(self) -> "Worker":
        self.runs += 1
        log = open(self.log_dir / f"worker-{self.runs}.log", "wb")
        self.proc = subprocess.Popen(self.args, cwd=REPO, stdout=log, stderr=subprocess.STDOUT,
                                     env={**os.environ, "PYTHONUNBUFFERED": "1"})
        log.close()
        return self

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def log_tail(self) -> str:
        text = (self.log_dir / f"worker-{self.runs}.log").read_text(errors="replace")
        return text[-3000:]

    def committed_count(self) -> int:
        """Transactions committed so far by every run (from their progress lines)."""
        return sum(f.read_text(errors="replace").count("committed") for f in self.log_dir.glob("worker-*.log"))

    def finished(self) -> bool:
        return self.proc is not None and self.proc.poll() == 0

    def run_to_completion(self, timeout_s: float) -> None:
        """Supervise: restart the worker whenever it dies (a fatal client error after a fault
        is allowed: the next run fences it and continues) until it exits 0."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc is None:
                self.start()
            rc = self.proc.poll()
            if rc == 0:
                return
            if rc is not None:
                self.start()
            time.sleep(0.2)
        self.kill()
        raise AssertionError(f"worker did not finish within {timeout_s}s; log tail:\n{self.log_tail()}")

    def wait_progress(self, commits: int, timeout_s: float) -> None:
        """Until ``commits`` transactions were committed in all, or the worker finished the input."""
        deadline = time.monotonic() + timeout_s
        while self.committed_count() < commits and not self.finished():
            if time.monotonic() > deadline:
                raise AssertionError(f"worker made no progress; log tail:\n{self.log_tail()}")
            if self.proc is not None and self.proc.poll() is not None:
                self.start()
            time.sleep(0.1)
