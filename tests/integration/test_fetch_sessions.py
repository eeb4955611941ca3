"""Incremental fetch sessions (KIP-227) on a broker process: Kafka's session rules at the wire
level, and kafka-python's consumer (which uses sessions by default) reading through them."""

from __future__ import annotations

import threading
import time
import urllib.request
import uuid

import pytest

from litemq.protocol.errors import ErrorCode as E
from litemq.protocol.records import build_batch, decode_records
from litemq.testing.process import BrokerProcess
from litemq.testing.wire import WireClient

PARTITIONS = 3


@pytest.fixture(scope="module")
def shared_broker(tmp_path_factory):
    """One broker process for the module, with its HTTP port (``/metrics``)."""
    with BrokerProcess(tmp_path_factory.mktemp("sessions") / "data", http_port=0) as proc:
        yield proc


def _topic(broker, partitions: int = PARTITIONS) -> str:
    from confluent_kafka.admin import AdminClient, NewTopic

    name = f"sessions-{uuid.uuid4().hex[:12]}"  # not random: Hypothesis seeds it
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(timeout=30)
    return name


def _produce(c: WireClient, topic: str, partition: int, value: bytes) -> int:
    resp = c.request(0, 7, {"transactional_id": None, "acks": -1, "timeout_ms": 10000, "topic_data": [
        {"name": topic, "partition_data": [{"index": partition, "records": build_batch([(None, value)])}]}]})
    part = resp.responses[0].partition_responses[0]
    assert part.error_code == 0
    return part.base_offset


def _fetch(c: WireClient, session_id: int, epoch: int, parts: dict[int, int], topic: str | None = None,
           topic_id=None, forgotten: list[int] = (), max_wait_ms: int = 0, version: int = 12,
           client_id: str = "sessions", max_bytes: int = 1 << 22):
    """One Fetch: ``parts`` = partition -> fetch offset; by topic name (v < 13) or id."""
    key = {"topic": topic} if version < 13 else {"topic_id": topic_id}
    topics = [dict(key, partitions=[{"partition": p, "current_leader_epoch": -1, "fetch_offset": o,
                                     "last_fetched_epoch": -1, "log_start_offset": -1,
                                     "partition_max_bytes": 1 << 20} for p, o in parts.items()])] if parts else []
    return c.request(1, version, {
        "replica_id": -1, "max_wait_ms": max_wait_ms, "min_bytes": 1, "max_bytes": max_bytes,
        "isolation_level": 0, "session_id": session_id, "session_epoch": epoch, "rack_id": "",
        "topics": topics, "forgotten_topics_data": [dict(key, partitions=list(forgotten))] if forgotten else []},
        client_id=client_id)


def _answered(resp) -> dict[int, tuple[int, list[bytes]]]:
    """partition -> (high watermark, record values) of a Fetch response."""
    out = {}
    for t in resp.responses:
        for p in t.partitions:
            assert p.error_code == 0, p
            out[p.partition_index] = (p.high_watermark, [r.value for r in decode_records(p.records)])
    return out


def _log_starts(resp) -> dict[int, int]:
    return {p.partition_index: p.log_start_offset for t in resp.responses for p in t.partitions}


def _metric(broker, name: str) -> float:
    with urllib.request.urlopen(broker.http_url + "/metrics", timeout=10) as r:
        for line in r.read().decode().splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
    raise AssertionError(f"{name} not on /metrics")


