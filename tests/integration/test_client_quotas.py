"""Client quotas (KIP-13, KIP-55, KIP-124, KIP-219, KIP-546) on a real broker process:
AlterClientQuotas / DescribeClientQuotas as Kafka answers them, quotas kept across a restart,
and produce, fetch and request quotas enforced - the throttle time in the response, the
connection muted for it, other clients untouched - with the wire client and with librdkafka."""

from __future__ import annotations

import random
import socket
import subprocess
import sys
import time

import pytest

from litemq.protocol.errors import ErrorCode as E
from litemq.protocol.records import build_batch
from litemq.testing.process import BrokerProcess
from litemq.testing.wire import WireClient

QUOTA_WINDOW_MS = 10_000
"""The window a new rate is measured over: (11 samples - 1) x 1 s."""


def _alter(w: WireClient, entries: list, validate_only: bool = False):
    return w.request(49, 1, {"validate_only": validate_only, "entries": [
        {"entity": [{"entity_type": t, "entity_name": n} for t, n in entity],
         "ops": [{"key": k, "value": float(v) if v is not None else 0.0, "remove": v is None} for k, v in ops]}
        for entity, ops in entries]}).entries


def _describe(w: WireClient, components: list, strict: bool = False):
    resp = w.request(48, 1, {"strict": strict, "components": [
        {"entity_type": t, "match_type": m, "match": n} for t, m, n in components]})
    if resp.error_code:
        return resp.error_code, resp.error_message
    return {tuple((e.entity_type, e.entity_name) for e in entry.entity): {v.key: v.value for v in entry.values}
            for entry in resp.entries}


def _topic(broker, partitions: int = 1) -> str:
    from confluent_kafka.admin import AdminClient, NewTopic

    name = f"quota-{random.randrange(1 << 30)}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})  # referenced until the result is in
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(timeout=30)
    return name


def _produce(w: WireClient, topic: str, value_bytes: int, client_id: str, count: int = 1, acks: int = 1):
    records = build_batch([(None, b"x" * value_bytes)] * count)
    return w.request(0, 9, {"transactional_id": None, "acks": acks, "timeout_ms": 5000, "topic_data": [
        {"name": topic, "partition_data": [{"index": 0, "records": records}]}]}, client_id=client_id)


def _answers_within(w: WireClient, timeout_s: float, client_id: str) -> bool:
    """Whether an ApiVersions sent on ``w`` is answered within ``timeout_s``."""
    w.sock.settimeout(timeout_s)
    try:
        w.request(18, 3, {"client_software_name": "t", "client_software_version": "1"}, client_id=client_id)
        return True
    except socket.timeout:
        return False
    finally:
        w.sock.settimeout(30)


