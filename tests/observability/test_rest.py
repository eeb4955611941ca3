"""REST API (Confluent REST Proxy v3 paths) with curl-like requests (urllib): cluster and topic
resources, produce (STRING/JSON/BINARY, headers, partition_id, keyed records on Kafka's default
partition, several records in one request), reading back with confluent-kafka and with the
HTTP records endpoint, Confluent's error bodies, and the ACLs of ``User:ANONYMOUS``."""

from __future__ import annotations

import base64
import json
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from kafka.partitioner.default import murmur2 as kafka_python_murmur2

from litemq import limits
from litemq.protocol.partitioner import murmur2
from litemq.testing.process import BrokerProcess
from tests.observability.helpers import get_json, http, post_json

TOPIC = "rest-t"


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("rest") / "data", http_port=0) as proc:
        admin = AdminClient({"bootstrap.servers": proc.bootstrap_servers})
        for fut in admin.create_topics([NewTopic(TOPIC, 3, 1)]).values():
            fut.result(15)
        yield proc


def _cluster(broker) -> tuple[str, str]:
    """(cluster id, cluster URL)."""
    cid = get_json(broker.http_url + "/v3/clusters")["data"][0]["cluster_id"]
    return cid, f"{broker.http_url}/v3/clusters/{cid}"


def _read_all(bootstrap: str, topic: str, partition: int, count: int) -> list:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "rest-reader", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, partition, 0)])
    out = []
    deadline = time.monotonic() + 20
    while len(out) < count and time.monotonic() < deadline:
        msg = c.poll(0.5)
        if msg is not None and not msg.error():
            out.append(msg)
    c.close()
    return out


def test_cluster_topic_and_partition_resources(broker):
    listing = get_json(broker.http_url + "/v3/clusters")
    assert listing["kind"] == "KafkaClusterList" and len(listing["data"]) == 1
    cid, url = _cluster(broker)
    cluster = get_json(url)
    assert cluster["kind"] == "KafkaCluster" and cluster["cluster_id"] == cid
    assert cluster["controller"]["related"].endswith("/brokers/1")
    brokers = get_json(url + "/brokers")["data"]
    assert [(b["broker_id"], b["port"]) for b in brokers] == [(1, broker.port)]
    topics = {t["topic_name"]: t for t in get_json(url + "/topics")["data"]}
    assert topics[TOPIC]["partitions_count"] == 3 and topics[TOPIC]["is_internal"] is False
    assert topics[TOPIC]["replication_factor"] == 1
    topic = get_json(f"{url}/topics/{TOPIC}")
    assert topic["kind"] == "KafkaTopic" and topic["metadata"]["resource_name"] == f"crn:///kafka={cid}/topic={TOPIC}"
    parts = get_json(f"{url}/topics/{TOPIC}/partitions")["data"]
    assert [p["partition_id"] for p in parts] == [0, 1, 2]
    assert all(p["leader_id"] == 1 and p["log_start_offset"] == 0 for p in parts)
    assert get_json(f"{url}/topics/{TOPIC}/partitions/2")["partition_id"] == 2


def test_reassignment_resources_of_a_single_broker(broker):
    """The ``partition_reassignments`` links resolve: Confluent's empty ``KafkaReassignmentList``
    for the cluster and a topic (a single broker never moves a partition), 404 for one partition
    (no reassignment in progress), an unknown topic or partition, or another cluster id."""
    cid, url = _cluster(broker)
    for link in (get_json(url)["partition_reassignments"]["related"],
                 get_json(f"{url}/topics/{TOPIC}")["partition_reassignments"]["related"]):
        listing = get_json(link)
        assert listing["kind"] == "KafkaReassignmentList" and listing["data"] == [], listing
        assert listing["metadata"]["self"] == link
    one = get_json(f"{url}/topics/{TOPIC}/partitions/1")["reassignment"]["related"]
    status, _, body = http("GET", one)
    assert status == 404 and json.loads(body)["error_code"] == 404, body
    for missing in (f"{url}/topics/nope/partitions/-/reassignment", f"{url}/topics/{TOPIC}/partitions/3/reassignment",
                    f"{broker.http_url}/v3/clusters/other/topics/-/partitions/-/reassignment"):
        assert http("GET", missing)[0] == 404, missing
    overview = get_json(broker.http_url + "/console/api/reassignments")
    assert overview == {"error_code": 0, "reassignments": [], "throttles": {"brokers": [], "topics": []}}