def test_incremental_fetches_answer_only_what_changed(shared_broker):
    topic = _topic(shared_broker)
    with WireClient("127.0.0.1", shared_broker.port) as c:
        _produce(c, topic, 0, b"a0")
        full = _fetch(c, 0, 0, {0: 0, 1: 0, 2: 0}, topic)
        session = full.session_id
        assert full.error_code == 0 and session > 0
        # a full response names every partition asked for
        assert _answered(full) == {0: (1, [b"a0"]), 1: (0, []), 2: (0, [])}
        # the consumer moves partition 0 on; nothing new anywhere: an empty answer
        empty = _fetch(c, session, 1, {0: 1}, topic)
        assert (empty.error_code, empty.session_id, _answered(empty)) == (0, session, {})
        # new records on partition 2, which the request does not name: only it is answered
        _produce(c, topic, 2, b"c0")
        _produce(c, topic, 2, b"c1")
        inc = _fetch(c, session, 2, {}, topic)
        assert inc.session_id == session and _answered(inc) == {2: (2, [b"c0", b"c1"])}
        assert _answered(_fetch(c, session, 3, {2: 2}, topic)) == {}
        # the same epoch again (a duplicate request) is refused; the session stays usable
        dup = _fetch(c, session, 3, {}, topic)
        assert (dup.error_code, dup.session_id, dup.responses) == (E.INVALID_FETCH_SESSION_EPOCH, 0, [])
        assert _fetch(c, session, 4, {}, topic).error_code == 0
        # a session id the broker never gave
        unknown = _fetch(c, session ^ 0x5A5A, 1, {}, topic)
        assert (unknown.error_code, unknown.session_id) == (E.FETCH_SESSION_ID_NOT_FOUND, 0)
        # a forgotten partition is no longer read, the others still are
        _fetch(c, session, 5, {}, topic, forgotten=[1])
        _produce(c, topic, 1, b"b0")
        _produce(c, topic, 0, b"a1")
        assert _answered(_fetch(c, session, 6, {}, topic)) == {0: (2, [b"a1"])}
        # forgetting every partition closes the session
        gone = _fetch(c, session, 7, {}, topic, forgotten=[0, 2])
        assert (gone.error_code, gone.session_id) == (0, 0)
        assert _fetch(c, session, 8, {}, topic).error_code == E.FETCH_SESSION_ID_NOT_FOUND


def test_final_epoch_closes_a_session_and_fetches_without_one(shared_broker):
    topic = _topic(shared_broker)
    with WireClient("127.0.0.1", shared_broker.port) as c:
        _produce(c, topic, 0, b"x")
        session = _fetch(c, 0, 0, {0: 0}, topic).session_id
        assert session > 0
        closing = _fetch(c, session, -1, {0: 0, 1: 0}, topic)
        assert (closing.error_code, closing.session_id) == (0, 0)
        assert _answered(closing) == {0: (1, [b"x"]), 1: (0, [])}  # a full, sessionless answer
        assert _fetch(c, session, 1, {}, topic).error_code == E.FETCH_SESSION_ID_NOT_FOUND
        # without any session: the old behaviour, every partition every time
        legacy = _fetch(c, 0, -1, {0: 1, 1: 0}, topic)
        assert legacy.session_id == 0 and _answered(legacy) == {0: (1, []), 1: (0, [])}


def test_a_session_of_topic_ids_is_not_used_with_names(shared_broker):
    topic = _topic(shared_broker)
    with WireClient("127.0.0.1", shared_broker.port) as c:
        meta = c.request(3, 12, {"topics": [{"topic_id": None, "name": topic}], "allow_auto_topic_creation": False,
                                 "include_topic_authorized_operations": False})
        topic_id = meta.topics[0].topic_id
        _produce(c, topic, 1, b"y")
        full = _fetch(c, 0, 0, {1: 0}, topic_id=topic_id, version=13)
        assert full.session_id > 0 and full.responses[0].topic_id == topic_id
        assert [r.value for r in decode_records(full.responses[0].partitions[0].records)] == [b"y"]
        assert _fetch(c, full.session_id, 1, {}, topic, version=12).error_code == E.FETCH_SESSION_TOPIC_ID_ERROR
        _produce(c, topic, 1, b"z")
        inc = _fetch(c, full.session_id, 1, {1: 1}, topic_id=topic_id, version=17)
        assert inc.error_code == 0 and inc.responses[0].topic_id == topic_id
        assert [r.value for r in decode_records(inc.responses[0].partitions[0].records)] == [b"z"]


def test_partitions_that_returned_records_go_to_the_end_of_the_session(shared_broker):
    topic = _topic(shared_broker)
    with WireClient("127.0.0.1", shared_broker.port) as c:
        for p in range(PARTITIONS):
            for i in range(2):
                _produce(c, topic, p, f"{p}{i}".encode())
        # max_bytes 1: each response carries the first batch found, in the session's order
        first = _fetch(c, 0, 0, {p: 0 for p in range(PARTITIONS)}, topic, max_bytes=1)
        session, offsets = first.session_id, {p: 0 for p in range(PARTITIONS)}
        order = []
        for epoch in range(1, 7):
            answered = {p: v for p, (_, v) in _answered(first).items() if v}
            for p, values in answered.items():
                order.append(p)
                offsets[p] += len(values)
            first = _fetch(c, session, epoch, {p: offsets[p] for p in answered}, topic, max_bytes=1)
        # the full fetch keeps the request's order; from then on a partition that returned records
        # waits for the others (without the move to the end: 0, 0, 1, 1, 2, 2)
        assert order == [0, 0, 1, 2, 1, 2]


