"""The Spark executor's read of one partition into Arrow, over plain TCP and over TLS + SASL.

    python benchmarks/bench_spark_secured_read.py [--records 500000] [--size 100] [--rounds 3]

What one Spark task does (``litemq.spark.reader.read_partition``), without Spark: read
``--records`` records of ``--size`` bytes of one partition of a ``litemq serve`` broker into
Arrow record batches, on one core of the caller. Three ways:

- ``PLAINTEXT fast path``: LiteMQ's codec (Fetch v11, 8 MiB reads) and Arrow decoding;
- ``SASL_SSL fast path``: the same over TLS 1.3 with SCRAM-SHA-512 (``litemq.spark.wire_security``);
- ``SASL_SSL fallback``: the confluent-kafka consumer the reader used for every TLS/SASL
  client before (forced here with a client setting the fast path does not know).

Rows/s and MB/s of the read, timed from the call to the last batch; rounds rotate the three
ways and the table gives medians; the broker and the caller share the machine's cores.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import trustme
from confluent_kafka import Producer

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench_broker import machine

from litemq.spark import wire
from litemq.spark.reader import KafkaInputPartition, read_partition
from litemq.testing.process import BrokerProcess
from litemq.testing.wire import WireClient
from tests.security.security_helpers import scram_upsertion

USER, PASSWORD = "bench", "bench-secret"
TOPIC = "bench"


def _read(conf: dict, n: int) -> float:
    part = KafkaInputPartition(TOPIC, 0, 0, n, conf, include_headers=False, fail_on_data_loss=True,
                               read_committed=False, poll_timeout_ms=120_000)
    t0 = time.perf_counter()
    rows = sum(rb.num_rows for rb in read_partition(part))
    dt = time.perf_counter() - t0
    assert rows == n, rows
    return dt


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=500_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        ca = trustme.CA()
        ca.cert_pem.write_to_path(str(d / "ca.pem"))
        ca.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.write_to_path(str(d / "server.pem"))
        overrides = {"ssl.keystore.location": str(d / "server.pem"), "ssl.truststore.location": str(d / "ca.pem")}
        with BrokerProcess(d / "data", overrides=overrides, listeners={"PLAINTEXT": 0, "SASL_SSL": 0}) as broker:
            with WireClient("127.0.0.1", broker.ports["PLAINTEXT"]) as admin:
                admin.request(51, 0, {"deletions": [], "upsertions": [
                    scram_upsertion(USER, PASSWORD, "SCRAM-SHA-512", 4096)]})
            producer = Producer({"bootstrap.servers": broker.bootstrap("PLAINTEXT"), "linger.ms": 20,
                                 "batch.size": 1_000_000, "queue.buffering.max.messages": 1_000_000})
            payload = os.urandom(args.size)
            for i in range(args.records):
                producer.produce(TOPIC, payload, partition=0)
                if i % 100_000 == 0:
                    producer.poll(0)
            assert producer.flush(120) == 0
            secured = {"bootstrap.servers": broker.bootstrap("SASL_SSL"), "security.protocol": "SASL_SSL",
                       "ssl.ca.location": str(d / "ca.pem"), "sasl.mechanism": "SCRAM-SHA-512",
                       "sasl.username": USER, "sasl.password": PASSWORD}
            ways = {"PLAINTEXT fast path": {"bootstrap.servers": broker.bootstrap("PLAINTEXT")},
                    "SASL_SSL fast path": secured,
                    "SASL_SSL fallback (confluent-kafka)": {**secured, "queued.min.messages": "100000"}}
            assert wire.supports(ways["SASL_SSL fast path"]) and not wire.supports(ways[
                "SASL_SSL fallback (confluent-kafka)"])
            times: dict[str, list[float]] = {name: [] for name in ways}
            names = list(ways)
            for r in range(args.rounds):
                for name in names[r % 3:] + names[:r % 3]:
                    times[name].append(_read(ways[name], args.records))
    print(f"## Spark executor read, one partition (`python benchmarks/bench_spark_secured_read.py "
          f"--records {args.records} --size {args.size} --rounds {args.rounds}`)\n")
    print("| way | rows/s | MB/s | runs (s) |")
    print("|---|---:|---:|---|")
    for name, runs in times.items():
        dt = statistics.median(runs)
        print(f"| {name} | {args.records / dt:,.0f} | {args.records * args.size / dt / 1e6:.1f} | "
              f"{', '.join(f'{t:.2f}' for t in runs)} |")
    print(f"\nMachine: {machine()}; load average at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