def test_produce_types_headers_and_read_back(broker):
    cid, url = _cluster(broker)
    status, r1 = post_json(f"{url}/topics/{TOPIC}/records", {
        "partition_id": 1, "headers": [{"name": "trace", "value": base64.b64encode(b"abc").decode()}],
        "key": {"type": "STRING", "data": "user-1"}, "value": {"type": "STRING", "data": "héllo"}})
    assert status == 200, r1
    assert r1["error_code"] == 200 and r1["cluster_id"] == cid and r1["topic_name"] == TOPIC
    assert r1["partition_id"] == 1 and r1["offset"] == 0
    assert r1["key"] == {"type": "STRING", "size": 6} and r1["value"] == {"type": "STRING", "size": len("héllo".encode())}
    assert r1["timestamp"].endswith("Z")
    status, r2 = post_json(f"{url}/topics/{TOPIC}/records", {
        "partition_id": 1, "value": {"type": "JSON", "data": {"order": 7, "items": ["a", "b"]}},
        "timestamp": "2024-05-01T12:00:00.250Z"})
    assert status == 200 and r2["offset"] == 1 and r2["timestamp"] == "2024-05-01T12:00:00.250Z"
    raw = bytes(range(256))
    status, r3 = post_json(f"{url}/topics/{TOPIC}/records", {
        "partition_id": 1, "key": {"type": "BINARY", "data": base64.b64encode(b"\x00\x01").decode()},
        "value": {"type": "BINARY", "data": base64.b64encode(raw).decode()}})
    assert status == 200 and r3["offset"] == 2 and r3["value"] == {"type": "BINARY", "size": 256}

    got = _read_all(broker.bootstrap_servers, TOPIC, 1, 3)
    assert [(m.offset(), m.key(), m.value()) for m in got] == [
        (0, b"user-1", "héllo".encode()), (1, None, b'{"order":7,"items":["a","b"]}'), (2, b"\x00\x01", raw)]
    assert got[0].headers() == [("trace", b"abc")]
    assert got[1].timestamp()[1] == 1714564800250

    page = get_json(f"{url}/topics/{TOPIC}/partitions/1/records?offset=0&max_count=2")
    assert page["kind"] == "KafkaRecordList" and page["next_offset"] == 2 and page["high_watermark"] == 3
    first, second = page["data"]
    assert first["key"] == {"type": "STRING", "data": "user-1"} and first["value"] == {"type": "STRING", "data": "héllo"}
    assert first["headers"] == [{"name": "trace", "value": base64.b64encode(b"abc").decode()}]
    assert second["timestamp"] == "2024-05-01T12:00:00.250Z" and second["key"] is None
    rest = get_json(page["metadata"]["next"])
    assert [r["offset"] for r in rest["data"]] == [2] and rest["data"][0]["value"]["type"] == "BINARY"
    assert base64.b64decode(rest["data"][0]["value"]["data"]) == raw
    as_json = get_json(f"{url}/topics/{TOPIC}/partitions/1/records?offset=1&max_count=1&format=json")
    assert as_json["data"][0]["value"] == {"type": "JSON", "data": {"order": 7, "items": ["a", "b"]}}
    as_binary = get_json(f"{url}/topics/{TOPIC}/partitions/1/records?offset=0&max_count=1&format=binary")
    assert base64.b64decode(as_binary["data"][0]["key"]["data"]) == b"user-1"
    # timestamp: the first offset whose timestamp is at or after it (ListOffsets), as Kafka's
    # offsetsForTimes: record 0 (now) already qualifies for a time in 2024
    by_time = get_json(f"{url}/topics/{TOPIC}/partitions/1/records?timestamp=1714564800250&max_count=5")
    assert [r["offset"] for r in by_time["data"]] == [0, 1, 2]
    future = get_json(f"{url}/topics/{TOPIC}/partitions/1/records?timestamp={2**62}")
    assert future["data"] == [] and future["next_offset"] == 3


