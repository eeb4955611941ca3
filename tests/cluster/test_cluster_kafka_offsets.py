"""Kafka's offsets in replicated partitions (issue 19), on 3 real broker processes.

A new Raft leader that inherits records not known committed appends a no-op (a LEADER_CHANGE
batch, Raft-internal): it takes a Raft offset but no Kafka offset (the partition log's offset
translator), so clients see the offsets a single broker would give.

- 20+ leader changes (SIGKILL of the leader under acks=all idempotent load, and the preferred
  replica taking leadership back once restarted): every acknowledged record is read back at
  exactly the offset its producer was told, the records' offsets are 0..N-1 with no gap, the
  Raft log holds internal batches (so the test exercised them), and every replica reports the
  same log start offset and high watermark.
- The same with transactions (commits and aborts, next to an idempotent load): only transaction
  markers take offsets. Checked against the Raft log on disk after the run: every record a
  client read is at its Raft offset minus the Raft-internal batches below it, the high
  watermark is the Raft log end minus them, and the records of one transaction are contiguous.
  (How many markers lie between two transactions is not fixed: a marker write retried across a
  leader change is appended twice, as in Kafka.)
"""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition

from litemq.protocol.records import decode_batch, is_raft_internal_batch, iter_batches
from litemq.testing.cluster import LocalCluster, wait_for
from litemq.testing.wire import WireClient
from tests.cluster.test_cluster_failover import CLIENT, Load, check_no_acked_loss, create_topic
from litemq.testing.readback import read_sequenced

pytestmark = [pytest.mark.timeout(600), pytest.mark.slow]

OVERRIDES = {"broker.heartbeat.interval.ms": "250", "broker.session.timeout.ms": "2500",
             "leader.imbalance.check.interval.ms": "500", "raft.election.timeout.ms": "500"}
LEADER_CHANGES = 20


def _epoch(cluster: LocalCluster, topic: str, partition: int) -> int:
    return cluster.leaders()[(topic, partition)]["leader_epoch"]


def _preferred_leads(cluster: LocalCluster, topic: str) -> bool:
    e = cluster.leaders().get((topic, 0))
    return e is not None and e["leader_id"] == e["replicas"][0]


def _internal_batches(cluster: LocalCluster, topic: str) -> int:
    """Raft-internal batches in the logs of ``topic``'s leaders (Raft log end - Kafka log end)."""
    return sum(e["raft_log_end_offset"] - e["log_end_offset"] for (t, _), e in cluster.leaders().items() if t == topic)


def _change_leaders(cluster: LocalCluster, topic: str, partitions: int, progress, changes: int) -> int:
    """SIGKILL the leader of partition 0 and restart it (the preferred replica takes leadership
    back once caught up) until partition 0's leader epoch rose by ``changes`` and a new leader
    wrote a Raft-internal batch (it inherited records not known committed); ``progress(what)``
    waits for the load to move on. Returns the epochs gained."""
    start = _epoch(cluster, topic, 0)
    rounds = 0
    while _epoch(cluster, topic, 0) - start < changes or not _internal_batches(cluster, topic):
        rounds += 1
        assert rounds <= 2 * changes, f"{rounds} kill/restart rounds: {_epoch(cluster, topic, 0) - start} epochs, " \
                                      f"{_internal_batches(cluster, topic)} Raft-internal batches"
        victim = cluster.leader_of(topic, 0)
        cluster.kill(victim)
        cluster.wait_leaders(topic, partitions, exclude={victim})
        progress(f"after SIGKILL of broker {victim} (round {rounds})")
        cluster.restart(victim)
        wait_for(lambda: _preferred_leads(cluster, topic), 20,
                 f"the preferred replica of {topic}-0 leads again (round {rounds})", interval_s=0.2)
        progress(f"after restart of broker {victim} (round {rounds})")
    return _epoch(cluster, topic, 0) - start


