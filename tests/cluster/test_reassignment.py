"""Partition reassignment (KIP-455, issue 20) on 4 real broker processes, with kafka-python's
AdminClient (AlterPartitionReassignments / ListPartitionReassignments; confluent-kafka has no
such calls) and a confluent-kafka acks=all idempotent producer writing the whole time.

- A topic of RF 3 on brokers {1,2,3} moves to {2,3,4}: broker 4 is SIGSTOPped first, so the move
  is seen in progress (listed with adding [4], removing [1]); once it resumes the move completes
  (nothing listed, every replica reports the target, broker 1 deleted its replica dirs). Every
  acknowledged record is read back at its offset, offsets stay 0..N-1 although the logs hold
  Raft-internal CONFIG batches, and again once broker 1 is stopped (the data lives on {2,3,4}).
  Kafka's errors: cancelling nothing, an unknown broker, an unknown partition.
- The partition leader is SIGKILLed during a move: a new leader resumes it and it completes; the
  killed broker, restarted, deletes its replica; no acknowledged record is lost.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaAdminClient, TopicPartition
from kafka.errors import InvalidReplicationAssignmentError, KafkaError, NoReassignmentInProgressError, UnknownTopicOrPartitionError

from litemq.protocol.errors import ErrorCode
from litemq.testing.cluster import LocalCluster, wait_for
from litemq.testing.wire import WireClient
from litemq.testing.readback import read_sequenced
from tests.cluster.test_cluster_failover import CLIENT, Load, check_no_acked_loss

pytestmark = [pytest.mark.timeout(600), pytest.mark.slow]

OVERRIDES = {"broker.heartbeat.interval.ms": "250", "broker.session.timeout.ms": "2500",
             "leader.imbalance.check.interval.ms": "1000"}


def _create(bootstrap: str, topic: str, assignment: list[list[int]]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, len(assignment), replica_assignment=assignment)],
                        operation_timeout=30)[topic].result(timeout=60)


def _kadmin(cluster: LocalCluster) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers, request_timeout_ms=30000)


def _views(cluster: LocalCluster, topic: str, exclude=()) -> dict[int, dict[int, dict]]:
    """partition -> node -> its status entry, over the live brokers."""
    out: dict[int, dict[int, dict]] = {}
    for node, st in cluster.statuses(exclude).items():
        for pt in st["partitions"]:
            if pt["topic"] == topic:
                out.setdefault(pt["partition"], {})[node] = pt
    return out


def _moved(cluster: LocalCluster, topic: str, targets: dict[int, list[int]], exclude=()) -> bool:
    """Every partition hosted by exactly its target, with the target as voters and no learner."""
    views = _views(cluster, topic, exclude)
    for p, target in targets.items():
        v = views.get(p, {})
        if sorted(v) != sorted(n for n in target if n not in exclude):
            return False
        for pt in v.values():
            if pt["replicas"] != target:
                return False
            if pt["role"] == "leader" and (pt["raft_voters"] != sorted(target) or pt["raft_learners"]):
                return False
    return True


def _pause_joiner(cluster: LocalCluster, node: int) -> None:
    """SIGSTOP ``node`` (the broker joining the replica set) so the move stays in progress, and
    wait until it is fenced; first restart it while it leads the metadata group (a paused
    metadata leader answers nothing)."""
    while cluster.metadata_leader() == node:
        cluster.kill(node)
        wait_for(lambda: cluster.metadata_leader() != node, 20, "a new metadata leader")
        cluster.restart(node)
    cluster.pause(node)
    # until the others fence it: clients then no longer pick it for metadata (they would hang)
    wait_for(lambda: all(not b["live"] for st in cluster.statuses({node}).values() for b in st["brokers"]
                         if b["node_id"] == node), 20, f"broker {node} fenced")


def _bootstrap(cluster: LocalCluster, *exclude: int) -> str:
    return ",".join(f"127.0.0.1:{cluster.node(i).port}" for i in cluster.node_ids if i not in exclude)


def _listed(cluster: LocalCluster, exclude=()) -> dict:
    """ListPartitionReassignments through a new kafka-python admin client bootstrapped from the
    live brokers (retried: the client does not retry a controller that just died)."""
    def ask():
        admin = KafkaAdminClient(bootstrap_servers=_bootstrap(cluster, *exclude))
        try:
            return [admin.list_partition_reassignments()]
        except KafkaError:
            return None
        finally:
            admin.close()
    return wait_for(ask, 30, "ListPartitionReassignments answered")[0]


def _partition_dirs(cluster: LocalCluster, node: int, topic: str) -> list[str]:
    data = Path(cluster.node(node).data_dir)
    return sorted(d.name for d in data.iterdir() if d.is_dir() and d.name.startswith(topic + "-"))


def _check_dense(load: Load, read: dict[int, list[tuple[int, int]]]) -> None:
    check_no_acked_loss(load, read)
    for p, got in read.items():
        offsets = [o for o, _ in got]
        assert offsets == list(range(len(offsets))), \
            f"partition {p}: offsets not 0..{len(offsets) - 1}: first gaps {[o for i, o in enumerate(offsets) if o != i][:5]}"


def test_move_every_partition_under_load(tmp_path):
    topic, n = "moving", 2
    before = {0: [1, 2, 3], 1: [2, 3, 1]}
    after = {0: [2, 3, 4], 1: [3, 4, 2]}
    with LocalCluster(tmp_path, 4, OVERRIDES) as cluster:
        bs = cluster.bootstrap_servers
        _create(bs, topic, [before[p] for p in range(n)])
        cluster.wait_leaders(topic, n)
        admin = _kadmin(cluster)
        load = Load(bs, topic, n, rate=300).start()
        try:
            load.wait_progress(20, what="before the move")
            # Kafka's errors
            res = admin.alter_partition_reassignments({TopicPartition(topic, 0): None,
                                                       TopicPartition(topic, 1): [2, 3, 9],
                                                       TopicPartition(topic, 7): [2, 3, 4],
                                                       TopicPartition("nope", 0): [2, 3, 4]})
            assert res == {TopicPartition(topic, 0): NoReassignmentInProgressError,
                           TopicPartition(topic, 1): InvalidReplicationAssignmentError,
                           TopicPartition(topic, 7): UnknownTopicOrPartitionError,
                           TopicPartition("nope", 0): UnknownTopicOrPartitionError}, res
            assert admin.list_partition_reassignments() == {}

            _pause_joiner(cluster, 4)  # the new replica cannot catch up: the move stays in progress
            admin.close()  # a client holding a connection to the paused broker may ask it and hang
            admin = KafkaAdminClient(bootstrap_servers=_bootstrap(cluster, 4), request_timeout_ms=30000)
            res = admin.alter_partition_reassignments({TopicPartition(topic, p): after[p] for p in range(n)})
            assert res == {TopicPartition(topic, p): None for p in range(n)}, res
            listed = admin.list_partition_reassignments()
            assert listed == {
                TopicPartition(topic, 0): {"replicas": [2, 3, 4, 1], "adding_replicas": [4], "removing_replicas": [1]},
                TopicPartition(topic, 1): {"replicas": [3, 4, 2, 1], "adding_replicas": [4], "removing_replicas": [1]},
            }, listed
            assert admin.list_partition_reassignments({topic: [1, 5]}) == {
                TopicPartition(topic, 1): listed[TopicPartition(topic, 1)]}
            load.wait_progress(20, what="while broker 4 is paused (the old voters commit)")
            # broker 4 joined as a learner and is not promoted before it catches up
            confs = {p: (pt["raft_voters"], pt["raft_learners"]) for p, v in _views(cluster, topic, {4}).items()
                     for pt in v.values() if pt["role"] == "leader"}
            assert confs == {0: ([1, 2, 3], [4]), 1: ([1, 2, 3], [4])}, confs
            cluster.resume(4)

            wait_for(lambda: admin.list_partition_reassignments() == {} and _moved(cluster, topic, after), 60,
                     lambda: f"the move to {after} completes: listed {admin.list_partition_reassignments()}, "
                             f"replicas {_views(cluster, topic)}", interval_s=0.5)
            wait_for(lambda: _partition_dirs(cluster, 1, topic) == [], 20,
                     lambda: f"broker 1 deletes its replicas: {_partition_dirs(cluster, 1, topic)}")
            load.wait_progress(20, what="after the move")
        finally:
            load.stop()
            admin.close()
        assert not load.failed, load.failed[:3]
        views = _views(cluster, topic)
        internal = sum(pt["raft_log_end_offset"] - pt["log_end_offset"] for v in views.values() for pt in v.values()
                       if pt["role"] == "leader")
        assert internal >= 2 * 3, f"the leaders' logs hold {internal} Raft-internal batches (>= 3 CONFIG each)"
        want = {p: {o for o, _ in acked} for p, acked in load.acked.items()}
        _check_dense(load, read_sequenced(bs, topic, n, want, group_id="moved-check", client_config=CLIENT))

        cluster.kill(1)
        cluster.wait_leaders(topic, n, exclude={1})
        others = ",".join(f"127.0.0.1:{cluster.node(i).port}" for i in (2, 3, 4))
        _check_dense(load, read_sequenced(others, topic, n, want, group_id="moved-check-2", client_config=CLIENT))


def test_leader_killed_during_a_move(tmp_path):
    topic = "moving-kill"
    with LocalCluster(tmp_path, 4, OVERRIDES) as cluster:
        bs = cluster.bootstrap_servers
        _create(bs, topic, [[1, 2, 3]])
        cluster.wait_leaders(topic, 1)
        admin = _kadmin(cluster)
        load = Load(bs, topic, 1, rate=300).start()
        try:
            load.wait_progress(20, what="before the move")
            _pause_joiner(cluster, 4)
            admin.close()
            admin = KafkaAdminClient(bootstrap_servers=_bootstrap(cluster, 4), request_timeout_ms=30000)
            assert admin.alter_partition_reassignments({TopicPartition(topic, 0): [2, 3, 4]}) == \
                {TopicPartition(topic, 0): None}
            victim = cluster.leader_of(topic, 0)
            cluster.kill(victim)
            cluster.resume(4)
            wait_for(lambda: _moved(cluster, topic, {0: [2, 3, 4]}, exclude={victim}), 60,
                     lambda: f"the move completes without broker {victim}: {_views(cluster, topic, {victim})}",
                     interval_s=0.5)
            assert _listed(cluster, exclude={victim}) == {}
            load.wait_progress(20, what="after the move")
            cluster.restart(victim)
            if victim not in (2, 3, 4):
                wait_for(lambda: _partition_dirs(cluster, victim, topic) == [], 30,
                         lambda: f"restarted broker {victim} deletes its replica: {_partition_dirs(cluster, victim, topic)}")
            wait_for(lambda: _moved(cluster, topic, {0: [2, 3, 4]}), 30,
                     lambda: f"still {[2, 3, 4]} after the restart: {_views(cluster, topic)}", interval_s=0.5)
            time.sleep(0.5)
        finally:
            load.stop()
            admin.close()
        assert not load.failed, load.failed[:3]
        want = {0: {o for o, _ in load.acked[0]}}
        _check_dense(load, read_sequenced(bs, topic, 1, want, group_id="kill-check", client_config=CLIENT))


def _cli(*args: str):
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-m", "litemq.cli", "partition", "reassign", *args], capture_output=True,
                          text=True, timeout=120)


def test_cli_generate_execute_verify_cancel(tmp_path):
    """``litemq partition reassign`` with kafka-reassign-partitions' JSON files: a generated plan
    moves a topic to {2,3,4} (verify: in progress, then completed); a move cancelled while its
    new replica is SIGSTOPped walks back to the original replicas, and the joiner deletes its copy."""
    topic = "cli-moving"
    with LocalCluster(tmp_path / "c", 4, OVERRIDES) as cluster:
        bs = cluster.bootstrap_servers
        _create(bs, topic, [[1, 2, 3], [2, 3, 1]])
        cluster.wait_leaders(topic, 2)
        topics = tmp_path / "topics.json"
        topics.write_text('{"version": 1, "topics": [{"topic": "%s"}]}' % topic)
        r = _cli("-b", bs, "--generate", "--topics-to-move-json-file", str(topics), "--broker-list", "2,3,4")
        assert r.returncode == 0, r.stdout + r.stderr
        lines = r.stdout.splitlines()
        current = json.loads(lines[lines.index("Current partition replica assignment") + 1])
        assert [(p["partition"], p["replicas"]) for p in current["partitions"]] == [(0, [1, 2, 3]), (1, [2, 3, 1])]
        proposed = json.loads(lines[lines.index("Proposed partition reassignment configuration") + 1])
        plan = {p["partition"]: p["replicas"] for p in proposed["partitions"]}
        assert all(sorted(r) == [2, 3, 4] for r in plan.values()) and {r[0] for r in plan.values()} == {2, 3}, plan
        plan_file = tmp_path / "plan.json"
        plan_file.write_text(json.dumps(proposed))

        _pause_joiner(cluster, 4)
        bs = _bootstrap(cluster, 4)  # a client may pick a paused bootstrap broker and hang there
        r = _cli("-b", bs, "--execute", "--reassignment-json-file", str(plan_file))
        assert r.returncode == 0 and f"Successfully started partition reassignments for {topic}-0,{topic}-1" \
            in r.stdout, r.stdout + r.stderr
        r = _cli("-b", bs, "--verify", "--reassignment-json-file", str(plan_file))
        assert r.returncode == 1 and f"Reassignment of partition {topic}-0 is still in progress." in r.stdout, \
            r.stdout + r.stderr
        cluster.resume(4)
        wait_for(lambda: _cli("-b", bs, "--verify", "--reassignment-json-file", str(plan_file)).returncode == 0, 60,
                 lambda: f"verify reports the moves completed: {_views(cluster, topic)}", interval_s=1)
        assert _moved(cluster, topic, plan)
        r = _cli("-b", bs, "--cancel", "--reassignment-json-file", str(plan_file))
        assert r.returncode == 0 and "None of the specified partition reassignments are active" in r.stdout, r.stdout

        # back to {1,2,3} for partition 0, cancelled while broker 1 (joining again) is paused
        back = tmp_path / "back.json"
        back.write_text(json.dumps({"version": 1, "partitions": [{"topic": topic, "partition": 0,
                                                                  "replicas": [1, 2, 3]}]}))
        _pause_joiner(cluster, 1)
        bs = _bootstrap(cluster, 1)
        r = _cli("-b", bs, "--execute", "--reassignment-json-file", str(back))
        assert r.returncode == 0, r.stdout + r.stderr
        assert _partition_dirs(cluster, 4, topic) == [f"{topic}-0", f"{topic}-1"]
        r = _cli("-b", bs, "--cancel", "--reassignment-json-file", str(back))
        assert r.returncode == 0 and f"Successfully cancelled partition reassignments for: {topic}-0" in r.stdout, \
            r.stdout + r.stderr
        cluster.resume(1)
        wait_for(lambda: _moved(cluster, topic, plan), 60,
                 lambda: f"the cancelled move walks back to {plan}: {_views(cluster, topic)}", interval_s=0.5)
        wait_for(lambda: _partition_dirs(cluster, 1, topic) == [], 20,
                 lambda: f"broker 1 deletes the replica it had started: {_partition_dirs(cluster, 1, topic)}")
        assert _listed(cluster) == {}

        # any broker answers: one that is not the metadata leader forwards the change to it
        other = next(i for i in cluster.node_ids if i != cluster.metadata_leader())
        with WireClient("127.0.0.1", cluster.node(other).port) as w:
            r = w.request(45, 0, {"timeout_ms": 10000, "topics": [{"name": topic, "partitions": [
                {"partition_index": 0, "replicas": None}, {"partition_index": 1, "replicas": [4, 3, 2]}]}]})
            assert r.error_code == 0 and [(p.partition_index, p.error_code) for p in r.responses[0].partitions] == \
                [(0, ErrorCode.NO_REASSIGNMENT_IN_PROGRESS), (1, ErrorCode.NONE)], r
            assert w.request(46, 0, {"timeout_ms": 10000, "topics": None}).topics == []  # a reorder: no move
        wait_for(lambda: _moved(cluster, topic, {0: plan[0], 1: [4, 3, 2]}), 20,
                 lambda: f"partition 1's preferred replica is 4: {_views(cluster, topic)}", interval_s=0.5)