def test_alter_and_describe_answer_as_kafka_and_survive_a_restart(broker_proc):
    with WireClient("127.0.0.1", broker_proc.port) as w:
        results = _alter(w, [
            ([("user", "alice")], [("producer_byte_rate", 1024), ("request_percentage", 12.5)]),
            ([("user", "alice"), ("client-id", None)], [("consumer_byte_rate", 2048)]),
            ([("client-id", None)], [("producer_byte_rate", 4096)]),
            ([("ip", None)], [("connection_creation_rate", 10)]),
            ([], [("producer_byte_rate", 1)]),
            ([("user", "bob"), ("user", "carol")], [("producer_byte_rate", 1)]),
            ([("group", "g")], [("producer_byte_rate", 1)]),
            ([("user", "")], [("producer_byte_rate", 1)]),
            ([("ip", "not-an-ip")], [("connection_creation_rate", 1)]),
            ([("ip", "10.0.0.1"), ("user", "dave")], [("connection_creation_rate", 1)]),
            ([("client-id", "app")], [("connection_creation_rate", 1)]),
            ([("client-id", "app2")], [("producer_byte_rate", 1.5)]),
            ([("client-id", "app3")], [("producer_byte_rate", 1), ("producer_byte_rate", 2)]),
            ([("user", "alice")], [("consumer_byte_rate", 1)]),
        ])
        assert [(r.error_code, r.error_message) for r in results] == [
            (E.NONE, None), (E.NONE, None), (E.NONE, None), (E.NONE, None),
            (E.INVALID_REQUEST, "Invalid empty client quota entity"),
            (E.INVALID_REQUEST, "Invalid empty client quota entity, duplicate entity entry user"),
            (E.INVALID_REQUEST, "Unhandled client quota entity type: group"),
            (E.INVALID_REQUEST, "Empty user not supported"),
            (E.INVALID_REQUEST, "not-an-ip is not a valid IP or resolvable host."),
            (E.INVALID_REQUEST, "Invalid empty client quota entity"),
            (E.INVALID_REQUEST, "Invalid configuration key connection_creation_rate"),
            (E.INVALID_REQUEST, "Configuration producer_byte_rate must be a Long value"),
            (E.INVALID_REQUEST, "Duplicate quota key producer_byte_rate not updating quota for this entity "
                                "ClientQuotaEntity(entries={client-id=app3})"),
            (E.INVALID_REQUEST, "Ignoring duplicate entity ClientQuotaEntity(entries={user=alice})"),
        ]
        # validate_only answers as a change would and stores nothing
        assert [r.error_code for r in _alter(w, [([("client-id", "app")], [("producer_byte_rate", 7)])],
                                             validate_only=True)] == [E.NONE]
        everything = _describe(w, [])
        assert everything == {
            (("user", "alice"),): {"producer_byte_rate": 1024.0, "request_percentage": 12.5},
            (("client-id", None), ("user", "alice")): {"consumer_byte_rate": 2048.0},
            (("client-id", None),): {"producer_byte_rate": 4096.0},
            (("ip", None),): {"connection_creation_rate": 10.0},
        }
        # filters: exact name, default, any name; strict leaves out entities with other types
        assert set(_describe(w, [("user", 0, "alice")])) == {(("user", "alice"),),
                                                             (("client-id", None), ("user", "alice"))}
        assert set(_describe(w, [("user", 0, "alice")], strict=True)) == {(("user", "alice"),)}
        assert set(_describe(w, [("client-id", 1, None)], strict=True)) == {(("client-id", None),)}
        assert set(_describe(w, [("user", 2, None), ("client-id", 2, None)])) == {
            (("client-id", None), ("user", "alice"))}
        assert _describe(w, [], strict=True) == {}
        assert _describe(w, [("user", 0, None)]) == (
            E.INVALID_REQUEST, "Request specified MATCH_TYPE_EXACT, but set match string to null.")
        assert _describe(w, [("user", 0, "a"), ("user", 2, None)])[0] == E.INVALID_REQUEST
        assert _describe(w, [("ip", 2, None), ("user", 2, None)])[0] == E.INVALID_REQUEST
        assert _describe(w, [("topic", 2, None)]) == (E.UNSUPPORTED_VERSION, "Unsupported entity type topic")
        # removing the last value removes the entity
        assert [r.error_code for r in _alter(w, [([("ip", None)], [("connection_creation_rate", None)])])] == [0]
        assert (("ip", None),) not in _describe(w, [])
    broker_proc.restart()
    with WireClient("127.0.0.1", broker_proc.port) as w:
        assert _describe(w, []) == {k: v for k, v in everything.items() if k != (("ip", None),)}


def test_produce_over_its_quota_is_throttled_and_its_connection_muted(broker_proc):
    topic = _topic(broker_proc)
    with WireClient("127.0.0.1", broker_proc.port) as admin:
        assert [r.error_code for r in _alter(admin, [([("client-id", "slow")], [("producer_byte_rate", 10_000)])])] == [0]
    slow = WireClient("127.0.0.1", broker_proc.port)
    fast = WireClient("127.0.0.1", broker_proc.port)
    try:
        first = _produce(slow, topic, 50_000, "slow")  # 50 kB / 10 s window: within 10 kB/s
        assert first.throttle_time_ms == 0 and first.responses[0].partition_responses[0].error_code == 0
        second = _produce(slow, topic, 250_000, "slow")  # 300 kB / 10 s = 30 kB/s: 3x the quota
        answer = second.responses[0].partition_responses[0]
        assert answer.error_code == E.NONE and answer.base_offset == 1  # appended: the throttle comes after
        # (30 kB/s - 10 kB/s) / 10 kB/s x 10 s window = 20 s (plus the requests' own headers)
        assert 19_900 <= second.throttle_time_ms <= 20_500, second.throttle_time_ms
        assert not _answers_within(slow, 1.0, "slow")  # muted: nothing more is read from it
        other = _produce(fast, topic, 250_000, "fast")  # another client id has no quota
        assert other.throttle_time_ms == 0 and other.responses[0].partition_responses[0].base_offset == 2
    finally:
        slow.close()
        fast.close()