def test_keyed_records_use_kafkas_default_partitioner_and_batches_answer_per_record(broker):
    _, url = _cluster(broker)
    keys = [f"customer-{i}" for i in range(12)]
    assert all(murmur2(k.encode()) & 0xFFFFFFFF == kafka_python_murmur2(k.encode()) for k in keys)  # it is unsigned
    body = "\n".join(json.dumps({"key": {"type": "STRING", "data": k}, "value": {"type": "STRING", "data": f"v{i}"}})
                     for i, k in enumerate(keys))
    status, _, raw = http("POST", f"{url}/topics/{TOPIC}/records", body)
    assert status == 200
    reports = [json.loads(line) for line in raw.decode().splitlines() if line.strip()]
    assert len(reports) == len(keys) and all(r["error_code"] == 200 for r in reports)
    for k, r in zip(keys, reports):
        assert r["partition_id"] == (kafka_python_murmur2(k.encode()) & 0x7FFFFFFF) % 3
    # the same key from a Kafka client lands on the same partition (librdkafka's murmur2 partitioner)
    p = Producer({"bootstrap.servers": broker.bootstrap_servers, "partitioner": "murmur2_random"})
    delivered = []
    p.produce(TOPIC, key=keys[0].encode(), value=b"from-client", on_delivery=lambda e, m: delivered.append(m))
    p.flush(10)
    assert delivered[0].partition() == reports[0]["partition_id"]
    offsets = {}
    for r in reports:
        offsets.setdefault(r["partition_id"], []).append(r["offset"])
    for offs in offsets.values():
        assert offs == list(range(offs[0], offs[0] + len(offs)))  # one batch per partition, in order


def test_error_bodies(broker):
    cid, url = _cluster(broker)
    cases = [
        ("POST", f"{url}/topics/no-such-topic/records", {"value": {"type": "STRING", "data": "x"}}, 404, 404),
        ("GET", f"{broker.http_url}/v3/clusters/not-{cid}/topics", None, 404, 404),
        ("POST", f"{url}/topics/{TOPIC}/records", "{not json", 400, 400),
        ("POST", f"{url}/topics/{TOPIC}/records", {"value": {"type": "AVRO", "data": {"a": 1}}}, 400, 42207),
        ("POST", f"{url}/topics/{TOPIC}/records", {"value": {"type": "PROTOBUF", "data": {"a": 1}}}, 400, 400),
        ("POST", f"{url}/topics/{TOPIC}/records", {"value": {"type": "BINARY", "data": "***"}}, 400, 400),
        ("POST", f"{url}/topics/{TOPIC}/records", {"partition_id": 9, "value": {"type": "STRING", "data": "x"}},
         404, 404),
        ("GET", f"{url}/topics/{TOPIC}/partitions/0/records?offset=999999", None, 400, 400),
        ("GET", f"{url}/topics/{TOPIC}/partitions/7/records", None, 404, 404),
        ("GET", f"{url}/topics/{TOPIC}/partitions/0/records?max_count=0", None, 400, 400),
        ("GET", f"{url}/no/such/path", None, 404, 404),
    ]
    for method, target, body, status, code in cases:
        got, _headers, raw = http(method, target, body)
        assert got == status, (target, got, raw[:300])
        answer = json.loads(raw)
        assert answer["error_code"] == code and answer["message"], (target, answer)
    too_big = b'{"value": {"type": "STRING", "data": "' + b"x" * limits.HTTP_MAX_REQUEST_BODY_BYTES + b'"}}'
    got, _, raw = http("POST", f"{url}/topics/{TOPIC}/records", too_big)
    assert got == 413 and json.loads(raw)["error_code"] == 413
    with socket.create_connection(("127.0.0.1", broker.http_port)) as sock:  # not HTTP at all
        sock.sendall(b"\x00\x01garbage\r\n\r\n")
        sock.settimeout(10)
        assert sock.recv(100).split(b"\r\n")[0] in (b"HTTP/1.0 400 Bad Request", b"HTTP/1.1 400 Bad Request")
    assert get_json(url)["cluster_id"] == cid  # the port keeps serving
    # a refused request leaves nothing behind
    assert get_json(f"{url}/topics/{TOPIC}/partitions/0/records?offset=0")["high_watermark"] == \
        get_json(f"{url}/topics/{TOPIC}/partitions/0")["high_watermark"]


