"""The schema registry on a broker's HTTP port, with confluent-kafka's own schema registry client
and Avro serializers: records produced and consumed with registered schemas, ids shared across
subjects, Avro compatibility levels enforced, lookups, references, soft and permanent deletes,
Confluent's error codes, and the registry kept across a restart."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from confluent_kafka.schema_registry import Schema, SchemaReference, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.serialization import MessageField, SerializationContext

from litemq.testing.process import BrokerProcess

USER_V1 = {"type": "record", "name": "User", "namespace": "com.acme",
           "fields": [{"name": "name", "type": "string"}, {"name": "age", "type": "int"}]}
USER_V2 = {**USER_V1, "fields": [*USER_V1["fields"], {"name": "email", "type": "string", "default": ""}]}
USER_BAD = {**USER_V1, "fields": [{"name": "name", "type": "int"}]}  # name: string -> int


@pytest.fixture
def broker(tmp_path):
    with BrokerProcess(tmp_path / "data", http_port=0) as b:
        yield b


def _avro(schema: dict) -> Schema:
    return Schema(json.dumps(schema), "AVRO")


def _http(broker, method: str, path: str, body: dict | None = None) -> tuple[int, object]:
    req = urllib.request.Request(broker.http_url + path, method=method,
                                 data=None if body is None else json.dumps(body).encode(),
                                 headers={"Content-Type": "application/vnd.schemaregistry.v1+json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_avro_records_round_trip_through_the_registry(broker):
    registry = SchemaRegistryClient({"url": broker.http_url})
    serialize = AvroSerializer(registry, json.dumps(USER_V1))  # registers users-value on first use
    deserialize = AvroDeserializer(registry)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
    for i in range(10):
        producer.produce("users", serialize({"name": f"user-{i}", "age": i},
                                            SerializationContext("users", MessageField.VALUE)))
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "sr",
                         "auto.offset.reset": "earliest"})
    consumer.subscribe(["users"])
    got, deadline = [], time.monotonic() + 30
    while len(got) < 10 and time.monotonic() < deadline:
        m = consumer.poll(0.5)
        if m is not None and not m.error():
            assert m.value()[:5] == b"\0\0\0\0\x01"  # Confluent's wire format: magic 0, schema id 1
            got.append(deserialize(m.value(), SerializationContext("users", MessageField.VALUE)))
    consumer.close()
    assert got == [{"name": f"user-{i}", "age": i} for i in range(10)]
    assert registry.get_subjects() == ["users-value"]
    latest = registry.get_latest_version("users-value")
    assert (latest.version, latest.schema_id) == (1, 1)
    assert json.loads(registry.get_schema(1).schema_str) == USER_V1


def test_registration_compatibility_and_deletes_answer_as_confluent(broker):
    registry = SchemaRegistryClient({"url": broker.http_url})
    assert registry.register_schema("users-value", _avro(USER_V1)) == 1
    assert registry.register_schema("users-value", _avro(USER_V1)) == 1  # the same schema: no new version
    assert registry.register_schema("archive-value", _avro(USER_V1)) == 1  # one id across subjects
    assert registry.test_compatibility("users-value", _avro(USER_V2)) is True
    assert registry.test_compatibility("users-value", _avro(USER_BAD)) is False
    with pytest.raises(SchemaRegistryError) as refused:
        registry.register_schema("users-value", _avro(USER_BAD))
    assert (refused.value.http_status_code, refused.value.error_code) == (409, 409)
    assert registry.register_schema("users-value", _avro(USER_V2)) == 2
    assert registry.get_versions("users-value") == [1, 2]
    found = registry.lookup_schema("users-value", _avro(USER_V1))
    assert (found.version, found.schema_id) == (1, 1)
    assert sorted((v.subject, v.version) for v in registry.get_schema_versions(1)) == \
        [("archive-value", 1), ("users-value", 1)]

    # FORWARD: the latest schema must read what the new one writes (a new field without a
    # default is fine, removing one the old schema needs is not)
    assert registry.set_compatibility("users-value", "FORWARD") == {"compatibility": "FORWARD"}
    assert registry.get_compatibility("users-value") == "FORWARD"
    no_age = {**USER_V1, "fields": [USER_V1["fields"][0]]}
    assert registry.test_compatibility("users-value", _avro(no_age)) is False
    assert registry.set_compatibility(level="NONE") == {"compatibility": "NONE"}  # global
    assert registry.get_compatibility() == "NONE"
    assert _http(broker, "DELETE", "/config/users-value") == (200, {"compatibilityLevel": "FORWARD"})
    assert registry.register_schema("users-value", _avro(USER_BAD)) == 3  # NONE now holds for the subject

    errors = {
        "unknown subject": _http(broker, "GET", "/subjects/nope/versions/1"),
        "unknown version": _http(broker, "GET", "/subjects/users-value/versions/9"),
        "bad version": _http(broker, "GET", "/subjects/users-value/versions/first"),
        "unknown id": _http(broker, "GET", "/schemas/ids/99"),
        "invalid avro": _http(broker, "POST", "/subjects/x/versions", {"schema": '{"type": "recordz"}'}),
        "not json": _http(broker, "POST", "/subjects/x/versions", {"schema": "{"}),
        "bad level": _http(broker, "PUT", "/config", {"compatibility": "SIDEWAYS"}),
        "not soft deleted": _http(broker, "DELETE", "/subjects/archive-value?permanent=true"),
    }
    assert {k: (status, body["error_code"]) for k, (status, body) in errors.items()} == {
        "unknown subject": (404, 40401), "unknown version": (404, 40402), "bad version": (422, 42202),
        "unknown id": (404, 40403), "invalid avro": (422, 42201), "not json": (422, 42201),
        "bad level": (422, 42203), "not soft deleted": (404, 40405)}
    assert errors["unknown subject"][1]["message"] == "Subject 'nope' not found."

    listed = _http(broker, "GET", "/schemas?latestOnly=true")[1]
    assert [(e["subject"], e["version"], e["id"]) for e in listed] == [("archive-value", 1, 1), ("users-value", 3, 3)]
    assert _http(broker, "GET", "/contexts") == (200, ["."])
    assert registry.delete_version("users-value", 2) == 2  # soft
    assert registry.get_versions("users-value") == [1, 3]
    assert registry.delete_subject("archive-value") == [1]
    assert registry.get_subjects() == ["users-value"]
    assert _http(broker, "GET", "/subjects?deleted=true")[1] == ["archive-value", "users-value"]
    assert registry.delete_subject("archive-value", permanent=True) == [1]
    assert _http(broker, "GET", "/subjects?deleted=true")[1] == ["users-value"]
    assert json.loads(registry.get_schema(1).schema_str) == USER_V1  # still a version of users-value


def test_references_types_and_a_restart(broker):
    registry = SchemaRegistryClient({"url": broker.http_url})
    address = {"type": "record", "name": "Address", "namespace": "com.acme",
               "fields": [{"name": "street", "type": "string"}]}
    assert registry.register_schema("address", _avro(address)) == 1
    person = {"type": "record", "name": "Person", "namespace": "com.acme",
              "fields": [{"name": "name", "type": "string"}, {"name": "home", "type": "com.acme.Address"}]}
    with_ref = Schema(json.dumps(person), "AVRO", [SchemaReference("com.acme.Address", "address", 1)])
    assert registry.register_schema("person-value", with_ref) == 2
    missing = Schema(json.dumps(person), "AVRO", [])  # the named type is unknown without the reference
    with pytest.raises(SchemaRegistryError) as invalid:
        registry.register_schema("person-value", missing)
    assert invalid.value.error_code == 42201
    assert _http(broker, "GET", "/subjects/address/versions/1/referencedby") == (200, [2])
    status, body = _http(broker, "DELETE", "/subjects/address")  # still referenced
    assert (status, body["error_code"]) == (422, 42206)
    serialize = AvroSerializer(registry, with_ref, conf={"auto.register.schemas": False, "use.latest.version": True})
    value = serialize({"name": "ada", "home": {"street": "Main"}}, SerializationContext("person", MessageField.VALUE))
    assert AvroDeserializer(registry)(value, SerializationContext("person", MessageField.VALUE)) == \
        {"name": "ada", "home": {"street": "Main"}}

    json_schema = Schema(json.dumps({"type": "object", "properties": {"n": {"type": "integer"}}}), "JSON")
    proto = Schema('syntax = "proto3";\nmessage M { int32 n = 1; }\n', "PROTOBUF")
    assert registry.register_schema("json-value", json_schema) == 3
    assert registry.register_schema("proto-value", proto) == 4
    assert registry.get_schema(4).schema_type == "PROTOBUF"
    assert _http(broker, "GET", "/schemas/types")[1] == ["JSON", "PROTOBUF", "AVRO"]

    broker.restart()
    registry = SchemaRegistryClient({"url": broker.http_url})
    assert registry.get_subjects() == ["address", "json-value", "person-value", "proto-value"]
    assert registry.get_latest_version("person-value").schema_id == 2
    assert registry.register_schema("new-value", _avro(USER_V1)) == 5  # ids go on after the restart


def test_a_sasl_only_broker_asks_the_registry_client_to_authenticate(tmp_path):
    jaas = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret";'
    with BrokerProcess(tmp_path / "data", http_port=0, overrides={"plain.sasl.jaas.config": jaas},
                       listeners={"SASL_PLAINTEXT": 0}) as broker:
        anonymous = SchemaRegistryClient({"url": broker.http_url})
        with pytest.raises(SchemaRegistryError) as refused:
            anonymous.register_schema("users-value", _avro(USER_V1))
        assert refused.value.http_status_code == 401
        alice = SchemaRegistryClient({"url": broker.http_url, "basic.auth.user.info": "alice:alice-secret"})
        assert alice.register_schema("users-value", _avro(USER_V1)) == 1
        wrong = SchemaRegistryClient({"url": broker.http_url, "basic.auth.user.info": "alice:guess"})
        with pytest.raises(SchemaRegistryError) as denied:
            wrong.get_subjects()
        assert denied.value.http_status_code == 401


def test_malformed_requests_get_a_client_error_never_a_server_error(broker):
    """Bodies no client sends (wrong types, bad references, huge or deep schemas, garbage) are
    answered 4xx with Confluent's error shape, and the registry keeps serving."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=20),
                               lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8),
                                                                                            inner, max_size=4),
                               max_leaves=12)
    bodies = st.fixed_dictionaries({}, optional={
        "schema": json_values | st.text(max_size=60) | st.just('{"type":"record","name":"R","fields":[{"x":1}]}'),
        "schemaType": json_values | st.sampled_from(["AVRO", "JSON", "PROTOBUF", "avro", "XML"]),
        "references": json_values | st.lists(st.fixed_dictionaries(
            {"name": json_values, "subject": st.sampled_from(["nope", "users-value"]), "version": json_values}),
            max_size=2),
        "compatibility": json_values})
    paths = st.sampled_from(["/subjects/users-value/versions", "/subjects/users-value",
                             "/compatibility/subjects/users-value/versions/latest", "/config", "/config/users-value",
                             "/subjects/%2F%00/versions", "/subjects/users-value/versions/-7"])

    registry = SchemaRegistryClient({"url": broker.http_url})
    registry.register_schema("users-value", _avro(USER_V1))

    @settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
    @given(path=paths, body=bodies, method=st.sampled_from(["POST", "PUT", "GET", "DELETE"]))
    def check(path, body, method):
        status, answer = _http(broker, method, path, None if method in ("GET", "DELETE") else body)
        assert status < 500, (method, path, body, answer)
        if status >= 400:
            assert set(answer) == {"error_code", "message"}, answer

    check()
    deep = '{"type":"array","items":' * 5000 + '"int"' + "}" * 5000  # deeper than Python's recursion limit
    status, answer = _http(broker, "POST", "/subjects/deep/versions", {"schema": deep})
    assert (status, answer["error_code"]) == (422, 42201)
    fresh = registry.register_schema("after-value", _avro(USER_V2))  # still serving
    assert json.loads(registry.get_schema(fresh).schema_str) == USER_V2