def _replica_views(cluster: LocalCluster, topic: str) -> dict[int, list[tuple]]:
    """partition -> [(node, log start, high watermark, log end, Raft log end)] of every replica."""
    out: dict[int, list[tuple]] = {}
    for node, st in cluster.statuses().items():
        for pt in st["partitions"]:
            if pt["topic"] == topic:
                out.setdefault(pt["partition"], []).append(
                    (node, pt["log_start_offset"], pt["high_watermark"], pt["log_end_offset"], pt["raft_log_end_offset"]))
    return out


def _wait_replicas_agree(cluster: LocalCluster, topic: str, partitions: int) -> dict[int, list[tuple]]:
    def agree():
        views = _replica_views(cluster, topic)
        if sorted(views) != list(range(partitions)) or any(len(v) != 3 for v in views.values()):
            return None
        for v in views.values():
            if len({(start, hw, leo) for _, start, hw, leo, _ in v}) != 1:
                return None
        return views
    return wait_for(agree, 30, lambda: f"every replica of {topic} reports the same log start, high watermark "
                                       f"and log end: {_replica_views(cluster, topic)}", interval_s=0.5)


def _list_offsets(bootstrap: str, topic: str, partition: int) -> tuple[int, int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "offsets-check", **CLIENT})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, partition), timeout=10, cached=False)
    finally:
        c.close()


def _list_offsets_epochs(cluster: LocalCluster, topic: str, partition: int) -> dict[int, tuple[int, int]]:
    """ListOffsets v7 at the partition's leader: timestamp -> (offset, leader epoch) for
    EARLIEST (-2), LATEST (-1) and timestamp 0 (the first record)."""
    leader = cluster.leader_of(topic, partition)
    out = {}
    with WireClient("127.0.0.1", cluster.node(leader).port) as w:
        for ts in (-2, -1, 0):
            r = w.request(2, 7, {"replica_id": -1, "isolation_level": 0, "topics": [{"name": topic, "partitions": [
                {"partition_index": partition, "current_leader_epoch": -1, "timestamp": ts}]}]})
            x = r.topics[0].partitions[0]
            assert x.error_code == 0, x
            out[ts] = (x.offset, x.leader_epoch)
    return out