def test_an_incremental_long_poll_wakes_for_a_partition_it_does_not_name(shared_broker):
    topic = _topic(shared_broker)
    with WireClient("127.0.0.1", shared_broker.port, timeout_s=60) as c, \
            WireClient("127.0.0.1", shared_broker.port) as producer:
        session = _fetch(c, 0, 0, {0: 0, 1: 0, 2: 0}, topic).session_id
        got = {}

        def poll():
            got["resp"] = _fetch(c, session, 1, {}, topic, max_wait_ms=20_000)
            got["at"] = time.monotonic()

        t = threading.Thread(target=poll)
        t.start()
        time.sleep(0.5)
        produced_at = time.monotonic()
        _produce(producer, topic, 1, b"wake")
        t.join(30)
        assert _answered(got["resp"]) == {1: (1, [b"wake"])}
        assert got["at"] - produced_at < 5  # woken by the append, not by the 20 s wait


def test_the_cache_keeps_at_most_its_slots(tmp_path):
    with BrokerProcess(tmp_path / "data", http_port=0,
                       overrides={"max.incremental.fetch.session.cache.slots": "1"}) as broker:
        topic = _topic(broker, 1)
        with WireClient("127.0.0.1", broker.port) as c:
            first = _fetch(c, 0, 0, {0: 0}, topic).session_id
            assert first > 0
            # the one slot is taken by a session younger than 120 s: no session, a full answer still
            second = _fetch(c, 0, 0, {0: 0}, topic)
            assert second.session_id == 0 and second.error_code == 0 and 0 in _answered(second)
            assert _fetch(c, first, 1, {}, topic).error_code == 0
            assert _metric(broker, "kafka_server_fetchsessioncache_numincrementalfetchsessions") == 1
            assert _metric(broker, "kafka_server_fetchsessioncache_numincrementalfetchpartitionscached") == 1
    with BrokerProcess(tmp_path / "none", overrides={"max.incremental.fetch.session.cache.slots": "0"}) as broker:
        topic = _topic(broker, 1)
        with WireClient("127.0.0.1", broker.port) as c:
            assert _fetch(c, 0, 0, {0: 0}, topic).session_id == 0


def test_a_throttled_fetch_does_not_open_a_session(shared_broker):
    topic = _topic(shared_broker, 1)
    with WireClient("127.0.0.1", shared_broker.port) as c:
        for _ in range(20):
            _produce(c, topic, 0, b"v" * 10_000)
        resp = c.request(49, 1, {"entries": [{"entity": [{"entity_type": "client-id", "entity_name": "reader"}],
                                              "ops": [{"key": "consumer_byte_rate", "value": 10_000.0,
                                                       "remove": False}]}], "validate_only": False})
        assert [e.error_code for e in resp.entries] == [0]
        before = _metric(shared_broker, "kafka_server_fetchsessioncache_numincrementalfetchsessions")
        first = _fetch(c, 0, -1, {0: 0}, topic, client_id="reader")
        assert first.throttle_time_ms == 0 and len(_answered(first)[0][1]) >= 8
        # over the quota: the answer is empty, so the session it would have opened is not kept
        throttled = _fetch(c, 0, 0, {0: 0}, topic, client_id="reader")
        assert throttled.throttle_time_ms > 0 and throttled.responses == [] and throttled.session_id == 0
        assert _metric(shared_broker, "kafka_server_fetchsessioncache_numincrementalfetchsessions") == before


