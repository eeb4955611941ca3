"""An elastic cluster (issue 20): grow from 3 to 5 brokers without a restart, move every partition
from {1,2,3} to {3,4,5} through SIGKILLs, retire brokers 1 and 2 - with real broker processes, an
acks=all idempotent confluent-kafka producer writing the whole time and a consumer group
committing what it consumed.

1. Brokers 1-3 start with ``--peers`` (the metadata voters); a 6-partition RF 3 topic on
   {1,2,3}; the load and the group start (the group's ``__consumer_offsets`` is on {1,2,3} too).
2. Brokers 4 and 5 join the running cluster as KRaft observers (``--join``,
   :meth:`LocalCluster.add_broker`).
3. ``litemq partition reassign --execute`` moves every partition of the cluster (the topic and
   ``__consumer_offsets``) to {3,4,5} (kafka-reassign-partitions' JSON plan). Broker 5 is
   SIGSTOPped (and fenced) first, so no move can finish before it is resumed: the moves are
   listed in progress at each of the SIGKILLs that follow, each one restarted before the next -
   the broker being added (4), the leader of a moving partition, the metadata leader. Then 5
   resumes and ``--verify`` runs until every move completed.
4. ``litemq cluster add-controller`` 4 and 5, ``remove-controller`` 1 and 2 (KIP-853): the
   metadata voters are {3,4,5}. ``litemq broker decommission`` 1 and 2 (they hold no replica
   any more: it unregisters them); both are stopped. The cluster still serves: a new topic is
   created (a metadata write) and takes acks=all writes, the load goes on.
5. Every acknowledged record is read back from {3,4,5} at the offset its producer was told, no
   duplicates, offsets dense. The group, closed and restarted against {3,4,5}, resumes exactly at
   its last commit: nothing before it is read again, nothing is skipped.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from litemq.testing.cluster import LocalCluster, wait_for
from litemq.testing.readback import read_sequenced
from tests.cluster.test_cluster_failover import CLIENT, Load, create_topic
from tests.cluster.test_reassignment import OVERRIDES, _bootstrap, _check_dense, _create, _listed, _moved, \
    _pause_joiner, _partition_dirs, _views

pytestmark = [pytest.mark.timeout(600), pytest.mark.slow]

TOPIC, PARTITIONS = "growing", 6
GROUP = "growing-group"
OLD, NEW = [1, 2, 3], [3, 4, 5]


def _cli(*args: str, timeout_s: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "litemq.cli", *args], capture_output=True, text=True,
                          timeout=timeout_s)


def _rotations(brokers: list[int], p: int) -> list[int]:
    """Partition ``p``'s replicas over ``brokers``, rotated so the leaders spread."""
    k = p % len(brokers)
    return brokers[k:] + brokers[:k]