def _first_batch_epoch(bootstrap: str, topic: str, partition: int) -> int:
    """partitionLeaderEpoch of the batch holding offset 0, as a consumer receives it."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "epoch-check", **CLIENT})
    try:
        c.assign([TopicPartition(topic, partition, 0)])
        m = wait_for(lambda: next(iter(c.consume(1, 1)), None), 30, "the first record")
        assert m.offset() == 0
        return m.leader_epoch()
    finally:
        c.close()


@contextmanager
def _cluster_with_topic(tmp_path, topic: str, n: int):
    """3 brokers (OVERRIDES) with ``topic`` of ``n`` partitions, RF 3, every partition led."""
    with LocalCluster(tmp_path, 3, OVERRIDES) as cluster:
        create_topic(cluster.bootstrap_servers, topic, n)
        cluster.wait_leaders(topic, n)
        yield cluster, cluster.bootstrap_servers


def test_leader_changes_take_no_kafka_offset(tmp_path):
    topic, n = "dense", 2
    with _cluster_with_topic(tmp_path, topic, n) as (cluster, bs):
        load = Load(bs, topic, n, rate=400).start()
        try:
            load.wait_progress(20, what="before any fault")
            gained = _change_leaders(cluster, topic, n, lambda what: load.wait_progress(10, what=what),
                                     LEADER_CHANGES)
        finally:
            load.stop()
        assert gained >= LEADER_CHANGES
        read = read_sequenced(bs, topic, n, {p: {o for o, _ in acked} for p, acked in load.acked.items()},
                              group_id="dense-check", client_config=CLIENT)
        check_no_acked_loss(load, read)
        views = _wait_replicas_agree(cluster, topic, n)
        internal = epochs_moved = 0
        for p in range(n):
            offsets = [o for o, _ in read[p]]
            assert offsets == list(range(len(offsets))), \
                f"partition {p}: offsets are not 0..{len(offsets) - 1} (first gaps at " \
                f"{[o for i, o in enumerate(offsets) if o != i][:5]})"
            assert load.acked_offsets(p, read[p]) == offsets, f"partition {p}: read offsets != acknowledged ones"
            _, start, hw, leo, raft_leo = views[p][0]
            assert (start, hw, leo) == (0, len(offsets), len(offsets)), views[p]
            assert _list_offsets(bs, topic, p) == (0, len(offsets))
            # Kafka's epochs: the one the found batch was written in, the current one for LATEST
            first, current = _first_batch_epoch(bs, topic, p), _epoch(cluster, topic, p)
            assert _list_offsets_epochs(cluster, topic, p) == {-2: (0, first), 0: (0, first),
                                                                -1: (len(offsets), current)}
            epochs_moved += first < current
            internal += raft_leo - leo
        # The faults hit the leader under load: new leaders inherited records not known committed
        # and appended their no-op, which took a Raft offset and no Kafka offset.
        assert internal > 0, f"no Raft-internal batch was written (views {views}): the test exercised nothing"
        assert epochs_moved, "no partition's first batch is of an earlier epoch: the epoch checks checked nothing"
        print(f"\n{gained} leader epochs, {sum(map(len, read.values()))} records at offsets 0..N-1, "
              f"{internal} Raft-internal batches without a Kafka offset")


class TxnLoad:
    """A transactional producer writing transactions of ``size`` records to every partition,
    values ``"<txn>:<partition>:<i>"``; every 4th transaction is aborted. Records
    ``outcome[txn] = "commit" | "abort"`` for the transactions whose end was acknowledged."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, size: int = 5) -> None:
        self.topic, self.partitions, self.size = topic, partitions, size
        self.producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "offsets-txn",
                                  "acks": "all", "linger.ms": 2, "transaction.timeout.ms": 60000,
                                  "message.timeout.ms": 60000, **CLIENT})
        self.outcome: dict[int, str] = {}
        self.last_txn = -1
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        p = self.producer
        p.init_transactions(60)
        txn = 0
        while not self._stop.is_set():
            self.last_txn = txn
            try:
                p.begin_transaction()
                for part in range(self.partitions):
                    for i in range(self.size):
                        p.produce(self.topic, value=f"{txn}:{part}:{i}".encode(), partition=part)
                if txn % 4 == 3:
                    p.abort_transaction(60)
                    self.outcome[txn] = "abort"
                else:
                    p.commit_transaction(60)
                    self.outcome[txn] = "commit"
            except KafkaException as exc:
                err = exc.args[0]
                self.errors.append(str(err))
                if err.fatal():
                    return
                try:
                    p.abort_transaction(60)
                    self.outcome[txn] = "abort"
                except KafkaException as exc2:
                    self.errors.append(f"abort: {exc2.args[0]}")
                    return
            txn += 1
            time.sleep(0.01)

    def start(self) -> "TxnLoad":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(120)
        assert not self._thread.is_alive(), "the transactional producer did not finish"

    def wait_progress(self, more: int, what: str) -> None:
        start = len(self.outcome)
        wait_for(lambda: len(self.outcome) >= start + more, 60,
                 lambda: f"{more} more transactions {what} (errors {self.errors[-3:]})")