def test_rest_api_writes_and_reads_the_registry_wire_format(broker):
    """The REST API produces AVRO and JSONSCHEMA values with registered schemas, readable by
    confluent-kafka's deserializer, and shows them decoded with ``format=schema``."""
    registry = SchemaRegistryClient({"url": broker.http_url})
    schema = {"type": "record", "name": "Click", "fields": [
        {"name": "page", "type": "string"}, {"name": "ref", "type": ["null", "string"], "default": None}]}
    schema_id = registry.register_schema("clicks-value", _avro(schema))
    json_id = registry.register_schema("events-value", Schema(json.dumps({"type": "object"}), "JSON"))
    _, clusters = _http(broker, "GET", "/v3/clusters")
    base = f"/v3/clusters/{clusters['data'][0]['cluster_id']}/topics"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    for created in admin.create_topics([NewTopic("clicks", 1, 1), NewTopic("events", 1, 1)]).values():
        created.result(30)
    status, report = _http(broker, "POST", f"{base}/clicks/records",
                           {"value": {"type": "AVRO", "data": {"page": "/home", "ref": {"string": "ads"}}}})
    assert status == 200 and report["value"]["type"] == "AVRO", report
    status, report = _http(broker, "POST", f"{base}/clicks/records",
                           {"value": {"type": "AVRO", "schema_id": schema_id, "data": {"page": "/cart", "ref": None}}})
    assert status == 200, report
    status, bad = _http(broker, "POST", f"{base}/clicks/records", {"value": {"type": "AVRO", "data": {"page": 7}}})
    assert (status, bad["error_code"]) == (400, 42207)
    status, _ = _http(broker, "POST", f"{base}/events/records", {"value": {"type": "JSONSCHEMA", "data": {"n": 1}}})
    assert status == 200

    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "rest-avro",
                         "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition("clicks", 0, 0)])
    deserialize = AvroDeserializer(registry)
    got, deadline = [], time.monotonic() + 30
    while len(got) < 2 and time.monotonic() < deadline:
        m = consumer.poll(0.5)
        if m is not None and not m.error():
            got.append(deserialize(m.value(), SerializationContext("clicks", MessageField.VALUE)))
    consumer.close()
    assert got == [{"page": "/home", "ref": "ads"}, {"page": "/cart", "ref": None}]

    _, records = _http(broker, "GET", f"{base}/clicks/partitions/0/records?offset=0&format=schema")
    assert [r["value"] for r in records["data"]] == [
        {"type": "AVRO", "schema_id": schema_id, "data": {"page": "/home", "ref": {"string": "ads"}}},
        {"type": "AVRO", "schema_id": schema_id, "data": {"page": "/cart", "ref": None}}]
    _, records = _http(broker, "GET", f"{base}/events/partitions/0/records?offset=0&format=schema")
    assert records["data"][0]["value"] == {"type": "JSONSCHEMA", "schema_id": json_id, "data": {"n": 1}}