@pytest.mark.parametrize("partitions", [8])
def test_kafka_python_consumes_through_fetch_sessions(shared_broker, partitions):
    from confluent_kafka import Producer
    from kafka import KafkaConsumer

    topic = _topic(shared_broker, partitions)
    producer = Producer({"bootstrap.servers": shared_broker.bootstrap_servers, "linger.ms": 5})
    sent = {p: [] for p in range(partitions)}
    for i in range(2000):
        p = i % partitions
        value = f"{p}-{i}".encode()
        producer.produce(topic, value, partition=p)
        sent[p].append(value)
        if i == 999:
            producer.flush(30)
    before = _metric(shared_broker, "kafka_server_fetchsessioncache_numincrementalfetchsessions")
    consumer = KafkaConsumer(topic, bootstrap_servers=shared_broker.bootstrap_servers, group_id=None,
                             auto_offset_reset="earliest", enable_auto_commit=False, fetch_max_wait_ms=100,
                             max_partition_fetch_bytes=4096)  # small fetches: many incremental rounds
    got = {p: [] for p in range(partitions)}
    try:
        deadline = time.monotonic() + 60
        producer.flush(30)
        while sum(map(len, got.values())) < 2000 and time.monotonic() < deadline:
            for tp, records in consumer.poll(timeout_ms=500).items():
                got[tp.partition].extend(r.value for r in records)
                assert [r.offset for r in records] == list(range(records[0].offset, records[0].offset + len(records)))
        in_session = _metric(shared_broker, "kafka_server_fetchsessioncache_numincrementalfetchsessions")
    finally:
        consumer.close()
        producer.flush(10)
    assert got == sent  # every record, once, in order per partition
    assert in_session > before  # kafka-python's fetches went through a session


def test_a_consumer_following_its_session_sees_what_full_fetches_see(shared_broker):
    """Hypothesis state machine: a consumer keeps one session while records arrive on random
    partitions, records it has read are deleted (DeleteRecords), and it adds, forgets and re-adds
    partitions, sending only what changed (as kafka-python's ``FetchSessionHandler`` does). After
    every incremental fetch its view - the records of each partition in order, the high
    watermarks, the log start offsets - is what a sessionless full fetch of the same partitions
    gives."""
    from hypothesis import HealthCheck, settings
    from hypothesis import strategies as st
    from hypothesis.stateful import RuleBasedStateMachine, initialize, rule

    partitions = 4
    with WireClient("127.0.0.1", shared_broker.port) as c:

        class SessionMachine(RuleBasedStateMachine):
            @initialize()
            def start(self):
                self.topic = _topic(shared_broker, partitions)
                self.produced = {p: [] for p in range(partitions)}
                self.read = {p: [] for p in range(partitions)}
                self.hw_seen: dict[int, int] = {}
                self.log_start = {p: 0 for p in range(partitions)}
                self.log_start_seen: dict[int, int] = {}
                self.wanted = set(range(partitions))
                self.session = {}  # partition -> fetch offset the broker's session holds
                self.session_id, self.epoch = 0, 0
                self.n = 0

            @rule(p=st.integers(0, partitions - 1), count=st.integers(1, 3))
            def produce(self, p, count):
                for _ in range(count):
                    value = f"{p}:{self.n}".encode()
                    self.n += 1
                    _produce(c, self.topic, p, value)
                    self.produced[p].append(value)

            @rule(p=st.integers(0, partitions - 1), data=st.data())
            def delete_records(self, p, data):
                """DeleteRecords up to an offset the consumer has read past: a new log start
                offset, which an incremental answer must carry though nothing else changed."""
                upto = data.draw(st.integers(0, len(self.read[p])))
                resp = c.request(21, 2, {"topics": [{"name": self.topic, "partitions": [
                    {"partition_index": p, "offset": upto}]}], "timeout_ms": 10000})
                assert resp.topics[0].partitions[0].error_code == 0
                self.log_start[p] = max(self.log_start[p], upto)

            @rule(p=st.integers(0, partitions - 1))
            def toggle(self, p):
                self.wanted ^= {p}

            @rule(small=st.booleans())
            def fetch(self, small):
                offsets = {p: len(self.read[p]) for p in self.wanted}
                if not self.session_id:
                    send, forgotten = offsets, []
                else:
                    send = {p: o for p, o in offsets.items() if self.session.get(p) != o}
                    forgotten = sorted(set(self.session) - self.wanted)
                # small: one batch per response (the first), so records stay behind unchanged watermarks
                resp = _fetch(c, self.session_id, self.epoch, send, self.topic, forgotten=forgotten,
                              max_bytes=1 if small else 1 << 22)
                assert resp.error_code == 0
                if self.session_id and not resp.session_id:
                    assert not self.wanted  # only an emptied session is closed
                self.session = dict(offsets) if resp.session_id else {}
                if resp.session_id and not self.session_id:
                    self.epoch = 0
                self.session_id = resp.session_id
                self.epoch = self.epoch + 1 if self.session_id else 0
                for p, (hw, values) in _answered(resp).items():
                    assert p in self.wanted
                    self.hw_seen[p] = hw
                    self.log_start_seen[p] = _log_starts(resp)[p]
                    self.read[p].extend(values)
                    if values:
                        self.session[p] = offsets[p]  # the broker holds what was asked, not read
                full = _answered(_fetch(c, 0, -1, {p: len(self.read[p]) for p in self.wanted}, self.topic))
                for p in self.wanted:
                    assert self.read[p] == self.produced[p][:len(self.read[p])]
                    assert self.hw_seen[p] == full[p][0] == len(self.produced[p])
                    assert self.log_start_seen[p] == self.log_start[p]
                    if not small:
                        assert self.read[p] == self.produced[p] and full[p][1] == []

        SessionMachine.TestCase.settings = settings(max_examples=25, stateful_step_count=30, deadline=None,
                                                    suppress_health_check=list(HealthCheck))
        SessionMachine.TestCase().runTest()