def test_fetch_is_capped_by_its_quota_and_a_throttled_fetch_returns_nothing(broker_proc):
    topic = _topic(broker_proc)
    with WireClient("127.0.0.1", broker_proc.port) as w:
        for i in range(30):
            # acks=1 is answered before the fsync that moves the high watermark (the durable
            # default); the last batch with acks=all is answered once all 30 are readable
            assert _produce(w, topic, 10_000, "loader", acks=-1 if i == 29 else 1).throttle_time_ms == 0
        assert [r.error_code for r in _alter(w, [([("user", None), ("client-id", "reader")],
                                                  [("consumer_byte_rate", 10_000)])])] == [0]

        def fetch(offset: int):
            return w.request(1, 12, {
                "replica_id": -1, "max_wait_ms": 2000, "min_bytes": 1, "max_bytes": 50 * 1024 * 1024,
                "isolation_level": 0, "session_id": 0, "session_epoch": -1, "rack_id": "",
                "topics": [{"topic": topic, "partitions": [{
                    "partition": 0, "current_leader_epoch": -1, "fetch_offset": offset, "last_fetched_epoch": -1,
                    "log_start_offset": -1, "partition_max_bytes": 50 * 1024 * 1024}]}],
                "forgotten_topics_data": []}, client_id="reader")

        first = fetch(0)
        records = first.responses[0].partitions[0].records
        # at most what 10 kB/s lets through in one window: 10 kB/s x 10 s = 100 kB (whole batches)
        assert 80_000 <= len(records) <= 100_000 and first.throttle_time_ms == 0
        second = fetch(0)  # the same again: 2 x ~91 kB / 10 s = ~18 kB/s against 10 kB/s
        expected_ms = (2 * len(records) / 10 - 10_000) / 10_000 * QUOTA_WINDOW_MS
        assert abs(second.throttle_time_ms - expected_ms) < 300, (second.throttle_time_ms, expected_ms)
        assert second.error_code == E.NONE and second.responses == []  # throttled: nothing sent


def test_request_percentage_throttles_a_busy_client(broker_proc):
    with WireClient("127.0.0.1", broker_proc.port) as w:
        # 0.001 % of a thread: 0.1 ms of broker time per 10 s window, which a few requests exceed
        assert [r.error_code for r in _alter(w, [([("client-id", "busy")], [("request_percentage", 0.001)])])] == [0]
        throttles = []
        for _ in range(20):
            resp = w.request(3, 12, {"topics": None, "allow_auto_topic_creation": False,
                                     "include_topic_authorized_operations": False}, client_id="busy")
            throttles.append(resp.throttle_time_ms)
            if resp.throttle_time_ms:
                break
        # Kafka bounds a request-quota throttle by one quota window (1 s)
        assert 0 < throttles[-1] <= 1000, throttles
        if throttles[-1] >= 300:
            assert not _answers_within(w, 0.1, "busy")  # muted meanwhile


def test_librdkafka_producer_sees_the_throttle_and_other_clients_do_not(broker_proc):
    from confluent_kafka import Producer

    topic = _topic(broker_proc)
    with WireClient("127.0.0.1", broker_proc.port) as w:
        assert [r.error_code for r in _alter(w, [([("client-id", "throttled-app")],
                                                  [("producer_byte_rate", 20_000)])])] == [0]
    events = []
    slow = Producer({"bootstrap.servers": broker_proc.bootstrap_servers, "client.id": "throttled-app",
                     "linger.ms": 5, "throttle_cb": events.append})
    fast = Producer({"bootstrap.servers": broker_proc.bootstrap_servers, "client.id": "free-app", "linger.ms": 5,
                     "throttle_cb": events.append})
    for _ in range(500):  # 500 kB: 2.5x what 20 kB/s allows in a 10 s window
        slow.produce(topic, b"s" * 1000)
    deadline = time.monotonic() + 30
    while not events and time.monotonic() < deadline:
        slow.poll(0.1)
    assert events and events[0].throttle_time > 0.5, events  # seconds, librdkafka's ThrottleEvent
    assert {e.broker_name.split("/")[0] for e in events} == {f"127.0.0.1:{broker_proc.port}"}
    delivered = []
    started = time.monotonic()
    fast.produce(topic, b"f" * 1000, on_delivery=lambda err, msg: delivered.append(err))
    assert fast.flush(10) == 0 and delivered == [None]
    assert time.monotonic() - started < 5  # not held behind the throttled client
    assert all(e.throttle_time > 0 for e in events)
    slow.purge()
    slow.flush(5)


