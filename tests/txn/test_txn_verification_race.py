"""KIP-890 part 1 on 3 real broker processes: an EndTxn(abort) that completes between a
partition leader's verification of a transaction and its append of the verified batch.

The schedule is forced with SIGSTOP: the leader L (or group coordinator G) asks the transaction
coordinator C to verify while C is stopped; L is stopped, C resumed, so C's "yes" waits in L's
socket; the transaction is aborted, so C's ABORT marker for L waits there too; L is resumed.
Before the fix L appended the verified batch after the ABORT marker: it opened a transaction C
no longer knew (CompleteAbort), the partition's last stable offset stayed below its high
watermark for good, and the producer's next commit made the aborted record visible to
read_committed readers. On the TxnOffsetCommit path the offset commit landed after the ABORT
marker in ``__consumer_offsets``: OffsetFetch(require_stable) answered UNSTABLE_OFFSET_COMMIT
for good, and the producer's next commit made the aborted offset the group's.

Kafka (and LiteMQ now) takes a ``VerificationGuard`` in the partition's producer state before
verifying; the marker clears it and the late append is refused with INVALID_TXN_STATE. Sources:
KIP-890, Kafka ``ProducerStateManager.maybeCreateVerificationStateEntry``,
``UnifiedLog.maybeStartTransactionVerification``.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, TopicPartition

from litemq.coordinator.records import partition_for
from litemq.protocol import frames
from litemq.protocol.errors import ErrorCode as E
from litemq.protocol.records import build_batch
from litemq.testing.cluster import LocalCluster
from litemq.testing.wire import WireClient
from tests.cluster.test_cluster_failover import CLIENT, create_topic
from tests.txn.txn_helpers import read_committed_values

pytestmark = [pytest.mark.timeout(400)]

TXN_PARTITIONS = 8  # transaction.state.log.num.partitions and offsets.topic.num.partitions defaults
# Elections slower than the pauses, so nobody's leadership moves while a broker is stopped.
OVERRIDES = {"raft.election.timeout.ms": "3000", "broker.session.timeout.ms": "6000",
             "broker.heartbeat.interval.ms": "250"}


def _retry(fn, ok, attempts=150, pause_s=0.2):
    for _ in range(attempts):
        r = fn()
        if ok(r):
            return r
        time.sleep(pause_s)
    raise AssertionError(f"no success: {r}")


def _find_coordinator(cluster, w: WireClient, key_type: int) -> None:
    """FindCoordinator until the internal topic exists and has a coordinator (it is created on first use)."""
    _retry(lambda: w.request(10, 2, {"key": "x", "key_type": key_type}), lambda r: r.error_code == E.NONE)


def _init_producer(wc: WireClient, tid: str) -> tuple[int, int]:
    r = _retry(lambda: wc.request(22, 1, {"transactional_id": tid, "transaction_timeout_ms": 60000}),
               lambda r: r.error_code == E.NONE)
    return r.producer_id, r.producer_epoch


def _end_txn(wc: WireClient, tid: str, pid: int, epoch: int, commit: bool) -> int:
    r = _retry(lambda: wc.request(26, 1, {"transactional_id": tid, "producer_id": pid, "producer_epoch": epoch,
                                          "committed": commit}),
               lambda r: r.error_code != E.CONCURRENT_TRANSACTIONS)
    return r.error_code


def _open_transactions(cluster, topic: str, partition: int, pid: int) -> list[int]:
    """First offsets of ``pid``'s open transactions in ``topic``-``partition`` (DescribeProducers on its leader)."""
    with WireClient("127.0.0.1", cluster.node(cluster.leader_of(topic, partition)).port) as w:
        r = w.request(61, 0, {"topics": [{"name": topic, "partition_indexes": [partition]}]})
    return [a.current_txn_start_offset for a in r.topics[0].partitions[0].active_producers
            if a.producer_id == pid and a.current_txn_start_offset >= 0]


def _watermarks(bootstrap: str, topic: str, partitions: list[int], isolation: str) -> list[int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"wm-{isolation}", "isolation.level": isolation,
                  **CLIENT})
    try:
        return [c.get_watermark_offsets(TopicPartition(topic, i), timeout=10)[1] for i in partitions]
    finally:
        c.close()


def _stopped_while_verifying(cluster, verifier: int, coordinator: int, wire: WireClient, api_key: int,
                             version: int, body: dict, abort) -> object:
    """Send ``body`` to ``verifier`` while ``coordinator`` is stopped (the verification waits),
    then stop ``verifier``, resume ``coordinator`` (its answer waits in the verifier's socket),
    run ``abort`` (EndTxn(abort): its marker for the verifier waits too), resume the verifier and
    return its decoded answer."""
    cluster.pause(coordinator)
    try:
        wire.send_raw(frames.encode_request(api_key, version, 77, "vrace", body))
        time.sleep(0.5)  # the verifier asked the stopped coordinator
        cluster.pause(verifier)
    finally:
        cluster.resume(coordinator)
    try:
        time.sleep(0.3)  # the coordinator answered the verification into the stopped verifier's socket
        abort()
        time.sleep(0.3)  # its ABORT marker for the verifier waits in the same place
    finally:
        cluster.resume(verifier)
    _cid, resp = frames.decode_response(api_key, version, wire.read_frame())
    return resp


