"""Racks without a cluster: the rack-aware replica selector's rules (KIP-392) and which followers
it may name, rack-aware replica placement (KIP-36, also on a 4-broker cluster), ``rack`` in the metadata image and its
snapshots, the settings, a single broker reporting its ``broker.rack``, ``litemq cluster start
--racks``. The cluster behaviour is in test_follower_fetch.py."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from types import SimpleNamespace

import pytest
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from litemq.cluster.image import MetadataImage, assign_replicas
from litemq.cluster.placement import assign_replicas_rack_aware, rack_alternated
from litemq.cluster.partition import ReplicatedPartition
from litemq.config import RACK_AWARE_REPLICA_SELECTOR, BrokerConfig
from litemq.limits import MAX_RACK_ID_CHARS
from litemq.protocol.errors import ErrorCode, KafkaError
from litemq.replica.selector import NO_PREFERRED_REPLICA, rack_aware_preferred_replica
from litemq.testing.cluster import LocalCluster, free_base_port, wait_for
from litemq.testing.process import BrokerProcess
from litemq.testing.wire import WireClient

RACKS = {1: "a", 2: "b", 3: "c", 4: "c", 5: None}


def _pick(client_rack, ends, leader=1, fetch_offset=10):
    return rack_aware_preferred_replica(client_rack, leader, ends, fetch_offset, RACKS.get)


def test_rack_aware_selection_follows_kafkas_rules():
    ends = {2: 20, 3: 20}
    assert _pick("b", ends) == 2  # the follower in the client's rack
    assert _pick("a", ends) == NO_PREFERRED_REPLICA  # the client is in the leader's rack
    assert _pick("", ends) == NO_PREFERRED_REPLICA and _pick(None, ends) == NO_PREFERRED_REPLICA  # no client.rack
    assert _pick("z", ends) == NO_PREFERRED_REPLICA  # no replica in the client's rack
    assert _pick("b", {2: 9, 3: 20}) == NO_PREFERRED_REPLICA  # its log ends before the fetch offset
    assert _pick("b", {2: 10}) == 2  # log end == fetch offset: it has what the client asks next
    assert _pick("c", {3: 15, 4: 18}) == 4  # the most caught-up in the rack
    assert _pick("c", {3: 18, 4: 18}) == 4  # a tie: the highest broker id
    assert _pick("b", {}) == NO_PREFERRED_REPLICA  # no in-sync follower offered
    assert _pick("a", {1: 50}, leader=2) == 1 and _pick("a", {1: 50}, leader=1) == NO_PREFERRED_REPLICA
    assert _pick("x", {5: 50}) == NO_PREFERRED_REPLICA  # a broker without a rack matches none


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def time(self) -> float:
        return self.now


def _leader_partition(clock: _Clock, matches: dict[int, int], alive: set[int]) -> ReplicatedPartition:
    """A ReplicatedPartition of replicas 1, 2, 3 led by node 1, over stand-ins of its log, Raft
    group and host (the parts ``in_sync_follower_log_ends`` reads)."""
    node = SimpleNamespace(is_leader=True, term=1, match_offsets=lambda: dict(matches),
                           active_voters=lambda: frozenset(alive))
    host = SimpleNamespace(node_id=1, config=BrokerConfig(), peer_alive=lambda r: r in alive)
    p = ReplicatedPartition("t", 0, SimpleNamespace(log_end_offset=0), SimpleNamespace(loop=clock), [1, 2, 3])
    p.group = SimpleNamespace(node=node, host=host, failed=False, closed=False)
    return p


def test_only_caught_up_followers_are_offered_as_read_replicas():
    """Kafka's ISR rule for the candidates: a follower counts when its log reached the high
    watermark within replica.lag.time.max.ms (30 s), and its broker is live."""
    clock = _Clock()
    matches = {1: 99, 2: 99, 3: 50}
    p = _leader_partition(clock, matches, alive={1, 2, 3})
    p.high_watermark = 100
    assert p.in_sync_follower_log_ends() == {2: 100}  # 3 never had every committed record
    clock.now += 10
    matches[3] = 99
    assert p.in_sync_follower_log_ends() == {2: 100, 3: 100}
    clock.now += 20
    p.high_watermark, matches[1], matches[2], matches[3] = 150, 149, 149, 120
    assert p.in_sync_follower_log_ends() == {2: 150, 3: 121}  # 3 lags, but caught up 20 s ago
    clock.now += 11
    assert p.in_sync_follower_log_ends() == {2: 150}  # 31 s since 3 last caught up
    p2 = _leader_partition(clock, {1: 9, 2: 9, 3: 9}, alive={1, 3})
    p2.high_watermark = 10
    assert p2.in_sync_follower_log_ends() == {3: 10}  # broker 2 is not live


def test_rack_aware_placement_spreads_each_partition_over_racks():
    racks = {1: "a", 2: "a", 3: "b", 4: "b", 5: "c", 6: "c"}
    assert rack_alternated(racks, racks) == [1, 3, 5, 2, 4, 6]
    placed = assign_replicas_rack_aware(racks, racks, 12, 3, start=0)
    assert all(len({racks[b] for b in r}) == 3 for r in placed), placed  # RF = racks: one per rack
    assert Counter(r[0] for r in placed) == {b: 2 for b in racks}  # leaders even
    assert Counter(b for r in placed for b in r) == {b: 6 for b in racks}  # replicas even
    two = {1: "a", 2: "a", 3: "b", 4: "b"}
    assert all({two[b] for b in r} == {"a", "b"} for r in assign_replicas_rack_aware(two, two, 8, 3, start=5))
    lopsided = {1: "a", 2: "a", 3: "a", 4: "b"}  # every partition still reaches rack b
    assert all(4 in r for r in assign_replicas_rack_aware(lopsided, lopsided, 8, 2, start=0))
    mixed = {1: "a", 2: None, 3: None}  # brokers without a rack count as one more rack
    assert all(1 in r for r in assign_replicas_rack_aware(mixed, mixed, 6, 2, start=1))
    none = {1: None, 2: None, 3: None}  # no racks at all: the plain round robin
    assert assign_replicas_rack_aware(none, none, 5, 2, start=3) == assign_replicas([1, 2, 3], 5, 2, start=3)
    with pytest.raises(KafkaError) as e:
        assign_replicas_rack_aware(two, two, 1, 5, start=0)
    assert e.value.code == ErrorCode.INVALID_REPLICATION_FACTOR


def test_register_broker_keeps_the_rack_through_snapshots():
    img = MetadataImage()
    img.apply({"type": "register_broker", "node_id": 1, "host": "h", "port": 1, "rack": "eu-1a"})
    img.apply({"type": "register_broker", "node_id": 2, "host": "h", "port": 2})  # a broker without a rack
    assert (img.brokers[1].rack, img.brokers[2].rack) == ("eu-1a", None)
    again = MetadataImage.from_json(img.to_json())
    assert (again.brokers[1].rack, again.brokers[2].rack) == ("eu-1a", None)
    old = img.to_json()  # a snapshot written before racks: broker rows of 5 items
    old["brokers"] = [row[:5] for row in old["brokers"]]
    assert MetadataImage.from_json(old).brokers[1].rack is None
    img.apply({"type": "register_broker", "node_id": 1, "host": "h", "port": 1, "rack": "eu-1b"})  # moved
    assert img.brokers[1].rack == "eu-1b"


def test_rack_settings_are_checked():
    cfg = BrokerConfig.from_sources(overrides={"broker.rack": "r1", "replica.selector.class": RACK_AWARE_REPLICA_SELECTOR})
    cfg.validate()
    assert (cfg.broker_rack, cfg.replica_selector_class) == ("r1", RACK_AWARE_REPLICA_SELECTOR)
    assert (BrokerConfig().broker_rack, BrokerConfig().replica_selector_class) == (None, None)  # Kafka's defaults
    with pytest.raises(ValueError, match="replica.selector.class"):
        BrokerConfig.from_sources(overrides={"replica.selector.class": "com.example.MySelector"}).validate()
    with pytest.raises(ValueError, match="broker.rack"):
        BrokerConfig.from_sources(overrides={"broker.rack": "r" * (MAX_RACK_ID_CHARS + 1)}).validate()


def test_single_broker_reports_its_rack(tmp_path):
    with BrokerProcess(tmp_path / "data", overrides={"broker.rack": "rack-1"}) as proc, \
            WireClient("127.0.0.1", proc.port) as c:
        md = c.request(3, 1, {"topics": []})
        dc = c.request(60, 0, {"include_cluster_authorized_operations": False})
        md0 = c.request(3, 0, {"topics": []})  # v0 has no rack field
    assert [b.rack for b in md.brokers] == ["rack-1"] and [b.rack for b in dc.brokers] == ["rack-1"]
    assert len(md0.brokers) == 1


def test_cli_cluster_start_racks_shown_by_status(tmp_path):
    data_dir = tmp_path / "c"
    base = free_base_port(3)
    env = dict(os.environ, COLUMNS="200")

    def litemq(*args):
        return subprocess.run([sys.executable, "-m", "litemq.cli", *args], capture_output=True, text=True,
                              timeout=120, env=env)

    r = litemq("cluster", "start", "-n", "3", "--racks", "a,b", "--data-dir", str(data_dir))
    assert r.returncode != 0 and "--racks" in r.stderr, "one rack per node"
    stopped = False
    try:
        r = litemq("cluster", "start", "-n", "3", "--base-port", str(base), "--http-base-port", "0",
                   "--racks", "eu-a,eu-b,eu-c", "--data-dir", str(data_dir))
        assert r.returncode == 0, r.stdout + r.stderr

        def racks_shown():
            lines = litemq("cluster", "status", "--data-dir", str(data_dir)).stdout.splitlines()
            return all(any(f"127.0.0.1:{base + i}" in line and f"eu-{'abc'[i]}" in line for line in lines)
                       for i in range(3))

        wait_for(racks_shown, 30, "cluster status shows each broker's rack", interval_s=0.5)
        r = litemq("cluster", "stop", "--data-dir", str(data_dir))
        assert r.returncode == 0, r.stdout + r.stderr
        stopped = True
        r = litemq("cluster", "status", "--data-dir", str(data_dir))
        assert "--racks eu-a,eu-b,eu-c" in r.stderr  # the command that starts the same cluster again
    finally:
        if not stopped:
            litemq("cluster", "stop", "--data-dir", str(data_dir))


def test_new_topics_spread_replicas_over_racks(tmp_path):
    """4 brokers in racks a, a, b, b: every partition of an RF 2 topic (and of new partitions)
    has a replica in each rack (Kafka's round robin by id alone puts 1 and 2 together)."""
    racks = {1: "a", 2: "a", 3: "b", 4: "b"}
    with LocalCluster(tmp_path, 4, node_overrides={n: {"broker.rack": r} for n, r in racks.items()}) as cluster:
        wait_for(lambda: {b["node_id"]: b["rack"] for b in cluster.status(1)["brokers"]} == racks, 20,
                 "every broker registered its rack")
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        admin.create_topics([NewTopic("spread", 8, 2)], operation_timeout=30)["spread"].result(60)
        admin.create_partitions([NewPartitions("spread", 12)], operation_timeout=30)["spread"].result(60)

        def placed():
            md = admin.list_topics("spread", timeout=10).topics["spread"].partitions
            return {p: list(m.replicas) for p, m in md.items()} if len(md) == 12 else None

        replicas = wait_for(placed, 20, "12 partitions of spread in the metadata")
    assert all({racks[b] for b in r} == {"a", "b"} for r in replicas.values()), replicas
    assert Counter(r[0] for r in replicas.values()) == {1: 3, 2: 3, 3: 3, 4: 3}  # leaders still even
