"""Produce/consume over SASL_SSL vs PLAINTEXT on one ``litemq serve`` process (issue 12).

    python benchmarks/bench_security.py [--records N] [--connections C]

One broker with two listeners, PLAINTEXT and SASL_SSL (TLS 1.3 from Python's ``ssl``, SASL
PLAIN/SCRAM), and the StandardAuthorizer (``super.users=User:ANONYMOUS;User:admin``). Three
callers, each on its own 3-partition topic, with confluent-kafka and 1 KiB records:

- ``PLAINTEXT``: no TLS, no SASL (``User:ANONYMOUS``, a super user: no ACL lookups);
- ``SASL_SSL super``: TLS + SCRAM-SHA-512 as ``User:admin`` (super user): the cost of TLS;
- ``SASL_SSL + ACLs``: TLS + SCRAM-SHA-512 as ``User:bench``, which holds only the ACLs it needs
  (WRITE/READ on its topic, READ on its group): TLS plus the authorizer's checks.

For each: produce throughput with acks=all and the idempotent producer (msg/s, MB/s; latency
p50/p99 is librdkafka's per-message ``latency()``, produce() to delivery report, at full load),
after an untimed warm-up record (connections, SASL, InitProducerId); then consume throughput
reading the topic back from the beginning (assign, no group), timed from the first record.
Plus the cost of opening one authenticated connection (TCP + TLS handshake + SaslHandshake +
SCRAM-SHA-512 with 4096 iterations, raw WireClient) p50/p99 over ``C`` connections.
Each caller runs ``--repeat`` rounds (a new topic each), interleaved with the others and rotated
per round; the table gives medians. The machine and its load average are printed with the results.
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
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench_broker import machine, pct
from bench_cluster import produce_burst

from litemq.security.acl_operations import AclOperation as O
from litemq.security.acl_operations import ResourceType as R
from litemq.security.acls import AclPermissionType as P
from litemq.testing.process import BrokerProcess
from tests.security.security_helpers import (
    ADMIN_PASSWORD,
    ADMIN_USER,
    AdminWire,
    connect,
    sasl_ssl_overrides,
    scram_upsertion,
)

PARTITIONS = 3
SIZE = 1024
BENCH_USER, BENCH_PASSWORD = "bench", "bench-secret"


class _Pki:
    """The broker keystore and CA for the run (trustme), shaped like the tests' ``pki`` fixture."""

    def __init__(self, d: Path) -> None:
        ca = trustme.CA(organization_name="LiteMQ bench CA")
        self.ca_pem, self.server_pem = d / "ca.pem", d / "server.pem"
        ca.cert_pem.write_to_path(str(self.ca_pem))
        ca.issue_cert("127.0.0.1", "localhost").private_key_and_cert_chain_pem.write_to_path(str(self.server_pem))

    def broker_overrides(self) -> dict[str, str]:
        return {"ssl.keystore.location": str(self.server_pem), "ssl.truststore.location": str(self.ca_pem),
                "ssl.client.auth": "none"}

    def client_context(self):
        import ssl

        return ssl.create_default_context(cafile=str(self.ca_pem))


def client_conf(broker: BrokerProcess, pki: _Pki, who: str) -> dict:
    if who == "PLAINTEXT":
        return {"bootstrap.servers": broker.bootstrap("PLAINTEXT")}
    user, password = (ADMIN_USER, ADMIN_PASSWORD) if who == "SASL_SSL super" else (BENCH_USER, BENCH_PASSWORD)
    return {"bootstrap.servers": broker.bootstrap("SASL_SSL"), "security.protocol": "SASL_SSL",
            "ssl.ca.location": str(pki.ca_pem), "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": user,
            "sasl.password": password}


def produce(conf: dict, topic: str, n: int) -> dict:
    """acks=all idempotent producer with bench_broker's settings; one untimed warm-up record
    (metadata, SASL, InitProducerId, connections), then :func:`bench_cluster.produce_burst`."""
    p = Producer({**conf, "acks": "all", "enable.idempotence": True, "linger.ms": 5, "batch.size": 1_000_000,
                  "queue.buffering.max.messages": 1_000_000, "queue.buffering.max.kbytes": 1_048_576})
    p.produce(topic, b"warm-up")
    assert p.flush(60) == 0
    return produce_burst(p, topic, n, SIZE)