def test_abort_between_verification_and_produce_append_leaves_no_hanging_transaction(tmp_path):
    with LocalCluster(tmp_path, 3, OVERRIDES) as cluster:
        bs = cluster.bootstrap_servers
        topic = "vrace"
        create_topic(bs, topic, 6)
        cluster.wait_leaders(topic, 6)
        with WireClient("127.0.0.1", cluster.node(1).port) as w:
            _find_coordinator(cluster, w, 1)
        cluster.wait_leaders("__transaction_state", TXN_PARTITIONS)
        for k in range(200):  # a transactional id whose coordinator leads neither of two partitions led by L
            tid = f"vrace-{k}"
            coordinator = cluster.leader_of("__transaction_state", partition_for(tid, TXN_PARTITIONS))
            by_leader: dict[int, list[int]] = {}
            for p in range(6):
                by_leader.setdefault(cluster.leader_of(topic, p), []).append(p)
            choice = [(lead, ps[:2]) for lead, ps in by_leader.items() if lead != coordinator and len(ps) >= 2]
            if choice:
                leader, (p0, p1) = choice[0]
                break
        else:
            pytest.fail("no leader with two partitions apart from the coordinators")
        with WireClient("127.0.0.1", cluster.node(coordinator).port, timeout_s=30) as wc, \
                WireClient("127.0.0.1", cluster.node(leader).port, timeout_s=30) as wl:
            pid, epoch = _init_producer(wc, tid)
            r = wc.request(24, 1, {"v3_and_below_transactional_id": tid, "v3_and_below_producer_id": pid,
                                   "v3_and_below_producer_epoch": epoch,
                                   "v3_and_below_topics": [{"name": topic, "partitions": [p0, p1]}]})
            assert [x.partition_error_code for x in r.results_by_topic_v3_and_below[0].results_by_partition] == [0, 0]

            def batch(value: bytes, seq: int) -> bytes:
                return build_batch([(None, value)], producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                                   is_transactional=True)

            produce = {"transactional_id": tid, "acks": -1, "timeout_ms": 30000,
                       "topic_data": [{"name": topic, "partition_data": [{"index": p0, "records": batch(b"late-0", 0)},
                                                                         {"index": p1, "records": batch(b"late-1", 0)}]}]}
            aborted = []
            resp = _stopped_while_verifying(
                cluster, leader, coordinator, wl, 0, 9, produce,
                lambda: aborted.append(_end_txn(wc, tid, pid, epoch, commit=False)))
            assert aborted == [E.NONE]
            answers = {pr.index: pr.error_code for pr in resp.responses[0].partition_responses}
            # Appended before the ABORT marker (then aborted with it), or refused: never after it.
            assert set(answers.values()) <= {E.NONE, E.INVALID_TXN_STATE}, answers

            # No transaction of the producer is left open, and the LSO reaches the high watermark.
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                if not any(_open_transactions(cluster, topic, p, pid) for p in (p0, p1)):
                    break
                time.sleep(0.5)
            assert {p: _open_transactions(cluster, topic, p, pid) for p in (p0, p1)} == {p0: [], p1: []}
            assert _watermarks(bs, topic, [p0, p1], "read_committed") == \
                _watermarks(bs, topic, [p0, p1], "read_uncommitted")

            # The producer's next transaction commits on p0 only: the aborted records stay invisible.
            r = _retry(lambda: wc.request(24, 1, {"v3_and_below_transactional_id": tid,
                                                  "v3_and_below_producer_id": pid, "v3_and_below_producer_epoch": epoch,
                                                  "v3_and_below_topics": [{"name": topic, "partitions": [p0]}]}),
                       lambda r: r.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code
                       != E.CONCURRENT_TRANSACTIONS)
            assert r.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == E.NONE
            seq = 1 if answers[p0] == E.NONE else 0
            r = wl.request(0, 9, {"transactional_id": tid, "acks": -1, "timeout_ms": 30000,
                                  "topic_data": [{"name": topic, "partition_data": [
                                      {"index": p0, "records": batch(b"next-0", seq)}]}]})
            assert r.responses[0].partition_responses[0].error_code == E.NONE
            assert _end_txn(wc, tid, pid, epoch, commit=True) == E.NONE
        assert sorted(read_committed_values(bs, "vrace-read", [(topic, p0), (topic, p1)], 1, CLIENT)) == [b"next-0"]


