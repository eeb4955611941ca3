"""Benchmark of litemq.storage.PartitionLog (not a test; never asserts on timings).

Measures, on the disk holding ``--dir``:

1. append throughput (MB/s) of ``PartitionLog.append`` beside a plain sequential ``os.write``
   of the same bytes, for batches of 1 KiB records of 16 KiB and 1 MiB, with fsync off and on
   (fsync on = ``log.flush()`` after every append vs ``os.fdatasync`` after every plain write);
2. read throughput: ``log.read`` regions sent with ``os.sendfile`` to /dev/null;
3. recovery time of a large log: ``PartitionLog.open`` after a clean close, and after a crash
   (marker removed, recovery point reset to 0, so every batch is validated with its CRC).

Usage: ``python benchmarks/bench_log.py --dir /path/on/disk [--mb 256] [--recovery-gb 2]``.
Prints a Markdown table (paste into docs/benchmarks-storage.md).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from litemq.testing.machine import describe_machine
from litemq.protocol.records import build_batch, read_batch_header
from litemq.storage.config import LogConfig
from litemq.storage.log import CLEAN_SHUTDOWN_MARKER, RECOVERY_POINT_CHECKPOINT, PartitionLog

RECORD_BYTES = 1024
BENCH_CONFIG = LogConfig(retention_ms=-1, max_message_bytes=2 * 1024 * 1024)
REPEATS = 3


def make_batch(batch_bytes: int) -> bytearray:
    n = max(1, batch_bytes // RECORD_BYTES - 1)
    recs = [(b"key-%06d" % i, os.urandom(RECORD_BYTES), (), 1_700_000_000_000 + i) for i in range(n)]
    return bytearray(build_batch(recs))


def bench_plain(path: Path, data: bytes, count: int, fsync: bool) -> float:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        t = time.perf_counter()
        for _ in range(count):
            os.write(fd, data)
            if fsync:
                os.fdatasync(fd)
        elapsed = time.perf_counter() - t
    finally:
        os.close(fd)
        os.unlink(path)
    return elapsed


def bench_log(path: Path, data: bytearray, count: int, fsync: bool) -> float:
    log = PartitionLog.open(path, BENCH_CONFIG)
    try:
        t = time.perf_counter()
        for _ in range(count):
            log.append(data, leader_epoch=1)  # rewrites offsets in place: reuse is fine
            if fsync:
                log.flush()
        elapsed = time.perf_counter() - t
    finally:
        log.close()
    return elapsed


def bench_read(path: Path, max_bytes: int) -> tuple[float, int]:
    log = PartitionLog.open(path, BENCH_CONFIG)
    devnull = os.open("/dev/null", os.O_WRONLY)
    total = 0
    try:
        t = time.perf_counter()
        offset = log.log_start_offset
        while offset < log.log_end_offset:
            res = log.read(offset, max_bytes)
            for r in res.regions:
                sent = 0
                while sent < r.length:
                    sent += os.sendfile(devnull, r.file.fileno(), r.position + sent, r.length - sent)
            total += res.size
            offset = _next_offset(log, res.regions[-1])
        elapsed = time.perf_counter() - t
    finally:
        os.close(devnull)
        log.close()
    return elapsed, total


def _next_offset(log: PartitionLog, r) -> int:
    """Base offset of the batch right after region ``r`` (one 61-byte pread)."""
    end = r.position + r.length
    head = os.pread(r.file.fileno(), 61, end)
    if len(head) == 61:
        return read_batch_header(head).base_offset
    segs = log.segments
    for i, seg in enumerate(segs):
        if seg.file is r.file:
            return segs[i + 1].base_offset if i + 1 < len(segs) else log.log_end_offset
    return log.log_end_offset


def bench_recovery(path: Path, gb: float, batch: bytearray) -> dict[str, float]:
    cfg = BENCH_CONFIG
    log = PartitionLog.open(path, cfg)
    count = int(gb * 1024**3 // len(batch))
    t = time.perf_counter()
    for _ in range(count):
        log.append(batch, leader_epoch=1)
    write_s = time.perf_counter() - t
    log.close()
    size = sum(f.stat().st_size for f in path.glob("*.log"))
    t = time.perf_counter()
    log = PartitionLog.open(path, cfg)
    clean_s = time.perf_counter() - t
    log.close()
    (path / CLEAN_SHUTDOWN_MARKER).unlink()
    (path / RECOVERY_POINT_CHECKPOINT).unlink()
    t = time.perf_counter()
    log = PartitionLog.open(path, cfg)
    crash_s = time.perf_counter() - t
    assert log.log_end_offset > 0
    log.close()
    return {"bytes": size, "write_s": write_s, "clean_s": clean_s, "crash_s": crash_s}


def machine() -> str:
    return describe_machine()


def disk(path: Path) -> str:
    try:
        out = subprocess.run(["df", "-T", str(path)], capture_output=True, text=True).stdout.splitlines()[-1]
        dev, fstype = out.split()[:2]
        return f"{dev} ({fstype})"
    except Exception:
        return "unknown"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()))
    ap.add_argument("--mb", type=int, default=256, help="MiB written per fsync-off case")
    ap.add_argument("--fsync-mb", type=int, default=32, help="MiB written per fsync-on case")
    ap.add_argument("--recovery-gb", type=float, default=2.0)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-log-", dir=args.dir))
    print(f"machine: {machine()}; disk: {disk(work)}")
    print()
    print("| case | batch | plain write MB/s | PartitionLog MB/s | ratio |")
    print("|---|---|---|---|---|")
    try:
        for batch_bytes in (16 * 1024, 1024 * 1024):
            batch = make_batch(batch_bytes)
            for fsync in (False, True):
                mb = args.fsync_mb if fsync else args.mb
                count = max(1, mb * 1024 * 1024 // len(batch))
                total_mb = count * len(batch) / 1e6
                plain = logt = float("inf")
                for _ in range(REPEATS):  # alternate, keep the best of each
                    plain = min(plain, bench_plain(work / "plain.bin", bytes(batch), count, fsync))
                    logt = min(logt, bench_log(work / "t-0", batch, count, fsync))
                    shutil.rmtree(work / "t-0", ignore_errors=True)
                p, q = total_mb / plain, total_mb / logt
                label = "fsync each append" if fsync else "no fsync"
                print(f"| {label} | {batch_bytes // 1024} KiB ({len(batch)} B) | {p:.0f} | {q:.0f} | {q / p:.0%} |")
        # read: reuse a fresh 16 KiB log of --mb
        batch = make_batch(16 * 1024)
        rp = work / "read-0"
        bench_log(rp, batch, args.mb * 1024 * 1024 // len(batch), False)
        print()
        print("| read (sendfile to /dev/null, page cache warm) | max_bytes | MB/s |")
        print("|---|---|---|")
        for max_bytes in (1024 * 1024, 8 * 1024 * 1024):
            el, total = bench_read(rp, max_bytes)
            print(f"| 16 KiB batches | {max_bytes // 1024} KiB | {total / 1e6 / el:.0f} |")
        shutil.rmtree(rp, ignore_errors=True)
        r = bench_recovery(work / "recovery-0", args.recovery_gb, batch)
        print()
        print("| recovery (16 KiB batches) | log size | open time |")
        print("|---|---|---|")
        print(f"| clean shutdown marker | {r['bytes'] / 1e9:.2f} GB | {r['clean_s'] * 1000:.1f} ms |")
        print(f"| crash, recovery point 0 (every batch CRC-checked) | {r['bytes'] / 1e9:.2f} GB | "
              f"{r['crash_s']:.2f} s |")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
