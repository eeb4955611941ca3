"""``litemq broker decommission`` and ``litemq cluster rebalance`` (issue 20) and the reassignment
gauges of ``/metrics``, on 4 real broker processes.

- Decommission: a topic of RF 3 over brokers {1,2,3} under an acks=all idempotent producer.
  While broker 4 is SIGSTOPped (fenced), a reassignment onto it stays open: its leader's
  ``kafka_server_replicamanager_reassigningpartitions`` and the controller's
  ``litemq_controller_reassigning_partitions`` count it, and ``decommission 1`` is refused (only
  {2,3} would be left for RF 3) without changing anything. Once 4 is back (gauges 0),
  ``decommission 1`` moves every replica off broker 1 and unregisters it; broker 1 deletes its
  replicas; with broker 1 stopped every acknowledged record is read back at its offset.
- Rebalance: a topic of RF 2 on brokers {1,2,3} only. ``--dry-run`` prints a plan that gives
  every broker 3 replicas and changes nothing; the real run moves replicas onto broker 4 and
  spreads the leaders.
- A restarted decommissioned broker registers again and gets no replica back.
"""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request

import pytest
from kafka import KafkaAdminClient, TopicPartition

from litemq.cluster.rebalance import replica_counts
from litemq.testing.cluster import LocalCluster, wait_for
from litemq.testing.readback import read_sequenced
from tests.cluster.test_cluster_failover import CLIENT, Load
from tests.cluster.test_reassignment import (OVERRIDES, _bootstrap, _check_dense, _create, _listed, _pause_joiner,
                                             _partition_dirs, _views)

pytestmark = [pytest.mark.timeout(600), pytest.mark.slow]


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "litemq.cli", *args], capture_output=True, text=True, timeout=300)


def _gauge(cluster: LocalCluster, node: int, name: str) -> float:
    with urllib.request.urlopen(cluster.http_url(node) + "/metrics", timeout=10) as resp:
        text = resp.read().decode()
    values = [float(line.split()[-1]) for line in text.splitlines() if line.startswith(name + " ")]
    assert len(values) == 1, f"{name} on broker {node}: {values}"
    return values[0]


def _gauges(cluster: LocalCluster, nodes, name: str) -> float:
    return sum(_gauge(cluster, n, name) for n in nodes)


def _assignment(cluster: LocalCluster, topic: str, exclude=()) -> dict[int, list[int]]:
    """partition -> replicas as the partition's leader reports them."""
    return {p: next(pt["replicas"] for pt in v.values() if pt["role"] == "leader")
            for p, v in _views(cluster, topic, exclude).items() if any(pt["role"] == "leader" for pt in v.values())}


