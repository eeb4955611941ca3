"""Golden bytes: kafka-python 3.0.12 as an independent oracle, plus hand-written frames.

kafka-python's hand-written ``kafka.protocol.old`` structs (not generated from Kafka's JSON)
are filled with seeded random values and encoded by kafka-python; LiteMQ must decode them and
re-encode the exact same bytes. Hand-written byte strings follow the Kafka protocol guide.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import random
import uuid

import pytest

import kafka.protocol.old as kold
from kafka.protocol.old import types as kt
from kafka.protocol.old.api import Request, Response
from litemq.protocol.frames import decode_request_header, decode_response, encode_request, encode_response
from litemq.protocol.messages import API_KEYS, api_name, request_spec, response_spec


def _old_classes():
    found = {}
    for m in pkgutil.iter_modules(kold.__path__):
        mod = importlib.import_module("kafka.protocol.old." + m.name)
        for c in vars(mod).values():
            if (
                inspect.isclass(c)
                and issubclass(c, (Request, Response))
                and c not in (Request, Response)
                and isinstance(getattr(c, "API_VERSION", None), int)
                and not inspect.isabstract(c)
            ):
                found[(c.API_KEY, issubclass(c, Request), c.API_VERSION)] = c
    return [found[k] for k in sorted(found)]


_INT = {kt.Int8: 7, kt.Int16: 15, kt.Int32: 31, kt.Int64: 63}


def _rand_value(t, rnd: random.Random, depth: int = 0):
    """A random value for kafka-python old type ``t`` (never null)."""
    if isinstance(t, kt.Schema):
        return tuple(_rand_value(f, rnd, depth + 1) for f in t.fields)
    if isinstance(t, kt.Array):  # includes CompactArray
        n = rnd.randint(0, 3 if depth < 3 else 1)
        return [_rand_value(t.array_of, rnd, depth + 1) for _ in range(n)]
    if isinstance(t, kt.String):  # includes CompactString
        return "".join(rnd.choice("abcxyz-_.é") for _ in range(rnd.randint(0, 6)))
    if t is kt.TaggedFields:
        return {}
    if t in _INT:
        bits = _INT[t]
        return rnd.choice([0, -1, 1, -(2**bits), 2**bits - 1, rnd.randint(-(2**bits), 2**bits - 1)])
    if t is kt.Boolean:
        return rnd.random() < 0.5
    if t in (kt.Bytes, kt.CompactBytes):
        return rnd.randbytes(rnd.randint(0, 10))
    if t is kt.UUID:
        return uuid.UUID(int=rnd.getrandbits(128))
    if t is kt.Float64:
        return rnd.uniform(-1e6, 1e6)
    if t is kt.BitField:
        return {rnd.randint(0, 30) for _ in range(rnd.randint(1, 3))}
    raise AssertionError(f"no generator for {t!r}")


OLD = _old_classes()

# kafka-python 3.0.12 bugs found by this test (its structs disagree with Kafka's schemas).
KAFKA_PYTHON_BUGS = {
    "DescribeAclsRequest_v2": "reuses the non-flexible v1 schema for flexible v2",
    "DescribeAclsResponse_v2": "reuses the non-flexible v1 schema for flexible v2",
    "DescribeLogDirsRequest_v0": "Partitions is INT32 instead of ARRAY(INT32)",
}


@pytest.mark.parametrize("cls", OLD, ids=[c.__name__ for c in OLD])
def test_kafka_python_old_structs_decode_and_reencode_byte_equal(cls):
    if cls.__name__ in KAFKA_PYTHON_BUGS:
        pytest.skip("kafka-python bug: " + KAFKA_PYTHON_BUGS[cls.__name__])
    is_req = issubclass(cls, Request)
    spec = (request_spec if is_req else response_spec)(cls.API_KEY)
    v = cls.API_VERSION
    rnd = random.Random(f"{cls.__name__}")
    for _ in range(4):
        values = _rand_value(cls.SCHEMA, rnd)
        data = cls(*values).encode()
        msg, end = spec.decode(data, v)
        assert end == len(data), f"{spec.name} v{v} consumed {end} of {len(data)}"
        assert spec.encode(msg, v) == data
        # and kafka-python reads our encoding of the decoded object (its ApiVersionsResponse
        # decoder switches to v0 on a non-zero error code, a client-side quirk)
        if not (cls.API_KEY == 18 and not is_req and msg.error_code != 0):
            assert cls.decode(spec.encode(msg, v)).encode() == data


def test_old_struct_coverage():
    assert len(OLD) > 200
    keys = {c.API_KEY for c in OLD}
    for name in ("Produce", "Fetch", "ListOffsets", "Metadata", "OffsetCommit", "OffsetFetch",
                 "FindCoordinator", "JoinGroup", "Heartbeat", "SyncGroup", "ApiVersions", "InitProducerId"):
        assert API_KEYS[name] in keys


# ----------------------------------------------------------------------------- field checks


def test_kafka_python_metadata_request_fields():
    from kafka.protocol.old.metadata import MetadataRequest

    data = MetadataRequest[1](topics=["a", "bc"]).encode()
    msg, _ = request_spec(3).decode(data, 1)
    assert [t.name for t in msg.topics] == ["a", "bc"]
    data = MetadataRequest[4](topics=None, allow_auto_topic_creation=False).encode()
    msg, _ = request_spec(3).decode(data, 4)
    assert msg.topics is None and msg.allow_auto_topic_creation is False


def test_kafka_python_produce_request_fields():
    from kafka.protocol.old.produce import ProduceRequest

    batch = bytes(range(70))
    data = ProduceRequest[7](
        transactional_id=None, required_acks=-1, timeout=1500, topics=[("t1", [(3, batch)])]
    ).encode()
    msg, end = request_spec(0).decode(data, 7)
    assert end == len(data)
    assert (msg.transactional_id, msg.acks, msg.timeout_ms) == (None, -1, 1500)
    part = msg.topic_data[0].partition_data[0]
    assert msg.topic_data[0].name == "t1" and part.index == 3
    assert isinstance(part.records, bytearray) and part.records == batch


def test_kafka_python_fetch_request_fields():
    from kafka.protocol.old.fetch import FetchRequest

    cls = FetchRequest[10]
    data = cls(-1, 500, 1, 1 << 20, 1, 7, 3, [("topic", [(0, 5, 100, 0, 65536)])], [("gone", [1, 2])]).encode()
    msg, _ = request_spec(1).decode(data, 10)
    assert (msg.replica_id, msg.max_wait_ms, msg.min_bytes, msg.max_bytes) == (-1, 500, 1, 1 << 20)
    assert (msg.isolation_level, msg.session_id, msg.session_epoch) == (1, 7, 3)
    p = msg.topics[0].partitions[0]
    assert (msg.topics[0].topic, p.partition, p.current_leader_epoch, p.fetch_offset) == ("topic", 0, 5, 100)
    assert (p.log_start_offset, p.partition_max_bytes) == (0, 65536)
    assert msg.forgotten_topics_data[0].topic == "gone" and msg.forgotten_topics_data[0].partitions == [1, 2]
    assert msg.rack_id == ""  # v11+ only: default


def test_kafka_python_api_versions_response_reads_ours():
    from kafka.protocol.old.api_versions import ApiVersionsResponse

    body = {
        "error_code": 0,
        "api_keys": [{"api_key": 0, "min_version": 0, "max_version": 11}, {"api_key": 18, "min_version": 0, "max_version": 4}],
        "throttle_time_ms": 0,
    }
    for v in (0, 1, 2, 3):
        data = response_spec(18).encode(body, v)
        got = ApiVersionsResponse[v].decode(data)
        assert got.error_code == 0
        assert [tuple(x)[:3] for x in got.api_keys] == [(0, 0, 11), (18, 0, 4)]


def test_kafka_python_new_json_messages_agree():
    """kafka-python's newer JSON-driven classes (a second, independent generator)."""
    from kafka.protocol.metadata import MetadataRequest

    req = MetadataRequest[12](
        topics=[MetadataRequest.MetadataRequestTopic(name="x")],
        allow_auto_topic_creation=True,
        include_topic_authorized_operations=False,
    )
    data = bytes(req.encode())
    msg, end = request_spec(3).decode(data, 12)
    assert end == len(data)
    assert msg.topics[0].name == "x" and msg.allow_auto_topic_creation is True
    assert request_spec(3).encode(msg, 12) == data