def test_cli_manages_the_registry(broker, tmp_path):
    import subprocess
    import sys

    def litemq(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "litemq.cli", "schema", *args, "--registry-url", broker.http_url],
                              capture_output=True, text=True, timeout=60)

    v1, v2, bad = tmp_path / "v1.avsc", tmp_path / "v2.avsc", tmp_path / "bad.avsc"
    v1.write_text(json.dumps(USER_V1))
    v2.write_text(json.dumps(USER_V2))
    bad.write_text(json.dumps(USER_BAD))
    done = litemq("register", "users-value", str(v1))
    assert done.returncode == 0 and "id 1" in done.stdout, done.stderr
    assert litemq("check", "users-value", str(v2)).stdout.strip() == "compatible"
    refused = litemq("check", "users-value", str(bad))
    assert refused.returncode == 1 and "incompatible" in refused.stderr + refused.stdout
    refused = litemq("register", "users-value", str(bad))
    assert refused.returncode != 0 and "409" in refused.stderr + refused.stdout
    assert litemq("register", "users-value", str(v2)).returncode == 0
    shown = litemq("show", "users-value")
    assert "version 2 id 2 type AVRO" in shown.stdout and '"email"' in shown.stdout
    assert "users-value" in litemq("subjects").stdout and "1,2" in litemq("subjects").stdout
    assert litemq("compatibility", "--subject", "users-value", "--set", "full").stdout.strip() == "users-value: FULL"
    assert litemq("compatibility").stdout.strip() == "global: BACKWARD"
    assert litemq("delete", "users-value", "--version", "1").returncode == 0
    assert json.loads(litemq("show", "users-value", "--version", "2").stdout.split("\n", 1)[1])["name"] == "User"
    missing = litemq("show", "nope")
    assert missing.returncode != 0 and "40401" in missing.stderr + missing.stdout


def test_protobuf_values_round_trip_through_the_registry(broker):
    """confluent-kafka's ProtobufSerializer registers the message's file descriptor (Protobuf
    schemas are stored as given) and its deserializer reads what was produced."""
    from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
    from google.type import date_pb2

    registry = SchemaRegistryClient({"url": broker.http_url})
    ctx = SerializationContext("dates", MessageField.VALUE)
    serialize = ProtobufSerializer(date_pb2.Date, registry, {"use.deprecated.format": False})
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
    for day in (1, 2, 3):
        producer.produce("dates", serialize(date_pb2.Date(year=2026, month=11, day=day), ctx))
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "pb",
                         "auto.offset.reset": "earliest"})
    consumer.subscribe(["dates"])
    deserialize = ProtobufDeserializer(date_pb2.Date, {"use.deprecated.format": False})
    got, deadline = [], time.monotonic() + 30
    while len(got) < 3 and time.monotonic() < deadline:
        m = consumer.poll(0.5)
        if m is not None and not m.error():
            got.append(deserialize(m.value(), ctx).day)
    consumer.close()
    assert sorted(got) == [1, 2, 3]
    latest = registry.get_latest_version("dates-value")
    assert (latest.schema.schema_type, latest.version) == ("PROTOBUF", 1)
