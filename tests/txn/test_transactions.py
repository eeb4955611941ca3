"""Kafka transactions end to end (issue 11): real ``litemq serve`` processes, real clients.

- consume-transform-produce with ``send_offsets_to_transaction`` (confluent-kafka, kafka-python,
  aiokafka) through SIGKILLs of the broker and of the client: a read_committed consumer of the
  output sees every input record exactly once; aborted transactions' records never;
- a fenced zombie cannot write; a timed-out transaction is aborted and its producer fenced;
- read_committed stops at the last stable offset while read_uncommitted reads on;
- bad input: unknown transactional ids, out-of-order EndTxn, markers for unknown producers get
  Kafka's error codes, never a hang.
"""

from __future__ import annotations

import time

import pytest

from litemq.protocol.errors import ErrorCode as E
from litemq.testing.process import BrokerProcess
from litemq.testing.wire import WireClient
from tests.txn.ctp_worker import SESSION_TIMEOUT_MS
from tests.txn.txn_helpers import Worker, assert_exactly_once, create_topics, name, produce_input, read_all

TXN_OVERRIDES = {"transaction.abort.timed.out.transaction.cleanup.interval.ms": "500",
                 "group.min.session.timeout.ms": str(SESSION_TIMEOUT_MS)}


@pytest.fixture
def txn_broker(tmp_path):
    with BrokerProcess(tmp_path / "data", overrides=TXN_OVERRIDES) as proc:
        yield proc


# ------------------------------------------------------------------ consume-transform-produce
def test_ck_consume_transform_produce_through_client_and_broker_sigkill(txn_broker, tmp_path):
    bs = txn_broker.bootstrap_servers
    inp, out = name("in"), name("out")
    create_topics(bs, [inp, out])
    keys = produce_input(bs, inp, 3000)
    w = Worker(tmp_path, "ck", bs, inp, out, name("g"), name("txn"), len(keys), abort_every=2)
    w.start()
    w.wait_progress(2, 60)
    w.kill()  # client SIGKILL mid-stream: its open transaction is aborted when the next run fences it
    w.start()
    w.wait_progress(w.committed_count() + 2, 60)
    txn_broker.kill()  # broker SIGKILL under the transactional load
    txn_broker.restart()
    w.run_to_completion(180)
    out_msgs = read_all(bs, out, 3, expect=len(keys))
    assert_exactly_once(keys, out_msgs)
    # read_uncommitted sees the aborted transactions' records too: proof they were written
    raw = read_all(bs, out, 3, isolation="read_uncommitted", expect=len(keys))
    assert len(raw) > len(keys)


@pytest.mark.parametrize("lib", ["kp", "aio"])
def test_python_clients_consume_transform_produce_through_client_and_broker_sigkill(txn_broker, tmp_path, lib):
    bs = txn_broker.bootstrap_servers
    inp, out = name("in-" + lib), name("out-" + lib)
    create_topics(bs, [inp, out])
    keys = produce_input(bs, inp, 600)
    w = Worker(tmp_path, lib, bs, inp, out, name("g"), name("txn"), len(keys), abort_every=2)
    w.start()
    w.wait_progress(1, 90)
    w.kill()  # client SIGKILL
    w.start()
    time.sleep(2)
    txn_broker.kill()  # broker SIGKILL while the new worker fences the old one and carries on
    txn_broker.restart()
    w.run_to_completion(180)
    assert_exactly_once(keys, read_all(bs, out, 3, expect=len(keys)))


