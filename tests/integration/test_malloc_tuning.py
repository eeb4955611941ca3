"""``litemq serve`` keeps freed memory for reuse (litemq.broker.malloc, glibc mallopt): a workload
shaped like a broker's - frames reassembled from 256 KiB socket reads, copied out, freed, with
small allocations in between - faults far fewer fresh pages in with it than without it. Each
variant runs in a fresh interpreter (the thresholds are per process and cannot be unset)."""

from __future__ import annotations

import subprocess
import sys

WORKLOAD = """
import os, resource, sys
from litemq.broker.malloc import keep_freed_memory
if sys.argv[1] == "tuned":
    assert keep_freed_memory()
chunk = os.urandom(256 << 10)
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for i in range(200):
    buf = bytearray()
    for _ in range(4 + i % 5):
        buf += chunk
    frame = bytes(buf)
    del buf
    keep = [bytes(1000) for _ in range(100)]
    del frame, keep
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def _faults(variant: str) -> int:
    out = subprocess.run([sys.executable, "-c", WORKLOAD, variant], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return int(out.stdout.strip())


def test_kept_freed_memory_is_reused_instead_of_faulted_in():
    plain, tuned = _faults("plain"), _faults("tuned")
    # 200 frames of 1-2 MiB: without the thresholds most of their pages are fresh each time
    assert plain > 20_000, plain
    assert tuned < plain / 10, (tuned, plain)


def test_serve_applies_it(tmp_path):
    """The broker process runs with it: its page faults stay few while it takes 1 MiB batches."""
    from confluent_kafka import Producer

    from litemq.testing.process import BrokerProcess

    def minflt(pid: int) -> int:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[7])

    with BrokerProcess(tmp_path / "d") as broker:
        p = Producer({"bootstrap.servers": broker.bootstrap_servers, "acks": "all", "linger.ms": 20,
                      "batch.size": 1_000_000})
        value = bytes(1024)
        for _ in range(2_000):  # warm-up: the heap grows to its working size
            p.produce("t", value)
        assert p.flush(30) == 0
        before = minflt(broker.proc.pid)
        for _ in range(40_000):  # ~40 MiB in ~1 MiB batches
            p.produce("t", value)
            p.poll(0)
        assert p.flush(60) == 0
        faults = minflt(broker.proc.pid) - before
    # every received byte through fresh pages would be ~10,000 faults (40 MiB / 4 KiB)
    assert faults < 5_000, faults
