"""An acks=all produce that cannot commit is answered REQUEST_TIMED_OUT after its timeout_ms.

The produce path waits for the high watermark with callbacks and one timer per request (no task,
broker/handlers/produce.py ``_await_commit``); this checks the timeout branch on a real cluster:
both followers of a partition are SIGSTOPped, so the leader appends but cannot commit. As in
Kafka, a timed-out record is not undone: once the followers are back it is committed and the
next record follows it.
"""

from __future__ import annotations

import time

from confluent_kafka.admin import AdminClient, NewTopic

from litemq.protocol.errors import ErrorCode
from litemq.protocol.records import build_batch
from litemq.testing.cluster import LocalCluster, wait_for
from litemq.testing.wire import WireClient

TOPIC = "produce-timeout"


def _produce(c: WireClient, value: bytes, timeout_ms: int) -> dict:
    body = {"transactional_id": None, "acks": -1, "timeout_ms": timeout_ms,
            "topic_data": [{"name": TOPIC, "partition_data": [{"index": 0, "records": build_batch([(b"k", value)])}]}]}
    resp = c.request(0, 9, body)
    return resp.responses[0].partition_responses[0]


def test_acks_all_produce_without_a_quorum_times_out_and_the_record_commits_later(tmp_path):
    with LocalCluster(tmp_path, 3) as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        admin.create_topics([NewTopic(TOPIC, 1, 3)], operation_timeout=15)[TOPIC].result(30)
        leader = cluster.leader_of(TOPIC, 0)
        followers = [n for n in cluster.node_ids if n != leader]
        with WireClient("127.0.0.1", cluster.node(leader).port) as c:
            first = _produce(c, b"committed", 5000)
            assert first.error_code == ErrorCode.NONE and first.base_offset == 0
            for n in followers:
                cluster.pause(n)
            try:
                started = time.monotonic()
                timed_out = _produce(c, b"late", 300)  # well below CheckQuorum's step-down (>= 1 s)
                took = time.monotonic() - started
            finally:
                for n in followers:
                    cluster.resume(n)
            assert timed_out.error_code == ErrorCode.REQUEST_TIMED_OUT, timed_out
            assert took < 5.0, f"answered after {took:.1f} s, not after the 300 ms timeout"
            # Not undone: the followers take it and it commits at offset 1, before the next one.
            third = wait_for(lambda: _ok(_produce(c, b"after", 5000)), 30, "no acks=all produce after resume")
            assert third.base_offset == 2, third


def _ok(resp):
    """``resp`` if it succeeded; None (ask again) on a retriable error while leadership settles."""
    if resp.error_code == ErrorCode.NONE:
        return resp
    assert resp.error_code in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.REQUEST_TIMED_OUT,
                               ErrorCode.NOT_ENOUGH_REPLICAS), resp
    return None