# ----------------------------------------------------------------------------- hand-written bytes


def test_api_versions_v0_request_frame_by_hand():
    # size=10? header v1: api_key=18, api_version=0, correlation_id=1, client_id="ab"; empty body
    frame = b"\x00\x12\x00\x00\x00\x00\x00\x01\x00\x02ab"
    hdr, off = decode_request_header(frame)
    assert (hdr.api_key, hdr.api_version, hdr.correlation_id, hdr.client_id) == (18, 0, 1, "ab")
    msg, end = request_spec(18).decode(frame, 0, off)
    assert end == len(frame)
    assert encode_request(18, 0, 1, "ab", {}) == len(frame).to_bytes(4, "big") + frame


def test_api_versions_v3_request_frame_by_hand():
    # header v2 (client id stays INT16-prefixed, then empty tagged fields), body with compact
    # strings "librdkafka" / "2.16.1" and an empty tagged-field section (KIP-511).
    body = b"\x0blibrdkafka\x072.16.1\x00"
    frame = b"\x00\x12\x00\x03\x00\x00\x00\x02\x00\x07rdkafka\x00" + body
    hdr, off = decode_request_header(frame)
    assert (hdr.api_key, hdr.api_version, hdr.correlation_id, hdr.client_id) == (18, 3, 2, "rdkafka")
    assert hdr.header_version == 2 and off == len(frame) - len(body)
    msg, end = request_spec(18).decode(frame, 3, off)
    assert (msg.client_software_name, msg.client_software_version) == ("librdkafka", "2.16.1")
    assert end == len(frame)
    assert encode_request(18, 3, 2, "rdkafka", msg)[4:] == frame