class GroupConsumer:
    """A consumer of group ``GROUP`` in a background thread: it consumes ``TOPIC`` and commits
    (synchronously) the position after every batch it got; ``consumed`` holds every
    (partition, offset, seq) read, ``committed`` partition -> the last offset the coordinator
    acknowledged. :meth:`stop` commits once more and closes (leaves the group)."""

    def __init__(self, bootstrap: str) -> None:
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "enable.auto.commit": False,
                                  "auto.offset.reset": "earliest", "session.timeout.ms": 6000,
                                  "heartbeat.interval.ms": 500, **CLIENT})
        self.consumed: list[tuple[int, int, int]] = []
        self.committed: dict[int, int] = {}
        self.commit_errors: list[str] = []
        self._positions: dict[int, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> "GroupConsumer":
        self.consumer.subscribe([TOPIC])
        self._thread.start()
        return self

    def _commit(self) -> None:
        offsets = [TopicPartition(TOPIC, p, o) for p, o in sorted(self._positions.items())]
        if not offsets:
            return
        try:
            done = self.consumer.commit(offsets=offsets, asynchronous=False) or []
        except KafkaException as exc:  # the coordinator moves or died: the next batch commits again
            self.commit_errors.append(str(exc))
            return
        failed = [tp for tp in done if tp.error is not None]
        if failed:
            self.commit_errors.append(str(failed[0].error))
        self.committed.update((tp.partition, tp.offset) for tp in done if tp.error is None)

    def _run(self) -> None:
        while not self._stop.is_set():
            records = [m for m in self.consumer.consume(500, 0.2) if m.error() is None]
            for m in records:
                p, seq = m.value().decode().split(":")
                assert int(p) == m.partition()
                self.consumed.append((m.partition(), m.offset(), int(seq)))
                self._positions[m.partition()] = m.offset() + 1
            if records:
                self._commit()

    @property
    def stopped(self) -> bool:
        return self._stop.is_set()

    def abandon(self) -> None:
        """Stop consuming and close without a final commit (cleanup after a failure)."""
        self._stop.set()
        self._thread.join(30)
        self.consumer.close()

    def stop(self) -> dict[int, int]:
        """Stop consuming, commit the positions until acknowledged (30 s at most), close; returns
        partition -> committed offset."""
        self._stop.set()
        self._thread.join(30)
        wait_for(lambda: (self._commit(), self.committed == self._positions)[1], 30,
                 lambda: f"the final commit of {self._positions} (errors {self.commit_errors[-3:]})", interval_s=0.5)
        self.consumer.close()
        return dict(self.committed)


def _resume_group(bootstrap: str, ends: dict[int, int]) -> list[tuple[int, int, int]]:
    """A new member of ``GROUP`` reading ``TOPIC`` until it reached ``ends`` (partition -> end
    offset) and 1 s passed without a record; returns (partition, offset, seq) as read."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "session.timeout.ms": 6000, **CLIENT})
    consumer.subscribe([TOPIC])
    seen: list[tuple[int, int, int]] = []
    try:
        def done():
            for m in consumer.consume(500, 0.5):
                assert m.error() is None, m.error()
                seen.append((m.partition(), m.offset(), int(m.value().decode().split(":")[1])))
            return all(any(q == p and o == end - 1 for q, o, _ in seen) for p, end in ends.items())
        wait_for(done, 60, lambda: f"the resumed group reads to {ends}: got {len(seen)} records", interval_s=0)
        seen += [(m.partition(), m.offset(), int(m.value().decode().split(":")[1]))
                 for m in consumer.consume(500, 1.0) if m.error() is None]
    finally:
        consumer.close()
    return seen


def _all_partitions(bootstrap: str) -> dict[tuple[str, int], list[int]]:
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=30)
    return {(t, p): list(pm.replicas) for t, tm in md.topics.items() for p, pm in tm.partitions.items()}


def _voters(cluster: LocalCluster) -> set[tuple[int, ...]]:
    """The metadata voter sets the live brokers report."""
    return {tuple(st["metadata"]["voters"]) for st in cluster.statuses().values()}


def _registered(cluster: LocalCluster) -> dict[int, bool]:
    """Broker id -> live, as the metadata leader registered them."""
    leader = cluster.metadata_leader()
    return {b["node_id"]: b["live"] for b in cluster.status(leader)["brokers"]}


def _move_metadata_voters(cluster: LocalCluster, bootstrap: str) -> None:
    """``litemq cluster add-controller`` 4 and 5, ``remove-controller`` 1 and 2: the metadata
    voters go from {1,2,3} to {3,4,5}, as every live broker reports."""
    for verb, nid in (("add-controller", 4), ("add-controller", 5), ("remove-controller", 1),
                      ("remove-controller", 2)):
        r = _cli("cluster", verb, "-b", bootstrap, "--controller-id", str(nid))
        assert r.returncode == 0, f"{verb} {nid}: {r.stdout + r.stderr}"
    wait_for(lambda: _voters(cluster) == {(3, 4, 5)}, 30,
             lambda: f"every broker reports the metadata voters (3, 4, 5): {_voters(cluster)}")


def _kill_and_restart(cluster: LocalCluster, load: Load, victim: int, what: str, exclude=()) -> None:
    """SIGKILL ``victim`` while the moves are listed in progress; the load goes on without it;
    restart it."""
    assert _listed(cluster, exclude={victim, *exclude}), f"the moves are in progress when {what} {victim} dies"
    cluster.kill(victim)
    load.wait_progress(10, what=f"after SIGKILL of {what} {victim}")
    cluster.restart(victim)
    load.wait_progress(10, what=f"after the restart of {what} {victim}")


def test_grow_move_every_partition_and_retire_two_brokers(tmp_path):
    started = time.monotonic()

    def phase(what: str) -> None:
        print(f"[{time.monotonic() - started:6.1f}s] {what}", flush=True)

    cluster = LocalCluster(tmp_path, 3, OVERRIDES).start()
    try:
        bs = cluster.bootstrap_servers
        _create(bs, TOPIC, [_rotations(OLD, p) for p in range(PARTITIONS)])
        cluster.wait_leaders(TOPIC, PARTITIONS)
        load = Load(bs, TOPIC, PARTITIONS, rate=300).start()
        group = GroupConsumer(bs).start()
        try:
            load.wait_progress(20, what="before the cluster grows")
            wait_for(lambda: len(group.committed) == PARTITIONS, 30,
                     lambda: f"the group commits on every partition: {group.committed} {group.commit_errors[-3:]}")

            phase("growing")
            # 1. grow: two brokers join the running cluster
            for nid in (4, 5):
                cluster.add_broker(nid)
                assert all(nid not in v for v in _voters(cluster)), f"broker {nid} joined as a voter"
                load.wait_progress(10, what=f"after broker {nid} joined")
            assert _registered(cluster) == {nid: True for nid in range(1, 6)}, _registered(cluster)

            phase("moving")
            # 2. move every partition of the cluster from {1,2,3} to {3,4,5}
            current = _all_partitions(bs)
            assert {tuple(sorted(r)) for r in current.values()} == {tuple(OLD)}, current
            assert {t for t, _ in current} == {TOPIC, "__consumer_offsets"}, sorted({t for t, _ in current})
            plan = {key: _rotations(NEW, p) for key, p in ((k, k[1]) for k in current)}
            plan_file = tmp_path / "plan.json"
            plan_file.write_text(json.dumps({"version": 1, "partitions": [
                {"topic": t, "partition": p, "replicas": r} for (t, p), r in sorted(plan.items())]}))

            _pause_joiner(cluster, 5)  # no move completes before broker 5 runs again
            r = _cli("partition", "reassign", "-b", _bootstrap(cluster, 5), "--execute",
                     "--reassignment-json-file", str(plan_file))
            assert r.returncode == 0 and "Successfully started partition reassignments" in r.stdout, \
                r.stdout + r.stderr

            phase("moves started")
            _kill_and_restart(cluster, load, 4, "the broker being added", exclude={5})
            md_leader = cluster.metadata_leader()
            # preferably a leader that is leaving the partition (1 or 2), not the metadata leader
            led = sorted({e["leader_id"] for (t, _), e in cluster.leaders().items() if t == TOPIC} - {md_leader, 5},
                         key=lambda nid: (nid not in (1, 2), nid))
            assert led, f"every partition of {TOPIC} is led by the metadata leader {md_leader}"
            moving_leader = led[0]
            _kill_and_restart(cluster, load, moving_leader, "the leader of a moving partition", exclude={5})
            _kill_and_restart(cluster, load, cluster.metadata_leader(), "the metadata leader", exclude={5})
            phase(f"killed and restarted 4, {moving_leader} (a partition leader), then the metadata leader")
            cluster.resume(5)

            wait_for(lambda: _cli("partition", "reassign", "-b", bs, "--verify", "--reassignment-json-file",
                                  str(plan_file)).returncode == 0, 90,
                     lambda: f"--verify reports every move completed: {_listed(cluster)}", interval_s=1)
            wait_for(lambda: _moved(cluster, TOPIC, {p: plan[(TOPIC, p)] for p in range(PARTITIONS)}), 30,
                     lambda: f"every replica of {TOPIC} on {NEW}: {_views(cluster, TOPIC)}", interval_s=0.5)
            for nid in (1, 2):
                wait_for(lambda: _partition_dirs(cluster, nid, TOPIC) == [], 30,
                         lambda: f"broker {nid} deletes its replicas: {_partition_dirs(cluster, nid, TOPIC)}")
            load.wait_progress(10, what="after the moves")

            phase("moves done")
            # 3. the metadata voters become {3,4,5}, one change at a time (KIP-853)
            _move_metadata_voters(cluster, bs)

            phase("voters moved")
            # 4. retire brokers 1 and 2
            for nid in (1, 2):
                r = _cli("broker", "decommission", str(nid), "-b", _bootstrap(cluster, 1, 2), "--timeout", "60")
                assert r.returncode == 0 and f"Broker {nid} is decommissioned" in r.stdout, r.stdout + r.stderr
                time.sleep(1.0)  # several heartbeats of the still running broker: it does not register again
                assert nid not in _registered(cluster), f"broker {nid} registered again: {_registered(cluster)}"
                cluster.node(nid).stop()
                load.wait_progress(10, what=f"after broker {nid} was decommissioned and stopped")
            phase("brokers 1, 2 retired")
            assert sorted(_registered(cluster)) == [3, 4, 5], _registered(cluster)
            remaining = _bootstrap(cluster, 1, 2)
            create_topic(remaining, "after-shrink", 3, 3)  # a metadata write without brokers 1 and 2
            placed = _all_partitions(remaining)
            assert ("after-shrink", 2) in placed and all(set(r) <= set(NEW) for r in placed.values()), \
                f"replicas outside the brokers left {NEW}: {({k: r for k, r in placed.items() if set(r) - set(NEW)})}"
            cluster.wait_leaders("after-shrink", 3)
            probe = Producer({"bootstrap.servers": remaining, "acks": "all", **CLIENT})
            for p in range(3):
                probe.produce("after-shrink", value=b"x", partition=p)
            assert probe.flush(30) == 0
            load.wait_progress(20, what="on brokers 3, 4, 5 only")
            committed = group.stop()  # the load goes on: the group has records to resume with
            load.wait_progress(20, what="after the group closed")
        finally:
            load.stop()
            if not group.stopped:
                group.abandon()
        assert not load.failed, load.failed[:3]

        phase("load stopped")
        # 5. every acknowledged record at its offset, read from {3,4,5}
        want = {p: {o for o, _ in acked} for p, acked in load.acked.items()}
        read = read_sequenced(remaining, TOPIC, PARTITIONS, want, group_id="grown-check", client_config=CLIENT)
        _check_dense(load, read)
        at = {p: dict(got) for p, got in read.items()}

        # the group: consumed records are the log's; resumed at its commit, nothing skipped
        assert all(at[p].get(o) == s for p, o, s in group.consumed), "the group read records not in the log"
        assert sorted(committed) == list(range(PARTITIONS)), committed
        for p in range(PARTITIONS):
            before = {o for q, o, _ in group.consumed if q == p and o < committed[p]}
            assert before == set(range(committed[p])), f"partition {p}: the group skipped offsets below its commit"
        phase("read back")
        ends = {p: len(read[p]) for p in range(PARTITIONS)}
        assert all(ends[p] > committed[p] for p in range(PARTITIONS)), f"nothing to resume with: {ends} {committed}"
        resumed = _resume_group(remaining, ends)
        for p in range(PARTITIONS):
            got = sorted(o for q, o, _ in resumed if q == p)
            assert got == list(range(committed[p], ends[p])), \
                f"partition {p}: resumed at {got[:1]} (committed {committed[p]}), read {len(got)} of " \
                f"{ends[p] - committed[p]} after it, first re-read {[o for o in got if o < committed[p]][:3]}"
        assert all(at[p][o] == s for p, o, s in resumed)
        print(f"\n{sum(load.counts())} acknowledged records, group committed {committed}, "
              f"{len(group.commit_errors)} failed commits; took {time.monotonic() - started:.1f}s")
    finally:
        cluster.stop()


def test_no_replica_placed_on_a_decommissioned_broker(tmp_path):
    """A topic created right after ``broker decommission 4`` and the stop of broker 4 gets no
    replica on it: the metadata leader places replicas only on registered brokers, not on one it
    still heard from within ``broker.session.timeout.ms`` before it was unregistered; and the
    decommissioned broker, still running, does not register again with its heartbeats (only a
    restarted process, a new incarnation, does)."""
    overrides = {**OVERRIDES, "broker.heartbeat.interval.ms": "1000", "broker.session.timeout.ms": "8000"}
    with LocalCluster(tmp_path, 3, overrides) as cluster:
        cluster.add_broker(4)
        r = _cli("broker", "decommission", "4", "-b", cluster.bootstrap_servers)
        assert r.returncode == 0 and "Broker 4 is decommissioned" in r.stdout, r.stdout + r.stderr
        time.sleep(2.5)  # heartbeats of the still running broker 4 do not register it again
        assert 4 not in _registered(cluster), _registered(cluster)
        cluster.node(4).stop()
        create_topic(_bootstrap(cluster, 4), "fresh", 6, 3)
        placed = {p: r for (t, p), r in _all_partitions(_bootstrap(cluster, 4)).items() if t == "fresh"}
        assert sorted(placed) == list(range(6)) and all(sorted(r) == [1, 2, 3] for r in placed.values()), \
            f"replicas placed on the decommissioned, stopped broker 4: {placed}"