# ------------------------------------------------------------------ fencing, abort, LSO
def test_zombie_is_fenced_and_its_transaction_aborted(txn_broker):
    from confluent_kafka import KafkaException, Producer

    bs = txn_broker.bootstrap_servers
    topic = name("fence")
    create_topics(bs, [topic], partitions=1)
    tid = name("txn")
    cfg = {"bootstrap.servers": bs, "transactional.id": tid, "log_level": 3}
    zombie = Producer(cfg)
    zombie.init_transactions(30)
    zombie.begin_transaction()
    zombie.produce(topic, key=b"z", value=b"zombie")
    zombie.flush(30)
    fresh = Producer(cfg)
    fresh.init_transactions(30)  # fences the zombie and aborts its open transaction
    fresh.begin_transaction()
    fresh.produce(topic, key=b"f", value=b"fresh")
    fresh.commit_transaction(30)
    with pytest.raises(KafkaException) as info:
        zombie.produce(topic, key=b"z2", value=b"late")
        zombie.commit_transaction(30)
    assert info.value.args[0].fatal() or "fenced" in str(info.value).lower(), info.value
    got = read_all(bs, topic, 1, expect=1)
    assert [(m.key(), m.value()) for m in got] == [(b"f", b"fresh")]


def test_read_committed_stops_at_last_stable_offset(txn_broker):
    from confluent_kafka import Consumer, Producer, TopicPartition

    bs = txn_broker.bootstrap_servers
    topic = name("lso")
    create_topics(bs, [topic], partitions=1)
    plain = Producer({"bootstrap.servers": bs, "log_level": 3})
    plain.produce(topic, value=b"before")
    plain.flush(30)
    tx = Producer({"bootstrap.servers": bs, "transactional.id": name("txn"), "log_level": 3})
    tx.init_transactions(30)
    tx.begin_transaction()
    for i in range(5):
        tx.produce(topic, value=b"open%d" % i)
    tx.flush(30)
    plain.produce(topic, value=b"after")
    plain.flush(30)
    uncommitted = read_all(bs, topic, 1, isolation="read_uncommitted", expect=7, idle_s=1)
    committed = read_all(bs, topic, 1, expect=1, idle_s=2)
    assert [m.value() for m in uncommitted] == [b"before"] + [b"open%d" % i for i in range(5)] + [b"after"]
    assert [m.value() for m in committed] == [b"before"]  # blocked at the LSO by the open transaction
    c = Consumer({"bootstrap.servers": bs, "group.id": name("g"), "isolation.level": "read_committed",
                  "log_level": 3})
    lo, hi = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10, cached=False)
    c.close()
    assert (lo, hi) == (0, 1)  # read_committed ListOffsets: the LSO, not the high watermark
    tx.abort_transaction(30)
    after = read_all(bs, topic, 1, expect=2, idle_s=2)
    assert [m.value() for m in after] == [b"before", b"after"]  # aborted records skipped


# ------------------------------------------------------------------ raw protocol: error codes
def _init_pid(w: WireClient, tid: str, timeout_ms: int = 60000) -> tuple[int, int]:
    for _ in range(100):
        r = w.request(10, 2, {"key": tid, "key_type": 1})
        if r.error_code == E.NONE:
            break
        time.sleep(0.1)
    for _ in range(100):
        r = w.request(22, 1, {"transactional_id": tid, "transaction_timeout_ms": timeout_ms})
        if r.error_code not in (E.CONCURRENT_TRANSACTIONS, E.COORDINATOR_LOAD_IN_PROGRESS, E.NOT_COORDINATOR):
            break
        time.sleep(0.1)
    assert r.error_code == E.NONE, E(r.error_code).name
    return r.producer_id, r.producer_epoch


def _add(w: WireClient, tid: str, pid: int, epoch: int, topic: str) -> int:
    r = w.request(24, 1, {"v3_and_below_transactional_id": tid, "v3_and_below_producer_id": pid,
                          "v3_and_below_producer_epoch": epoch,
                          "v3_and_below_topics": [{"name": topic, "partitions": [0]}]})
    return r.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code