def test_cli_quota_alter_and_describe(broker_proc):
    def litemq(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "litemq.cli", *args, "--bootstrap-server", broker_proc.bootstrap_servers],
                              capture_output=True, text=True, timeout=60)

    done = litemq("quota", "alter", "--user", "alice", "--client-id", "etl",
                  "--add", "producer_byte_rate=1048576,consumer_byte_rate=2097152")
    assert done.returncode == 0 and "updated quotas of user=alice, client-id=etl" in done.stdout, done
    assert litemq("quota", "alter", "--ip-defaults", "--add", "connection_creation_rate=50").returncode == 0
    refused = litemq("quota", "alter", "--ip-defaults", "--add", "producer_byte_rate=1")
    assert refused.returncode != 0 and "Invalid configuration key producer_byte_rate" in refused.stderr, refused
    shown = litemq("quota", "describe")
    assert shown.returncode == 0
    lines = [line for line in shown.stdout.splitlines() if "=" in line]
    assert any("user=alice, client-id=etl" in ln and "producer_byte_rate" in ln and "1048576" in ln for ln in lines)
    assert any("ip=<default>" in ln and "connection_creation_rate" in ln and "50" in ln for ln in lines)
    assert litemq("quota", "alter", "--user", "alice", "--client-id", "etl", "--delete",
                  "producer_byte_rate").returncode == 0
    one = litemq("quota", "describe", "--user", "alice", "--client-id", "etl")
    assert "consumer_byte_rate" in one.stdout and "producer_byte_rate" not in one.stdout, one.stdout


def test_quotas_need_cluster_configs_permissions(tmp_path):
    """Describe needs DESCRIBE_CONFIGS on the cluster, alter ALTER_CONFIGS (Kafka)."""
    overrides = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                 "allow.everyone.if.no.acl.found": "false", "super.users": "User:admin"}
    with BrokerProcess(tmp_path / "data", overrides=overrides) as broker:
        with WireClient("127.0.0.1", broker.port) as w:  # User:ANONYMOUS, no ACL
            assert [r.error_code for r in _alter(w, [([("user", None)], [("producer_byte_rate", 1)])])] == [
                E.CLUSTER_AUTHORIZATION_FAILED]
            assert _describe(w, [])[0] == E.CLUSTER_AUTHORIZATION_FAILED


@pytest.mark.parametrize("quota_key", ["producer_byte_rate", "consumer_byte_rate"])
def test_metrics_count_throttled_responses(tmp_path, quota_key):
    import urllib.request

    with BrokerProcess(tmp_path / "data", http_port=0) as broker:
        _metrics_case(broker, quota_key)
        body = urllib.request.urlopen(f"http://127.0.0.1:{broker.http_port}/metrics", timeout=10).read().decode()
    assert f'litemq_client_quota_throttled_responses_total{{quota="{quota_key}"}} 1.0' in body, body[-2000:]


def _metrics_case(broker_proc, quota_key: str) -> None:
    topic = _topic(broker_proc)
    with WireClient("127.0.0.1", broker_proc.port) as w:
        assert [r.error_code for r in _alter(w, [([("client-id", "m")], [(quota_key, 1000)])])] == [0]
        if quota_key == "producer_byte_rate":
            assert _produce(w, topic, 30_000, "m").throttle_time_ms > 0
        else:
            assert _produce(w, topic, 30_000, "loader").throttle_time_ms == 0
            for _ in range(3):
                resp = w.request(1, 4, {"replica_id": -1, "max_wait_ms": 2000, "min_bytes": 1, "max_bytes": 10 ** 7,
                                        "isolation_level": 0, "topics": [{"topic": topic, "partitions": [
                                            {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 10 ** 7}]}]},
                                 client_id="m")
                if resp.throttle_time_ms:
                    break
            assert resp.throttle_time_ms > 0


def test_connection_creation_rate_refuses_connections_over_the_ip_quota(broker_proc):
    """KIP-612: 2 connections/s from 127.0.0.1 lets 20 in within the first 10 s window; the
    next one is not served and is closed after its throttle time; other IPs' quotas do not apply."""
    with WireClient("127.0.0.1", broker_proc.port) as w:
        assert [r.error_code for r in _alter(w, [([("ip", "127.0.0.1")], [("connection_creation_rate", 2)]),
                                                 ([("ip", "10.9.8.7")], [("connection_creation_rate", 1)])])] == [0, 0]
    served = []
    for _ in range(20):  # connections made before the quota existed do not count
        c = WireClient("127.0.0.1", broker_proc.port)
        served.append(c)
        assert _answers_within(c, 5.0, "conn")
    refused = WireClient("127.0.0.1", broker_proc.port)  # the 21st: 2.1/s over 10 s, 0.5 s throttle
    try:
        started = time.monotonic()
        assert refused.is_closed_by_peer(5.0)  # never served, closed once its throttle ended
        assert 0.3 < time.monotonic() - started < 3.0
    finally:
        refused.close()
        for c in served:
            assert _answers_within(c, 5.0, "conn")  # the connections already open keep working
            c.close()


