"""Brokers joining a running cluster as KRaft observers (``--join``; issue 20 "Membership"), on
real broker processes with a real Kafka client.

- A broker started with ``--join`` registers, becomes a learner of the metadata group (never a
  voter), hosts replicas (a leader and a follower), serves acks=all producers and consumers.
- SIGKILLed and restarted with ``--join`` naming only an address nobody listens on, it starts
  from the metadata quorum it recorded and the brokers' registered RPC addresses, catches up and
  every acknowledged record is read back from it at its offset.
- ``process.roles=broker``: AddRaftVoter refuses it (INVALID_REQUEST), nothing changes.
- A data dir of another cluster joining is refused by the bootstrap broker and the new broker
  exits with status 1, naming both cluster ids (all on one cluster, to keep the suite short).
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic

from litemq.testing.cluster import HOST, LocalCluster, wait_for
from litemq.testing.process import distinct_free_port

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]


def _quorum(cluster: LocalCluster, node: int) -> tuple[list[int], list[int]]:
    meta = cluster.status(node)["metadata"]
    return meta["voters"], meta.get("learners", [])


def _produce(bootstrap: str, topic: str, n: int, tag: str) -> dict[tuple[int, int], bytes]:
    """n records acks=all over partitions 0 and 1: (partition, offset) -> value."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", retries=1000, retry_backoff_ms=200,
                             request_timeout_ms=15000)
    try:
        futures = [(producer.send(topic, f"{tag}-{i}".encode(), partition=i % 2), f"{tag}-{i}".encode())
                   for i in range(n)]
        producer.flush(30)
        return {(md.partition, md.offset): value for md, value in ((f.get(30), v) for f, v in futures)}
    finally:
        producer.close(5)


def _read_all(bootstrap: str, topic: str, expected: int) -> dict[tuple[int, int], bytes]:
    """Every record of ``topic``'s partitions 0 and 1 from the beginning: until ``expected``
    records were read and the position reached the end offset of both partitions."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest", enable_auto_commit=False)
    try:
        tps = [TopicPartition(topic, 0), TopicPartition(topic, 1)]
        consumer.assign(tps)
        got: dict[tuple[int, int], bytes] = {}

        def read_to_end() -> bool:
            for records in consumer.poll(timeout_ms=500).values():
                got.update({(m.partition, m.offset): m.value for m in records})
            if len(got) < expected:
                return False
            ends = consumer.end_offsets(tps)
            return all(consumer.position(tp) >= ends[tp] for tp in tps)

        wait_for(read_to_end, 60, lambda: f"read {len(got)} of {expected}", interval_s=0)
        return got
    finally:
        consumer.close()


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "litemq.cli", *args], capture_output=True, text=True, timeout=120)


def test_observer_joins_serves_and_restarts_from_its_recorded_quorum(tmp_path):
    with LocalCluster(tmp_path, n=3) as cluster:
        cluster.add_broker(4)
        leader = cluster.metadata_leader()
        wait_for(lambda: _quorum(cluster, leader) == ([1, 2, 3], [4]), 20,
                 lambda: f"metadata quorum on the leader: {_quorum(cluster, leader)}")
        wait_for(lambda: _quorum(cluster, 4) == ([1, 2, 3], [4]), 20, lambda: f"on broker 4: {_quorum(cluster, 4)}")
        admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
        try:
            admin.create_topics([NewTopic("grown", -1, replica_assignments={0: [4, 1, 2], 1: [2, 3, 4]})])
        finally:
            admin.close()
        cluster.wait_leaders("grown", 2)
        acked = _produce(cluster.bootstrap_servers, "grown", 200, "a")

        broker4 = cluster.node(4)
        cluster.kill(4)
        dead = distinct_free_port(set(cluster.rpc_ports.values()))
        join_at = broker4.extra_args.index("--join") + 1
        broker4.extra_args[join_at] = f"{HOST}:{dead}"  # nobody listens there
        broker4.start()
        acked.update(_produce(cluster.bootstrap_servers, "grown", 200, "b"))
        wait_for(lambda: _quorum(cluster, 4) == ([1, 2, 3], [4]), 30, lambda: f"on broker 4: {_quorum(cluster, 4)}")
        log = (tmp_path / "node-4" / "broker.log").read_text()
        assert "starting from the recorded metadata quorum" in log

        got = _read_all(broker4.bootstrap_servers, "grown", len(acked))  # broker 4 leads partition 0 or follows
        assert got == acked
        for p in (0, 1):
            offsets = sorted(o for (q, o) in got if q == p)
            assert offsets == list(range(len(offsets)))

        # a broker that may never be a controller
        cluster.add_broker(5, overrides={"process.roles": "broker"})
        wait_for(lambda: 5 in _quorum(cluster, cluster.metadata_leader())[1], 20, "broker 5 an observer")
        r = _cli("cluster", "add-controller", "-b", cluster.bootstrap_servers, "--controller-id", "5")
        assert r.returncode != 0 and "INVALID_REQUEST" in r.stdout + r.stderr, r.stdout + r.stderr
        assert "process.roles=broker" in r.stdout + r.stderr
        assert _quorum(cluster, cluster.metadata_leader()) == ([1, 2, 3], [4, 5])

        # a data dir of another cluster (its meta.properties names another cluster.id) cannot join
        x_id = cluster.status(1)["cluster_id"]
        other_id = "0therC1usterIdAAAAAAAA"
        data = tmp_path / "node-9"
        data.mkdir()
        (data / "meta.properties").write_text(
            f"cluster.id={other_id}\ndirectory.id=AAAAAAAAAAAAAAAAAAAAAQ\nnode.id=9\nversion=1\n")
        taken = set(cluster.rpc_ports.values())
        rpc = distinct_free_port(taken)
        r = subprocess.run(
            [sys.executable, "-m", "litemq.cli", "serve", "--data-dir", str(data), "--node-id", "9",
             "--listen", f"{HOST}:{distinct_free_port(taken | {rpc})}", "-o", "http.listen=off",
             "--rpc-listen", f"{HOST}:{rpc}", "--join", ",".join(f"{HOST}:{p}" for p in cluster.rpc_ports.values())],
            capture_output=True, text=True, timeout=90, stdin=subprocess.DEVNULL)
        assert r.returncode == 1, r.stdout + r.stderr
        assert f"this is cluster {x_id}" in r.stderr and other_id in r.stderr, r.stderr
        assert all(b["node_id"] != 9 for b in cluster.status(1)["brokers"])  # nobody registered it