def test_http_requests_follow_the_acls_of_user_anonymous(tmp_path):
    overrides = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                 "allow.everyone.if.no.acl.found": "true"}
    with BrokerProcess(tmp_path / "data", http_port=0, overrides=overrides) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        for fut in admin.create_topics([NewTopic(t, 1, 1) for t in ("open", "readonly", "hidden")]).values():
            fut.result(15)
        # once a topic has ACLs, allow.everyone.if.no.acl.found no longer applies to it (Kafka)
        acls = [AclBinding(ResourceType.TOPIC, "readonly", ResourcePatternType.LITERAL, "User:ANONYMOUS", "*",
                           AclOperation.READ, AclPermissionType.ALLOW),
                AclBinding(ResourceType.TOPIC, "readonly", ResourcePatternType.LITERAL, "User:ANONYMOUS", "*",
                           AclOperation.WRITE, AclPermissionType.DENY),
                AclBinding(ResourceType.TOPIC, "hidden", ResourcePatternType.LITERAL, "User:ANONYMOUS", "*",
                           AclOperation.DESCRIBE, AclPermissionType.DENY)]
        for fut in admin.create_acls(acls).values():
            fut.result(15)
        _, url = _cluster(broker)
        names = {t["topic_name"] for t in get_json(url + "/topics")["data"]}
        assert {"open", "readonly"} <= names and "hidden" not in names
        assert http("GET", f"{url}/topics/hidden")[0] == 404
        status, answer = post_json(f"{url}/topics/readonly/records", {"value": {"type": "STRING", "data": "no"}})
        assert status == 403 and answer["error_code"] == 40301
        status, answer = post_json(f"{url}/topics/open/records", {"value": {"type": "STRING", "data": "yes"}})
        assert status == 200 and answer["offset"] == 0
        assert get_json(f"{url}/topics/readonly/partitions/0")["high_watermark"] == 0  # READ implies DESCRIBE
        assert get_json(f"{url}/topics/readonly/partitions/0/records")["data"] == []

        # ACLs (DescribeAcls' filters by Confluent's names) and reassignments need DESCRIBE on the cluster
        found = get_json(url + "/acls?resource_type=topic&resource_name=readonly&pattern_type=LITERAL")["data"]
        assert sorted((a["resource_name"], a["principal"], a["operation"], a["permission"]) for a in found) == [
            ("readonly", "User:ANONYMOUS", "READ", "ALLOW"), ("readonly", "User:ANONYMOUS", "WRITE", "DENY")]
        assert len(get_json(url + "/acls")["data"]) == 3
        assert len(get_json(url + "/acls?permission=DENY&operation=describe")["data"]) == 1
        status, _, body = http("GET", url + "/acls?operation=FLY")
        assert status == 400 and "operation" in json.loads(body)["message"], body
        assert get_json(url + "/topics/-/partitions/-/reassignment")["data"] == []
        deny = AclBinding(ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL, "User:ANONYMOUS", "*",
                          AclOperation.DESCRIBE, AclPermissionType.DENY)
        admin.create_acls([deny])[deny].result(15)
        status, _, body = http("GET", url + "/topics/-/partitions/-/reassignment")
        assert status == 403 and json.loads(body)["error_code"] == 40301, body
        assert http("GET", url + "/acls")[0] == 403
        refused = get_json(broker.http_url + "/console/api/reassignments")
        assert refused["error_code"] == 31 and refused["reassignments"] == []  # CLUSTER_AUTHORIZATION_FAILED