def _read_all(bootstrap: str, topic: str, partitions: int, isolation: str, until: dict[int, int]) -> dict[int, list]:
    """partition -> [(offset, value)] from the beginning up to the high watermark ``until[p]``."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"txn-read-{isolation}", "enable.auto.commit": False,
                  "isolation.level": isolation, **CLIENT})
    c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    out: dict[int, list] = {p: [] for p in range(partitions)}
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            for m in c.consume(1000, 0.5):
                assert m.error() is None, m.error()
                out[m.partition()].append((m.offset(), m.value().decode()))
            pos = c.position([TopicPartition(topic, p) for p in range(partitions)])
            if all(tp.offset >= until[tp.partition] for tp in pos):
                break
    finally:
        c.close()
    return out


def _raft_log(directory) -> tuple[dict[bytes, int], list[int], int]:
    """The partition log in ``directory`` as stored (Raft offsets): value -> Raft offset of every
    data record, the Raft-internal offsets, and the Raft log end offset."""
    values: dict[bytes, int] = {}
    internal: list[int] = []
    end = 0
    for f in sorted(directory.glob("*.log")):
        data = f.read_bytes()
        for pos, h in iter_batches(data):
            end = h.base_offset + h.last_offset_delta + 1
            if is_raft_internal_batch(data, pos, h):
                internal.append(h.base_offset)
            elif not h.is_control:
                for r in decode_batch(data, pos)[1]:
                    values[r.value] = r.offset
    return values, internal, end


def test_transactions_across_leader_changes_only_markers_take_offsets(tmp_path):
    topic, n = "dense-txn", 2
    with _cluster_with_topic(tmp_path, topic, n) as (cluster, bs):
        txns = TxnLoad(bs, topic, n).start()
        load = Load(bs, topic, n, rate=300).start()

        def progress(what):
            txns.wait_progress(3, what)
            load.wait_progress(10, what=what)
        try:
            progress("before any fault")
            gained = _change_leaders(cluster, topic, n, progress, LEADER_CHANGES)
        finally:
            txns.stop()
            load.stop()
        views = _wait_replicas_agree(cluster, topic, n)
        hws = {p: views[p][0][2] for p in range(n)}
        read = _read_all(bs, topic, n, "read_uncommitted", hws)
        committed = _read_all(bs, topic, n, "read_committed", hws)
        cluster.stop()
    internal_total = 0
    for p in range(n):
        values, internal, raft_end = _raft_log(tmp_path / "node-1" / f"{topic}-{p}")
        internal_total += len(internal)

        def kafka(raft: int) -> int:
            return raft - sum(1 for o in internal if o < raft)
        assert hws[p] == kafka(raft_end), f"partition {p}: high watermark {hws[p]}, Raft log end {raft_end}, " \
                                          f"{len(internal)} internal batches"
        assert len(read[p]) == len(values), f"partition {p}: read {len(read[p])} records, the log holds {len(values)}"
        wrong = [(o, v, kafka(values[v.encode()])) for o, v in read[p] if kafka(values[v.encode()]) != o]
        assert not wrong, f"partition {p}: records read at other offsets than the log's (offset, value, want): {wrong[:5]}"
        by_txn: dict[int, list[int]] = {}
        for o, v in read[p]:
            if v.count(":") == 2:
                by_txn.setdefault(int(v.split(":")[0]), []).append(o)
        for t, offs in by_txn.items():
            assert offs == list(range(offs[0], offs[0] + len(offs))), f"partition {p}: transaction {t}: {offs}"
        aborted = {t for t, o in txns.outcome.items() if o == "abort"}
        seen_committed = {int(v.split(":")[0]) for _, v in committed[p] if v.count(":") == 2}
        assert not seen_committed & aborted, f"partition {p}: read_committed returned aborted transactions"
        assert {t for t, o in txns.outcome.items() if o == "commit"} & set(by_txn) <= seen_committed
        acked = {o for o, _ in load.acked[p]}
        assert acked <= {o for o, _ in read[p]}, f"partition {p}: acknowledged idempotent records missing"
        assert {f"{p}:{s}" for s in load.acked_without_offset[p]} <= {v for _, v in read[p]}, \
            f"partition {p}: idempotent records acknowledged without an offset missing"
    assert gained >= LEADER_CHANGES
    assert internal_total > 0, "no Raft-internal batch was written: the test exercised nothing"
    print(f"\n{gained} leader epochs, {len(txns.outcome)} transactions "
          f"({sum(1 for o in txns.outcome.values() if o == 'abort')} aborted), {internal_total} Raft-internal batches")