def test_decommission_under_load_and_reassignment_gauges(tmp_path):
    topic, n = "leaving", 4
    before = [[1, 2, 3], [2, 3, 1], [3, 1, 2], [1, 3, 2]]
    with LocalCluster(tmp_path, 4, OVERRIDES, http=True) as cluster:
        bs = cluster.bootstrap_servers
        _create(bs, topic, before)
        cluster.wait_leaders(topic, n)
        load = Load(bs, topic, n, rate=300).start()
        try:
            load.wait_progress(20, what="before the move")
            _pause_joiner(cluster, 4)
            live = (1, 2, 3)
            admin = KafkaAdminClient(bootstrap_servers=_bootstrap(cluster, 4), request_timeout_ms=30000)
            try:
                assert admin.alter_partition_reassignments({TopicPartition(topic, 3): [4, 3, 2]}) == \
                    {TopicPartition(topic, 3): None}
            finally:
                admin.close()
            wait_for(lambda: _gauges(cluster, live, "kafka_server_replicamanager_reassigningpartitions") == 1, 20,
                     "the leader of the moving partition reports it")
            assert _gauges(cluster, live, "litemq_controller_reassigning_partitions") == 1

            # broker 4 is fenced: only {2, 3} would be left for replication factor 3
            r = _cli("broker", "decommission", "1", "-b", _bootstrap(cluster, 4))
            assert r.returncode != 0 and "fewer live brokers" in r.stderr, r.stdout + r.stderr
            assert _assignment(cluster, topic, {4})[0] == [1, 2, 3]

            cluster.resume(4)
            wait_for(lambda: _listed(cluster) == {}, 60, "the move onto broker 4 completes", interval_s=0.5)
            wait_for(lambda: _gauges(cluster, cluster.node_ids, "kafka_server_replicamanager_reassigningpartitions")
                     == 0 and _gauges(cluster, cluster.node_ids, "litemq_controller_reassigning_partitions") == 0,
                     20, "the gauges fall to 0")
            load.wait_progress(20, what="after the first move")

            r = _cli("broker", "decommission", "1", "-b", bs, "--timeout", "120")
            assert r.returncode == 0, r.stdout + r.stderr
            assert "Broker 1 is decommissioned" in r.stdout, r.stdout
            got = _assignment(cluster, topic)
            assert sorted(got) == list(range(n)) and all(1 not in rs and len(rs) == 3 for rs in got.values()), got
            wait_for(lambda: _partition_dirs(cluster, 1, topic) == [], 30,
                     lambda: f"broker 1 deletes its replicas: {_partition_dirs(cluster, 1, topic)}")
            load.wait_progress(20, what="after the decommission")
        finally:
            load.stop()
        assert not load.failed, load.failed[:3]
        cluster.kill(1)
        cluster.wait_leaders(topic, n, exclude={1})
        want = {p: {o for o, _ in acked} for p, acked in load.acked.items()}
        _check_dense(load, read_sequenced(_bootstrap(cluster, 1), topic, n, want, group_id="decommissioned",
                                          client_config=CLIENT))

        # restarted, broker 1 registers again and gets nothing back
        cluster.restart(1)
        cluster.wait_live(1)
        assert _partition_dirs(cluster, 1, topic) == []
        assert all(1 not in rs for rs in _assignment(cluster, topic).values())


def test_rebalance_dry_run_then_onto_a_new_broker(tmp_path):
    topic = "skewed"
    before = [[1, 2], [2, 3], [3, 1], [1, 2], [2, 3], [3, 1]]
    with LocalCluster(tmp_path, 4, OVERRIDES) as cluster:
        bs = cluster.bootstrap_servers
        _create(bs, topic, before)
        cluster.wait_leaders(topic, len(before))

        r = _cli("cluster", "rebalance", "-b", bs, "--dry-run")
        assert r.returncode == 0, r.stdout + r.stderr
        lines = r.stdout.splitlines()
        proposed = json.loads(lines[lines.index("Proposed partition reassignment configuration") + 1])
        plan = {p["partition"]: p["replicas"] for p in proposed["partitions"]}
        planned = {p: plan.get(p, rs) for p, rs in enumerate(before)}
        assert replica_counts({(topic, p): rs for p, rs in planned.items()}, [1, 2, 3, 4]) == \
            {1: 3, 2: 3, 3: 3, 4: 3}, planned
        assert sum(1 for p in plan if sorted(plan[p]) != sorted(before[p])) == 3, plan  # 3 replicas move, no more
        assert _listed(cluster) == {}
        assert _assignment(cluster, topic) == dict(enumerate(before))

        r = _cli("cluster", "rebalance", "-b", bs, "--timeout", "120")
        assert r.returncode == 0, r.stdout + r.stderr
        got = _assignment(cluster, topic)
        assert replica_counts({(topic, p): rs for p, rs in got.items()}, [1, 2, 3, 4]) == \
            {1: 3, 2: 3, 3: 3, 4: 3}, got
        assert _partition_dirs(cluster, 4, topic), "broker 4 hosts replicas now"

        def leaders_spread():
            led = [e["leader_id"] for e in cluster.leaders().values()]
            return len(led) == len(before) and max(led.count(b) for b in range(1, 5)) - \
                min(led.count(b) for b in range(1, 5)) <= 1
        wait_for(leaders_spread, 30, lambda: f"leaders spread over 4 brokers: {cluster.leaders()}", interval_s=0.5)

        r = _cli("cluster", "rebalance", "-b", bs)
        assert r.returncode == 0 and "nothing to move" in r.stdout, r.stdout + r.stderr