def test_http_basic_authentication_against_plain_and_scram_users(tmp_path):
    """``Authorization: Basic`` proves a SASL/PLAIN (JAAS) or SCRAM user, whose ACLs then apply;
    without it the request is User:ANONYMOUS; a wrong password answers 401."""
    jaas = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
            'user_admin="admin-secret" user_alice="alice-secret";')
    overrides = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                 "super.users": "User:admin", "plain.sasl.jaas.config": jaas}
    with BrokerProcess(tmp_path / "data", http_port=0, overrides=overrides,
                       listeners={"PLAINTEXT": 0, "SASL_PLAINTEXT": 0}) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap("SASL_PLAINTEXT"),
                             "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                             "sasl.username": "admin", "sasl.password": "admin-secret"})
        for fut in admin.create_topics([NewTopic("secure", 1, 1)]).values():
            fut.result(15)
        upsert = UserScramCredentialUpsertion("bob", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096),
                                              b"bob-secret")
        for fut in admin.alter_user_scram_credentials([upsert]).values():
            fut.result(15)
        acls = [AclBinding(ResourceType.TOPIC, "secure", ResourcePatternType.LITERAL, f"User:{user}", "*", op,
                           AclPermissionType.ALLOW)
                for user in ("alice", "bob") for op in (AclOperation.WRITE, AclOperation.READ)]
        for fut in admin.create_acls(acls).values():
            fut.result(15)
        cid = get_json(broker.http_url + "/v3/clusters")["data"][0]["cluster_id"]
        records = f"{broker.http_url}/v3/clusters/{cid}/topics/secure/records"
        body = json.dumps({"value": {"type": "STRING", "data": "signed"}}).encode()

        def post(auth: str | None) -> tuple[int, dict, dict]:
            headers = {"Content-Type": "application/json"}
            if auth is not None:
                headers["Authorization"] = "Basic " + base64.b64encode(auth.encode()).decode()
            req = urllib.request.Request(records, data=body, method="POST", headers=headers)
            try:
                with urllib.request.urlopen(req, timeout=20) as resp:
                    return resp.status, dict(resp.headers), json.loads(resp.read())
            except urllib.error.HTTPError as exc:
                return exc.code, dict(exc.headers), json.loads(exc.read())

        status, _, answer = post(None)
        assert status == 403 and answer["error_code"] == 40301  # User:ANONYMOUS has no ACL
        assert post("alice:alice-secret")[0] == 200
        assert post("bob:bob-secret")[0] == 200  # a SCRAM user
        status, headers, answer = post("alice:wrong")
        assert status == 401 and headers["WWW-Authenticate"].startswith("Basic") and answer["error_code"] == 401
        assert post("nobody:x")[0] == 401
        status, _, page = http("GET", f"{broker.http_url}/v3/clusters/{cid}/topics/secure/partitions/0/records")
        assert status == 404  # ANONYMOUS may not even see the topic


def test_sasl_only_broker_refuses_anonymous_http(tmp_path):
    """With every Kafka listener SASL (and no authorizer), the REST API needs Basic auth too:
    anonymous requests answer 401, a PLAIN user is served, /metrics stays open for scrapers."""
    jaas = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
            'user_alice="alice-secret";')
    with BrokerProcess(tmp_path / "data", http_port=0, overrides={"plain.sasl.jaas.config": jaas},
                       listeners={"SASL_PLAINTEXT": 0}) as broker:
        status, _, answer = http("GET", broker.http_url + "/v3/clusters")
        assert status == 401 and json.loads(answer)["error_code"] == 401
        req = urllib.request.Request(broker.http_url + "/v3/clusters", headers={
            "Authorization": "Basic " + base64.b64encode(b"alice:alice-secret").decode()})
        with urllib.request.urlopen(req, timeout=20) as resp:
            assert resp.status == 200 and json.loads(resp.read())["data"][0]["cluster_id"]
        with urllib.request.urlopen(broker.http_url + "/metrics", timeout=20) as resp:
            assert resp.status == 200 and b"kafka_network_requestmetrics" in resp.read()