def _req(session_id: int, epoch: int, parts: dict[int, int], topic: str = "t", replica_id: int = -1,
         forgotten: list[int] = ()):
    """A decoded FetchRequest v12's fields, for the cache on its own."""
    from types import SimpleNamespace as NS

    fps = [NS(partition=p, fetch_offset=o, partition_max_bytes=1 << 20, current_leader_epoch=-1,
              last_fetched_epoch=-1, log_start_offset=-1) for p, o in parts.items()]
    return NS(replica_id=replica_id, session_id=session_id, session_epoch=epoch,
              topics=[NS(topic=topic, partitions=fps)] if fps else [],
              forgotten_topics_data=[NS(topic=topic, partitions=list(forgotten))] if forgotten else [])


def _open(cache, parts: dict[int, int], replica_id: int = -1) -> int:
    ctx = cache.new_context(12, _req(0, 0, parts, replica_id=replica_id))
    out = [{"topic": t.topic, "partitions": [{"partition_index": fp.partition, "error_code": 0, "high_watermark": 0,
                                              "log_start_offset": 0, "records": b""} for fp in t.partitions]}
           for t in ctx.topics]
    return ctx.finish(out)[0]


def test_the_cache_evicts_as_kafka_does(monkeypatch):
    """Kafka's ``FetchSessionCache`` rule, on a clock the test moves: a full cache gives a new
    session the slot of one unused for 120 s, else of the smallest one created 120 s ago if it
    is not larger, and a follower's session may take a consumer's at any age."""
    from litemq import limits
    from litemq.broker.fetch_sessions import FetchSessionCache

    now = [0.0]
    cache = FetchSessionCache(2, lambda: now[0])
    a = _open(cache, {0: 0, 1: 0, 2: 0})
    b = _open(cache, {0: 0})
    assert a and b and len(cache) == 2
    assert _open(cache, {0: 0, 1: 0, 2: 0, 3: 0}) == 0  # both young: no slot
    now[0] = limits.FETCH_SESSION_EVICTION_MS + 1
    assert cache.new_context(12, _req(a, 1, {})).kind == "incremental"  # a is used, b is not
    c = _open(cache, {0: 0})
    assert c and set(cache.sessions) == {a, c} and cache.evictions == 1  # b was unused for 120 s
    now[0] += 1000
    # a is older than 120 s and used recently: a larger new session may take its slot, a smaller not
    assert _open(cache, {0: 0}) == 0
    d = _open(cache, {p: 0 for p in range(5)})
    assert d and set(cache.sessions) == {c, d} and cache.evictions == 2
    # a follower's session takes a consumer's slot however young
    e = _open(cache, {0: 0}, replica_id=1)
    assert e and len(cache) == 2 and e in cache.sessions and cache.evictions == 3
    # the bound on partitions held: a full fetch past it gets no session; an incremental one
    # that would pass it closes its session
    monkeypatch.setattr(limits, "FETCH_SESSION_CACHE_MAX_PARTITIONS", 10)
    assert _open(cache, {p: 0 for p in range(6)}, replica_id=1) == 0
    assert cache.new_context(12, _req(e, 1, {1: 0, 2: 0, 3: 0})).kind == "incremental"  # 9 held
    assert cache.new_context(12, _req(e, 2, {4: 0, 5: 0})).error == E.FETCH_SESSION_ID_NOT_FOUND
    assert e not in cache.sessions and len(cache) == 1
