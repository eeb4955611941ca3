"""Transactions on 3 real broker processes where the coordinator's markers are slow.

EndTxn is answered once PrepareCommit is committed; the markers follow. While they are being
written, the producer's next AddPartitionsToTxn is refused with CONCURRENT_TRANSACTIONS (as in
Kafka). librdkafka (confluentinc/librdkafka#4849) then lets the application abort that next
transaction and sends EndTxn(abort) although the coordinator never registered it; Kafka answers
INVALID_TXN_STATE, fatal for the producer. LiteMQ answers it as the no-op it is, and only then:
the test pauses the broker leading the committed transaction's partition so the markers wait.
"""

from __future__ import annotations

import threading
import time

import pytest
from confluent_kafka import Producer

from litemq.coordinator.records import partition_for
from litemq.coordinator.transaction import TXN_TOPIC
from litemq.testing.cluster import LocalCluster
from tests.cluster.test_cluster_failover import CLIENT, create_topic
from tests.txn.txn_helpers import read_committed_values

pytestmark = [pytest.mark.timeout(300)]

TOPIC = "txn-slow-markers"


def test_abort_of_a_transaction_refused_registration_during_the_previous_commit(tmp_path):
    # Elections slower than the pause, so the paused broker keeps leading its partition and
    # the markers wait for it (rather than for a new leader) until it is resumed.
    with LocalCluster(tmp_path, 3, {"raft.election.timeout.ms": "4000"}) as cluster:
        bs = cluster.bootstrap_servers
        create_topic(bs, TOPIC, 3)
        cluster.wait_leaders(TOPIC, 3)
        tid = "slow-markers"
        p = Producer({"bootstrap.servers": bs, "transactional.id": tid, "acks": "all", "linger.ms": 0, **CLIENT})
        p.init_transactions(60)
        txn_partitions = sum(1 for t, _ in cluster.leaders() if t == TXN_TOPIC)
        coordinator = cluster.leader_of(TXN_TOPIC, partition_for(tid, txn_partitions))
        leaders = {i: cluster.leader_of(TOPIC, i) for i in range(3)}
        slow = next(i for i in range(3) if leaders[i] != coordinator)
        paused = leaders[slow]
        other = next(i for i in range(3) if leaders[i] != paused)

        p.begin_transaction()
        p.produce(TOPIC, b"first", partition=slow)
        assert p.flush(30) == 0
        cluster.pause(paused)
        resumer = threading.Timer(2.0, cluster.resume, (paused,))
        try:
            # EndTxn(commit) is answered once PrepareCommit is committed (the coordinator and the
            # third broker); the COMMIT marker for the paused broker's partition waits.
            p.commit_transaction(30)
            p.begin_transaction()
            p.produce(TOPIC, b"never-registered", partition=other)
            time.sleep(0.5)  # AddPartitionsToTxn sent and refused (CONCURRENT_TRANSACTIONS), retried
            resumer.start()
            p.abort_transaction(60)  # EndTxn(abort): retried until the commit completes, then a no-op
        finally:
            resumer.cancel()
            if resumer.is_alive():
                resumer.join()
            cluster.resume(paused)  # SIGCONT again is harmless
        coordinator_log = (tmp_path / f"node-{coordinator}" / "broker.log").read_text()
        assert "nothing to abort" in coordinator_log, "the abort never reached the coordinator: the test proved nothing"

        # The producer goes on: a later transaction commits.
        p.begin_transaction()
        p.produce(TOPIC, b"second", partition=other)
        p.commit_transaction(30)
        assert sorted(read_committed_values(bs, "txn-slow-markers-read", [(TOPIC, p) for p in range(3)], 2, CLIENT)) == [b"first", b"second"]