def test_kip848_group_is_described_through_consumer_group_describe(broker):
    """Kafka 4's DescribeGroups calls a KIP-848 group Dead; the REST API and the console describe
    it with ConsumerGroupDescribe: its state, assignor, member with its partitions, and lag."""
    cid, base = _cluster(broker)
    topic = "rest-kip848-topic"  # its own: other tests of this module produce to TOPIC
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.create_topics([NewTopic(topic, 3, 1)])[topic].result(15)
    p = Producer({"bootstrap.servers": broker.bootstrap_servers})
    for i in range(6):
        p.produce(topic, b"v", partition=i % 3)
    p.flush(15)
    c = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "rest-kip848",
                  "group.protocol": "consumer", "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        c.subscribe([topic])
        deadline = time.monotonic() + 30
        got = []
        while len(got) < 6 and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                got.append(m)
        assert len(got) == 6
        c.commit(asynchronous=False)
        g = get_json(f"{base}/consumer-groups/rest-kip848")
        assert (g["state"], g["partition_assignor"], g["is_simple"]) == ("STABLE", "uniform", False)
        assert [sorted(map(int, m["assignment"][topic])) for m in g["members"]] == [[0, 1, 2]]
        lags = get_json(f"{base}/consumer-groups/rest-kip848/lags")["data"]
        assert sorted(x["partition_id"] for x in lags) == [0, 1, 2]
        assert all(x["lag"] == 0 and x["consumer_id"] == g["members"][0]["member_id"] for x in lags)
    finally:
        c.close()


def _links(value, origin: str):
    """Every ``related``/``self`` URL of ``origin`` in a JSON answer."""
    if isinstance(value, dict):
        for k, v in value.items():
            if k in ("related", "self") and isinstance(v, str) and v.startswith(origin):
                yield v
            else:
                yield from _links(v, origin)
    elif isinstance(value, list):
        for v in value:
            yield from _links(v, origin)


