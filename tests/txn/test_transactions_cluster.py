"""Transactions on a 3-broker replicated cluster (issue 11): ``__transaction_state`` is
replicated like ``__consumer_offsets``; consume-transform-produce with confluent-kafka keeps
exactly-once through the SIGKILL of the transaction coordinator's broker and of a data
partition leader, each restarted."""

from __future__ import annotations

import pytest

from litemq.coordinator.records import partition_for
from litemq.testing.cluster import LocalCluster
from tests.txn.ctp_worker import SESSION_TIMEOUT_MS
from tests.txn.txn_helpers import (Worker, assert_exactly_once, create_topics, explain_missing, name, produce_input,
                                  read_all)

pytestmark = [pytest.mark.timeout(600), pytest.mark.slow]

OVERRIDES = {"broker.heartbeat.interval.ms": "250", "broker.session.timeout.ms": "2500",
             "transaction.abort.timed.out.transaction.cleanup.interval.ms": "500",
             "group.min.session.timeout.ms": str(SESSION_TIMEOUT_MS)}


def test_consume_transform_produce_through_coordinator_and_leader_sigkill(tmp_path):
    with LocalCluster(tmp_path / "cluster", n=3, overrides=OVERRIDES) as cluster:
        bs = cluster.bootstrap_servers
        inp, out = name("in"), name("out")
        create_topics(bs, [inp, out], partitions=3, rf=3)
        keys = produce_input(bs, inp, 3000)
        tid = name("txn")
        w = Worker(tmp_path, "ck", bs, inp, out, name("g"), tid, len(keys), abort_every=5)
        w.start()
        w.wait_progress(2, 90)
        # the broker leading this transactional id's __transaction_state partition
        coordinator = cluster.leader_of("__transaction_state", partition_for(tid, 8))
        cluster.kill(coordinator)
        w.wait_progress(w.committed_count() + 2, 120)
        cluster.restart(coordinator)
        leader = cluster.leader_of(out, 0)
        cluster.kill(leader)
        w.wait_progress(w.committed_count() + 2, 120)
        cluster.restart(leader)
        w.run_to_completion(240)
        got = read_all(bs, out, 3, expect=len(keys))
        try:
            assert_exactly_once(keys, got)
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{explain_missing(bs, out, 3, got, keys, [tmp_path])}") from None