def test_bad_transaction_requests_get_kafka_error_codes(txn_broker):
    bs = txn_broker.bootstrap_servers
    topic = name("bad")
    create_topics(bs, [topic], partitions=1)
    with WireClient("127.0.0.1", txn_broker.port) as w:
        tid = name("txn")
        # unknown transactional id
        r = w.request(26, 1, {"transactional_id": name("nobody"), "producer_id": 4242, "producer_epoch": 0,
                              "committed": True})
        assert r.error_code in (E.INVALID_PRODUCER_ID_MAPPING, E.NOT_COORDINATOR, E.COORDINATOR_LOAD_IN_PROGRESS)
        # invalid timeout
        r = w.request(22, 1, {"transactional_id": tid, "transaction_timeout_ms": 0})
        assert r.error_code == E.INVALID_TRANSACTION_TIMEOUT
        pid, epoch = _init_pid(w, tid)
        # out-of-order EndTxn: nothing was added, the transaction is Empty
        r = w.request(26, 1, {"transactional_id": tid, "producer_id": pid, "producer_epoch": epoch, "committed": True})
        assert r.error_code == E.INVALID_TXN_STATE
        # wrong epoch / wrong producer id
        assert _add(w, tid, pid, epoch + 5, topic) == E.PRODUCER_FENCED
        assert _add(w, tid, pid + 1000, epoch, topic) == E.INVALID_PRODUCER_ID_MAPPING
        # unknown partition
        r = w.request(24, 1, {"v3_and_below_transactional_id": tid, "v3_and_below_producer_id": pid,
                              "v3_and_below_producer_epoch": epoch,
                              "v3_and_below_topics": [{"name": topic, "partitions": [0, 7]}]})
        codes = {p.partition_index: p.partition_error_code for p in r.results_by_topic_v3_and_below[0].results_by_partition}
        assert codes == {0: E.OPERATION_NOT_ATTEMPTED, 7: E.UNKNOWN_TOPIC_OR_PARTITION}
        # markers for an unknown producer are accepted; for an unknown topic refused
        r = w.request(27, 0, {"markers": [{"producer_id": 987654, "producer_epoch": 0, "transaction_result": False,
                                            "topics": [{"name": topic, "partition_indexes": [0]},
                                                       {"name": "no-such-topic", "partition_indexes": [0]}],
                                            "coordinator_epoch": 0}]})
        codes = {t.name: t.partitions[0].error_code for t in r.markers[0].topics}
        assert codes == {topic: E.NONE, "no-such-topic": E.UNKNOWN_TOPIC_OR_PARTITION}
        # clients cannot write to the coordinator's internal topic
        from confluent_kafka import Producer

        errors = []
        prod = Producer({"bootstrap.servers": bs, "log_level": 3, "message.timeout.ms": 10000})
        prod.produce("__transaction_state", value=b"forged", partition=0,
                     on_delivery=lambda err, msg: errors.append(err))
        prod.flush(20)
        assert errors and errors[0] is not None and errors[0].code() == E.INVALID_TOPIC_EXCEPTION, errors
        # DescribeTransactions of an unknown id
        r = w.request(65, 0, {"transactional_ids": [name("nobody")]})
        assert r.transaction_states[0].error_code in (E.TRANSACTIONAL_ID_NOT_FOUND, E.NOT_COORDINATOR)


def test_abort_after_the_same_transaction_committed_is_refused(txn_broker):
    """EndTxn(abort) of a transaction that committed is INVALID_TXN_STATE, as in Kafka, so an
    application never believes it aborted what was committed. (The one abort let through after a
    commit, a next transaction refused registration meanwhile, is in
    tests/cluster/test_cluster_transactions.py.)"""
    bs = txn_broker.bootstrap_servers
    topic = name("abort-after-commit")
    create_topics(bs, [topic], partitions=1)
    tid = name("txn")
    with WireClient("127.0.0.1", txn_broker.port) as w:
        pid, epoch = _init_pid(w, tid)
        assert _add(w, tid, pid, epoch, topic) == E.NONE
        commit = {"transactional_id": tid, "producer_id": pid, "producer_epoch": epoch, "committed": True}
        assert w.request(26, 3, commit).error_code == E.NONE
        abort = dict(commit, committed=False)
        deadline = time.monotonic() + 20
        while (err := w.request(26, 3, abort).error_code) == E.CONCURRENT_TRANSACTIONS and time.monotonic() < deadline:
            time.sleep(0.05)  # the commit's markers are being written
        assert err == E.INVALID_TXN_STATE, E(err).name
        assert w.request(26, 3, commit).error_code == E.NONE  # a retried commit is answered again
        assert w.request(65, 0, {"transactional_ids": [tid]}).transaction_states[0].transaction_state == "CompleteCommit"