def test_every_link_the_api_answers_resolves(broker):
    """Crawl the v3 API from ``/v3/clusters`` through every ``related`` and ``self`` link (a
    group with a live member and committed offsets in it): each answers 200, but a partition's
    ``reassignment`` (404: none in progress, as Confluent's GetReassignment) and ``acls`` (400:
    this broker has no authorizer, Kafka's SECURITY_DISABLED)."""
    from confluent_kafka import Consumer

    bs = broker.bootstrap_servers
    p = Producer({"bootstrap.servers": bs})
    for i in range(6):
        p.produce(TOPIC, f"crawl-{i}".encode(), partition=i % 3)
    assert p.flush(15) == 0
    c = Consumer({"bootstrap.servers": bs, "group.id": "rest-crawl", "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    c.subscribe([TOPIC])
    try:
        deadline = time.monotonic() + 30
        while not c.assignment() and time.monotonic() < deadline:
            c.poll(0.2)
        msg = None
        while msg is None and time.monotonic() < deadline:
            msg = c.poll(0.5)
        c.commit(asynchronous=False)
        origin = broker.http_url
        seen, todo, answers = set(), [origin + "/v3/clusters"], {}
        while todo and len(seen) < 400:
            url = todo.pop()
            if url in seen or "/records" in url:
                continue
            seen.add(url)
            status, _, body = http("GET", url)
            answers[url] = status
            if status == 200:
                todo.extend(_links(json.loads(body), origin))
        bad = {u: s for u, s in answers.items() if s != 200
               and not (u.endswith("/reassignment") and s == 404) and not (u.endswith("/acls") and s == 400)}
        assert not bad, bad
        paths = {u.split("/v3/clusters/")[-1].split("/", 1)[-1] for u in answers}
        for wanted in ("brokers/1/configs", "brokers/1/partition-replicas", "broker-configs", f"topics/{TOPIC}/configs",
                       f"topics/{TOPIC}/partitions/0/replicas", f"topics/{TOPIC}/partitions/0/replicas/1",
                       "consumer-groups/rest-crawl/consumers", "consumer-groups/rest-crawl/lag-summary"):
            assert wanted in paths, sorted(paths)
        assert any("/consumers/" in u for u in answers)
    finally:
        c.close()


def test_configs_replicas_and_lag_summary(broker):
    _, url = _cluster(broker)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    topic = "rest-configs"
    admin.create_topics([NewTopic(topic, 2, 1, config={"retention.ms": "3600000"})])[topic].result(15)

    configs = {c["name"]: c for c in get_json(f"{url}/topics/{topic}/configs")["data"]}
    assert configs["retention.ms"]["value"] == "3600000" and configs["retention.ms"]["source"] == "DYNAMIC_TOPIC_CONFIG"
    assert not configs["retention.ms"]["is_default"]
    assert {"name": "log.retention.ms", "value": "604800000", "source": "DEFAULT_CONFIG"} in \
        configs["retention.ms"]["synonyms"]
    one = get_json(f"{url}/topics/{topic}/configs/cleanup.policy")
    assert (one["kind"], one["topic_name"], one["value"], one["source"], one["is_default"]) == \
        ("KafkaTopicConfig", topic, "delete", "DEFAULT_CONFIG", True)
    assert http("GET", f"{url}/topics/{topic}/configs/no.such.config")[0] == 404
    assert http("GET", f"{url}/topics/no-such-topic/configs")[0] == 404

    broker_configs = {c["name"]: c for c in get_json(f"{url}/brokers/1/configs")["data"]}
    assert broker_configs["log.retention.ms"]["value"] == "604800000" and broker_configs["log.retention.ms"]["broker_id"] == 1
    assert http("GET", f"{url}/brokers/7/configs")[0] == 404
    assert get_json(f"{url}/broker-configs")["data"] == []  # no cluster-wide dynamic config yet
    def broker_defaults(*args: str) -> None:  # confluent-kafka refuses the default broker resource ("")
        res = subprocess.run([sys.executable, "-m", "litemq.cli", "config", "alter", "--broker-defaults", *args,
                              "-b", broker.bootstrap_servers], capture_output=True, text=True, timeout=60)
        assert res.returncode == 0, res.stderr

    broker_defaults("--set", "log.retention.ms=86400000")
    try:
        [cluster_config] = get_json(f"{url}/broker-configs")["data"]
        assert (cluster_config["kind"], cluster_config["name"], cluster_config["value"], cluster_config["source"],
                cluster_config["config_type"]) == ("KafkaClusterConfig", "log.retention.ms", "86400000",
                                                   "DYNAMIC_DEFAULT_BROKER_CONFIG", "BROKER")
        assert get_json(f"{url}/brokers/1/configs/log.retention.ms")["source"] == "DYNAMIC_DEFAULT_BROKER_CONFIG"
    finally:
        broker_defaults("--delete", "log.retention.ms")

    [replica] = get_json(f"{url}/topics/{topic}/partitions/1/replicas")["data"]
    assert (replica["kind"], replica["broker_id"], replica["is_leader"], replica["is_in_sync"]) == \
        ("KafkaReplica", 1, True, True)
    assert http("GET", f"{url}/topics/{topic}/partitions/1/replicas/2")[0] == 404
    held = {(r["topic_name"], r["partition_id"]) for r in get_json(f"{url}/brokers/1/partition-replicas")["data"]}
    assert {(topic, 0), (topic, 1)} <= held

    # lag summary: 5 records in partition 0, 2 in partition 1, the group committed 1 and 0
    p = Producer({"bootstrap.servers": broker.bootstrap_servers})
    for i in range(7):
        p.produce(topic, b"x", partition=0 if i < 5 else 1)
    assert p.flush(15) == 0
    c = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "rest-lag"})
    c.commit(offsets=[TopicPartition(topic, 0, 1), TopicPartition(topic, 1, 0)], asynchronous=False)
    c.close()
    summary = get_json(f"{url}/consumer-groups/rest-lag/lag-summary")
    assert (summary["max_lag"], summary["total_lag"], summary["max_lag_topic_name"], summary["max_lag_partition_id"]) \
        == (4, 6, topic, 0)