def test_api_versions_v3_response_uses_header_v0():
    body = {"error_code": 0, "api_keys": [{"api_key": 18, "min_version": 0, "max_version": 4}], "throttle_time_ms": 0}
    parts = encode_response(9, 18, 3, body)
    data = b"".join(parts)
    # size, correlation id, NO tagged-field byte, error_code, compact array of 1, entry+tags,
    # throttle, body tags
    expected_body = b"\x00\x00" + b"\x02" + b"\x00\x12\x00\x00\x00\x04\x00" + b"\x00\x00\x00\x00" + b"\x00"
    assert data == (4 + len(expected_body)).to_bytes(4, "big") + b"\x00\x00\x00\x09" + expected_body
    corr, msg = decode_response(18, 3, data[4:])
    assert corr == 9 and msg.api_keys[0].max_version == 4


def test_tagged_fields_by_hand():
    # FetchResponse v12 partition with CurrentLeader (tag 1) = LeaderIdAndEpoch(leader 2, epoch 5)
    spec = response_spec(1)
    body = {"responses": [{"topic": "t", "partitions": [{"partition_index": 0, "current_leader": {"leader_id": 2, "leader_epoch": 5}}]}]}
    data = spec.encode(body, 12)
    tagged = b"\x01" + b"\x01" + b"\x09" + b"\x00\x00\x00\x02\x00\x00\x00\x05\x00"
    assert tagged in data
    msg, _ = spec.decode(data, 12)
    p = msg.responses[0].partitions[0]
    assert (p.current_leader.leader_id, p.current_leader.leader_epoch) == (2, 5)
    assert p.diverging_epoch.epoch == -1  # untouched tagged struct keeps its defaults
    # an unknown tag (7) is skipped
    patched = data.replace(tagged, b"\x02\x01\x09\x00\x00\x00\x02\x00\x00\x00\x05\x00\x07\x02zz")
    msg2, end = spec.decode(patched, 12)
    assert end == len(patched) and msg2 == msg


def test_api_names():
    assert API_KEYS["Produce"] == 0 and api_name(0) == "Produce"
    assert API_KEYS["ApiVersions"] == 18 and api_name(3) == "Metadata"
    with pytest.raises(KeyError):
        request_spec(9999)
    with pytest.raises(KeyError):
        api_name(-5)
