"""Request/response frames and headers, encode_parts with FileRegions, the public API shape."""

from __future__ import annotations

import struct
import uuid

import pytest

from litemq import limits
from litemq.protocol.errors import DecodeError
from litemq.protocol.frames import (
    RequestHeader,
    decode_request_header,
    decode_response,
    encode_request,
    encode_response,
    request_header_version,
    response_header_version,
)
from litemq.protocol.messages import API_KEYS, request_spec, response_spec
from litemq.protocol.regions import FileRegion, RecordsParts


def test_header_versions():
    assert request_header_version(0, 8) == 1 and request_header_version(0, 9) == 2
    assert request_header_version(7, 0) == 0 and request_header_version(7, 1) == 1
    assert request_header_version(18, 3) == 2
    assert request_header_version(9999, 0) == 1 and request_header_version(0, 99) == 1
    assert response_header_version(18, 3) == 0  # ApiVersions: always v0
    assert response_header_version(3, 9) == 1 and response_header_version(3, 8) == 0


def test_request_header_v1_and_v2_roundtrip():
    for key, ver in [(0, 7), (0, 9), (3, 12), (1, 16), (18, 0), (18, 4)]:
        frame = encode_request(key, ver, 42, "my-client", {})
        assert struct.unpack(">i", frame[:4])[0] == len(frame) - 4
        hdr, off = decode_request_header(frame[4:])
        assert hdr == RequestHeader(key, ver, 42, "my-client", request_header_version(key, ver))
        msg, end = request_spec(key).decode(frame[4:], ver, off)
        assert end == len(frame) - 4
    hdr, _ = decode_request_header(encode_request(3, 1, 5, None, {})[4:])
    assert hdr.client_id is None


def test_controlled_shutdown_v0_header_has_no_client_id():
    frame = encode_request(7, 0, 3, "ignored", {"broker_id": 5})[4:]
    hdr, off = decode_request_header(frame)
    assert off == 8 and hdr.client_id is None and hdr.header_version == 0
    assert request_spec(7).decode(frame, 0, off)[0].broker_id == 5


def test_unknown_api_key_and_unsupported_version_parse_as_v1():
    frame = struct.pack(">hhih", 999, 3, 77, 2) + b"cl" + b"garbage"
    hdr, off = decode_request_header(frame)
    assert (hdr.api_key, hdr.api_version, hdr.correlation_id, hdr.client_id) == (999, 3, 77, "cl")
    assert off == 12
    frame = struct.pack(">hhih", 18, 127, 78, -1) + b"\x00\x00"  # ApiVersions v127
    hdr, off = decode_request_header(frame)
    assert (hdr.api_key, hdr.api_version, hdr.correlation_id, hdr.client_id, off) == (18, 127, 78, None, 10)
    with pytest.raises(DecodeError):
        decode_request_header(struct.pack(">hhi", 999, 0, 1))  # no client id at all
    with pytest.raises(DecodeError):
        decode_request_header(b"\x00\x12\x00")


def test_client_id_bounds(monkeypatch):
    monkeypatch.setattr(limits, "MAX_CLIENT_ID_BYTES", 10)
    with pytest.raises(DecodeError, match="limit"):
        decode_request_header(struct.pack(">hhih", 18, 0, 1, 11) + b"x" * 11)
    with pytest.raises(DecodeError, match="bytes left"):
        decode_request_header(struct.pack(">hhih", 18, 0, 1, 10) + b"abc")
    with pytest.raises(DecodeError):
        decode_request_header(struct.pack(">hhih", 18, 0, 1, -2))
    with pytest.raises(DecodeError):  # v2 header with broken tagged fields
        decode_request_header(struct.pack(">hhih", 18, 3, 1, 0) + b"\x01\x00\x09")


def test_trailing_bytes_tolerated_like_librdkafka_metadata():
    frame = encode_request(3, 12, 1, "rdkafka", {"topics": None, "allow_auto_topic_creation": True})[4:]
    frame += b"\x00\x00\x00\x00"
    hdr, off = decode_request_header(frame)
    msg, end = request_spec(3).decode(frame, 12, off)
    assert msg.topics is None and end == len(frame) - 4


def test_encode_response_with_file_regions_and_decode_response(tmp_path):
    (tmp_path / "seg").write_bytes(b"0123456789")
    f = open(tmp_path / "seg", "rb")  # noqa: SIM115 - closed below
    try:
        _check_file_regions(f)
    finally:
        f.close()