def test_timed_out_transaction_is_aborted_and_its_producer_fenced(txn_broker):
    bs = txn_broker.bootstrap_servers
    topic = name("timeout")
    create_topics(bs, [topic], partitions=1)
    tid = name("txn")
    with WireClient("127.0.0.1", txn_broker.port) as w:
        pid, epoch = _init_pid(w, tid, timeout_ms=1000)
        assert _add(w, tid, pid, epoch, topic) == E.NONE
        r = w.request(65, 0, {"transactional_ids": [tid]})
        assert r.transaction_states[0].transaction_state == "Ongoing"
        r = w.request(66, 0, {"state_filters": ["Ongoing"], "producer_id_filters": []})
        assert tid in [t.transactional_id for t in r.transaction_states]
        deadline = time.monotonic() + 20
        state = None
        while time.monotonic() < deadline:
            state = w.request(65, 0, {"transactional_ids": [tid]}).transaction_states[0]
            if state.transaction_state == "CompleteAbort":
                break
            time.sleep(0.2)
        assert state.transaction_state == "CompleteAbort", state
        assert state.producer_epoch == epoch + 1  # fenced: the abort bumped the epoch
        r = w.request(26, 2, {"transactional_id": tid, "producer_id": pid, "producer_epoch": epoch, "committed": True})
        assert r.error_code == E.PRODUCER_FENCED


def test_a_transactional_batch_no_coordinator_knows_of_is_never_appended(txn_broker):
    """A transactional batch needs a transactional id (Kafka ``handleProduceRequest``: else the
    whole request is TRANSACTIONAL_ID_AUTHORIZATION_FAILED) and the coordinator's word that its
    partition is in the transaction, with acks=0 too (KIP-890). Either way in, it would open a
    transaction no coordinator ends: the last stable offset held for good, read_committed
    consumers stalled."""
    from litemq.protocol import frames
    from litemq.protocol.records import build_batch

    bs = txn_broker.bootstrap_servers
    topic = name("unverified")
    create_topics(bs, [topic], partitions=1)

    def produce(w, batch, tid=None, acks=-1):
        body = {"transactional_id": tid, "acks": acks, "timeout_ms": 5000,
                "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}]}
        if acks == 0:
            w.send_raw(frames.encode_request(0, 9, 1 << 20, "acks0", body))
            return None
        return w.request(0, 9, body).responses[0].partition_responses[0].error_code

    def watermarks(w):
        r = w.request(1, 12, {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20,
                              "isolation_level": 1, "session_id": 0, "session_epoch": -1, "rack_id": "",
                              "forgotten_topics_data": [], "topics": [{"topic": topic, "partitions": [
                                  {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0,
                                   "last_fetched_epoch": -1, "log_start_offset": -1,
                                   "partition_max_bytes": 1 << 20}]}]})
        p = r.responses[0].partitions[0]
        return p.high_watermark, p.last_stable_offset

    with WireClient("127.0.0.1", txn_broker.port) as w:
        tid = name("txn")
        pid, epoch = _init_pid(w, tid)
        txn_batch = build_batch([(None, b"x")], producer_id=pid, producer_epoch=epoch, base_sequence=0,
                                is_transactional=True)
        produce(w, txn_batch, tid=tid, acks=0)  # the partition was never added to the transaction
        assert produce(w, txn_batch) == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED  # no transactional id
        assert produce(w, build_batch([(None, b"plain")])) == E.NONE
        assert watermarks(w) == (1, 1)  # only the plain record; no transaction open