def test_controller_mutation_rate_refuses_topics_once_the_bucket_is_empty(broker_proc):
    """KIP-599: 1 partition/s gives a burst of 11; CreateTopics v6+ refuses the next topic with
    THROTTLING_QUOTA_EXCEEDED once the bucket is below zero, CreateTopics v5 only throttles."""
    with WireClient("127.0.0.1", broker_proc.port) as w:
        assert [r.error_code for r in _alter(w, [([("client-id", "creator")], [("controller_mutation_rate", 1)])])] == [0]

        def create(version: int, *names: str, partitions: int = 6):
            return w.request(19, version, {"timeout_ms": 10_000, "validate_only": False, "topics": [
                {"name": n, "num_partitions": partitions, "replication_factor": 1, "assignments": [], "configs": []}
                for n in names]}, client_id="creator")

        first = create(7, "mut-a", "mut-b", "mut-c")  # 11 credits: a (6) leaves 5, b (6) leaves -1, c refused
        assert [(t.name, t.error_code) for t in first.topics] == [
            ("mut-a", 0), ("mut-b", 0), ("mut-c", E.THROTTLING_QUOTA_EXCEEDED)]
        assert first.topics[2].error_message == "The throttling quota has been exceeded."
        assert 900 <= first.throttle_time_ms <= 1000  # -1 credit at 1/s: back at 0 in 1 s
        time.sleep(first.throttle_time_ms / 1000 + 0.1)  # the connection was muted meanwhile
        old = create(5, "mut-d", "mut-e")  # permissive: both created, the bucket deep below zero
        assert [t.error_code for t in old.topics] == [0, 0]
        assert 11_000 <= old.throttle_time_ms <= 12_100
    with WireClient("127.0.0.1", broker_proc.port) as other:  # another client id has no quota
        resp = other.request(19, 7, {"timeout_ms": 10_000, "validate_only": False, "topics": [
            {"name": "mut-f", "num_partitions": 50, "replication_factor": 1, "assignments": [], "configs": []}]},
            client_id="someone-else")
        assert resp.topics[0].error_code == 0 and resp.throttle_time_ms == 0


def test_user_quota_follows_the_sasl_principal_and_is_shared_by_its_clients(tmp_path):
    """A quota on user alice applies to what alice's authenticated connections send, whatever
    their client ids, together (one rate); bob falls to the default user quota, his own rate."""
    from tests.security.security_helpers import plain_jaas

    overrides = {"listener.security.protocol.map": "SASL_PLAINTEXT:SASL_PLAINTEXT",
                 "inter.broker.listener.name": "SASL_PLAINTEXT", "sasl.enabled.mechanisms": "PLAIN",
                 "listener.name.sasl_plaintext.plain.sasl.jaas.config":
                     plain_jaas({"alice": "alice-pw", "bob": "bob-pw"})}
    with BrokerProcess(tmp_path / "data", overrides=overrides, listeners={"SASL_PLAINTEXT": 0}) as broker:
        def login(user: str) -> WireClient:
            w = WireClient("127.0.0.1", broker.port)
            w.sasl_plain(user, f"{user}-pw")
            return w

        with login("alice") as w:
            assert [r.error_code for r in _alter(w, [([("user", "alice")], [("producer_byte_rate", 10_000)]),
                                                     ([("user", None)], [("producer_byte_rate", 1_000_000)])])] == [0, 0]
            resp = w.request(19, 7, {"timeout_ms": 10_000, "validate_only": False, "topics": [
                {"name": "by-user", "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}]})
            assert resp.topics[0].error_code == 0
        a1, a2, bob = login("alice"), login("alice"), login("bob")
        try:
            assert _produce(a1, "by-user", 80_000, "app-1").throttle_time_ms == 0  # 8 kB/s over 10 s...
            # ... the same user from another client id and connection: 20 kB/s against alice's 10 kB/s
            assert 9_500 < _produce(a2, "by-user", 120_000, "app-2").throttle_time_ms < 10_500
            assert _produce(bob, "by-user", 300_000, "app-1").throttle_time_ms == 0  # bob: 1 MB/s default
        finally:
            for w in (a1, a2, bob):
                w.close()
