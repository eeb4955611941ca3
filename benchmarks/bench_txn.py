"""Transactional vs idempotent produce on one ``litemq serve`` process (issue 11).

    python benchmarks/bench_txn.py [--records N] [--txn-records T]

For 100 B and 1 KiB records, with confluent-kafka (acks=all, linger.ms=5):
- idempotent producer: ``N`` records in groups of ``T``, each group produced then ``flush()``ed;
- transactional producer: the same groups, each one transaction (``begin_transaction``,
  ``T`` x ``produce``, ``commit_transaction``).
Both producers first complete one untimed one-record group (metadata, producer id,
connections). Prints throughput (msg/s, MB/s over the whole run) and the latency of completing one group
(p50/p99 ms: ``flush()`` for the idempotent producer, ``commit_transaction()`` for the
transactional one: EndTxn, the PrepareCommit write and, before the next
``begin_transaction`` can add partitions, the markers), then the machine.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_broker import machine, pct  # noqa: E402

from litemq.testing.process import BrokerProcess  # noqa: E402

PARTITIONS = 3


def run(bs: str, size: int, n: int, per_group: int, transactional: bool) -> dict:
    topic = f"bench-{'txn' if transactional else 'idem'}-{size}-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": bs})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
    cfg = {"bootstrap.servers": bs, "acks": "all", "enable.idempotence": True, "linger.ms": 5,
           "batch.size": 1_000_000, "queue.buffering.max.messages": 1_000_000,
           "queue.buffering.max.kbytes": 1_048_576, "log_level": 3}
    if transactional:
        cfg["transactional.id"] = "bench-" + uuid.uuid4().hex
    p = Producer(cfg)
    if transactional:
        p.init_transactions(30)
    payload = os.urandom(size)
    # Warm-up, untimed: metadata, producer id, connections (one record, one group).
    if transactional:
        p.begin_transaction()
    p.produce(topic, payload)
    p.commit_transaction(60) if transactional else p.flush(60)
    group_ms: list[float] = []
    t0 = time.perf_counter()
    sent = 0
    while sent < n:
        k = min(per_group, n - sent)
        if transactional:
            p.begin_transaction()
        for _ in range(k):
            while True:
                try:
                    p.produce(topic, payload)
                    break
                except BufferError:
                    p.poll(0.01)
        g0 = time.perf_counter()
        if transactional:
            p.commit_transaction(60)
        else:
            assert p.flush(60) == 0
        group_ms.append((time.perf_counter() - g0) * 1000)
        sent += k
    elapsed = time.perf_counter() - t0
    return {"msgs": n / elapsed, "mb": n * size / elapsed / 1e6, "p50": pct(group_ms, 0.5),
            "p99": pct(group_ms, 0.99), "groups": len(group_ms)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--txn-records", type=int, default=1000, help="records per transaction / per flush")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d, BrokerProcess(Path(d) / "data") as broker:
        bs = broker.bootstrap_servers
        rows = []
        for size in (100, 1024):
            n = args.records if size == 100 else args.records // 4
            for transactional in (False, True):
                r = run(bs, size, n, args.txn_records, transactional)
                rows.append((size, transactional, n, r))
                print(f"{size} B {'transactional' if transactional else 'idempotent'}: {r}", flush=True)
    print()
    print(f"Command: `python benchmarks/bench_txn.py --records {args.records} --txn-records {args.txn_records}`")
    print()
    print("| record | producer | records | per txn/flush | msg/s | MB/s | commit/flush p50 ms | p99 ms |")
    print("|---|---|---|---|---|---|---|---|")
    for size, transactional, n, r in rows:
        print(f"| {'100 B' if size == 100 else '1 KiB'} | {'transactional' if transactional else 'idempotent'} "
              f"| {n:,} | {args.txn_records:,} | {r['msgs']:,.0f} | {r['mb']:.1f} | {r['p50']:.1f} | {r['p99']:.1f} |")
    print()
    print(f"Machine: {machine()}")


if __name__ == "__main__":
    main()
