"""Cost of Kafka offsets in replicated partitions on the Fetch read path (issue 19; not a test).

    python benchmarks/bench_offset_translation.py [--mb 256] [--batch-kb 16] [--repeat 5]

Builds one partition log of ``--mb`` MiB of 1 KiB records in ``--batch-kb`` KiB batches, as a
Raft follower writes it, twice: without any Raft-internal batch (every single-broker log, and a
replicated one until a failover under load), and with one internal batch (a new leader's no-op)
at the very start, so every later batch's base offset must be rewritten. For each, it reads the
whole log from offset 0 through ``PartitionLog.read_for_clients`` in 1 MiB fetches (the
broker's default partition fetch size) and reports MB/s and the ratio. Without translation the
read returns file regions and the benchmark reads them with ``pread`` (what the TLS path and
the ``to_bytes`` fallback do; plaintext connections use sendfile, which is cheaper still); with
it the read copies the bytes and rewrites one header per batch.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from litemq.protocol.records import RAFT_INTERNAL_KEY_VERSION, Record, build_batch, build_control_batch
from litemq.storage.config import LogConfig
from litemq.storage.log import PartitionLog
from litemq.testing.machine import describe_machine

FETCH_BYTES = 1 << 20


def build(directory: Path, mb: int, batch_kb: int, internal: bool) -> PartitionLog:
    plog = PartitionLog.open(directory, LogConfig())
    offset = 0
    if internal:
        plog.append_as_follower(build_control_batch(base_offset=0, partition_leader_epoch=1, control_type=2,
                                                    timestamp_ms=-1, key_version=RAFT_INTERNAL_KEY_VERSION))
        offset = 1
    per_batch = batch_kb
    value = b"x" * 1000
    total = mb << 20
    written = 0
    while written < total:
        batch = build_batch([Record(offset + i, 1_700_000_000_000, None, value) for i in range(per_batch)],
                            base_offset=offset, partition_leader_epoch=1)
        plog.append_as_follower(batch)
        offset += per_batch
        written += len(batch)
    plog.flush()
    return plog


def read_all(plog: PartitionLog) -> tuple[float, int]:
    """Seconds and bytes to read the whole log as clients see it, 1 MiB per fetch."""
    t = plog.translator
    kafka = t.kafka_offset(plog.log_start_offset)
    end = t.kafka_offset(plog.log_end_offset)
    got = 0
    started = time.perf_counter()
    while kafka < end:
        res = plog.read_for_clients(t.raft_offset(kafka), FETCH_BYTES, max_offset=plog.log_end_offset)
        data = res.to_bytes()
        got += len(data)
        # the next fetch starts after the last record returned (header fields at fixed places)
        pos = 0
        last = kafka
        while pos + 61 <= len(data):
            base = int.from_bytes(data[pos:pos + 8], "big", signed=True)
            length = int.from_bytes(data[pos + 8:pos + 12], "big")
            delta = int.from_bytes(data[pos + 23:pos + 27], "big", signed=True)
            last = base + delta + 1
            pos += length + 12
        if last <= kafka:
            raise RuntimeError(f"no progress at Kafka offset {kafka}")
        kafka = last
    return time.perf_counter() - started, got


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=int, default=256, help="MiB of records per log")
    ap.add_argument("--batch-kb", type=int, default=16, help="KiB (records of 1 KiB) per batch")
    ap.add_argument("--repeat", type=int, default=5, help="reads per log (median reported)")
    ap.add_argument("--dir", default=None, help="directory on the disk to measure (default: a temp dir)")
    args = ap.parse_args()
    base = Path(tempfile.mkdtemp(dir=args.dir))
    try:
        rows = []
        for internal in (False, True):
            plog = build(base / f"t-{int(internal)}", args.mb, args.batch_kb, internal)
            runs = []
            for _ in range(args.repeat):
                secs, nbytes = read_all(plog)
                runs.append(nbytes / secs / 1e6)
            rows.append((internal, statistics.median(runs), min(runs), max(runs), nbytes))
            plog.close()
        print(f"Machine: {describe_machine()}")
        print(f"Log: {args.mb} MiB of 1 KiB records in {args.batch_kb} KiB batches; fetches of 1 MiB; "
              f"median of {args.repeat} full reads (page cache warm)\n")
        print("| log | read path | MB/s (median) | range |")
        print("|---|---|---:|---|")
        for internal, med, lo, hi, _ in rows:
            what = "one internal batch at offset 0: every base offset rewritten" if internal else "no internal batch"
            path = "bytes copied + one header rewrite per batch" if internal else "file regions (pread)"
            print(f"| {what} | {path} | {med:,.0f} | {lo:,.0f}-{hi:,.0f} |")
        print(f"\nTranslated / identity: {rows[1][1] / rows[0][1]:.2f}")
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