def consume(conf: dict, topic: str, n: int, group: str) -> dict:
    """Read ``n`` records back from the beginning; the first record (connection, SASL, first
    fetch) is untimed, the clock runs from then until the n-th record."""
    c = Consumer({**conf, "group.id": group, "enable.auto.commit": False, "fetch.max.bytes": 52428800,
                  "max.partition.fetch.bytes": 10485760, "queued.min.messages": 1000000,
                  "fetch.queue.backoff.ms": 0})
    c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
    got = 0
    deadline = time.monotonic() + 300
    while got == 0 and time.monotonic() < deadline:
        got = len(c.consume(1, 1.0))
    t0 = time.perf_counter()
    while got < n and time.monotonic() < deadline:
        msgs = c.consume(min(10000, n - got), 1.0)  # never wait out the timeout for a short last batch
        for m in msgs:
            assert m.error() is None, m.error()
        got += len(msgs)
    dt = time.perf_counter() - t0
    c.close()
    assert got >= n, f"read {got} of {n}"
    return {"msg_s": (n - 1) / dt, "mb_s": (n - 1) * SIZE / dt / 1e6}


def connect_cost(port: int, pki: _Pki, n: int) -> dict:
    """TCP + TLS + SaslHandshake + SCRAM-SHA-512 exchange of one new connection, ms."""
    ms = []
    for _ in range(n):
        t0 = time.perf_counter()
        connect(port, pki.client_context(), BENCH_USER, BENCH_PASSWORD, "SCRAM-SHA-512").close()
        ms.append((time.perf_counter() - t0) * 1000)
    return {"p50_ms": pct(ms, 0.5), "p99_ms": pct(ms, 0.99)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=100_000, help="1 KiB records per caller")
    ap.add_argument("--connections", type=int, default=50, help="connections timed for the connect cost")
    ap.add_argument("--repeat", type=int, default=3, help="rounds; the tables give each figure's median")
    args = ap.parse_args()
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as d:
        pki = _Pki(Path(d))
        overrides = {**sasl_ssl_overrides(pki), "super.users": f"User:ANONYMOUS;User:{ADMIN_USER}",
                     "inter.broker.listener.name": "PLAINTEXT"}
        with BrokerProcess(Path(d) / "data", listeners={"PLAINTEXT": 0, "SASL_SSL": 0},
                           overrides=overrides) as broker:
            admin = AdminWire(broker.ports["SASL_SSL"], pki.client_context())
            admin.upsert_scram([scram_upsertion(BENCH_USER, BENCH_PASSWORD, "SCRAM-SHA-512"),
                                scram_upsertion(ADMIN_USER, ADMIN_PASSWORD, "SCRAM-SHA-512")])
            callers = ["PLAINTEXT", "SASL_SSL super", "SASL_SSL + ACLs"]
            principal = f"User:{BENCH_USER}"
            admin.create_acls([(R.GROUP, "bench-sec", principal, O.READ, P.ALLOW)])
            runs: dict[str, list[tuple[dict, dict]]] = {who: [] for who in callers}
            for r in range(args.repeat):
                # interleaved, and rotated each round, so load from elsewhere spreads over all three
                for who in callers[r % 3:] + callers[:r % 3]:
                    topic = f"bench-sec-{callers.index(who)}-{r}"
                    admin.create_topic(topic, PARTITIONS)
                    admin.create_acls([(R.TOPIC, topic, principal, O.WRITE, P.ALLOW),
                                       (R.TOPIC, topic, principal, O.READ, P.ALLOW)])
                    conf = client_conf(broker, pki, who)
                    prod = produce(conf, topic, args.records)
                    cons = consume(conf, topic, args.records + 1, "bench-sec")
                    runs[who].append((prod, cons))
                    print(f"round {r} {who}: produce {prod} consume {cons}", flush=True)
            rows = [(who, {k: statistics.median(p[k] for p, _ in runs[who]) for k in runs[who][0][0]},
                     {k: statistics.median(c[k] for _, c in runs[who]) for k in runs[who][0][1]}) for who in callers]
            conn = connect_cost(broker.ports["SASL_SSL"], pki, args.connections)
            print(f"connect: {conn}", flush=True)
            admin.close()
    load_after = os.getloadavg()
    print()
    print(f"Command: `python benchmarks/bench_security.py --records {args.records} "
          f"--connections {args.connections} --repeat {args.repeat}` (medians of {args.repeat} interleaved rounds)")
    print()
    print("| listener / caller | records | produce msg/s | produce MB/s | produce p50 ms | produce p99 ms "
          "| consume msg/s | consume MB/s |")
    print("|---|---|---|---|---|---|---|---|")
    for who, prod, cons in rows:
        print(f"| {who} | {args.records:,} | {prod['msg_s']:,.0f} | {prod['mb_s']:.1f} | {prod['p50_ms']:.1f} "
              f"| {prod['p99_ms']:.1f} | {cons['msg_s']:,.0f} | {cons['mb_s']:.1f} |")
    print()
    print(f"New SASL_SSL connection (TCP + TLS + SCRAM-SHA-512, 4096 iterations), {args.connections} "
          f"connections: p50 {conn['p50_ms']:.1f} ms, p99 {conn['p99_ms']:.1f} ms")
    print()
    print(f"Machine: {machine()}; load average {load_before[0]:.1f} before, {load_after[0]:.1f} after")


if __name__ == "__main__":
    main()