def _check_file_regions(f):
    rec = RecordsParts([b"AB", FileRegion(f, 2, 3), FileRegion(f, 5, 2), b"Z"])
    body = {
        "responses": [
            {
                "topic": "t",
                "topic_id": uuid.UUID(int=5),
                "partitions": [{"partition_index": 0, "high_watermark": 10, "records": rec},
                               {"partition_index": 1, "records": b"xyz"}],
            }
        ]
    }
    for v in (4, 12, 13, 16):
        parts = encode_response(17, 1, v, body)
        assert [type(p) for p in parts] == [bytes, FileRegion, FileRegion, bytes]
        joined = b"".join(p.read() if isinstance(p, FileRegion) else p for p in parts)
        assert struct.unpack(">i", joined[:4])[0] == len(joined) - 4
        assert joined == encode_request_like_response(v, body)
        corr, msg = decode_response(1, v, joined[4:])
        assert corr == 17
        p0, p1 = msg.responses[0].partitions
        assert p0.records == b"AB234" + b"56" + b"Z" and p1.records == b"xyz"
        assert (msg.responses[0].topic if v < 13 else msg.responses[0].topic_id) == ("t" if v < 13 else uuid.UUID(int=5))


def encode_request_like_response(v, body):
    data = response_spec(1).encode(body, v)
    head = struct.pack(">i", 17) + (b"\x00" if v >= 12 else b"")
    return struct.pack(">i", len(head) + len(data)) + head + data


def test_encode_parts_merges_and_plain_bytes():
    spec = response_spec(1)
    parts = spec.encode_parts({"responses": []}, 11)
    assert len(parts) == 1 and isinstance(parts[0], bytes)
    assert parts[0] == spec.encode({"responses": []}, 11)


def test_api_shape_and_defaults():
    spec = request_spec(API_KEYS["Fetch"])
    assert (spec.api_key, spec.name, spec.min_version, spec.max_version) == (1, "FetchRequest", 0, 17)
    assert spec.flexible_min_version == 12 and spec.is_flexible(12) and not spec.is_flexible(11)
    assert request_spec(API_KEYS["ControlledShutdown"]).flexible_min_version == 3
    msg, _ = spec.decode(spec.encode({"max_wait_ms": 100}, 3), 3)
    assert msg.max_wait_ms == 100
    assert msg.rack_id == "" and msg.replica_id == -1 and msg.isolation_level == 0  # defaults
    assert msg.cluster_id is None  # tagged, nullable default null
    meta = response_spec(3).cls()
    assert meta.cluster_id is None and meta.throttle_time_ms == 0
    t = response_spec(3).cls.MetadataResponseTopic()
    assert t.is_internal is False and t.topic_id == uuid.UUID(int=0)
    assert not hasattr(t, "__dict__")


def test_encode_rejects_unknown_keys_and_bad_values():
    with pytest.raises(ValueError, match="unknown field"):
        response_spec(3).encode({"brokerz": []}, 1)
    with pytest.raises(ValueError):
        response_spec(3).encode({"throttle_time_ms": 2**40}, 3)
    with pytest.raises(ValueError):
        request_spec(0).encode({"topic_data": None}, 3)
    with pytest.raises(ValueError):
        request_spec(0).encode({}, 99)
    with pytest.raises(DecodeError):
        request_spec(0).decode(b"", 99)


def test_fields_absent_in_version_are_skipped_on_encode():
    spec = response_spec(3)
    body = {"throttle_time_ms": 5, "cluster_id": "c", "controller_id": 1, "brokers": [], "topics": []}
    assert spec.encode(body, 0) == b"\x00\x00\x00\x00" * 2
    msg, _ = spec.decode(spec.encode(body, 2), 2)
    assert (msg.throttle_time_ms, msg.cluster_id, msg.controller_id) == (0, "c", 1)


def test_records_decode_to_owned_bytearray():
    buf = bytearray(encode_request(0, 3, 1, "c", {"acks": 1, "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": b"batch"}]}]})[4:])
    hdr, off = decode_request_header(memoryview(buf))
    msg, _ = request_spec(0).decode(memoryview(buf), 3, off)
    rec = msg.topic_data[0].partition_data[0].records
    assert isinstance(rec, bytearray) and rec == b"batch"
    buf[-5:] = b"XXXXX"
    del buf[:]  # the receive buffer can be reused/resized: no export is held
    assert rec == b"batch"


def test_data_spec_consumer_protocol_subscription():
    from litemq.protocol.messages import data_spec

    spec = data_spec("ConsumerProtocolSubscription")
    data = spec.encode({"topics": ["a", "b"], "user_data": b"u", "owned_partitions": [{"topic": "a", "partitions": [0, 1]}]}, 1)
    msg, end = spec.decode(data, 1)
    assert end == len(data) and msg.topics == ["a", "b"] and msg.owned_partitions[0].partitions == [0, 1]
    with pytest.raises(KeyError):
        data_spec("../etc/passwd")