def _offset_fetch_stable(cluster, group: str, topic: str):
    """OffsetFetch(require_stable) of ``topic``-0: ``(committed offset, error code)``."""
    with WireClient("127.0.0.1", cluster.node(cluster.leader_of("__consumer_offsets",
                                                                partition_for(group, TXN_PARTITIONS))).port) as w:
        r = w.request(9, 8, {"groups": [{"group_id": group, "topics": [{"name": topic, "partition_indexes": [0]}]}],
                             "require_stable": True})
    p = r.groups[0].topics[0].partitions[0]
    return p.committed_offset, p.error_code


def test_abort_between_verification_and_txn_offset_commit_leaves_no_hanging_transaction(tmp_path):
    """Which of the verification's answer and the ABORT marker the group coordinator handles
    first once resumed is up to its event loop, so the schedule is tried until the marker
    came first (the race; refused with INVALID_TXN_STATE now), checking every try."""
    with LocalCluster(tmp_path, 3, OVERRIDES) as cluster:
        bs = cluster.bootstrap_servers
        create_topic(bs, "src", 1)
        create_topic(bs, "src2", 1)
        with WireClient("127.0.0.1", cluster.node(1).port) as w:
            _find_coordinator(cluster, w, 0)
            _find_coordinator(cluster, w, 1)
        cluster.wait_leaders("__transaction_state", TXN_PARTITIONS)
        cluster.wait_leaders("__consumer_offsets", TXN_PARTITIONS)
        raced = []
        for attempt in range(8):
            for k in range(1000):
                tid, group = f"vt{attempt}-{k}", f"vg{attempt}-{k}"
                coordinator = cluster.leader_of("__transaction_state", partition_for(tid, TXN_PARTITIONS))
                offsets_partition = partition_for(group, TXN_PARTITIONS)
                group_coordinator = cluster.leader_of("__consumer_offsets", offsets_partition)
                if coordinator != group_coordinator:
                    break
            with WireClient("127.0.0.1", cluster.node(coordinator).port, timeout_s=30) as wc, \
                    WireClient("127.0.0.1", cluster.node(group_coordinator).port, timeout_s=30) as wg:
                pid, epoch = _init_producer(wc, tid)
                r = wc.request(25, 1, {"transactional_id": tid, "producer_id": pid, "producer_epoch": epoch,
                                       "group_id": group})
                assert r.error_code == E.NONE
                commit = {"transactional_id": tid, "group_id": group, "producer_id": pid, "producer_epoch": epoch,
                          "topics": [{"name": "src", "partitions": [{"partition_index": 0, "committed_offset": 42,
                                                                     "committed_metadata": ""}]}]}
                aborted = []
                resp = _stopped_while_verifying(
                    cluster, group_coordinator, coordinator, wg, 28, 1, commit,
                    lambda: aborted.append(_end_txn(wc, tid, pid, epoch, commit=False)))
                assert aborted == [E.NONE]
                answer = resp.topics[0].partitions[0].error_code
                assert answer in (E.NONE, E.INVALID_TXN_STATE), E(answer).name

                deadline = time.monotonic() + 15
                while time.monotonic() < deadline:
                    left = _open_transactions(cluster, "__consumer_offsets", offsets_partition, pid)
                    stable = _offset_fetch_stable(cluster, group, "src")
                    if not left and stable[1] == E.NONE:
                        break
                    time.sleep(0.5)
                assert left == [], f"attempt {attempt}: transaction of {pid} left open in __consumer_offsets"
                assert stable == (-1, E.NONE), f"attempt {attempt}: OffsetFetch(require_stable) = {stable}"

                # The producer's next transaction commits an offset of another partition only.
                r = _retry(lambda: wc.request(25, 1, {"transactional_id": tid, "producer_id": pid,
                                                      "producer_epoch": epoch, "group_id": group}),
                           lambda r: r.error_code != E.CONCURRENT_TRANSACTIONS)
                assert r.error_code == E.NONE
                nxt = dict(commit, topics=[{"name": "src2", "partitions": [
                    {"partition_index": 0, "committed_offset": 7, "committed_metadata": ""}]}])
                r = wg.request(28, 1, nxt)
                assert r.topics[0].partitions[0].error_code == E.NONE
                assert _end_txn(wc, tid, pid, epoch, commit=True) == E.NONE
                # the aborted offset 42 never becomes the group's
                assert _retry(lambda: _offset_fetch_stable(cluster, group, "src"),
                              lambda s: s[1] == E.NONE) == (-1, E.NONE)
            if answer == E.INVALID_TXN_STATE:
                raced.append(attempt)
                break
        assert raced, "the ABORT marker never reached the group coordinator before the verification's answer"
